// End-to-end: the todo tool and the continuation loop on the real turn
// state machine (agentloop::Turn + RunTurn) with a scripted fake model.
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "agentloop/event_data.h"
#include "agentloop/runner.h"
#include "agentloop/transcript.h"
#include "agentloop/turn.h"

#include "todo/snapshot.h"
#include "todo/todo_loop_hook.h"
#include "todo/todo_tool.h"

namespace agentloop::todo {
namespace {

// Answers from a script indexed by call number and records every request
// exactly as the provider would send it (history followed by tail).
class ScriptModel : public ModelProvider {
 public:
  using Step = std::function<ModelResponse(int index)>;
  explicit ScriptModel(std::vector<Step> steps) : steps_(std::move(steps)) {}

  std::string_view name() const override { return "e2e-script"; }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink&,
                                 std::stop_token) override {
    std::vector<Message> sent;
    request.ForEachMessage([&](const Message& m) { sent.push_back(m); });
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(std::move(sent));
    int index = static_cast<int>(requests_.size()) - 1;
    if (index >= static_cast<int>(steps_.size())) {
      return FailedPrecondition("script exhausted at call " + std::to_string(index));
    }
    return steps_[index](index);
  }
  std::vector<std::vector<Message>> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::vector<Step> steps_;
  mutable std::mutex mu_;
  std::vector<std::vector<Message>> requests_;
};

ScriptModel::Step Say(std::string text) {
  return [text](int) {
    ModelResponse r;
    r.content.push_back(ContentBlock::Text(text));
    r.finish = FinishReason::kStop;
    r.usage.output_tokens = 5;
    r.has_usage = true;
    return r;
  };
}

// One assistant message with one `todo` call per input.
ScriptModel::Step Todo(std::vector<const char*> inputs) {
  return [inputs](int index) {
    ModelResponse r;
    int k = 0;
    for (const char* in : inputs) {
      r.content.push_back(ContentBlock::ToolUse(
          "call_" + std::to_string(index) + "_" + std::to_string(k++), "todo", Json::parse(in)));
    }
    r.finish = FinishReason::kToolUse;
    r.usage.output_tokens = 5;
    r.has_usage = true;
    return r;
  };
}

class Sink : public EventSink {
 public:
  Status OnEvent(const Event& e) override {
    events.push_back(e);
    return Status::Ok();
  }
  int Count(EventType t) const {
    int n = 0;
    for (const Event& e : events) n += e.type == t ? 1 : 0;
    return n;
  }
  std::vector<Event> events;
};

class TodoE2eTest : public ::testing::Test {
 protected:
  TodoE2eTest() {
    tool_ = std::make_shared<TodoTool>();
    registry_.Add(tool_);
    TodoLoopOptions o;
    o.kill_switch_local.clear();
    o.notify = [this](const std::string&, const std::string& level, const std::string& text) {
      notes_.emplace_back(level, text);
    };
    hook_ = std::make_shared<TodoLoopHook>(o);
  }

  TurnResult Run(ScriptModel& model, const std::string& prompt, Budget budget = Budget{}) {
    TurnConfig cfg;
    cfg.session_id = "e2e";
    cfg.turn_id = "turn1";
    cfg.budget = budget;
    cfg.tools = registry_.Specs();
    cfg.hooks = {std::make_shared<TodoReplayHook>(tool_), hook_};
    cfg.sink = &sink_;
    Turn turn(std::move(cfg), transcript_);
    Status s = turn.Start(TurnInput::User(prompt));
    EXPECT_TRUE(s.ok()) << s.ToString();
    RunnerDeps deps;
    deps.provider = &model;
    deps.tools = &registry_;
    deps.tool_context.session_id = "e2e";
    return RunTurn(turn, deps, std::stop_token());
  }

