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
#include <type_traits>
#include <utility>
#include <variant>

#include "agentloop/event_data.h"
#include "agentloop/event_type.h"
#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop {

// The data of an event: one alternative per EventType, in the enum's order
// (EventTypeOf).
using EventData = std::variant<TurnBeginData, TurnEndData, StepBeginData, StepEndData,
                               TextDeltaData, ThinkingDeltaData, MessageData, ToolCallBeginData,
                               ToolCallEndData, BudgetCheckData, DecisionData, PendingData,
                               CompactionData, HookErrorData, NoticeData, ContinuationData,
                               SettingsData, RetryData, SubagentStartedData, SubagentCompletedData>;

// The type of the alternative `data` holds.
inline EventType EventTypeOf(const EventData& data) { return static_cast<EventType>(data.index()); }

// Parses the data fields of an event of `type` (the event's JSON object, or
// its data alone: unknown keys are ignored) with the type's struct:
// kInvalidArgument naming the type and the field that is missing or wrong.
Result<EventData> EventDataFromJson(EventType type, const Json& j);

struct Event {
  // `type` is the type of `data`'s alternative: the constructor sets both,
  // and so does FromJson; a consumer switches on `type` and reads the data
  // with As<T>() (or std::get_if / std::visit on `data`).
  EventType type = EventType::kTurnBegin;
  std::string session_id;
  std::string turn_id;
  uint64_t seq = 0;
  EventData data;
  // When the event was emitted, Unix epoch milliseconds; stamped together
  // with `seq` by whoever numbers the event (the turn, the engine, the
  // store's crash repair). 0: unknown, only for events stored before events
  // had timestamps; such an event serialises without `ts`.
  int64_t ts = 0;

  Event() = default;
  template <typename D>
  requires requires { D::kType; }
  explicit Event(D d, std::string session = {}, std::string turn = {}, uint64_t s = 0,
                 int64_t time_ms = 0)
      : type(D::kType),
        session_id(std::move(session)),
        turn_id(std::move(turn)),
        seq(s),
        data(std::move(d)),
        ts(time_ms) {
    static_assert(
        std::is_same_v<std::variant_alternative_t<static_cast<size_t>(D::kType), EventData>, D>,
        "EventData lists the structs in EventType's order");
  }

  // The data as `D`, or null when the event is of another type.
  template <typename D>
  const D* As() const {
    return std::get_if<D>(&data);
  }
  template <typename D>
  D* As() {
    return std::get_if<D>(&data);
  }

  // One JSON object: type, session_id, turn_id, seq, ts, then the data fields.
  Json ToJson() const;
  // DumpJson(ToJson()) with session_id set to `session_id`, the same text
  // (what the store does for every event it commits).
  std::string Dump(std::string_view session_id) const;
  // The envelope and the data of the type `j` names, checked as
  // EventDataFromJson checks it.
  static Result<Event> FromJson(const Json& j);
};

// An Event of `data`'s type (seq and ts are the numbering's: left 0).
template <typename D>
Event MakeEvent(D data, std::string session_id = {}, std::string turn_id = {}) {
  return Event(std::move(data), std::move(session_id), std::move(turn_id));
}

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
