// What the machine charges for the operations a process start and a step are
// made of: first touch of a page, copy-on-write of a file page (what a PIE
// binary's relocations do to .data.rel.ro), unmapping touched memory, CPUID
// (glibc and OpenSSL run it at start-up), creating a thread, spawning a
// process. Run it next to bench/cli/cli_bench.py: on a VM these can cost
// 20-100x what they cost on bare metal, and they, not instructions, decide
// the start-up figures (docs/BENCHMARKS.md).
#include <cpuid.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/wait.h>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPage = 4096;
constexpr size_t kPages = 256;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// First write to a fresh anonymous page (a zero-fill fault).
void BM_AnonPageFirstTouch(benchmark::State& state) {
  for (auto _ : state) {
    char* p = static_cast<char*>(
        mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    auto t0 = Clock::now();
    for (size_t i = 0; i < kPages; ++i) p[i * kPage] = 1;
    auto t1 = Clock::now();
    munmap(p, kPages * kPage);
    state.SetIterationTime(Seconds(t0, t1));
  }
  state.counters["per_page"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kPages),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AnonPageFirstTouch)->UseManualTime()->Unit(benchmark::kMillisecond);

// First write to a private mapping of a cached file page (a copy-on-write
// fault): what the dynamic loader does to each relocated page.
void BM_FilePageCowWrite(benchmark::State& state) {
  char path[] = "/tmp/al_platform_costs_XXXXXX";
  int fd = mkstemp(path);
  unlink(path);
  if (fd < 0 || ftruncate(fd, kPages * kPage) != 0) {
    state.SkipWithError("cannot create a scratch file");
    return;
  }
  for (auto _ : state) {
    char* p = static_cast<char*>(
        mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
    for (size_t i = 0; i < kPages; ++i) benchmark::DoNotOptimize(p[i * kPage]);  // map first
    auto t0 = Clock::now();
    for (size_t i = 0; i < kPages; ++i) p[i * kPage] = 1;
    auto t1 = Clock::now();
    munmap(p, kPages * kPage);
    state.SetIterationTime(Seconds(t0, t1));
  }
  close(fd);
  state.counters["per_page"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kPages),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_FilePageCowWrite)->UseManualTime()->Unit(benchmark::kMillisecond);

// munmap of a two-page mapping that was touched (a TLB flush).
void BM_MunmapTouched(benchmark::State& state) {
  for (auto _ : state) {
    char* p = static_cast<char*>(
        mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    p[0] = 1;
    auto t0 = Clock::now();
    munmap(p, 2 * kPage);
    state.SetIterationTime(Seconds(t0, Clock::now()));
  }
}
BENCHMARK(BM_MunmapTouched)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_Cpuid(benchmark::State& state) {
  unsigned a, b, c, d;
  unsigned sub = 0;
  for (auto _ : state) {
    __cpuid_count(0x8000001D, sub++ & 3, a, b, c, d);
    benchmark::DoNotOptimize(a + b + c + d);
  }
}
BENCHMARK(BM_Cpuid)->Unit(benchmark::kMicrosecond);

void BM_ThreadCreateJoin(benchmark::State& state) {
  for (auto _ : state) {
    std::thread t([] {});
    t.join();
  }
}
BENCHMARK(BM_ThreadCreateJoin)->Unit(benchmark::kMicrosecond);

// posix_spawn + wait of /bin/true: the floor under any process figure.
void BM_SpawnTrue(benchmark::State& state) {
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  for (auto _ : state) {
    pid_t pid;
    if (posix_spawn(&pid, arg0, nullptr, nullptr, argv, environ) != 0) {
      state.SkipWithError("posix_spawn failed");
      return;
    }
    int status = 0;
    waitpid(pid, &status, 0);
  }
}
BENCHMARK(BM_SpawnTrue)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
