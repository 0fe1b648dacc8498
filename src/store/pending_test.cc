// Durable pauses: checkpoints, the pending index, and atomic resolution.
#include <latch>
#include <thread>

#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

using ::testing::HasSubstr;

class PendingTest : public StoreTest {
 protected:
  Checkpoint Batch(const std::string& session, std::vector<std::string> pending_ids) {
    Checkpoint cp;
    cp.session_id = session;
    cp.turn_id = "turn_1";
    cp.command = CommandKind::kFix;
    cp.counters.tool_calls = 3;
    cp.tool_use_ids.push_back("tu_run");
    cp.results_so_far.push_back(ContentBlock::ToolResult("tu_run", "ran", false));
    for (size_t i = 0; i < pending_ids.size(); ++i) {
      std::string tu = "tu_" + std::to_string(i);
      cp.tool_use_ids.push_back(tu);
      cp.outstanding.push_back({pending_ids[i], PendingKind::kApproval, tu, "bash",
                                Json{{"command", "make " + std::to_string(i)}}, "ask rule", "",
                                ""});
    }
    return cp;
  }
  static ResolveFn Approve(std::string content) {
    return [content](Checkpoint& cp, const PendingItem& item) -> Result<ResolveAction> {
      cp.results_so_far.push_back(ContentBlock::ToolResult(item.tool_use_id, content, false));
      return ResolveAction::kResolved;
    };
  }
};
AL_STORE_CONFORMANCE(PendingTest);

// A pause is one commit: the events that announce it (the `pending` event
// among them), the checkpoint and its index; a refused checkpoint stores
// none of the events.
TEST_P(PendingTest, APauseCommitsItsEventsWithItsCheckpoint) {
  std::string s = NewSession();
  std::vector<Event> events = {MakeEvent(EventType::kDecision, 1, Json::object()),
                               MakeEvent(EventType::kPending, 2, Json::object())};
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1"}), events).ok());
  EXPECT_EQ(store_->GetSession(s)->last_seq, 2u);
  EXPECT_TRUE(store_->GetPending("p1")->has_value());
  auto stored = store_->Events(s, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[1].type, "pending");

  std::vector<Event> more = {MakeEvent(EventType::kPending, 3, Json::object())};
  auto refused = store_->SaveCheckpoint(Batch(s, {"p1"}), more);  // p1 exists
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Code::kAlreadyExists);
  EXPECT_EQ(store_->GetSession(s)->last_seq, 2u);
  EXPECT_TRUE(store_->GetPending("p1")->has_value());
}

TEST_P(PendingTest, SaveListAndOpenCheckpoint) {
  std::string s1 = NewSession();
  std::string s2 = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s1, {"p1", "p2"})).ok());
  clock_ms_ += 5;
  Checkpoint q = Batch(s2, {"q1"});
  q.outstanding[0].kind = PendingKind::kQuestion;
  q.outstanding[0].tool = "ask_user";
  ASSERT_TRUE(store_->SaveCheckpoint(q).ok());

  auto all = store_->ListPending(std::nullopt);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].item.id, "p1");
  EXPECT_EQ((*all)[0].session_id, s1);
  EXPECT_EQ((*all)[0].turn_id, "turn_1");
  EXPECT_EQ((*all)[0].item.tool, "bash");
  EXPECT_EQ((*all)[0].item.arguments["command"], "make 0");
  EXPECT_EQ((*all)[0].item.reason, "ask rule");
  EXPECT_EQ((*all)[0].created_at_ms, 1'700'000'000'000);
  EXPECT_EQ((*all)[2].item.kind, PendingKind::kQuestion);

  auto only2 = store_->ListPending(std::string_view(s2));
  ASSERT_EQ(only2->size(), 1u);
  EXPECT_EQ((*only2)[0].item.id, "q1");

  auto open = store_->OpenCheckpoint(s1);
  ASSERT_TRUE(open.ok() && open->has_value());
  EXPECT_EQ(ToJson(**open), ToJson(Batch(s1, {"p1", "p2"})));
  EXPECT_EQ((*open)->outstanding.size(), 2u);
  EXPECT_EQ((*open)->command, CommandKind::kFix);
  EXPECT_EQ((*open)->counters.tool_calls, 3);
  EXPECT_FALSE(store_->OpenCheckpoint(NewSession())->has_value());
}

