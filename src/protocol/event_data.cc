#include "agentloop/event_data.h"

#include <array>
#include <limits>
#include <utility>

#include "agentloop/events.h"

#include "protocol/codec.h"

namespace agentloop {
namespace {

// Reads the documented fields of one event type's data; the first problem
// is kept and names the event type and the field.
class Fields {
 public:
  Fields(const Json& j, EventType type) : j_(j), type_(type) {
    if (!j.is_object()) Fail("", "expected an object");
  }

  const Json* Get(const char* key) {
    if (!status_.ok() || !j_.is_object()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) {
      Fail(key, "missing");
      return nullptr;
    }
    return &*it;
  }
  std::string Str(const char* key) {
    const Json* v = Get(key);
    if (v == nullptr) return {};
    if (!v->is_string()) {
      Fail(key, "expected a string");
      return std::string();
    }
    return v->get<std::string>();
  }
  int64_t Int(const char* key) {
    const Json* v = Get(key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) {
      Fail(key, "expected an integer");
      return 0;
    }
    return v->get<int64_t>();
  }
  int Int32(const char* key) {
    int64_t v = Int(key);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      Fail(key, "out of range");
      return 0;
    }
    return static_cast<int>(v);
  }
  bool Has(const char* key) const { return j_.is_object() && j_.contains(key); }
  bool Bool(const char* key) {
    const Json* v = Get(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) {
      Fail(key, "expected true or false");
      return false;
    }
    return v->get<bool>();
  }
  const Json* Object(const char* key) {
    const Json* v = Get(key);
    if (v != nullptr && !v->is_object()) {
      Fail(key, "expected an object");
      return nullptr;
    }
    return v;
  }
  const Json* Array(const char* key) {
    const Json* v = Get(key);
    if (v != nullptr && !v->is_array()) {
      Fail(key, "expected an array");
      return nullptr;
    }
    return v;
  }
  template <typename T>
  T Take(const char* key, Result<T> r) {
    if (!r.ok()) {
      Fail(key, r.error().message());
      return T{};
    }
    return std::move(*r);
  }
  std::vector<PendingItem> PendingItems(const char* key) {
    std::vector<PendingItem> out;
    if (const Json* a = Array(key)) {
      for (const Json& p : *a) out.push_back(Take(key, PendingItemFromJson(p)));
    }
    return out;
  }
  void Fail(const std::string& key, const std::string& why) {
    if (status_.ok()) {
      std::string where(EventTypeName(type_));
      if (!key.empty()) where += ": field '" + key + "'";
      status_ = InvalidArgument(where + ": " + why);
    }
  }

  template <typename T>
  Result<T> Done(T value) {
    if (!status_.ok()) return status_;
    return value;
  }

 private:
  const Json& j_;
  EventType type_;
  Status status_;
};

Result<Budget> BudgetFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("expected an object");
  Budget b;
  auto get = [&](const char* key, auto& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) {
      return InvalidArgument(std::string(key) + " missing or not an integer");
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(it->get<int64_t>());
    return Status::Ok();
  };
  AL_RETURN_IF_ERROR(get("max_tool_calls", b.max_tool_calls));
  AL_RETURN_IF_ERROR(get("max_tokens", b.max_tokens));
  AL_RETURN_IF_ERROR(get("max_turns", b.max_turns));
  if (auto it = j.find("max_wall_time_ms"); it != j.end()) {
    if (!it->is_number_integer()) return InvalidArgument("max_wall_time_ms is not an integer");
    b.max_wall_time = std::chrono::milliseconds(it->get<int64_t>());
  }
  return b;
}

Result<FinishReason> ParseFinish(const std::string& s) {
  for (FinishReason f : {FinishReason::kStop, FinishReason::kToolUse, FinishReason::kLength,
                         FinishReason::kRefused}) {
    if (FinishReasonName(f) == s) return f;
  }
  return InvalidArgument("unknown finish '" + s + "'");
}

template <typename T>
Result<T> Known(std::optional<T> v, const std::string& s) {
  if (!v) return InvalidArgument("unknown value '" + s + "'");
  return *v;
}

}  // namespace

// ---- turn_begin --------------------------------------------------------------

