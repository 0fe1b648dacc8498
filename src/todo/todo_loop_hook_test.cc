#include "todo/todo_loop_hook.h"

#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "base/ids.h"
#include "todo/inject.h"
#include "todo/task_list.h"

namespace agentloop::todo {
namespace {

namespace fs = std::filesystem;

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / NewId("todo_test")) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void Touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "off";
}

// Builds a session history the way the engine stores it.
class History {
 public:
  History& Human(const std::string& text) {
    messages_.push_back(Message::User(text));
    return *this;
  }
  History& Say(const std::string& text) {
    messages_.push_back(Message::Assistant(text));
    return *this;
  }
  // One assistant step calling `todo` with `input`, and its stored result.
  History& Todo(const char* input) {
    std::string id = "call_" + std::to_string(++calls_);
    Message a;
    a.role = Role::kAssistant;
    a.content.push_back(ContentBlock::ToolUse(id, "todo", Json::parse(input)));
    messages_.push_back(a);
    TodoCallResult r = ApplyTodoCall(list_, Json::parse(input));
    list_ = r.list;
    ContentBlock b = ContentBlock::ToolResult(id, r.content, r.is_error);
    b.meta = Json{{"details", r.details}};
    Message u;
    u.role = Role::kUser;
    u.content.push_back(b);
    messages_.push_back(u);
    return *this;
  }
  History& Tool(const std::string& name) {
    std::string id = "call_" + std::to_string(++calls_);
    Message a;
    a.role = Role::kAssistant;
    a.content.push_back(ContentBlock::ToolUse(id, name, Json::object()));
    messages_.push_back(a);
    Message u;
    u.role = Role::kUser;
    u.content.push_back(ContentBlock::ToolResult(id, "ok", false));
    messages_.push_back(u);
    return *this;
  }
  History& Append(Message m) {
    messages_.push_back(std::move(m));
    return *this;
  }
  const std::vector<Message>& messages() const { return messages_; }

 private:
  std::vector<Message> messages_;
  TaskList list_;
  int calls_ = 0;
};

// The messages with uids given like a Transcript gives them (from `next`).
std::vector<Message> WithUids(std::vector<Message> msgs, uint64_t next) {
  for (Message& m : msgs) m.uid = next++;
  return msgs;
}

void ExpectSameSnapshot(const TodoSnapshot& got, const TodoSnapshot& want, const char* when) {
  EXPECT_EQ(got.tasks, want.tasks) << when;
  EXPECT_EQ(got.open, want.open) << when;
  EXPECT_EQ(got.signature, want.signature) << when;
  EXPECT_EQ(got.anchor, want.anchor) << when;
}

// The cursor searches only what was appended since its last read, and gives
// what a full search gives, also after the history was rewritten.
// The global kill switch lives in the user's configuration directory, the
// one UserConfigDir names: $XDG_CONFIG_HOME wins over $HOME when absolute.
TEST(KillSwitchTest, GlobalFileIsInTheUserConfigDirectory) {
  EXPECT_EQ(DefaultGlobalKillSwitch({{"HOME", "/h"}}),
            fs::path("/h/.config/agentloop/todo-loop-off"));
  EXPECT_EQ(DefaultGlobalKillSwitch({{"HOME", "/h"}, {"XDG_CONFIG_HOME", "/x"}}),
            fs::path("/x/agentloop/todo-loop-off"));
  EXPECT_EQ(DefaultGlobalKillSwitch({{"HOME", "/h"}, {"XDG_CONFIG_HOME", "rel"}}),
            fs::path("/h/.config/agentloop/todo-loop-off"));
  EXPECT_TRUE(DefaultGlobalKillSwitch({}).empty());
  // Options built without an environment read no file of the process's HOME.
  EXPECT_TRUE(TodoLoopOptions{}.kill_switch_global.empty());
}

