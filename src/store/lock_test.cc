// The session lock: busy, dead-pid takeover, expiry, release, heartbeat, and
// exclusion across processes.
#include <chrono>
#include <thread>

#include <sys/wait.h>

#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

using ::testing::HasSubstr;

class LockTest : public StoreTest {};
AL_STORE_CONFORMANCE(LockTest);
// The SQLite lock's own cases.
class SqliteLockTest : public StoreTest {};
AL_SQLITE_ONLY(SqliteLockTest);

// A pid that existed and has exited (reaped), so kill(pid, 0) fails ESRCH.
pid_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

TEST_P(LockTest, LockIsExclusiveAndReleasedOnDestruction) {
  std::string id = NewSession();
  auto first = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)->session_id(), id);

  auto second = store_->AcquireLock(id, getpid());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code(), Code::kBusy);
  EXPECT_THAT(second.error().message(), HasSubstr("session " + id + " is busy (held by pid " +
                                                  std::to_string(getpid()) + " since 2023-11-14T"));
  // Also refused from another connection (another process would see the same).
  auto other = OpenStore();
  EXPECT_EQ(other->AcquireLock(id, 12345).error().code(), Code::kBusy);

  first->reset();
  EXPECT_TRUE(other->AcquireLock(id, getpid()).ok());
}

TEST_P(LockTest, CreateLockedSessionCreatesItAlreadyLocked) {
  NewSessionParams p;
  p.workspace = "/tmp/ws";
  p.provider = "script";
  auto created = store_->CreateLockedSession(p, getpid());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string id = created->info.id;
  EXPECT_EQ(created->lock->session_id(), id);
  EXPECT_TRUE(store_->GetSession(id).ok());
  // Held: from this connection and from another one.
  EXPECT_EQ(store_->AcquireLock(id, getpid()).error().code(), Code::kBusy);
  auto other = OpenStore();
  EXPECT_EQ(other->AcquireLock(id, 12345).error().code(), Code::kBusy);
  EXPECT_TRUE(created->lock->Refresh().ok());
  created->lock.reset();
  EXPECT_TRUE(other->AcquireLock(id, getpid()).ok());
}

// The engine opens a session it has just created without loading it: the
// created info must be exactly what Load reads back, with nothing else.
TEST_P(LockTest, CreateLockedSessionInfoIsWhatLoadReadsBack) {
  NewSessionParams older;
  older.workspace = "/tmp/ws";
  auto first = store_->CreateLockedSession(older, getpid());
  ASSERT_TRUE(first.ok());
  NewSessionParams p;
  p.workspace = "/tmp/ws/../ws";
  p.provider = "openai";
  p.model = "m";
  p.command = CommandKind::kPlan;
  auto created = store_->CreateLockedSession(p, getpid());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto snap = store_->Load(created->info.id, LoadOptions{});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->info, created->info);
  EXPECT_TRUE(snap->messages.empty());
  EXPECT_EQ(snap->last_seq, 0u);
  EXPECT_FALSE(snap->last_turn_end.has_value());
  EXPECT_FALSE(snap->open_checkpoint.has_value());
  EXPECT_TRUE(snap->warnings.empty());
  EXPECT_FALSE(snap->recovered);
}

TEST_P(LockTest, CreateLockedSessionWithADuplicateIdChangesNothing) {
  std::string id = NewSession();
  auto held = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(held.ok());
  NewSessionParams p;
  p.id = id;
  p.workspace = "/tmp/other";
  auto dup = store_->CreateLockedSession(p, 4242);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code(), Code::kAlreadyExists);
  // The existing session and its holder are untouched.
  EXPECT_NE(store_->GetSession(id)->workspace, std::filesystem::path("/tmp/other"));
  EXPECT_TRUE((*held)->Refresh().ok());
}

TEST_P(LockTest, LockOfUnknownSessionIsNotFound) {
  EXPECT_EQ(store_->AcquireLock("nope", getpid()).error().code(), Code::kNotFound);
}

