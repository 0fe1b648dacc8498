// What only the PostgreSQL store has: its migrations (from an empty database
// and from each earlier version, a newer schema refused), the order of a
// session's event log, tenant ids on every row, and reconnecting after the
// database restarts. The SessionStore contract itself is tested by the
// conformance fixtures (StoreTest, LockTest, PendingTest, CrashRecoveryTest)
// on both stores.
#include <unistd.h>

#include <future>
#include <thread>

#include "agentloop/server_state.h"

#include "store/pg_conn.h"
#include "store/postgres_store.h"
#include "store/store_test_util.h"

namespace agentloop::store {

// The pool's internals, for the tests that hold its connections.
class PgPoolTestPeer {
 public:
  static Result<std::unique_ptr<PgConn>> Checkout(PostgresStore& s) { return s.Checkout(); }
  static void Return(PostgresStore& s, std::unique_ptr<PgConn> c) { s.Return(std::move(c)); }
  static size_t Idle(PostgresStore& s) {
    std::lock_guard lk(s.pool_mu_);
    return s.idle_.size();
  }
  static int Open(PostgresStore& s) {
    std::lock_guard lk(s.pool_mu_);
    return s.open_;
  }
};

namespace {

using ::testing::HasSubstr;

class PgStoreTest : public StoreTest {};
INSTANTIATE_TEST_SUITE_P(Postgres, PgStoreTest, ::testing::Values(Backend::kPostgres), BackendName);

// Tests that restart or stop the server, or count its connections: on a
// cluster of their own, not the one other test processes share.
class PgRestartTest : public StoreTest {
 protected:
  Result<PgTestCluster*> Cluster() override { return PgTestCluster::Own(); }
};
INSTANTIATE_TEST_SUITE_P(Postgres, PgRestartTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

// A fresh schema of the shared cluster (no store opened on it).
class PgMigrationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = PgTestCluster::Shared();
    if (!cluster.ok()) GTEST_SKIP() << "no PostgreSQL cluster: " << cluster.error().ToString();
    cluster_ = *cluster;
    auto url = cluster_->NewSchemaUrl();
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    url_ = *url;
    auto c = PgConn::Connect(url_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    conn_ = std::move(*c);
  }
  int64_t Count(const std::string& sql) {
    auto r = conn_->Exec(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && !r->empty() ? r->Int(0, 0) : -1;
  }
  PgTestCluster* cluster_ = nullptr;
  std::string url_;
  std::unique_ptr<PgConn> conn_;
};

TEST_F(PgMigrationsTest, BuiltinListIsAscendingAndGapFree) {
  auto list = BuiltinPgMigrations();
  ASSERT_FALSE(list.empty());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i].version, static_cast<int>(i + 1)) << list[i].name;
    EXPECT_FALSE(list[i].sql.empty());
  }
  EXPECT_EQ(list[0].name, "0001_initial.sql");
}

TEST_F(PgMigrationsTest, FreshDatabaseGetsEveryMigrationOnce) {
  EXPECT_EQ(*PgSchemaVersion(*conn_), 0);
  auto from = ApplyPgMigrations(*conn_, BuiltinPgMigrations(), 42);
  ASSERT_TRUE(from.ok()) << from.status().ToString();
  EXPECT_EQ(*from, 0);
  const int newest = BuiltinPgMigrations().back().version;
  EXPECT_EQ(*PgSchemaVersion(*conn_), newest);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM schema_migrations"), newest);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM session_events"), 0);
  // Already migrated: nothing runs again.
  ASSERT_TRUE(ApplyPgMigrations(*conn_, BuiltinPgMigrations(), 43).ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM schema_migrations WHERE applied_at_ms = 43"), 0);
}

// Every earlier version migrates to the newest, and a store opens on it.
TEST_F(PgMigrationsTest, EachEarlierVersionMigratesToTheNewest) {
  auto all = BuiltinPgMigrations();
  for (size_t k = 0; k <= all.size(); ++k) {
    SCOPED_TRACE("from version " + std::to_string(k));
    auto url = cluster_->NewSchemaUrl();
    ASSERT_TRUE(url.ok());
    auto c = PgConn::Connect(*url);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(ApplyPgMigrations(**c, all.subspan(0, k), 1).ok());
    EXPECT_EQ(*PgSchemaVersion(**c), static_cast<int>(k));
    PostgresStoreOptions o;
    o.migrate = false;
    if (k < all.size()) {
      auto refused = OpenPostgresStore(*url, o);
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition);
      EXPECT_THAT(refused.error().message(), HasSubstr("agentloop store migrate"));
    }
    auto migrated = MigratePostgresStore(*url);
    ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
    EXPECT_EQ(migrated->from_version, static_cast<int>(k));
    EXPECT_EQ(migrated->to_version, all.back().version);
    auto store = OpenPostgresStore(*url, o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    NewSessionParams p;
    p.workspace = "/w";
    EXPECT_TRUE((*store)->CreateSession(p).ok());
  }
}

