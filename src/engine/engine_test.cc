#include "agentloop/engine.h"

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/event_data.h"

#include "base/ids.h"
#include "base/testing/files.h"
#include "engine/system_prompt.h"
#include "engine/testing/engine.h"
#include "engine/wiring.h"
#include "fake_model_server.h"
#include "store/sqlite_db.h"
#include "store/sqlite_store.h"
#include "tools/builtin.h"

namespace agentloop {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class CollectEvents : public EventSink {
 public:
  std::vector<Event> events;
  Status OnEvent(const Event& e) override {
    events.push_back(e);
    return Status::Ok();
  }
};

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() {
    workspace_ = tmp_.path() / "ws";
    fs::create_directories(workspace_);
    auto e = Engine::Create(testing::IsolatedEngineOptions(tmp_.path()));
    EXPECT_TRUE(e.ok()) << e.error().ToString();
    engine_ = std::move(*e);
  }

  SessionOptions Options(const std::string& script) {
    fs::path script_path = tmp_.path() / ("script_" + NewId("s") + ".json");
    WriteFile(script_path, script);
    SessionOptions o;
    o.workspace = workspace_;
    o.provider = ProviderKind::kScript;
    o.script_path = script_path.string();
    o.approver = ApproverMode::kDurable;
    return o;
  }

  TempDir tmp_;
  fs::path workspace_;
  std::unique_ptr<Engine> engine_;
};

constexpr const char* kWriteScript = R"({"responses": [
  {"tool_calls": [{"id": "c1", "name": "write", "input": {"file_path": "hello.txt", "content": "hi\n"}}]},
  {"text": "wrote hello.txt"}
]})";

TEST_F(EngineTest, RunWritesAndPersistsTheSession) {
  auto o = Options(kWriteScript);
  o.allow.push_back({"*", "--allow"});
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    CollectEvents ev;
    SessionCallbacks cb;
    cb.observer = &ev;
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, cb, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
    EXPECT_EQ(r->final_text, "wrote hello.txt");
    EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
    ASSERT_FALSE(ev.events.empty());
    EXPECT_EQ(ev.events.back().type, EventType::kTurnEnd);
    id = (*s)->id();
    EXPECT_EQ((*s)->history().size(), 4u);
  }
  SessionOptions reopen = Options(kWriteScript);
  reopen.session_id = id.substr(0, 8);
  auto again = engine_->OpenSession(reopen);
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  ASSERT_EQ((*again)->history().size(), 4u);
  EXPECT_EQ((*again)->history()[3].JoinedText(), "wrote hello.txt");
  EXPECT_TRUE((*again)->load_warnings().empty());
}

// Checks, as each commit boundary reaches the observer, that the store
// already holds it: the commit of a step_begin runs beside the model request
// (StoreSink::OverlapStepCommits), but nobody hears of an event before it is
// committed, and a tool's tool_call_begin is committed before the tool runs.
class CheckCommitted : public EventSink {
 public:
  explicit CheckCommitted(SessionStore& store) : store_(store) {}
  std::vector<std::string> uncommitted;
  int boundaries = 0;
  Status OnEvent(const Event& e) override {
    if (!IsCommitBoundary(e.type)) return Status::Ok();
    ++boundaries;
    Result<SessionInfo> info = store_.GetSession(e.session_id);
    if (!info.ok() || info->last_seq < e.seq) {
      uncommitted.push_back(std::string(EventTypeName(e.type)) + " " + std::to_string(e.seq));
    }
    return Status::Ok();
  }

 private:
  SessionStore& store_;
};

TEST_F(EngineTest, ObserversHearOfEachCommitBoundaryOnceItIsStored) {
  const char* script = R"({"responses": [
    {"tool_calls": [{"id": "w1", "name": "write", "input": {"file_path": "a.txt", "content": "a\n"}}]},
    {"tool_calls": [{"id": "w2", "name": "write", "input": {"file_path": "b.txt", "content": "b\n"}}]},
    {"text": "wrote both"}
  ]})";
  auto o = Options(script);
  o.allow.push_back({"*", "--allow"});
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  CheckCommitted check(engine_->store());
  SessionCallbacks cb;
  cb.observer = &check;
  auto r = RunBlocking(**s, op::UserInput{"write two files"}, cb, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  // 3 step_begin, 2 tool_call_begin, the turn_end.
  EXPECT_EQ(check.boundaries, 6);
  EXPECT_TRUE(check.uncommitted.empty()) << check.uncommitted.front();
  EXPECT_EQ(ReadFile(workspace_ / "b.txt"), "b\n");
  // Every event the turn emitted is stored, in order, once.
  auto stored = engine_->store().Events((*s)->id(), 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_FALSE(stored->empty());
  for (size_t i = 1; i < stored->size(); ++i) EXPECT_EQ((*stored)[i].seq, (*stored)[i - 1].seq + 1);
  EXPECT_EQ(stored->back().type, "turn_end");
}

// Regression (CLI e2e "pauses then other processes approve"): a reopened
// session must remember the files the model read before, or write/edit of
// an existing file is refused after a restart.
TEST_F(EngineTest, ReopenedSessionRemembersFilesAlreadyRead) {
  WriteFile(workspace_ / "notes.txt", "old\n");
  const char* script = R"({"responses": [
    {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "notes.txt"}}]},
    {"text": "read it"},
    {"tool_calls": [{"id": "w1", "name": "write", "input": {"file_path": "notes.txt", "content": "new\n"}}]},
    {"text": "rewrote it"}
  ]})";
  auto o = Options(script);
  o.allow.push_back({"*", "--allow"});
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"look"}, {}, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->final_text, "read it");
    id = (*s)->id();
  }
  o.session_id = id;
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok());
  auto r = RunBlocking(**s, op::UserInput{"now rewrite it"}, {}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->final_text, "rewrote it");
  EXPECT_EQ(ReadFile(workspace_ / "notes.txt"), "new\n");
}

// Leaves in the store the start of a turn that never ends, as a process
// killed while its model call was outstanding leaves it (turn_begin, the
// user's message, step_begin); returns the turn's id.
std::string WriteCutTurn(SessionStore& store, const std::string& sid, const std::string& prompt) {
  Result<SessionInfo> info = store.GetSession(sid);
  EXPECT_TRUE(info.ok());
  uint64_t seq = info.ok() ? info->last_seq : 0;
  const std::string turn = NewId("turn");
  std::vector<Event> events;
  auto add = [&](Event e) {
    e.seq = ++seq;
    e.ts = 1;
    events.push_back(std::move(e));
  };
  TurnBeginData begin;
  begin.input = "user";
  add(MakeEvent(begin, sid, turn));
  add(MakeEvent(MessageData{Message::User(prompt)}, sid, turn));
  add(MakeEvent(StepBeginData{.step = 1, .max_output_tokens = 0, .messages = 1}, sid, turn));
  EXPECT_TRUE(store.Append(sid, events).ok());
  return turn;
}

// The turn_end events of `turn` and the seq of each turn_begin after the
// cut turn's last event.
struct CutLog {
  std::vector<StoredEvent> ends;  // of the cut turn
  std::vector<StoredEvent> begins_after;
};
CutLog ReadCutLog(SessionStore& store, const std::string& sid, const std::string& turn) {
  CutLog out;
  auto events = store.Events(sid, 0);
  EXPECT_TRUE(events.ok());
  if (!events.ok()) return out;
  for (const StoredEvent& e : *events) {
    if (e.type == "turn_end" && e.turn_id == turn) out.ends.push_back(e);
    if (e.type == "turn_begin" && !out.ends.empty()) out.begins_after.push_back(e);
  }
  return out;
}

// Whoever takes a session over ends its cut turn first (failed, saying the
// process stopped), whatever then runs: here a new input.
TEST_F(EngineTest, ACutTurnEndsFailedBeforeANewTurnRuns) {
  auto o = Options(R"({"responses": [{"text": "first"}, {"text": "after the cut"}]})");
  std::string sid, cut;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    ASSERT_TRUE(RunBlocking(**s, op::UserInput{"one"}, {}, {}).ok());
    sid = (*s)->id();
  }
  cut = WriteCutTurn(engine_->store(), sid, "the cut one");
  auto snap = engine_->store().Load(sid, LoadOptions{.repair = false});
  ASSERT_TRUE(snap.ok());
  ASSERT_TRUE(snap->unfinished_turn.has_value());
  EXPECT_EQ(snap->unfinished_turn->turn_id, cut);

  o.session_id = sid;
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  CutLog opened = ReadCutLog(engine_->store(), sid, cut);
  ASSERT_EQ(opened.ends.size(), 1u);
  Json end = Json::parse(opened.ends[0].json);
  EXPECT_EQ(end["stop"], "failed");
  EXPECT_THAT(end["reason"].get<std::string>(), HasSubstr(std::string(kCutTurnReason)));
  auto r = RunBlocking(**s, op::UserInput{"two"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->final_text, "after the cut");
  CutLog after = ReadCutLog(engine_->store(), sid, cut);
  EXPECT_EQ(after.ends.size(), 1u);
  ASSERT_EQ(after.begins_after.size(), 1u);
  EXPECT_NE(after.begins_after[0].turn_id, cut);
}

// Continue (`agentloop resume ID`, the server's {"continue": true}, a queued
// continuation) retries the cut turn once it has ended: the same turn id.
TEST_F(EngineTest, ContinueRetriesACutTurnAfterEndingIt) {
  auto o = Options(R"({"responses": [{"text": "first"}, {"text": "continued"}]})");
  std::string sid;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(RunBlocking(**s, op::UserInput{"one"}, {}, {}).ok());
    sid = (*s)->id();
    EXPECT_FALSE((*s)->Preview(op::Continue{}).ok());
  }
  const std::string cut = WriteCutTurn(engine_->store(), sid, "the cut one");
  o.session_id = sid;
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok());
  auto what = (*s)->Preview(op::Continue{});
  ASSERT_TRUE(what.ok()) << what.error().ToString();
  EXPECT_EQ(*what, "retrying the failed turn");
  auto r = RunBlocking(**s, op::Continue{}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(r->final_text, "continued");
  CutLog log = ReadCutLog(engine_->store(), sid, cut);
  ASSERT_EQ(log.ends.size(), 2u);  // failed, then the retry's completed
  EXPECT_EQ(Json::parse(log.ends[0].json)["stop"], "failed");
  EXPECT_EQ(Json::parse(log.ends[1].json)["stop"], "completed");
  ASSERT_EQ(log.begins_after.size(), 1u);
  EXPECT_EQ(log.begins_after[0].turn_id, cut);
  EXPECT_EQ(Json::parse(log.begins_after[0].json)["input"], "retry");
  EXPECT_FALSE((*s)->Preview(op::Continue{}).ok());
  auto nothing = RunBlocking(**s, op::Continue{}, {}, {});
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.error().code(), Code::kFailedPrecondition);
}

