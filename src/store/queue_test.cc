// Queued inputs (SessionStore::EnqueueInput / TakeQueuedInput): kept in
// order across reopening, taken exactly once and only by the live holder of
// the session's lock, held back while a batch is paused; on PostgreSQL, the
// wake-up that lets another instance take them.
#include <unistd.h>

#include <future>
#include <set>
#include <thread>

#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

using ::testing::HasSubstr;

class QueueTest : public StoreTest {
 protected:
  std::vector<std::string> Inputs(const std::string& id) {
    auto list = store_->ListQueuedInputs(id);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    std::vector<std::string> out;
    if (list.ok()) {
      for (const QueuedInput& q : *list) out.push_back(q.continue_turn ? "<continue>" : q.input);
    }
    return out;
  }
  void Pause(const std::string& id) {
    Checkpoint cp;
    cp.session_id = id;
    cp.turn_id = "turn_1";
    cp.tool_use_ids.push_back("tu_1");
    cp.outstanding.push_back(
        {"pending_" + id, PendingKind::kApproval, "tu_1", "bash", Json::object(), "ask", "", ""});
    ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  }
};
AL_STORE_CONFORMANCE(QueueTest);

// The server's way: the next input is looked at and left queued; the turn
// that runs it takes it in the transaction of its first commit, so a
// process that stops before that commit leaves it for the next holder.
TEST_P(QueueTest, AnInputLeftQueuedIsTakenWithTheTurnsFirstCommit) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->EnqueueInput(id, "first", false).ok());
  ASSERT_TRUE(store_->EnqueueInput(id, "second", false).ok());
  {
    auto lock = store_->AcquireLock(id, getpid());
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    auto next = store_->NextQueuedInput(id, getpid());
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
    EXPECT_EQ((*next)->input, "first");
    // The holder stops before its turn's first commit: nothing is lost.
  }
  EXPECT_EQ(Inputs(id), (std::vector<std::string>{"first", "second"}));
  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  auto next = store_->NextQueuedInput(id, getpid());
  ASSERT_TRUE(next.ok() && next->has_value());
  Event begin = MakeEvent(EventType::kTurnBegin, 1, Json::object());
  ASSERT_TRUE((*lock)->AppendTakingInput({&begin, 1}, (*next)->id).ok());
  EXPECT_EQ(Inputs(id), (std::vector<std::string>{"second"}));
  EXPECT_EQ(store_->GetSession(id)->last_seq, 1u);
  // Taken once: a second take appends nothing.
  Event again = MakeEvent(EventType::kTurnBegin, 2, Json::object());
  auto twice = (*lock)->AppendTakingInput({&again, 1}, (*next)->id);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.code(), Code::kNotFound);
  EXPECT_EQ(store_->GetSession(id)->last_seq, 1u);
  // Another process's look is refused.
  auto not_ours = store_->NextQueuedInput(id, getppid());
  ASSERT_FALSE(not_ours.ok());
  EXPECT_TRUE(IsLeaseLost(not_ours.error()));
}

// Inputs queue behind each other, survive reopening the store, and come out
// oldest first, each once; a continuation is kept as one.
TEST_P(QueueTest, InputsAreTakenInOrderOnceAndSurviveAReopen) {
  std::string id = NewSession();
  std::string other = NewSession();
  EXPECT_EQ(*store_->EnqueueInput(id, "first", false), 1);
  EXPECT_EQ(*store_->EnqueueInput(id, "", true), 2);
  clock_ms_ += 10;  // `other` waits since later: listed after `id`
  EXPECT_EQ(*store_->EnqueueInput(other, "elsewhere", false), 1);
  EXPECT_EQ(*store_->EnqueueInput(id, "third", false), 3);
  auto empty = store_->EnqueueInput(id, "", false);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->EnqueueInput("no-such-session", "x", false).error().code(), Code::kNotFound);

  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(Inputs(id), (std::vector<std::string>{"first", "<continue>", "third"}));
  EXPECT_EQ(*store_->ListQueuedSessions(), (std::vector<std::string>{id, other}));

  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  auto a = store_->TakeQueuedInput(id, getpid());
  ASSERT_TRUE(a.ok() && a->has_value()) << a.status().ToString();
  EXPECT_EQ((*a)->input, "first");
  EXPECT_FALSE((*a)->continue_turn);
  EXPECT_EQ((*a)->session_id, id);
  auto b = store_->TakeQueuedInput(id, getpid());
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_TRUE((*b)->continue_turn);
  EXPECT_EQ(*store_->EnqueueInput(id, "fourth", false), 2);
  EXPECT_EQ((*store_->TakeQueuedInput(id, getpid()))->input, "third");
  EXPECT_EQ((*store_->TakeQueuedInput(id, getpid()))->input, "fourth");
  auto none = store_->TakeQueuedInput(id, getpid());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(*store_->ListQueuedSessions(), std::vector<std::string>{other});
  EXPECT_EQ(Inputs(other), std::vector<std::string>{"elsewhere"});
}