TEST_P(PendingTest, SaveValidates) {
  std::string s = NewSession();
  EXPECT_EQ(store_->SaveCheckpoint(Batch(s, {})).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->SaveCheckpoint(Batch("", {"x"})).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->SaveCheckpoint(Batch("nope", {"x"})).code(), Code::kNotFound);
  // An item without an id: refused, and nothing of the batch is stored.
  EXPECT_EQ(store_->SaveCheckpoint(Batch(s, {"y", ""})).code(), Code::kInvalidArgument);
  EXPECT_FALSE(store_->OpenCheckpoint(s)->has_value());
  EXPECT_FALSE(store_->LookupPending("y")->has_value());
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"dup"})).ok());
  Status again = store_->SaveCheckpoint(Batch(NewSession(), {"dup"}));
  EXPECT_EQ(again.code(), Code::kAlreadyExists);
  EXPECT_EQ(store_->ListPending(std::nullopt)->size(), 1u);
}

TEST_P(PendingTest, ResolveUntilTheBatchCloses) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1", "p2"})).ok());

  auto first = store_->Resolve("p2", Approve("out2"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->already_resolved);
  EXPECT_FALSE(first->closed);
  EXPECT_EQ(first->item.id, "p2");
  ASSERT_EQ(first->checkpoint.outstanding.size(), 1u);
  EXPECT_EQ(first->checkpoint.outstanding[0].id, "p1");
  EXPECT_EQ(first->checkpoint.results_so_far.size(), 2u);
  // The change is stored.
  auto pending = store_->ListPending(std::nullopt);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].item.id, "p1");
  EXPECT_EQ((*store_->OpenCheckpoint(s))->results_so_far.size(), 2u);

  auto second = store_->Resolve("p1", Approve("out1"));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->closed);
  EXPECT_TRUE(second->checkpoint.outstanding.empty());
  ASSERT_EQ(second->checkpoint.results_so_far.size(), 3u);
  EXPECT_EQ(second->checkpoint.results_so_far[2].text, "out1");
  EXPECT_EQ(second->checkpoint.session_id, s);
  EXPECT_TRUE(store_->ListPending(std::nullopt)->empty());
  EXPECT_FALSE(store_->OpenCheckpoint(s)->has_value());
}

TEST_P(PendingTest, AlreadyResolvedAndUnknownChangeNothing) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1", "p2"})).ok());
  ASSERT_TRUE(store_->Resolve("p1", Approve("x")).ok());
  int calls = 0;
  ResolveFn counting = [&](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
    ++calls;
    return ResolveAction::kResolved;
  };
  auto twice = store_->Resolve("p1", counting);
  ASSERT_TRUE(twice.ok());
  EXPECT_TRUE(twice->already_resolved);
  auto unknown = store_->Resolve("nope", counting);
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(unknown->already_resolved);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(store_->ListPending(std::nullopt)->size(), 1u);
  EXPECT_EQ((*store_->OpenCheckpoint(s))->results_so_far.size(), 2u);
}

// An item the pending index names as outstanding but its open checkpoint
// does not hold is a corrupt checkpoint: kDataLoss on every call that reads
// it (never "already resolved"), and the resolution changes nothing.
TEST_P(PendingTest, AnIndexedItemMissingFromItsCheckpointIsDataLoss) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1", "p2"})).ok());
  ExecSql("UPDATE checkpoints SET json = replace(json, '\"p2\"', '\"px\"')");
  int calls = 0;
  ResolveFn counting = [&](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
    ++calls;
    return ResolveAction::kResolved;
  };
  std::vector<Event> decision = {MakeEvent(EventType::kDecision, 0, Json::object())};
  decision[0].ts = 0;
  auto resolved = store_->Resolve("p2", counting, decision);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), Code::kDataLoss) << resolved.status().ToString();
  EXPECT_THAT(resolved.status().message(), HasSubstr("p2"));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(store_->GetSession(s)->last_seq, 0u);
  EXPECT_EQ(store_->LookupPending("p2").status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->GetPending("p2").status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->ListPending(s).status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->ListPending(std::nullopt).status().code(), Code::kDataLoss);
  // The session's tenant's view (what a server answers a caller through)
  // answers the same.
  auto view = store_->ForTenant("");
  auto viewed = view->Resolve("p2", counting, decision);
  ASSERT_FALSE(viewed.ok());
  EXPECT_EQ(viewed.status().code(), Code::kDataLoss) << viewed.status().ToString();
  EXPECT_EQ(view->LookupPending("p2").status().code(), Code::kDataLoss);
  EXPECT_EQ(view->GetPending("p2").status().code(), Code::kDataLoss);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(store_->GetSession(s)->last_seq, 0u);
  // The rest of the batch is untouched: its other item is still decided.
  auto other = store_->Resolve("p1", counting);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(other->already_resolved);
  EXPECT_EQ(calls, 1);
}

