# Installs the build into a scratch prefix and checks what a user gets:
#   bin/<tool> for every tool in TOOLS (comma-separated: the ones this build configured);
#   share/dgps/specs/<every specs/*.yaml of the source tree>;
#   share/dgps/generated/<every package of generated/>/{kernels.cu, manifest.yaml, spec.yaml};
#   every installed tool runs `--help` from the prefix (its shared libraries resolve);
#   `bin/dgps-spec check share/dgps/specs/<spec>` succeeds for every installed spec, and, where dgpsc is
#   installed, `bin/dgpsc check` on one of them.
#   cmake -DBUILD=<build dir> -DSRC=<source dir> -DWORK=<scratch dir> -DTOOLS=a,b,c -P InstallToolsTest.cmake
cmake_minimum_required(VERSION 3.22)  # IN_LIST, and the policies of the main build
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(prefix "${WORK}/prefix")

execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --prefix ${prefix} failed (${rc}):\n${out}\n${err}")
endif()

set(missing "")
string(REPLACE "," ";" tools "${TOOLS}")
foreach(tool IN LISTS tools)
  if(NOT EXISTS "${prefix}/bin/${tool}")
    list(APPEND missing "bin/${tool}")
  endif()
endforeach()

file(GLOB specs RELATIVE "${SRC}/specs" "${SRC}/specs/*.yaml")
if(NOT specs)
  message(FATAL_ERROR "the source tree ${SRC}/specs holds no spec: nothing to check")
endif()
foreach(spec IN LISTS specs)
  if(NOT EXISTS "${prefix}/share/dgps/specs/${spec}")
    list(APPEND missing "share/dgps/specs/${spec}")
  endif()
endforeach()

file(GLOB manifests "${SRC}/generated/*/manifest.yaml")
foreach(manifest IN LISTS manifests)
  get_filename_component(pkg_dir "${manifest}" DIRECTORY)
  get_filename_component(pkg "${pkg_dir}" NAME)
  foreach(f kernels.cu manifest.yaml spec.yaml)
    if(NOT EXISTS "${prefix}/share/dgps/generated/${pkg}/${f}")
      list(APPEND missing "share/dgps/generated/${pkg}/${f}")
    endif()
  endforeach()
endforeach()

if(missing)
  string(REPLACE ";" "\n  " list "${missing}")
  message(FATAL_ERROR "the install into ${prefix} lacks:\n  ${list}")
endif()
list(LENGTH specs nspecs)
list(LENGTH manifests npkgs)
message(STATUS "installed: ${TOOLS}; ${nspecs} specs; ${npkgs} packages")

# Every installed tool starts from the prefix (its shared libraries resolve there), e.g. dgpsc's libMLIR.
foreach(tool IN LISTS tools)
  if(tool STREQUAL "dgps-tune-trial")
    continue()  # spawned by dgps-tune with a protocol on its pipes, not a command-line tool
  endif()
  execute_process(COMMAND "${prefix}/bin/${tool}" --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installed ${tool} --help failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()

foreach(spec IN LISTS specs)
  execute_process(COMMAND "${prefix}/bin/dgps-spec" check "${prefix}/share/dgps/specs/${spec}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "\\.yaml$" "" name "${spec}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${name}")
    message(FATAL_ERROR "installed dgps-spec check ${spec} failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "installed dgps-spec check: every installed spec is valid")

if("dgpsc" IN_LIST tools)
  list(GET specs 0 first)
  execute_process(COMMAND "${prefix}/bin/dgpsc" check "${prefix}/share/dgps/specs/${first}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installed dgpsc check ${first} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "installed dgpsc check ${first}: ok")
endif()