TEST_F(PgMigrationsTest, FailingMigrationLeavesTheOldVersion) {
  const PgMigration v1[] = {{1, "0001_a.sql", "CREATE TABLE a (x integer);"}};
  const PgMigration v2[] = {{1, "0001_a.sql", "CREATE TABLE a (x integer);"},
                            {2, "0002_b.sql", "CREATE TABLE b (y integer); SELECT no_such_fn();"}};
  ASSERT_TRUE(ApplyPgMigrations(*conn_, v1, 1).ok());
  auto failed = ApplyPgMigrations(*conn_, v2, 2);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.error().message(), HasSubstr("0002_b.sql"));
  EXPECT_EQ(*PgSchemaVersion(*conn_), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM pg_tables WHERE tablename = 'b'"), 0);
}

TEST_F(PgMigrationsTest, NewerDatabaseIsRefused) {
  ASSERT_TRUE(ApplyPgMigrations(*conn_, BuiltinPgMigrations(), 1).ok());
  ASSERT_TRUE(conn_->Exec("INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 1)").ok());
  for (bool migrate : {true, false}) {
    PostgresStoreOptions o;
    o.migrate = migrate;
    auto store = OpenPostgresStore(url_, o);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.error().code(), Code::kFailedPrecondition);
    EXPECT_THAT(store.error().message(), HasSubstr("schema version 999"));
    EXPECT_THAT(store.error().message(), HasSubstr("newer agentloop"));
  }
  EXPECT_EQ(MigratePostgresStore(url_).status().code(), Code::kFailedPrecondition);
}

TEST_F(PgMigrationsTest, UnreachableDatabaseIsUnavailableWithoutThePassword) {
  auto store = OpenPostgresStore("postgresql://u:sekrit@127.0.0.1:1/db?connect_timeout=2", {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code(), Code::kUnavailable);
  EXPECT_THAT(store.error().message(), HasSubstr("u:***@127.0.0.1:1"));
  EXPECT_THAT(store.error().message(), ::testing::Not(HasSubstr("sekrit")));
}

// A reader that has seen seq N has seen every stored seq below it: a seq at
// or below the last stored one is refused, never slotted in behind a reader.
TEST_P(PgStoreTest, SeqsOnlyGrowWithinASession) {
  std::string id = NewSession();
  ASSERT_TRUE(store_
                  ->Append(id, std::vector<Event>{MessageEvent(1, Message::User("a")),
                                                  MessageEvent(5, Message::Assistant("b"))})
                  .ok());
  Status behind = store_->Append(id, std::vector<Event>{MessageEvent(3, Message::User("late"))});
  EXPECT_EQ(behind.code(), Code::kAlreadyExists) << behind.ToString();
  EXPECT_THAT(behind.message(), HasSubstr("last stored seq is 5"));
  // Out of order within one batch: refused as a whole.
  Status unordered = store_->Append(id, std::vector<Event>{MessageEvent(7, Message::User("x")),
                                                           MessageEvent(6, Message::User("y"))});
  EXPECT_EQ(unordered.code(), Code::kAlreadyExists);
  EXPECT_EQ(store_->Events(id, 0)->size(), 2u);
  EXPECT_EQ(store_->GetSession(id)->last_seq, 5u);
}

// Every row of a session carries its tenant.
TEST_P(PgStoreTest, EveryRowCarriesTheTenant) {
  NewSessionParams p;
  p.workspace = "/w";
  p.tenant = "acme";
  auto s = store_->CreateSession(p);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(store_->Append(s->id, std::vector<Event>{MessageEvent(1, Message::User("x"))}).ok());
  ASSERT_TRUE(store_->SetState(s->id, "todo", Json::object()).ok());
  Checkpoint cp;
  cp.session_id = s->id;
  cp.outstanding.push_back(
      {"pend-1", PendingKind::kApproval, "tu1", "bash", Json::object(), "r", "", ""});
  ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  ASSERT_TRUE(
      ServerStateOf(*store_)
          ->ClaimIdempotencyKey("acme", "k1", "fp", std::chrono::hours(1), std::chrono::minutes(1))
          .ok());
  for (const char* table : {"sessions", "session_events", "session_state", "checkpoints",
                            "pending_index", "idempotency_keys"}) {
    EXPECT_EQ(QueryInt(std::string("SELECT COUNT(*) FROM ") + table + " WHERE tenant = 'acme'"), 1)
        << table;
    EXPECT_EQ(QueryInt(std::string("SELECT COUNT(*) FROM ") + table + " WHERE tenant <> 'acme'"), 0)
        << table;
  }
}

// A new holder of a session's lock gets a new epoch.
TEST_P(PgStoreTest, EveryNewHolderGetsANewEpoch) {
  std::string id = NewSession();
  auto epoch = [&] { return QueryInt("SELECT lease_epoch FROM sessions WHERE id = '" + id + "'"); };
  EXPECT_EQ(epoch(), 0);
  {
    auto l = store_->AcquireLock(id, getpid());
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(epoch(), 1);
  }
  auto l = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(epoch(), 2);
}

// The database restarts (every connection is cut): the next calls reconnect,
// nothing committed is lost; while it is down calls fail kUnavailable.
TEST_P(PgRestartTest, ReconnectsAfterTheDatabaseRestarts) {
  auto cluster = Cluster();
  ASSERT_TRUE(cluster.ok());
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(1, Message::User("a"))}).ok());
  ASSERT_TRUE((*cluster)->Restart().ok());
  auto got = store_->GetSession(id);  // a read on a dead pooled connection
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->last_seq, 1u);
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(2, Message::User("b"))}).ok());

  ASSERT_TRUE((*cluster)->Stop().ok());
  Status down = store_->Append(id, std::vector<Event>{MessageEvent(3, Message::User("c"))});
  Status start = (*cluster)->StartAgain();
  ASSERT_TRUE(start.ok()) << start.ToString();
  EXPECT_EQ(down.code(), Code::kUnavailable) << down.ToString();
  auto events = store_->Events(id, 0);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].seq, 2u);
  EXPECT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(3, Message::User("c"))}).ok());
}

