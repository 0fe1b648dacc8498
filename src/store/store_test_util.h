// Shared fixtures of the store tests: a temporary database and a manual clock,
// on either store (the conformance table: each TEST_P of a StoreTest fixture
// runs against SQLite and against PostgreSQL on a throwaway cluster).
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/events.h"
#include "agentloop/store.h"

#include "base/ids.h"
#include "protocol/codec.h"
#include "store/pg_test_cluster.h"
#include "store/sqlite_db.h"
#include "store/sqlite_store.h"

namespace agentloop::store {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "al_store_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p != nullptr ? std::filesystem::path(p) : std::filesystem::path(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The store implementations every conformance test runs against.
enum class Backend { kSqlite, kPostgres };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// Runs the tests of `fixture` (TEST_P) against every store.
#define AL_STORE_CONFORMANCE(fixture)       \
  INSTANTIATE_TEST_SUITE_P(Stores, fixture, \
                           ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName)
// Runs the tests of `fixture` against the SQLite store only (its file format,
// pragmas and internals).
#define AL_SQLITE_ONLY(fixture) \
  INSTANTIATE_TEST_SUITE_P(Sqlite, fixture, ::testing::Values(Backend::kSqlite), BackendName)

struct StoreTestOptions {
  bool lock_heartbeat = false;
  std::chrono::milliseconds lock_ttl{30000};
};

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  bool sqlite() const { return GetParam() == Backend::kSqlite; }
  SqliteStoreOptions Options() {
    SqliteStoreOptions o;
    o.now_ms = [this] { return ReadClock(); };
    o.lock_heartbeat = false;
    return o;
  }
  // A new store (a new connection, as another process has) on the test's
  // database, with the test's clock.
  std::unique_ptr<SessionStore> OpenStore(StoreTestOptions t = {}) {
    if (sqlite()) {
      SqliteStoreOptions o = Options();
      o.lock_heartbeat = t.lock_heartbeat;
      o.lock_ttl = t.lock_ttl;
      auto s = SqliteStore::Open(db_path(), o);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      return s.ok() ? std::move(*s) : nullptr;
    }
    PostgresStoreOptions o;
    o.now_ms = [this] { return ReadClock(); };
    o.lock_heartbeat = t.lock_heartbeat;
    o.lock_ttl = t.lock_ttl;
    auto s = OpenPostgresStore(pg_url_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // The PostgreSQL cluster of the test's schema: the shared one; a test that
  // restarts or stops the server, or counts its connections, has its own.
  virtual Result<PgTestCluster*> Cluster() { return PgTestCluster::Shared(); }
  void SetUp() override {
    if (!sqlite()) {
      auto cluster = Cluster();
      if (!cluster.ok()) GTEST_SKIP() << "no PostgreSQL cluster: " << cluster.error().ToString();
      auto url = (*cluster)->NewSchemaUrl();
      ASSERT_TRUE(url.ok()) << url.status().ToString();
      pg_url_ = *url;
    }
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
  }
  std::filesystem::path db_path() const { return dir_.path() / "sessions.db"; }
  const std::string& pg_url() const { return pg_url_; }

  // Runs SQL on the test's database directly (the store's tables).
  void ExecSql(const std::string& sql) {
    if (sqlite()) {
      auto db = Db::Open(db_path(), 1000);
      ASSERT_TRUE(db.ok());
      ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
    } else {
      Status s = PgExecForTest(pg_url_, sql);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  // The first column of the first row of `sql` as an integer; -1 when no row.
  int64_t QueryInt(const std::string& sql) {
    if (sqlite()) {
      auto db = Db::Open(db_path(), 1000);
      EXPECT_TRUE(db.ok());
      auto st = (*db)->Prepare(sql);
      EXPECT_TRUE(st.ok()) << sql;
      auto row = st->Step();
      return row.ok() && *row && !st->IsNull(0) ? st->Int(0) : -1;
    }
    auto v = PgQueryIntForTest(pg_url_, sql);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : -1;
  }
  // Overwrites the stored JSON of one event, as a torn or corrupted write
  // would.
  void CorruptRow(const std::string& session_id, uint64_t seq) {
    ExecSql("UPDATE " + EventsTable() + " SET json = '{\"type\":\"mess' WHERE session_id = '" +
            session_id + "' AND seq = " + std::to_string(seq));
    EXPECT_EQ(
        QueryInt("SELECT COUNT(*) FROM " + EventsTable() + " WHERE json = '{\"type\":\"mess'"), 1);
  }
  // The table of the event log.
  std::string EventsTable() const { return sqlite() ? "events" : "session_events"; }
  // The heartbeat of the session's lock, -1 when it is not held.
  int64_t HeartbeatOf(const std::string& id) {
    return sqlite()
               ? QueryInt("SELECT heartbeat_at_ms FROM session_locks WHERE session_id = '" + id +
                          "'")
               : QueryInt("SELECT lease_heartbeat_at_ms FROM sessions WHERE id = '" + id + "'");
  }

  // The stores' clock: the test's time, and an event for WaitForClockReads.
  int64_t ReadClock() {
    {
      std::lock_guard<std::mutex> l(clock_reads_mu_);
      ++clock_reads_;
    }
    clock_reads_cv_.notify_all();
    return clock_ms_.load();
  }
  // Waits until `done()` holds, or `timeout` passes (then returns done()).
  // `done` is checked again each time a store reads the test's clock (the
  // heartbeat thread does, once per refresh), so the waiting thread sleeps
  // between checks instead of taking the CPU the heartbeat needs.
  template <typename Done>
  bool WaitForClockReads(Done done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock<std::mutex> l(clock_reads_mu_);
    for (;;) {
      const uint64_t seen = clock_reads_;
      l.unlock();
      if (done()) return true;
      l.lock();
      if (!clock_reads_cv_.wait_until(l, deadline, [&] { return clock_reads_ != seen; })) {
        l.unlock();
        return done();
      }
    }
  }

  std::string NewSession(std::string workspace = "/work/ws") {
    NewSessionParams p;
    p.workspace = workspace;
    p.provider = "script";
    p.model = "m1";
    auto info = store_->CreateSession(p);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->id : std::string();
  }

  // 2026-01-01T00:00:00Z: the events' ts (the test events' seq is added).
  static constexpr int64_t kTestTs = 1767225600000;

  static Event MessageEvent(uint64_t seq, const Message& m, std::string turn = "turn_1") {
    Event e(MessageData{m}, "", std::move(turn), seq, kTestTs + static_cast<int64_t>(seq));
    return e;
  }
  // An event of `type` whose data is the type's defaults with the fields of
  // `data` written over them (the fields a test cares about).
  static Event MakeEvent(EventType type, uint64_t seq, Json data, std::string turn = "turn_1") {
    EventData base = DefaultData(type, std::make_index_sequence<std::variant_size_v<EventData>>());
    Json j = std::visit([](const auto& d) { return d.ToJson(); }, base);
    if (type == EventType::kSettings) j["settings"] = Json::object();  // null by default
    if (data.is_object()) {
      for (auto it = data.begin(); it != data.end(); ++it) j[it.key()] = it.value();
    }
    Result<EventData> typed = EventDataFromJson(type, j);
    EXPECT_TRUE(typed.ok()) << typed.error().ToString();
    Event e;
    e.type = type;
    e.data = typed.ok() ? std::move(*typed) : std::move(base);
    e.turn_id = std::move(turn);
    e.seq = seq;
    e.ts = kTestTs + static_cast<int64_t>(seq);
    return e;
  }
  template <size_t... I>
  static EventData DefaultData(EventType type, std::index_sequence<I...>) {
    EventData d;
    ((static_cast<size_t>(type) == I ? (void)d.emplace<I>() : (void)0), ...);
    return d;
  }
  static Message AssistantWithTools(std::vector<std::string> ids) {
    Message m;
    m.role = Role::kAssistant;
    m.content.push_back(ContentBlock::Text("let me look"));
    for (auto& id : ids) {
      m.content.push_back(ContentBlock::ToolUse(id, "read", Json{{"path", "a.txt"}}));
    }
    return m;
  }

  TempDir dir_;
  std::atomic<int64_t> clock_ms_{1'700'000'000'000};
  std::mutex clock_reads_mu_;
  std::condition_variable clock_reads_cv_;
  uint64_t clock_reads_ = 0;
  std::string pg_url_;
  std::unique_ptr<SessionStore> store_;
};

}  // namespace agentloop::store
