// Permission policy and approvers: who may run which tool call.
//
// The engine asks a PermissionPolicy about every call (rules: allow, ask,
// deny). For `ask` it asks an Approver: a person at a console (live), an
// in-process embedder, or a durable approver that records the request and
// answers kDefer ("nobody is here; pause the turn durably"). ask_user
// questions go to the same Approver with kind kQuestion.
//
// The single place that combines these with hooks, plan mode, pauses and
// execution is the turn state machine (src/core/turn.cc); nothing else
// decides.
//
// Thread-safety: implementations must allow concurrent calls for different
// sessions.
#pragma once

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "agentloop/json.h"
#include "agentloop/tool.h"
#include "agentloop/types.h"

namespace agentloop {

enum class Decision { kAllow, kAsk, kDeny };

// "allow" | "ask" | "deny"
constexpr std::string_view DecisionName(Decision d) {
  switch (d) {
    case Decision::kAllow:
      return "allow";
    case Decision::kAsk:
      return "ask";
    case Decision::kDeny:
      return "deny";
  }
  return "deny";
}

// Exactly "allow" | "ask" | "deny" -> the decision; nullopt otherwise.
constexpr std::optional<Decision> ParseDecisionName(std::string_view name) {
  for (Decision d : {Decision::kAllow, Decision::kAsk, Decision::kDeny}) {
    if (DecisionName(d) == name) return d;
  }
  return std::nullopt;
}

// Higher is stricter: allow 0 < ask 1 < deny 2.
constexpr int DecisionStrictness(Decision d) {
  switch (d) {
    case Decision::kAllow:
      return 0;
    case Decision::kAsk:
      return 1;
    case Decision::kDeny:
      return 2;
  }
  return 2;
}

struct PolicyVerdict {
  Decision decision = Decision::kAsk;
  std::string reason;  // human-readable, e.g. "matched rule 'bash(git status*)'"
  std::string rule;    // the rule that decided, empty for the default
  // Asked every time: an earlier "allow for this session" does not cover it
  // (writes to the engine's own configuration).
  bool always_ask = false;
  // The call provably changes nothing (RulesPolicy never sets it: its
  // shell reader proves no bash line read-only).
  // A rule-allowed call of a tool that cannot confine itself here
  // (ToolSpec::confinement_unavailable) still runs when this is set, and is
  // asked about otherwise.
  bool read_only = false;
};

class PermissionPolicy {
 public:
  virtual ~PermissionPolicy() = default;
  // Decides one call. Must not block or have side effects.
  virtual PolicyVerdict Evaluate(const ToolSpec& spec, const ToolCall& call) const = 0;
};

// The policy with no rules: allow read-only tools, ask for mutating ones.
class DefaultPermissionPolicy final : public PermissionPolicy {
 public:
  PolicyVerdict Evaluate(const ToolSpec& spec, const ToolCall& call) const override;
};

struct ApprovalRequest {
  std::string session_id;
  std::string turn_id;
  PendingKind kind = PendingKind::kApproval;
  std::string pending_id;  // assigned by the engine; used if the approver defers
  ToolCall call;
  ToolSpec spec;
  std::string reason;  // why approval is needed (the rule), or the question text
  std::string rule;
};

struct ApprovalDecision {
  enum class Kind { kAllow, kDeny, kDefer };
  Kind kind = Kind::kDeny;
  std::string reason;                 // kDeny: shown to the model and the log
  std::optional<Json> edited_input;   // kAllow: run with these arguments instead
  std::string answer;                 // kAllow of a kQuestion: the person's answer
  bool remember_for_session = false;  // kAllow: allow this exact access again without asking
  std::string by;                     // who decided: "console", "webhook", "embedder", ...

  static ApprovalDecision Allow(std::string by) {
    return {Kind::kAllow, "", std::nullopt, "", false, std::move(by)};
  }
  static ApprovalDecision Deny(std::string why, std::string by) {
    return {Kind::kDeny, std::move(why), std::nullopt, "", false, std::move(by)};
  }
  static ApprovalDecision Defer(std::string by) {
    return {Kind::kDefer, "", std::nullopt, "", false, std::move(by)};
  }
};

class Approver {
 public:
  virtual ~Approver() = default;
  // Decides one request; may block (a console prompt). Returns kDefer to
  // pause the turn durably. Must honour `stop` by returning kDeny promptly.
  virtual ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) = 0;
};

}  // namespace agentloop