TEST_P(LockTest, LockOfDeadProcessIsTakenOver) {
  std::string id = NewSession();
  pid_t dead = DeadPid();
  auto stale = store_->AcquireLock(id, dead);
  ASSERT_TRUE(stale.ok());
  auto mine = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  // The old holder has lost it.
  Status refresh = (*stale)->Refresh();
  EXPECT_EQ(refresh.code(), Code::kBusy);
  EXPECT_THAT(refresh.message(), HasSubstr("lost"));
  // Releasing the stale handle must not release the new holder's lock.
  stale->reset();
  EXPECT_EQ(store_->AcquireLock(id, getpid()).error().code(), Code::kBusy);
  EXPECT_TRUE((*mine)->Refresh().ok());
}

TEST_P(LockTest, LockExpiresWithoutHeartbeat) {
  std::string id = NewSession();
  auto held = store_->AcquireLock(id, getppid());  // a live process that is not us
  ASSERT_TRUE(held.ok());
  clock_ms_ += 29'000;
  EXPECT_EQ(store_->AcquireLock(id, getpid()).error().code(), Code::kBusy);
  ASSERT_TRUE((*held)->Refresh().ok());  // heartbeat at +29 s
  clock_ms_ += 29'000;
  EXPECT_EQ(store_->AcquireLock(id, getpid()).error().code(), Code::kBusy);
  clock_ms_ += 2'000;  // 31 s since the last heartbeat
  EXPECT_TRUE(store_->AcquireLock(id, getpid()).ok());
}

TEST_P(LockTest, RemoveRefusedWhileLocked) {
  std::string id = NewSession();
  auto held = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(store_->RemoveSession(id).code(), Code::kBusy);
  held->reset();
  EXPECT_TRUE(store_->RemoveSession(id).ok());
}

TEST_P(LockTest, HeartbeatThreadRefreshesTheLock) {
  // Refresh every 10 ms of real time.
  auto store = OpenStore({.lock_heartbeat = true, .lock_ttl = std::chrono::milliseconds(30)});
  ASSERT_NE(store, nullptr);
  std::string id = NewSession();
  auto lock = store->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  const int64_t start = clock_ms_.load();
  ASSERT_EQ(HeartbeatOf(id), start);
  clock_ms_ += 1000;
  // Wait (bounded) for the background refresh to record the new time.
  EXPECT_TRUE(
      WaitForClockReads([&] { return HeartbeatOf(id) == start + 1000; }, std::chrono::seconds(20)));
  EXPECT_EQ(HeartbeatOf(id), start + 1000);
  lock->reset();
  EXPECT_EQ(HeartbeatOf(id), -1);  // released
}

size_t ThreadCount() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// One heartbeat thread per store refreshes every lock it holds: a server
// holding many sessions does not hold a thread per session.
TEST_P(LockTest, OneHeartbeatThreadRefreshesEveryHeldLock) {
  auto store = OpenStore({.lock_heartbeat = true, .lock_ttl = std::chrono::milliseconds(30)});
  ASSERT_NE(store, nullptr);
  std::string a = NewSession();
  std::string b = NewSession();
  const size_t before = ThreadCount();
  auto la = store->AcquireLock(a, getpid());
  ASSERT_TRUE(la.ok());
  EXPECT_EQ(ThreadCount(), before + 1);
  auto lb = store->AcquireLock(b, getpid());
  ASSERT_TRUE(lb.ok());
  EXPECT_EQ(ThreadCount(), before + 1);
  const int64_t start = clock_ms_.load();
  clock_ms_ += 1000;
  EXPECT_TRUE(WaitForClockReads(
      [&] { return HeartbeatOf(a) == start + 1000 && HeartbeatOf(b) == start + 1000; },
      std::chrono::seconds(20)));
  EXPECT_EQ(HeartbeatOf(a), start + 1000);
  EXPECT_EQ(HeartbeatOf(b), start + 1000);
  // A released lock stays released: the heartbeat does not bring it back.
  la->reset();
  clock_ms_ += 1000;
  EXPECT_TRUE(
      WaitForClockReads([&] { return HeartbeatOf(b) == start + 2000; }, std::chrono::seconds(20)));
  EXPECT_EQ(HeartbeatOf(b), start + 2000);
  EXPECT_EQ(HeartbeatOf(a), -1);
  lb->reset();
  store.reset();
  EXPECT_EQ(ThreadCount(), before);
}