// An index row of a batch that is no longer open whose item is neither
// decided nor in the checkpoint: LookupPending is kDataLoss whatever the
// row's state, and a resolution finds nothing outstanding (already
// resolved, nothing changed), on both stores.
TEST_P(PendingTest, AClosedBatchMissingAnIndexedItemIsDataLossToLookUp) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1", "p2"})).ok());
  auto denied = store_->Resolve("p1", [](Checkpoint& cp, const PendingItem& item) {
    cp.results_so_far.push_back(ContentBlock::ToolResult(item.tool_use_id, "denied", true));
    return Result<ResolveAction>(ResolveAction::kCloseBatch);
  });
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  ASSERT_TRUE(denied->closed);
  ExecSql("UPDATE checkpoints SET json = replace(json, '\"p2\"', '\"px\"')");
  EXPECT_EQ(store_->LookupPending("p2").status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->GetPending("p2").status().code(), Code::kDataLoss);
  auto again = store_->Resolve("p2", Approve("x"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_resolved);
  EXPECT_EQ(*store_->ListDecided(), std::vector<std::string>{s});
}

// A checkpoint whose stored JSON cannot be read is kDataLoss on every call
// that reads it, on both stores, and nothing changes: a decision is not
// recorded, a decided batch is not claimed (it stays decided).
TEST_P(PendingTest, ACorruptCheckpointIsDataLossAndChangesNothing) {
  std::string open = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(open, {"p1", "p2"})).ok());
  std::string decided = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(decided, {"q1"})).ok());
  ASSERT_TRUE(store_->Resolve("q1", Approve("ok"))->closed);
  ExecSql("UPDATE checkpoints SET json = '{\"broken'");
  int calls = 0;
  ResolveFn counting = [&](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
    ++calls;
    return ResolveAction::kResolved;
  };
  std::vector<Event> decision = {MakeEvent(EventType::kDecision, 0, Json::object())};
  decision[0].ts = 0;
  auto resolved = store_->Resolve("p1", counting, decision);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), Code::kDataLoss) << resolved.status().ToString();
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(store_->GetSession(open)->last_seq, 0u);
  EXPECT_EQ(store_->LookupPending("p1").status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->GetPending("p1").status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->ListPending(open).status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->OpenCheckpoint(open).status().code(), Code::kDataLoss);
  EXPECT_EQ(store_->Load(open, LoadOptions{}).status().code(), Code::kDataLoss);
  auto claimed = store_->ClaimDecided(decided);
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(claimed.status().code(), Code::kDataLoss) << claimed.status().ToString();
  EXPECT_EQ(*store_->ListDecided(), std::vector<std::string>{decided});
}

TEST_P(PendingTest, DenyClosesTheWholeBatch) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1", "p2", "p3"})).ok());
  auto denied = store_->Resolve("p2", [](Checkpoint& cp, const PendingItem& item) {
    cp.results_so_far.push_back(ContentBlock::ToolResult(item.tool_use_id, "denied", true));
    return Result<ResolveAction>(ResolveAction::kCloseBatch);
  });
  ASSERT_TRUE(denied.ok());
  EXPECT_TRUE(denied->closed);
  // The siblings are still listed in the returned checkpoint so the caller
  // can answer them as skipped, but they are no longer pending.
  EXPECT_EQ(denied->checkpoint.outstanding.size(), 2u);
  EXPECT_TRUE(store_->ListPending(std::nullopt)->empty());
  EXPECT_TRUE(store_->Resolve("p1", Approve("x"))->already_resolved);
  EXPECT_TRUE(store_->Resolve("p3", Approve("x"))->already_resolved);
}