Json TurnBeginData::ToJson() const {
  return Json{{"input", input},
              {"command", CommandKindName(command)},
              {"budget", agentloop::ToJson(budget)},
              {"counters", agentloop::ToJson(counters)}};
}

Result<TurnBeginData> TurnBeginData::FromJson(const Json& j) {
  Fields f(j, kType);
  TurnBeginData d;
  d.input = f.Str("input");
  std::string command = f.Str("command");
  d.command = f.Take("command", Known(ParseCommandKind(command), command));
  if (const Json* b = f.Object("budget")) d.budget = f.Take("budget", BudgetFromJson(*b));
  if (const Json* c = f.Object("counters")) d.counters = TurnCountersFromJson(*c);
  return f.Done(std::move(d));
}

// ---- budget_check ------------------------------------------------------------

Json BudgetCheckData::ToJson() const {
  Json j{{"tool_calls", tool_calls},
         {"max_tool_calls", max_tool_calls},
         {"tokens", tokens},
         {"max_tokens", max_tokens},
         {"model_calls", model_calls},
         {"max_turns", max_turns},
         {"ok", ok}};
  if (context_window > 0) {
    j["context_tokens"] = context_tokens;
    j["context_window"] = context_window;
    j["band"] = band;
  }
  return j;
}

Result<BudgetCheckData> BudgetCheckData::FromJson(const Json& j) {
  Fields f(j, kType);
  BudgetCheckData d;
  d.tool_calls = f.Int32("tool_calls");
  d.max_tool_calls = f.Int32("max_tool_calls");
  d.tokens = f.Int("tokens");
  d.max_tokens = f.Int("max_tokens");
  d.model_calls = f.Int32("model_calls");
  d.max_turns = f.Int32("max_turns");
  d.ok = f.Bool("ok");
  if (f.Has("context_tokens")) d.context_tokens = f.Int("context_tokens");
  if (f.Has("context_window")) d.context_window = f.Int("context_window");
  if (f.Has("band")) d.band = f.Str("band");
  return f.Done(d);
}

// ---- step_begin / step_end ---------------------------------------------------

Json StepBeginData::ToJson() const {
  return Json{{"step", step}, {"max_output_tokens", max_output_tokens}, {"messages", messages}};
}

Result<StepBeginData> StepBeginData::FromJson(const Json& j) {
  Fields f(j, kType);
  StepBeginData d;
  d.step = f.Int32("step");
  d.max_output_tokens = f.Int("max_output_tokens");
  d.messages = f.Int("messages");
  return f.Done(d);
}

Json StepEndData::ToJson() const {
  return Json{{"step", step},
              {"finish", FinishReasonName(finish)},
              {"usage", agentloop::ToJson(usage)},
              {"has_usage", has_usage},
              {"tokens", tokens}};
}

Result<StepEndData> StepEndData::FromJson(const Json& j) {
  Fields f(j, kType);
  StepEndData d;
  d.step = f.Int32("step");
  std::string finish = f.Str("finish");
  d.finish = f.Take("finish", ParseFinish(finish));
  if (const Json* u = f.Object("usage")) d.usage = UsageFromJson(*u);
  d.has_usage = f.Bool("has_usage");
  d.tokens = f.Int("tokens");
  return f.Done(d);
}

// ---- deltas ------------------------------------------------------------------

Json TextDeltaData::ToJson() const { return Json{{"text", text}}; }

Result<TextDeltaData> TextDeltaData::FromJson(const Json& j) {
  Fields f(j, kType);
  TextDeltaData d;
  d.text = f.Str("text");
  return f.Done(std::move(d));
}

Json RetryData::ToJson() const {
  return Json{{"attempt", attempt},
              {"max_attempts", max_attempts},
              {"delay_ms", delay_ms},
              {"reason", reason}};
}

Result<RetryData> RetryData::FromJson(const Json& j) {
  Fields f(j, kType);
  RetryData d;
  d.attempt = f.Int("attempt");
  d.max_attempts = f.Int("max_attempts");
  d.delay_ms = f.Int("delay_ms");
  d.reason = f.Str("reason");
  return f.Done(std::move(d));
}

Json ThinkingDeltaData::ToJson() const { return Json{{"text", text}}; }

