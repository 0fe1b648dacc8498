#include "agentloop/runner.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "core/runner_steps.h"

namespace agentloop {
namespace core {

void ForwardingSink::OnTextDelta(std::string_view text) {
  turn_.EmitTextDelta(text);
  if (extra_ != nullptr) extra_->OnTextDelta(text);
}
void ForwardingSink::OnThinkingDelta(std::string_view text) {
  turn_.EmitThinkingDelta(text);
  if (extra_ != nullptr) extra_->OnThinkingDelta(text);
}
void ForwardingSink::OnRetry(const RetryData& retry) {
  turn_.EmitRetry(retry);
  if (extra_ != nullptr) extra_->OnRetry(retry);
}

Result<ToolOutput> RunOne(const ToolCall& call, const ToolRegistry& tools, ToolContext& ctx) {
  Tool* tool = tools.Find(call.name);
  if (tool == nullptr) return ToolOutput::Error("unknown tool '" + call.name + "'");
  if (ctx.stop.stop_requested()) return ToolOutput::Error("not run: the turn was cancelled");
  if (ctx.deadline && std::chrono::steady_clock::now() >= *ctx.deadline) {
    ToolOutput out = ToolOutput::Error("not run: the turn's wall-time budget ran out");
    out.details = Json{{"budget_exhausted", true}};
    return out;
  }
  try {
    return tool->Run(call, ctx);
  } catch (const std::exception& e) {
    return ToolOutput::Error("tool '" + call.name + "' failed unexpectedly: " + e.what());
  } catch (...) {
    return ToolOutput::Error("tool '" + call.name + "' failed unexpectedly");
  }
}

std::vector<ApprovalDecision> DecideAll(const std::vector<ApprovalRequest>& requests,
                                        Approver* approver, std::stop_token stop) {
  std::vector<ApprovalDecision> decisions;
  for (const auto& req : requests) {
    ApprovalDecision d =
        ApprovalDecision::Deny("no approver available to decide on '" + req.call.name +
                                   "' (fail closed); allow it with a rule (e.g. --allow '" +
                                   req.call.name + "') or run interactively",
                               "engine");
    if (approver != nullptr) {
      try {
        d = approver->Decide(req, stop);
      } catch (const std::exception& e) {
        d = ApprovalDecision::Deny(std::string("the approver failed: ") + e.what(), "engine");
      } catch (...) {
        d = ApprovalDecision::Deny("the approver failed", "engine");
      }
    }
    bool denied = d.kind == ApprovalDecision::Kind::kDeny;
    decisions.push_back(std::move(d));
    if (denied) break;  // the batch is cancelled anyway: do not ask about the rest
  }
  return decisions;
}

std::vector<Result<ToolOutput>> NoRegistryOutputs(const std::vector<std::vector<ToolCall>>& lanes) {
  std::vector<Result<ToolOutput>> outs;
  for (const auto& lane : lanes) {
    for (size_t i = 0; i < lane.size(); ++i) outs.emplace_back(Internal("no tool registry"));
  }
  return outs;
}

ToolContext TurnToolContext(const ToolContext& base, const Turn& turn, std::stop_token stop) {
  ToolContext ctx = base;
  ctx.stop = stop;
  if (IsReadOnly(turn.config().command)) ctx.read_only = true;
  return ctx;
}

std::optional<std::chrono::steady_clock::time_point> BatchDeadline(
    std::optional<std::chrono::milliseconds> time_left) {
  if (!time_left) return std::nullopt;
  return std::chrono::steady_clock::now() + *time_left;
}

namespace {

// The reports of one batch's calls (ToolContext::report), handed to
// `deliver` on the thread that runs the batch (the owner): at once when made
// on it, else queued until the owner drains the queue, which it does while
// it waits for a parallel lane and after each call. Closed when the batch
// ends; a later report is dropped. Shared by the report functions, which a
// tool may keep longer than the batch.
class ReportRelay {
 public:
  explicit ReportRelay(const ToolEventDelivery& deliver)
      : deliver_(&deliver), owner_(std::this_thread::get_id()) {}

  // The report function of `call`, a call of the batch (which outlives the
  // relay's open period).
  static std::function<void(Event)> For(const std::shared_ptr<ReportRelay>& relay,
                                        const ToolCall& call) {
    return [relay, call = &call](Event event) { relay->Report(*call, std::move(event)); };
  }

  // Owner thread: delivers what is queued.
  void Drain() {
    std::unique_lock lock(mu_);
    DrainLocked(lock);
  }

  // Owner thread: delivers reports as they come until `running` calls have
  // each called Finished().
  void DrainUntilFinished(size_t running) {
    std::unique_lock lock(mu_);
    for (;;) {
      DrainLocked(lock);
      if (finished_ >= running) return;
      cv_.wait(lock, [&] { return !queue_.empty() || finished_ >= running; });
    }
  }

  // Any thread: a call of the lane being waited for has returned.
  void Finished() {
    std::lock_guard lock(mu_);
    ++finished_;
    cv_.notify_all();
  }