TEST_P(PendingTest, CallbackErrorLeavesTheItemPending) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"p1"})).ok());
  auto bad = store_->Resolve("p1", [](Checkpoint& cp, const PendingItem&) -> Result<ResolveAction> {
    cp.results_so_far.clear();  // must be rolled back
    return InvalidArgument("edited arguments: missing required field 'command'");
  });
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(bad.error().message(), HasSubstr("command"));
  auto pending = store_->ListPending(std::nullopt);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*store_->OpenCheckpoint(s))->results_so_far.size(), 1u);
  // A throwing callback is an error too, not a crash.
  auto threw = store_->Resolve("p1", [](Checkpoint&, const PendingItem&) -> Result<ResolveAction> {
    throw std::runtime_error("boom");
  });
  ASSERT_FALSE(threw.ok());
  EXPECT_THAT(threw.error().message(), HasSubstr("boom"));
  // And the item can still be resolved.
  EXPECT_TRUE(store_->Resolve("p1", Approve("ok"))->closed);
}

TEST_P(PendingTest, NewCheckpointSupersedesTheOpenOne) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"old1"})).ok());
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"new1"})).ok());
  auto pending = store_->ListPending(std::nullopt);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].item.id, "new1");
  EXPECT_TRUE(store_->Resolve("old1", Approve("x"))->already_resolved);
}

// Every item ever indexed can be looked up after it left the batch: decided
// (with its decision), cancelled by a sibling's denial or by a newer pause,
// or still outstanding; an id never indexed is nullopt.
TEST_P(PendingTest, LookupTellsWhatBecameOfAnItem) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"a1", "a2", "a3"})).ok());
  auto record = [](ApprovalDecision d) {
    return [d](Checkpoint& cp, const PendingItem& item) -> Result<ResolveAction> {
      cp.decisions.push_back({item, d});
      return d.kind == ApprovalDecision::Kind::kDeny ? ResolveAction::kCloseBatch
                                                     : ResolveAction::kResolved;
    };
  };
  auto out = store_->LookupPending("a1");
  ASSERT_TRUE(out.ok() && out->has_value()) << out.status().ToString();
  EXPECT_EQ((*out)->state, PendingLookup::State::kOutstanding);
  EXPECT_EQ((*out)->record.session_id, s);
  EXPECT_EQ((*out)->record.item.arguments["command"], "make 0");

  ASSERT_TRUE(store_->Resolve("a1", record(ApprovalDecision::Allow("web"))).ok());
  ASSERT_TRUE(store_->Resolve("a2", record(ApprovalDecision::Deny("no", "web"))).ok());
  auto a1 = store_->LookupPending("a1");
  ASSERT_TRUE(a1.ok() && a1->has_value());
  EXPECT_EQ((*a1)->state, PendingLookup::State::kDecided);
  ASSERT_TRUE((*a1)->decision.has_value());
  EXPECT_EQ((*a1)->decision->kind, ApprovalDecision::Kind::kAllow);
  EXPECT_EQ((*a1)->record.item.tool, "bash");
  auto a2 = store_->LookupPending("a2");
  EXPECT_EQ((*a2)->state, PendingLookup::State::kDecided);
  EXPECT_EQ((*a2)->decision->kind, ApprovalDecision::Kind::kDeny);
  auto a3 = store_->LookupPending("a3");
  ASSERT_TRUE(a3.ok() && a3->has_value());
  EXPECT_EQ((*a3)->state, PendingLookup::State::kCancelled);
  EXPECT_EQ((*a3)->record.item.arguments["command"], "make 2");
  // Neither listed nor resolvable any more.
  EXPECT_TRUE(store_->ListPending(std::nullopt)->empty());
  EXPECT_FALSE(store_->GetPending("a3")->has_value());
  EXPECT_TRUE(store_->Resolve("a3", record(ApprovalDecision::Allow("web")))->already_resolved);

  // a1/a2/a3's batch is decided, not yet continued.
  EXPECT_EQ(*store_->ListDecided(), std::vector<std::string>{s});
  ASSERT_TRUE(store_->ClaimDecided(s)->has_value());
  EXPECT_TRUE(store_->ListDecided()->empty());
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"b1"})).ok());
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"c1"})).ok());  // supersedes b1's batch
  EXPECT_EQ((*store_->LookupPending("b1"))->state, PendingLookup::State::kCancelled);
  EXPECT_EQ((*store_->LookupPending("c1"))->state, PendingLookup::State::kOutstanding);
  EXPECT_FALSE(store_->LookupPending("never")->has_value());
}

