// The context budget band, the output-token clamp and the token budget's
// "new tokens" rule of the turn (SEMANTICS 4.6; docs/protocol.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/event_data.h"
#include "agentloop/runner.h"
#include "agentloop/turn.h"

#include "core/compaction.h"
#include "core/testing/fakes.h"

namespace agentloop {
namespace {

using testing::Call;
using testing::CollectingSink;
using testing::FnTool;
using ::testing::HasSubstr;
using testing::ObjectSchema;

bool IsSummaryRequest(const ModelRequest& r) {
  return !r.tail.empty() && r.tail.back().JoinedText().starts_with(kSummaryPrompt.substr(0, 40));
}

// A model server with a small window: it rejects a request whose estimated
// tokens (chars / 4 of everything sent plus the output cap) exceed the
// window, as the real APIs do; it reports the input tokens it counted. The
// model reads `steps` big files, then answers; a summary request gets a
// summary (or fails when `fail_summaries`).
class WindowProvider : public ModelProvider {
 public:
  WindowProvider(int64_t window, int steps) : window_(window), steps_(steps) {}
  std::string_view name() const override { return "window"; }

  Result<ModelResponse> Complete(const ModelRequest& r, StreamSink& sink,
                                 std::stop_token) override {
    int64_t chars = static_cast<int64_t>(r.system.size());
    for (const auto& t : r.tools) {
      chars +=
          static_cast<int64_t>(t.name.size() + t.description.size() + t.input_schema.dump().size());
    }
    r.ForEachMessage([&](const Message& m) { chars += Transcript::MessageChars(m); });
    const int64_t input = (chars + 3) / 4;
    max_input_ = std::max(max_input_, input);
    if (input + r.max_output_tokens > window_) {
      ++rejections_;
      return PromptTooLong("prompt is too long: " + std::to_string(input) + " tokens > " +
                           std::to_string(window_));
    }
    if (r.max_output_tokens > max_output_allowed_) {
      return InvalidArgument("max_tokens too large: " + std::to_string(r.max_output_tokens));
    }
    ModelResponse resp;
    resp.has_usage = true;
    resp.usage.input_tokens = input;
    resp.usage.output_tokens = 20;
    if (IsSummaryRequest(r)) {
      ++summaries_;
      last_summary_focus_ = r.tail.back().JoinedText();
      if (fail_summaries) return Unavailable("summary backend down");
      sink.OnTextDelta("SUMMARY");
      resp.content.push_back(ContentBlock::Text("Goals: read files. Files: many."));
      resp.finish = FinishReason::kStop;
      return resp;
    }
    wrap_up_seen_ = wrap_up_seen_ || (!r.tail.empty() && r.tail.back().role == Role::kSystem &&
                                      r.tail.back().JoinedText() == kWrapUpText);
    if (step_ < steps_) {
      resp.content.push_back(ContentBlock::ToolUse("c" + std::to_string(step_), "big",
                                                   Json{{"x", std::to_string(step_)}}));
      resp.finish = FinishReason::kToolUse;
      ++step_;
      return resp;
    }
    resp.content.push_back(ContentBlock::Text("all read"));
    resp.finish = FinishReason::kStop;
    return resp;
  }

  bool fail_summaries = false;
  int64_t max_output_allowed_ = 1 << 30;
  int rejections_ = 0;
  int summaries_ = 0;
  int64_t max_input_ = 0;
  bool wrap_up_seen_ = false;
  std::string last_summary_focus_;

 private:
  int64_t window_;
  int steps_;
  int step_ = 0;
};

class ContextBandTest : public ::testing::Test {
 protected:
  ContextBandTest() {
    ToolSpec s;
    s.name = "big";
    s.description = "reads a big file";
    s.input_schema = ObjectSchema({"x"});
    s.parallel_safe = true;
    big_ = std::make_shared<FnTool>(s, [](const ToolCall&, ToolContext&) {
      return Result<ToolOutput>(ToolOutput::Ok(std::string(8192, 'y')));
    });
    registry_.Add(big_);
  }

  TurnConfig Config(int64_t window) {
    TurnConfig c;
    c.session_id = "sess";
    c.turn_id = "turn";
    c.budget.max_tool_calls = 1000;
    c.budget.max_turns = 1000;
    c.budget.max_tokens = 100'000'000;
    c.tools = registry_.Specs();
    c.sink = &sink_;
    c.system_prompt = "sys";
    c.context_window = window;
    c.max_output_tokens = 4096;
    c.stuck_repeats = 0;
    return c;
  }