TEST(SnapshotCursorTest, IncrementalReadsMatchFullReads) {
  History h;
  h.Human("fix the build");
  SnapshotCursor cursor;
  std::vector<Message> msgs = WithUids(h.messages(), 100);
  ExpectSameSnapshot(cursor.Read(msgs), ReadSnapshot(msgs), "human only");
  h.Todo(R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b"}]})").Tool("bash");
  msgs = WithUids(h.messages(), 100);
  TodoSnapshot got = cursor.Read(msgs);
  ExpectSameSnapshot(got, ReadSnapshot(msgs), "after the list");
  EXPECT_EQ(got.open.size(), 2u);
  h.Human("go on").Todo(R"({"action":"update","id":1,"status":"completed"})");
  msgs = WithUids(h.messages(), 100);
  got = cursor.Read(msgs);
  ExpectSameSnapshot(got, ReadSnapshot(msgs), "after an update");
  EXPECT_EQ(got.open.size(), 1u);
  EXPECT_EQ(got.anchor.substr(0, 2), "5:");

  // Searched messages are not searched again: the cursor still answers from
  // what it saw even when (against the contract) an old message is changed
  // in place under the same uid.
  std::vector<Message> doctored = msgs;
  for (Message& m : doctored) {
    for (ContentBlock& b : m.content) b.meta = Json();
  }
  EXPECT_EQ(cursor.Read(doctored).open.size(), 1u);
  EXPECT_TRUE(ReadSnapshot(doctored).open.empty());

  // A transient tail is searched every time and does not stick.
  std::vector<Message> tail = {Message::User("from the tail")};
  ExpectSameSnapshot(cursor.Read(msgs, tail), ReadSnapshot(msgs, tail), "with a tail");
  ExpectSameSnapshot(cursor.Read(msgs), ReadSnapshot(msgs), "tail gone");

  // Compaction: the prefix holding the list is replaced by a summary with
  // new uids; the list is gone and the cursor must not remember it.
  std::vector<Message> compacted = {Message::User("summary of earlier work")};
  compacted[0].uid = 900;
  compacted[0].tag = "compaction-summary";
  Message last = msgs.back();
  compacted.push_back(last);
  got = cursor.Read(compacted);
  ExpectSameSnapshot(got, ReadSnapshot(compacted), "after compaction");

  // The last message popped and another appended in its place.
  std::vector<Message> popped = msgs;
  popped.back() = Message::Assistant("different");
  popped.back().uid = 901;
  ExpectSameSnapshot(cursor.Read(popped), ReadSnapshot(popped), "after a pop");

  // Messages without uids are searched in full every time.
  std::vector<Message> plain = h.messages();
  ExpectSameSnapshot(cursor.Read(plain), ReadSnapshot(plain), "no uids");
  plain.resize(2);
  ExpectSameSnapshot(cursor.Read(plain), ReadSnapshot(plain), "no uids, shorter");
}

struct Recorded {
  std::vector<std::pair<std::string, std::string>> notes;  // level, text
};

class TodoLoopHookTest : public ::testing::Test {
 protected:
  TodoLoopOptions Options() {
    TodoLoopOptions o;
    o.kill_switch_global = dir_.path() / "global-off";
    o.kill_switch_local = ".agentloop/todo-loop-off";
    o.config_source = "/etc/agentloop/config.toml";
    o.notify = [this](const std::string& sid, const std::string& level, const std::string& text) {
      EXPECT_EQ(sid, "s1");
      rec_.notes.emplace_back(level, text);
    };
    return o;
  }
  HookContext Ctx() {
    HookContext c;
    c.session_id = "s1";
    c.turn_id = "t1";
    c.workspace = dir_.path() / "ws";
    return c;
  }
  TurnEndInfo Settle(const History& h, StopReason stop = StopReason::kCompleted) {
    TurnEndInfo info;
    info.stop = stop;
    info.history = h.messages();
    info.tool_result_count = 0;
    return info;
  }

  TempDir dir_;
  Recorded rec_;
};

