// The typed event stream out of every turn.
//
// Every event carries the session id, the turn id, a sequence number that is
// monotonic within the session (so an SSE client can reconnect with
// Last-Event-ID, and a store can order events) and the wall-clock time it was
// emitted. Events serialise as one JSON object per line: {"type",
// "session_id", "turn_id", "seq", "ts", ...data}; the
// types and their fields are documented in docs/protocol.md. Consumers must
// ignore unknown types and fields (additive changes only within v1).
//
// Thread-safety: an EventSink is called one event at a time, in seq order,
// from the thread driving the turn; under RunTurnAsync (runner.h) that is
// the executor's step threads, and for text and thinking deltas the thread
// the model streams on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop {

enum class EventType {
  kTurnBegin,        // {input: "user"|"resume", command, budget}
  kTurnEnd,          // {stop, reason, final_text, truncated, counters, pending}
  kStepBegin,        // {step, max_output_tokens, messages}
  kStepEnd,          // {step, finish, usage}
  kTextDelta,        // {text}                 (not persisted)
  kThinkingDelta,    // {text}                 (not persisted)
  kMessage,          // {message}              a message appended to the history
  kToolCallBegin,    // {id, tool, input}
  kToolCallEnd,      // {id, tool, is_error, content_bytes, summary}
  kBudgetCheck,      // {tool_calls, max_tool_calls, tokens, max_tokens, model_calls, max_turns, ok}
  kDecision,         // {tool_use_id, tool, decision, reason, rule, by, edited}
  kPending,          // {items: [PendingItem]}
  kCompaction,       // {from, to, attempt}
  kHookError,        // {hook, point, error}
  kNotice,           // {level, text}          human-facing notes (todo loop, reflector)
  kContinuation,     // {round, max_rounds, strikes, max_strikes, reason}
  kSettings,         // {changes: [{key, from, to, source}], settings}  pinned settings changed
  kRetry,            // {attempt, max_attempts, delay_ms, reason}  (not persisted)
  kSubagentStarted,  // {tool_use_id, name, path, child_session_id, reserved}
  kSubagentCompleted,  // {tool_use_id, name, path, child_session_id, stop, reason, counters}
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

struct Event {
  EventType type = EventType::kNotice;
  std::string session_id;
  std::string turn_id;
  uint64_t seq = 0;
  Json data = Json::object();
  // When the event was emitted, Unix epoch milliseconds; stamped together
  // with `seq` by whoever numbers the event (the turn, the engine, the
  // store's crash repair). 0: unknown, only for events stored before events
  // had timestamps; such an event serialises without `ts`.
  int64_t ts = 0;

  // One JSON object: type, session_id, turn_id, seq, ts, then the data fields.
  Json ToJson() const;
  // DumpJson(ToJson()) with session_id set to `session_id`, the same text,
  // written without copying `data` into a new object (what the store does
  // for every event it commits).
  std::string Dump(std::string_view session_id) const;
  static Result<Event> FromJson(const Json& j);
};

// The system clock in Unix epoch milliseconds: the default clock of `ts`.
int64_t SystemNowMs();

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Receives one event. A non-OK Status (e.g. the store could not commit a
  // message) is an engine failure: the turn ends `failed`.
  virtual Status OnEvent(const Event& event) = 0;
};

}  // namespace agentloop