  TurnResult Run(TurnConfig cfg, ModelProvider& provider, std::string prompt = "read them all") {
    Turn turn(std::move(cfg), transcript_);
    Status s = turn.Start(TurnInput::User(std::move(prompt)));
    EXPECT_TRUE(s.ok()) << s.ToString();
    RunnerDeps deps;
    deps.provider = &provider;
    deps.tools = &registry_;
    return RunTurn(turn, deps, {});
  }

  std::shared_ptr<FnTool> big_;
  ToolRegistry registry_;
  Transcript transcript_;
  CollectingSink sink_;
};

TEST_F(ContextBandTest, LongTaskCompletesInASmallWindowWithoutARejection) {
  WindowProvider p(16'384, 120);
  TurnResult r = Run(Config(16'384), p);
  EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  EXPECT_EQ(r.final_text, "all read");
  EXPECT_EQ(p.rejections_, 0);
  EXPECT_EQ(big_->runs(), 120);
  EXPECT_LE(p.max_input_, 16'384);
  EXPECT_GT(p.summaries_, 0);
  EXPECT_TRUE(p.wrap_up_seen_);
  // The user's request is still in the view, and every compaction says
  // where its summary came from.
  bool request_kept = false;
  for (const auto& m : transcript_.messages()) {
    request_kept = request_kept || m.JoinedText() == "read them all";
  }
  EXPECT_TRUE(request_kept);
  auto comps = sink_.OfType(EventType::kCompaction);
  ASSERT_FALSE(comps.empty());
  bool model_summary = false;
  for (const auto& e : comps) {
    auto d = CompactionData::FromJson(e.ToJson());
    ASSERT_TRUE(d.ok()) << d.error().ToString();
    EXPECT_EQ(d->trigger, "threshold");
    EXPECT_LT(d->tokens_after, d->tokens_before);
    model_summary = model_summary || d->summary_source == "model";
  }
  EXPECT_TRUE(model_summary);
}

TEST_F(ContextBandTest, WithoutTheBandTheSameTaskIsRejected) {
  WindowProvider p(16'384, 120);
  TurnConfig cfg = Config(0);  // unknown window: no band
  TurnResult r = Run(cfg, p);
  EXPECT_GT(p.rejections_, 0);
}

TEST_F(ContextBandTest, FailedSummaryRequestFallsBackToTheTruncatingSummary) {
  WindowProvider p(16'384, 30);
  p.fail_summaries = true;
  TurnResult r = Run(Config(16'384), p);
  EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  EXPECT_EQ(p.rejections_, 0);
  EXPECT_GT(p.summaries_, 0);
  bool truncated = false;
  for (const auto& e : sink_.OfType(EventType::kCompaction)) {
    auto d = CompactionData::FromJson(e.ToJson());
    ASSERT_TRUE(d.ok());
    if (d->summary_source == "truncated") {
      truncated = true;
      ASSERT_TRUE(d->summary.has_value());
      EXPECT_THAT(d->summary->JoinedText(), HasSubstr("[compacted "));
    }
  }
  EXPECT_TRUE(truncated);
  bool warned = false;
  for (const auto& e : sink_.OfType(EventType::kNotice)) {
    warned =
        warned || e.ToJson().value("text", "").find("summary request failed") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

TEST_F(ContextBandTest, SummaryDeltasAreNotStreamedAsTheAnswer) {
  WindowProvider p(16'384, 12);
  Run(Config(16'384), p);
  ASSERT_GT(p.summaries_, 0);
  for (const auto& e : sink_.OfType(EventType::kTextDelta)) {
    EXPECT_EQ(e.ToJson().value("text", "").find("SUMMARY"), std::string::npos);
  }
}

TEST_F(ContextBandTest, FocusGoesIntoTheSummaryRequest) {
  WindowProvider p(16'384, 12);
  TurnConfig cfg = Config(16'384);
  cfg.compaction_focus = "the parser";
  Run(cfg, p);
  ASSERT_GT(p.summaries_, 0);
  EXPECT_THAT(p.last_summary_focus_, HasSubstr("Focus on: the parser"));
}

TEST_F(ContextBandTest, TheTodoListIsCarriedOnTheSummary) {
  WindowProvider p(16'384, 12);
  TurnConfig cfg = Config(16'384);
  int carried = 0;
  cfg.carry_meta = [&](std::span<const Message>) -> std::optional<Json> {
    ++carried;
    return Json{{"todo_snapshot", {{"tasks", Json::array()}, {"nextId", 1}}}};
  };
  Run(cfg, p);
  ASSERT_GT(carried, 0);
  bool found = false;
  for (const auto& m : transcript_.messages()) {
    if (m.tag == kCompactionSummaryTag && m.content[0].meta.contains("todo_snapshot")) found = true;
  }
  EXPECT_TRUE(found);
}

TEST_F(ContextBandTest, BudgetCheckReportsTheBand) {
  WindowProvider p(16'384, 8);
  Run(Config(16'384), p);
  bool nudge = false;
  for (const auto& e : sink_.OfType(EventType::kBudgetCheck)) {
    auto d = BudgetCheckData::FromJson(e.ToJson());
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->context_window, 16'384);
    EXPECT_GT(d->context_tokens, 0);
    nudge = nudge || d->band == "nudge";
  }
  EXPECT_TRUE(nudge);
}

TEST_F(ContextBandTest, OutputCapIsNeverAboveTheModelsMaximum) {
  testing::FakeProvider p;
  p.Text("ok");
  TurnConfig cfg = Config(128'000);
  cfg.budget.max_tokens = 50'000;
  cfg.max_output_tokens = 16'384;  // gpt-4o
  Run(cfg, p);
  ASSERT_EQ(p.requests().size(), 1u);
  EXPECT_EQ(p.requests()[0].max_output_tokens, 16'384);
}

TEST_F(ContextBandTest, OutputCapLeavesRoomForTheInput) {
  testing::FakeProvider p;
  p.Text("ok");
  TurnConfig cfg = Config(8'000);
  cfg.max_output_tokens = 8'000;
  Run(cfg, p, std::string(16'000, 'z'));  // ~4000 tokens of input
  ASSERT_EQ(p.requests().size(), 1u);
  EXPECT_LE(p.requests()[0].max_output_tokens, 4'000);
  EXPECT_GE(p.requests()[0].max_output_tokens, 256);
}

TEST_F(ContextBandTest, TokenBudgetCountsOnlyNewTokens) {
  testing::FakeProvider p;
  ModelResponse resp;
  resp.content.push_back(ContentBlock::Text("ok"));
  resp.has_usage = true;
  resp.has_cache_usage = true;
  resp.usage.input_tokens = 100;        // not cached
  resp.usage.cache_read_tokens = 9000;  // read from the cache: free for the budget
  resp.usage.cache_write_tokens = 50;
  resp.usage.output_tokens = 7;
  p.Push(resp);
  TurnResult r = Run(Config(0), p);
  EXPECT_EQ(r.counters.tokens, 157);
  EXPECT_EQ(r.counters.usage.cache_read_tokens, 9000);
}

// A server that reports no cache figures repeats the whole context in each
// call's input: after the turn's first request (charged in full), a call is
// charged its output and chars / 4 of the messages appended since the
// previous request, not the input it reports.
TEST_F(ContextBandTest, WithoutCacheFiguresACallIsChargedWhatItAdded) {
  testing::FakeProvider p;
  auto step = [](std::vector<ContentBlock> content, int64_t input) {
    ModelResponse r;
    r.content = std::move(content);
    r.finish =
        r.content.back().type == BlockType::kToolUse ? FinishReason::kToolUse : FinishReason::kStop;
    r.has_usage = true;
    r.usage.input_tokens = input;  // the whole prompt, every call
    r.usage.output_tokens = 10;
    return r;
  };
  p.Push(step({Call("a", "big", {{"x", "1"}})}, 4000));
  p.Push(step({Call("b", "big", {{"x", "2"}})}, 6100));
  p.Push(step({ContentBlock::Text("done")}, 8200));
  TurnResult r = Run(Config(0), p);
  ASSERT_EQ(r.stop, StopReason::kCompleted);
  auto msgs = transcript_.messages();
  ASSERT_EQ(msgs.size(), 6u);  // prompt, call, result, call, result, answer
  auto quarter = [](int64_t c) { return (c + 3) / 4; };
  const int64_t second =
      10 + quarter(Transcript::MessageChars(msgs[1]) + Transcript::MessageChars(msgs[2]));
  const int64_t third =
      10 + quarter(Transcript::MessageChars(msgs[3]) + Transcript::MessageChars(msgs[4]));
  EXPECT_EQ(r.counters.tokens, 4010 + second + third);
  // What the provider reported stays in the usage (cost is estimated from it).
  EXPECT_EQ(r.counters.usage.input_tokens, 4000 + 6100 + 8200);
  // Every step_end carries the same running figure.
  auto ends = sink_.OfType(EventType::kStepEnd);
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends.back().ToJson().value("tokens", int64_t{0}), r.counters.tokens);
}

// A retried turn (the same turn, its counters carried) takes its previous
// request to be the history before its last answer: its first request is
// charged what was appended since, not its whole input again.
TEST_F(ContextBandTest, WithoutCacheFiguresARetriedTurnCountsFromItsPreviousRequest) {
  testing::FakeProvider p;
  ModelResponse call;
  call.content.push_back(Call("a", "big", {{"x", "1"}}));
  call.finish = FinishReason::kToolUse;
  call.has_usage = true;
  call.usage.input_tokens = 4000;
  call.usage.output_tokens = 10;
  p.Push(call).Push(Unavailable("the server went away"));
  TurnResult first = Run(Config(0), p);
  ASSERT_EQ(first.stop, StopReason::kFailed);
  ASSERT_EQ(first.counters.tokens, 4010);
  ModelResponse answer;
  answer.content.push_back(ContentBlock::Text("done"));
  answer.has_usage = true;
  answer.usage.input_tokens = 6100;  // the whole prompt again
  answer.usage.output_tokens = 10;
  p.Push(answer);
  TurnConfig cfg = Config(0);
  cfg.counters = first.counters;
  Turn turn(std::move(cfg), transcript_);
  ASSERT_TRUE(turn.Start(TurnInput::Retry()).ok());
  RunnerDeps deps;
  deps.provider = &p;
  deps.tools = &registry_;
  TurnResult r = RunTurn(turn, deps, {});
  ASSERT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  auto msgs = transcript_.messages();
  ASSERT_GE(msgs.size(), 3u);  // prompt, call, result, ...
  const int64_t added = Transcript::MessageChars(msgs[1]) + Transcript::MessageChars(msgs[2]);
  EXPECT_EQ(r.counters.tokens, 4010 + 10 + (added + 3) / 4);
}

// Fifty small reads against such a server fit the default token budget.
TEST_F(ContextBandTest, FiftySmallReadsWithoutCacheFiguresFitTheDefaultTokenBudget) {
  testing::FakeProvider p;
  int64_t input = 4200;
  for (int i = 0; i < 50; ++i) {
    ModelResponse r;
    r.content.push_back(Call("r" + std::to_string(i), "small", {{"x", std::to_string(i)}}));
    r.finish = FinishReason::kToolUse;
    r.has_usage = true;
    r.usage.input_tokens = input;
    r.usage.output_tokens = 30;
    input += 80;
    p.Push(r);
  }
  ModelResponse last;
  last.content.push_back(ContentBlock::Text("read them all"));
  last.has_usage = true;
  last.usage.input_tokens = input;
  last.usage.output_tokens = 30;
  p.Push(last);
  ToolSpec s;
  s.name = "small";
  s.description = "reads a small file";
  s.input_schema = ObjectSchema({"x"});
  registry_.Add(std::make_shared<FnTool>(s, [](const ToolCall&, ToolContext&) {
    return Result<ToolOutput>(ToolOutput::Ok(std::string(200, 'y')));
  }));
  TurnConfig cfg = Config(0);
  cfg.tools = registry_.Specs();
  cfg.budget.max_tokens = Budget{}.max_tokens;  // the default, 50 000
  TurnResult r = Run(cfg, p);
  EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  EXPECT_EQ(r.counters.tool_calls, 50);
  EXPECT_LT(r.counters.tokens, 20'000);
}

TEST_F(ContextBandTest, ContextIsMeasuredFromReportedInputPlusAppendedChars) {
  testing::FakeProvider p;
  ModelResponse first;
  first.content.push_back(Call("a", "big", {{"x", "1"}}));
  first.finish = FinishReason::kToolUse;
  first.has_usage = true;
  first.usage.input_tokens = 5000;  // what the provider counted
  first.usage.output_tokens = 10;
  p.Push(first).Text("done");
  Run(Config(1'000'000), p);
  auto checks = sink_.OfType(EventType::kBudgetCheck);
  ASSERT_EQ(checks.size(), 2u);
  auto second = BudgetCheckData::FromJson(checks[1].ToJson());
  ASSERT_TRUE(second.ok());
  // 5000 reported + chars/4 of the assistant message and the 8 KiB result.
  EXPECT_GE(second->context_tokens, 5000 + 8192 / 4);
  EXPECT_LE(second->context_tokens, 5000 + 8192 / 4 + 100);
}

// The context of the first request of a turn, from its budget_check.
int64_t FirstContextTokens(const CollectingSink& sink, size_t skip) {
  auto checks = sink.OfType(EventType::kBudgetCheck);
  EXPECT_GT(checks.size(), skip);
  if (checks.size() <= skip) return -1;
  auto d = BudgetCheckData::FromJson(checks[skip].ToJson());
  EXPECT_TRUE(d.ok());
  return d.ok() ? d->context_tokens : -1;
}

TEST_F(ContextBandTest, TheMeasurementIsCarriedIntoTheNextTurn) {
  testing::FakeProvider p;
  ModelResponse first;
  first.content.push_back(ContentBlock::Text("first answer"));
  first.has_usage = true;
  first.usage.input_tokens = 4000;
  first.usage.cache_read_tokens = 1000;  // cached input is still context
  first.usage.output_tokens = 10;
  p.Push(first).Text("second answer");
  TurnResult r1 = Run(Config(1'000'000), p, "first");
  ASSERT_TRUE(r1.context_measure.has_value());
  EXPECT_EQ(r1.context_measure->tokens, 5000);
  const size_t checks_before = sink_.OfType(EventType::kBudgetCheck).size();
  TurnConfig cfg = Config(1'000'000);
  cfg.context_measure = r1.context_measure;
  Run(cfg, p, "second");
  // 5000 reported + chars/4 of the answer and the new prompt; a fresh
  // chars/4 of the whole history would be a few dozen tokens.
  const int64_t t = FirstContextTokens(sink_, checks_before);
  EXPECT_GE(t, 5000);
  EXPECT_LE(t, 5000 + 20);
}

TEST_F(ContextBandTest, ACarriedMeasurementCountsAChangedSystemText) {
  testing::FakeProvider p;
  p.Text("ok");
  TurnConfig cfg = Config(1'000'000);
  cfg.system_prompt = std::string(8000, 's');
  const int64_t fixed = static_cast<int64_t>(cfg.system_prompt.size()) + [&] {
    int64_t n = 0;
    for (const auto& t : cfg.tools) {
      n +=
          static_cast<int64_t>(t.name.size() + t.description.size() + t.input_schema.dump().size());
    }
    return n;
  }();
  // Measured when the system text and tools had 4000 characters fewer.
  cfg.context_measure =
      ContextMeasure{.tokens = 3000, .history_chars = 0, .fixed_chars = fixed - 4000};
  Run(cfg, p, "hi");
  const int64_t t = FirstContextTokens(sink_, 0);
  EXPECT_GE(t, 3000 + 1000);
  EXPECT_LE(t, 3000 + 1000 + 5);
}

TEST_F(ContextBandTest, AMeasurementOfALongerHistoryIsIgnored) {
  testing::FakeProvider p;
  p.Text("ok");
  TurnConfig cfg = Config(1'000'000);
  cfg.context_measure = ContextMeasure{.tokens = 90'000, .history_chars = 1'000'000};
  Run(cfg, p, "hi");
  // chars / 4 of the system text, tools and the prompt instead.
  EXPECT_LT(FirstContextTokens(sink_, 0), 1000);
}

// Records what the turn tells hooks at its end.
class EndInfoHook : public Hook {
 public:
  std::string_view name() const override { return "end-info"; }
  TurnEndVerdict OnTurnEnd(const HookContext&, const TurnEndInfo& info) override {
    prompt_too_long = info.prompt_too_long;
    return {};
  }
  int prompt_too_long = -1;
};

TEST_F(ContextBandTest, HooksHearOfPromptTooLongAnswersButNotOfRoutineCompactions) {
  // One rejection, recovered by compacting the earlier turns.
  for (int i = 0; i < 12; ++i) {
    transcript_.Append(i % 2 == 0 ? Message::User("old question " + std::to_string(i))
                                  : Message::Assistant("old answer " + std::to_string(i)));
  }
  testing::FakeProvider p;
  p.Push(PromptTooLong("prompt is too long")).Text("ok");
  auto hook = std::make_shared<EndInfoHook>();
  TurnConfig cfg = Config(0);
  cfg.hooks.push_back(hook);
  TurnResult r = Run(cfg, p, "new question");
  EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  EXPECT_EQ(hook->prompt_too_long, 1);

  // The band compacts a long task before its calls: no rejection, and
  // nothing for the hooks to count.
  transcript_ = Transcript();
  WindowProvider w(16'384, 30);
  auto hook2 = std::make_shared<EndInfoHook>();
  TurnConfig cfg2 = Config(16'384);
  cfg2.hooks.push_back(hook2);
  Run(cfg2, w);
  ASSERT_FALSE(sink_.OfType(EventType::kCompaction).empty());
  EXPECT_EQ(hook2->prompt_too_long, 0);
}

}  // namespace
}  // namespace agentloop