TEST_F(TodoLoopHookTest, SettleWithOpenTasksContinuesWithAMarker) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("build it").Todo(R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b"}]})");
  h.Say("I made a plan.");
  TurnEndVerdict v = hook.OnTurnEnd(Ctx(), Settle(h));
  EXPECT_TRUE(v.continue_turn);
  ASSERT_EQ(v.entries.size(), 1u);
  EXPECT_EQ(v.entries[0].role, Role::kUser);
  EXPECT_EQ(v.entries[0].tag, "todo-loop:continue");
  EXPECT_EQ(v.entries[0].JoinedText(),
            "Continue with the open todo tasks. If the human's latest instruction says to stop or "
            "limits what to do, do that instead.");
  EXPECT_TRUE(rec_.notes.empty()) << "a continue is not announced";
  LoopStatus st = hook.Status("s1");
  EXPECT_EQ(st.state.rounds, 1);
  EXPECT_EQ(st.reason, "continuing: round 1/12, 2 open");
  Json want = Json::parse(R"({"round":1,"max_rounds":12,"strikes":0,"max_strikes":2,
      "reason":"continuing: round 1/12, 2 open","continue":true,"open":2})");
  EXPECT_EQ(hook.LastDecisionJson("s1"), want);
  // The verdict carries the decision for the turn's `continuation` event.
  EXPECT_EQ(v.reason, "continuing: round 1/12, 2 open");
  EXPECT_EQ(v.details, Json::parse(R"({"round":1,"max_rounds":12,"strikes":0,"max_strikes":2,
      "open":2})"));
}

TEST_F(TodoLoopHookTest, OnlyCompletedTurnsContinueAndStopsAreAnnouncedOnce) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})").Say("stopping");
  for (StopReason stop : {StopReason::kBudgetExhausted, StopReason::kDenied,
                          StopReason::kPendingApproval, StopReason::kAborted}) {
    EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h, stop)).continue_turn);
  }
  ASSERT_EQ(rec_.notes.size(), 4u);
  EXPECT_EQ(rec_.notes[0],
            std::make_pair(std::string("info"), std::string("todo-loop: stopped: turn outcome was "
                                                            "budget_exhausted")));
  EXPECT_EQ(rec_.notes[3].second, "todo-loop: stopped: turn outcome was aborted");
  // The same reason again is silent.
  EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h, StopReason::kAborted)).continue_turn);
  EXPECT_EQ(rec_.notes.size(), 4u);
}

TEST_F(TodoLoopHookTest, NoListAndClearListStop) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("hi").Say("hello");
  EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(hook.Status("s1").reason, "stopped: no list");
  EXPECT_TRUE(rec_.notes.empty()) << "without a todo list the loop says nothing";
  h.Todo(R"({"action":"create","subject":"a"})")
      .Todo(R"({"action":"update","id":1,"status":"completed"})")
      .Say("done");
  EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(hook.Status("s1").reason, "stopped: list is clear");
}

TEST_F(TodoLoopHookTest, UnchangedListStopsAfterTwoStrikesAndToolStepsClearStrikes) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})").Say("plan");
  EXPECT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);  // round 1
  h.Append(MakeMarker()).Say("thinking");
  EXPECT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);  // strike 1, round 2
  EXPECT_EQ(hook.Status("s1").state.strikes, 1);
  // A step that ran tools is work: strikes cleared, no round spent.
  h.Append(MakeMarker()).Tool("bash");
  StepEndInfo step;
  step.history = h.messages();
  step.tool_names = {"bash"};
  hook.AfterStep(Ctx(), step);
  EXPECT_EQ(hook.Status("s1").state.strikes, 0);
  EXPECT_EQ(hook.Status("s1").state.rounds, 2);
  h.Say("still");
  EXPECT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);  // strike 1 again, round 3
  h.Append(MakeMarker()).Say("still nothing");
  EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(hook.Status("s1").reason, "stopped: 2 consecutive turns with no progress, 1 open");
  EXPECT_EQ(hook.Status("s1").state.strikes, 2);
  ASSERT_FALSE(rec_.notes.empty());
  EXPECT_EQ(rec_.notes.back().second,
            "todo-loop: stopped: 2 consecutive turns with no progress, 1 open");
  // A new human message starts a new budget.
  h.Human("keep going");
  h.Say("ok");
  EXPECT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(hook.Status("s1").state.rounds, 1);
}