// Only the live holder of the session's lock takes: nobody without the
// lock, not another process, not a holder whose lock expired and was taken
// over (a fenced holder).
TEST_P(QueueTest, OnlyTheLiveLockHolderTakes) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->EnqueueInput(id, "one", false).ok());
  ASSERT_TRUE(store_->EnqueueInput(id, "two", false).ok());

  auto unlocked = store_->TakeQueuedInput(id, getpid());
  ASSERT_FALSE(unlocked.ok());
  EXPECT_TRUE(IsLeaseLost(unlocked.error())) << unlocked.error().ToString();

  // Our parent is a live process that is not us.
  auto theirs = store_->AcquireLock(id, getppid());
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  auto not_ours = store_->TakeQueuedInput(id, getpid());
  ASSERT_FALSE(not_ours.ok());
  EXPECT_TRUE(IsLeaseLost(not_ours.error()));
  EXPECT_EQ((*store_->TakeQueuedInput(id, getppid()))->input, "one");

  // Its lock expires: the old holder may take nothing any more, before and
  // after another takes the session over.
  clock_ms_ += 31'000;
  auto expired = store_->TakeQueuedInput(id, getppid());
  ASSERT_FALSE(expired.ok());
  EXPECT_TRUE(IsLeaseLost(expired.error()));
  auto ours = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  auto fenced = store_->TakeQueuedInput(id, getppid());
  ASSERT_FALSE(fenced.ok());
  EXPECT_TRUE(IsLeaseLost(fenced.error()));
  EXPECT_THAT(fenced.error().message(), HasSubstr("queued input"));
  EXPECT_EQ(Inputs(id), std::vector<std::string>{"two"});
  EXPECT_EQ((*store_->TakeQueuedInput(id, getpid()))->input, "two");
}

// Takers racing on several connections (instances) get each input once.
TEST_P(QueueTest, RacingTakersGetEachInputOnce) {
  std::string id = NewSession();
  constexpr int kInputs = 24;
  for (int i = 0; i < kInputs; ++i) {
    ASSERT_TRUE(store_->EnqueueInput(id, "input " + std::to_string(i), false).ok());
  }
  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  std::vector<std::unique_ptr<SessionStore>> stores;
  for (int i = 0; i < 4; ++i) stores.push_back(OpenStore());
  std::vector<std::future<std::vector<std::string>>> takers;
  for (auto& s : stores) {
    takers.push_back(std::async(std::launch::async, [&s, &id] {
      std::vector<std::string> got;
      for (;;) {
        auto taken = s->TakeQueuedInput(id, getpid());
        if (!taken.ok()) {
          // SQLite: a writer that waited out its busy timeout; try again.
          if (taken.error().code() == Code::kUnavailable) continue;
          ADD_FAILURE() << taken.error().ToString();
          break;
        }
        if (!taken->has_value()) break;
        got.push_back((*taken)->input);
      }
      return got;
    }));
  }
  std::multiset<std::string> all;
  for (auto& t : takers) {
    for (auto& s : t.get()) all.insert(s);
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kInputs));
  for (int i = 0; i < kInputs; ++i) EXPECT_EQ(all.count("input " + std::to_string(i)), 1u);
}

// A paused batch (open or decided) goes first: its inputs wait.
TEST_P(QueueTest, APausedSessionKeepsItsInputs) {
  std::string id = NewSession();
  Pause(id);
  ASSERT_TRUE(store_->EnqueueInput(id, "later", false).ok());
  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  EXPECT_FALSE(store_->TakeQueuedInput(id, getpid())->has_value());
  auto decided = store_->Resolve("pending_" + id, [](Checkpoint&, const PendingItem&) {
    return Result<ResolveAction>(ResolveAction::kResolved);
  });
  ASSERT_TRUE(decided.ok() && decided->closed);
  EXPECT_FALSE(store_->TakeQueuedInput(id, getpid())->has_value());
  ASSERT_TRUE((*lock)->ClaimDecided()->has_value());
  EXPECT_EQ((*store_->TakeQueuedInput(id, getpid()))->input, "later");
}

