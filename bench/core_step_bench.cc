// The engine's own overhead per step: a provider that answers instantly with
// one tool call, a no-op tool, no event sink. The history is pre-filled with
// N messages to show the cost is flat in transcript length (the loop must
// not copy or rescan the history each step).
#include <benchmark/benchmark.h>

#include "agentloop/runner.h"
#include "agentloop/turn.h"

namespace agentloop {
namespace {

class InstantProvider : public ModelProvider {
 public:
  std::string_view name() const override { return "instant"; }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink&,
                                 std::stop_token) override {
    benchmark::DoNotOptimize(request.history.data());
    ModelResponse r;
    r.content.push_back(ContentBlock::ToolUse("call_" + std::to_string(n_++), "noop",
                                              Json{{"path", "src/main.cc"}, {"n", n_}}));
    r.finish = FinishReason::kToolUse;
    r.usage.input_tokens = 10;
    r.usage.output_tokens = 5;
    r.has_usage = true;
    return r;
  }

 private:
  int n_ = 0;
};

class NoopTool : public Tool {
 public:
  NoopTool() {
    spec_.name = "noop";
    spec_.description = "does nothing";
    spec_.input_schema = Json::parse(
        R"({"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"]})");
    spec_.parallel_safe = true;
  }
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override { return ToolOutput::Ok("ok"); }

 private:
  ToolSpec spec_;
};

void BM_StepOverhead(benchmark::State& state) {
  const auto history = static_cast<size_t>(state.range(0));
  constexpr int kSteps = 64;
  ToolRegistry registry;
  registry.Add(std::make_shared<NoopTool>());
  InstantProvider provider;
  std::vector<Message> seed;
  for (size_t i = 0; i < history; ++i) {
    seed.push_back(i % 2 == 0 ? Message::User("question number " + std::to_string(i))
                              : Message::Assistant("answer number " + std::to_string(i)));
  }
  int64_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto transcript_owner = std::make_unique<Transcript>(seed);
    Transcript& transcript = *transcript_owner;
    TurnConfig cfg;
    cfg.session_id = "bench";
    cfg.tools = registry.Specs();
    cfg.budget.max_tool_calls = kSteps;
    cfg.budget.max_turns = kSteps + 1;
    cfg.budget.max_tokens = 1'000'000'000;
    cfg.stuck_repeats = 0;
    struct AllowAll : PermissionPolicy {
      PolicyVerdict Evaluate(const ToolSpec&, const ToolCall&) const override {
        return {Decision::kAllow, "", ""};
      }
    };
    cfg.policy = std::make_shared<AllowAll>();
    auto turn_owner = std::make_unique<Turn>(cfg, transcript);
    Turn& turn = *turn_owner;
    (void)turn.Start(TurnInput::User("go"));
    RunnerDeps deps;
    deps.provider = &provider;
    deps.tools = &registry;
    state.ResumeTiming();
    TurnResult r = RunTurn(turn, deps, {});
    benchmark::DoNotOptimize(r);
    steps += r.counters.model_calls;
    // Tear-down (freeing the history) is not part of a step.
    state.PauseTiming();
    turn_owner.reset();
    transcript_owner.reset();
    state.ResumeTiming();
  }
  state.counters["us_per_step"] = benchmark::Counter(
      static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StepOverhead)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace agentloop

BENCHMARK_MAIN();