Result<ThinkingDeltaData> ThinkingDeltaData::FromJson(const Json& j) {
  Fields f(j, kType);
  ThinkingDeltaData d;
  d.text = f.Str("text");
  return f.Done(std::move(d));
}

// ---- message -----------------------------------------------------------------

Json MessageData::ToJson() const { return Json{{"message", agentloop::ToJson(message)}}; }

Result<MessageData> MessageData::FromJson(const Json& j) {
  Fields f(j, kType);
  MessageData d;
  if (const Json* m = f.Object("message")) d.message = f.Take("message", MessageFromJson(*m));
  return f.Done(std::move(d));
}

// ---- decision ----------------------------------------------------------------

Json DecisionData::ToJson() const {
  Json j{{"tool_use_id", tool_use_id},
         {"tool", tool},
         {"decision", DecisionName(decision)},
         {"reason", reason},
         {"rule", rule},
         {"by", by},
         {"edited", edited}};
  if (!pending_id.empty()) j["pending_id"] = pending_id;
  return j;
}

Result<DecisionData> DecisionData::FromJson(const Json& j) {
  Fields f(j, kType);
  DecisionData d;
  d.tool_use_id = f.Str("tool_use_id");
  d.tool = f.Str("tool");
  std::string decision = f.Str("decision");
  d.decision = f.Take("decision", Known(ParseDecisionName(decision), decision));
  d.reason = f.Str("reason");
  d.rule = f.Str("rule");
  d.by = f.Str("by");
  d.edited = f.Bool("edited");
  if (j.is_object() && j.contains("pending_id")) d.pending_id = f.Str("pending_id");
  return f.Done(std::move(d));
}

// ---- tool calls --------------------------------------------------------------

Json ToolCallBeginData::ToJson() const {
  return Json{{"id", id}, {"tool", tool}, {"input", input}};
}

Result<ToolCallBeginData> ToolCallBeginData::FromJson(const Json& j) {
  Fields f(j, kType);
  ToolCallBeginData d;
  d.id = f.Str("id");
  d.tool = f.Str("tool");
  if (const Json* in = f.Get("input")) d.input = *in;
  return f.Done(std::move(d));
}

Json ToolCallEndData::ToJson() const {
  Json j{{"id", id},
         {"tool", tool},
         {"is_error", is_error},
         {"content_bytes", content_bytes},
         {"summary", summary}};
  if (!diff.empty()) j["diff"] = diff;
  if (exit_code) j["exit_code"] = *exit_code;
  if (cancelled) j["cancelled"] = true;
  return j;
}

Result<ToolCallEndData> ToolCallEndData::FromJson(const Json& j) {
  Fields f(j, kType);
  ToolCallEndData d;
  d.id = f.Str("id");
  d.tool = f.Str("tool");
  d.is_error = f.Bool("is_error");
  d.content_bytes = f.Int("content_bytes");
  d.summary = f.Str("summary");
  if (j.is_object() && j.contains("diff")) d.diff = f.Str("diff");
  if (j.is_object() && j.contains("exit_code")) d.exit_code = f.Int("exit_code");
  if (j.is_object() && j.contains("cancelled")) d.cancelled = f.Bool("cancelled");
  return f.Done(std::move(d));
}

// ---- pending -----------------------------------------------------------------

Json PendingData::ToJson() const {
  Json list = Json::array();
  for (const PendingItem& p : items) list.push_back(agentloop::ToJson(p));
  return Json{{"items", std::move(list)}, {"checkpoint", agentloop::ToJson(checkpoint)}};
}

Result<PendingData> PendingData::FromJson(const Json& j) {
  Fields f(j, kType);
  PendingData d;
  d.items = f.PendingItems("items");
  if (const Json* cp = f.Object("checkpoint")) {
    d.checkpoint = f.Take("checkpoint", CheckpointFromJson(*cp));
  }
  return f.Done(std::move(d));
}

// ---- compaction --------------------------------------------------------------

