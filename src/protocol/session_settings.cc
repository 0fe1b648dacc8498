#include "protocol/session_settings.h"

#include <map>
#include <string>

namespace agentloop {
namespace {

constexpr int kFormat = 1;

Json Rules(const std::vector<SourcedRule>& rules) {
  Json a = Json::array();
  for (const SourcedRule& r : rules) a.push_back(Json{{"rule", r.rule}, {"source", r.source}});
  return a;
}

template <typename T>
Json Opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// Reads the member `key` of `obj` (a path like "budget.max_tokens" for
// messages); absent or null keeps `out`.
class Reader {
 public:
  explicit Reader(const Json& root) : root_(root) {}
  const Json* At(std::string_view path) const {
    const Json* cur = &root_;
    size_t start = 0;
    while (start <= path.size()) {
      size_t dot = path.find('.', start);
      std::string key(path.substr(start, dot == std::string_view::npos ? path.npos : dot - start));
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(key);
      if (it == cur->end() || it->is_null()) return nullptr;
      cur = &*it;
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    return cur;
  }
  Status Bad(std::string_view path, std::string_view want) const {
    return InvalidArgument("pinned settings: '" + std::string(path) + "' must be " +
                           std::string(want));
  }
  Status Str(std::string_view path, std::string& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return Bad(path, "a string");
    out = v->get<std::string>();
    return Status::Ok();
  }
  Status Bool(std::string_view path, bool& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) return Bad(path, "true or false");
    out = v->get<bool>();
    return Status::Ok();
  }
  template <typename T>
  Status Int(std::string_view path, T& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number_integer()) return Bad(path, "an integer");
    out = v->get<T>();
    return Status::Ok();
  }
  template <typename T>
  Status OptInt(std::string_view path, std::optional<T>& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number_integer()) return Bad(path, "an integer or null");
    out = v->get<T>();
    return Status::Ok();
  }
  Status OptDecision(std::string_view path, std::optional<Decision>& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    std::optional<Decision> d =
        v->is_string() ? ParseDecisionName(v->get<std::string>()) : std::nullopt;
    if (!d) return Bad(path, "\"allow\", \"ask\", \"deny\" or null");
    out = d;
    return Status::Ok();
  }
  Status Strings(std::string_view path, std::vector<std::string>& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_array()) return Bad(path, "an array of strings");
    std::vector<std::string> items;
    for (const Json& e : *v) {
      if (!e.is_string()) return Bad(path, "an array of strings");
      items.push_back(e.get<std::string>());
    }
    out = std::move(items);
    return Status::Ok();
  }
  Status StringMap(std::string_view path, std::map<std::string, std::string>& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_object()) return Bad(path, "an object of strings");
    std::map<std::string, std::string> items;
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it->is_string()) return Bad(path, "an object of strings");
      items[it.key()] = it->get<std::string>();
    }
    out = std::move(items);
    return Status::Ok();
  }
  Status RuleList(std::string_view path, std::vector<SourcedRule>& out) const {
    const Json* v = At(path);
    if (v == nullptr) return Status::Ok();
    if (!v->is_array()) return Bad(path, "an array of {rule, source}");
    for (const Json& r : *v) {
      if (!r.is_object() || !r.contains("rule") || !r["rule"].is_string()) {
        return Bad(path, "an array of {rule, source}");
      }
      out.push_back({r["rule"].get<std::string>(), r.value("source", std::string())});
    }
    return Status::Ok();
  }

 private:
  const Json& root_;
};

}  // namespace

std::string_view ApproverModeName(ApproverMode mode) {
  switch (mode) {
    case ApproverMode::kAuto:
      return "auto";
    case ApproverMode::kConsole:
      return "console";
    case ApproverMode::kDurable:
      return "durable";
    case ApproverMode::kWebhook:
      return "webhook";
    case ApproverMode::kNone:
      return "none";
  }
  return "auto";
}

