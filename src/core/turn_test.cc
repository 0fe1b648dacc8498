#include "agentloop/turn.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/budget_ledger.h"
#include "agentloop/event_data.h"
#include "agentloop/runner.h"

#include "core/testing/fakes.h"
#include "protocol/codec.h"

namespace agentloop {
namespace {

using testing::Call;
using testing::CollectingSink;
using testing::FakeProvider;
using testing::FnTool;
using ::testing::HasSubstr;
using testing::ObjectSchema;
using testing::ScriptedApprover;

using testing::Spec;

// Every tool_use in an assistant message is answered by exactly one
// tool_result, in order, in the next message.
void ExpectValidTranscript(const Transcript& tr, bool allow_open_tail = false) {
  auto msgs = tr.messages();
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].role != Role::kAssistant || !msgs[i].HasToolUse()) continue;
    if (i + 1 == msgs.size()) {
      EXPECT_TRUE(allow_open_tail) << "open tool_use at the end of the transcript";
      continue;
    }
    std::vector<std::string> want;
    for (const auto& b : msgs[i].content) {
      if (b.type == BlockType::kToolUse) want.push_back(b.id);
    }
    std::vector<std::string> got;
    for (const auto& b : msgs[i + 1].content) {
      if (b.type == BlockType::kToolResult) got.push_back(b.tool_use_id);
    }
    EXPECT_EQ(got, want) << "message " << i;
  }
}

class TurnTest : public ::testing::Test {
 protected:
  TurnTest() {
    echo_ =
        std::make_shared<FnTool>(Spec("echo", false, true), [](const ToolCall& c, ToolContext&) {
          return Result<ToolOutput>(ToolOutput::Ok("echo:" + c.input.value("x", std::string())));
        });
    write_ = std::make_shared<FnTool>(
        Spec("write", true, false),
        [](const ToolCall&, ToolContext&) { return Result<ToolOutput>(ToolOutput::Ok("wrote")); });
    fail_ = std::make_shared<FnTool>(Spec("fail", false, false), [](const ToolCall&, ToolContext&) {
      return Result<ToolOutput>(ToolOutput::Error("no such file"));
    });
    registry_.Add(echo_);
    registry_.Add(write_);
    registry_.Add(fail_);
  }

  TurnConfig Config(CommandKind kind = CommandKind::kCode) {
    TurnConfig c;
    c.session_id = "sess";
    c.turn_id = "turn";
    c.command = kind;
    c.budget = DefaultBudget(kind);
    c.tools = registry_.Specs();
    c.sink = &sink_;
    c.system_prompt = "sys";
    return c;
  }

  TurnResult Run(TurnConfig cfg, TurnInput input, std::stop_token stop = {}) {
    Turn turn(std::move(cfg), transcript_);
    Status s = turn.Start(std::move(input));
    EXPECT_TRUE(s.ok()) << s.ToString();
    RunnerDeps deps;
    deps.provider = &provider_;
    deps.tools = &registry_;
    deps.approver = approver_;
    return RunTurn(turn, deps, stop);
  }
  TurnResult Run(TurnConfig cfg, std::string prompt = "hi") {
    return Run(std::move(cfg), TurnInput::User(std::move(prompt)));
  }
  // `paused` with every outstanding item decided as `d`, as the store
  // records it.
  static Checkpoint Decide(Checkpoint paused, const ApprovalDecision& d) {
    for (const auto& item : paused.outstanding) paused.decisions.push_back(BatchDecision{item, d});
    paused.outstanding.clear();
    return paused;
  }

  FakeProvider provider_;
  ToolRegistry registry_;
  Transcript transcript_;
  CollectingSink sink_;
  Approver* approver_ = nullptr;
  std::shared_ptr<FnTool> echo_, write_, fail_;
};

TEST_F(TurnTest, TextAnswerCompletes) {
  provider_.Text("hello there", 7);
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.final_text, "hello there");
  EXPECT_EQ(r.counters.model_calls, 1);
  EXPECT_EQ(r.counters.tool_calls, 0);
  EXPECT_EQ(r.counters.tokens, 7);
  ASSERT_EQ(transcript_.size(), 2u);
  EXPECT_EQ(provider_.requests()[0].system, "sys");
}

TEST_F(TurnTest, ToolCallThenAnswer) {
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "echo", {{"x", "2"}})}).Text("done");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.counters.tool_calls, 2);
  ASSERT_EQ(transcript_.size(), 4u);
  const auto& results = transcript_.messages()[2];
  ASSERT_EQ(results.content.size(), 2u);
  EXPECT_EQ(results.content[0].tool_use_id, "a");
  EXPECT_EQ(results.content[0].text, "echo:1");
  EXPECT_EQ(results.content[1].text, "echo:2");
  ExpectValidTranscript(transcript_);
}

