# Installs the build into a scratch prefix and builds examples/host_app against it with nothing but
# find_package(dgps): proves the installed CMake package (dgpsConfig.cmake, exported targets, headers)
# is complete. Then runs the app (on a machine without a GPU it opens the package, says so and exits 77).
#   cmake -DBUILD=<build dir> -DSRC=<source dir> -DWORK=<scratch dir> -DPACKAGE=<package dir or ""> -P ...
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(prefix "${WORK}/prefix")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  # 77: dgps-host-app's "no usable GPU, nothing was run" (only accepted where allowed).
  if(rc EQUAL 77 AND ALLOW_NO_GPU)
    message(STATUS "${what}: skipped, no usable GPU: ${err}")
    set(last_output "${out}" PARENT_SCOPE)
    return()
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}")
foreach(f lib/cmake/dgps/dgpsConfig.cmake lib/cmake/dgps/dgpsTargets.cmake include/dgps/runtime/Runtime.h
          include/dgps/dsl/Spec.h include/dgps/device/abi.h)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "installed package lacks ${f}")
  endif()
endforeach()
set(gen "")
find_program(NINJA ninja)
if(NINJA)
  set(gen -G Ninja)
endif()
run_step("configure host_app against the installed package"
  ${CMAKE_COMMAND} -S "${SRC}/examples/host_app" -B "${WORK}/app" ${gen} -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_PREFIX_PATH=${prefix}")
run_step("build host_app" ${CMAKE_COMMAND} --build "${WORK}/app")
run_step("run host_app --help" "${WORK}/app/dgps-host-app" --help)
if(PACKAGE)
  set(ALLOW_NO_GPU TRUE)
  run_step("run host_app on ${PACKAGE}" "${WORK}/app/dgps-host-app" "${PACKAGE}" --tokens 300)
  message(STATUS "${last_output}")
endif()
