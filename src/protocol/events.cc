#include "agentloop/events.h"

#include <chrono>

namespace agentloop {
namespace {

constexpr std::pair<EventType, std::string_view> kNames[] = {
    {EventType::kTurnBegin, "turn_begin"},
    {EventType::kTurnEnd, "turn_end"},
    {EventType::kStepBegin, "step_begin"},
    {EventType::kStepEnd, "step_end"},
    {EventType::kTextDelta, "text_delta"},
    {EventType::kThinkingDelta, "thinking_delta"},
    {EventType::kMessage, "message"},
    {EventType::kToolCallBegin, "tool_call_begin"},
    {EventType::kToolCallEnd, "tool_call_end"},
    {EventType::kBudgetCheck, "budget_check"},
    {EventType::kDecision, "decision"},
    {EventType::kPending, "pending"},
    {EventType::kCompaction, "compaction"},
    {EventType::kHookError, "hook_error"},
    {EventType::kNotice, "notice"},
    {EventType::kContinuation, "continuation"},
    {EventType::kSettings, "settings"},
    {EventType::kRetry, "retry"},
    {EventType::kSubagentStarted, "subagent_started"},
    {EventType::kSubagentCompleted, "subagent_completed"},
};

}  // namespace

std::string_view EventTypeName(EventType type) {
  for (const auto& [t, n] : kNames) {
    if (t == type) return n;
  }
  return "notice";
}

std::optional<EventType> ParseEventType(std::string_view name) {
  for (const auto& [t, n] : kNames) {
    if (n == name) return t;
  }
  return std::nullopt;
}

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool ShouldPersist(EventType type) {
  switch (type) {
    case EventType::kTextDelta:
    case EventType::kThinkingDelta:
    case EventType::kRetry:
      return false;
    case EventType::kTurnBegin:
    case EventType::kTurnEnd:
    case EventType::kStepBegin:
    case EventType::kStepEnd:
    case EventType::kMessage:
    case EventType::kToolCallBegin:
    case EventType::kToolCallEnd:
    case EventType::kBudgetCheck:
    case EventType::kDecision:
    case EventType::kPending:
    case EventType::kCompaction:
    case EventType::kHookError:
    case EventType::kNotice:
    case EventType::kContinuation:
    case EventType::kSettings:
    case EventType::kSubagentStarted:
    case EventType::kSubagentCompleted:
      return true;
  }
  return true;
}

bool IsCommitBoundary(EventType type) {
  switch (type) {
    case EventType::kStepBegin:
    case EventType::kToolCallBegin:
    case EventType::kPending:
    case EventType::kTurnEnd:
    case EventType::kSubagentStarted:
      return true;
    // A decision is committed with the tool_call_begin (or pending) that
    // follows it: one commit instead of two per step.
    case EventType::kDecision:
    case EventType::kTurnBegin:
    case EventType::kStepEnd:
    case EventType::kTextDelta:
    case EventType::kThinkingDelta:
    case EventType::kRetry:
    case EventType::kMessage:
    case EventType::kToolCallEnd:
    case EventType::kBudgetCheck:
    case EventType::kCompaction:
    case EventType::kHookError:
    case EventType::kNotice:
    case EventType::kContinuation:
    case EventType::kSettings:
    case EventType::kSubagentCompleted:
      return false;
  }
  return true;
}

namespace {

// The JSON object of the data's fields.
Json DataJson(const EventData& data) {
  return std::visit([](const auto& d) { return d.ToJson(); }, data);
}

}  // namespace

Json Event::ToJson() const {
  Json j = Json::object();
  j["type"] = EventTypeName(EventTypeOf(data));
  j["session_id"] = session_id;
  j["turn_id"] = turn_id;
  j["seq"] = seq;
  if (ts > 0) j["ts"] = ts;
  Json fields = DataJson(data);
  for (auto it = fields.begin(); it != fields.end(); ++it) j[it.key()] = std::move(it.value());
  return j;
}

std::string Event::Dump(std::string_view session_id_override) const {
  // The envelope and the data's fields written one after the other, spliced
  // into one object (no data struct has a field named like an envelope
  // key), rather than copying the fields into a combined object first.
  Json envelope = Json::object();
  envelope["type"] = EventTypeName(EventTypeOf(data));
  envelope["session_id"] = session_id_override;
  envelope["turn_id"] = turn_id;
  envelope["seq"] = seq;
  if (ts > 0) envelope["ts"] = ts;
  std::string out = DumpJson(envelope);
  const Json fields = DataJson(data);
  if (!fields.empty()) {
    std::string text = DumpJson(fields);  // "{...}": splice its members in
    out.pop_back();                       // the envelope's '}'
    out += ',';
    out.append(text, 1, std::string::npos);
  }
  return out;
}

Result<Event> Event::FromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("event: expected an object");
  auto type_it = j.find("type");
  if (type_it == j.end() || !type_it->is_string()) return InvalidArgument("event: missing type");
  auto type = ParseEventType(type_it->get<std::string>());
  if (!type) return InvalidArgument("event: unknown type '" + type_it->get<std::string>() + "'");
  Event e;
  e.type = *type;
  e.session_id = j.value("session_id", "");
  e.turn_id = j.value("turn_id", "");
  e.seq = j.value("seq", uint64_t{0});
  if (auto ts = j.find("ts"); ts != j.end()) {
    if (!ts->is_number_integer() || ts->get<int64_t>() <= 0) {
      return InvalidArgument("event: ts must be a positive integer (Unix epoch milliseconds)");
    }
    e.ts = ts->get<int64_t>();
  }
  // The data's parser reads its own fields and ignores the envelope's.
  AL_ASSIGN_OR_RETURN(e.data, EventDataFromJson(*type, j));
  return e;
}

}  // namespace agentloop
