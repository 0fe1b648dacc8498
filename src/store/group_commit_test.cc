// Group commit of the SQLite and PostgreSQL stores: the writes of many
// sessions that are ready together share one transaction, each caller is
// answered only once its write is committed, and a write or a batch that
// fails is reported to exactly the callers it concerns. Batching is asserted
// by holding the first batch in the writer while the others queue (never by
// time).
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "store/pg_conn.h"
#include "store/postgres_store.h"
#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

constexpr auto kWait = std::chrono::seconds(30);

class GroupCommitTest : public StoreTest {
 protected:
  SqliteStore& sqlite_store() { return static_cast<SqliteStore&>(*store_); }

  // Runs writes[0] first and holds its batch in the writer until the other
  // writes are queued behind it, so that they make the next batch together;
  // each write's answer, in order.
  std::vector<Status> RunHeldBehindTheFirst(const std::vector<std::function<Status()>>& writes) {
    std::promise<void> holding;
    std::atomic<bool> first{true};
    const size_t others = writes.size() - 1;
    sqlite_store().SetBeforeBatchForTest([&](size_t, size_t) {
      if (!first.exchange(false)) return;
      holding.set_value();
      EXPECT_TRUE(sqlite_store().WaitForQueuedWrites(others, kWait));
    });
    std::vector<Status> out(writes.size());
    std::vector<std::thread> threads;
    threads.emplace_back([&] { out[0] = writes[0](); });
    // The others start once the first is the writer (its hook runs).
    EXPECT_EQ(holding.get_future().wait_for(kWait), std::future_status::ready);
    for (size_t i = 1; i < writes.size(); ++i) {
      threads.emplace_back([&, i] { out[i] = writes[i](); });
    }
    for (auto& t : threads) t.join();
    sqlite_store().SetBeforeBatchForTest(nullptr);
    return out;
  }

  std::function<Status()> AppendOne(const std::string& session, uint64_t seq) {
    return [this, session, seq] {
      return store_->Append(session,
                            std::vector<Event>{MessageEvent(seq, Message::User("m" + session))});
    };
  }
};
AL_SQLITE_ONLY(GroupCommitTest);