std::optional<ApproverMode> ParseApproverMode(std::string_view name) {
  for (ApproverMode m : {ApproverMode::kAuto, ApproverMode::kConsole, ApproverMode::kDurable,
                         ApproverMode::kWebhook, ApproverMode::kNone}) {
    if (ApproverModeName(m) == name) return m;
  }
  return std::nullopt;
}

Json PinnedSettingsToJson(const SessionOptions& o) {
  Json j = Json::object();
  j["format"] = kFormat;
  j["workspace"] = o.workspace.string();
  j["provider"] = Json{{"kind", ProviderKindName(o.provider)},
                       {"model", o.model},
                       {"base_url", o.base_url},
                       {"api_key_env", o.api_key_env},
                       {"script", o.script_path},
                       {"use_max_tokens_field", o.use_max_tokens_field},
                       {"context_window", Opt(o.context_window)},
                       {"max_output_tokens", Opt(o.max_output_tokens)},
                       {"images", Opt(o.images)}};
  j["command"] = CommandKindName(o.command);
  j["budget"] =
      Json{{"max_tool_calls", Opt(o.max_tool_calls)},
           {"max_tokens", Opt(o.max_tokens)},
           {"max_turns", Opt(o.max_turns)},
           {"max_wall_time_ms", o.max_wall_time ? Json(o.max_wall_time->count()) : Json(nullptr)}};
  j["permissions"] =
      Json{{"allow", Rules(o.allow)},
           {"ask", Rules(o.ask)},
           {"deny", Rules(o.deny)},
           {"default_mutating",
            o.default_mutating ? Json(DecisionName(*o.default_mutating)) : Json(nullptr)},
           {"default_read_only",
            o.default_read_only ? Json(DecisionName(*o.default_read_only)) : Json(nullptr)}};
  j["approver"] = Json{{"mode", ApproverModeName(o.approver)},
                       {"webhook_url", o.webhook_url},
                       {"secret_env", o.webhook_secret_env}};
  Json env_set = Json::object();
  for (const auto& [k, v] : o.env_set) env_set[k] = v;
  j["tools"] =
      Json{{"sandbox", SandboxModeName(o.sandbox)},
           {"network", o.sandbox_network},
           {"sandbox_fallback", o.sandbox_fallback == SandboxFallback::kWarn ? "warn" : "refuse"},
           {"bash_timeout_ms", o.bash_timeout_ms},
           {"env_remove", o.env_remove},
           {"env_pass", o.env_pass},
           {"env_set", env_set}};
  j["todo_loop"] = Json{{"enabled", o.todo_loop},
                        {"max_rounds", o.todo_max_rounds},
                        {"max_strikes", o.todo_max_strikes},
                        {"inject_state", o.todo_inject_state},
                        {"max_injected_tasks", o.todo_max_injected_tasks}};
  j["reflector"] = Json{{"enabled", o.reflector}};
  // The text is kept, not only its source: a prompt file may change, move,
  // or (relative to the directory it was given in) not resolve from the
  // process that continues the session.
  j["system_prompt"] =
      Json{{"source", o.system_prompt ? (o.system_prompt_source.empty() ? std::string("(given)")
                                                                        : o.system_prompt_source)
                                      : std::string("built-in")},
           {"text", o.system_prompt ? Json(*o.system_prompt) : Json(nullptr)}};
  // Only present for a child session (docs/subagents.md).
  if (!o.subagents.path.empty()) {
    const auto& sa = o.subagents;
    j["subagent"] = Json{{"parent_id", sa.parent_id},
                         {"path", sa.path},
                         {"depth", sa.depth},
                         {"tools", sa.tools ? Json(*sa.tools) : Json(nullptr)},
                         {"home_agent", sa.home_agent},
                         {"parent_turn_id", sa.parent_turn_id},
                         {"tool_use_id", sa.tool_use_id}};
  }
  // Only present when the session has extensions, so a session without
  // them keeps the text an agentloop without extensions writes.
  const SessionExtensions& x = o.extensions;
  if (!x.tools.empty() || !x.hooks.empty() || x.provider_factory) {
    Json tools = Json::array(), hooks = Json::array();
    for (const auto& t : x.tools) tools.push_back(t ? t->spec().name : std::string());
    for (const auto& h : x.hooks) hooks.push_back(h ? std::string(h->name()) : std::string());
    j["extensions"] = Json{{"tools", std::move(tools)},
                           {"hooks", std::move(hooks)},
                           {"provider_factory", bool(x.provider_factory)}};
  }
  return j;
}