// The running turn's writes go through its lock and land as the store's
// own calls would (both stores).
TEST_P(LockTest, WritesThroughTheLockReachTheSession) {
  std::string id = NewSession();
  auto held = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(held.ok());
  SessionLock& lock = **held;
  Event e = MessageEvent(1, Message::User("hello"));
  Status appended = lock.Append({&e, 1});
  ASSERT_TRUE(appended.ok()) << appended.ToString();
  Status set = lock.SetState("k", Json{{"v", 1}});
  ASSERT_TRUE(set.ok()) << set.ToString();
  auto state = store_->GetState(id, "k");
  ASSERT_TRUE(state.ok() && state->has_value()) << state.status().ToString();
  EXPECT_EQ(**state, (Json{{"v", 1}}));
  Event s = MakeEvent(EventType::kSettings, 2, Json{{"changes", Json::array()}});
  Status updated = lock.UpdateSettings(Json{{"format", 1}}, {&s, 1});
  ASSERT_TRUE(updated.ok()) << updated.ToString();
  auto settings = store_->GetSettings(id);
  ASSERT_TRUE(settings.ok() && settings->has_value()) << settings.status().ToString();
  EXPECT_EQ(**settings, (Json{{"format", 1}}));
  Checkpoint cp;
  cp.session_id = id;
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
  Status saved = lock.SaveCheckpoint(cp);
  ASSERT_TRUE(saved.ok()) << saved.ToString();
  ASSERT_TRUE(store_->OpenCheckpoint(id)->has_value());
  auto decided = store_->Resolve(item.id, [](Checkpoint&, const PendingItem&) {
    return Result<ResolveAction>(ResolveAction::kResolved);
  });
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
  EXPECT_TRUE(decided->closed);
  auto claimed = lock.ClaimDecided();
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  EXPECT_TRUE(claimed->has_value());
  EXPECT_EQ(store_->GetSession(id)->last_seq, 2u);
  // A checkpoint of another session is refused.
  cp.session_id = NewSession();
  EXPECT_EQ(lock.SaveCheckpoint(cp).code(), Code::kInvalidArgument);
}

