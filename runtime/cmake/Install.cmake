# Installs the runtime as a CMake package: find_package(dgps) gives dgps::runtime, dgps::spec and dgps::dsl
# (and dgps::tuning when it is built), with their headers, the tools and dgpsConfig.cmake.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DGPS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dgps)
set(DGPS_EXPORT_TARGETS dgps_runtime dgps_spec dgps_dsl)
set_target_properties(dgps_dsl PROPERTIES EXPORT_NAME dsl)
if(TARGET dgps_tuning)
  set_target_properties(dgps_tuning PROPERTIES EXPORT_NAME tuning)
  list(APPEND DGPS_EXPORT_TARGETS dgps_tuning)
endif()
if(TARGET dgps_tune)
  list(APPEND DGPS_EXPORT_TARGETS dgps_tune)  # dgps::tune: tunePackage, TuningResolver (issue 5)
endif()

# nlohmann-json may come from .deps/include (GPU machine) as a plain INTERFACE target whose include
# folder is inside the source tree; install a copy of the headers and point the exported target there.
set(DGPS_BUNDLED_JSON OFF)
if(TARGET nlohmann_json_dgps)
  set(DGPS_BUNDLED_JSON ON)
  set_target_properties(nlohmann_json_dgps PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "$<BUILD_INTERFACE:${DGPS_EXTRA_INCLUDE}>;$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/dgps/third_party>"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES
      "$<BUILD_INTERFACE:${DGPS_EXTRA_INCLUDE}>;$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/dgps/third_party>"
    EXPORT_NAME nlohmann_json_bundled)
  list(APPEND DGPS_EXPORT_TARGETS nlohmann_json_dgps)
  install(DIRECTORY ${DGPS_EXTRA_INCLUDE}/nlohmann DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dgps/third_party)
endif()

install(TARGETS ${DGPS_EXPORT_TARGETS}
  EXPORT dgpsTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/dsl/include/dgps DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/dgps DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
# The device headers are embedded in the library; they are installed too for readers of kernels.cu.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/device/dgps DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
install(EXPORT dgpsTargets NAMESPACE dgps:: DESTINATION ${DGPS_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dgpsConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dgpsConfig.cmake
  INSTALL_DESTINATION ${DGPS_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dgpsConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dgpsConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dgpsConfigVersion.cmake
  DESTINATION ${DGPS_INSTALL_CMAKEDIR})
