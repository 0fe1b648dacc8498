#include "agentloop/runner.h"

#include <exception>
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

}  // namespace core

std::vector<Result<ToolOutput>> RunToolLanes(const std::vector<std::vector<ToolCall>>& lanes,
                                             const ToolRegistry& tools, ToolContext& ctx) {
  std::vector<Result<ToolOutput>> out;
  for (const auto& lane : lanes) {
    if (lane.size() == 1) {
      out.push_back(core::RunOne(lane[0], tools, ctx));
      continue;
    }
    std::vector<std::optional<Result<ToolOutput>>> slots(lane.size());
    // Per-call copies made before any call starts: tools may not share
    // mutable context.
    std::vector<ToolContext> contexts(lane.size(), ctx);
    {
      std::vector<std::jthread> threads;
      threads.reserve(lane.size() - 1);
      for (size_t i = 1; i < lane.size(); ++i) {
        threads.emplace_back(
            [&, i] { slots[i].emplace(core::RunOne(lane[i], tools, contexts[i])); });
      }
      slots[0].emplace(core::RunOne(lane[0], tools, contexts[0]));
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
      turn.OnToolResults(RunToolLanes(run->lanes, *deps.tools, ctx));
      continue;
    }
  }
}

}  // namespace agentloop
