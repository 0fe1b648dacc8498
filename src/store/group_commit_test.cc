// Group commit of the SQLite store: the writes of many sessions that are
// ready together share one transaction, each caller is answered only once
// its write is committed, and a write or a batch that fails is reported to
// exactly the callers it concerns. Batching is asserted by holding the
// first batch in the writer while the others queue (never by time).
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

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

}  // namespace
}  // namespace agentloop::store
