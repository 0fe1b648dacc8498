// Tokens sent per turn over a long session, with the context band
// (compaction at 0.7 of the window, model-written summaries) against the
// same session without it; and the cost of a step with the band measured,
// which must stay flat in the history length (the context is measured from
// the provider's report plus chars / 4 of what was appended, never by
// rescanning the history).
//
// The session: 200 turns; each asks one question, the model reads two files
// of 4 KB and answers. The provider counts what it is sent (chars / 4 of the
// system text, tools and messages) and reports it as input tokens.
#include <cstdio>
#include <optional>

#include <benchmark/benchmark.h>

#include "agentloop/runner.h"
#include "agentloop/turn.h"

namespace agentloop {
namespace {

class CountingProvider : public ModelProvider {
 public:
  // `count`: measure what is sent (a scan of the request, the model's cost,
  // not the engine's); false: report a constant (for the step cost).
  explicit CountingProvider(bool count = true) : count_(count) {}
  std::string_view name() const override { return "counting"; }
  Result<ModelResponse> Complete(const ModelRequest& r, StreamSink&, std::stop_token) override {
    int64_t chars = static_cast<int64_t>(r.system.size());
    if (count_) {
      for (const auto& t : r.tools) {
        chars += static_cast<int64_t>(t.name.size() + t.description.size() + 64);
      }
      r.ForEachMessage([&](const Message& m) { chars += Transcript::MessageChars(m); });
    }
    const int64_t input = (chars + 3) / 4;
    sent_ += input;
    ModelResponse resp;
    resp.has_usage = true;
    resp.usage.input_tokens = input;
    resp.usage.output_tokens = 50;
    const bool summary = !r.tail.empty() && r.tail.back().JoinedText().starts_with("Summarize");
    if (summary || step_ == 2) {
      resp.content.push_back(
          ContentBlock::Text(summary ? std::string(2000, 's') : "The answer is in both files."));
      resp.finish = FinishReason::kStop;
      if (!summary) step_ = 0;
      return resp;
    }
    resp.content.push_back(ContentBlock::ToolUse("c" + std::to_string(n_++), "read",
                                                 Json{{"path", "f" + std::to_string(n_)}}));
    resp.finish = FinishReason::kToolUse;
    ++step_;
    return resp;
  }
  int64_t sent() const { return sent_; }
  void reset_sent() { sent_ = 0; }

 private:
  bool count_;
  int64_t sent_ = 0;
  int step_ = 0;
  int n_ = 0;
};

class ReadTool : public Tool {
 public:
  ReadTool() {
    spec_.name = "read";
    spec_.description = "reads a file";
    spec_.input_schema = Json::parse(
        R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})");
    spec_.parallel_safe = true;
  }
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override {
    return ToolOutput::Ok(std::string(4096, 'x'));
  }

