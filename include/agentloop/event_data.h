// The data of each event type, typed: one struct per EventType, with the
// JSON the event carries next to its envelope (events.h). Event::data holds
// one of them (EventData); whoever emits an event builds its struct, so what
// is emitted is what docs/protocol.md lists (a test holds the table in the
// docs against these structs), and consumers read the struct. ToJson and
// FromJson are the JSON at the process's edges (the store, the streams).
//
// FromJson validates the documented fields (kInvalidArgument naming the
// event type and the field) and ignores unknown ones: within v1 events only
// gain fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/checkpoint.h"
#include "agentloop/event_type.h"
#include "agentloop/json.h"
#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

// turn_begin: the first event of a turn.
struct TurnBeginData {
  static constexpr EventType kType = EventType::kTurnBegin;
  std::string input;  // "user" | "resume" | "retry"
  CommandKind command = CommandKind::kCode;
  Budget budget;
  TurnCounters counters;  // the counters the turn starts from

  Json ToJson() const;
  static Result<TurnBeginData> FromJson(const Json& j);
};

// budget_check: before every model call.
struct BudgetCheckData {
  static constexpr EventType kType = EventType::kBudgetCheck;
  int tool_calls = 0;
  int max_tool_calls = 0;
  int64_t tokens = 0;
  int64_t max_tokens = 0;
  int model_calls = 0;
  int max_turns = 0;
  bool ok = false;
  // The context budget band (docs/protocol.md): the estimated tokens of the
  // request about to be sent, the model's window (0: unknown, no band), and
  // "ok", "nudge" (at or over 0.7 of the window: the wrap-up message is
  // sent) or "over_hard_limit" (at or over 0.92). Optional in the JSON.
  int64_t context_tokens = 0;
  int64_t context_window = 0;
  std::string band = "ok";

  Json ToJson() const;
  static Result<BudgetCheckData> FromJson(const Json& j);
};

// step_begin: a model call is about to be made.
struct StepBeginData {
  static constexpr EventType kType = EventType::kStepBegin;
  int step = 0;  // 1-based model call of the turn
  int64_t max_output_tokens = 0;
  int64_t messages = 0;  // messages sent

  Json ToJson() const;
  static Result<StepBeginData> FromJson(const Json& j);
};

// text_delta / thinking_delta: streamed text (never stored).
struct TextDeltaData {
  static constexpr EventType kType = EventType::kTextDelta;
  std::string text;

  Json ToJson() const;
  static Result<TextDeltaData> FromJson(const Json& j);
};
struct ThinkingDeltaData {
  static constexpr EventType kType = EventType::kThinkingDelta;
  std::string text;

  Json ToJson() const;
  static Result<ThinkingDeltaData> FromJson(const Json& j);
};

// retry: a model request failed with a transient error and is sent again
// after `delay_ms` (never stored).
struct RetryData {
  static constexpr EventType kType = EventType::kRetry;
  int64_t attempt = 0;       // the attempt about to be made (2 = the first retry)
  int64_t max_attempts = 0;  // the policy's limit
  int64_t delay_ms = 0;      // the wait before it
  std::string reason;        // the error of the failed attempt, e.g. "HTTP 429 ..."

  Json ToJson() const;
  static Result<RetryData> FromJson(const Json& j);
};

// step_end: the model call's response arrived.
struct StepEndData {
  static constexpr EventType kType = EventType::kStepEnd;
  int step = 0;
  FinishReason finish = FinishReason::kStop;
  Usage usage;
  bool has_usage = false;
  int64_t tokens = 0;  // the turn's running total

  Json ToJson() const;
  static Result<StepEndData> FromJson(const Json& j);
};

// message: a message appended to the history.
struct MessageData {
  static constexpr EventType kType = EventType::kMessage;
  Message message;

  Json ToJson() const;
  static Result<MessageData> FromJson(const Json& j);
};

// decision: what was decided about one tool call.
struct DecisionData {
  static constexpr EventType kType = EventType::kDecision;
  std::string tool_use_id;
  std::string tool;
  Decision decision = Decision::kAsk;
  std::string reason;
  std::string rule;
  std::string by;  // "rule", "console", "durable", "webhook", "cli", ...
  bool edited = false;
  std::string pending_id;  // the pending item decided; empty: none (omitted)

  Json ToJson() const;
  static Result<DecisionData> FromJson(const Json& j);
};

// tool_call_begin: committed before the tool runs.
struct ToolCallBeginData {
  static constexpr EventType kType = EventType::kToolCallBegin;
  std::string id;
  std::string tool;
  Json input;

  Json ToJson() const;
  static Result<ToolCallBeginData> FromJson(const Json& j);
};

// tool_call_end: the tool returned.
struct ToolCallEndData {
  static constexpr EventType kType = EventType::kToolCallEnd;
  std::string id;
  std::string tool;
  bool is_error = false;
  int64_t content_bytes = 0;
  std::string summary;  // the first line, at most 200 bytes
  // A file tool's change as a unified diff (ToolOutput::details "diff");
  // empty: none (omitted).
  std::string diff;
  // A command's non-zero exit code (ToolOutput::details "exit_code");
  // unset: none (omitted).
  std::optional<int64_t> exit_code;
  // The call was cancelled while it ran (details "cancelled"); omitted when
  // false.
  bool cancelled = false;