// A decision's events are numbered after the session's last stored event
// and stamped by the store; an item the callback takes out of the batch is
// settled with it; the decided batch is claimed once, and a session with
// nothing decided (or no such session) has nothing to claim.
TEST_P(PendingTest, DecisionsAreNumberedAfterTheLogAndTheirBatchIsClaimedOnce) {
  std::string s = NewSession();
  std::vector<Event> pause = {MakeEvent(EventType::kPending, 1, Json::object())};
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"d1", "d2", "d3"}), pause).ok());
  EXPECT_FALSE(store_->ClaimDecided(s)->has_value());  // open, not decided
  std::vector<Event> decision = {MakeEvent(EventType::kDecision, 0, Json::object())};
  decision[0].ts = 0;
  // d1's callback also answers d3 (takes it out of the batch).
  auto first = store_->Resolve(
      "d1",
      [](Checkpoint& cp, const PendingItem& item) -> Result<ResolveAction> {
        cp.results_so_far.push_back(ContentBlock::ToolResult(item.tool_use_id, "ok", false));
        std::erase_if(cp.outstanding, [](const PendingItem& p) { return p.id == "d3"; });
        return ResolveAction::kResolved;
      },
      decision);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->closed);
  EXPECT_EQ(first->checkpoint.outstanding.size(), 1u);
  EXPECT_TRUE(store_->Resolve("d3", Approve("x"))->already_resolved);
  auto pending = store_->ListPending(s);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].item.id, "d2");
  auto second = store_->Resolve("d2", Approve("ok"), decision);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->closed);
  auto log = store_->Events(s, 1);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].seq, 2u);
  EXPECT_EQ((*log)[1].seq, 3u);
  EXPECT_EQ((*log)[1].type, "decision");
  EXPECT_EQ(store_->GetSession(s)->last_seq, 3u);

  EXPECT_FALSE(store_->ClaimDecided("no-such-session")->has_value());
  auto claimed = store_->ClaimDecided(s);
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.status().ToString();
  EXPECT_EQ((*claimed)->results_so_far.size(), 3u);  // tu_run, d1, d2
  EXPECT_FALSE(store_->ClaimDecided(s)->has_value());
  EXPECT_TRUE(store_->ListDecided()->empty());
  EXPECT_FALSE(store_->OpenCheckpoint(s)->has_value());
}

// The turn that continues a decided batch claims it with its first commit:
// reading the batch claims nothing, a first commit that fails (its event
// clashes with the log) leaves the batch decided, the one that succeeds
// claims it with its events, and a second claim finds nothing decided.
TEST_P(PendingTest, ADecidedBatchIsClaimedWithTheFirstCommitOfItsTurn) {
  std::string s = NewSession();
  std::vector<Event> pause = {MakeEvent(EventType::kPending, 1, Json::object())};
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"e1"}), pause).ok());
  ASSERT_TRUE(store_->Resolve("e1", Approve("ok")).ok());
  auto lock = store_->AcquireLock(s, getpid());
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  auto read = (*lock)->DecidedBatch();
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
  EXPECT_EQ((*read)->results_so_far.size(), 2u);  // tu_run, e1
  EXPECT_EQ(*store_->ListDecided(), std::vector<std::string>{s});
  std::vector<Event> clash = {MakeEvent(EventType::kTurnBegin, 1, Json::object())};
  EXPECT_FALSE((*lock)->AppendClaimingDecided(clash).ok());
  EXPECT_EQ(*store_->ListDecided(), std::vector<std::string>{s});
  EXPECT_EQ(store_->GetSession(s)->last_seq, 1u);
  std::vector<Event> begin = {MakeEvent(EventType::kTurnBegin, 2, Json::object())};
  Status claimed = (*lock)->AppendClaimingDecided(begin);
  ASSERT_TRUE(claimed.ok()) << claimed.ToString();
  EXPECT_TRUE(store_->ListDecided()->empty());
  EXPECT_EQ(store_->GetSession(s)->last_seq, 2u);
  EXPECT_FALSE((*lock)->DecidedBatch()->has_value());
  std::vector<Event> again = {MakeEvent(EventType::kTurnBegin, 3, Json::object())};
  EXPECT_EQ((*lock)->AppendClaimingDecided(again).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->GetSession(s)->last_seq, 2u);
}