TEST_P(GroupCommitTest, ConcurrentCommittersShareOneBatchAndAllAreDurable) {
  constexpr size_t kWriters = 8;
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (size_t i = 0; i < kWriters; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  const auto before = sqlite_store().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (const Status& s : answers) EXPECT_TRUE(s.ok()) << s.ToString();
  const auto after = sqlite_store().group_commit_stats();
  EXPECT_EQ(after.batches - before.batches, 2u);  // the first alone, then the 7 together
  EXPECT_EQ(after.writes - before.writes, kWriters);
  EXPECT_EQ(after.largest, kWriters - 1);
  EXPECT_EQ(after.reruns, before.reruns);

  // Every acknowledged write is in the database another connection opens.
  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  for (const std::string& s : sessions) {
    auto events = store_->Events(s, 0);
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    EXPECT_EQ(events->size(), 1u) << s;
  }
}

// A decision is taken before turn steps that were queued first.
TEST_P(GroupCommitTest, DecisionsHaveALaneOfTheirOwn) {
  Checkpoint cp;
  cp.session_id = NewSession();
  cp.turn_id = "turn_1";
  cp.tool_use_ids.push_back("tu_0");
  cp.outstanding.push_back(
      {"p1", PendingKind::kApproval, "tu_0", "bash", Json::object(), "", "", ""});
  ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  std::string other = NewSession();

  // One write per batch: the order of the batches is the order in which the
  // writer takes the writes.
  store_.reset();
  SqliteStoreOptions o = Options();
  o.group_commit_max = 1;
  auto opened = SqliteStore::Open(db_path(), o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store_ = std::move(*opened);

  // Created before the writer is held: creating a session is a write too.
  std::vector<std::string> stepping;
  for (int i = 0; i < 3; ++i) stepping.push_back(NewSession());
  std::mutex lanes_mu;
  std::vector<std::pair<size_t, size_t>> lanes;  // (decisions, steps) of each batch
  std::promise<void> holding;
  std::promise<void> steps_queued;
  std::atomic<bool> first{true};
  sqlite_store().SetBeforeBatchForTest([&](size_t decisions, size_t steps) {
    {
      std::lock_guard l(lanes_mu);
      lanes.emplace_back(decisions, steps);
    }
    if (!first.exchange(false)) return;
    holding.set_value();
    // Three turn steps queue first, then the decision behind them.
    EXPECT_TRUE(sqlite_store().WaitForQueuedWrites(3, kWait));
    steps_queued.set_value();
    EXPECT_TRUE(sqlite_store().WaitForQueuedWrites(4, kWait));
  });
  std::vector<std::thread> threads;
  std::vector<Status> answers(5);
  threads.emplace_back([&] { answers[0] = AppendOne(other, 1)(); });
  EXPECT_EQ(holding.get_future().wait_for(kWait), std::future_status::ready);
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    std::string s = stepping[seq - 2];
    threads.emplace_back([&, s, seq] { answers[seq - 1] = AppendOne(s, 1)(); });
  }
  EXPECT_EQ(steps_queued.get_future().wait_for(kWait), std::future_status::ready);
  threads.emplace_back([&] {
    auto r = store_->Resolve("p1", [](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
      return ResolveAction::kResolved;
    });
    answers[4] = r.ok() ? Status::Ok() : r.status();
  });
  for (auto& t : threads) t.join();
  sqlite_store().SetBeforeBatchForTest(nullptr);
  for (const Status& s : answers) EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(lanes.size(), 5u);
  EXPECT_EQ(lanes[0], std::make_pair(size_t{0}, size_t{1}));  // the held step
  EXPECT_EQ(lanes[1], std::make_pair(size_t{1}, size_t{0}));  // the decision, before the steps
  for (size_t i = 2; i < 5; ++i) EXPECT_EQ(lanes[i], std::make_pair(size_t{0}, size_t{1}));
}

// A write that fails fails alone: the others of its batch commit.
TEST_P(GroupCommitTest, AFailingWriteFailsOnlyItsCaller) {
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 5; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  ASSERT_TRUE(AppendOne(sessions[2], 1)().ok());  // its write below collides
  const auto before = sqlite_store().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i == 2) {
      EXPECT_EQ(answers[i].code(), Code::kAlreadyExists) << answers[i].ToString();
    } else {
      EXPECT_TRUE(answers[i].ok()) << i << ": " << answers[i].ToString();
    }
  }
  EXPECT_EQ(sqlite_store().group_commit_stats().largest, 4u);
  EXPECT_EQ(sqlite_store().group_commit_stats().reruns, before.reruns);
  for (const std::string& s : sessions) EXPECT_EQ(store_->Events(s, 0)->size(), 1u) << s;
}

// A write whose error ends the whole transaction (SQLite rolls a
// transaction back on some errors) fails alone too: the others of the batch
// run again, each in a transaction of its own.
TEST_P(GroupCommitTest, AWriteThatEndsTheTransactionDoesNotFailTheOthers) {
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 5; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  ExecSql("CREATE TRIGGER roll_back BEFORE INSERT ON events WHEN NEW.session_id = '" + sessions[3] +
          "' BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END");
  const auto before = sqlite_store().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i == 3) {
      EXPECT_FALSE(answers[i].ok());
    } else {
      EXPECT_TRUE(answers[i].ok()) << i << ": " << answers[i].ToString();
    }
  }
  // The writes of the batch that had not failed ran again alone.
  EXPECT_EQ(sqlite_store().group_commit_stats().reruns - before.reruns, 3u);
  for (size_t i = 0; i < sessions.size(); ++i) {
    EXPECT_EQ(store_->Events(sessions[i], 0)->size(), i == 3 ? 0u : 1u) << i;
  }
}