  Json ToJson() const;
  static Result<ToolCallEndData> FromJson(const Json& j);
};

// pending: the turn pauses on these items.
struct PendingData {
  static constexpr EventType kType = EventType::kPending;
  std::vector<PendingItem> items;
  Checkpoint checkpoint;

  Json ToJson() const;
  static Result<PendingData> FromJson(const Json& j);
};

// compaction: the view of the history sent to the model was compacted (the
// store keeps every message). Replaying: drop the first `drop_prefix`
// messages, insert `summary` (when set) and then `kept`.
struct CompactionData {
  static constexpr EventType kType = EventType::kCompaction;
  int64_t from = 0;  // message counts
  int64_t to = 0;
  int attempt = 0;  // prompt-too-long recovery attempt; 0 for the others
  int64_t drop_prefix = 0;
  std::optional<Message> summary;  // null in the JSON when absent
  // Optional in the JSON (absent in events of older versions):
  std::vector<Message> kept;   // the user's latest request, re-inserted
  std::string trigger;         // "threshold", "prompt_too_long", "manual"
  std::string summary_source;  // "model", "truncated" or "" (no summary)
  int64_t tokens_before = 0;   // estimated context tokens
  int64_t tokens_after = 0;

  Json ToJson() const;
  static Result<CompactionData> FromJson(const Json& j);
};

// hook_error: a hook threw or timed out and was skipped.
struct HookErrorData {
  static constexpr EventType kType = EventType::kHookError;
  std::string hook;
  std::string point;
  std::string error;

  Json ToJson() const;
  static Result<HookErrorData> FromJson(const Json& j);
};

// notice: a human-facing note (todo loop, reflector).
struct NoticeData {
  static constexpr EventType kType = EventType::kNotice;
  std::string level;  // "info" | "warning"
  std::string text;

  Json ToJson() const;
  static Result<NoticeData> FromJson(const Json& j);
};

// subagent_started: a subagent tool started a child session
// (docs/subagents.md), with the share of the root turn's budget it reserved.
struct SubagentStartedData {
  static constexpr EventType kType = EventType::kSubagentStarted;
  std::string tool_use_id;       // the parent's call
  std::string name;              // the agent's name
  std::string path;              // "root/reviewer"
  std::string child_session_id;  // the child session
  int64_t reserved_tool_calls = 0;
  int64_t reserved_tokens = 0;
  int64_t reserved_wall_time_ms = -1;  // -1: no wall-time limit

  Json ToJson() const;
  static Result<SubagentStartedData> FromJson(const Json& j);
};

// subagent_completed: the child's turn ended; what it spent is charged to
// the parent's turn.
struct SubagentCompletedData {
  static constexpr EventType kType = EventType::kSubagentCompleted;
  std::string tool_use_id;
  std::string name;
  std::string path;
  std::string child_session_id;  // empty when the child never started
  std::string stop;              // StopReasonName
  std::string reason;
  TurnCounters counters;  // the child's spending, its own children's included

  Json ToJson() const;
  static Result<SubagentCompletedData> FromJson(const Json& j);
};

// continuation: a turn-end hook's verdict when a round settled or stopped
// (one per hook that gave a reason or asked for another round).
struct ContinuationData {
  static constexpr EventType kType = EventType::kContinuation;
  std::string by;  // the hook, e.g. "todo-loop"
  // Another round starts because of this verdict (the hook asked and the
  // turn completed).
  bool continue_turn = false;
  std::string reason;
  int64_t entries = 0;  // messages the hook appended to the history
  int model_calls = 0;  // of the turn so far
  // The hook's own figures, or null. The todo loop's: {round, max_rounds,
  // strikes, max_strikes, open}.
  Json details;

  Json ToJson() const;  // "continue" is the key of continue_turn
  static Result<ContinuationData> FromJson(const Json& j);
};

// settings: the settings pinned to the session changed.
struct SettingsData {
  static constexpr EventType kType = EventType::kSettings;
  struct Change {
    std::string key;  // "model", "permissions.deny", "budget.max_tool_calls", ...
    Json from;
    Json to;
    std::string source;  // the flag or caller that asked, e.g. "--model"
  };
  std::vector<Change> changes;
  Json settings;  // the pinned settings now (docs/storage.md)

  Json ToJson() const;
  static Result<SettingsData> FromJson(const Json& j);
};

// turn_end: the last event of a turn.
struct TurnEndData {
  static constexpr EventType kType = EventType::kTurnEnd;
  StopReason stop = StopReason::kCompleted;
  std::string reason;
  std::string final_text;
  bool truncated = false;
  TurnCounters counters;
  std::vector<PendingItem> pending;

  Json ToJson() const;
  static Result<TurnEndData> FromJson(const Json& j);
};

}  // namespace agentloop