// After a restart every pooled connection is dead, not only the first one
// a call finds: the pool drops them all at the first, so a call after the
// restart connects anew instead of failing on the next dead one.
TEST_P(PgRestartTest, ARestartDropsEveryPooledConnection) {
  auto cluster = Cluster();
  ASSERT_TRUE(cluster.ok());
  std::string id = NewSession();
  const std::string others =
      "SELECT COUNT(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
      "AND pid <> pg_backend_pid()";
  // Concurrent reads until the pool holds at least three connections.
  for (int round = 0; round < 50 && QueryInt(others) < 3; ++round) {
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&] {
        for (int i = 0; i < 20; ++i) (void)store_->GetSession(id);
      });
    }
    for (auto& r : readers) r.join();
  }
  ASSERT_GE(QueryInt(others), 3) << "the pool never held three connections";
  ASSERT_TRUE((*cluster)->Restart().ok());
  auto got = store_->GetSession(id);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  Status appended = store_->Append(id, std::vector<Event>{MessageEvent(1, Message::User("a"))});
  EXPECT_TRUE(appended.ok()) << appended.ToString();
}

// A running turn's writes ride out a database restart: an append through
// the lease made while the server is down waits for it and commits once it
// is back (the lease, still this holder's, fences it as usual).
TEST_P(PgRestartTest, ALeaseHoldersWriteWaitsOutAnOutage) {
  auto cluster = Cluster();
  ASSERT_TRUE(cluster.ok());
  std::string id = NewSession();
  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  ASSERT_TRUE((*lock)->Append(std::vector<Event>{MessageEvent(1, Message::User("a"))}).ok());
  ASSERT_TRUE((*cluster)->Stop().ok());
  std::promise<Status> appended;
  std::thread writer([&] {
    appended.set_value((*lock)->Append(std::vector<Event>{MessageEvent(2, Message::User("b"))}));
  });
  Status start = (*cluster)->StartAgain();
  writer.join();
  ASSERT_TRUE(start.ok()) << start.ToString();
  Status s = appended.get_future().get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto events = store_->Events(id, 0);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].seq, 2u);
  EXPECT_TRUE((*lock)->SetState("todo", Json::object()).ok());
}

// An outage longer than a lease is not waited out: the write fails
// kUnavailable (the lease may have been taken over meanwhile).
TEST_P(PgRestartTest, ALeaseHoldersWriteGivesUpAfterOneLeaseTtl) {
  auto cluster = Cluster();
  ASSERT_TRUE(cluster.ok());
  std::unique_ptr<SessionStore> store = OpenStore({.lock_ttl = std::chrono::milliseconds(300)});
  ASSERT_NE(store, nullptr);
  std::string id = NewSession();
  auto lock = store->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  ASSERT_TRUE((*cluster)->Stop().ok());
  Status down = (*lock)->Append(std::vector<Event>{MessageEvent(1, Message::User("a"))});
  Status start = (*cluster)->StartAgain();
  ASSERT_TRUE(start.ok()) << start.ToString();
  EXPECT_EQ(down.code(), Code::kUnavailable) << down.ToString();
  EXPECT_EQ(store_->Events(id, 0)->size(), 0u);
}

