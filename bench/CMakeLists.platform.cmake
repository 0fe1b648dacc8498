# What the machine charges for page faults, munmap, CPUID, threads and
# process spawns: the costs under the whole-process figures (docs/bench/cli.md).
add_executable(platform_costs_bench ${CMAKE_CURRENT_LIST_DIR}/platform_costs_bench.cc)
target_link_libraries(platform_costs_bench PRIVATE benchmark::benchmark Threads::Threads)