// store.sync reaches the connection of the store the engine opens.
TEST_F(EngineTest, StoreSyncOptionSetsThePragmaOfTheOpenedStore) {
  auto pragma = [](Engine& e) -> int64_t {
    auto* sqlite = dynamic_cast<store::SqliteStore*>(&e.store());
    EXPECT_NE(sqlite, nullptr);
    if (sqlite == nullptr) return -1;
    auto v = sqlite->Synchronous();
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : -1;
  };
  EXPECT_EQ(pragma(*engine_), 2);  // default: FULL
  EngineOptions eo = testing::IsolatedEngineOptions(tmp_.path());
  eo.store_sync = StoreSync::kNormal;
  auto normal = Engine::Create(eo);
  ASSERT_TRUE(normal.ok()) << normal.error().ToString();
  EXPECT_EQ(pragma(**normal), 1);  // NORMAL
  // And a turn commits through it.
  auto o = Options(kWriteScript);
  o.allow.push_back({"*", "--allow"});
  auto session = (*normal)->OpenSession(o);
  ASSERT_TRUE(session.ok()) << session.error().ToString();
  auto r = RunBlocking(**session, op::UserInput{"create hello.txt"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
}

TEST_F(EngineTest, SecondOpenOfARunningSessionIsBusy) {
  auto o = Options(kWriteScript);
  auto first = engine_->OpenSession(o);
  ASSERT_TRUE(first.ok());
  SessionOptions o2 = Options(kWriteScript);
  o2.session_id = (*first)->id();
  auto second = engine_->OpenSession(o2);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code(), Code::kBusy);
  EXPECT_THAT(second.error().message(), HasSubstr("busy"));
}

TEST_F(EngineTest, DurablePauseThenApproveFromAnotherSessionObject) {
  auto o = Options(kWriteScript);
  std::string pending_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stop, StopReason::kPendingApproval);
    ASSERT_EQ(r->pending.size(), 1u);
    pending_id = r->pending[0].id;
    EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
    // A new prompt while paused is refused with the ids to resolve.
    auto blocked = RunBlocking(**s, op::UserInput{"another"}, {}, {});
    ASSERT_FALSE(blocked.ok());
    EXPECT_THAT(blocked.error().message(), HasSubstr(pending_id));
  }
  auto pending = engine_->ListPending(std::nullopt);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].item.tool, "write");

  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  auto rep = engine_->Submit(op::Decide{pending_id, approve}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_FALSE(rep->already_resolved);
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kCompleted) << rep->resumed->reason;
  EXPECT_EQ(rep->resumed->final_text, "wrote hello.txt");
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");

  auto twice = engine_->Submit(op::Decide{pending_id, approve}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(twice.ok());
  EXPECT_TRUE(twice->already_resolved);
  EXPECT_TRUE(engine_->ListPending(std::nullopt)->empty());
}

// A resolution for a tenant finds and decides only that tenant's items: to
// another tenant the item is unknown (already_resolved) and stays pending.
TEST_F(EngineTest, AResolutionForATenantDecidesOnlyThatTenantsItems) {
  auto o = Options(kWriteScript);
  o.tenant = "acme";
  std::string pending_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->pending.size(), 1u);
    pending_id = r->pending[0].id;
  }
  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  for (const char* other : {"globex", ""}) {
    approve.tenant = other;
    auto rep = engine_->Submit(op::Decide{pending_id, approve}, Options(kWriteScript), {}, {});
    ASSERT_TRUE(rep.ok()) << rep.error().ToString();
    EXPECT_TRUE(rep->already_resolved) << other;
    EXPECT_FALSE(rep->resumed.has_value());
    EXPECT_EQ(engine_->ListPending(std::nullopt)->size(), 1u);
    EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
  }
  approve.tenant = "acme";
  auto rep = engine_->Submit(op::Decide{pending_id, approve}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_FALSE(rep->already_resolved);
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kCompleted) << rep->resumed->reason;
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
}

// A decision reports what it came to in the one vocabulary every front end
// uses; a decision about an item someone else decided names who and how.
TEST_F(EngineTest, ADecisionSaysWhatItCameToAndWhoDecidedFirst) {
  std::string pending_id;
  {
    auto s = engine_->OpenSession(Options(kWriteScript));
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->pending.size(), 1u);
    pending_id = r->pending[0].id;
  }
  Resolution deny;
  deny.kind = Resolution::Kind::kDeny;
  deny.reason = "not today";
  deny.by = "alice";
  deny.continue_turn = false;
  auto first = engine_->Submit(op::Decide{pending_id, deny}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(first->outcome, DecisionOutcome::kResumed);

  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  approve.by = "bob";
  auto conflict = engine_->Submit(op::Decide{pending_id, approve}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(conflict.ok()) << conflict.error().ToString();
  EXPECT_TRUE(conflict->already_resolved);
  EXPECT_EQ(conflict->outcome, DecisionOutcome::kConflict);
  ASSERT_TRUE(conflict->earlier.has_value());
  EXPECT_EQ(conflict->earlier->by, "alice");
  EXPECT_EQ(DecisionOutcomeName(conflict->outcome), "conflict");
  EXPECT_EQ(DescribeDecisionOutcome(conflict->outcome, 0, conflict->earlier),
            "already resolved differently: denied by alice (not today); nothing changed");

  auto same = engine_->Submit(op::Decide{pending_id, deny}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->outcome, DecisionOutcome::kAlreadyResolved);
  EXPECT_THAT(DescribeDecisionOutcome(same->outcome, 0, same->earlier),
              HasSubstr("already resolved the same way: denied by alice"));
  auto unknown = engine_->Submit(op::Decide{"apr_unknown", deny}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->outcome, DecisionOutcome::kAlreadyResolved);
  EXPECT_FALSE(unknown->earlier.has_value());
}

// Every stored event, from the turns and from the engine itself (the
// resolution's decision record), carries the engine's clock as `ts`, and the
// store keeps the event's JSON as it was emitted.
TEST_F(EngineTest, StoredEventsCarryTheEnginesClock) {
  int64_t now = 1767225600000;
  EngineOptions eo;
  eo.env = {{"HOME", (tmp_.path() / "home").string()}};
  eo.data_dir = tmp_.path() / "data_ts";
  eo.now_ms = [&] { return ++now; };
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();
  std::string id, pending_id;
  CollectEvents seen;
  {
    auto s = (*engine)->OpenSession(Options(kWriteScript));
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    SessionCallbacks cb;
    cb.observer = &seen;
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, cb, {});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->stop, StopReason::kPendingApproval);
    pending_id = r->pending.at(0).id;
    id = (*s)->id();
  }
  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  auto rep = (*engine)->Submit(op::Decide{pending_id, approve}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  ASSERT_TRUE(rep->resumed.has_value());

  auto stored = (*engine)->store().Events(id, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_GT(stored->size(), seen.events.size());
  int64_t last = 0;
  for (const StoredEvent& row : *stored) {
    Json j = Json::parse(row.json);
    ASSERT_TRUE(j.contains("ts")) << row.json;
    // FromJson checks the data against its type's struct (docs/protocol.md).
    auto e = Event::FromJson(j);
    ASSERT_TRUE(e.ok()) << row.json << ": " << e.error().ToString();
    int64_t ts = j["ts"].get<int64_t>();
    EXPECT_GT(ts, 1767225600000) << row.json;
    EXPECT_LE(ts, now) << row.json;
    EXPECT_GT(ts, last) << "ts follows seq: " << row.json;
    last = ts;
  }
  // The observer saw the same ts the store kept.
  for (const Event& e : seen.events) {
    if (!ShouldPersist(e.type)) continue;
    for (const StoredEvent& row : *stored) {
      if (row.seq == e.seq) {
        EXPECT_EQ(row.json, e.Dump(id));
      }
    }
  }
}

TEST_F(EngineTest, InvalidEditLeavesItemPendingThenValidEditRuns) {
  auto o = Options(kWriteScript);
  std::string pending_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"go"}, {}, {});
    ASSERT_TRUE(r.ok());
    pending_id = r->pending.at(0).id;
  }
  Resolution bad;
  bad.edited_arguments = Json{{"file_path", 5}};
  auto rep = engine_->Submit(op::Decide{pending_id, bad}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_EQ(rep->outcome, DecisionOutcome::kInvalidEdit);
  EXPECT_EQ(DecisionOutcomeName(rep->outcome), "invalid_edit");
  EXPECT_FALSE(rep->refused.empty());
  EXPECT_EQ(engine_->ListPending(std::nullopt)->size(), 1u);

  Resolution good;
  good.edited_arguments = Json{{"file_path", "other.txt"}, {"content", "edited\n"}};
  auto rep2 = engine_->Submit(op::Decide{pending_id, good}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(rep2.ok()) << rep2.error().ToString();
  EXPECT_EQ(ReadFile(workspace_ / "other.txt"), "edited\n");
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
}

TEST_F(EngineTest, DenyClosesTheBatchAndEndsTheTurnDenied) {
  auto o = Options(kWriteScript);
  std::string pending_id, session_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"go"}, {}, {});
    ASSERT_TRUE(r.ok());
    pending_id = r->pending.at(0).id;
    session_id = (*s)->id();
  }
  Resolution deny;
  deny.kind = Resolution::Kind::kDeny;
  deny.reason = "not that file";
  auto rep = engine_->Submit(op::Decide{pending_id, deny}, Options(kWriteScript), {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kDenied);
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
  SessionOptions reopen = Options(kWriteScript);
  reopen.session_id = session_id;
  auto s = engine_->OpenSession(reopen);
  ASSERT_TRUE(s.ok());
  auto h = (*s)->history();
  ASSERT_GE(h.size(), 4u);
  EXPECT_EQ(h[2].content.at(0).text, "denied: not that file");
  EXPECT_FALSE((*s)->open_checkpoint().has_value());
}