TEST_F(TodoLoopHookTest, ClearedByTodoCallsAloneWarnsOnce) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})");
  StepEndInfo step;
  step.history = h.messages();
  step.tool_names = {"todo"};
  hook.AfterStep(Ctx(), step);  // 1 open
  EXPECT_TRUE(rec_.notes.empty());
  h.Todo(R"({"action":"update","id":1,"status":"completed"})");
  step.history = h.messages();
  hook.AfterStep(Ctx(), step);
  ASSERT_EQ(rec_.notes.size(), 1u);
  EXPECT_EQ(rec_.notes[0].first, "warning");
  EXPECT_EQ(rec_.notes[0].second,
            "todo-loop: the list was cleared by todo calls alone in that turn \xE2\x80\x94 no "
            "other tool work accompanied it");
  hook.AfterStep(Ctx(), step);  // still clear: said once
  EXPECT_EQ(rec_.notes.size(), 1u);
}

TEST_F(TodoLoopHookTest, ClearedAlongsideOtherToolsDoesNotWarn) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})");
  StepEndInfo step;
  step.history = h.messages();
  step.tool_names = {"todo"};
  hook.AfterStep(Ctx(), step);
  h.Todo(R"({"action":"update","id":1,"status":"completed"})");
  step.history = h.messages();
  step.tool_names = {"bash", "todo"};
  hook.AfterStep(Ctx(), step);
  EXPECT_TRUE(rec_.notes.empty());
}

TEST_F(TodoLoopHookTest, TurnEndAfterToolsTakesTheToolBranch) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})").Tool("bash");
  TurnEndInfo info = Settle(h, StopReason::kBudgetExhausted);
  info.tool_result_count = 1;
  EXPECT_FALSE(hook.OnTurnEnd(Ctx(), info).continue_turn);
  EXPECT_EQ(hook.Status("s1").reason, "stopped: turn outcome was budget_exhausted");
  EXPECT_EQ(hook.Status("s1").state.rounds, 0);
  EXPECT_TRUE(hook.LastDecisionJson("s1").is_null()) << "no decision on a tool turn";
}

TEST_F(TodoLoopHookTest, BeforeModelCallInjectsOpenTasksAtTheTail) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"parse"})");
  ModelRequest req;
  req.history = h.messages();
  hook.BeforeModelCall(Ctx(), req);
  ASSERT_EQ(req.tail.size(), 1u);
  EXPECT_EQ(req.history.size(), h.messages().size());
  std::string block = req.tail[0].JoinedText();
  EXPECT_EQ(block.rfind("<todo_loop_state>\n1 tracked task(s) are still open on this branch:\n"
                        "  1. [pending] parse\n",
                        0),
            0u)
      << block;
  EXPECT_EQ(block.find("reconcile"), std::string::npos) << "no reconcile clause on round 0";

  // After a continuation the marker is replaced and the reconcile clause appears.
  h.Say("plan ready");
  ASSERT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  h.Append(MakeMarker());
  ModelRequest next;
  next.history = h.messages();
  hook.BeforeModelCall(Ctx(), next);
  EXPECT_EQ(next.history.size(), h.messages().size() - 1) << "trailing marker dropped";
  ASSERT_EQ(next.tail.size(), 1u);
  EXPECT_NE(next.tail[0].JoinedText().find("reconcile it now"), std::string::npos);
}