  std::shared_ptr<TodoTool> tool_;
  std::shared_ptr<TodoLoopHook> hook_;
  ToolRegistry registry_;
  Transcript transcript_;
  Sink sink_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

bool EndsWithBlock(const std::vector<Message>& sent) {
  if (sent.empty()) return false;
  const Message& last = sent.back();
  return last.role == Role::kUser && !last.content.empty() &&
         last.content.back().text.rfind("<todo_loop_state>", 0) == 0;
}

TEST_F(TodoE2eTest, ModelStopsTwiceWithOpenTasksAndTheLoopCarriesItToTheEnd) {
  ScriptModel model({
      Todo({R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b"},{"subject":"c"}]})"}),
      Say("Plan is in place."),  // settle 1: 3 open -> round 1
      Todo({R"({"action":"update","id":1,"status":"completed"})"}),
      Say("Finished a."),  // settle 2: 2 open, list changed -> round 2
      Todo({R"({"action":"update","id":2,"status":"completed"})",
            R"({"action":"update","id":3,"status":"completed"})"}),
      Say("All done."),  // settle 3: list is clear -> stop
  });
  TurnResult r = Run(model, "build a, b and c");
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.final_text, "All done.");
  EXPECT_EQ(model.requests().size(), 6u);

  // Two continuation markers in the store, each between two assistant messages.
  auto msgs = transcript_.messages();
  int markers = 0;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (!IsMarker(msgs[i])) continue;
    ++markers;
    ASSERT_GT(i, 0u);
    ASSERT_LT(i + 1, msgs.size());
    EXPECT_EQ(msgs[i - 1].role, Role::kAssistant);
    EXPECT_EQ(msgs[i + 1].role, Role::kAssistant);
  }
  EXPECT_EQ(markers, 2);

  // Every request while tasks were open carried the block at its tail, never
  // stored; the continuation requests replaced the trailing marker.
  auto reqs = model.requests();
  EXPECT_FALSE(EndsWithBlock(reqs[0])) << "no list yet";
  for (size_t i = 1; i < 5; ++i) EXPECT_TRUE(EndsWithBlock(reqs[i])) << "request " << i;
  EXPECT_FALSE(EndsWithBlock(reqs[5])) << "nothing open any more";
  for (const auto& sent : reqs) EXPECT_FALSE(IsMarker(sent.back())) << "never ends on a marker";
  EXPECT_EQ(reqs[2].back().content.back().text.find("reconcile it now") != std::string::npos, true)
      << "the reconcile clause from round 1 on";
  EXPECT_EQ(reqs[1].back().content.back().text.find("reconcile"), std::string::npos);
  EXPECT_NE(reqs[2].back().content.back().text.find("3 tracked task(s) are still open"),
            std::string::npos);
  for (const Message& m : msgs) {
    for (const ContentBlock& b : m.content) {
      EXPECT_EQ(b.text.find("<todo_loop_state>"), std::string::npos) << "the block is never stored";
    }
  }

  // One `continuation` event per settle decision, by the todo loop, in one
  // shape; a continuing decision is followed by its marker message.
  std::vector<ContinuationData> decisions;
  for (size_t i = 0; i < sink_.events.size(); ++i) {
    const Event& e = sink_.events[i];
    if (e.type != EventType::kContinuation) continue;
    auto d = ContinuationData::FromJson(e.ToJson());
    ASSERT_TRUE(d.ok()) << d.error().ToString();
    EXPECT_EQ(d->by, "todo-loop");
    if (d->continue_turn) {
      ASSERT_LT(i + 1, sink_.events.size());
      EXPECT_EQ(sink_.events[i + 1].type, EventType::kMessage);
      EXPECT_EQ(sink_.events[i + 1].ToJson()["message"]["tag"], "todo-loop:continue");
    }
    decisions.push_back(std::move(*d));
  }
  ASSERT_EQ(decisions.size(), 3u);
  EXPECT_EQ(decisions[0].reason, "continuing: round 1/12, 3 open");
  EXPECT_TRUE(decisions[0].continue_turn);
  EXPECT_EQ(decisions[0].entries, 1);
  EXPECT_EQ(decisions[0].details,
            Json::parse(R"({"round":1,"max_rounds":12,"strikes":0,"max_strikes":2,"open":3})"));
  EXPECT_EQ(decisions[1].reason, "continuing: round 2/12, 2 open");
  EXPECT_EQ(decisions[2].reason, "stopped: list is clear");
  EXPECT_FALSE(decisions[2].continue_turn);
  EXPECT_EQ(decisions[2].entries, 0);
  EXPECT_EQ(hook_->Status("e2e").state.rounds, 2);