// A 1x1 PNG (70 bytes).
constexpr char kPng[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg"
    "==";

TEST_F(TurnTest, AToolsImagesReachItsResultAndTheNextRequest) {
  registry_.Add(
      std::make_shared<FnTool>(Spec("shot", false, false), [](const ToolCall&, ToolContext&) {
        ToolOutput out = ToolOutput::Ok("a screenshot");
        out.images.push_back(ContentBlock::Image("image/png", kPng));
        // An embedder's tool may return anything: not a PNG's bytes.
        out.images.push_back(ContentBlock::Image("image/png", "AAAA"));
        return Result<ToolOutput>(std::move(out));
      }));
  provider_.Calls({Call("a", "shot", {{"x", "1"}})}).Text("done");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  const ContentBlock& result = transcript_.messages()[2].content[0];
  ASSERT_EQ(result.images.size(), 1u);
  EXPECT_EQ(result.images[0], ContentBlock::Image("image/png", kPng));
  EXPECT_EQ(result.text,
            "a screenshot\n[image image/png, 3 bytes, not shown: not a valid image: the bytes are "
            "not a png image]");
  // The image is part of what the model is sent next.
  ASSERT_EQ(provider_.requests().size(), 2u);
  ASSERT_FALSE(provider_.requests()[1].all.empty());
  EXPECT_EQ(provider_.requests()[1].all.back().content[0].images.size(), 1u);
}

TEST(BudgetTest, SeedDefaultsPerCommand) {
  struct Row {
    CommandKind kind;
    int calls;
    int64_t tokens;
  };
  const Row rows[] = {{CommandKind::kCode, 20, 50'000},
                      {CommandKind::kExplain, 5, 20'000},
                      {CommandKind::kFix, 20, 50'000},
                      {CommandKind::kPlan, 8, 30'000},
                      {CommandKind::kBuild, 30, 80'000}};
  for (const auto& row : rows) {
    Budget b = DefaultBudget(row.kind);
    EXPECT_EQ(b.max_tool_calls, row.calls) << CommandKindName(row.kind);
    EXPECT_EQ(b.max_tokens, row.tokens);
    EXPECT_EQ(b.max_turns, 25);
  }
  EXPECT_TRUE(IsReadOnly(CommandKind::kPlan));
  EXPECT_TRUE(IsReadOnly(CommandKind::kExplain));
  EXPECT_FALSE(IsReadOnly(CommandKind::kBuild));
}

TEST_F(TurnTest, PlanNinthToolCallExhaustsBudget) {
  int n = 0;
  provider_.fallback = [&](int) {
    ModelResponse r;
    const int i = n++;
    r.content.push_back(Call("c" + std::to_string(i), "echo", {{"x", std::to_string(n)}}));
    r.finish = FinishReason::kToolUse;
    r.usage.output_tokens = 10;
    r.has_usage = true;
    return Result<ModelResponse>(r);
  };
  TurnResult r = Run(Config(CommandKind::kPlan));
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(r.reason, "tool call budget exhausted (8 >= 8)");
  EXPECT_EQ(echo_->runs(), 8);
  EXPECT_EQ(r.counters.tool_calls, 8);
  ExpectValidTranscript(transcript_);
  EXPECT_THAT(transcript_.back().content[0].text, HasSubstr("not run: tool call budget exhausted"));
}

TEST_F(TurnTest, MidBatchBudgetStopAnswersEveryCall) {
  auto cfg = Config();
  cfg.budget.max_tool_calls = 2;
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "echo", {{"x", "2"}}),
                   Call("c", "echo", {{"x", "3"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(r.reason, "tool call budget exhausted (2 >= 2)");
  EXPECT_EQ(echo_->runs(), 2);
  ExpectValidTranscript(transcript_);
  const auto& results = transcript_.back();
  ASSERT_EQ(results.content.size(), 3u);
  EXPECT_FALSE(results.content[0].is_error);
  EXPECT_TRUE(results.content[2].is_error);
  EXPECT_EQ(provider_.calls(), 1);
}

TEST_F(TurnTest, TokenBudgetExceededAfterResponse) {
  auto cfg = Config();
  cfg.budget.max_tokens = 100;
  provider_.Text("long answer", 150);
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(r.reason, "token budget exceeded (150 > 100)");
  EXPECT_EQ(r.final_text, "long answer");
}

TEST_F(TurnTest, MissingUsageFallsBackToCharEstimate) {
  auto cfg = Config();
  cfg.budget.max_tokens = 1000;
  std::string big(8000, 'x');  // ~2000 tokens by chars/4
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}, /*tokens=*/0).Text("never");
  TurnResult r = Run(cfg, big);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_THAT(r.reason, HasSubstr("token budget exceeded ("));
  EXPECT_GT(r.counters.tokens, 2000);
  EXPECT_EQ(echo_->runs(), 0);
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, BudgetCheckedBeforeEveryModelCall) {
  auto cfg = Config();
  cfg.budget.max_tokens = 100;
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}, 100).Text("never");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(r.reason, "token budget exhausted (100 >= 100)");
  EXPECT_EQ(provider_.calls(), 1);
  EXPECT_EQ(echo_->runs(), 1);
}

TEST_F(TurnTest, MaxOutputTokensIsRemainingBudgetWithFloor) {
  auto cfg = Config();
  cfg.budget.max_tokens = 5000;
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}, 4500).Text("ok", 1);
  Run(cfg);
  auto reqs = provider_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].max_output_tokens, 5000);
  EXPECT_EQ(reqs[1].max_output_tokens, 1024);  // max(1024, 500)
}

TEST_F(TurnTest, MaxTurnsStopsAfterExactlyTheCap) {
  auto cfg = Config();
  cfg.budget.max_tool_calls = 1000;
  cfg.budget.max_tokens = 1'000'000;
  cfg.stuck_repeats = 0;
  provider_.fallback = [](int i) {
    ModelResponse r;
    r.content.push_back(Call("c" + std::to_string(i), "echo", {{"x", "same"}}));
    r.finish = FinishReason::kToolUse;
    r.usage.output_tokens = 1;
    r.has_usage = true;
    return Result<ModelResponse>(r);
  };
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kMaxTurns);
  EXPECT_EQ(provider_.calls(), 25);
  EXPECT_THAT(r.final_text, HasSubstr("Stopped after 25 turns without a final answer"));
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, BadArgumentsBecomeErrorResultsAndLoopGoesOn) {
  ContentBlock bad_json = Call("a", "echo", nullptr);
  bad_json.raw_input = "{\"x\": ";
  provider_
      .Calls({bad_json, Call("b", "echo", {{"y", "1"}}), Call("c", "nope", {{"x", "1"}}),
              Call("d", "echo", {{"x", 5}}), Call("e", "fail", {{"x", "1"}})})
      .Text("recovered");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(echo_->runs(), 0);
  const auto& res = transcript_.messages()[2].content;
  ASSERT_EQ(res.size(), 5u);
  EXPECT_TRUE(res[0].is_error);
  EXPECT_THAT(res[0].text, HasSubstr("not valid JSON"));
  EXPECT_THAT(res[1].text, HasSubstr("x: required field is missing"));
  EXPECT_THAT(res[2].text, HasSubstr("unknown tool 'nope'"));
  EXPECT_THAT(res[3].text, HasSubstr("x: expected string, got integer"));
  EXPECT_EQ(res[4].text, "no such file");
  EXPECT_TRUE(res[4].is_error);
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, EngineFailureOfToolFailsTurnWithValidTranscript) {
  registry_.Add(std::make_shared<FnTool>(Spec("broken", false, false),
                                         [](const ToolCall&, ToolContext&) -> Result<ToolOutput> {
                                           return Internal("disk on fire");
                                         }));
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  provider_.Calls({Call("a", "broken", {{"x", "1"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kFailed);
  EXPECT_THAT(r.reason, HasSubstr("disk on fire"));
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, ToolUseWithNoCallsCompletes) {
  ModelResponse resp;
  resp.content.push_back(ContentBlock::Text("nothing to do"));
  resp.finish = FinishReason::kToolUse;
  provider_.Push(resp);
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.final_text, "nothing to do");
  EXPECT_EQ(provider_.calls(), 1);
}

TEST_F(TurnTest, TruncatedResponseCompletesMarkedTruncated) {
  ModelResponse resp;
  resp.content.push_back(ContentBlock::Text("partial ans"));
  resp.content.push_back(Call("a", "echo", {{"x", "1"}}));
  resp.finish = FinishReason::kLength;
  provider_.Push(resp);
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.final_text, "partial ans");
  EXPECT_EQ(echo_->runs(), 0);
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, ARefusedAnswerEndsTheTurnRefusedAndRunsNothing) {
  ModelResponse resp;
  resp.content.push_back(ContentBlock::Text("I can't help with that"));
  resp.content.push_back(Call("a", "echo", {{"x", "1"}}));
  resp.finish = FinishReason::kRefused;
  provider_.Push(resp);
  provider_.Text("never asked");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kRefused);
  EXPECT_THAT(r.reason, HasSubstr("refused"));
  EXPECT_EQ(r.final_text, "I can't help with that");
  EXPECT_EQ(echo_->runs(), 0);
  EXPECT_EQ(provider_.calls(), 1);
  EXPECT_EQ(StopReasonName(StopReason::kRefused), "refused");
  EXPECT_EQ(ParseStopReason("refused"), StopReason::kRefused);
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, PlanModeHidesAndRefusesMutatingTools) {
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "write", {{"x", "f"}})}).Text("no");
  TurnResult r = Run(Config(CommandKind::kPlan));
  EXPECT_EQ(r.stop, StopReason::kToolRefused);
  EXPECT_THAT(r.reason, ::testing::StartsWith("PLAN_MODE_REFUSED:"));
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_EQ(echo_->runs(), 0);  // nothing of the batch runs
  auto tools = provider_.requests()[0].tools;
  EXPECT_EQ(std::count(tools.begin(), tools.end(), "write"), 0);
  EXPECT_EQ(std::count(tools.begin(), tools.end(), "echo"), 1);
  ExpectValidTranscript(transcript_);
  EXPECT_EQ(Turn::CheckReadOnly(CommandKind::kPlan, Spec("write", true, false)).substr(0, 18),
            "PLAN_MODE_REFUSED:");
  EXPECT_TRUE(Turn::CheckReadOnly(CommandKind::kCode, Spec("write", true, false)).empty());
}