Json CompactionData::ToJson() const {
  Json j{{"from", from},
         {"to", to},
         {"attempt", attempt},
         {"drop_prefix", drop_prefix},
         {"summary", summary ? agentloop::ToJson(*summary) : Json(nullptr)}};
  if (!kept.empty()) {
    Json k = Json::array();
    for (const Message& m : kept) k.push_back(agentloop::ToJson(m));
    j["kept"] = std::move(k);
  }
  if (!trigger.empty()) {
    j["trigger"] = trigger;
    j["tokens_before"] = tokens_before;
    j["tokens_after"] = tokens_after;
  }
  if (!summary_source.empty()) j["summary_source"] = summary_source;
  return j;
}

Result<CompactionData> CompactionData::FromJson(const Json& j) {
  Fields f(j, kType);
  CompactionData d;
  d.from = f.Int("from");
  d.to = f.Int("to");
  d.attempt = f.Int32("attempt");
  d.drop_prefix = f.Int("drop_prefix");
  if (const Json* s = f.Get("summary"); s != nullptr && !s->is_null()) {
    d.summary = f.Take("summary", MessageFromJson(*s));
  }
  if (f.Has("kept")) {
    if (const Json* k = f.Array("kept")) {
      for (const Json& m : *k) d.kept.push_back(f.Take("kept", MessageFromJson(m)));
    }
  }
  if (f.Has("trigger")) d.trigger = f.Str("trigger");
  if (f.Has("summary_source")) d.summary_source = f.Str("summary_source");
  if (f.Has("tokens_before")) d.tokens_before = f.Int("tokens_before");
  if (f.Has("tokens_after")) d.tokens_after = f.Int("tokens_after");
  return f.Done(std::move(d));
}

// ---- hook_error / notice -----------------------------------------------------

Json HookErrorData::ToJson() const {
  return Json{{"hook", hook}, {"point", point}, {"error", error}};
}

Result<HookErrorData> HookErrorData::FromJson(const Json& j) {
  Fields f(j, kType);
  HookErrorData d;
  d.hook = f.Str("hook");
  d.point = f.Str("point");
  d.error = f.Str("error");
  return f.Done(std::move(d));
}

Json NoticeData::ToJson() const { return Json{{"level", level}, {"text", text}}; }

Result<NoticeData> NoticeData::FromJson(const Json& j) {
  Fields f(j, kType);
  NoticeData d;
  d.level = f.Str("level");
  d.text = f.Str("text");
  return f.Done(std::move(d));
}

// ---- subagents ---------------------------------------------------------------

Json SubagentStartedData::ToJson() const {
  return Json{{"tool_use_id", tool_use_id},
              {"name", name},
              {"path", path},
              {"child_session_id", child_session_id},
              {"reserved",
               Json{{"tool_calls", reserved_tool_calls},
                    {"tokens", reserved_tokens},
                    {"wall_time_ms",
                     reserved_wall_time_ms < 0 ? Json(nullptr) : Json(reserved_wall_time_ms)}}}};
}

Result<SubagentStartedData> SubagentStartedData::FromJson(const Json& j) {
  Fields f(j, kType);
  SubagentStartedData d;
  d.tool_use_id = f.Str("tool_use_id");
  d.name = f.Str("name");
  d.path = f.Str("path");
  d.child_session_id = f.Str("child_session_id");
  if (const Json* r = f.Object("reserved")) {
    Fields rf(*r, kType);
    d.reserved_tool_calls = rf.Int("tool_calls");
    d.reserved_tokens = rf.Int("tokens");
    const Json* wall = rf.Get("wall_time_ms");
    d.reserved_wall_time_ms =
        wall != nullptr && wall->is_number_integer() ? wall->get<int64_t>() : -1;
    if (Result<int> done = rf.Done(0); !done.ok()) return done.error();
  }
  return f.Done(std::move(d));
}

Json SubagentCompletedData::ToJson() const {
  return Json{{"tool_use_id", tool_use_id},
              {"name", name},
              {"path", path},
              {"child_session_id", child_session_id},
              {"stop", stop},
              {"reason", reason},
              {"counters", agentloop::ToJson(counters)}};
}

Result<SubagentCompletedData> SubagentCompletedData::FromJson(const Json& j) {
  Fields f(j, kType);
  SubagentCompletedData d;
  d.tool_use_id = f.Str("tool_use_id");
  d.name = f.Str("name");
  d.path = f.Str("path");
  d.child_session_id = f.Str("child_session_id");
  d.stop = f.Str("stop");
  d.reason = f.Str("reason");
  if (const Json* c = f.Object("counters")) d.counters = TurnCountersFromJson(*c);
  return f.Done(std::move(d));
}