TEST_F(EngineTest, DurableQuestionIsAnsweredAndTheTurnResumes) {
  auto o = Options(R"({"responses": [
    {"tool_calls": [{"id": "q", "name": "ask_user", "input": {"question": "Which colour?"}}]},
    {"text": "ok, blue it is"}
  ]})");
  std::string pending_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"paint"}, {}, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stop, StopReason::kPendingQuestion);
    pending_id = r->pending.at(0).id;
    EXPECT_EQ(r->pending[0].reason, "Which colour?");
  }
  Resolution approve;  // the wrong verb for a question
  auto wrong = engine_->Submit(op::Decide{pending_id, approve}, o, {}, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.error().message(), HasSubstr("answer"));
  Resolution answer;
  answer.kind = Resolution::Kind::kAnswer;
  answer.answer = "blue";
  auto rep = engine_->Submit(op::Decide{pending_id, answer}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->final_text, "ok, blue it is");
}

constexpr const char* kTwoWritesScript = R"({"responses": [
  {"tool_calls": [
    {"id": "w1", "name": "write", "input": {"file_path": "one.txt", "content": "1\n"}},
    {"id": "w2", "name": "write", "input": {"file_path": "two.txt", "content": "2\n"}}]},
  {"text": "wrote both"}
]})";

// Pauses a new session on `script` and returns {session id, pending ids}.
struct Paused {
  std::string session_id;
  std::vector<std::string> pending;
};

class DecisionPathTest : public EngineTest {
 protected:
  Paused Pause(const SessionOptions& o) {
    Paused p;
    auto s = engine_->OpenSession(o);
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    if (!s.ok()) return p;
    auto r = RunBlocking(**s, op::UserInput{"go"}, {}, {});
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return p;
    EXPECT_EQ(r->stop, StopReason::kPendingApproval) << r->reason;
    p.session_id = (*s)->id();
    for (const auto& item : r->pending) p.pending.push_back(item.id);
    return p;
  }
  // The stored event types of the session, in seq order.
  std::vector<std::string> EventTypes(const std::string& session_id) {
    std::vector<std::string> types;
    auto events = engine_->store().Events(session_id, 0);
    EXPECT_TRUE(events.ok());
    if (events.ok()) {
      for (const auto& e : *events) types.push_back(e.type);
    }
    return types;
  }
  static Resolution Approve() {
    Resolution r;
    r.kind = Resolution::Kind::kApprove;
    return r;
  }
};

TEST_F(DecisionPathTest, AnApprovedCallRunsThroughTheTurnWithItsBeginRecordFirst) {
  auto o = Options(kWriteScript);
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 1u);
  auto rep = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kCompleted) << rep->resumed->reason;
  std::vector<std::string> types = EventTypes(p.session_id);
  auto at = [&](const std::string& type, size_t from) {
    return std::find(types.begin() + static_cast<std::ptrdiff_t>(from), types.end(), type) -
           types.begin();
  };
  auto pending = static_cast<size_t>(at("pending", 0));
  auto decision = static_cast<size_t>(at("decision", pending));
  auto resumed = static_cast<size_t>(at("turn_begin", decision));
  auto begin = static_cast<size_t>(at("tool_call_begin", resumed));
  auto end = static_cast<size_t>(at("tool_call_end", begin));
  ASSERT_LT(end, types.size()) << ::testing::PrintToString(types);
  EXPECT_LT(pending, decision);
  EXPECT_LT(decision, resumed);
  EXPECT_LT(begin, end);
  // One decision event after the pause: the continued turn does not log it again.
  EXPECT_EQ(
      std::count(types.begin() + static_cast<std::ptrdiff_t>(pending), types.end(), "decision"), 1);
}

TEST_F(DecisionPathTest, NothingRunsUntilEveryItemOfTheBatchIsDecided) {
  auto o = Options(kTwoWritesScript);
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 2u);
  auto first = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_FALSE(first->resumed.has_value());
  EXPECT_EQ(first->outstanding, 1);
  EXPECT_FALSE(fs::exists(workspace_ / "one.txt"));
  auto second = engine_->Submit(op::Decide{p.pending[1], Approve()}, o, {}, {});
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  ASSERT_TRUE(second->resumed.has_value());
  EXPECT_EQ(second->resumed->final_text, "wrote both");
  EXPECT_EQ(ReadFile(workspace_ / "one.txt"), "1\n");
  EXPECT_EQ(ReadFile(workspace_ / "two.txt"), "2\n");
}

TEST_F(DecisionPathTest, ADenialCancelsAnApprovedSiblingAsALiveDenialWould) {
  auto o = Options(kTwoWritesScript);
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 2u);
  ASSERT_TRUE(engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {}).ok());
  Resolution deny;
  deny.kind = Resolution::Kind::kDeny;
  deny.reason = "not two";
  auto rep = engine_->Submit(op::Decide{p.pending[1], deny}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kDenied);
  EXPECT_FALSE(fs::exists(workspace_ / "one.txt"));
  EXPECT_FALSE(fs::exists(workspace_ / "two.txt"));
  SessionOptions reopen = o;
  reopen.session_id = p.session_id;
  auto s = engine_->OpenSession(reopen);
  ASSERT_TRUE(s.ok());
  auto h = (*s)->history();
  ASSERT_GE(h.size(), 4u);
  EXPECT_THAT(h[2].content.at(0).text, HasSubstr("skipped: a sibling tool call"));
  EXPECT_EQ(h[2].content.at(1).text, "denied: not two");
  EXPECT_EQ(h[3].tag, std::string(kEngineStopTag));
}

TEST_F(DecisionPathTest, AnEditIntoADeniedCallIsRefusedAndTheItemStaysPending) {
  auto o = Options(kWriteScript);
  o.deny.push_back({"write(secret*)", "--deny"});
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 1u);
  Resolution edit = Approve();
  edit.edited_arguments = Json{{"file_path", "secret.txt"}, {"content", "x"}};
  auto rep = engine_->Submit(op::Decide{p.pending[0], edit}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_EQ(rep->outcome, DecisionOutcome::kInvalidEdit);
  EXPECT_THAT(rep->refused, HasSubstr("denied"));
  EXPECT_FALSE(fs::exists(workspace_ / "secret.txt"));
  auto still = engine_->FindPending(p.pending[0]);
  ASSERT_TRUE(still.ok());
  EXPECT_TRUE(still->has_value());
}

// An approval in a read-only command is checked against the session's tools
// before it is recorded; the store-only check that defers to them leaves no
// trace (the item is recorded once, by the session).
TEST_F(DecisionPathTest, AnApprovalInPlanModeIsCheckedByTheSessionAndRecordedOnce) {
  auto o = Options(R"({"responses": [
    {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "notes.txt"}}]},
    {"text": "read it"}
  ]})");
  WriteFile(workspace_ / "notes.txt", "n\n");
  o.command = CommandKind::kPlan;
  o.ask.push_back({"read(*)", "--ask"});
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 1u);
  auto rep = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_FALSE(rep->already_resolved);
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->final_text, "read it");
  std::vector<std::string> types = EventTypes(p.session_id);
  EXPECT_EQ(std::count(types.begin(), types.end(), "decision"), 2)  // the ask, the approval
      << ::testing::PrintToString(types);
}

// A denial needs nothing of the session but its stored batch: it is recorded
// even while another object holds the session, and the holder continues.
TEST_F(DecisionPathTest, ADenialWhileTheSessionIsHeldIsRecordedForTheHolder) {
  auto o = Options(kWriteScript);
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 1u);
  SessionOptions reopen = o;
  reopen.session_id = p.session_id;
  auto holder = engine_->OpenSession(reopen);
  ASSERT_TRUE(holder.ok());
  Resolution deny;
  deny.kind = Resolution::Kind::kDeny;
  deny.reason = "no";
  auto rep = engine_->Submit(op::Decide{p.pending[0], deny}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_TRUE(rep->continues_later);
  EXPECT_EQ(rep->outstanding, 0);
  auto r = RunBlocking(**holder, op::Retry{}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kDenied);
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
}

TEST_F(DecisionPathTest, AResolverThatCannotTakeTheSessionRecordsAndResumeContinues) {
  auto o = Options(kWriteScript);
  Paused p = Pause(o);
  ASSERT_EQ(p.pending.size(), 1u);
  SessionOptions reopen = o;
  reopen.session_id = p.session_id;
  {
    auto holder = engine_->OpenSession(reopen);  // e.g. a chat left open
    ASSERT_TRUE(holder.ok());
    auto rep = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
    ASSERT_TRUE(rep.ok()) << rep.error().ToString();
    EXPECT_FALSE(rep->already_resolved);
    EXPECT_TRUE(rep->continues_later);
    EXPECT_FALSE(rep->resumed.has_value());
    EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
    // The holder sees the decision: a new prompt is refused, a retry continues.
    auto blocked = RunBlocking(**holder, op::UserInput{"more"}, {}, {});
    ASSERT_FALSE(blocked.ok());
    EXPECT_THAT(blocked.error().message(), HasSubstr("resume"));
    ASSERT_TRUE((*holder)->Preview(op::Retry{}).ok());
    auto r = RunBlocking(**holder, op::Retry{}, {}, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->final_text, "wrote hello.txt");
  }
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
  auto again = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_resolved);
  EXPECT_FALSE(again->resumed.has_value());
}