TEST_F(TurnTest, PlanModeRefusesEvenWhenRulesAllowEverything) {
  struct AllowAll : PermissionPolicy {
    PolicyVerdict Evaluate(const ToolSpec&, const ToolCall&) const override {
      return {Decision::kAllow, "allow all", "*"};
    }
  };
  auto cfg = Config(CommandKind::kExplain);
  cfg.policy = std::make_shared<AllowAll>();
  provider_.Calls({Call("b", "write", {{"x", "f"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kToolRefused);
  EXPECT_EQ(write_->runs(), 0);
}

TEST_F(TurnTest, PlanModeOffersAToolConfinedThereAndTellsItTheCommandIsReadOnly) {
  ToolSpec spec = Spec("sandboxed", true, false);
  spec.confined_in_read_only = true;
  std::vector<bool> read_only_seen;
  registry_.Add(std::make_shared<FnTool>(spec, [&](const ToolCall&, ToolContext& ctx) {
    read_only_seen.push_back(ctx.read_only);
    return Result<ToolOutput>(ToolOutput::Ok("ran"));
  }));
  struct AllowAll : PermissionPolicy {
    PolicyVerdict Evaluate(const ToolSpec&, const ToolCall&) const override {
      return {Decision::kAllow, "allow all", "*"};
    }
  };
  EXPECT_TRUE(Turn::CheckReadOnly(CommandKind::kPlan, spec).empty());
  auto cfg = Config(CommandKind::kPlan);
  cfg.policy = std::make_shared<AllowAll>();
  provider_.Calls({Call("a", "sandboxed", {{"x", "1"}})}).Text("planned");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  EXPECT_EQ(read_only_seen, std::vector<bool>{true});
  auto tools = provider_.requests()[0].tools;
  EXPECT_EQ(std::count(tools.begin(), tools.end(), "sandboxed"), 1);
  EXPECT_EQ(std::count(tools.begin(), tools.end(), "write"), 0);

  auto code = Config(CommandKind::kCode);
  code.policy = std::make_shared<AllowAll>();
  provider_.Calls({Call("b", "sandboxed", {{"x", "2"}})}).Text("done");
  r = Run(code);
  EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  EXPECT_EQ(read_only_seen, (std::vector<bool>{true, false}));
}

TEST_F(TurnTest, CancelledBeforeModelCall) {
  std::stop_source src;
  src.request_stop();
  provider_.Text("never");
  Turn turn(Config(), transcript_);
  ASSERT_TRUE(turn.Start(TurnInput::User("hi")).ok());
  RunnerDeps deps;
  deps.provider = &provider_;
  deps.tools = &registry_;
  TurnResult r = RunTurn(turn, deps, src.get_token());
  EXPECT_EQ(r.stop, StopReason::kAborted);
  EXPECT_EQ(r.reason, "aborted");
  EXPECT_EQ(provider_.calls(), 0);
}

TEST_F(TurnTest, CancelledDuringToolsEndsAbortedWithValidTranscript) {
  std::stop_source src;
  registry_.Add(
      std::make_shared<FnTool>(Spec("slow", false, false), [&](const ToolCall&, ToolContext& ctx) {
        src.request_stop();  // e.g. Ctrl-C while running
        EXPECT_TRUE(ctx.stop.stop_requested());
        return Result<ToolOutput>(ToolOutput::Error("cancelled"));
      }));
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  provider_.Calls({Call("a", "slow", {{"x", "1"}}), Call("b", "echo", {{"x", "1"}})}).Text("never");
  TurnResult r = Run(cfg, TurnInput::User("go"), src.get_token());
  EXPECT_EQ(r.stop, StopReason::kAborted);
  EXPECT_EQ(provider_.calls(), 1);
  EXPECT_EQ(echo_->runs(), 0);
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, ParallelLanesRunSafeCallsConcurrently) {
  // Two safe calls that each wait for the other: only concurrent execution
  // lets both finish before the timeout.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool both_met = true;
  registry_.Add(
      std::make_shared<FnTool>(Spec("meet", false, true), [&](const ToolCall&, ToolContext&) {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        bool ok = cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrived >= 2; });
        if (!ok) both_met = false;
        return Result<ToolOutput>(ToolOutput::Ok(ok ? "met" : "alone"));
      }));
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  provider_.Calls({Call("a", "meet", {{"x", "1"}}), Call("b", "meet", {{"x", "2"}}),
                   Call("c", "write", {{"x", "3"}}), Call("d", "echo", {{"x", "4"}})});
  provider_.Text("ok");
  approver_ = nullptr;
  struct AllowAll : PermissionPolicy {
    PolicyVerdict Evaluate(const ToolSpec&, const ToolCall&) const override {
      return {Decision::kAllow, "ok", ""};
    }
  };
  cfg.policy = std::make_shared<AllowAll>();
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_TRUE(both_met);
  const auto& res = transcript_.messages()[2].content;
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[0].text, "met");
  EXPECT_EQ(res[1].text, "met");
  EXPECT_EQ(res[2].text, "wrote");
  EXPECT_EQ(res[3].text, "echo:4");
}

TEST(ToolLanesTest, LanesGroupConsecutiveSafeCalls) {
  // [safe, safe, unsafe, safe] -> lanes P(2), S, P(1): checked via the Turn's RunTools action.
  ToolRegistry reg;
  auto safe = std::make_shared<FnTool>(Spec("s", false, true), [](const ToolCall&, ToolContext&) {
    return Result<ToolOutput>(ToolOutput::Ok("s"));
  });
  auto unsafe = std::make_shared<FnTool>(
      Spec("u", false, false),
      [](const ToolCall&, ToolContext&) { return Result<ToolOutput>(ToolOutput::Ok("u")); });
  reg.Add(safe);
  reg.Add(unsafe);
  Transcript tr;
  TurnConfig cfg;
  cfg.tools = reg.Specs();
  Turn turn(cfg, tr);
  ASSERT_TRUE(turn.Start(TurnInput::User("go")).ok());
  auto a = turn.Next({});
  ASSERT_TRUE(std::holds_alternative<turn_action::CallModel>(a));
  ModelResponse resp;
  resp.content = {Call("1", "s", {{"x", "a"}}), Call("2", "s", {{"x", "b"}}),
                  Call("3", "u", {{"x", "c"}}), Call("4", "s", {{"x", "d"}})};
  resp.finish = FinishReason::kToolUse;
  turn.OnModelResult(resp);
  auto b = turn.Next({});
  auto* run = std::get_if<turn_action::RunTools>(&b);
  ASSERT_NE(run, nullptr);
  ASSERT_EQ(run->lanes.size(), 3u);
  EXPECT_EQ(run->lanes[0].size(), 2u);
  EXPECT_EQ(run->lanes[1].size(), 1u);
  EXPECT_EQ(run->lanes[1][0].id, "3");
  EXPECT_EQ(run->lanes[2].size(), 1u);
}

TEST_F(TurnTest, StuckLoopGuardStopsRepeatedIdenticalCalls) {
  auto cfg = Config();
  cfg.budget.max_tool_calls = 100;
  cfg.budget.max_tokens = 1'000'000;
  provider_.fallback = [](int i) {
    ModelResponse r;
    r.content.push_back(Call("c" + std::to_string(i), "echo", {{"x", "same"}}));
    r.finish = FinishReason::kToolUse;
    r.usage.output_tokens = 1;
    r.has_usage = true;
    return Result<ModelResponse>(r);
  };
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kMaxTurns);
  EXPECT_EQ(r.reason,
            "stuck: tool 'echo' was called 8 times with the same arguments in the last 8 calls");
  EXPECT_EQ(echo_->runs(), 7);
  ExpectValidTranscript(transcript_);
}

// ---- permissions and approvals --------------------------------------------

struct MapPolicy : PermissionPolicy {
  std::map<std::string, Decision> by_tool;
  PolicyVerdict Evaluate(const ToolSpec& spec, const ToolCall&) const override {
    auto it = by_tool.find(spec.name);
    Decision d = it == by_tool.end() ? Decision::kAllow : it->second;
    return {d, "rule for " + spec.name, spec.name};
  }
};

// A call a rule allows reaches a tool that confines such calls marked
// confined; the same call approved by a person does not. Where the tool
// cannot confine itself, the rule-allowed call is asked about instead (once
// noticed), unless the policy proved it read-only.
TEST_F(TurnTest, RuleAllowedCallsRunConfinedAndPersonApprovedOnesDoNot) {
  ToolSpec spec = Spec("sh", true, false);
  spec.confines_rule_allowed = true;
  std::vector<bool> confined_seen;
  registry_.Add(std::make_shared<FnTool>(spec, [&](const ToolCall& c, ToolContext&) {
    confined_seen.push_back(c.confined);
    return Result<ToolOutput>(ToolOutput::Ok("ran"));
  }));
  auto policy = std::make_shared<MapPolicy>();
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  cfg.policy = policy;
  provider_.Calls({Call("a", "sh", {{"x", "1"}})}).Text("done");
  EXPECT_EQ(Run(cfg).stop, StopReason::kCompleted);
  policy->by_tool["sh"] = Decision::kAsk;
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Allow("console"));
  approver_ = &approver;
  provider_.Calls({Call("b", "sh", {{"x", "2"}})}).Text("done");
  EXPECT_EQ(Run(cfg).stop, StopReason::kCompleted);
  EXPECT_EQ(confined_seen, (std::vector<bool>{true, false}));
}

TEST_F(TurnTest, RuleAllowedCallsAreAskedWhereTheToolCannotConfineThem) {
  ToolSpec spec = Spec("sh", true, false);
  spec.confinement_unavailable = "the sandbox cannot run here";
  auto sh = std::make_shared<FnTool>(spec, [](const ToolCall&, ToolContext&) {
    return Result<ToolOutput>(ToolOutput::Ok("ran"));
  });
  registry_.Add(sh);
  struct ProvesReadOnly : PermissionPolicy {
    PolicyVerdict Evaluate(const ToolSpec&, const ToolCall& c) const override {
      PolicyVerdict v{Decision::kAllow, "matched rule 'sh(*)'", "sh(*)"};
      v.read_only = c.input.value("x", "") == "ro";
      return v;
    }
  };
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  cfg.policy = std::make_shared<ProvesReadOnly>();
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Deny("no", "console"));
  approver_ = &approver;
  provider_.Calls({Call("a", "sh", {{"x", "1"}}), Call("b", "sh", {{"x", "2"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kDenied);
  EXPECT_EQ(sh->runs(), 0);
  ASSERT_EQ(approver.seen.size(), 1u);  // asked (and the sibling skipped after the denial)
  EXPECT_THAT(approver.seen[0].reason, HasSubstr("the sandbox cannot run here"));
  EXPECT_THAT(approver.seen[0].reason, HasSubstr("matched rule 'sh(*)'"));
  // Said once, however many calls were asked.
  auto notices = sink_.OfType(EventType::kNotice);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_THAT(notices[0].ToJson().dump(), HasSubstr("the sandbox cannot run here"));
  // A call the policy proved read-only runs, unconfined.
  provider_.Calls({Call("c", "sh", {{"x", "ro"}})}).Text("done");
  EXPECT_EQ(Run(cfg).stop, StopReason::kCompleted);
  EXPECT_EQ(sh->runs(), 1);
}

TEST_F(TurnTest, RuleDenialCancelsWholeBatch) {
  auto policy = std::make_shared<MapPolicy>();
  policy->by_tool["write"] = Decision::kDeny;
  auto cfg = Config();
  cfg.policy = policy;
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "write", {{"x", "f"}})})
      .Text("never");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kDenied);
  EXPECT_EQ(echo_->runs(), 0);
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_EQ(provider_.calls(), 1);
  ExpectValidTranscript(transcript_);
  const auto& res = transcript_.messages()[2].content;
  EXPECT_EQ(res[0].text, "skipped: a sibling tool call in this turn (write) was denied");
  EXPECT_EQ(res[1].text, "denied: rule for write");
  EXPECT_EQ(transcript_.back().JoinedText(),
            "Stopped \xE2\x80\x94 you denied: write. Send another message to continue.");
}

TEST_F(TurnTest, AskWithoutApproverFailsClosed) {
  provider_.Calls({Call("b", "write", {{"x", "f"}})});
  TurnResult r = Run(Config());  // default policy: ask for mutating tools
  EXPECT_EQ(r.stop, StopReason::kDenied);
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_THAT(transcript_.messages()[2].content[0].text, HasSubstr("no approver available"));
}