TEST_F(TodoLoopHookTest, NoInjectionWithoutOpenTasksOrWhenOff) {
  History h;
  h.Human("go").Say("hi");
  {
    TodoLoopHook hook(Options());
    ModelRequest req;
    req.history = h.messages();
    hook.BeforeModelCall(Ctx(), req);
    EXPECT_TRUE(req.tail.empty());
  }
  h.Todo(R"({"action":"create","subject":"a"})");
  TodoLoopOptions o = Options();
  o.config.inject_state = false;
  TodoLoopHook hook(o);
  ModelRequest req;
  req.history = h.messages();
  hook.BeforeModelCall(Ctx(), req);
  EXPECT_TRUE(req.tail.empty());
  EXPECT_EQ(req.history.size(), h.messages().size());
}

TEST_F(TodoLoopHookTest, KillSwitchFilesMakeEveryHookANoOp) {
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})").Say("plan");
  for (int which = 0; which < 3; ++which) {
    TodoLoopOptions o = Options();
    fs::path file;
    if (which == 0) file = o.kill_switch_global;
    if (which == 1) file = Ctx().workspace / ".agentloop" / "todo-loop-off";
    if (which == 2) o.disabled = true;
    TodoLoopHook hook(o);
    if (!file.empty()) Touch(file);
    ModelRequest req;
    req.history = h.messages();
    hook.BeforeModelCall(Ctx(), req);
    EXPECT_TRUE(req.tail.empty()) << which;
    EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn) << which;
    EXPECT_EQ(hook.Status("s1").state.rounds, 0);
    EXPECT_TRUE(hook.Status("s1").disabled);
    EXPECT_EQ(hook.TodoLoopCommand("s1", "", h.messages()).substr(0, 40),
              "todo-loop DISABLED (kill-switch present)");
    if (!file.empty()) {
      // Checked on every call: removing the file re-enables the loop at once.
      fs::remove(file);
      EXPECT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn) << which;
    }
  }
}

TEST_F(TodoLoopHookTest, ConfigIsClampedAndReloaded) {
  TodoLoopOptions o = Options();
  int calls = 0;
  o.load_config = [&calls] {
    ++calls;
    return ClampConfig(Json::parse(R"({"maxRounds": 1e9, "maxStrikes": 0})"));
  };
  TodoLoopHook hook(o);
  EXPECT_EQ(hook.CurrentConfig().max_rounds, 1000);
  EXPECT_EQ(hook.CurrentConfig().max_strikes, 2);
  EXPECT_EQ(calls, 2);
  TodoLoopOptions big = Options();
  big.config.max_rounds = 5000;
  EXPECT_EQ(TodoLoopHook(big).CurrentConfig().max_rounds, 1000);
}

