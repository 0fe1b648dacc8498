# The `agentloop serve` scale benchmark (docs/BENCHMARKS.md, "Server at
# scale"): an event-driven fake model server in its own process, driven by
# bench/serve/serve_scale.sh with the load client bench/serve/load_client.py.
if(TARGET al_server)
  add_executable(bench_fake_model ${CMAKE_CURRENT_LIST_DIR}/serve/fake_model.cc)
  target_link_libraries(bench_fake_model PRIVATE Boost::headers Threads::Threads)
  al_set_warnings(bench_fake_model)
endif()
# Memory per turn in flight and CPU per turn start, in one process: the
# engine driven as the server drives it, against a model that never answers.
if(TARGET al_engine)
  add_executable(turn_start_bench ${CMAKE_CURRENT_LIST_DIR}/serve/turn_start_bench.cc)
  target_link_libraries(turn_start_bench PRIVATE al_engine benchmark::benchmark Boost::headers
                                                 Threads::Threads)
  al_set_warnings(turn_start_bench)
endif()