TEST_F(TurnTest, LiveApprovalRunsAndEditedArgumentsAreUsed) {
  ScriptedApprover approver;
  ApprovalDecision allow = ApprovalDecision::Allow("console");
  allow.edited_input = Json{{"x", "edited"}};
  approver.answers.push_back(allow);
  approver_ = &approver;
  auto echo_write =
      std::make_shared<FnTool>(Spec("write", true, false), [](const ToolCall& c, ToolContext&) {
        return Result<ToolOutput>(ToolOutput::Ok("wrote " + c.input.value("x", std::string())));
      });
  registry_.Add(echo_write);
  provider_.Calls({Call("b", "write", {{"x", "orig"}})}).Text("done");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(transcript_.messages()[2].content[0].text, "wrote edited");
  ASSERT_EQ(approver.seen.size(), 1u);
  EXPECT_EQ(approver.seen[0].call.name, "write");
  auto decisions = sink_.OfType(EventType::kDecision);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].ToJson()["by"], "console");
  EXPECT_EQ(decisions[0].ToJson()["edited"], true);
}

TEST_F(TurnTest, InvalidEditedArgumentsDoNotRun) {
  ScriptedApprover approver;
  ApprovalDecision allow = ApprovalDecision::Allow("console");
  allow.edited_input = Json{{"x", 42}};
  approver.answers.push_back(allow);
  approver_ = &approver;
  provider_.Calls({Call("b", "write", {{"x", "orig"}})}).Text("done");
  TurnResult r = Run(Config());
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_THAT(transcript_.messages()[2].content[0].text, HasSubstr("edited arguments are invalid"));
  EXPECT_EQ(r.stop, StopReason::kCompleted);
}

TEST_F(TurnTest, DeferredApprovalPausesWithCheckpointAndResumes) {
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "write", {{"x", "f"}})});
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kPendingApproval);
  EXPECT_EQ(echo_->runs(), 1);  // allowed sibling ran
  EXPECT_EQ(write_->runs(), 0);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->results_so_far.size(), 1u);
  ASSERT_EQ(r.checkpoint->outstanding.size(), 1u);
  EXPECT_EQ(r.checkpoint->outstanding[0].tool, "write");
  EXPECT_EQ(r.checkpoint->tool_use_ids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.final_text, "Stopped \xE2\x80\x94 awaiting durable approval for: write.");
  EXPECT_TRUE(transcript_.back().HasToolUse());  // assistant message stays open
  ExpectValidTranscript(transcript_, /*allow_open_tail=*/true);
  EXPECT_EQ(r.counters.tool_calls, 2);

  // Another process approves: the turn continues the decided batch and runs
  // the approved call itself.
  Checkpoint decided = Decide(*r.checkpoint, ApprovalDecision::Allow("cli"));
  provider_.Text("all done");
  auto cfg = Config();
  cfg.counters = decided.counters;
  const size_t events_before = sink_.events.size();
  TurnResult r2 = Run(cfg, TurnInput::Decided(decided));
  EXPECT_EQ(r2.stop, StopReason::kCompleted);
  EXPECT_EQ(r2.final_text, "all done");
  EXPECT_EQ(write_->runs(), 1);
  EXPECT_EQ(echo_->runs(), 1);  // the sibling's result came from the checkpoint
  EXPECT_EQ(r2.counters.tool_calls, 2);
  EXPECT_EQ(r2.counters.model_calls, 2);
  ExpectValidTranscript(transcript_);
  const auto& results = transcript_.messages()[2].content;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].text, "echo:1");
  EXPECT_EQ(results[1].text, "wrote");
  // The approved call has its begin record before its end; the decision was
  // logged by whoever recorded it, not again here.
  std::vector<std::string> types;
  for (size_t i = events_before; i < sink_.events.size(); ++i) {
    types.emplace_back(EventTypeName(sink_.events[i].type));
  }
  auto begin = std::find(types.begin(), types.end(), "tool_call_begin");
  ASSERT_NE(begin, types.end());
  EXPECT_NE(std::find(begin, types.end(), "tool_call_end"), types.end());
  EXPECT_EQ(std::count(types.begin(), types.end(), "decision"), 0);
}

// A call that waits for a person in another session (a subagent's durable
// pause) pauses the batch with a kSubagent item naming that session; once
// the item is decided the call runs again and its new output is the result.
TEST_F(TurnTest, ACallWaitingOnAnotherSessionPausesTheBatchAndRunsAgainWhenDecided) {
  int runs = 0;
  auto agent = std::make_shared<FnTool>(
      Spec("agent__helper", false, false), [&runs](const ToolCall&, ToolContext&) {
        ToolOutput out = ToolOutput::Ok(++runs == 1 ? "helper waits" : "helper finished");
        if (runs == 1) {
          out.waiting_session = "child-session";
          out.waiting_for = PendingKind::kQuestion;
          out.charged.tool_calls = 2;
          out.charged.tokens = 30;
        } else {
          out.charged.tool_calls = 1;
          out.charged.tokens = 10;
        }
        return Result<ToolOutput>(out);
      });
  registry_.Add(agent);
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "agent__helper", {{"x", "go"}})});
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kPendingQuestion);
  ASSERT_TRUE(r.checkpoint.has_value());
  ASSERT_EQ(r.checkpoint->outstanding.size(), 1u);
  const PendingItem& item = r.checkpoint->outstanding[0];
  EXPECT_EQ(item.kind, PendingKind::kSubagent);
  EXPECT_TRUE(item.id.starts_with("sub_")) << item.id;
  EXPECT_EQ(item.child_session_id, "child-session");
  EXPECT_EQ(item.tool_use_id, "b");
  EXPECT_EQ(item.reason, "helper waits");
  EXPECT_EQ(r.checkpoint->results_so_far.size(), 1u);  // the sibling's
  // What the call spent until the pause is the turn's: 2 calls of its own.
  EXPECT_EQ(r.counters.tool_calls, 2 + 2);
  EXPECT_TRUE(transcript_.back().HasToolUse());
  int ends = 0;
  for (const Event& e : sink_.events) ends += e.type == EventType::kToolCallEnd ? 1 : 0;
  EXPECT_EQ(ends, 1);  // the waiting call has not ended

  Checkpoint decided = Decide(*r.checkpoint, ApprovalDecision::Allow("subagent"));
  provider_.Text("all done");
  auto cfg = Config();
  cfg.counters = decided.counters;
  TurnResult r2 = Run(cfg, TurnInput::Decided(decided));
  EXPECT_EQ(r2.stop, StopReason::kCompleted);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(echo_->runs(), 1);
  EXPECT_EQ(r2.counters.tool_calls, 2 + 2 + 1);
  ExpectValidTranscript(transcript_);
  const auto& results = transcript_.messages()[2].content;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].text, "helper finished");
}

// A failed turn is retried from the history as committed: no new message,
// the same turn id and counters, and the model sees the tool results the
// failed attempt had appended.
TEST_F(TurnTest, RetryAsksTheModelAgainWithoutANewMessage) {
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Push(Unavailable("host unreachable"));
  TurnResult r = Run(Config());
  ASSERT_EQ(r.stop, StopReason::kFailed);
  const size_t before = transcript_.size();
  ASSERT_EQ(transcript_.back().role, Role::kUser);  // the tool results

  provider_.Text("done after retry");
  auto cfg = Config();
  cfg.counters = r.counters;
  TurnResult r2 = Run(cfg, TurnInput::Retry());
  EXPECT_EQ(r2.stop, StopReason::kCompleted);
  EXPECT_EQ(r2.final_text, "done after retry");
  EXPECT_EQ(transcript_.size(), before + 1);  // only the answer was added
  EXPECT_EQ(provider_.requests().back().messages, before);
  EXPECT_EQ(r2.counters.tool_calls, 1);
  auto begins = sink_.OfType(EventType::kTurnBegin);
  ASSERT_FALSE(begins.empty());
  EXPECT_EQ(begins.back().ToJson()["input"], "retry");
  ExpectValidTranscript(transcript_);

  // Nothing to answer: the history ends with the model's answer.
  Turn turn(Config(), transcript_);
  EXPECT_EQ(turn.Start(TurnInput::Retry()).code(), Code::kInvalidArgument);
}

