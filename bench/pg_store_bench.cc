// PostgreSQL store figures (docs/BENCHMARKS.md, "PostgreSQL store"): events
// appended per second (per session and in total, one event or a step's ten
// per commit), decision latency at a paced 1,000 decisions/s, and the cost of
// renewing 10,000 leases. Starts a throwaway cluster with fsync and
// synchronous commit on (as a production server runs) in the system temp
// directory, or uses the database of $AL_BENCH_PG_URL.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "agentloop/store.h"

#include "protocol/codec.h"
#include "store/pg_test_cluster.h"
#include "store/postgres_store.h"

namespace agentloop {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Event Msg(uint64_t seq) {
  Message m = Message::Assistant(std::string(200, 'x'));  // ~300-byte event
  return Event(MessageData{m}, "", "turn_1", seq, 1767225600000 + static_cast<int64_t>(seq));
}

std::unique_ptr<store::PostgresStore> Open(const std::string& url, int pool) {
  PostgresStoreOptions o;
  o.pool_size = pool;
  o.lock_heartbeat = false;
  auto s = store::PostgresStore::Open(url, o);
  if (!s.ok()) {
    std::fprintf(stderr, "open: %s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*s);
}

std::string NewSession(SessionStore& s) {
  NewSessionParams p;
  p.workspace = "/bench";
  return s.CreateSession(p)->id;
}

// `threads` writers, each on its own session, `commits` commits of `batch`
// events each.
void Appends(const std::string& url, int threads, int commits, int batch) {
  auto store = Open(url, threads);
  std::vector<std::string> ids;
  for (int t = 0; t < threads; ++t) ids.push_back(NewSession(*store));
  auto start = Clock::now();
  std::vector<std::thread> ws;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    ws.emplace_back([&, t] {
      uint64_t seq = 0;
      for (int c = 0; c < commits; ++c) {
        std::vector<Event> events;
        for (int b = 0; b < batch; ++b) events.push_back(Msg(++seq));
        if (!store->Append(ids[t], events).ok()) failures++;
      }
    });
  }
  for (auto& w : ws) w.join();
  const double s = Seconds(Clock::now() - start);
  const double total_commits = static_cast<double>(threads) * commits;
  std::printf(
      "append: %d session(s) x %d commits x %d event(s): %.0f commits/s, %.0f events/s total, "
      "%.0f events/s per session%s\n",
      threads, commits, batch, total_commits / s, total_commits * batch / s,
      total_commits * batch / s / threads, failures ? " (FAILURES)" : "");
}

// Decisions at a paced rate: `n` sessions with one pending item each,
// decided by `threads` deciders at `rate` per second in total; latency is
// measured from the scheduled time (queueing included).
void Decisions(const std::string& url, int n, int threads, int rate) {
  auto store = Open(url, threads);
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) {
    std::string sid = NewSession(*store);
    Checkpoint cp;
    cp.session_id = sid;
    cp.tool_use_ids = {"tu"};
    std::string id = "apr_" + std::to_string(i) + "_" + sid.substr(0, 8);
    cp.outstanding.push_back({id, PendingKind::kApproval, "tu", "bash", Json::object(), "ask"});
    if (!store->SaveCheckpoint(cp).ok()) std::exit(1);
    items.push_back(id);
  }
  std::vector<double> lat(static_cast<size_t>(n));
  std::atomic<int> next{0};
  const auto start = Clock::now() + std::chrono::milliseconds(50);
  const auto period = std::chrono::nanoseconds(1'000'000'000LL / rate);
  std::vector<std::thread> ws;
  for (int t = 0; t < threads; ++t) {
    ws.emplace_back([&] {
      for (;;) {
        int i = next++;
        if (i >= n) return;
        const auto due = start + period * i;
        std::this_thread::sleep_until(due);
        auto r = store->Resolve(items[static_cast<size_t>(i)],
                                [](Checkpoint& cp, const PendingItem& item) {
                                  cp.decisions.push_back({item, ApprovalDecision::Allow("bench")});
                                  return Result<ResolveAction>(ResolveAction::kResolved);
                                });
        if (!r.ok() || r->already_resolved) std::exit(1);
        lat[static_cast<size_t>(i)] = Seconds(Clock::now() - due) * 1000;
      }
    });
  }
  for (auto& w : ws) w.join();
  const double s = Seconds(Clock::now() - start);
  std::sort(lat.begin(), lat.end());
  std::printf(
      "decisions: %d at %d/s paced, %d deciders: achieved %.0f/s, p50 %.2f ms, p99 %.2f ms\n", n,
      rate, threads, n / s, lat[lat.size() / 2], lat[lat.size() * 99 / 100]);
}

// Renewing `n` held leases (the heartbeat's one pass).
void Leases(const std::string& url, int n) {
  auto store = Open(url, 4);
  std::vector<std::unique_ptr<SessionLock>> locks;
  std::vector<std::pair<std::string, std::string>> held;
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    NewSessionParams p;
    p.workspace = "/bench";
    auto l = store->CreateLockedSession(p, 1);
    if (!l.ok()) std::exit(1);
    locks.push_back(std::move(l->lock));
  }
  const double create = Seconds(Clock::now() - start);
  // The tokens are private to the handles: read them back.
  {
    auto c = store::PgConn::Connect(url);
    auto r = (*c)->Exec("SELECT id, lease_token FROM sessions WHERE lease_token IS NOT NULL");
    for (int i = 0; i < r->size(); ++i) held.emplace_back(r->Text(i, 0), r->Text(i, 1));
  }
  double best = 1e9;
  for (int round = 0; round < 5; ++round) {
    auto t0 = Clock::now();
    if (!store->RefreshLocks(held).ok()) std::exit(1);
    best = std::min(best, Seconds(Clock::now() - t0));
  }
  std::printf(
      "leases: %zu held (created with their locks at %.0f/s): one renewal pass %.1f ms "
      "(best of 5)\n",
      held.size(), n / create, best * 1000);
  locks.clear();
}

}  // namespace
}  // namespace agentloop

int main() {
  using namespace agentloop;
  std::unique_ptr<store::PgTestCluster> cluster;
  std::string url;
  if (const char* u = std::getenv("AL_BENCH_PG_URL"); u != nullptr && *u != '\0') {
    url = u;
  } else {
    auto c = store::PgTestCluster::Start(/*durable=*/true);
    if (!c.ok()) {
      std::fprintf(stderr, "no cluster: %s\n", c.status().ToString().c_str());
      return 1;
    }
    cluster = std::move(*c);
    auto schema = cluster->NewSchemaUrl();
    if (!schema.ok()) return 1;
    url = *schema;
  }
  Appends(url, 1, 2000, 1);
  Appends(url, 1, 1000, 10);
  Appends(url, 8, 1000, 1);
  Appends(url, 8, 500, 10);
  Decisions(url, 5000, 16, 1000);
  Leases(url, 10000);
  return 0;
}
