// RunTurnAsync: the Turn stepped from completions (see runner.h for which
// thread does what). One AsyncTurn per running turn holds what is in flight
// (the model request, the lanes, the outputs gathered so far); every
// callback that can still arrive holds a reference to it, so it lives until
// the last of them, whatever the caller does after `done`.
#include <atomic>
#include <exception>
#include <optional>

#include "agentloop/runner.h"

#include "core/runner_steps.h"

namespace agentloop {
namespace {

class AsyncTurn : public std::enable_shared_from_this<AsyncTurn> {
 public:
  using Done = std::function<void(Result<TurnResult>)>;

  AsyncTurn(Turn& turn, RunnerDeps& deps, TurnExecutor& executor, std::string key,
            std::stop_token stop, Done done)
      : turn_(turn),
        deps_(deps),
        executor_(executor),
        key_(std::move(key)),
        stop_(std::move(stop)),
        done_(std::move(done)),
        ctx_(core::TurnToolContext(deps.tool_context, turn, stop_)),
        sink_(turn, deps.stream) {}

  // Posts `step` as the turn's next step.
  template <typename F>
  void PostStep(F step) {
    executor_.Post(key_, [self = shared_from_this(), step = std::move(step)]() mutable {
      try {
        step(*self);
      } catch (const std::exception& e) {
        self->Finish(Internal(std::string("the turn failed unexpectedly: ") + e.what()));
      } catch (...) {
        self->Finish(Internal("the turn failed unexpectedly"));
      }
    });
  }

  // Asks the Turn what to do and does it: decisions in place, the model call
  // and tool calls by starting them (their completions post the next step).
  void Step() {
    for (;;) {
      TurnAction action = turn_.Next(stop_);
      if (auto* fin = std::get_if<turn_action::Finished>(&action)) {
        return Finish(std::move(fin->result));
      }
      if (auto* call = std::get_if<turn_action::CallModel>(&action)) {
        if (deps_.provider == nullptr) {
          turn_.OnModelResult(Internal("no provider configured"));
          continue;
        }
        call_.emplace(std::move(*call));
        return CallModel();
      }
      if (auto* decide = std::get_if<turn_action::Decide>(&action)) {
        turn_.OnDecisions(core::DecideAll(decide->requests, deps_.approver, stop_));
        continue;
      }
      if (auto* run = std::get_if<turn_action::RunTools>(&action)) {
        if (deps_.tools == nullptr) {
          turn_.OnToolResults(core::NoRegistryOutputs(run->lanes));
          continue;
        }
        ctx_.deadline = core::BatchDeadline(run->time_left);
        return StartTools(std::move(run->lanes));
      }
    }
  }

 private:
  // The model call. Nothing touches the Turn from here until the answer is
  // fed back in a new step (deltas go through sink_ meanwhile).
  void CallModel() {
    auto answered = std::make_shared<std::atomic<bool>>(false);
    ModelProvider::CompletionCallback on_done = [self = shared_from_this(),
                                                 answered](Result<ModelResponse> r) {
      // A provider that calls twice (or throws after arranging the call) is
      // heard once.
      if (answered->exchange(true)) return;
      self->PostStep([r = std::move(r)](AsyncTurn& t) mutable {
        t.call_.reset();
        t.turn_.OnModelResult(std::move(r));
        t.Step();
      });
    };
    if (deps_.provider->CompletesAsync()) return Issue(std::move(on_done));
    executor_.PostTool(key_, [self = shared_from_this(), on_done = std::move(on_done)]() mutable {
      self->Issue(std::move(on_done));
    });
  }

  void Issue(ModelProvider::CompletionCallback on_done) {
    try {
      deps_.provider->CompleteAsync(call_->request, sink_, stop_, on_done);
    } catch (const std::exception& e) {
      on_done(Internal(std::string("provider threw: ") + e.what()));
    } catch (...) {
      on_done(Internal("provider threw"));
    }
  }