 private:
  ToolSpec spec_;
};

struct AllowAll : PermissionPolicy {
  PolicyVerdict Evaluate(const ToolSpec&, const ToolCall&) const override {
    return {Decision::kAllow, "", ""};
  }
};

// Runs the session; returns the tokens sent per turn.
std::vector<int64_t> RunSession(int turns, int64_t window) {
  ToolRegistry registry;
  registry.Add(std::make_shared<ReadTool>());
  CountingProvider provider;
  Transcript transcript;
  std::vector<int64_t> per_turn;
  // Carried from turn to turn, as the engine does.
  std::optional<ContextMeasure> measure;
  for (int t = 0; t < turns; ++t) {
    TurnConfig cfg;
    cfg.session_id = "bench";
    cfg.system_prompt = std::string(2000, 'p');
    cfg.tools = registry.Specs();
    cfg.budget.max_tokens = 1'000'000'000;
    cfg.context_window = window;
    cfg.max_output_tokens = window > 0 ? 4096 : 0;
    cfg.policy = std::make_shared<AllowAll>();
    cfg.context_measure = measure;
    Turn turn(cfg, transcript);
    (void)turn.Start(TurnInput::User("question " + std::to_string(t)));
    RunnerDeps deps;
    deps.provider = &provider;
    deps.tools = &registry;
    provider.reset_sent();
    measure = RunTurn(turn, deps, {}).context_measure;
    per_turn.push_back(provider.sent());
  }
  return per_turn;
}

void BM_TokensSentPerTurn(benchmark::State& state) {
  const int64_t window = state.range(0);
  std::vector<int64_t> per_turn;
  for (auto _ : state) per_turn = RunSession(200, window);
  int64_t total = 0;
  for (int64_t v : per_turn) total += v;
  state.counters["turn1"] = static_cast<double>(per_turn[0]);
  state.counters["turn50"] = static_cast<double>(per_turn[49]);
  state.counters["turn100"] = static_cast<double>(per_turn[99]);
  state.counters["turn200"] = static_cast<double>(per_turn[199]);
  state.counters["total"] = static_cast<double>(total);
}
// 0: no window known, no compaction; 32768: the band at work.
BENCHMARK(BM_TokensSentPerTurn)->Arg(0)->Arg(32768)->Iterations(1)->Unit(benchmark::kMillisecond);

// One step with the band measured (a window large enough that nothing is
// compacted; 0: no band, for comparison), over a pre-filled history: flat
// in the history length. 64 steps per turn, each a tool call.
class LoopProvider : public ModelProvider {
 public:
  std::string_view name() const override { return "loop"; }
  Result<ModelResponse> Complete(const ModelRequest& r, StreamSink&, std::stop_token) override {
    benchmark::DoNotOptimize(r.history.data());
    ModelResponse resp;
    resp.has_usage = true;
    resp.usage.input_tokens = 1000;
    resp.usage.output_tokens = 5;
    resp.content.push_back(ContentBlock::ToolUse("c" + std::to_string(n_++), "read",
                                                 Json{{"path", "f" + std::to_string(n_)}}));
    resp.finish = FinishReason::kToolUse;
    return resp;
  }

 private:
  int n_ = 0;
};

void BM_StepWithBand(benchmark::State& state) {
  const auto history = static_cast<size_t>(state.range(0));
  const int64_t window = state.range(1);
  constexpr int kSteps = 64;
  ToolRegistry registry;
  registry.Add(std::make_shared<ReadTool>());
  std::vector<Message> seed;
  for (size_t i = 0; i < history; ++i) {
    seed.push_back(i % 2 == 0 ? Message::User("question number " + std::to_string(i))
                              : Message::Assistant("answer number " + std::to_string(i)));
  }
  LoopProvider provider;
  int64_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto transcript = std::make_unique<Transcript>(seed);
    TurnConfig cfg;
    cfg.session_id = "bench";
    cfg.tools = registry.Specs();
    cfg.budget.max_tool_calls = kSteps;
    cfg.budget.max_turns = kSteps + 1;
    cfg.budget.max_tokens = 1'000'000'000;
    cfg.context_window = window;
    cfg.stuck_repeats = 0;
    cfg.policy = std::make_shared<AllowAll>();
    auto turn = std::make_unique<Turn>(cfg, *transcript);
    (void)turn->Start(TurnInput::User("go"));
    RunnerDeps deps;
    deps.provider = &provider;
    deps.tools = &registry;
    state.ResumeTiming();
    TurnResult r = RunTurn(*turn, deps, {});
    steps += r.counters.model_calls;
    state.PauseTiming();
    turn.reset();
    transcript.reset();
    state.ResumeTiming();
  }
  state.counters["us_per_step"] = benchmark::Counter(
      static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StepWithBand)
    ->Args({10, 1'000'000'000})
    ->Args({1000, 1'000'000'000})
    ->Args({10000, 1'000'000'000})
    ->Args({10, 0})
    ->Args({10000, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace agentloop

BENCHMARK_MAIN();