TEST_F(TurnTest, ADecidedBatchMustBeTheOpenMessageAndFullyDecided) {
  provider_.Calls({Call("a", "write", {{"x", "1"}})});
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  TurnResult r = Run(Config());
  ASSERT_TRUE(r.checkpoint.has_value());
  Checkpoint other = Decide(*r.checkpoint, ApprovalDecision::Allow("cli"));
  other.tool_use_ids = {"zzz"};
  EXPECT_EQ(Turn(Config(), transcript_).Start(TurnInput::Decided(other)).code(),
            Code::kInvalidArgument);
  // Still outstanding: not decided.
  EXPECT_EQ(Turn(Config(), transcript_).Start(TurnInput::Decided(*r.checkpoint)).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(write_->runs(), 0);
}

// A denial closes its batch whatever is still outstanding: the store keeps
// the undecided siblings listed in the checkpoint, and the continuation
// answers them as skipped. Refusing such a checkpoint lost the batch: its
// claim had closed it, and the turn never ended.
TEST_F(TurnTest, ADecidedBatchClosedByADenialSkipsItsUndecidedSiblings) {
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  provider_.Calls({Call("a", "write", {{"x", "1"}}), Call("b", "write", {{"x", "2"}})});
  TurnResult r = Run(Config());
  ASSERT_EQ(r.stop, StopReason::kPendingApproval);
  ASSERT_TRUE(r.checkpoint.has_value());
  ASSERT_EQ(r.checkpoint->outstanding.size(), 2u);
  // The first item is denied; the second was never decided.
  Checkpoint decided = *r.checkpoint;
  decided.decisions.push_back(
      BatchDecision{decided.outstanding[0], ApprovalDecision::Deny("not this", "cli")});
  decided.outstanding.erase(decided.outstanding.begin());
  auto cfg = Config();
  cfg.counters = decided.counters;
  TurnResult r2 = Run(cfg, TurnInput::Decided(decided));
  EXPECT_EQ(r2.stop, StopReason::kDenied);
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_EQ(provider_.calls(), 1);
  ExpectValidTranscript(transcript_);
  const auto& results = transcript_.messages()[2].content;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].text, "denied: not this");
  EXPECT_EQ(results[1].text, "skipped: a sibling tool call in this turn (write) was denied");
}

TEST_F(TurnTest, ADecidedBatchKeepsTheStuckGuardsWindow) {
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  auto cfg = Config();
  cfg.stuck_repeats = 2;
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Calls({Call("b", "write", {{"x", "f"}})});
  TurnResult r = Run(cfg);
  ASSERT_EQ(r.stop, StopReason::kPendingApproval);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->recent_calls.size(), 2u);
  Checkpoint decided = Decide(*r.checkpoint, ApprovalDecision::Allow("cli"));

  // The same echo again right after the pause is the second repeat within
  // the window: stuck, as it would have been without the pause.
  provider_.Calls({Call("c", "echo", {{"x", "1"}})});
  auto cont = Config();
  cont.stuck_repeats = 2;
  cont.counters = decided.counters;
  TurnResult r2 = Run(cont, TurnInput::Decided(decided));
  EXPECT_EQ(write_->runs(), 1);
  EXPECT_EQ(r2.stop, StopReason::kMaxTurns) << r2.reason;
  EXPECT_THAT(r2.reason, HasSubstr("stuck"));
  EXPECT_EQ(echo_->runs(), 1);
}

TEST_F(TurnTest, ADecidedBatchCountsTheToolCallsOfThePausedTurn) {
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  auto cfg = Config();
  cfg.budget.max_tool_calls = 2;
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "write", {{"x", "f"}})});
  TurnResult r = Run(cfg);
  ASSERT_TRUE(r.checkpoint.has_value());
  Checkpoint decided = Decide(*r.checkpoint, ApprovalDecision::Allow("cli"));
  provider_.Calls({Call("c", "echo", {{"x", "2"}})});
  auto cont = Config();
  cont.budget.max_tool_calls = 2;
  cont.counters = decided.counters;
  TurnResult r2 = Run(cont, TurnInput::Decided(decided));
  EXPECT_EQ(r2.stop, StopReason::kBudgetExhausted) << r2.reason;
  EXPECT_EQ(echo_->runs(), 1);
  EXPECT_EQ(write_->runs(), 1);
}

TEST_F(TurnTest, ADecidedMutatingCallInPlanModeIsRefused) {
  // A checkpoint that claims an approved write in a plan turn (forged, or
  // written by another program): the turn refuses it.
  provider_.Calls({Call("a", "echo", {{"x", "1"}})});
  Run(Config(CommandKind::kPlan));
  ModelResponse forged;
  forged.content = {Call("w", "write", {{"x", "f"}})};
  Message assistant;
  assistant.role = Role::kAssistant;
  assistant.content = forged.content;
  transcript_.Append(assistant);
  Checkpoint cp;
  cp.session_id = "sess";
  cp.turn_id = "turn";
  cp.command = CommandKind::kPlan;
  cp.tool_use_ids = {"w"};
  cp.decisions.push_back(BatchDecision{
      PendingItem{"p", PendingKind::kApproval, "w", "write", Json{{"x", "f"}}, "", "", ""},
      ApprovalDecision::Allow("cli")});
  TurnResult r = Run(Config(CommandKind::kPlan), TurnInput::Decided(cp));
  EXPECT_EQ(r.stop, StopReason::kToolRefused);
  EXPECT_THAT(r.reason, ::testing::StartsWith("PLAN_MODE_REFUSED:"));
  EXPECT_EQ(write_->runs(), 0);
  ExpectValidTranscript(transcript_);
}

TEST_F(TurnTest, ADecidedEditIsCheckedLikeALiveOne) {
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  provider_.Calls({Call("b", "write", {{"x", "orig"}})});
  TurnResult r = Run(Config());
  ASSERT_TRUE(r.checkpoint.has_value());
  ApprovalDecision bad = ApprovalDecision::Allow("cli");
  bad.edited_input = Json{{"x", 42}};
  provider_.Text("ok");
  auto cont = Config();
  cont.counters = r.checkpoint->counters;
  TurnResult r2 = Run(cont, TurnInput::Decided(Decide(*r.checkpoint, bad)));
  EXPECT_EQ(r2.stop, StopReason::kCompleted);
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_THAT(transcript_.messages()[2].content[0].text, HasSubstr("edited arguments are invalid"));
}

