// Session-store throughput with durability on (WAL, synchronous=FULL): one
// fsync'd transaction per Append. Run from a directory on the disk you care
// about: the database goes to $AL_BENCH_DIR (default: the system temp dir,
// which may be tmpfs and then shows no fsync cost).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include <benchmark/benchmark.h>

#include "agentloop/store.h"

#include "protocol/codec.h"

namespace agentloop {
namespace {

class BenchDb {
 public:
  explicit BenchDb(SqliteStoreOptions options = {}) {
    const char* base = std::getenv("AL_BENCH_DIR");
    std::filesystem::path root = base != nullptr ? base : std::filesystem::temp_directory_path();
    std::string tmpl = (root / "al_store_bench_XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    auto s = OpenSqliteStore(dir_ / "sessions.db", std::move(options));
    if (!s.ok()) std::abort();
    store_ = std::move(*s);
  }
  ~BenchDb() {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  SessionStore& store() { return *store_; }
  std::string NewSession() {
    NewSessionParams p;
    p.workspace = "/bench";
    return store_->CreateSession(p)->id;
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<SessionStore> store_;
};

Event MessageEvent(uint64_t seq, size_t text_bytes) {
  return Event(MessageData{Message::Assistant(std::string(text_bytes, 'x'))}, "", "turn_bench", seq,
               SystemNowMs());
}

// One event per Append: the engine's worst case (every message committed
// before the next step). Reports appends per second.
void BM_AppendOne(benchmark::State& state) {
  BenchDb db;
  std::string id = db.NewSession();
  uint64_t seq = 0;
  const size_t bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    Event e = MessageEvent(++seq, bytes);
    if (!db.store().Append(id, std::span<const Event>(&e, 1)).ok()) std::abort();
  }
  state.counters["appends/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AppendOne)->Arg(200)->Arg(4096)->UseRealTime();

// A step's worth of events in one transaction.
void BM_AppendBatch(benchmark::State& state) {
  BenchDb db;
  std::string id = db.NewSession();
  uint64_t seq = 0;
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<Event> batch;
    for (int i = 0; i < n; ++i) batch.push_back(MessageEvent(++seq, 200));
    if (!db.store().Append(id, batch).ok()) std::abort();
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AppendBatch)->Arg(4)->Arg(32)->UseRealTime();

// Rebuilding a session of N messages (resume).
void BM_Load(benchmark::State& state) {
  BenchDb db;
  std::string id = db.NewSession();
  std::vector<Event> events;
  for (int64_t i = 0; i < state.range(0); ++i) events.push_back(MessageEvent(i + 1, 500));
  if (!db.store().Append(id, events).ok()) std::abort();
  for (auto _ : state) {
    auto snap = db.store().Load(id, {});
    benchmark::DoNotOptimize(snap);
  }
}
BENCHMARK(BM_Load)->Arg(100)->Arg(1000)->UseRealTime();

// SqliteStoreOptions from the environment: AL_BENCH_SYNC=normal for
// store.sync = normal (default full), AL_BENCH_GROUP=N for at most N writes
// per group commit (1: every write commits alone).
SqliteStoreOptions EnvOptions() {
  SqliteStoreOptions o;
  if (const char* sync = std::getenv("AL_BENCH_SYNC"); sync && std::string(sync) == "normal") {
    o.sync = StoreSync::kNormal;
  }
  if (const char* group = std::getenv("AL_BENCH_GROUP"); group != nullptr) {
    o.group_commit_max = std::max(1, std::atoi(group));
  }
  return o;
}

// Many sessions committing at the same moment (the steps of many turns, and
// decisions, in a server): each thread appends one event per call to its own
// session of one shared store. Group commit shares a transaction, and with
// FULL its fsync, between the writes that are ready together. Reports
// appends per second over all threads.
void BM_AppendConcurrent(benchmark::State& state) {
  static std::mutex mu;
  static std::unique_ptr<BenchDb> shared;
  static int users = 0;
  {
    std::lock_guard l(mu);
    if (users++ == 0) shared = std::make_unique<BenchDb>(EnvOptions());
  }
  std::string id;
  {
    std::lock_guard l(mu);
    id = shared->NewSession();
  }
  uint64_t seq = 0;
  for (auto _ : state) {
    Event e = MessageEvent(++seq, 300);
    if (!shared->store().Append(id, std::span<const Event>(&e, 1)).ok()) std::abort();
  }
  state.counters["appends/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  std::lock_guard l(mu);
  if (--users == 0) shared.reset();
}
BENCHMARK(BM_AppendConcurrent)->Threads(1)->Threads(4)->Threads(16)->Threads(64)->UseRealTime();

// A durable pause and its resolution: SaveCheckpoint + Resolve.
void BM_PauseResolve(benchmark::State& state) {
  BenchDb db;
  std::string id = db.NewSession();
  int n = 0;
  for (auto _ : state) {
    Checkpoint cp;
    cp.session_id = id;
    cp.tool_use_ids = {"tu"};
    std::string pid = "p" + std::to_string(++n);
    cp.outstanding.push_back({pid, PendingKind::kApproval, "tu", "bash", Json::object(), "ask"});
    if (!db.store().SaveCheckpoint(cp).ok()) std::abort();
    auto r = db.store().Resolve(pid, [](Checkpoint&, const PendingItem&) {
      return Result<ResolveAction>(ResolveAction::kResolved);
    });
    if (!r.ok() || !r->closed) std::abort();
  }
}
BENCHMARK(BM_PauseResolve)->UseRealTime();

}  // namespace
}  // namespace agentloop

BENCHMARK_MAIN();