TEST_F(DecisionPathTest, TwoConcurrentResolversRecordOneDecisionAndRunTheToolOnce) {
  for (int round = 0; round < 4; ++round) {
    const std::string marker = "ran" + std::to_string(round) + ".txt";
    auto o = Options(std::string(R"({"responses": [
      {"tool_calls": [{"id": "b1", "name": "bash", "input": {"command": "echo run >> )") +
                     marker + R"("}}]},
      {"text": "done"}
    ]})");
    Paused p = Pause(o);
    ASSERT_EQ(p.pending.size(), 1u);
    Result<ResolveReport> reports[2] = {Internal("not run"), Internal("not run")};
    {
      std::jthread a([&] {
        reports[0] = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
      });
      std::jthread b([&] {
        reports[1] = engine_->Submit(op::Decide{p.pending[0], Approve()}, o, {}, {});
      });
    }
    int already = 0, resumed = 0;
    for (auto& r : reports) {
      ASSERT_TRUE(r.ok()) << r.error().ToString();
      already += r->already_resolved ? 1 : 0;
      resumed += r->resumed ? 1 : 0;
    }
    EXPECT_EQ(already, 1) << "round " << round;
    EXPECT_EQ(resumed, 1) << "round " << round;
    EXPECT_EQ(ReadFile(workspace_ / marker), "run\n") << "round " << round;
  }
}

TEST_F(EngineTest, PlanModeForgedWriteChangesNothing) {
  auto o = Options(kWriteScript);
  o.command = CommandKind::kPlan;
  o.allow.push_back({"*", "--allow"});
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok());
  auto r = RunBlocking(**s, op::UserInput{"plan it"}, {}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, StopReason::kToolRefused);
  EXPECT_THAT(r->reason, ::testing::StartsWith("PLAN_MODE_REFUSED:"));
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
}

// The text of the first tool result in `history`.
std::string FirstToolResult(std::span<const Message> history) {
  for (const Message& m : history) {
    for (const ContentBlock& b : m.content) {
      if (b.type == BlockType::kToolResult) return b.text;
    }
  }
  return "(no tool result)";
}

constexpr const char* kPlanBashScript = R"({"responses": [
  {"tool_calls": [{"id": "c1", "name": "bash", "input": {"command": "touch made 2>/dev/null || echo write-denied; cat notes.txt"}}]},
  {"text": "planned"}
]})";

TEST_F(EngineTest, PlanModeRunsBashOnlyInAReadOnlySandbox) {
  if (std::string why = BashSandboxUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  WriteFile(workspace_ / "notes.txt", "hello\n");
  auto o = Options(kPlanBashScript);
  o.command = CommandKind::kPlan;
  o.sandbox = SandboxMode::kOff;  // configured for code commands; plan confines anyway
  o.allow.push_back({"bash(*)", "--allow"});
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"plan it"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(FirstToolResult((*s)->history()), "write-denied\nhello\n");
  EXPECT_FALSE(fs::exists(workspace_ / "made"));
}

TEST_F(EngineTest, PlanModeBashApprovedLaterStillRunsReadOnly) {
  if (std::string why = BashSandboxUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  WriteFile(workspace_ / "notes.txt", "hello\n");
  auto o = Options(kPlanBashScript);
  o.command = CommandKind::kPlan;
  std::string pending_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    auto r = RunBlocking(**s, op::UserInput{"plan it"}, {}, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->stop, StopReason::kPendingApproval) << r->reason;  // bash is still asked for
    pending_id = r->pending.at(0).id;
  }
  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  SessionOptions resolver = Options(kPlanBashScript);  // the resolver's own command: code
  auto rep = engine_->Submit(op::Decide{pending_id, approve}, resolver, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kCompleted) << rep->resumed->reason;
  EXPECT_FALSE(fs::exists(workspace_ / "made"));
}

TEST_F(EngineTest, BashEnvironmentFollowsTheSessionOptions) {
  auto o = Options(R"({"responses": [
  {"tool_calls": [{"id": "c1", "name": "bash", "input": {"command": "echo \"${HOME-unset} $AL_MARK\""}}]},
  {"text": "done"}
]})");
  // The bare rule: `${HOME-unset}` is an expansion with an operator, which
  // no pattern can judge.
  o.allow.push_back({"bash", "--allow"});
  o.env_remove = {"HOME"};  // as the CLI passes provider.api_key_env
  o.env_set = {{"AL_MARK", "set-by-config"}};
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"show"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(FirstToolResult((*s)->history()), "unset set-by-config\n");
}

TEST_F(EngineTest, MissingApiKeySaysHowToConfigure) {
  SessionOptions o;
  o.workspace = workspace_;
  o.provider = ProviderKind::kOpenAI;
  auto s = engine_->OpenSession(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(s.error().message(),
              HasSubstr("provider openai has no API key: OPENAI_API_KEY is not set"));
}

TEST_F(EngineTest, AskWithoutAnyApproverFailsClosed) {
  auto o = Options(kWriteScript);
  o.approver = ApproverMode::kNone;
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok());
  auto r = RunBlocking(**s, op::UserInput{"go"}, {}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, StopReason::kDenied);
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
}

TEST(SystemPromptTest, IncludesAgentsFilesFromRepoRootDown) {
  TempDir t;
  fs::create_directories(t.path() / "repo/.git");
  fs::create_directories(t.path() / "repo/sub/ws");
  WriteFile(t.path() / "AGENTS.md", "OUTSIDE THE REPO");
  WriteFile(t.path() / "repo/AGENTS.md", "ROOT RULES");
  WriteFile(t.path() / "repo/sub/ws/AGENTS.md", "WORKSPACE RULES");
  SystemPromptParts p;
  p.workspace = t.path() / "repo/sub/ws";
  p.command = CommandKind::kPlan;
  std::string s = BuildSystemPrompt(p);
  EXPECT_THAT(s, HasSubstr("ROOT RULES"));
  EXPECT_THAT(s, HasSubstr("WORKSPACE RULES"));
  EXPECT_EQ(s.find("OUTSIDE THE REPO"), std::string::npos);
  EXPECT_LT(s.find("ROOT RULES"), s.find("WORKSPACE RULES"));
  EXPECT_THAT(s, HasSubstr("read-only"));
}

TEST(SystemPromptTest, ClaudeMdStandsInForAnAbsentAgentsMd) {
  TempDir t;
  fs::create_directories(t.path() / "repo/.git");
  fs::create_directories(t.path() / "repo/ws");
  WriteFile(t.path() / "repo/CLAUDE.md", "CLAUDE ROOT");
  WriteFile(t.path() / "repo/ws/AGENTS.md", "AGENTS WS");
  WriteFile(t.path() / "repo/ws/CLAUDE.md", "CLAUDE WS");
  SystemPromptParts p;
  p.workspace = t.path() / "repo/ws";
  std::string s = BuildSystemPrompt(p);
  EXPECT_THAT(s, HasSubstr("CLAUDE ROOT"));  // no AGENTS.md at the root
  EXPECT_THAT(s, HasSubstr("AGENTS WS"));
  EXPECT_EQ(s.find("CLAUDE WS"), std::string::npos);  // AGENTS.md wins where both exist
  EXPECT_LT(s.find("CLAUDE ROOT"), s.find("AGENTS WS"));
}

// ---- Paths: rules, read roots and instructions see the real path ----------

// Every tool result the model saw, joined.
std::string ToolResults(const Session& s) {
  std::string out;
  for (const auto& m : s.history()) {
    for (const auto& b : m.content) {
      if (b.type == BlockType::kToolResult) out += b.text + "\n";
    }
  }
  return out;
}

TEST_F(EngineTest, GrepAndReadDoNotRevealAFileADenyRuleCovers) {
  WriteFile(workspace_ / "secret.txt", "TOKEN=hunter2\n");
  WriteFile(workspace_ / "src/a.txt", "TOKEN=public\n");
  fs::create_directories(workspace_ / "docs");
  fs::create_symlink("../secret.txt", workspace_ / "docs/notes.md");
  const char* script = R"({"responses": [
    {"tool_calls": [{"id": "g1", "name": "grep", "input": {"pattern": "TOKEN", "output_mode": "content"}}]},
    {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "docs/notes.md"}}]},
    {"tool_calls": [{"id": "g2", "name": "grep", "input": {"pattern": "TOKEN", "path": "docs/notes.md", "output_mode": "content"}}]},
    {"tool_calls": [{"id": "l1", "name": "glob", "input": {"pattern": "**/*.txt"}}]},
    {"text": "done"}
  ]})";
  auto o = Options(script);
  o.deny.push_back({"read(secret.txt)", "--deny"});
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"look"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  std::string results = ToolResults(**s);
  EXPECT_THAT(results, HasSubstr("TOKEN=public"));
  EXPECT_EQ(results.find("hunter2"), std::string::npos) << results;
  EXPECT_EQ(results.find("secret.txt\n"), std::string::npos) << results;
}

TEST_F(EngineTest, SkillsFolderLinkedOutOfTheWorkspaceDoesNotWidenReads) {
  WriteFile(tmp_.path() / "outside/secret.txt", "hunter2\n");
  fs::create_directories(workspace_ / ".agentloop");
  fs::create_symlink("/", workspace_ / ".agentloop/skills");
  const std::string target = (tmp_.path() / "outside/secret.txt").string();
  const std::string script = R"({"responses": [
    {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": ")" +
                             target + R"("}}]},
    {"tool_calls": [{"id": "r2", "name": "read", "input": {"file_path": "/etc/passwd"}}]},
    {"text": "done"}
  ]})";
  for (CommandKind command : {CommandKind::kCode, CommandKind::kPlan}) {
    auto o = Options(script);
    o.command = command;
    o.allow.push_back({"read", "--allow"});
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    auto r = RunBlocking(**s, op::UserInput{"look"}, {}, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    std::string results = ToolResults(**s);
    EXPECT_EQ(results.find("hunter2"), std::string::npos) << results;
    EXPECT_EQ(results.find("root:"), std::string::npos) << results;
    EXPECT_THAT(results, HasSubstr("outside the workspace"));
    bool warned = false;
    for (const auto& w : (*s)->load_warnings())
      warned = warned || w.find("skills") != std::string::npos;
    EXPECT_TRUE(warned);
  }
}

TEST(SystemPromptTest, AgentsFileLinkedOutOfTheRepositoryIsNotRead) {
  TempDir t;
  fs::create_directories(t.path() / "repo/.git");
  fs::create_directories(t.path() / "repo/ws");
  WriteFile(t.path() / "elsewhere/notes.md", "SECRET FROM ELSEWHERE");
  WriteFile(t.path() / "repo/docs/rules.md", "IN-REPO RULES");
  fs::create_symlink(t.path() / "elsewhere/notes.md", t.path() / "repo/AGENTS.md");
  fs::create_symlink("../docs/rules.md", t.path() / "repo/ws/AGENTS.md");
  SystemPromptParts p;
  p.workspace = t.path() / "repo/ws";
  std::string s = BuildSystemPrompt(p);
  EXPECT_EQ(s.find("SECRET FROM ELSEWHERE"), std::string::npos) << s;
  EXPECT_THAT(s, HasSubstr("IN-REPO RULES"));
  auto found = FindAgentsFiles(p.workspace);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], fs::canonical(t.path() / "repo/docs/rules.md"));
}

