if(TARGET al_store)
  add_executable(store_bench ${CMAKE_CURRENT_LIST_DIR}/store_bench.cc)
  target_link_libraries(store_bench PRIVATE al_store benchmark::benchmark)
endif()
if(TARGET al_store)
  # The PostgreSQL store's figures: starts its own throwaway cluster.
  add_executable(pg_store_bench ${CMAKE_CURRENT_LIST_DIR}/pg_store_bench.cc
                                ${PROJECT_SOURCE_DIR}/src/store/pg_test_cluster.cc)
  target_link_libraries(pg_store_bench PRIVATE al_store)
  # libpq's header only: the store opens the library at run time.
  pkg_check_modules(LIBPQ REQUIRED libpq)
  target_include_directories(pg_store_bench PRIVATE ${LIBPQ_INCLUDE_DIRS})
endif()
