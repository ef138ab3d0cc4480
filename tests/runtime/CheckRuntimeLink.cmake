# cmake -DCLOSURE=<file> -P CheckRuntimeLink.cmake
# The deployment library's link interface holds no authoring code: everything a program linking only
# dgps_runtime links (CLOSURE: the transitive link closure, written at configure time by
# tests/runtime/CMakeLists.txt) must exclude dgps_dsl (float64 reference, safetensors, command-line tools)
# and MLIR/LLVM.
file(READ "${CLOSURE}" closure)
foreach(forbidden dgps_dsl MLIR LLVM dgps_emit dgps_ir)
  if(";${closure};" MATCHES ";[^;]*${forbidden}[^;]*;")
    message(FATAL_ERROR "a program linking only dgps_runtime also links ${forbidden} (link closure: ${closure}); "
                        "dgps_runtime must depend on dgps_spec, not dgps_dsl (runtime/CMakeLists.txt)")
  endif()
endforeach()
if(NOT ";${closure};" MATCHES ";dgps_spec;")
  message(FATAL_ERROR "expected dgps_spec in dgps_runtime's link closure, got: ${closure}")
endif()
message(STATUS "dgps_runtime links: ${closure}")