// The PostgreSQL store fences the holder's writes by the lease's epoch.
class LeaseFenceTest : public StoreTest {};
INSTANTIATE_TEST_SUITE_P(Postgres, LeaseFenceTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

// An instance whose lease expired (its clock says it is still fine: it was
// paused) and was taken over by another cannot write one row more: every
// write through its lock is refused (lease lost) and changes nothing, while
// the new holder writes.
TEST_P(LeaseFenceTest, TheOldHolderOfAStolenLeaseCannotWrite) {
  std::string id = NewSession();
  auto old_holder = store_->AcquireLock(id, getppid());  // a live process that is not us
  ASSERT_TRUE(old_holder.ok());
  Event first = MessageEvent(1, Message::User("hello"));
  ASSERT_TRUE((*old_holder)->Append({&first, 1}).ok());
  const uint64_t old_epoch = (*old_holder)->epoch();
  EXPECT_GT(old_epoch, 0u);

  // No heartbeat for longer than the TTL: another instance takes it over.
  clock_ms_ += 31'000;
  auto other = OpenStore();
  auto new_holder = other->AcquireLock(id, getpid());
  ASSERT_TRUE(new_holder.ok()) << new_holder.status().ToString();
  EXPECT_EQ((*new_holder)->epoch(), old_epoch + 1);

  Event late = MessageEvent(2, Message::Assistant("too late"));
  Status refused = (*old_holder)->Append({&late, 1});
  EXPECT_TRUE(IsLeaseLost(refused)) << refused.ToString();
  EXPECT_EQ(refused.code(), Code::kLeaseLost);
  EXPECT_THAT(refused.ToString(), ::testing::StartsWith("lease_lost: session " + id));
  EXPECT_TRUE(IsLeaseLostReason(refused.WithContext("event sink").ToString()));
  EXPECT_FALSE(IsLeaseLostReason(Busy("lease_lost: not a lease").ToString()));
  EXPECT_THAT(refused.message(), HasSubstr("lost its lease (epoch " + std::to_string(old_epoch)));
  EXPECT_THAT(refused.message(), HasSubstr("held by pid " + std::to_string(getpid()) + " on "));
  EXPECT_EQ(store_->GetSession(id)->last_seq, 1u);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_events WHERE session_id = '" + id + "'"), 1);

  EXPECT_TRUE(IsLeaseLost((*old_holder)->SetState("k", Json(1))));
  EXPECT_FALSE(store_->GetState(id, "k")->has_value());
  Event s = MakeEvent(EventType::kSettings, 2, Json{{"changes", Json::array()}});
  EXPECT_TRUE(IsLeaseLost((*old_holder)->UpdateSettings(Json{{"format", 1}}, {&s, 1})));
  EXPECT_FALSE(store_->GetSettings(id)->has_value());
  Checkpoint cp;
  cp.session_id = id;
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
  EXPECT_TRUE(IsLeaseLost((*old_holder)->SaveCheckpoint(cp)));
  EXPECT_FALSE(store_->OpenCheckpoint(id)->has_value());
  EXPECT_TRUE(IsLeaseLost((*old_holder)->ClaimDecided().status()));
  // A busy session is not a lost lease.
  EXPECT_FALSE(IsLeaseLost(store_->AcquireLock(id, getpid()).status()));

  // The new holder writes; the old one's release leaves its lease alone.
  ASSERT_TRUE((*new_holder)->Append({&late, 1}).ok());
  old_holder->reset();
  EXPECT_TRUE((*new_holder)->Refresh().ok());
  Event more = MessageEvent(3, Message::User("more"));
  EXPECT_TRUE((*new_holder)->Append({&more, 1}).ok());
  EXPECT_EQ(store_->GetSession(id)->last_seq, 3u);
}

// A lease that expired without anyone taking it over is still its holder's:
// its writes go through (nobody else wrote) and renew it.
// A continuation whose lease was taken over between reading its decided
// batch and its first commit claims nothing: that commit is refused (lease
// lost) and the batch stays decided for the instance that took the session
// over, which claims it with its own first commit.
TEST_P(LeaseFenceTest, AStolenLeaseLeavesTheDecidedBatchToTheNewHolder) {
  std::string id = NewSession();
  auto old_holder = store_->AcquireLock(id, getppid());  // a live process that is not us
  ASSERT_TRUE(old_holder.ok());
  Checkpoint cp;
  cp.session_id = id;
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
  Event pause = MakeEvent(EventType::kPending, 1, Json::object());
  ASSERT_TRUE((*old_holder)->SaveCheckpoint(cp, {&pause, 1}).ok());
  ASSERT_TRUE(store_
                  ->Resolve(item.id,
                            [](Checkpoint&, const PendingItem&) {
                              return Result<ResolveAction>(ResolveAction::kResolved);
                            })
                  .ok());
  ASSERT_TRUE((*old_holder)->DecidedBatch()->has_value());

  clock_ms_ += 31'000;
  auto other = OpenStore();
  auto new_holder = other->AcquireLock(id, getpid());
  ASSERT_TRUE(new_holder.ok()) << new_holder.status().ToString();
  Event begin = MakeEvent(EventType::kTurnBegin, 2, Json::object());
  Status refused = (*old_holder)->AppendClaimingDecided({&begin, 1});
  EXPECT_TRUE(IsLeaseLost(refused)) << refused.ToString();
  EXPECT_EQ(*store_->ListDecided(), std::vector<std::string>{id});
  EXPECT_EQ(store_->GetSession(id)->last_seq, 1u);
  ASSERT_TRUE((*new_holder)->DecidedBatch()->has_value());
  Status claimed = (*new_holder)->AppendClaimingDecided({&begin, 1});
  ASSERT_TRUE(claimed.ok()) << claimed.ToString();
  EXPECT_TRUE(store_->ListDecided()->empty());
  EXPECT_EQ(store_->GetSession(id)->last_seq, 2u);
}

TEST_P(LeaseFenceTest, AnExpiredLeaseNobodyTookStillWritesAndIsRenewed) {
  std::string id = NewSession();
  auto held = store_->AcquireLock(id, getppid());
  ASSERT_TRUE(held.ok());
  clock_ms_ += 31'000;
  Event e = MessageEvent(1, Message::User("hello"));
  ASSERT_TRUE((*held)->Append({&e, 1}).ok());
  EXPECT_EQ(HeartbeatOf(id), clock_ms_.load());
  auto other = OpenStore();
  EXPECT_EQ(other->AcquireLock(id, getpid()).error().code(), Code::kBusy);
}

// A released lease fences its holder too (the session is free, not its).
TEST_P(LeaseFenceTest, WritesAfterAReleaseAreRefused) {
  std::string id = NewSession();
  NewSessionParams p;
  p.workspace = "/tmp/ws";
  auto created = store_->CreateLockedSession(p, getpid());
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->lock->epoch(), 1u);
  auto again = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(again.ok());
  SessionLock* raw = again->get();
  Event e = MessageEvent(1, Message::User("hello"));
  // Release by the store, as an operator clearing the lease would.
  ExecSql("UPDATE sessions SET lease_token = NULL WHERE id = '" + id + "'");
  Status refused = raw->Append({&e, 1});
  EXPECT_TRUE(IsLeaseLost(refused)) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("nobody holds it now"));
}