// A store of one pooled connection on the test's schema, waiting at most
// `pool_timeout` for it.
std::unique_ptr<PostgresStore> OnePooledConnection(const std::string& url,
                                                   std::chrono::milliseconds pool_timeout) {
  PostgresStoreOptions o;
  o.pool_size = 1;
  o.pool_timeout = pool_timeout;
  o.lock_heartbeat = false;
  auto s = PostgresStore::Open(url, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// With every connection held (a stuck statement), a call does not wait
// forever: it fails kUnavailable (503 with Retry-After from the server)
// naming the pool and the wait, and works again once one is free.
TEST_P(PgStoreTest, ACallFailsUnavailableWhenNoConnectionFreesUpInTime) {
  std::string id = NewSession();
  auto store = OnePooledConnection(pg_url(), std::chrono::milliseconds(50));
  ASSERT_NE(store, nullptr);
  auto held = PgPoolTestPeer::Checkout(*store);
  ASSERT_TRUE(held.ok()) << held.status().ToString();

  auto waited = store->GetSession(id);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), Code::kUnavailable) << waited.status().ToString();
  EXPECT_THAT(waited.status().message(), HasSubstr("no free connection"));
  EXPECT_THAT(waited.status().message(), HasSubstr("all 1 stayed in use for 50 ms"));
  EXPECT_THAT(waited.status().message(), HasSubstr("store.pool_timeout_ms"));

  PgPoolTestPeer::Return(*store, std::move(*held));
  auto got = store->GetSession(id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->id, id);
}

// A connection that comes back broken is closed, not kept idle, and a call
// waiting for a connection is woken by its closing and connects anew.
TEST_P(PgStoreTest, ABrokenConnectionIsClosedAndWakesAWaiter) {
  std::string id = NewSession();
  // Long enough that only the wake-up, never the timeout, ends the wait.
  auto store = OnePooledConnection(pg_url(), std::chrono::minutes(5));
  ASSERT_NE(store, nullptr);
  auto held = PgPoolTestPeer::Checkout(*store);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_FALSE((*held)->Exec("SELECT pg_terminate_backend(pg_backend_pid())").ok());
  ASSERT_FALSE((*held)->healthy());

  std::promise<Result<SessionInfo>> waited;
  std::thread waiter([&] { waited.set_value(store->GetSession(id)); });
  PgPoolTestPeer::Return(*store, std::move(*held));
  waiter.join();
  auto got = waited.get_future().get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->id, id);
  // Only the waiter's new connection is in the pool.
  EXPECT_EQ(PgPoolTestPeer::Open(*store), 1);
  EXPECT_EQ(PgPoolTestPeer::Idle(*store), 1u);
}

// The same without a waiter: the broken connection is not put back idle.
TEST_P(PgStoreTest, ABrokenConnectionIsNotPutBackIdle) {
  auto store = OnePooledConnection(pg_url(), std::chrono::minutes(5));
  ASSERT_NE(store, nullptr);
  auto held = PgPoolTestPeer::Checkout(*store);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_FALSE((*held)->Exec("SELECT pg_terminate_backend(pg_backend_pid())").ok());
  ASSERT_FALSE((*held)->healthy());
  PgPoolTestPeer::Return(*store, std::move(*held));
  EXPECT_EQ(PgPoolTestPeer::Idle(*store), 0u);
  EXPECT_EQ(PgPoolTestPeer::Open(*store), 0);
}

}  // namespace
}  // namespace agentloop::store