// A batch that cannot commit at all (another process holds the database's
// write lock beyond the busy timeout) is reported to each of its waiters,
// and none of their writes is stored.
TEST_P(GroupCommitTest, AFailedBatchIsReportedToEachWaiter) {
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 4; ++i) sessions.push_back(NewSession());
  store_.reset();
  SqliteStoreOptions o = Options();
  o.busy_timeout = std::chrono::milliseconds(1);
  auto opened = SqliteStore::Open(db_path(), o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store_ = std::move(*opened);
  for (const std::string& s : sessions) writes.push_back(AppendOne(s, 1));

  auto other = Db::Open(db_path(), 1000);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Exec("BEGIN IMMEDIATE").ok());
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  ASSERT_TRUE((*other)->Exec("ROLLBACK").ok());
  for (const Status& s : answers) EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_EQ(sqlite_store().group_commit_stats().largest, 3u);
  for (const std::string& s : sessions) EXPECT_TRUE(store_->Events(s, 0)->empty()) << s;
  // The store writes again once the lock is free.
  EXPECT_TRUE(AppendOne(sessions[0], 1)().ok());
}

// --- PostgreSQL ------------------------------------------------------------------

class PgGroupCommitTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // Three connections: one writer of turn steps at a time (pool_size - 2),
    // so that the writes queued behind a held batch make the next one.
    ReopenWith(3, 16);
  }
  void ReopenWith(int pool_size, int group_commit_max) {
    store_.reset();
    PostgresStoreOptions o;
    o.now_ms = [this] { return ReadClock(); };
    o.lock_heartbeat = false;
    o.pool_size = pool_size;
    o.group_commit_max = group_commit_max;
    auto s = PostgresStore::Open(pg_url(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  PostgresStore& pg() { return static_cast<PostgresStore&>(*store_); }

  // As GroupCommitTest's: writes[0] first, held in its writer until the
  // others are queued (in their order) behind it; each write's answer.
  std::vector<Status> RunHeldBehindTheFirst(const std::vector<std::function<Status()>>& writes) {
    std::promise<void> holding;
    std::atomic<bool> first{true};
    const size_t others = writes.size() - 1;
    pg().SetBeforeBatchForTest([&](size_t, size_t) {
      if (!first.exchange(false)) return;
      holding.set_value();
      EXPECT_TRUE(pg().WaitForQueuedWrites(others, kWait));
    });
    std::vector<Status> out(writes.size());
    std::vector<std::thread> threads;
    threads.emplace_back([&] { out[0] = writes[0](); });
    EXPECT_EQ(holding.get_future().wait_for(kWait), std::future_status::ready);
    for (size_t i = 1; i < writes.size(); ++i) {
      threads.emplace_back([&, i] { out[i] = writes[i](); });
      // Queued in order: the batch runs them in this order.
      EXPECT_TRUE(pg().WaitForQueuedWrites(i, kWait));
    }
    for (auto& t : threads) t.join();
    pg().SetBeforeBatchForTest(nullptr);
    return out;
  }

  std::function<Status()> AppendOne(const std::string& session, uint64_t seq) {
    return [this, session, seq] {
      return store_->Append(session,
                            std::vector<Event>{MessageEvent(seq, Message::User("m" + session))});
    };
  }
  int64_t StoredEvents(const std::string& session) {
    return QueryInt("SELECT COUNT(*) FROM session_events WHERE session_id = '" + session + "'");
  }
};
INSTANTIATE_TEST_SUITE_P(Postgres, PgGroupCommitTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

TEST_P(PgGroupCommitTest, ConcurrentCommittersShareOneBatchAndAllAreDurable) {
  constexpr size_t kWriters = 8;
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (size_t i = 0; i < kWriters; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  const auto before = pg().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (const Status& s : answers) EXPECT_TRUE(s.ok()) << s.ToString();
  const auto after = pg().group_commit_stats();
  EXPECT_EQ(after.batches - before.batches, 1u);  // the first alone, then the 7 together
  EXPECT_EQ(after.writes - before.writes, kWriters);
  EXPECT_EQ(after.largest, kWriters - 1);
  EXPECT_EQ(after.reruns, before.reruns);
  // Every acknowledged write is visible to another connection.
  for (const std::string& s : sessions) EXPECT_EQ(StoredEvents(s), 1) << s;
}

// A write that fails fails alone (rolled back to its savepoint): the others
// of its batch commit, none runs twice.
TEST_P(PgGroupCommitTest, AFailingWriteFailsOnlyItsCaller) {
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 5; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  ASSERT_TRUE(AppendOne(sessions[2], 1)().ok());  // its write below collides
  // A statement that fails inside the batch too (the transaction is then
  // aborted until its savepoint is rolled back).
  ExecSql(
      "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      " RAISE EXCEPTION 'refused'; END $$");
  ExecSql(
      "CREATE TRIGGER refuse BEFORE INSERT ON session_events FOR EACH ROW WHEN"
      " (NEW.session_id = '" +
      sessions[3] + "') EXECUTE FUNCTION refuse()");
  const auto before = pg().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i == 2 || i == 3) {
      EXPECT_FALSE(answers[i].ok()) << i;
    } else {
      EXPECT_TRUE(answers[i].ok()) << i << ": " << answers[i].ToString();
    }
  }
  EXPECT_THAT(answers[3].message(), ::testing::HasSubstr("refused"));
  EXPECT_EQ(pg().group_commit_stats().largest, 4u);
  EXPECT_EQ(pg().group_commit_stats().reruns, before.reruns);
  for (size_t i = 0; i < sessions.size(); ++i) {
    EXPECT_EQ(StoredEvents(sessions[i]), i == 3 ? 0 : 1) << i;
  }
}

// A batch whose COMMIT is refused stores nothing; each of its writes runs
// again alone, so only the write that made the COMMIT fail fails.
TEST_P(PgGroupCommitTest, ABatchWhoseCommitFailsRunsEachWriteAgainAlone) {
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 5; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  // Checked at COMMIT (a deferred constraint trigger), not by the write's
  // own statements.
  ExecSql(
      "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      " RAISE EXCEPTION 'refused at commit'; END $$");
  ExecSql(
      "CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON session_events"
      " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.session_id = '" +
      sessions[3] + "') EXECUTE FUNCTION refuse_at_commit()");
  const auto before = pg().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i == 3) {
      EXPECT_THAT(answers[i].message(), ::testing::HasSubstr("refused at commit"));
    } else {
      EXPECT_TRUE(answers[i].ok()) << i << ": " << answers[i].ToString();
    }
  }
  // The four writes of the failed batch ran again, each alone.
  EXPECT_EQ(pg().group_commit_stats().reruns - before.reruns, 4u);
  for (size_t i = 0; i < sessions.size(); ++i) {
    EXPECT_EQ(StoredEvents(sessions[i]), i == 3 ? 0 : 1) << i;
  }
}

// A caller is answered only after the COMMIT that covers its write: while a
// later write of its batch waits for a row lock, the earlier write's caller
// has no answer and its event is not visible to other connections.
TEST_P(PgGroupCommitTest, ACallerIsAnsweredOnlyAfterItsBatchCommits) {
  const std::string held = NewSession();
  const std::string a = NewSession();
  const std::string b = NewSession();
  auto blocker = PgConn::Connect(pg_url());
  ASSERT_TRUE(blocker.ok()) << blocker.status().ToString();
  std::promise<void> holding;
  std::atomic<bool> first{true};
  pg().SetBeforeBatchForTest([&](size_t, size_t) {
    if (!first.exchange(false)) return;
    holding.set_value();
    EXPECT_TRUE(pg().WaitForQueuedWrites(2, kWait));
  });
  std::thread first_write([&] { EXPECT_TRUE(AppendOne(held, 1)().ok()); });
  ASSERT_EQ(holding.get_future().wait_for(kWait), std::future_status::ready);
  // b's row is locked by another transaction: the batch [a, b] waits in b.
  ASSERT_TRUE((*blocker)->Exec("BEGIN").ok());
  ASSERT_TRUE((*blocker)->Exec("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", {P(b)}).ok());
  auto blocker_pid = (*blocker)->Exec("SELECT pg_backend_pid()");
  ASSERT_TRUE(blocker_pid.ok());
  const std::string blocked_by_it = "SELECT COUNT(*) FROM pg_stat_activity WHERE " +
                                    blocker_pid->Text(0, 0) + " = ANY(pg_blocking_pids(pid))";
  auto answer_a = std::async(std::launch::async, AppendOne(a, 1));
  ASSERT_TRUE(pg().WaitForQueuedWrites(1, kWait));
  auto answer_b = std::async(std::launch::async, AppendOne(b, 1));
  first_write.join();
  // Until a backend of the store waits for the lock (a's write has run).
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  bool waiting = false;
  while (!waiting && std::chrono::steady_clock::now() < deadline) {
    waiting = QueryInt(blocked_by_it) > 0;
  }
  ASSERT_TRUE(waiting);
  EXPECT_EQ(answer_a.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(StoredEvents(a), 0);
  ASSERT_TRUE((*blocker)->Exec("ROLLBACK").ok());
  EXPECT_TRUE(answer_a.get().ok());
  EXPECT_TRUE(answer_b.get().ok());
  pg().SetBeforeBatchForTest(nullptr);
  EXPECT_EQ(StoredEvents(a), 1);
  EXPECT_EQ(StoredEvents(b), 1);
  EXPECT_EQ(pg().group_commit_stats().largest, 2u);
}

// A decision is committed by a writer of its own while the writer of turn
// steps is busy: it is not queued behind them.
TEST_P(PgGroupCommitTest, DecisionsAreNotQueuedBehindSteps) {
  Checkpoint cp;
  cp.session_id = NewSession();
  cp.turn_id = "turn_1";
  cp.tool_use_ids.push_back("tu_0");
  cp.outstanding.push_back(
      {"p1", PendingKind::kApproval, "tu_0", "bash", Json::object(), "", "", ""});
  ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  const std::string stepping = NewSession();
  const std::string queued = NewSession();

  std::promise<void> holding;
  std::promise<void> decided;
  std::shared_future<void> decided_f = decided.get_future().share();
  std::atomic<bool> first{true};
  std::atomic<bool> decided_while_held{false};
  pg().SetBeforeBatchForTest([&](size_t decisions, size_t steps) {
    if (decisions > 0 || steps == 0 || !first.exchange(false)) return;
    holding.set_value();
    // The only writer of steps stays here until the decision is answered.
    decided_while_held = decided_f.wait_for(kWait) == std::future_status::ready;
  });
  std::thread step([&] { EXPECT_TRUE(AppendOne(stepping, 1)().ok()); });
  ASSERT_EQ(holding.get_future().wait_for(kWait), std::future_status::ready);
  // A step queued behind the held one.
  std::thread step2([&] { EXPECT_TRUE(AppendOne(queued, 1)().ok()); });
  ASSERT_TRUE(pg().WaitForQueuedWrites(1, kWait));
  auto r = store_->Resolve("p1", [](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
    return ResolveAction::kResolved;
  });
  decided.set_value();
  step.join();
  step2.join();
  pg().SetBeforeBatchForTest(nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->closed);
  EXPECT_TRUE(decided_while_held);
  EXPECT_EQ(StoredEvents(queued), 1);
}

// With group_commit_max = 1 every write commits alone.
TEST_P(PgGroupCommitTest, OneWritePerBatchWhenTheMaximumIsOne) {
  ReopenWith(3, 1);
  std::vector<std::string> sessions;
  std::vector<std::function<Status()>> writes;
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(NewSession());
    writes.push_back(AppendOne(sessions.back(), 1));
  }
  const auto before = pg().group_commit_stats();
  std::vector<Status> answers = RunHeldBehindTheFirst(writes);
  for (const Status& s : answers) EXPECT_TRUE(s.ok()) << s.ToString();
  const auto after = pg().group_commit_stats();
  EXPECT_EQ(after.batches, before.batches);
  EXPECT_EQ(after.largest, 1u);
  for (const std::string& s : sessions) EXPECT_EQ(StoredEvents(s), 1) << s;
}

}  // namespace
}  // namespace agentloop::store