// ---- continuation ------------------------------------------------------------

Json ContinuationData::ToJson() const {
  return Json{{"by", by},           {"continue", continue_turn},  {"reason", reason},
              {"entries", entries}, {"model_calls", model_calls}, {"details", details}};
}

Result<ContinuationData> ContinuationData::FromJson(const Json& j) {
  Fields f(j, kType);
  ContinuationData d;
  d.by = f.Str("by");
  d.continue_turn = f.Bool("continue");
  d.reason = f.Str("reason");
  d.entries = f.Int("entries");
  d.model_calls = f.Int32("model_calls");
  if (const Json* details = f.Get("details")) {
    if (!details->is_null() && !details->is_object()) {
      f.Fail("details", "expected an object or null");
    } else {
      d.details = *details;
    }
  }
  return f.Done(std::move(d));
}

// ---- settings ----------------------------------------------------------------

Json SettingsData::ToJson() const {
  Json list = Json::array();
  for (const Change& c : changes) {
    list.push_back(Json{{"key", c.key}, {"from", c.from}, {"to", c.to}, {"source", c.source}});
  }
  return Json{{"changes", std::move(list)}, {"settings", settings}};
}

Result<SettingsData> SettingsData::FromJson(const Json& j) {
  Fields f(j, kType);
  SettingsData d;
  if (const Json* list = f.Array("changes")) {
    for (const Json& c : *list) {
      Fields cf(c, kType);
      Change change;
      change.key = cf.Str("key");
      if (const Json* from = cf.Get("from")) change.from = *from;
      if (const Json* to = cf.Get("to")) change.to = *to;
      change.source = cf.Str("source");
      Result<Change> checked = cf.Done(std::move(change));
      d.changes.push_back(f.Take("changes", std::move(checked)));
    }
  }
  if (const Json* s = f.Object("settings")) d.settings = *s;
  return f.Done(std::move(d));
}

// ---- turn_end ----------------------------------------------------------------

Json TurnEndData::ToJson() const {
  Json list = Json::array();
  for (const PendingItem& p : pending) list.push_back(agentloop::ToJson(p));
  return Json{{"stop", StopReasonName(stop)},
              {"reason", reason},
              {"final_text", final_text},
              {"truncated", truncated},
              {"counters", agentloop::ToJson(counters)},
              {"pending", std::move(list)}};
}

Result<TurnEndData> TurnEndData::FromJson(const Json& j) {
  Fields f(j, kType);
  TurnEndData d;
  std::string stop = f.Str("stop");
  d.stop = f.Take("stop", Known(ParseStopReason(stop), stop));
  d.reason = f.Str("reason");
  d.final_text = f.Str("final_text");
  d.truncated = f.Bool("truncated");
  if (const Json* c = f.Object("counters")) d.counters = TurnCountersFromJson(*c);
  d.pending = f.PendingItems("pending");
  return f.Done(std::move(d));
}

namespace {

// The parser of the alternative `I` of EventData.
template <size_t I>
Result<EventData> ParseAlternative(const Json& j) {
  using D = std::variant_alternative_t<I, EventData>;
  static_assert(static_cast<size_t>(D::kType) == I,
                "EventData lists the structs in EventType's order");
  Result<D> d = D::FromJson(j);
  if (!d.ok()) return d.error();
  return EventData(std::in_place_index<I>, std::move(*d));
}

template <size_t... I>
constexpr auto Parsers(std::index_sequence<I...>) {
  return std::array<Result<EventData> (*)(const Json&), sizeof...(I)>{&ParseAlternative<I>...};
}

constexpr auto kParsers = Parsers(std::make_index_sequence<std::variant_size_v<EventData>>());

}  // namespace

Result<EventData> EventDataFromJson(EventType type, const Json& j) {
  const auto i = static_cast<size_t>(type);
  if (i >= kParsers.size()) return InvalidArgument("event: unknown type");
  return kParsers[i](j);
}

}  // namespace agentloop