  // Owner thread: a new lane starts.
  void ResetFinished() {
    std::lock_guard lock(mu_);
    finished_ = 0;
  }

  // Owner thread: the batch has ended.
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    queue_.clear();
  }

 private:
  struct Queued {
    const ToolCall* call;
    Event event;
  };

  void Report(const ToolCall& call, Event event) {
    if (std::this_thread::get_id() == owner_) {
      // Close() runs on this thread too: no report can race it here.
      bool closed = false;
      {
        std::lock_guard lock(mu_);
        closed = closed_;
      }
      if (!closed) (*deliver_)(call, std::move(event));
      return;
    }
    std::lock_guard lock(mu_);
    if (closed_) return;
    queue_.push_back(Queued{&call, std::move(event)});
    cv_.notify_all();
  }

  // Delivers outside the lock, so a delivery may report again.
  void DrainLocked(std::unique_lock<std::mutex>& lock) {
    while (!queue_.empty() && !closed_) {
      Queued q = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      (*deliver_)(*q.call, std::move(q.event));
      lock.lock();
    }
  }

  const ToolEventDelivery* deliver_;  // valid while open
  const std::thread::id owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // Guarded by mu_.
  size_t finished_ = 0;       // Guarded by mu_.
  bool closed_ = false;       // Guarded by mu_.
};

}  // namespace
}  // namespace core

std::vector<Result<ToolOutput>> RunToolLanes(const std::vector<std::vector<ToolCall>>& lanes,
                                             const ToolRegistry& tools, ToolContext& ctx,
                                             const ToolEventDelivery& deliver) {
  std::shared_ptr<core::ReportRelay> relay;
  if (deliver) relay = std::make_shared<core::ReportRelay>(deliver);
  // However the batch ends, no report reaches `deliver` after it.
  struct CloseAtEnd {
    const std::shared_ptr<core::ReportRelay>& relay;
    ~CloseAtEnd() {
      if (relay) relay->Close();
    }
  } close_at_end{relay};
  auto report_for = [&](const ToolCall& call) -> std::function<void(Event)> {
    if (!relay) return nullptr;
    return core::ReportRelay::For(relay, call);
  };
  std::vector<Result<ToolOutput>> out;
  for (const auto& lane : lanes) {
    if (lane.size() == 1) {
      ctx.report = report_for(lane[0]);
      out.push_back(core::RunOne(lane[0], tools, ctx));
      ctx.report = nullptr;
      if (relay) relay->Drain();  // what other threads of the call reported
      continue;
    }
    std::vector<std::optional<Result<ToolOutput>>> slots(lane.size());
    // Per-call copies made before any call starts: tools may not share
    // mutable context.
    std::vector<ToolContext> contexts(lane.size(), ctx);
    for (size_t i = 0; i < lane.size(); ++i) contexts[i].report = report_for(lane[i]);
    {
      std::vector<std::jthread> threads;
      threads.reserve(lane.size());
      if (relay) relay->ResetFinished();
      // Every call on a thread of its own: this thread hands their reports
      // to `deliver` meanwhile.
      for (size_t i = 0; i < lane.size(); ++i) {
        threads.emplace_back([&, i] {
          slots[i].emplace(core::RunOne(lane[i], tools, contexts[i]));
          if (relay) relay->Finished();
        });
      }
      if (relay) relay->DrainUntilFinished(lane.size());
    }  // joins
    for (auto& s : slots) out.push_back(std::move(*s));
  }
  return out;
}

TurnResult RunTurn(Turn& turn, RunnerDeps& deps, std::stop_token stop) {
  ToolContext ctx = core::TurnToolContext(deps.tool_context, turn, stop);
  for (;;) {
    TurnAction action = turn.Next(stop);
    if (auto* fin = std::get_if<turn_action::Finished>(&action)) return fin->result;
    if (auto* call = std::get_if<turn_action::CallModel>(&action)) {
      core::ForwardingSink sink(turn, deps.stream);
      Result<ModelResponse> r = Internal("no provider configured");
      if (deps.provider != nullptr) {
        try {
          r = deps.provider->Complete(call->request, sink, stop);
        } catch (const std::exception& e) {
          r = Internal(std::string("provider threw: ") + e.what());
        }
      }
      turn.OnModelResult(std::move(r));
      continue;
    }
    if (auto* decide = std::get_if<turn_action::Decide>(&action)) {
      turn.OnDecisions(core::DecideAll(decide->requests, deps.approver, stop));
      continue;
    }
    if (auto* run = std::get_if<turn_action::RunTools>(&action)) {
      if (deps.tools == nullptr) {
        turn.OnToolResults(core::NoRegistryOutputs(run->lanes));
        continue;
      }
      ctx.deadline = core::BatchDeadline(run->time_left);
      turn.OnToolResults(RunToolLanes(
          run->lanes, *deps.tools, ctx,
          [&turn](const ToolCall& c, Event event) { turn.OnToolEvent(c.id, std::move(event)); }));
      continue;
    }
  }
}

}  // namespace agentloop