TEST_F(TurnTest, AskUserQuestionLiveAndDurable) {
  ToolSpec ask;
  ask.name = "ask_user";
  ask.input_schema = ObjectSchema({"question"});
  registry_.Add(std::make_shared<FnTool>(ask, [](const ToolCall&, ToolContext&) {
    return Result<ToolOutput>(ToolOutput::Error("never run directly"));
  }));
  ScriptedApprover approver;
  ApprovalDecision answer = ApprovalDecision::Allow("console");
  answer.answer = "blue";
  approver.answers.push_back(answer);
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  provider_.Calls({Call("q1", "ask_user", {{"question", "colour?"}})})
      .Calls({Call("q2", "ask_user", {{"question", "size?"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(transcript_.messages()[2].content[0].text, "blue");
  EXPECT_EQ(approver.seen[0].kind, PendingKind::kQuestion);
  EXPECT_EQ(approver.seen[0].reason, "colour?");
  EXPECT_EQ(r.stop, StopReason::kPendingQuestion);
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(r.pending[0].kind, PendingKind::kQuestion);
  EXPECT_EQ(r.pending[0].reason, "size?");
}

// Review findings (second reader): regression tests.

TEST_F(TurnTest, EngineFailureWithPendingSiblingStillAnswersEveryCall) {
  registry_.Add(std::make_shared<FnTool>(Spec("broken", false, false),
                                         [](const ToolCall&, ToolContext&) -> Result<ToolOutput> {
                                           return Internal("disk on fire");
                                         }));
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Defer("durable"));
  approver_ = &approver;
  auto cfg = Config();
  cfg.tools = registry_.Specs();
  provider_.Calls({Call("a", "broken", {{"x", "1"}}), Call("b", "write", {{"x", "f"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kFailed);
  ExpectValidTranscript(transcript_);
  const auto& res = transcript_.back().content;
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[1].tool_use_id, "b");
  EXPECT_THAT(res[1].text, HasSubstr("not run: the turn failed"));
  EXPECT_EQ(write_->runs(), 0);
}

TEST_F(TurnTest, CallsWithoutADecisionNeverRun) {
  Turn turn(Config(), transcript_);
  ASSERT_TRUE(turn.Start(TurnInput::User("go")).ok());
  ASSERT_TRUE(std::holds_alternative<turn_action::CallModel>(turn.Next({})));
  ModelResponse resp;
  resp.content = {Call("b", "write", {{"x", "f"}})};
  resp.finish = FinishReason::kToolUse;
  turn.OnModelResult(resp);
  ASSERT_TRUE(std::holds_alternative<turn_action::Decide>(turn.Next({})));
  turn.OnDecisions({});  // a driver that answers nothing
  auto next = turn.Next({});
  EXPECT_FALSE(std::holds_alternative<turn_action::RunTools>(next));
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_THAT(transcript_.back().content.at(0).text, HasSubstr("no decision"));
}

TEST_F(TurnTest, NoOneIsAskedAboutCallsThatCannotRun) {
  ScriptedApprover approver;
  approver.answers.push_back(ApprovalDecision::Allow("console"));
  approver_ = &approver;
  auto cfg = Config();
  cfg.budget.max_tool_calls = 2;
  provider_.Calls({Call("w", "write", {{"x", "f"}}), Call("a", "echo", {{"x", "1"}}),
                   Call("b", "echo", {{"x", "2"}})});
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_TRUE(approver.seen.empty());
  EXPECT_EQ(write_->runs(), 0);
  EXPECT_EQ(echo_->runs(), 1);
  ExpectValidTranscript(transcript_);
}

// ---- hooks --------------------------------------------------------------

class RecordingHook : public Hook {
 public:
  std::string_view name() const override { return "rec"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void OnTurnStart(const HookContext&) override { starts++; }
  void BeforeModelCall(const HookContext&, ModelRequest& req) override {
    if (throw_in_model_call) throw std::runtime_error("boom");
    req.system += "+" + tag;
  }
  ToolCallVerdict BeforeToolCall(const HookContext&, const ToolCall& call) override {
    if (call.input.value("x", std::string()) == "block") return ToolCallVerdict::Deny("not today");
    if (call.input.value("x", std::string()) == "rewrite")
      return ToolCallVerdict::Rewrite({{"x", "new"}});
    return ToolCallVerdict::Allow();
  }
  TurnEndVerdict OnTurnEnd(const HookContext&, const TurnEndInfo& info) override {
    ends++;
    last_stop = info.stop;
    TurnEndVerdict v;
    if (continues_left > 0 && info.stop == StopReason::kCompleted) {
      --continues_left;
      v.continue_turn = true;
      Message marker = Message::User("continue please");
      marker.tag = "test:continue";
      v.entries.push_back(marker);
    }
    return v;
  }
  std::atomic<int> starts{0}, ends{0};
  int continues_left = 0;
  bool throw_in_model_call = false;
  std::string tag = "h";
  StopReason last_stop = StopReason::kFailed;
  std::chrono::milliseconds timeout_{5000};
};

// The tools a turn offers carry one non-zero identity for every request
// (providers cache their serialized form by it); a hook that offers other
// tools voids it.
TEST_F(TurnTest, OfferedToolsHaveOneIdentityPerTurn) {
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Text("ok");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  ASSERT_EQ(provider_.requests().size(), 2u);
  EXPECT_NE(provider_.requests()[0].tools_uid, 0u);
  EXPECT_EQ(provider_.requests()[0].tools_uid, provider_.requests()[1].tools_uid);

  class SwapTools : public Hook {
   public:
    std::string_view name() const override { return "swap"; }
    void BeforeModelCall(const HookContext&, ModelRequest& req) override { req.tools = mine; }
    std::vector<ToolSpec> mine = std::vector<ToolSpec>(1);
  };
  auto cfg = Config();
  cfg.hooks = {std::make_shared<SwapTools>()};
  provider_.Text("ok");
  Run(cfg);
  EXPECT_EQ(provider_.requests().back().tools_uid, 0u);
}

// A turn offers the session's list itself (no copy of the schemas) under
// the list's identity, so the next turn's requests carry the same tools_uid;
// a read-only command that leaves tools out offers a list of its own.
TEST_F(TurnTest, OfferedToolsShareTheSessionsList) {
  TurnConfig cfg = Config();
  const ToolSpecList list = cfg.tools;
  {
    Turn turn(cfg, transcript_);
    EXPECT_EQ(turn.offered_tools().data(), list.view().data());
    EXPECT_EQ(turn.offered_tools().size(), list.size());
  }
  provider_.Text("one");
  Run(cfg);
  provider_.Text("two");
  Run(cfg);
  ASSERT_EQ(provider_.requests().size(), 2u);
  EXPECT_EQ(provider_.requests()[0].tools_uid, list.uid());
  EXPECT_EQ(provider_.requests()[1].tools_uid, list.uid());

  TurnConfig plan = Config(CommandKind::kPlan);
  plan.tools = list;
  Turn turn(plan, transcript_);
  ASSERT_EQ(turn.offered_tools().size(), 2u);  // write is left out
  EXPECT_NE(turn.offered_tools().data(), list.view().data());
  EXPECT_EQ(turn.offered_tools()[0].name, "echo");
  EXPECT_EQ(turn.offered_tools()[1].name, "fail");
}

// Registries whose tools share their specs share one list of them; a tool
// without a shared spec gets the registry a copy of its own.
TEST(ToolRegistrySpecList, SharedSpecsShareOneList) {
  class SharedTool : public Tool {
   public:
    explicit SharedTool(std::shared_ptr<const ToolSpec> s) : spec_(std::move(s)) {}
    const ToolSpec& spec() const override { return *spec_; }
    std::shared_ptr<const ToolSpec> shared_spec() const override { return spec_; }
    Result<ToolOutput> Run(const ToolCall&, ToolContext&) override { return ToolOutput::Ok(""); }

   private:
    std::shared_ptr<const ToolSpec> spec_;
  };
  ToolSpec a_spec;
  a_spec.name = "a";
  a_spec.input_schema = Json{{"type", "object"}};
  ToolSpec b_spec = a_spec;
  b_spec.name = "b";
  auto a = std::make_shared<const ToolSpec>(a_spec);
  auto b = std::make_shared<const ToolSpec>(b_spec);
  ToolRegistry one, two;
  one.Add(std::make_shared<SharedTool>(a));
  one.Add(std::make_shared<SharedTool>(b));
  two.Add(std::make_shared<SharedTool>(a));
  two.Add(std::make_shared<SharedTool>(b));
  ToolSpecList l1 = one.SpecList();
  ToolSpecList l2 = two.SpecList();
  ASSERT_EQ(l1.size(), 2u);
  EXPECT_EQ(l1[0].name, "a");
  EXPECT_EQ(l1[1].name, "b");
  EXPECT_EQ(l1.shared(), l2.shared());
  EXPECT_EQ(l1.uid(), l2.uid());
  EXPECT_NE(l1.uid(), 0u);

  // Another order is another list.
  ToolRegistry reversed;
  reversed.Add(std::make_shared<SharedTool>(b));
  reversed.Add(std::make_shared<SharedTool>(a));
  EXPECT_NE(reversed.SpecList().shared(), l1.shared());
  EXPECT_EQ(reversed.SpecList()[0].name, "b");

  // A tool without a shared spec: a copy per call, equal in content.
  ToolRegistry mixed;
  mixed.Add(std::make_shared<SharedTool>(a));
  mixed.Add(std::make_shared<FnTool>(b_spec, [](const ToolCall&, ToolContext&) {
    return Result<ToolOutput>(ToolOutput::Ok(""));
  }));
  ToolSpecList m1 = mixed.SpecList();
  ToolSpecList m2 = mixed.SpecList();
  EXPECT_NE(m1.shared(), m2.shared());
  EXPECT_NE(m1.uid(), m2.uid());
  EXPECT_TRUE(std::equal(m1.begin(), m1.end(), l1.begin(), l1.end()));

  // When every copy of a list has gone, the next one is made anew.
  const uint64_t uid = l1.uid();
  l1 = {};
  l2 = {};
  EXPECT_NE(one.SpecList().uid(), uid);
}

TEST_F(TurnTest, HooksTransformRequestsChainAndGateTools) {
  auto h1 = std::make_shared<RecordingHook>();
  auto h2 = std::make_shared<RecordingHook>();
  h2->tag = "g";
  auto cfg = Config();
  cfg.hooks = {h1, h2};
  provider_.Calls({Call("a", "echo", {{"x", "block"}}), Call("b", "echo", {{"x", "rewrite"}})})
      .Text("ok");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(provider_.requests()[0].system, "sys+h+g");
  const auto& res = transcript_.messages()[2].content;
  EXPECT_EQ(res[0].text, "blocked by hook 'rec': not today");
  EXPECT_TRUE(res[0].is_error);
  EXPECT_EQ(res[1].text, "echo:new");
  EXPECT_EQ(h1->starts, 1);
  EXPECT_EQ(h1->ends, 1);
}

TEST_F(TurnTest, ThrowingHookIsSkippedAndReported) {
  auto h = std::make_shared<RecordingHook>();
  h->throw_in_model_call = true;
  auto cfg = Config();
  cfg.hooks = {h};
  provider_.Text("fine");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(provider_.requests()[0].system, "sys");
  auto errs = sink_.OfType(EventType::kHookError);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].ToJson()["point"], "before_model_call");
  EXPECT_THAT(errs[0].ToJson()["error"].get<std::string>(), HasSubstr("boom"));
}

// A trusted (timeout zero) hook runs on the turn's own thread; a throw is
// still contained and reported.
class InlineHook : public Hook {
 public:
  std::string_view name() const override { return "inline"; }
  std::chrono::milliseconds timeout() const override { return {}; }
  void BeforeModelCall(const HookContext&, ModelRequest& req) override {
    thread = std::this_thread::get_id();
    req.system += "+inline";
  }
  void AfterStep(const HookContext&, const StepEndInfo&) override {
    throw std::runtime_error("inline boom");
  }
  std::thread::id thread;
};

TEST_F(TurnTest, ZeroTimeoutHookRunsInlineAndThrowsAreContained) {
  auto h = std::make_shared<InlineHook>();
  auto cfg = Config();
  cfg.hooks = {h};
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Text("fine");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(h->thread, std::this_thread::get_id());
  EXPECT_EQ(provider_.requests()[0].system, "sys+inline");
  auto errs = sink_.OfType(EventType::kHookError);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].ToJson()["point"], "after_step");
  EXPECT_THAT(errs[0].ToJson()["error"].get<std::string>(), HasSubstr("inline boom"));
}

class BlockingHook : public Hook {
 public:
  std::string_view name() const override { return "slow"; }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(50); }
  void BeforeModelCall(const HookContext&, ModelRequest& req) override {
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait(lock, [&] { return state->release; });
    req.system = "hijacked";
  }
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
  };
  std::shared_ptr<State> state = std::make_shared<State>();
};

TEST_F(TurnTest, TimedOutHookIsSkipped) {
  auto h = std::make_shared<BlockingHook>();
  auto cfg = Config();
  cfg.hooks = {h};
  provider_.Text("fine");
  TurnResult r = Run(cfg);
  {
    std::lock_guard<std::mutex> lock(h->state->mu);
    h->state->release = true;
  }
  h->state->cv.notify_all();
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(provider_.requests()[0].system, "sys");
  auto errs = sink_.OfType(EventType::kHookError);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_THAT(errs[0].ToJson()["error"].get<std::string>(), HasSubstr("timed out"));
}

TEST_F(TurnTest, TurnEndHookCanContinueWithHiddenEntries) {
  auto h = std::make_shared<RecordingHook>();
  h->continues_left = 2;
  auto cfg = Config();
  cfg.hooks = {h};
  provider_.Text("first").Text("second").Text("third");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.final_text, "third");
  EXPECT_EQ(provider_.calls(), 3);
  EXPECT_EQ(h->starts, 3);
  EXPECT_EQ(h->ends, 3);
  auto reqs = provider_.requests();
  EXPECT_EQ(reqs[1].all.back().tag, "test:continue");
  EXPECT_EQ(sink_.OfType(EventType::kContinuation).size(), 2u);
}

TEST_F(TurnTest, TurnEndIsPairedEvenOnEarlyStop) {
  auto h = std::make_shared<RecordingHook>();
  h->continues_left = 5;  // must be ignored: the turn did not complete
  auto cfg = Config();
  cfg.hooks = {h};
  cfg.budget.max_tokens = 5;
  provider_.Text("too long", 50);
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(h->starts, 1);
  EXPECT_EQ(h->ends, 1);
  EXPECT_EQ(h->last_stop, StopReason::kBudgetExhausted);
}

// OnTurnEnd learns how many tool results the last step produced: the count
// of the batch when the round ends right after tools ran, 0 when it ends on
// a model answer.
class CountingHook : public Hook {
 public:
  std::string_view name() const override { return "count"; }
  std::chrono::milliseconds timeout() const override { return {}; }
  TurnEndVerdict OnTurnEnd(const HookContext&, const TurnEndInfo& info) override {
    counts.push_back(info.tool_result_count);
    stops.push_back(info.stop);
    return {};
  }
  std::vector<int> counts;
  std::vector<StopReason> stops;
};

TEST_F(TurnTest, TurnEndReportsTheToolResultsOfTheLastStep) {
  auto h = std::make_shared<CountingHook>();
  auto cfg = Config();
  cfg.hooks = {h};
  cfg.budget.max_turns = 1;  // the round ends before the model sees the results
  provider_.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "echo", {{"x", "2"}})});
  TurnResult r = Run(cfg);
  ASSERT_EQ(r.stop, StopReason::kMaxTurns);
  // A budget stop mid-batch: the batch's results, the unrun call included.
  cfg.budget = DefaultBudget(CommandKind::kCode);
  cfg.budget.max_tool_calls = 1;
  provider_.Calls({Call("c", "echo", {{"x", "3"}}), Call("d", "echo", {{"x", "4"}}),
                   Call("e", "echo", {{"x", "5"}})});
  r = Run(cfg);
  ASSERT_EQ(r.stop, StopReason::kBudgetExhausted);
  // Tools, then a text answer: the round settles on the answer.
  cfg.budget = DefaultBudget(CommandKind::kCode);
  provider_.Calls({Call("f", "echo", {{"x", "6"}})}).Text("done");
  r = Run(cfg);
  ASSERT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(h->counts, (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(h->stops, (std::vector<StopReason>{StopReason::kMaxTurns, StopReason::kBudgetExhausted,
                                               StopReason::kCompleted}));
}

// A timed hook that blocks until released and then reads the history it was
// handed: a hook abandoned after its timeout may still read its arguments.
class LateReaderHook : public Hook {
 public:
  explicit LateReaderHook(std::string point) : point_(std::move(point)) {}
  std::string_view name() const override { return "late"; }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(100); }
  void BeforeModelCall(const HookContext&, ModelRequest& req) override {
    if (point_ == "before_model_call") Read(req.history, req.tools);
  }
  void AfterStep(const HookContext&, const StepEndInfo& info) override {
    if (point_ == "after_step") Read(info.history);
  }
  TurnEndVerdict OnTurnEnd(const HookContext&, const TurnEndInfo& info) override {
    if (point_ == "turn_end") Read(info.history);
    return {};
  }
  void Release() { release_.set_value(); }
  std::future<std::vector<std::string>> texts() { return read_.get_future(); }

 private:
  void Read(std::span<const Message> history, std::span<const ToolSpec> tools = {}) {
    if (read_once_.exchange(true)) return;
    released_.wait();
    std::vector<std::string> texts;
    for (const ToolSpec& t : tools) texts.push_back("tool:" + t.name);
    for (const Message& m : history) {
      std::string t;
      for (const ContentBlock& b : m.content) t += b.text;
      texts.push_back(std::move(t));
    }
    read_.set_value(std::move(texts));
  }
  std::string point_;
  std::atomic<bool> read_once_{false};
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::promise<std::vector<std::string>> read_;
};