TEST_P(LockTest, LockExcludesAnotherProcess) {
  std::string id = NewSession();
  auto held = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(held.ok());
  pid_t child = fork();
  if (child == 0) {
    // Child: its own connection, its own pid. Exit code: 0 busy, 1 acquired,
    // 2 other error.
    auto s = OpenStore();  // same clock as the holder
    if (s == nullptr) _exit(2);
    auto l = s->AcquireLock(id, getpid());
    _exit(l.ok() ? 1 : l.error().code() == Code::kBusy ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A lock whose release failed (the write was refused: a failing disk, here
// another connection's write lock) leaves its row, naming this live process
// with a fresh heartbeat. The store that let it go takes it over at once;
// before, it refused its own session as busy until the row expired, and a
// server queued every input sent meanwhile with nothing left to run them.
TEST_P(SqliteLockTest, ARowLeftByAFailedReleaseIsFreeForTheStoreThatLeftIt) {
  SqliteStoreOptions o = Options();
  o.busy_timeout = std::chrono::milliseconds(10);
  auto opened = SqliteStore::Open(db_path(), o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<SqliteStore> store = std::move(*opened);
  const std::string id = NewSession();
  auto lock = store->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  {
    auto blocker = Db::Open(db_path(), 1000);
    ASSERT_TRUE(blocker.ok());
    ASSERT_TRUE((*blocker)->Exec("BEGIN IMMEDIATE").ok());
    lock->reset();  // its DELETE finds the database locked
    ASSERT_TRUE((*blocker)->Exec("ROLLBACK").ok());
  }
  // The row is still there: another process sees the session held.
  auto other = OpenStore();
  EXPECT_EQ(other->AcquireLock(id, 12345).error().code(), Code::kBusy);
  {
    // A takeover whose own write fails leaves the row as it was, still free
    // for this store.
    auto blocker = Db::Open(db_path(), 1000);
    ASSERT_TRUE(blocker.ok());
    ASSERT_TRUE((*blocker)->Exec("BEGIN IMMEDIATE").ok());
    auto refused = store->AcquireLock(id, getpid());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().code(), Code::kBusy) << refused.error().ToString();
    ASSERT_TRUE((*blocker)->Exec("ROLLBACK").ok());
  }

  auto again = store->AcquireLock(id, getpid());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  // Held again, and released for good this time.
  EXPECT_EQ(other->AcquireLock(id, 12345).error().code(), Code::kBusy);
  again->reset();
  EXPECT_TRUE(other->AcquireLock(id, 12345).ok());
}

}  // namespace
}  // namespace agentloop::store
