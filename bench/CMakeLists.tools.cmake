# grep_cli: runs the grep and glob tools outside the engine, for
# bench/scripts/tools_bench.py (comparison with ripgrep).
if(TARGET al_tools)
  add_executable(grep_cli ${CMAKE_CURRENT_LIST_DIR}/grep_cli.cc)
  target_link_libraries(grep_cli PRIVATE al_tools)
endif()