// Regression: a timed hook abandoned after its timeout held a view into the
// transcript; reading it after the transcript changed read other messages
// (or freed memory). Its history is now an owned copy, and the request's
// tools outlive the turn that offered them.
TEST_F(TurnTest, AbandonedHookReadsTheHistoryItWasHandedAfterTheTranscriptChanged) {
  struct Case {
    const char* point;
    std::vector<std::string> want;  // the texts of the history at the call
  };
  for (const Case& c :
       {Case{"before_model_call", {"tool:echo", "tool:write", "tool:fail", "hi"}},
        Case{"after_step", {"hi", "", "echo:1"}}, Case{"turn_end", {"hi", "", "echo:1", "done"}}}) {
    SCOPED_TRACE(c.point);
    transcript_ = Transcript();
    sink_.events.clear();
    auto h = std::make_shared<LateReaderHook>(c.point);
    auto texts = h->texts();
    auto cfg = Config();
    cfg.hooks = {h};
    provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Text("done");
    TurnResult r = Run(cfg);
    ASSERT_EQ(r.stop, StopReason::kCompleted);
    bool abandoned = false;  // (a loaded machine may time out other calls too)
    for (const Event& e : sink_.OfType(EventType::kHookError)) {
      abandoned = abandoned || e.ToJson()["point"] == c.point;
    }
    ASSERT_TRUE(abandoned) << "the hook timed out at " << c.point;
    // Rewrite every message in place (same storage, same count).
    std::vector<Message> other;
    for (size_t i = 0; i < transcript_.size(); ++i) other.push_back(Message::User("changed"));
    transcript_.ReplacePrefix(transcript_.size(), std::move(other));
    h->Release();
    ASSERT_EQ(texts.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_EQ(texts.get(), c.want);
  }
}

// ---- events ----------------------------------------------------------------

TEST_F(TurnTest, EventStreamIsOrderedAndSerialisable) {
  auto cfg = Config();
  cfg.first_seq = 100;
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Text("done");
  TurnResult r = Run(cfg);
  ASSERT_FALSE(sink_.events.empty());
  EXPECT_EQ(sink_.events.front().type, EventType::kTurnBegin);
  EXPECT_EQ(sink_.events.back().type, EventType::kTurnEnd);
  // Persisted events are numbered without gaps; deltas carry 0.
  uint64_t next = 100;
  for (size_t i = 0; i < sink_.events.size(); ++i) {
    if (ShouldPersist(sink_.events[i].type)) {
      EXPECT_EQ(sink_.events[i].seq, next++);
    } else {
      EXPECT_EQ(sink_.events[i].seq, 0u);
    }
    EXPECT_EQ(sink_.events[i].session_id, "sess");
    EXPECT_EQ(sink_.events[i].turn_id, "turn");
    Json j = sink_.events[i].ToJson();
    auto back = Event::FromJson(Json::parse(j.dump()));
    ASSERT_TRUE(back.ok());
    // Each event's data is what docs/protocol.md documents for its type
    // (FromJson checks it), and reads back as what was emitted.
    EXPECT_EQ(back->type, sink_.events[i].type);
    EXPECT_EQ(back->ToJson(), j);
  }
  EXPECT_EQ(r.next_seq, next);
  EXPECT_EQ(sink_.OfType(EventType::kToolCallBegin).size(), 1u);
  EXPECT_EQ(sink_.OfType(EventType::kToolCallEnd).size(), 1u);
  EXPECT_EQ(sink_.OfType(EventType::kMessage).size(), 4u);
  EXPECT_FALSE(sink_.OfType(EventType::kTextDelta).empty());
  EXPECT_EQ(sink_.events.back().ToJson()["stop"], "completed");
  // tool_call_begin is emitted before the tool's result message.
  size_t begin_at = 0, result_at = 0;
  for (size_t i = 0; i < sink_.events.size(); ++i) {
    if (sink_.events[i].type == EventType::kToolCallBegin) begin_at = i;
    if (sink_.events[i].type == EventType::kMessage &&
        sink_.events[i].ToJson()["message"]["content"][0]["type"] == "tool_result")
      result_at = i;
  }
  EXPECT_LT(begin_at, result_at);
}

// Every event is stamped with the injected wall clock when it is emitted,
// deltas included.
TEST_F(TurnTest, EventsCarryTheWallClockTimeOfTheirEmission) {
  int64_t now = 1767225600000;
  auto cfg = Config();
  cfg.now_ms = [&] { return now += 10; };
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Text("done");
  Run(cfg);
  ASSERT_FALSE(sink_.events.empty());
  EXPECT_FALSE(sink_.OfType(EventType::kTextDelta).empty());
  for (size_t i = 0; i < sink_.events.size(); ++i) {
    const Event& e = sink_.events[i];
    EXPECT_EQ(e.ts, 1767225600000 + 10 * static_cast<int64_t>(i + 1)) << EventTypeName(e.type);
    EXPECT_EQ(e.ToJson()["ts"], e.ts);
  }
}

TEST_F(TurnTest, SinkFailureFailsTheTurnBeforeTheNextStep) {
  sink_.fail = [](const Event& e) {
    if (e.type == EventType::kToolCallBegin) return Unavailable("disk full");
    return Status::Ok();
  };
  provider_.Calls({Call("a", "echo", {{"x", "1"}})}).Text("never");
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kFailed);
  EXPECT_THAT(r.reason, HasSubstr("disk full"));
  EXPECT_EQ(echo_->runs(), 0);  // the begin record was not stored: nothing runs
  EXPECT_EQ(provider_.calls(), 1);
}