TEST(SystemPromptTest, ConfinedFileIsReadOnlyInsideItsRoots) {
  TempDir t;
  WriteFile(t.path() / "ws/prompt.md", "WORKSPACE PROMPT");
  WriteFile(t.path() / "config/prompt.md", "CONFIG PROMPT");
  WriteFile(t.path() / "elsewhere/id_rsa", "PRIVATE KEY");
  fs::create_symlink(t.path() / "elsewhere/id_rsa", t.path() / "ws/linked.md");
  std::vector<fs::path> roots = {t.path() / "ws", t.path() / "config"};
  auto a = ReadConfinedFile(t.path() / "ws/prompt.md", roots, 1 << 20);
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(*a, "WORKSPACE PROMPT");
  auto b = ReadConfinedFile(t.path() / "config/prompt.md", roots, 1 << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "CONFIG PROMPT");
  auto c = ReadConfinedFile(t.path() / "ws/linked.md", roots, 1 << 20);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kPermissionDenied);
  EXPECT_THAT(c.error().message(), HasSubstr("outside"));
  EXPECT_FALSE(ReadConfinedFile(t.path() / "elsewhere/id_rsa", roots, 1 << 20).ok());
}

}  // namespace
}  // namespace agentloop

namespace agentloop {
namespace {

// A stored session opens with the settings pinned to it, not with the
// options of the process that opens it (another directory, no rules, no
// provider flags).
TEST_F(EngineTest, AStoredSessionOpensWithItsPinnedSettings) {
  auto o = Options(kWriteScript);
  o.deny.push_back({"bash(rm*)", "--deny"});
  o.max_tool_calls = 7;
  o.bash_timeout_ms = 5000;
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    id = (*s)->id();
  }
  fs::path elsewhere = tmp_.path() / "elsewhere";
  fs::create_directories(elsewhere);
  SessionOptions reopen;
  reopen.workspace = elsewhere;
  reopen.session_id = id;
  reopen.provider = ProviderKind::kOpenAI;
  reopen.model = "not-the-sessions";
  auto s = engine_->OpenSession(reopen);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  const SessionOptions& got = (*s)->options();
  EXPECT_EQ(got.workspace, fs::canonical(workspace_));
  EXPECT_EQ(got.provider, ProviderKind::kScript);
  EXPECT_EQ(got.script_path, o.script_path);
  ASSERT_EQ(got.deny.size(), 1u);
  EXPECT_EQ(got.deny[0].rule, "bash(rm*)");
  EXPECT_EQ(got.deny[0].source, "--deny");
  EXPECT_EQ((*s)->budget().max_tool_calls, 7);
  EXPECT_EQ(got.bash_timeout_ms, 5000);
  EXPECT_EQ(got.approver, ApproverMode::kDurable);
}

TEST_F(EngineTest, AWideningOverrideIsRefusedAndChangesNothing) {
  auto o = Options(kWriteScript);
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    id = (*s)->id();
  }
  SessionOptions reopen;
  reopen.session_id = id;
  reopen.overrides.allow.push_back({"*", "--allow"});
  auto s = engine_->OpenSession(reopen);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(s.error().message(), HasSubstr("--allow * is not among the pinned allow rules"));
  auto settings = engine_->store().GetSettings(id);
  ASSERT_TRUE(settings.ok() && settings->has_value());
  EXPECT_EQ((**settings)["permissions"]["allow"], Json::array());
}

// A narrowing override applies to the turn and is stored, with a `settings`
// event, before the turn's own events.
TEST_F(EngineTest, ANarrowingOverrideIsKeptAndRecordedBeforeTheTurn) {
  auto o = Options(kWriteScript);
  o.allow.push_back({"*", "--allow"});
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    id = (*s)->id();
  }
  SessionOptions reopen;
  reopen.session_id = id;
  reopen.overrides.deny.push_back({"write", "--deny"});
  reopen.overrides.sources["deny"] = "--deny";
  {
    auto s = engine_->OpenSession(reopen);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->stop, StopReason::kDenied) << r->reason;
    EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
  }
  auto events = engine_->store().Events(id, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->front().type, "settings");
  EXPECT_THAT(events->front().json, HasSubstr("\"key\":\"permissions.deny\""));
  // The next process, with no overrides, still denies.
  SessionOptions third;
  third.session_id = id;
  auto s = engine_->OpenSession(third);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_EQ((*s)->options().deny.size(), 1u);
  EXPECT_EQ((*s)->options().deny[0].rule, "write");
}

// A session stored without pinned settings (an older agentloop) opens with
// the caller's options, as before.
TEST_F(EngineTest, ASessionWithoutPinnedSettingsUsesTheCallersOptions) {
  NewSessionParams p;
  p.workspace = fs::canonical(workspace_);
  p.provider = "script";
  p.model = "script";
  auto created = engine_->store().CreateSession(p);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  auto o = Options(kWriteScript);
  o.session_id = created->id;
  o.max_tool_calls = 3;
  o.deny.push_back({"bash", "--deny"});
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ((*s)->budget().max_tool_calls, 3);
  ASSERT_EQ((*s)->options().deny.size(), 1u);
  auto settings = engine_->store().GetSettings(created->id);
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings->has_value());
}

// A session decides as the wiring's policy does (the policy `permissions
// check` uses): memory_search is allowed by default and runs, write is asked
// and pauses the turn.
TEST_F(EngineTest, SessionDecidesAsTheWiringsPolicy) {
  auto o = Options(R"({"responses": [
    {"tool_calls": [{"id": "m1", "name": "memory_search", "input": {"query": "build"}},
                    {"id": "w1", "name": "write", "input": {"file_path": "a.txt", "content": "x"}}]},
    {"text": "done"}
  ]})");
  engine::WiringContext ctx =
      engine::MakeWiringContext({{"HOME", (tmp_.path() / "home").string()}}, tmp_.path() / "data");
  SessionOptions spec = o;
  spec.workspace = fs::canonical(workspace_);
  auto tools = engine::WireTools(spec, ctx);
  ASSERT_TRUE(tools.ok()) << tools.error().ToString();
  auto policy = engine::WirePolicy(spec, tools->registry, ctx);
  ASSERT_TRUE(policy.ok()) << policy.error().ToString();
  auto judge = [&](const char* tool, const Json& args) {
    return policy->rules->Evaluate(tools->registry.Find(tool)->spec(), args).decision;
  };
  EXPECT_EQ(judge("memory_search", Json{{"query", "build"}}), Decision::kAllow);
  EXPECT_EQ(judge("write", Json{{"file_path", "a.txt"}, {"content", "x"}}), Decision::kAsk);

  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"go"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kPendingApproval) << r->reason;
  ASSERT_EQ(r->pending.size(), 1u);
  EXPECT_EQ(r->pending[0].tool, "write");
}

// ---------------------------------------------------------------------------
// Extensions: tools, hooks, a provider and an approver given by an embedder.

class WeatherTool final : public Tool {
 public:
  WeatherTool() {
    spec_.name = "weather";
    spec_.description = "The weather in a city.";
    spec_.input_schema = Json{{"type", "object"},
                              {"properties", {{"city", {{"type", "string"}}}}},
                              {"required", {"city"}}};
  }
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext&) override {
    return ToolOutput::Ok("sunny in " + call.input["city"].get<std::string>());
  }

 private:
  ToolSpec spec_;
};

// Records what the turn told it.
class RecordingHook final : public Hook {
 public:
  std::string_view name() const override { return "recorder"; }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(0); }
  void OnTurnStart(const HookContext&) override { calls.push_back("turn_start"); }
  void AfterToolResult(const HookContext&, const ToolCall& call, const ToolOutput& out) override {
    calls.push_back("after " + call.name + ": " + out.content);
  }
  std::vector<std::string> calls;
};

constexpr const char* kWeatherScript = R"({"responses": [
  {"tool_calls": [{"id": "w1", "name": "weather", "input": {"city": "Oslo"}}]},
  {"text": "It is sunny."}
]})";

TEST_F(EngineTest, ExtraToolAndHookTakePartInTheTurn) {
  auto o = Options(kWeatherScript);
  o.extensions.tools.push_back(std::make_shared<WeatherTool>());
  auto hook = std::make_shared<RecordingHook>();
  o.extensions.hooks.push_back(hook);
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"weather in Oslo?"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(r->final_text, "It is sunny.");
  // The tool is read-only, so the default decision ran it without asking.
  const Message& results = (*s)->history()[2];
  ASSERT_EQ(results.content.size(), 1u);
  EXPECT_EQ(results.content[0].text, "sunny in Oslo");
  EXPECT_FALSE(results.content[0].is_error);
  EXPECT_THAT(hook->calls, ::testing::Contains("after weather: sunny in Oslo"));
  EXPECT_EQ(hook->calls.front(), "turn_start");
}

// A session created with extensions does not continue without them: its
// history uses the tool, and the hook may have guarded it.
TEST_F(EngineTest, StoredSessionOpensOnlyWithTheExtensionsItWasCreatedWith) {
  auto o = Options(kWeatherScript);
  o.extensions.tools.push_back(std::make_shared<WeatherTool>());
  o.extensions.hooks.push_back(std::make_shared<RecordingHook>());
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    id = (*s)->id();
  }
  SessionOptions bare = Options(kWeatherScript);
  bare.session_id = id;
  auto refused = engine_->OpenSession(bare);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(refused.error().message(), HasSubstr("tool 'weather', hook 'recorder'"));

  o.session_id = id;
  auto reopened = engine_->OpenSession(o);
  ASSERT_TRUE(reopened.ok()) << reopened.error().ToString();
}

