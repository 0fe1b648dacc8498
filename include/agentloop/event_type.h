// The event types: their stable names, and which of them a store keeps and
// which commit what was buffered before them. This header is the one place
// that says so; the engine, the stores, the server and the front ends ask
// these functions.
#pragma once

#include <optional>
#include <string_view>

namespace agentloop {

// One per struct of event_data.h (its kType), which holds the event's data.
enum class EventType {
  kTurnBegin,
  kTurnEnd,
  kStepBegin,
  kStepEnd,
  kTextDelta,
  kThinkingDelta,
  kMessage,
  kToolCallBegin,
  kToolCallEnd,
  kBudgetCheck,
  kDecision,
  kPending,
  kCompaction,
  kHookError,
  kNotice,
  kContinuation,
  kSettings,
  kRetry,
  kSubagentStarted,
  kSubagentCompleted,
};

// Stable snake_case name, e.g. "tool_call_begin".
std::string_view EventTypeName(EventType type);
std::optional<EventType> ParseEventType(std::string_view name);

// Whether a store must persist the event to rebuild the session: deltas and
// retries are display-only and are not stored; everything else is.
bool ShouldPersist(EventType type);

// Whether the engine commits a persisted event, with every event buffered
// before it, when it is emitted (its "commit boundary"): step_begin (before
// a model call), tool_call_begin (before a tool runs), subagent_started (the
// stored log shows a child while it runs), pending (with the paused batch's
// checkpoint and pending index, one transaction) and turn_end. Other
// persisted events wait for the next boundary; an observer that has seen
// one of them before its boundary has seen something the store does not
// hold yet. docs/storage.md, "Durability".
bool IsCommitBoundary(EventType type);

}  // namespace agentloop
