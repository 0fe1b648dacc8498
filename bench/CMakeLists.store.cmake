if(TARGET al_store)
  add_executable(store_bench ${CMAKE_CURRENT_LIST_DIR}/store_bench.cc)
  target_link_libraries(store_bench PRIVATE al_store benchmark::benchmark)
endif()
