// Hook: in-process extension points around a turn (the todo continuation and
// the reflector are built on them; embedders get the same points).
//
// Hooks run in registration order. Each call has a timeout (default 5 s); a
// hook that throws or times out is logged (a hook_error event) and skipped:
// a hook never fails a turn. A timed-out hook is abandoned, not killed: its
// result is ignored. A timed call runs on a helper thread (the handoff costs
// two context switches) and its arguments stay valid until the hook returns,
// also after a timeout: the history it is handed (StepEndInfo::history,
// TurnEndInfo::history, ModelRequest::history) is an owned copy, made once
// per hook point when such a hook is registered. A hook whose timeout() is
// zero is trusted to return promptly and runs inline on the turn's thread,
// with exceptions still contained; it sees the session's transcript itself
// (no copy), valid for the call. No hook may keep references to its
// arguments past the call. The built-in hooks (todo, learning) are inline.
//
// Pairing: every OnTurnStart is followed by exactly one OnTurnEnd, also when
// the turn stops early (budget, pause, cancel, failure). When OnTurnEnd asks
// for another round, the next round opens with OnTurnStart again.
//
// Thread-safety: a Hook may be shared by many sessions and its methods may be
// called concurrently for different sessions; keep per-session state keyed by
// session id.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"
#include "agentloop/types.h"

namespace agentloop {

struct HookContext {
  std::string session_id;
  std::string turn_id;
  std::filesystem::path workspace;
  CommandKind command = CommandKind::kCode;
};

struct ToolCallVerdict {
  enum class Kind { kAllow, kDeny, kRewrite };
  Kind kind = Kind::kAllow;
  std::string reason;  // kDeny: what the model sees (as an is_error result)
  Json input;          // kRewrite: the replacement arguments (validated again)

  static ToolCallVerdict Allow() { return {}; }
  static ToolCallVerdict Deny(std::string why) { return {Kind::kDeny, std::move(why), nullptr}; }
  static ToolCallVerdict Rewrite(Json in) { return {Kind::kRewrite, "", std::move(in)}; }
};

// The end of one step that ran tools (the model will be called again).
struct StepEndInfo {
  int step = 0;
  // The stored history, oldest first; valid until the hook returns.
  std::span<const Message> history;
  // Names of the tools whose results this step produced, in model order.
  std::vector<std::string> tool_names;
  bool any_error = false;
};

struct TurnEndInfo {
  StopReason stop = StopReason::kCompleted;
  std::string reason;
  // The stored history, oldest first; valid until the hook returns.
  std::span<const Message> history;
  // Tool results the last step's batch produced: > 0 when the round ends
  // right after tools ran (a budget, the stuck guard, a denial, a cancel
  // before the next model call); 0 when it ends on a model response (a text
  // answer, a response whose calls were not run) or a pause (the results
  // are in the checkpoint, not the history).
  int tool_result_count = 0;
  TurnCounters counters;
  bool truncated = false;
  // Requests of this round the provider rejected as too long for the
  // window (each followed by a `prompt_too_long` compaction and a retry).
  // Compactions before a call (the band) or by hand are routine and not
  // counted.
  int prompt_too_long = 0;
};

struct TurnEndVerdict {
  // Ask the engine to run another round (only honoured when the turn
  // completed; budgets still apply).
  bool continue_turn = false;
  // Why the hook continues or stops, for the `continuation` event the turn
  // emits for this verdict (docs/protocol.md). A verdict that neither
  // continues nor gives a reason emits none.
  std::string reason;
  // The hook's own figures for that event (an object), or null.
  Json details;
  // Entries appended to the stored history before the next round, e.g. the
  // todo loop's hidden continuation marker (Message::tag set).
  std::vector<Message> entries;
};

class Hook {
 public:
  virtual ~Hook() = default;
  virtual std::string_view name() const = 0;
  // Zero: run inline, no timeout (for hooks that never block for long).
  virtual std::chrono::milliseconds timeout() const { return std::chrono::seconds(5); }

  virtual void OnTurnStart(const HookContext& ctx) { (void)ctx; }
  // May change the request (chained: each hook sees the previous one's output).
  virtual void BeforeModelCall(const HookContext& ctx, ModelRequest& request) {
    (void)ctx;
    (void)request;
  }
  virtual ToolCallVerdict BeforeToolCall(const HookContext& ctx, const ToolCall& call) {
    (void)ctx;
    (void)call;
    return ToolCallVerdict::Allow();
  }
  virtual void AfterToolResult(const HookContext& ctx, const ToolCall& call,
                               const ToolOutput& output) {
    (void)ctx;
    (void)call;
    (void)output;
  }
  virtual void AfterStep(const HookContext& ctx, const StepEndInfo& info) {
    (void)ctx;
    (void)info;
  }
  virtual TurnEndVerdict OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) {
    (void)ctx;
    (void)info;
    return {};
  }
  virtual void OnShutdown() {}
};

}  // namespace agentloop