class CannedProvider final : public ModelProvider {
 public:
  explicit CannedProvider(std::string model) : model_(std::move(model)) {}
  std::string_view name() const override { return "canned"; }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink&,
                                 std::stop_token) override {
    ModelResponse r;
    r.content.push_back(
        ContentBlock::Text("canned answer from " + model_ + " for " + request.model));
    return r;
  }

 private:
  std::string model_;
};

TEST_F(EngineTest, ProviderFactoryBuildsTheSessionsProvider) {
  SessionOptions o;
  o.workspace = workspace_;
  o.model = "m1";
  o.reflector = false;
  int built = 0;
  o.extensions.provider_factory =
      [&built](const SessionOptions& spec) -> Result<std::shared_ptr<ModelProvider>> {
    ++built;
    return std::shared_ptr<ModelProvider>(std::make_shared<CannedProvider>(spec.model));
  };
  // No API key and no base URL: without the factory this would be refused.
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"hi"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->final_text, "canned answer from m1 for m1");
  ASSERT_TRUE((*s)->SetModel("m2").ok());
  EXPECT_EQ(built, 2);
  r = RunBlocking(**s, op::UserInput{"again"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->final_text, "canned answer from m2 for m2");
}

// Records the output cap each request asks for.
class CapRecordingProvider : public ModelProvider {
 public:
  std::string_view name() const override { return "caps"; }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink&,
                                 std::stop_token) override {
    caps.push_back(request.max_output_tokens);
    ModelResponse r;
    r.content.push_back(ContentBlock::Text("ok"));
    return r;
  }
  std::vector<int64_t> caps;
};

// The model's limits come from the table (or configuration) and bound every
// request; an unknown model is announced once per session.
TEST_F(EngineTest, ModelLimitsBoundRequestsAndAnUnknownModelIsAnnouncedOnce) {
  auto provider = std::make_shared<CapRecordingProvider>();
  auto open = [&](const std::string& model, std::optional<int64_t> window) {
    SessionOptions o;
    o.workspace = workspace_;
    o.model = model;
    o.reflector = false;
    o.context_window = window;
    o.extensions.provider_factory =
        [provider](const SessionOptions&) -> Result<std::shared_ptr<ModelProvider>> {
      return std::shared_ptr<ModelProvider>(provider);
    };
    return engine_->OpenSession(o);
  };
  auto notices = [](const CollectEvents& ev) {
    int n = 0;
    for (const Event& e : ev.events) {
      if (e.type == EventType::kNotice &&
          e.ToJson().value("text", "").find("not in the built-in table") != std::string::npos) {
        ++n;
      }
    }
    return n;
  };
  {
    auto s = open("gpt-4o", std::nullopt);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    CollectEvents ev;
    ASSERT_TRUE(
        RunBlocking(**s, op::UserInput{"hi"}, SessionCallbacks{&ev, nullptr, nullptr}, {}).ok());
    ASSERT_EQ(provider->caps.size(), 1u);
    EXPECT_EQ(provider->caps[0], 16'384);  // not the budget's 50,000
    EXPECT_EQ(notices(ev), 0);
    EXPECT_EQ((*s)->context().window, 128'000);
  }
  {
    auto s = open("my-local-model", std::nullopt);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    CollectEvents first, second;
    ASSERT_TRUE(
        RunBlocking(**s, op::UserInput{"hi"}, SessionCallbacks{&first, nullptr, nullptr}, {}).ok());
    ASSERT_TRUE(
        RunBlocking(**s, op::UserInput{"again"}, SessionCallbacks{&second, nullptr, nullptr}, {})
            .ok());
    EXPECT_EQ(notices(first), 1);
    EXPECT_EQ(notices(second), 0);
    EXPECT_EQ(provider->caps.back(), 4'096);
    EXPECT_EQ((*s)->context().window, 32'768);
  }
  {
    auto s = open("my-local-model", 20'000);  // configured: no notice
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    CollectEvents ev;
    ASSERT_TRUE(
        RunBlocking(**s, op::UserInput{"hi"}, SessionCallbacks{&ev, nullptr, nullptr}, {}).ok());
    EXPECT_EQ(notices(ev), 0);
    EXPECT_EQ((*s)->context().window, 20'000);
    EXPECT_GT((*s)->context().tokens, 0);
  }
}

class AllowingApprover final : public Approver {
 public:
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token) override {
    asked.push_back(request.call.name);
    return ApprovalDecision::Allow("test");
  }
  std::vector<std::string> asked;
};

// Makes every write of the session state `key` to the engine's SQLite store
// fail, as a full disk would.
void FailStateWrites(const fs::path& db_path, const std::string& key) {
  auto db = store::Db::Open(db_path, 1000);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  for (const char* when : {"INSERT", "UPDATE"}) {
    std::string sql = std::string("CREATE TRIGGER fail_state_") + when + " BEFORE " + when +
                      " ON session_state WHEN NEW.key = '" + key +
                      "' BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END";
    ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
  }
}

// The state a turn leaves is written through the lock before its end is
// committed: a store error writing it fails the turn, with the error as
// the reason, and the end is not stored without it.
TEST_F(EngineTest, AFailedStateWriteFailsTheTurnWithTheStoreError) {
  auto o = Options(R"({"responses": [{"text": "done"}]})");
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  FailStateWrites(tmp_.path() / "data" / "sessions.db", "todo_loop");
  CollectEvents ev;
  SessionCallbacks cb;
  cb.observer = &ev;
  auto r = RunBlocking(**s, op::UserInput{"hello"}, cb, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kFailed);
  EXPECT_THAT(r->reason, HasSubstr("saving the todo state of session"));
  EXPECT_THAT(r->reason, HasSubstr("database or disk is full"));
  for (const Event& e : ev.events) EXPECT_NE(e.type, EventType::kTurnEnd);
  auto stored = engine_->store().Events((*s)->id(), 0);
  ASSERT_TRUE(stored.ok());
  for (const StoredEvent& e : *stored) EXPECT_NE(e.type, "turn_end");
}

// An access allowed "for this session" during a turn is written with the
// turn's state, through the lock; a failure to write it reaches the turn's
// result instead of being dropped.
TEST_F(EngineTest, AFailedWriteOfRememberedApprovalsFailsTheTurn) {
  class RememberingAllow final : public Approver {
   public:
    ApprovalDecision Decide(const ApprovalRequest&, std::stop_token) override {
      ApprovalDecision d = ApprovalDecision::Allow("test");
      d.remember_for_session = true;
      return d;
    }
  };
  auto o = Options(kWriteScript);
  o.todo_loop = false;
  o.extensions.approver = std::make_shared<RememberingAllow>();
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  FailStateWrites(tmp_.path() / "data" / "sessions.db", "session_approvals");
  auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
  EXPECT_EQ(r->stop, StopReason::kFailed);
  EXPECT_THAT(r->reason, HasSubstr("saving the approvals of session"));
  EXPECT_THAT(r->reason, HasSubstr("database or disk is full"));
}

// Opening a session reads the state its turns left (approvals, todo loop,
// reflector): a store error reading it fails the open, naming it, instead
// of opening the session without it (whose next turn would write fresh
// state over what is stored).
TEST_F(EngineTest, AFailedReadOfTheSessionsStateFailsTheOpen) {
  auto o = Options(R"({"responses": [{"text": "done"}]})");
  std::string id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    id = (*s)->id();
    auto r = RunBlocking(**s, op::UserInput{"hello"}, {}, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  }
  {
    auto db = store::Db::Open(tmp_.path() / "data" / "sessions.db", 1000);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)->Exec("ALTER TABLE session_state RENAME TO session_state_gone").ok());
  }
  SessionOptions reopen = o;
  reopen.session_id = id;
  auto s = engine_->OpenSession(reopen);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("state of session " + id));
  EXPECT_THAT(s.error().message(), HasSubstr("session_state"));
}

TEST_F(EngineTest, ApproverExtensionDecidesEveryAsk) {
  auto o = Options(kWriteScript);  // durable approver mode: would pause
  auto approver = std::make_shared<AllowingApprover>();
  o.extensions.approver = approver;
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(approver->asked, std::vector<std::string>{"write"});
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
}

// Submit against RunBlocking: two engines on their own SQLite
// stores run the same script (a parallel lane of reads, a write that pauses
// durably, the decision, the continued batch and the answer); the stored
// event logs are the same, up to the ids each run makes.
class AsyncSessionTest : public EngineTest {
 protected:
  static constexpr const char* kScript = R"({"responses": [
    {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "a.txt"}},
                    {"id": "r2", "name": "read", "input": {"file_path": "b.txt"}},
                    {"id": "w1", "name": "write", "input": {"file_path": "hello.txt", "content": "hi\n"}}]},
    {"text": "wrote hello.txt"}
  ]})";

  std::unique_ptr<Engine> NewEngine(const std::string& name) {
    EngineOptions eo;
    eo.env = {{"HOME", (tmp_.path() / "home").string()}};
    eo.data_dir = tmp_.path() / name;
    eo.now_ms = [] { return int64_t{1767225600000}; };
    auto e = Engine::Create(eo);
    EXPECT_TRUE(e.ok()) << e.error().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }

  // The stored log with what differs by design made equal: session, turn
  // and pending ids are random.
  static std::vector<Json> Normalised(Engine& engine, const std::string& id) {
    auto stored = engine.store().Events(id, 0);
    EXPECT_TRUE(stored.ok());
    std::vector<std::string> ids{id};
    for (const StoredEvent& row : *stored) {
      Json j = Json::parse(row.json);
      if (j.contains("pending_id")) ids.push_back(j["pending_id"].get<std::string>());
      std::string turn = j.value("turn_id", std::string());
      if (std::find(ids.begin(), ids.end(), turn) == ids.end()) ids.push_back(turn);
    }
    std::vector<Json> out;
    for (const StoredEvent& row : *stored) {
      std::string text = row.json;
      for (size_t n = 0; n < ids.size(); ++n) {
        const std::string& from = ids[n];
        const std::string to = "ID" + std::to_string(n);
        for (size_t p; !from.empty() && (p = text.find(from)) != std::string::npos;) {
          text.replace(p, from.size(), to);
        }
      }
      out.push_back(Json::parse(text));
    }
    return out;
  }

  // Waits for `done` of a started turn.
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Result<TurnResult>> result;
    int calls = 0;
    AsyncTurnCallbacks Callbacks(EventSink* observer) {
      AsyncTurnCallbacks cb;
      cb.observer = observer;
      cb.done = [this](Result<TurnResult> r) {
        std::lock_guard lock(mu);
        ++calls;
        result.emplace(std::move(r));
        cv.notify_all();
      };
      return cb;
    }
    Result<TurnResult> Wait() {
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return result.has_value(); })) {
        return DeadlineExceeded("done was not called");
      }
      return *result;
    }
  };

  // Runs the script: the prompt, then (paused) the decision recorded
  // without continuing, then the continuation; blocking or started.
  std::string Drive(Engine& engine, const fs::path& ws, bool started, TurnExecutor* ex,
                    std::vector<Event>* observed) {
    WriteFile(ws / "a.txt", "A\n");
    WriteFile(ws / "b.txt", "B\n");
    fs::remove(ws / "hello.txt");
    SessionOptions o = Options(kScript);
    o.workspace = ws;
    auto s = engine.OpenSession(o);
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    if (!s.ok()) return "";
    CollectEvents seen;
    Result<TurnResult> first = Internal("unset");
    if (started) {
      Outcome out;
      (*s)->Submit(op::UserInput{"create hello.txt"}, *ex, out.Callbacks(&seen), {});
      first = out.Wait();
      EXPECT_EQ(out.calls, 1);
    } else {
      SessionCallbacks cb;
      cb.observer = &seen;
      first = RunBlocking(**s, op::UserInput{"create hello.txt"}, cb, {});
    }
    EXPECT_TRUE(first.ok()) << first.error().ToString();
    if (!first.ok()) return "";
    EXPECT_EQ(first->stop, StopReason::kPendingApproval) << first->reason;
    EXPECT_FALSE(fs::exists(ws / "hello.txt"));
    Resolution approve;
    approve.kind = Resolution::Kind::kApprove;
    approve.continue_turn = false;
    auto rep = engine.Submit(op::Decide{first->pending.at(0).id, approve}, o, {}, {});
    EXPECT_TRUE(rep.ok()) << rep.error().ToString();
    Result<TurnResult> second = Internal("unset");
    if (started) {
      Outcome out;
      (*s)->Submit(op::Retry{}, *ex, out.Callbacks(&seen), {});
      second = out.Wait();
      EXPECT_EQ(out.calls, 1);
    } else {
      SessionCallbacks cb;
      cb.observer = &seen;
      second = RunBlocking(**s, op::Retry{}, cb, {});
    }
    EXPECT_TRUE(second.ok()) << second.error().ToString();
    if (second.ok()) {
      EXPECT_EQ(second->stop, StopReason::kCompleted) << second->reason;
      EXPECT_EQ(second->final_text, "wrote hello.txt");
    }
    EXPECT_EQ(ReadFile(ws / "hello.txt"), "hi\n");
    *observed = seen.events;
    return (*s)->id();
  }
};