TEST_F(TodoLoopHookTest, StatusCommandLines) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b"}]})");
  h.Todo(R"({"action":"update","id":1,"status":"completed"})").Say("one done");
  std::string anchor = NewestHumanAnchor(h.messages());
  ASSERT_EQ(anchor.substr(0, 2), "0:");
  EXPECT_EQ(hook.TodoLoopCommand("s1", "", h.messages()),
            "todo-loop active\n"
            "rounds 0/12 \xC2\xB7 strikes 0/2\n"
            "open 1/2 tracked \xC2\xB7 inject on\n"
            "anchor " +
                anchor +
                "\n"
                "last: idle\n"
                "config /etc/agentloop/config.toml");
  ASSERT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(hook.TodoLoopCommand("s1", "  STATUS ", h.messages()),
            "todo-loop active\n"
            "rounds 1/12 \xC2\xB7 strikes 0/2\n"
            "open 1/2 tracked \xC2\xB7 inject on\n"
            "anchor " +
                anchor +
                "\n"
                "last: continuing: round 1/12, 1 open\n"
                "config /etc/agentloop/config.toml");
  EXPECT_EQ(hook.TodoLoopCommand("s1", "Pause now"), "todo-loop: paused in this session");
  std::string paused = hook.TodoLoopCommand("s1", "status", h.messages());
  EXPECT_EQ(paused.substr(0, paused.find('\n')), "todo-loop PAUSED");
  EXPECT_NE(paused.find("\nlast: paused by user\n"), std::string::npos);
  // Paused: hooks do nothing.
  ModelRequest req;
  req.history = h.messages();
  hook.BeforeModelCall(Ctx(), req);
  EXPECT_TRUE(req.tail.empty());
  EXPECT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  // Reset keeps paused.
  EXPECT_EQ(hook.TodoLoopCommand("s1", "reset"), "todo-loop: counters reset");
  EXPECT_TRUE(hook.Status("s1").paused);
  EXPECT_EQ(hook.Status("s1").state, LoopState{});
  EXPECT_EQ(hook.TodoLoopCommand("s1", "resume"), "todo-loop: resumed");
  EXPECT_FALSE(hook.Status("s1").paused);
  EXPECT_EQ(hook.TodoLoopCommand("s1", "bogus thing"),
            "todo-loop: unknown argument \"bogus\"; use status, pause, resume or reset\n"
            "todo-loop active\n"
            "rounds 0/12 \xC2\xB7 strikes 0/2\n"
            "open 0/0 tracked \xC2\xB7 inject on\n"
            "anchor (none)\n"
            "last: resumed by user\n"
            "config /etc/agentloop/config.toml");
  std::string extra = hook.TodoLoopCommand("s1", "status A  b");
  EXPECT_EQ(extra.substr(0, extra.find('\n')),
            "todo-loop: ignoring extra arguments \"a b\"; use status, pause, resume or reset");
  // A stop shows the stopped mode.
  ASSERT_FALSE(hook.OnTurnEnd(Ctx(), Settle(h, StopReason::kDenied)).continue_turn);
  std::string stopped = hook.TodoLoopCommand("s1", "");
  EXPECT_EQ(stopped.substr(0, stopped.find('\n')),
            "todo-loop stopped (next human message starts a new budget)");
}

TEST_F(TodoLoopHookTest, StateExportsAndImports) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})").Say("plan");
  ASSERT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  Json exported = hook.ExportState("s1");
  EXPECT_EQ(exported["rounds"], 1);
  EXPECT_EQ(exported["lastSignature"], "1:pending");
  EXPECT_EQ(exported["reason"], "continuing: round 1/12, 1 open");
  EXPECT_EQ(exported["lastOpenCount"], 1);

  // A restart: a new hook picks up where the old one left off.
  TodoLoopHook restarted(Options());
  ASSERT_TRUE(restarted.ImportState("s1", exported).ok());
  EXPECT_EQ(restarted.ExportState("s1"), exported);
  h.Append(MakeMarker()).Say("nothing changed");
  ASSERT_TRUE(restarted.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(restarted.Status("s1").state.strikes, 1) << "the strike count carried over";
  EXPECT_EQ(restarted.Status("s1").state.rounds, 2);

  EXPECT_FALSE(restarted.ImportState("s1", Json::array()).ok());
  EXPECT_EQ(restarted.Status("s1").state.rounds, 2) << "a bad import leaves the state alone";
  restarted.ForgetSession("s1");
  EXPECT_EQ(restarted.Status("s1").state, LoopState{});
}

TEST_F(TodoLoopHookTest, SessionsAreIndependent) {
  TodoLoopHook hook(Options());
  History h;
  h.Human("go").Todo(R"({"action":"create","subject":"a"})").Say("plan");
  TodoLoopOptions o = Options();
  ASSERT_TRUE(hook.OnTurnEnd(Ctx(), Settle(h)).continue_turn);
  EXPECT_EQ(hook.TodoLoopCommand("s2", "pause"), "todo-loop: paused in this session");
  EXPECT_FALSE(hook.Status("s1").paused);
  EXPECT_EQ(hook.Status("s2").state.rounds, 0);
}

}  // namespace
}  // namespace agentloop::todo