namespace agentloop::store {
namespace {

class PgWakeupTest : public StoreTest {
 protected:
  // A paused batch of one approval in a new session; returns its pending id.
  std::string PausedSession(std::string* session) {
    *session = NewSession();
    Checkpoint cp;
    cp.session_id = *session;
    cp.turn_id = "turn_1";
    cp.tool_use_ids.push_back("tu_1");
    PendingItem item{NewPendingId(PendingKind::kApproval),
                     PendingKind::kApproval,
                     "tu_1",
                     "bash",
                     Json{{"command", "make"}},
                     "ask rule",
                     "",
                     ""};
    cp.outstanding.push_back(item);
    EXPECT_TRUE(store_->SaveCheckpoint(cp).ok());
    return item.id;
  }
  static ResolveFn Approve() {
    return [](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
      return ResolveAction::kResolved;
    };
  }
};
INSTANTIATE_TEST_SUITE_P(Postgres, PgWakeupTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

// The decision that completes a batch leaves a wake-up, due after the grace
// (the deciding server continues meanwhile), announced to listeners at
// commit; one claimer gets it; claiming the decided batch removes it.
TEST_P(PgWakeupTest, ADecisionWakesOneClaimerAfterTheGrace) {
  auto listener = store_->ListenForWakeups();
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  ASSERT_NE(*listener, nullptr);
  std::string sid;
  std::string pid = PausedSession(&sid);
  EXPECT_TRUE(store_->ClaimWakeups(10, std::chrono::seconds(30))->sessions.empty());

  auto decided = store_->Resolve(pid, Approve());
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
  ASSERT_TRUE(decided->closed);
  auto heard = (*listener)->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(heard.ok()) << heard.status().ToString();
  EXPECT_TRUE(*heard);

  // Within the grace: nothing due yet, and when it will be.
  auto early = store_->ClaimWakeups(10, std::chrono::seconds(30));
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_TRUE(early->sessions.empty());
  EXPECT_EQ(early->next_due_in_ms, std::optional<int64_t>(1000));

  clock_ms_ += 1000;
  auto other = OpenStore();
  auto first = store_->ClaimWakeups(10, std::chrono::seconds(30));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->sessions, std::vector<std::string>{sid});
  // Claimed: not due for another claimer until the retry time.
  EXPECT_TRUE(other->ClaimWakeups(10, std::chrono::seconds(30))->sessions.empty());
  clock_ms_ += 30'000;
  EXPECT_EQ(other->ClaimWakeups(10, std::chrono::seconds(30))->sessions,
            std::vector<std::string>{sid});

  // Continuing the batch answers the wake-up for good.
  auto lock = store_->AcquireLock(sid, getpid());
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE((*lock)->ClaimDecided()->has_value());
  clock_ms_ += 60'000;
  auto after = other->ClaimWakeups(10, std::chrono::seconds(30));
  EXPECT_TRUE(after->sessions.empty());
  EXPECT_FALSE(after->next_due_in_ms.has_value());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_wakeups"), 0);
}

// A decision that rolls back announces nothing and leaves no wake-up; an
// item decided while others of its batch wait leaves none either.
TEST_P(PgWakeupTest, OnlyACommittedCompletedBatchLeavesAWakeup) {
  std::string sid;
  std::string pid = PausedSession(&sid);
  auto refused = store_->Resolve(pid, [](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
    return InvalidArgument("no");
  });
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_wakeups"), 0);
  auto listener = store_->ListenForWakeups();
  ASSERT_TRUE(listener.ok());
  auto heard = (*listener)->Wait(std::chrono::milliseconds(50));
  ASSERT_TRUE(heard.ok());
  EXPECT_FALSE(*heard);
}

// A stale wake-up (its batch continued without ClaimDecided's cleanup, e.g.
// superseded by a newer pause) is dropped, not handed out.
TEST_P(PgWakeupTest, AWakeupWithoutADecidedBatchIsDropped) {
  std::string sid;
  std::string pid = PausedSession(&sid);
  ASSERT_TRUE(store_->Resolve(pid, Approve()).ok());
  ExecSql("UPDATE checkpoints SET state = 1");
  clock_ms_ += 1000;
  EXPECT_TRUE(store_->ClaimWakeups(10, std::chrono::seconds(30))->sessions.empty());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_wakeups"), 0);
}

// Interrupt ends a Wait at once (a server stopping).
TEST_P(PgWakeupTest, InterruptEndsAWait) {
  auto listener = store_->ListenForWakeups();
  ASSERT_TRUE(listener.ok());
  (*listener)->Interrupt();
  auto heard = (*listener)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(heard.ok());
  EXPECT_FALSE(*heard);
}

// Leases whose heartbeat is older than the TTL are listed for takeover.
TEST_P(PgWakeupTest, ExpiredLocksAreListed) {
  std::string held = NewSession();
  std::string fresh = NewSession();
  auto a = store_->AcquireLock(held, getppid());
  ASSERT_TRUE(a.ok());
  clock_ms_ += 20'000;
  auto b = store_->AcquireLock(fresh, getppid());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(store_->ListExpiredLocks(10)->empty());
  clock_ms_ += 11'000;
  EXPECT_EQ(*store_->ListExpiredLocks(10), std::vector<std::string>{held});
}

}  // namespace
}  // namespace agentloop::store