  // The list in the store is the tool's list; a restarted tool agrees.
  TodoTool restarted;
  restarted.ReplayFromHistory("e2e", msgs);
  EXPECT_EQ(restarted.List("e2e"), tool_->List("e2e"));
  EXPECT_EQ(ReadSnapshot(msgs).open.size(), 0u);
  EXPECT_EQ(ReadSnapshot(msgs).tasks.size(), 3u);
}

TEST_F(TodoE2eTest, StuckModelIsStoppedAfterTwoStrikes) {
  ScriptModel model({
      Todo({R"({"action":"create","subject":"refactor the parser"})"}),
      Say("I will refactor the parser."),  // first settle: continue (round 1)
      Say("Still planning."),              // unchanged: strike 1, continue (round 2)
      Say("Thinking more."),               // unchanged: strike 2 -> stop
      Say("never asked"),
  });
  TurnResult r = Run(model, "refactor it");
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.final_text, "Thinking more.");
  EXPECT_EQ(model.requests().size(), 4u);
  LoopStatus st = hook_->Status("e2e");
  EXPECT_EQ(st.reason, "stopped: 2 consecutive turns with no progress, 1 open");
  EXPECT_EQ(st.state.strikes, 2);
  EXPECT_EQ(st.state.rounds, 2);
  ASSERT_FALSE(notes_.empty());
  EXPECT_EQ(notes_.back(),
            std::make_pair(std::string("info"),
                           std::string("todo-loop: stopped: 2 consecutive turns with no "
                                       "progress, 1 open")));
  int continued = 0;
  for (const Event& e : sink_.events) {
    if (e.type == EventType::kContinuation) continued += e.ToJson()["continue"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(continued, 2);
  EXPECT_EQ(sink_.Count(EventType::kContinuation), 3) << "two continues and the stop";
}

TEST_F(TodoE2eTest, BudgetStopIsNotContinued) {
  ScriptModel model({
      Todo({R"({"action":"create","subject":"a"})"}),
      Say("Plan ready."),  // continue, but the next model call is over max_turns
      Say("never asked"),
  });
  Budget budget;
  budget.max_turns = 2;
  TurnResult r = Run(model, "go", budget);
  EXPECT_EQ(r.stop, StopReason::kMaxTurns);
  EXPECT_EQ(model.requests().size(), 2u);
  EXPECT_EQ(hook_->Status("e2e").reason, "stopped: turn outcome was max_turns");
}

// A batch that stops the turn (here the tool-call budget, mid-batch) is not
// seen by AfterStep: the turn end reports its tool results, and the hook
// takes the tool-turn branch with the turn's outcome, warning that the list
// was cleared by todo calls alone.
TEST_F(TodoE2eTest, ABatchThatStopsTheTurnTakesTheToolBranchAtTheTurnEnd) {
  ScriptModel model({
      Todo({R"({"action":"create","subject":"a"})"}),
      Todo({R"({"action":"update","id":1,"status":"completed"})",
            R"({"action":"list"})"}),  // the second call is over the budget
      Say("never asked"),
  });
  Budget budget;
  budget.max_tool_calls = 2;
  TurnResult r = Run(model, "go", budget);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(model.requests().size(), 2u);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_EQ(notes_[0].first, "warning");
  EXPECT_EQ(
      notes_[0].second,
      "todo-loop: the list was cleared by todo calls alone in that turn \xE2\x80\x94 no other "
      "tool work accompanied it");
  EXPECT_EQ(hook_->Status("e2e").reason, "stopped: turn outcome was budget_exhausted");
  EXPECT_TRUE(hook_->LastDecisionJson("e2e").is_null()) << "a tool turn decides nothing";
  EXPECT_EQ(sink_.Count(EventType::kContinuation), 0);
}

}  // namespace
}  // namespace agentloop::todo
