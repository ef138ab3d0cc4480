# Finds DGPS's third-party dependencies. Header-only libraries may also come from
# ${PROJECT_SOURCE_DIR}/.deps/include (staged by scripts/stage_device_deps.sh for machines
# without the Debian packages, such as the GPU machine).

set(DGPS_EXTRA_INCLUDE "${PROJECT_SOURCE_DIR}/.deps/include")

find_package(yaml-cpp REQUIRED)
if(TARGET yaml-cpp::yaml-cpp)
  set(DGPS_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(DGPS_YAML_TARGET yaml-cpp)
endif()

find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  if(EXISTS "${DGPS_EXTRA_INCLUDE}/nlohmann/json.hpp")
    add_library(nlohmann_json_dgps INTERFACE)
    target_include_directories(nlohmann_json_dgps SYSTEM INTERFACE "${DGPS_EXTRA_INCLUDE}")
    add_library(nlohmann_json::nlohmann_json ALIAS nlohmann_json_dgps)
  else()
    message(FATAL_ERROR "nlohmann-json not found: run scripts/install_deps.sh")
  endif()
endif()

find_package(CLI11 QUIET CONFIG)
if(NOT TARGET CLI11::CLI11)
  find_path(DGPS_CLI11_INCLUDE CLI/CLI.hpp HINTS "${DGPS_EXTRA_INCLUDE}")
  if(NOT DGPS_CLI11_INCLUDE)
    message(FATAL_ERROR "CLI11 not found: run scripts/install_deps.sh")
  endif()
  add_library(CLI11_dgps INTERFACE)
  target_include_directories(CLI11_dgps SYSTEM INTERFACE "${DGPS_CLI11_INCLUDE}")
  add_library(CLI11::CLI11 ALIAS CLI11_dgps)
endif()

if(DGPS_ENABLE_TESTS)
  find_package(GTest REQUIRED)
endif()

if(DGPS_ENABLE_RUNTIME)
  find_package(CUDAToolkit 12.0 REQUIRED)
endif()