TEST_P(QueueTest, RemovingTheSessionRemovesItsInputs) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->EnqueueInput(id, "x", false).ok());
  ASSERT_TRUE(store_->RemoveSession(id).ok());
  EXPECT_TRUE(store_->ListQueuedSessions()->empty());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_inputs"), 0);
}

// Every call on a session that does not exist answers kNotFound, and
// changes nothing.
TEST_P(QueueTest, AnUnknownSessionIsNotFoundByEveryQueueCall) {
  EXPECT_EQ(store_->ListQueuedInputs("no-such-session").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->TakeQueuedInput("no-such-session", getpid()).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->NextQueuedInput("no-such-session", getpid()).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->EnqueueInput("no-such-session", "", true).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->ListQueuedSessions()->empty());
  // A session without inputs lists none (not an error).
  std::string id = NewSession();
  EXPECT_TRUE(Inputs(id).empty());
}

// PostgreSQL: a queued input wakes the instances (a wake-up row and NOTIFY
// in its transaction); after the grace a claimer gets the session as
// `queued`; continuing a decided batch does not drop the wake-up while
// inputs wait; taking the last input does.
class PgQueueWakeupTest : public QueueTest {};
INSTANTIATE_TEST_SUITE_P(Postgres, PgQueueWakeupTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

TEST_P(PgQueueWakeupTest, AQueuedInputWakesAClaimerUntilItIsTaken) {
  auto listener = store_->ListenForWakeups();
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  std::string id = NewSession();
  ASSERT_TRUE(store_->EnqueueInput(id, "next", false).ok());
  auto heard = (*listener)->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(heard.ok()) << heard.status().ToString();
  EXPECT_TRUE(*heard);
  auto early = store_->ClaimWakeups(10, std::chrono::seconds(30));
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_TRUE(early->queued.empty());
  EXPECT_EQ(early->next_due_in_ms, std::optional<int64_t>(1000));

  clock_ms_ += 1000;
  auto claimed = store_->ClaimWakeups(10, std::chrono::seconds(30));
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(claimed->queued, std::vector<std::string>{id});
  EXPECT_TRUE(claimed->sessions.empty());
  // Not dropped as stale while the input waits.
  clock_ms_ += 30'000;
  EXPECT_EQ(store_->ClaimWakeups(10, std::chrono::seconds(30))->queued,
            std::vector<std::string>{id});

  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  // Claiming a (missing) decided batch leaves the wake-up of the input.
  ASSERT_FALSE((*lock)->ClaimDecided()->has_value());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_wakeups"), 1);
  ASSERT_TRUE(store_->TakeQueuedInput(id, getpid())->has_value());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_wakeups"), 0);
}

// A paused session's wake-up is not handed out for its inputs (they wait
// for the decision) and is not dropped either; the decision hands it out
// as a decided batch, and after its continuation the inputs are next.
TEST_P(PgQueueWakeupTest, APausedSessionIsWokenByItsDecisionThenItsInputs) {
  std::string id = NewSession();
  Pause(id);
  ASSERT_TRUE(store_->EnqueueInput(id, "later", false).ok());
  clock_ms_ += 1000;
  auto paused = store_->ClaimWakeups(10, std::chrono::milliseconds(500));
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE(paused->queued.empty());
  EXPECT_TRUE(paused->sessions.empty());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_wakeups"), 1);

  ASSERT_TRUE(store_
                  ->Resolve("pending_" + id,
                            [](Checkpoint&, const PendingItem&) {
                              return Result<ResolveAction>(ResolveAction::kResolved);
                            })
                  .ok());
  clock_ms_ += 1000;
  EXPECT_EQ(store_->ClaimWakeups(10, std::chrono::milliseconds(500))->sessions,
            std::vector<std::string>{id});
  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE((*lock)->ClaimDecided()->has_value());
  clock_ms_ += 500;
  EXPECT_EQ(store_->ClaimWakeups(10, std::chrono::milliseconds(500))->queued,
            std::vector<std::string>{id});
}

}  // namespace
}  // namespace agentloop::store