TEST_F(TurnTest, WallTimeBudgetUsesInjectedClock) {
  auto now = std::chrono::steady_clock::time_point{};
  auto cfg = Config();
  cfg.budget.max_wall_time = std::chrono::milliseconds(1000);
  cfg.clock = [&] { return now; };
  registry_.Add(
      std::make_shared<FnTool>(Spec("tick", false, false), [&](const ToolCall&, ToolContext&) {
        now += std::chrono::milliseconds(1500);
        return Result<ToolOutput>(ToolOutput::Ok("tick"));
      }));
  cfg.tools = registry_.Specs();
  provider_.Calls({Call("a", "tick", {{"x", "1"}})}).Text("never");
  TurnResult r = Run(cfg);
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(r.reason, "wall time budget exhausted (1500 ms >= 1000 ms)");
}

// The wall-time budget reaches a running tool as its deadline: the rest
// of the budget when the batch starts (the injected clock says 400 ms of
// 1000 are spent), and a tool that stops there ends the turn.
TEST_F(TurnTest, WallTimeBudgetIsTheDeadlineOfRunningTools) {
  auto now = std::chrono::steady_clock::time_point{};
  auto cfg = Config();
  cfg.budget.max_wall_time = std::chrono::milliseconds(1000);
  cfg.clock = [&] { return now; };
  std::optional<std::chrono::milliseconds> seen_left;
  registry_.Add(std::make_shared<FnTool>(Spec("wait", false, false), [&](const ToolCall&,
                                                                         ToolContext& ctx) {
    if (!ctx.deadline) return Result<ToolOutput>(ToolOutput::Ok("no deadline"));
    seen_left = std::chrono::duration_cast<std::chrono::milliseconds>(
        *ctx.deadline - std::chrono::steady_clock::now());
    now += std::chrono::milliseconds(600);  // the tool waits until the deadline
    return Result<ToolOutput>(ToolOutput::Error("stopped: the turn's wall-time budget ran out"));
  }));
  cfg.tools = registry_.Specs();
  provider_.fallback = [&](int) {
    now += std::chrono::milliseconds(400);  // the model call takes 400 ms
    ModelResponse resp;
    resp.content = {Call("a", "wait", {{"x", "1"}})};
    resp.finish = FinishReason::kToolUse;
    return Result<ModelResponse>(resp);
  };
  TurnResult r = Run(cfg);
  provider_.fallback = nullptr;
  ASSERT_TRUE(seen_left.has_value()) << "the tool got no deadline";
  EXPECT_LE(*seen_left, std::chrono::milliseconds(600));
  EXPECT_GT(*seen_left, std::chrono::milliseconds(0));
  EXPECT_EQ(r.stop, StopReason::kBudgetExhausted);
  EXPECT_EQ(r.reason, "wall time budget exhausted (1000 ms >= 1000 ms)");

  // Without a wall-time budget there is no deadline.
  Transcript other;
  auto plain = Config();
  plain.tools = registry_.Specs();
  seen_left.reset();
  provider_.Calls({Call("b", "wait", {{"x", "1"}})}).Text("done");
  Turn turn(plain, other);
  ASSERT_TRUE(turn.Start(TurnInput::User("go")).ok());
  RunnerDeps deps;
  deps.provider = &provider_;
  deps.tools = &registry_;
  EXPECT_EQ(RunTurn(turn, deps, {}).stop, StopReason::kCompleted);
  EXPECT_FALSE(seen_left.has_value());
}

TEST_F(TurnTest, PromptTooLongCompactsPriorHistoryAndRetries) {
  for (int i = 0; i < 10; ++i) {
    transcript_.Append(Message::User("old question " + std::to_string(i)));
    transcript_.Append(Message::Assistant("old answer " + std::to_string(i)));
  }
  provider_.Push(PromptTooLong("prompt is too long")).Text("fits now");
  TurnResult r = Run(Config(), "new question");
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  auto reqs = provider_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_LT(reqs[1].messages, reqs[0].messages);
  EXPECT_EQ(reqs[1].all.back().JoinedText(), "new question");
  auto comp = sink_.OfType(EventType::kCompaction);
  ASSERT_EQ(comp.size(), 1u);
  EXPECT_EQ(comp[0].ToJson()["from"], 21);
}

TEST_F(TurnTest, PromptTooLongGivesUpAfterThreeCompactions) {
  for (int i = 0; i < 20; ++i) {
    transcript_.Append(Message::User("q" + std::to_string(i)));
    transcript_.Append(Message::Assistant("a" + std::to_string(i)));
  }
  provider_.fallback = [](int) { return Result<ModelResponse>(PromptTooLong("too many tokens")); };
  TurnResult r = Run(Config(), "new");
  EXPECT_EQ(r.stop, StopReason::kFailed);
  EXPECT_THAT(r.reason, HasSubstr("prompt_too_long"));
  EXPECT_LE(sink_.OfType(EventType::kCompaction).size(), 3u);
}

TEST_F(TurnTest, ProviderErrorFailsWithoutLeakingKeys) {
  provider_.Push(Unavailable("upstream said no for key sk-abcdefghijklmnop1234"));
  TurnResult r = Run(Config());
  EXPECT_EQ(r.stop, StopReason::kFailed);
  EXPECT_EQ(r.reason.find("sk-abcdefghijkl"), std::string::npos);
}

TEST_F(TurnTest, ThinkingBlocksAreKeptVerbatimForTheNextRequest) {
  ModelResponse resp;
  resp.content = {ContentBlock::Thinking("let me think", "SIG=="), Call("a", "echo", {{"x", "1"}})};
  resp.finish = FinishReason::kToolUse;
  provider_.Push(resp).Text("ok");
  Run(Config());
  auto reqs = provider_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  const Message& prior = reqs[1].all[1];
  ASSERT_EQ(prior.content[0].type, BlockType::kThinking);
  EXPECT_EQ(prior.content[0].signature, "SIG==");
  EXPECT_EQ(prior.content[0].text, "let me think");
}

// A tool that spent budget on the turn's behalf (a subagent) reports it in
// ToolOutput::charged: the turn's counters include it; the turn charges its
// own calls and tokens to its ledger node.
TEST_F(TurnTest, ChargedSpendingCountsAndOwnSpendingReachesTheLedger) {
  auto sub = std::make_shared<FnTool>(Spec("sub", false, false), [](const ToolCall&, ToolContext&) {
    ToolOutput out = ToolOutput::Ok("child answer");
    out.charged.tool_calls = 3;
    out.charged.tokens = 40;
    out.charged.usage.output_tokens = 40;
    return Result<ToolOutput>(out);
  });
  registry_.Add(sub);
  provider_.Calls({ContentBlock::ToolUse("c1", "sub", Json{{"x", "task"}})}, 10);
  provider_.Text("done", 5);
  TurnConfig cfg = Config();
  cfg.tools = registry_.Specs();
  cfg.ledger = BudgetLedger::Root(cfg.budget, {}, std::chrono::steady_clock::now());
  auto ledger = cfg.ledger;
  TurnResult r = Run(std::move(cfg));
  EXPECT_EQ(r.stop, StopReason::kCompleted);
  EXPECT_EQ(r.counters.tool_calls, 1 + 3);
  EXPECT_EQ(r.counters.tokens, 10 + 40 + 5);
  EXPECT_EQ(r.counters.usage.output_tokens, 10 + 40 + 5);
  // The ledger has only what the turn spent itself (a child charges its own
  // node, which reaches this one).
  EXPECT_EQ(ledger->spent().tool_calls, 1);
  EXPECT_EQ(ledger->spent().tokens, 15);
}

}  // namespace
}  // namespace agentloop
