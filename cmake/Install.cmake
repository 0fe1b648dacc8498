# `cmake --install`: the public headers, the module archives and a CMake
# package, so that `find_package(agentloop)` gives agentloop::agentloop (the
# engine with everything it links) and agentloop::<module>. See
# docs/embedding.md; examples/embed builds against it.
include(CMakePackageConfigHelpers)

get_property(al_module_targets GLOBAL PROPERTY AL_MODULE_TARGETS)
if(NOT TARGET al_engine)
  # A partial build (AL_ONLY_MODULES) has no engine to offer.
  return()
endif()

add_library(al_agentloop INTERFACE)
target_link_libraries(al_agentloop INTERFACE al_engine)
set_target_properties(al_agentloop PROPERTIES EXPORT_NAME agentloop)
add_library(agentloop::agentloop ALIAS al_agentloop)

# The third-party wrappers the modules link are part of the export too.
set_target_properties(al_dep_toml PROPERTIES EXPORT_NAME dep_toml)
set_target_properties(al_dep_re2 PROPERTIES EXPORT_NAME dep_re2)

install(TARGETS ${al_module_targets} al_agentloop al_dep_toml al_dep_re2
        EXPORT agentloopTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/agentloop
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(al_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/agentloop)
install(EXPORT agentloopTargets NAMESPACE agentloop:: DESTINATION ${al_cmake_dir})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/agentloopConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/agentloopConfig.cmake
                              INSTALL_DESTINATION ${al_cmake_dir})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/agentloopConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/agentloopConfig.cmake
              ${PROJECT_BINARY_DIR}/agentloopConfigVersion.cmake
        DESTINATION ${al_cmake_dir})