// Counts what a turn hands to the executor, by kind, and the keys used.
class CountingExecutor : public TurnExecutor {
 public:
  explicit CountingExecutor(TurnExecutor& inner) : inner_(inner) {}
  void Post(const std::string& key, std::function<void()> fn) override {
    Note(key, posts);
    inner_.Post(key, std::move(fn));
  }
  void PostTool(const std::string& key, std::function<void()> fn) override {
    Note(key, tool_posts);
    inner_.PostTool(key, std::move(fn));
  }
  std::set<std::string> keys() {
    std::lock_guard lock(mu_);
    return keys_;
  }
  std::atomic<int> posts{0}, tool_posts{0};

 private:
  void Note(const std::string& key, std::atomic<int>& n) {
    ++n;
    std::lock_guard lock(mu_);
    keys_.insert(key);
  }
  TurnExecutor& inner_;
  std::mutex mu_;
  std::set<std::string> keys_;
};

TEST_F(AsyncSessionTest, SubmitCommitsTheSameEventsAsRunBlocking) {
  auto blocking = NewEngine("blocking");
  auto started = NewEngine("started");
  ASSERT_TRUE(blocking && started);
  ThreadPoolExecutor threads(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
  CountingExecutor pool(threads);
  std::vector<Event> seen_a, seen_b;
  // One workspace, one run after the other (tool outputs may name paths).
  std::string a = Drive(*blocking, workspace_, false, nullptr, &seen_a);
  std::string b = Drive(*started, workspace_, true, &pool, &seen_b);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  std::vector<Json> want = Normalised(*blocking, a), got = Normalised(*started, b);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "event " << i;
  // Steps and tool calls went through the executor under the session's key:
  // the three calls of the batch and the two model calls (the scripted
  // provider has no asynchronous path) as tool-pool work, the steps as
  // several Posts (not one blocking turn in one Post).
  EXPECT_EQ(pool.keys(), std::set<std::string>{b});
  EXPECT_EQ(pool.tool_posts.load(), 3 + 2);
  EXPECT_GT(pool.posts.load(), 4);
  // The observer saw every stored event in seq order (deltas carry 0).
  std::vector<uint64_t> seqs;
  for (const Event& e : seen_b) {
    if (ShouldPersist(e.type)) seqs.push_back(e.seq);
  }
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  EXPECT_EQ(seen_b.size(), seen_a.size());
}

TEST_F(AsyncSessionTest, SubmitToAPausedSessionReportsTheErrorThroughDone) {
  ThreadPoolExecutor pool(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
  auto s = engine_->OpenSession(Options(kWriteScript));
  ASSERT_TRUE(s.ok());
  Outcome first;
  (*s)->Submit(op::UserInput{"create hello.txt"}, pool, first.Callbacks(nullptr), {});
  Result<TurnResult> r = first.Wait();
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->stop, StopReason::kPendingApproval);
  Outcome again;
  (*s)->Submit(op::UserInput{"another"}, pool, again.Callbacks(nullptr), {});
  Result<TurnResult> refused = again.Wait();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(refused.error().message(), HasSubstr(r->pending.at(0).id));
  EXPECT_EQ(again.calls, 1);
}

// A driver told that a batch is decided continues only that batch: a
// session whose newest turn failed, with nothing decided, is not retried.
TEST_F(AsyncSessionTest, ContinueDecidedBatchOnlyNeverRetriesAFailedTurn) {
  ThreadPoolExecutor pool(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
  auto s = engine_->OpenSession(Options(R"({"responses": [
    {"error": {"code": "internal", "message": "model down"}}
  ]})"));
  ASSERT_TRUE(s.ok());
  Outcome first;
  (*s)->Submit(op::UserInput{"hello"}, pool, first.Callbacks(nullptr), {});
  Result<TurnResult> failed = first.Wait();
  ASSERT_TRUE(failed.ok()) << failed.error().ToString();
  ASSERT_EQ(failed->stop, StopReason::kFailed) << failed->reason;
  ASSERT_TRUE((*s)->Preview(op::Retry{}).ok());
  auto before = engine_->store().Events((*s)->id(), 0);
  ASSERT_TRUE(before.ok());
  Outcome cont;
  (*s)->Submit(op::Continue{.decided_batch_only = true}, pool, cont.Callbacks(nullptr), {});
  Result<TurnResult> refused = cont.Wait();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(refused.error().message(), HasSubstr("no decided batch"));
  // Nothing ran: not a step, not an event.
  auto after = engine_->store().Events((*s)->id(), 0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), before->size());
}

TEST_F(AsyncSessionTest, SubmitCancelledBeforeItsFirstStepEndsAborted) {
  ThreadPoolExecutor pool(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
  auto o = Options(kWriteScript);
  o.allow.push_back({"*", "--allow"});
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok());
  std::stop_source stop;
  stop.request_stop();
  Outcome out;
  (*s)->Submit(op::UserInput{"create hello.txt"}, pool, out.Callbacks(nullptr), stop.get_token());
  Result<TurnResult> r = out.Wait();
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kAborted) << r->reason;
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
  EXPECT_EQ(out.calls, 1);
}

// The server's shape: the engine's HTTP client on the caller's io_context
// (one I/O thread), turns on a thread pool. The model streams from a real
// HTTP server; deltas reach the observer on the I/O thread, every other
// event (and the store's commits) on the executor's threads.
TEST_F(AsyncSessionTest, SubmitStreamsTheModelOnTheCallersIoContext) {
  auto server = testing::FakeModelServer::Start(Json::parse(R"([
      {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "a.txt"}}]},
      {"text": "the file says A"}])"));
  ASSERT_TRUE(server.ok());
  WriteFile(workspace_ / "a.txt", "A\n");
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::thread io([&] { ioc.run(); });
  {
    EngineOptions eo;
    eo.env = {{"HOME", (tmp_.path() / "home").string()}};
    eo.data_dir = tmp_.path() / "served";
    eo.io_context = &ioc;
    auto engine = Engine::Create(eo);
    ASSERT_TRUE(engine.ok()) << engine.error().ToString();
    SessionOptions o;
    o.workspace = workspace_;
    o.provider = ProviderKind::kOpenAI;
    o.model = "test-model";
    o.base_url = server.value()->base_url() + "/v1";
    o.api_key = "sk-test";
    o.approver = ApproverMode::kDurable;
    auto s = (*engine)->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    struct ThreadsSeen : EventSink {
      std::mutex mu;
      std::vector<std::pair<EventType, std::thread::id>> seen;
      Status OnEvent(const Event& e) override {
        std::lock_guard lock(mu);
        seen.emplace_back(e.type, std::this_thread::get_id());
        return Status::Ok();
      }
    } observer;
    ThreadPoolExecutor pool(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
    Outcome out;
    (*s)->Submit(op::UserInput{"what does a.txt say?"}, pool, out.Callbacks(&observer), {});
    Result<TurnResult> r = out.Wait();
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
    EXPECT_EQ(r->final_text, "the file says A");
    EXPECT_EQ(out.calls, 1);
    int deltas = 0;
    for (const auto& [type, thread] : observer.seen) {
      if (type == EventType::kTextDelta) {
        ++deltas;
        EXPECT_EQ(thread, io.get_id());
      } else {
        EXPECT_NE(thread, io.get_id()) << EventTypeName(type) << " on the I/O thread";
      }
    }
    EXPECT_GT(deltas, 0);
    EXPECT_EQ(server.value()->requests().size(), 2u);
  }  // the session, then the engine (its client's shutdown runs on `io`)
  work.reset();
  io.join();
}

}  // namespace
// ---------------------------------------------------------------------------
// Operations in, outcomes out: each operation through Session::Submit (the
// asynchronous runner every driver shares), and a decision through
// Engine::Submit.