TEST_P(PendingTest, RacingResolversExactlyOneWins) {
  std::string s = NewSession();
  constexpr int kRounds = 20;
  std::vector<std::string> ids;
  for (int i = 0; i < kRounds; ++i) ids.push_back("race_" + std::to_string(i));
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, ids)).ok());
  // Two stores = two connections, as two processes would have.
  auto a = OpenStore();
  auto b = OpenStore();
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> fn_calls{0};
    std::atomic<int> wins{0};
    std::atomic<int> already{0};
    std::latch start(2);
    auto resolver = [&](SessionStore* store) {
      start.arrive_and_wait();
      auto r = store->Resolve(ids[round], [&](Checkpoint& cp, const PendingItem& item) {
        fn_calls++;
        cp.results_so_far.push_back(ContentBlock::ToolResult(item.tool_use_id, "ok", false));
        return Result<ResolveAction>(ResolveAction::kResolved);
      });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      (r->already_resolved ? already : wins)++;
    };
    std::thread t1(resolver, a.get());
    std::thread t2(resolver, b.get());
    t1.join();
    t2.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(already.load(), 1) << "round " << round;
    EXPECT_EQ(fn_calls.load(), 1) << "round " << round;
  }
  EXPECT_TRUE(store_->ListPending(std::nullopt)->empty());
  EXPECT_FALSE(store_->OpenCheckpoint(s)->has_value());
}

}  // namespace
}  // namespace agentloop::store

namespace agentloop::store {
namespace {

// Twenty deciders of one item, each on its own store (connection), released
// together: exactly one decision is taken, nineteen find it already
// resolved, and the callback runs once.
TEST_P(PendingTest, TwentyConcurrentDecisionsHaveOneWinner) {
  std::string s = NewSession();
  ASSERT_TRUE(store_->SaveCheckpoint(Batch(s, {"only", "other"})).ok());
  constexpr int kDeciders = 20;
  std::vector<std::unique_ptr<SessionStore>> stores;
  for (int i = 0; i < kDeciders; ++i) {
    stores.push_back(OpenStore());
    ASSERT_NE(stores.back(), nullptr);
  }
  std::atomic<int> fn_calls{0};
  std::atomic<int> wins{0};
  std::atomic<int> already{0};
  std::atomic<int> errors{0};
  std::latch start(kDeciders);
  std::vector<std::thread> threads;
  for (int i = 0; i < kDeciders; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto r = stores[i]->Resolve("only", [&](Checkpoint& cp, const PendingItem& item) {
        fn_calls++;
        cp.results_so_far.push_back(
            ContentBlock::ToolResult(item.tool_use_id, "decider " + std::to_string(i), false));
        return Result<ResolveAction>(ResolveAction::kResolved);
      });
      if (!r.ok()) {
        errors++;
        return;
      }
      (r->already_resolved ? already : wins)++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(already.load(), kDeciders - 1);
  EXPECT_EQ(fn_calls.load(), 1);
  // The batch stays open for its other item; the winner's result is stored once.
  auto open = store_->OpenCheckpoint(s);
  ASSERT_TRUE(open.ok() && open->has_value());
  ASSERT_EQ((*open)->outstanding.size(), 1u);
  EXPECT_EQ((*open)->outstanding[0].id, "other");
  EXPECT_EQ((*open)->results_so_far.size(), 2u);  // tu_run's and the winner's
  auto listed = store_->ListPending(std::nullopt);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].item.id, "other");
}

}  // namespace
}  // namespace agentloop::store
