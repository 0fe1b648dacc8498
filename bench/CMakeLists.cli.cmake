# Whole-process benchmarks of the `agentloop` command: a script, not a
# Google Benchmark program (docs/bench/cli.md). `cmake --build B --target
# bench_cli` runs it against the binaries of this build.
if(TARGET agentloop AND TARGET agentloop-fake-server)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_custom_target(bench_cli
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/cli/cli_bench.py
              --bin $<TARGET_FILE:agentloop>
              --fake-server $<TARGET_FILE:agentloop-fake-server>
              --examples ${PROJECT_SOURCE_DIR}/examples
      DEPENDS agentloop agentloop-fake-server
      USES_TERMINAL
      COMMENT "agentloop whole-process benchmarks")
  endif()
endif()