  void StartTools(std::vector<std::vector<ToolCall>> lanes) {
    lanes_ = std::move(lanes);
    size_t total = 0;
    for (const auto& lane : lanes_) total += lane.size();
    outputs_.clear();
    outputs_.resize(total);
    lane_ = 0;
    lane_offset_ = 0;
    StartLane();
  }

  // Starts the calls of lane `lane_`, or, after the last lane, feeds the
  // outputs back. Runs in a step or in the last finished call of a lane.
  void StartLane() {
    while (lane_ < lanes_.size() && lanes_[lane_].empty()) ++lane_;
    if (lane_ == lanes_.size()) {
      return PostStep([](AsyncTurn& t) {
        std::vector<Result<ToolOutput>> outs;
        outs.reserve(t.outputs_.size());
        for (auto& o : t.outputs_) outs.push_back(std::move(*o));
        t.outputs_.clear();
        t.lanes_.clear();
        t.turn_.OnToolResults(std::move(outs));
        t.Step();
      });
    }
    const std::vector<ToolCall>& lane = lanes_[lane_];
    running_in_lane_.store(lane.size());
    // A lone call shares the turn's tool context (as RunToolLanes does); the
    // calls of a parallel lane get copies made before any of them starts.
    contexts_.assign(lane.size() > 1 ? lane.size() : 0, ctx_);
    if (contexts_.empty()) {
      ctx_.report = ReportFor(lane[0].id);
    } else {
      for (size_t i = 0; i < lane.size(); ++i) contexts_[i].report = ReportFor(lane[i].id);
    }
    for (size_t i = 0; i < lane.size(); ++i) {
      executor_.PostTool(key_, [self = shared_from_this(), i] { self->RunCall(i); });
    }
  }

  // The report function of the call `id` (ToolContext::report): each report
  // goes to the Turn in a step of its own, posted before the call returns,
  // so before the step that feeds the call's output back. It holds the run
  // weakly (the run holds the contexts), and drops a report that arrives
  // after the turn has finished (the Turn may be gone by then).
  std::function<void(Event)> ReportFor(const std::string& id) {
    return [weak = weak_from_this(), id](Event event) {
      std::shared_ptr<AsyncTurn> self = weak.lock();
      if (!self || !ShouldPersist(event.type)) return;
      self->PostStep([id, event = std::move(event)](AsyncTurn& t) mutable {
        if (t.done_) t.turn_.OnToolEvent(id, std::move(event));
      });
    };
  }

  void RunCall(size_t i) {
    ToolContext& ctx = contexts_.empty() ? ctx_ : contexts_[i];
    outputs_[lane_offset_ + i].emplace(core::RunOne(lanes_[lane_][i], *deps_.tools, ctx));
    // The last call of the lane to finish moves on; the acquire-release
    // count makes the others' outputs visible to it.
    if (running_in_lane_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    lane_offset_ += lanes_[lane_].size();
    ++lane_;
    StartLane();
  }

  void Finish(Result<TurnResult> result) {
    if (!done_) return;
    Done done = std::move(done_);
    done_ = nullptr;
    done(std::move(result));
  }

  Turn& turn_;
  RunnerDeps& deps_;
  TurnExecutor& executor_;
  const std::string key_;
  const std::stop_token stop_;
  Done done_;
  ToolContext ctx_;
  core::ForwardingSink sink_;
  std::optional<turn_action::CallModel> call_;  // the model call in flight
  std::vector<std::vector<ToolCall>> lanes_;    // the batch being run
  size_t lane_ = 0, lane_offset_ = 0;
  std::vector<ToolContext> contexts_;  // per call of a parallel lane
  std::atomic<size_t> running_in_lane_{0};
  std::vector<std::optional<Result<ToolOutput>>> outputs_;
};

}  // namespace

void RunTurnAsync(Turn& turn, RunnerDeps& deps, TurnExecutor& executor, std::string key,
                  std::stop_token stop, std::function<void(Result<TurnResult>)> done) {
  auto run = std::make_shared<AsyncTurn>(turn, deps, executor, std::move(key), std::move(stop),
                                         std::move(done));
  run->PostStep([](AsyncTurn& t) { t.Step(); });
}

}  // namespace agentloop