Result<SessionOptions> PinnedSettingsFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("pinned settings must be a JSON object");
  Reader r(j);
  SessionOptions o;
  std::string ws;
  AL_RETURN_IF_ERROR(r.Str("workspace", ws));
  o.workspace = ws;
  std::string provider(ProviderKindName(o.provider));
  AL_RETURN_IF_ERROR(r.Str("provider.kind", provider));
  Result<ProviderKind> provider_kind = ParseProviderKind(provider);
  if (!provider_kind.ok()) {
    return r.Bad("provider.kind", "openai, anthropic, openai-responses or script");
  }
  o.provider = *provider_kind;
  AL_RETURN_IF_ERROR(r.Str("provider.model", o.model));
  AL_RETURN_IF_ERROR(r.Str("provider.base_url", o.base_url));
  AL_RETURN_IF_ERROR(r.Str("provider.api_key_env", o.api_key_env));
  AL_RETURN_IF_ERROR(r.Str("provider.script", o.script_path));
  AL_RETURN_IF_ERROR(r.Bool("provider.use_max_tokens_field", o.use_max_tokens_field));
  AL_RETURN_IF_ERROR(r.OptInt("provider.context_window", o.context_window));
  AL_RETURN_IF_ERROR(r.OptInt("provider.max_output_tokens", o.max_output_tokens));
  if (r.At("provider.images") != nullptr) {
    bool images = false;
    AL_RETURN_IF_ERROR(r.Bool("provider.images", images));
    o.images = images;
  }
  std::string command = std::string(CommandKindName(o.command));
  AL_RETURN_IF_ERROR(r.Str("command", command));
  std::optional<CommandKind> kind = ParseCommandKind(command);
  if (!kind) return r.Bad("command", "a command name (code, explain, fix, plan, build)");
  o.command = *kind;
  AL_RETURN_IF_ERROR(r.OptInt("budget.max_tool_calls", o.max_tool_calls));
  AL_RETURN_IF_ERROR(r.OptInt("budget.max_tokens", o.max_tokens));
  AL_RETURN_IF_ERROR(r.OptInt("budget.max_turns", o.max_turns));
  std::optional<int64_t> wall_ms;
  AL_RETURN_IF_ERROR(r.OptInt("budget.max_wall_time_ms", wall_ms));
  if (wall_ms) o.max_wall_time = std::chrono::milliseconds(*wall_ms);
  AL_RETURN_IF_ERROR(r.RuleList("permissions.allow", o.allow));
  AL_RETURN_IF_ERROR(r.RuleList("permissions.ask", o.ask));
  AL_RETURN_IF_ERROR(r.RuleList("permissions.deny", o.deny));
  AL_RETURN_IF_ERROR(r.OptDecision("permissions.default_mutating", o.default_mutating));
  AL_RETURN_IF_ERROR(r.OptDecision("permissions.default_read_only", o.default_read_only));
  std::string mode(ApproverModeName(o.approver));
  AL_RETURN_IF_ERROR(r.Str("approver.mode", mode));
  std::optional<ApproverMode> m = ParseApproverMode(mode);
  if (!m) return r.Bad("approver.mode", "auto, console, durable, webhook or none");
  o.approver = *m;
  AL_RETURN_IF_ERROR(r.Str("approver.webhook_url", o.webhook_url));
  AL_RETURN_IF_ERROR(r.Str("approver.secret_env", o.webhook_secret_env));
  std::string sandbox(SandboxModeName(o.sandbox));
  AL_RETURN_IF_ERROR(r.Str("tools.sandbox", sandbox));
  // "workspace" and "none" never confined bash: they read as "off".
  if (sandbox == "workspace" || sandbox == "none") sandbox = "off";
  std::optional<SandboxMode> sandbox_mode = ParseSandboxMode(sandbox);
  if (!sandbox_mode) return r.Bad("tools.sandbox", "off, read-only or workspace-write");
  o.sandbox = *sandbox_mode;
  AL_RETURN_IF_ERROR(r.Bool("tools.network", o.sandbox_network));
  std::string fallback = o.sandbox_fallback == SandboxFallback::kWarn ? "warn" : "refuse";
  AL_RETURN_IF_ERROR(r.Str("tools.sandbox_fallback", fallback));
  if (fallback != "warn" && fallback != "refuse") {
    return r.Bad("tools.sandbox_fallback", "refuse or warn");
  }
  o.sandbox_fallback = fallback == "warn" ? SandboxFallback::kWarn : SandboxFallback::kRefuse;
  AL_RETURN_IF_ERROR(r.Strings("tools.env_remove", o.env_remove));
  AL_RETURN_IF_ERROR(r.Strings("tools.env_pass", o.env_pass));
  AL_RETURN_IF_ERROR(r.StringMap("tools.env_set", o.env_set));
  AL_RETURN_IF_ERROR(r.Int("tools.bash_timeout_ms", o.bash_timeout_ms));
  AL_RETURN_IF_ERROR(r.Bool("todo_loop.enabled", o.todo_loop));
  AL_RETURN_IF_ERROR(r.Int("todo_loop.max_rounds", o.todo_max_rounds));
  AL_RETURN_IF_ERROR(r.Int("todo_loop.max_strikes", o.todo_max_strikes));
  AL_RETURN_IF_ERROR(r.Bool("todo_loop.inject_state", o.todo_inject_state));
  AL_RETURN_IF_ERROR(r.Int("todo_loop.max_injected_tasks", o.todo_max_injected_tasks));
  AL_RETURN_IF_ERROR(r.Bool("reflector.enabled", o.reflector));
  if (r.At("subagent.path") != nullptr) {
    auto& sa = o.subagents;
    AL_RETURN_IF_ERROR(r.Str("subagent.parent_id", sa.parent_id));
    AL_RETURN_IF_ERROR(r.Str("subagent.path", sa.path));
    AL_RETURN_IF_ERROR(r.Int("subagent.depth", sa.depth));
    AL_RETURN_IF_ERROR(r.Str("subagent.home_agent", sa.home_agent));
    AL_RETURN_IF_ERROR(r.Str("subagent.parent_turn_id", sa.parent_turn_id));
    AL_RETURN_IF_ERROR(r.Str("subagent.tool_use_id", sa.tool_use_id));
    if (const Json* tools = r.At("subagent.tools"); tools != nullptr && !tools->is_null()) {
      std::vector<std::string> list;
      AL_RETURN_IF_ERROR(r.Strings("subagent.tools", list));
      sa.tools = std::move(list);
    }
  }
  if (const Json* text = r.At("system_prompt.text")) {
    if (!text->is_string()) return r.Bad("system_prompt.text", "a string or null");
    o.system_prompt = text->get<std::string>();
    AL_RETURN_IF_ERROR(r.Str("system_prompt.source", o.system_prompt_source));
  }
  return o;
}

Result<PinnedExtensions> PinnedExtensionsFromJson(const Json& j) {
  PinnedExtensions x;
  if (!j.is_object()) return InvalidArgument("pinned settings must be a JSON object");
  Reader r(j);
  AL_RETURN_IF_ERROR(r.Strings("extensions.tools", x.tools));
  AL_RETURN_IF_ERROR(r.Strings("extensions.hooks", x.hooks));
  AL_RETURN_IF_ERROR(r.Bool("extensions.provider_factory", x.provider_factory));
  return x;
}

}  // namespace agentloop
