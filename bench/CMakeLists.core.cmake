if(TARGET al_core)
  add_executable(core_step_bench ${CMAKE_CURRENT_LIST_DIR}/core_step_bench.cc)
  target_link_libraries(core_step_bench PRIVATE al_core benchmark::benchmark)
endif()