class SubmitTest : public AsyncSessionTest {
 protected:
  // The `input` of each turn_begin the store holds for `session_id`.
  std::vector<std::string> TurnInputs(const std::string& session_id) {
    std::vector<std::string> out;
    auto rows = engine_->store().Events(session_id, 0);
    EXPECT_TRUE(rows.ok());
    if (!rows.ok()) return out;
    for (const StoredEvent& row : *rows) {
      if (row.type == "turn_begin") out.push_back(Json::parse(row.json).value("input", ""));
    }
    return out;
  }

  ThreadPoolExecutor pool_{ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2}};
};

TEST_F(SubmitTest, UserInputRunsATurn) {
  auto s = engine_->OpenSession(Options(R"({"responses": [{"text": "hello back"}]})"));
  ASSERT_TRUE(s.ok());
  auto what = (*s)->Preview(op::UserInput{"hello"});
  ASSERT_TRUE(what.ok()) << what.error().ToString();
  EXPECT_EQ(*what, "running a new turn");
  Outcome out;
  (*s)->Submit(op::UserInput{"hello"}, pool_, out.Callbacks(nullptr), {});
  Result<TurnResult> r = out.Wait();
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(r->final_text, "hello back");
  EXPECT_EQ(out.calls, 1);
  EXPECT_EQ(TurnInputs((*s)->id()), std::vector<std::string>{"user"});
}

// Nothing to continue: the operation answers why, and nothing runs or is
// stored; Preview says the same without running it.
TEST_F(SubmitTest, ContinueWithNothingToContinueIsAFailedPreconditionThatSaysWhy) {
  auto s = engine_->OpenSession(Options(R"({"responses": [{"text": "done"}]})"));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(RunBlocking(**s, op::UserInput{"one"}, {}, {}).ok());
  auto before = engine_->store().Events((*s)->id(), 0);
  ASSERT_TRUE(before.ok());
  auto preview = (*s)->Preview(op::Continue{});
  ASSERT_FALSE(preview.ok());
  EXPECT_EQ(preview.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(preview.error().message(), HasSubstr("no interrupted or failed turn to continue"));
  Outcome out;
  (*s)->Submit(op::Continue{}, pool_, out.Callbacks(nullptr), {});
  Result<TurnResult> r = out.Wait();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(r.error().message(), preview.error().message());
  auto blocking = RunBlocking(**s, op::Continue{}, {}, {});
  ASSERT_FALSE(blocking.ok());
  EXPECT_EQ(blocking.error().message(), preview.error().message());
  auto after = engine_->store().Events((*s)->id(), 0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), before->size());
}

// Continue and Retry of a failed turn run the same turn again.
TEST_F(SubmitTest, ContinueAndRetryRunTheFailedTurnAgain) {
  for (const Op& again : {Op(op::Continue{}), Op(op::Retry{})}) {
    SCOPED_TRACE(std::string(OpName(again)));
    SessionOptions o = Options(R"({"responses": [
      {"error": {"code": "internal", "message": "model down"}},
      {"text": "back up"}
    ]})");
    o.reflector = false;  // its side requests would take the script's answers
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    Outcome first;
    (*s)->Submit(op::UserInput{"hello"}, pool_, first.Callbacks(nullptr), {});
    Result<TurnResult> failed = first.Wait();
    ASSERT_TRUE(failed.ok()) << failed.error().ToString();
    ASSERT_EQ(failed->stop, StopReason::kFailed);
    auto what = (*s)->Preview(again);
    ASSERT_TRUE(what.ok()) << what.error().ToString();
    EXPECT_EQ(*what, "retrying the failed turn");
    Outcome second;
    (*s)->Submit(again, pool_, second.Callbacks(nullptr), {});
    Result<TurnResult> r = second.Wait();
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
    EXPECT_EQ(r->final_text, "back up");
    EXPECT_EQ(TurnInputs((*s)->id()), (std::vector<std::string>{"user", "retry"}));
  }
}

TEST_F(SubmitTest, CompactRunsACompactionTurnAndIsRefusedWhilePaused) {
  auto s = engine_->OpenSession(Options(R"({"responses": [{"text": "first"}]})"));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(RunBlocking(**s, op::UserInput{"one"}, {}, {}).ok());
  Outcome out;
  (*s)->Submit(op::Compact{"the plan"}, pool_, out.Callbacks(nullptr), {});
  Result<TurnResult> r = out.Wait();
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(TurnInputs((*s)->id()), (std::vector<std::string>{"user", "compact"}));

  auto paused = engine_->OpenSession(Options(kWriteScript));
  ASSERT_TRUE(paused.ok());
  auto p = RunBlocking(**paused, op::UserInput{"create hello.txt"}, {}, {});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->stop, StopReason::kPendingApproval);
  Outcome refused;
  (*paused)->Submit(op::Compact{""}, pool_, refused.Callbacks(nullptr), {});
  Result<TurnResult> no = refused.Wait();
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(no.error().message(), HasSubstr("cannot be compacted"));
}

// A queued input runs as a user input and leaves the queue with its turn;
// one that cannot run is answered with the error and taken all the same.
TEST_F(SubmitTest, QueuedRunsTheInputAndTakesItFromTheQueue) {
  auto s = engine_->OpenSession(Options(R"({"responses": [{"text": "from the queue"}]})"));
  ASSERT_TRUE(s.ok());
  SessionStore& store = engine_->store();
  ASSERT_TRUE(store.EnqueueInput((*s)->id(), "queued hello", false).ok());
  auto waiting = store.ListQueuedInputs((*s)->id());
  ASSERT_TRUE(waiting.ok());
  ASSERT_EQ(waiting->size(), 1u);
  Outcome out;
  (*s)->Submit(op::Queued{waiting->front()}, pool_, out.Callbacks(nullptr), {});
  Result<TurnResult> r = out.Wait();
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->final_text, "from the queue");
  auto left = store.ListQueuedInputs((*s)->id());
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());

  auto paused = engine_->OpenSession(Options(kWriteScript));
  ASSERT_TRUE(paused.ok());
  ASSERT_TRUE(RunBlocking(**paused, op::UserInput{"create hello.txt"}, {}, {}).ok());
  ASSERT_TRUE(store.EnqueueInput((*paused)->id(), "too early", false).ok());
  auto queued = store.ListQueuedInputs((*paused)->id());
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 1u);
  Outcome refused;
  (*paused)->Submit(op::Queued{queued->front()}, pool_, refused.Callbacks(nullptr), {});
  Result<TurnResult> no = refused.Wait();
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().code(), Code::kFailedPrecondition);
  auto taken = store.ListQueuedInputs((*paused)->id());
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(taken->empty());
}

// A decision that completes the batch of a session nobody holds continues
// its turn there and then: the outcome kResumed, with the continued turn.
TEST_F(SubmitTest, DecideThatCompletesTheBatchResumesTheTurn) {
  auto o = Options(kWriteScript);
  std::string pending_id;
  {
    auto s = engine_->OpenSession(o);
    ASSERT_TRUE(s.ok());
    auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->stop, StopReason::kPendingApproval);
    pending_id = r->pending.at(0).id;
  }
  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  auto rep = engine_->Submit(op::Decide{pending_id, approve}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_EQ(rep->outcome, DecisionOutcome::kResumed);
  ASSERT_TRUE(rep->resumed.has_value());
  EXPECT_EQ(rep->resumed->stop, StopReason::kCompleted) << rep->resumed->reason;
  EXPECT_EQ(rep->resumed->final_text, "wrote hello.txt");
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
}

// The server's shape: the decision only recorded (continue_turn false)
// while this process holds the session, then the holder continues the
// decided batch with Continue{decided_batch_only} on the runner.
TEST_F(SubmitTest, DecideRecordedThenContinueDecidedBatchOnTheHolder) {
  auto o = Options(kWriteScript);
  auto s = engine_->OpenSession(o);
  ASSERT_TRUE(s.ok());
  auto r = RunBlocking(**s, op::UserInput{"create hello.txt"}, {}, {});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->stop, StopReason::kPendingApproval);
  Resolution approve;
  approve.kind = Resolution::Kind::kApprove;
  approve.continue_turn = false;
  auto rep = engine_->Submit(op::Decide{r->pending.at(0).id, approve}, o, {}, {});
  ASSERT_TRUE(rep.ok()) << rep.error().ToString();
  EXPECT_EQ(rep->outcome, DecisionOutcome::kResumed);
  EXPECT_TRUE(rep->continues_later);
  EXPECT_FALSE(rep->resumed.has_value());
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));
  auto what = (*s)->Preview(op::Continue{.decided_batch_only = true});
  ASSERT_TRUE(what.ok()) << what.error().ToString();
  EXPECT_EQ(*what, "continuing the decided batch");
  Outcome out;
  (*s)->Submit(op::Continue{.decided_batch_only = true}, pool_, out.Callbacks(nullptr), {});
  Result<TurnResult> cont = out.Wait();
  ASSERT_TRUE(cont.ok()) << cont.error().ToString();
  EXPECT_EQ(cont->stop, StopReason::kCompleted) << cont->reason;
  EXPECT_EQ(cont->final_text, "wrote hello.txt");
  EXPECT_EQ(ReadFile(workspace_ / "hello.txt"), "hi\n");
  // Claimed: nothing is decided any more.
  EXPECT_FALSE((*s)->Preview(op::Continue{.decided_batch_only = true}).ok());
}

TEST(OpNameTest, NamesEachOperation) {
  EXPECT_EQ(OpName(op::UserInput{"x"}), "user_input");
  EXPECT_EQ(OpName(op::Continue{}), "continue");
  EXPECT_EQ(OpName(op::Retry{}), "retry");
  EXPECT_EQ(OpName(op::Compact{}), "compact");
  EXPECT_EQ(OpName(op::Queued{}), "queued");
}

}  // namespace agentloop
