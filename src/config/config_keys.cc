#include "config/config_keys.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include "base/strings.h"

namespace agentloop::config {
namespace {

constexpr CommandKind kCommands[] = {CommandKind::kCode, CommandKind::kExplain, CommandKind::kFix,
                                     CommandKind::kPlan, CommandKind::kBuild};

template <typename T>
using Accessor = std::function<Sourced<T>&(Config&)>;

Config& Mut(const Config& c) { return const_cast<Config&>(c); }  // read-only use in getters

KeySpec IntKey(std::string name, int64_t min, int64_t max, Accessor<int64_t> acc) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = ValueKind::kInt;
  k.min = min;
  k.max = max;
  k.set = [acc](Config& c, const Json& v, const ConfigOrigin& o) {
    acc(c) = {v.get<int64_t>(), o};
  };
  k.get = [acc](const Config& c) { return Json(acc(Mut(c)).value); };
  k.origins = [acc](const Config& c) { return std::vector<ConfigOrigin>{acc(Mut(c)).origin}; };
  return k;
}

KeySpec BoolKey(std::string name, Accessor<bool> acc) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = ValueKind::kBool;
  k.set = [acc](Config& c, const Json& v, const ConfigOrigin& o) { acc(c) = {v.get<bool>(), o}; };
  k.get = [acc](const Config& c) { return Json(acc(Mut(c)).value); };
  k.origins = [acc](const Config& c) { return std::vector<ConfigOrigin>{acc(Mut(c)).origin}; };
  return k;
}

// A string; with `choices` an enumeration kept as its string.
KeySpec StringKey(std::string name, Accessor<std::string> acc,
                  std::vector<std::string> choices = {}) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = choices.empty() ? ValueKind::kString : ValueKind::kEnum;
  k.choices = std::move(choices);
  k.set = [acc](Config& c, const Json& v, const ConfigOrigin& o) {
    acc(c) = {v.get<std::string>(), o};
  };
  k.get = [acc](const Config& c) { return Json(acc(Mut(c)).value); };
  k.origins = [acc](const Config& c) { return std::vector<ConfigOrigin>{acc(Mut(c)).origin}; };
  return k;
}

// An enumeration mapped to a C++ value.
template <typename E>
KeySpec EnumKey(std::string name, std::vector<std::pair<std::string, E>> map, Accessor<E> acc) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = ValueKind::kEnum;
  for (const auto& [s, e] : map) k.choices.push_back(s);
  k.set = [acc, map](Config& c, const Json& v, const ConfigOrigin& o) {
    const std::string s = v.get<std::string>();
    for (const auto& [choice, e] : map) {
      if (choice == s) acc(c) = {e, o};
    }
  };
  k.get = [acc, map](const Config& c) {
    const E value = acc(Mut(c)).value;
    for (const auto& [choice, e] : map) {
      if (e == value) return Json(choice);
    }
    return Json(nullptr);
  };
  k.origins = [acc](const Config& c) { return std::vector<ConfigOrigin>{acc(Mut(c)).origin}; };
  return k;
}

using ListAccessor = std::function<std::vector<Sourced<std::string>>&(Config&)>;

KeySpec ListKey(std::string name, ListAccessor acc) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = ValueKind::kList;
  k.set = [acc](Config& c, const Json& v, const ConfigOrigin& o) {
    for (const auto& e : v) acc(c).push_back({e.get<std::string>(), o});
  };
  k.get = [acc](const Config& c) {
    Json a = Json::array();
    for (const auto& e : acc(Mut(c))) a.push_back(e.value);
    return a;
  };
  k.origins = [acc](const Config& c) {
    std::vector<ConfigOrigin> out;
    for (const auto& e : acc(Mut(c))) out.push_back(e.origin);
    return out;
  };
  return k;
}

using MapAccessor = std::function<std::map<std::string, Sourced<std::string>>&(Config&)>;

// A table of strings; each layer adds names or replaces their values.
KeySpec MapKey(std::string name, MapAccessor acc) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = ValueKind::kMap;
  k.set = [acc](Config& c, const Json& v, const ConfigOrigin& o) {
    for (const auto& [var, value] : v.items()) acc(c)[var] = {value.get<std::string>(), o};
  };
  k.get = [acc](const Config& c) {
    Json m = Json::object();
    for (const auto& [var, value] : acc(Mut(c))) m[var] = value.value;
    return m;
  };
  k.origins = [acc](const Config& c) {
    std::vector<ConfigOrigin> out;
    for (const auto& entry : acc(Mut(c))) out.push_back(entry.second.origin);
    return out;
  };
  return k;
}

bool IsEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

using BudgetField = Sourced<int64_t> CommandBudgetConfig::*;

struct BudgetKey {
  const char* field;
  BudgetField member;
  int64_t min;
  int64_t max;
};
// Caps: a hostile or mistyped config cannot lift a budget beyond these.
constexpr BudgetKey kBudgetKeys[] = {
    {"max_tool_calls", &CommandBudgetConfig::max_tool_calls, 1, 1000},
    {"max_tokens", &CommandBudgetConfig::max_tokens, 1000, 10'000'000},
    {"max_turns", &CommandBudgetConfig::max_turns, 1, 1000},
    {"max_wall_time_ms", &CommandBudgetConfig::max_wall_time_ms, 0, 86'400'000},
};

// The allow-list of an untrusted workspace file. Keys not named here keep
// kIgnored, so a new key is refused from a repository until it is added.
void SetWorkspacePolicies(std::vector<KeySpec>& keys) {
  for (KeySpec& k : keys) {
    const std::string& n = k.name;
    if (n == "provider.model" || StartsWith(n, "todo_loop.") || n == "reflector.enabled") {
      k.from_workspace = WorkspacePolicy::kAllowed;
    } else if (StartsWith(n, "budget.") || n == "tools.bash_timeout_ms" ||
               (StartsWith(n, "subagents.max_"))) {
      k.from_workspace = WorkspacePolicy::kNarrowOnly;
    } else if (n == "skills.dirs" || n == "memory.dirs") {
      k.from_workspace = WorkspacePolicy::kInsideWorkspace;
    } else if (n == "permissions.ask" || n == "permissions.deny") {
      k.from_workspace = WorkspacePolicy::kNarrowingRules;
    }
  }
}

std::vector<KeySpec> BuildKeys() {
  std::vector<KeySpec> keys;
  auto P = [](auto member) {
    return [member](Config & c) -> auto& { return c.provider.*member; };
  };
  keys.push_back(StringKey("provider.kind", P(&Config::Provider::kind),
                           {"openai", "anthropic", "openai-responses", "script"}));
  keys.push_back(StringKey("provider.model", P(&Config::Provider::model)));
  keys.push_back(StringKey("provider.base_url", P(&Config::Provider::base_url)));
  keys.push_back(StringKey("provider.api_key_env", P(&Config::Provider::api_key_env)));
  keys.push_back(StringKey("provider.max_tokens_field", P(&Config::Provider::max_tokens_field),
                           {"max_tokens", "max_completion_tokens"}));
  keys.push_back(StringKey("provider.script", P(&Config::Provider::script)));
  keys.push_back(
      StringKey("provider.images", P(&Config::Provider::images), {"auto", "send", "describe"}));
  keys.push_back(
      IntKey("provider.context_window", 0, 100'000'000, P(&Config::Provider::context_window)));
  keys.push_back(
      IntKey("provider.max_output_tokens", 0, 10'000'000, P(&Config::Provider::max_output_tokens)));

  std::vector<std::pair<std::string, CommandKind>> commands;
  for (CommandKind kind : kCommands)
    commands.emplace_back(std::string(CommandKindName(kind)), kind);
  keys.push_back(EnumKey<CommandKind>(
      "command", commands, [](Config & c) -> auto& { return c.command; }));
  keys.push_back(EnumKey<OutputFormat>(
      "output",
      {{"text", OutputFormat::kText},
       {"json", OutputFormat::kJson},
       {"stream-json", OutputFormat::kStreamJson}},
      [](Config & c) -> auto& { return c.output; }));
  keys.push_back(StringKey(
      "system_prompt_file", [](Config & c) -> auto& { return c.system_prompt_file; }));

  for (const BudgetKey& b : kBudgetKeys) {
    // The all-commands form first: within one layer the specific keys win.
    KeySpec all = IntKey(
        std::string("budget.") + b.field, b.min,
        b.max, [m = b.member](Config & c) -> auto& { return c.budget[0].*m; });
    all.all_commands = true;
    all.set = [m = b.member](Config& c, const Json& v, const ConfigOrigin& o) {
      for (auto& cb : c.budget) cb.*m = {v.get<int64_t>(), o};
    };
    keys.push_back(std::move(all));
  }
  for (CommandKind kind : kCommands) {
    for (const BudgetKey& b : kBudgetKeys) {
      const size_t i = static_cast<size_t>(kind);
      keys.push_back(IntKey(
          "budget." + std::string(CommandKindName(kind)) + "." + b.field, b.min, b.max,
          [ i, m = b.member ](Config & c) -> auto& { return c.budget[i].*m; }));
    }
  }

  keys.push_back(ListKey(
      "permissions.allow", [](Config & c) -> auto& { return c.permissions.allow; }));
  keys.push_back(ListKey(
      "permissions.ask", [](Config & c) -> auto& { return c.permissions.ask; }));
  keys.push_back(ListKey(
      "permissions.deny", [](Config & c) -> auto& { return c.permissions.deny; }));
  keys.push_back(EnumKey<std::optional<Decision>>(
      "permissions.default",
      {{"auto", std::nullopt},
       {"allow", Decision::kAllow},
       {"ask", Decision::kAsk},
       {"deny", Decision::kDeny}},
      [](Config & c) -> auto& { return c.permissions.default_decision; }));

  keys.push_back(EnumKey<ApproverKind>(
      "approver.kind",
      {{"auto", ApproverKind::kAuto},
       {"console", ApproverKind::kConsole},
       {"durable", ApproverKind::kDurable},
       {"webhook", ApproverKind::kWebhook}},
      [](Config & c) -> auto& { return c.approver.kind; }));
  keys.push_back(StringKey(
      "approver.webhook_url", [](Config & c) -> auto& { return c.approver.webhook_url; }));
  keys.push_back(StringKey(
      "approver.secret_env", [](Config & c) -> auto& { return c.approver.secret_env; }));

  KeySpec sandbox = StringKey("tools.sandbox", [](Config & c) -> auto& { return c.tools.sandbox; },
                              {"off", "read-only", "workspace-write"});
  // Both meant nothing for bash (the file tools are always confined to the
  // workspace): "off" keeps what they did.
  for (const char* old : {"workspace", "none"}) {
    sandbox.deprecated.push_back(
        {old, "off",
         "the file tools are always confined to the workspace; this setting is now the bash "
         "sandbox"});
  }
  keys.push_back(std::move(sandbox));
  KeySpec network = BoolKey(
      "tools.network", [](Config & c) -> auto& { return c.tools.network; });
  keys.push_back(std::move(network));
  keys.push_back(StringKey("tools.sandbox_fallback",
                           [](Config & c) -> auto& { return c.tools.sandbox_fallback; },
                           {"refuse", "warn"}));
  keys.push_back(IntKey(
      "tools.bash_timeout_ms", 1000, 3'600'000,
      [](Config & c) -> auto& { return c.tools.bash_timeout_ms; }));
  KeySpec pass = ListKey(
      "tools.env.pass", [](Config & c) -> auto& { return c.tools.env.pass; });
  pass.env_names = true;
  keys.push_back(std::move(pass));
  KeySpec set = MapKey(
      "tools.env.set", [](Config & c) -> auto& { return c.tools.env.set; });
  set.env_names = true;
  keys.push_back(std::move(set));

  keys.push_back(BoolKey(
      "todo_loop.enabled", [](Config & c) -> auto& { return c.todo_loop.enabled; }));
  keys.push_back(IntKey(
      "todo_loop.max_rounds", 1, 1000, [](Config & c) -> auto& { return c.todo_loop.max_rounds; }));
  keys.push_back(IntKey(
      "todo_loop.max_strikes", 1, 100,
      [](Config & c) -> auto& { return c.todo_loop.max_strikes; }));
  keys.push_back(BoolKey(
      "todo_loop.inject_state", [](Config & c) -> auto& { return c.todo_loop.inject_state; }));
  keys.push_back(IntKey(
      "todo_loop.max_injected_tasks", 0, 50,
      [](Config & c) -> auto& { return c.todo_loop.max_injected_tasks; }));
  keys.push_back(BoolKey(
      "reflector.enabled", [](Config & c) -> auto& { return c.reflector.enabled; }));
  keys.push_back(BoolKey(
      "subagents.enabled", [](Config & c) -> auto& { return c.subagents.enabled; }));
  keys.push_back(IntKey(
      "subagents.max_depth", 0, 5, [](Config & c) -> auto& { return c.subagents.max_depth; }));
  keys.push_back(IntKey(
      "subagents.max_concurrent", 1, 16,
      [](Config & c) -> auto& { return c.subagents.max_concurrent; }));
  keys.push_back(IntKey(
      "subagents.max_spawns", 0, 200, [](Config & c) -> auto& { return c.subagents.max_spawns; }));
  // Weakens durability only (no secret, no code): still the user's choice,
  // not a repository's; the store is shared by every workspace.
  KeySpec sync =
      StringKey("store.sync", [](Config & c) -> auto& { return c.store.sync; }, {"full", "normal"});
  sync.fallback = "full";
  keys.push_back(std::move(sync));
  // Where every session goes: never from a repository (kIgnored).
  keys.push_back(StringKey(
      "store.url", [](Config & c) -> auto& { return c.store.url; }));
  keys.push_back(IntKey(
      "store.lease_ttl_ms", 1000, 600'000,
      [](Config & c) -> auto& { return c.store.lease_ttl_ms; }));
  keys.push_back(IntKey(
      "store.pool_timeout_ms", 0, 600'000,
      [](Config & c) -> auto& { return c.store.pool_timeout_ms; }));
  keys.push_back(IntKey(
      "compaction.summary_timeout_ms", 100, 600'000,
      [](Config & c) -> auto& { return c.compaction.summary_timeout_ms; }));
  keys.push_back(StringKey(
      "server.listen", [](Config & c) -> auto& { return c.server.listen; }));
  KeySpec tokens = ListKey(
      "server.tokens", [](Config & c) -> auto& { return c.server.tokens; });
  tokens.grants = true;
  keys.push_back(std::move(tokens));
  keys.push_back(ListKey(
      "server.allowed_origins", [](Config & c) -> auto& { return c.server.allowed_origins; }));
  keys.push_back(StringKey(
      "server.public_url", [](Config & c) -> auto& { return c.server.public_url; }));
  keys.push_back(IntKey(
      "server.link_ttl_s", 60, 30 * 24 * 3600,
      [](Config & c) -> auto& { return c.server.link_ttl_s; }));
  keys.push_back(IntKey(
      "server.notify_retry_s", 1, 24 * 3600,
      [](Config & c) -> auto& { return c.server.notify_retry_s; }));
  keys.push_back(IntKey(
      "server.worker_threads", 1, 256,
      [](Config & c) -> auto& { return c.server.worker_threads; }));
  keys.push_back(IntKey(
      "server.max_queued_inputs", 1, 10'000,
      [](Config & c) -> auto& { return c.server.max_queued_inputs; }));
  keys.push_back(ListKey(
      "skills.dirs", [](Config & c) -> auto& { return c.skills_dirs; }));
  keys.push_back(ListKey(
      "memory.dirs", [](Config & c) -> auto& { return c.memory_dirs; }));
  SetWorkspacePolicies(keys);
  return keys;
}

std::optional<bool> ParseBool(std::string_view s) {
  std::string l = ToLower(Trim(s));
  if (l == "true" || l == "1" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "0" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::string Show(const Json& v) {
  return v.is_string() ? "'" + v.get<std::string>() + "'" : DumpJson(v);
}

}  // namespace

std::string WorkspaceRefusal(const KeySpec& key) {
  const std::string& n = key.name;
  if (n == "permissions.allow") return "allow rules widen what the agent may do without a person";
  if (n == "permissions.default") return "the default decision can widen what the agent may do";
  if (StartsWith(n, "provider.")) {
    return "it chooses which model server is contacted, with which key, or replaces the model";
  }
  if (n == "system_prompt_file") return "it replaces the system prompt with a file of its choice";
  if (StartsWith(n, "approver.")) return "it chooses who approves the agent's actions";
  if (StartsWith(n, "tools.")) return "it changes the sandbox or what the tools may reach";
  if (StartsWith(n, "store.")) return "the session store is the user's, shared by every workspace";
  if (StartsWith(n, "server.")) return "who may reach the server and how is the operator's";
  if (n == "command" || n == "output") return "the command and the output format are the user's";
  return "it is not one of the keys a repository may set";
}

const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec> keys = BuildKeys();
  return keys;
}

const KeySpec* FindKey(std::string_view name) {
  for (const KeySpec& k : Keys()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

bool IsTable(std::string_view name) {
  for (const KeySpec& k : Keys()) {
    if (k.name.size() > name.size() && StartsWith(k.name, name) && k.name[name.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::string EnvName(std::string_view key) {
  std::string out = "AGENTLOOP_";
  for (char c : key) {
    out += (c == '.' || c == '-') ? '_'
                                  : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

const KeySpec* FindEnvKey(std::string_view var) {
  if (var == "AGENTLOOP_PROVIDER") return FindKey("provider.kind");
  if (var == "AGENTLOOP_MODEL") return FindKey("provider.model");
  if (var == "AGENTLOOP_BASE_URL") return FindKey("provider.base_url");
  for (const KeySpec& k : Keys()) {
    if (EnvName(k.name) == var) return &k;
  }
  return nullptr;
}

std::string Suggest(std::string_view name) {
  std::set<std::string> tables;
  std::vector<std::string_view> candidates;
  for (const KeySpec& k : Keys()) {
    candidates.emplace_back(k.name);
    for (size_t dot = k.name.find('.'); dot != std::string::npos; dot = k.name.find('.', dot + 1)) {
      tables.insert(k.name.substr(0, dot));
    }
  }
  for (const auto& t : tables) candidates.emplace_back(t);
  candidates.emplace_back("hooks");
  candidates.emplace_back("mcp_servers");
  return ClosestMatch(name, candidates);
}

const std::vector<std::string>& HookEvents() {
  static const std::vector<std::string> events = {"turn_start",       "before_model_call",
                                                  "before_tool_call", "after_tool_result",
                                                  "after_step",       "turn_end"};
  return events;
}

Result<Json> Coerce(const KeySpec& key, const Json& raw, bool from_text,
                    std::vector<std::string>* notes) {
  const std::string text = raw.is_string() ? raw.get<std::string>() : std::string();
  switch (key.kind) {
    case ValueKind::kInt: {
      double v = 0;
      if (raw.is_number_integer() || raw.is_number_unsigned()) {
        v = raw.get<double>();
      } else if (raw.is_number_float()) {
        v = raw.get<double>();
      } else if (from_text && raw.is_string()) {
        std::string_view t = Trim(text);
        int64_t i = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
        if (ec == std::errc() && p == t.data() + t.size() && !t.empty()) {
          v = static_cast<double>(i);
        } else {
          std::string s(t);
          char* end = nullptr;
          v = std::strtod(s.c_str(), &end);
          if (s.empty() || end != s.c_str() + s.size()) {
            return InvalidArgument("expects an integer, got " + Show(raw));
          }
        }
      } else {
        return InvalidArgument("expects an integer, got " + Show(raw));
      }
      if (!std::isfinite(v)) return InvalidArgument("expects a finite number, got " + Show(raw));
      v = std::floor(v);
      int64_t out = 0;
      if (v > static_cast<double>(key.max)) {
        out = key.max;
        notes->push_back("value " + Show(raw) + " is above the cap " + std::to_string(key.max) +
                         "; using " + std::to_string(key.max));
      } else if (v < static_cast<double>(key.min)) {
        out = key.min;
        notes->push_back("value " + Show(raw) + " is below the minimum " + std::to_string(key.min) +
                         "; using " + std::to_string(key.min));
      } else {
        out = static_cast<int64_t>(v);
      }
      return Json(out);
    }
    case ValueKind::kBool: {
      if (raw.is_boolean()) return raw;
      if (from_text && raw.is_string()) {
        if (auto b = ParseBool(text)) return Json(*b);
      }
      return InvalidArgument("expects true or false, got " + Show(raw));
    }
    case ValueKind::kString:
      if (!raw.is_string()) return InvalidArgument("expects a string, got " + Show(raw));
      return raw;
    case ValueKind::kEnum: {
      if (raw.is_string() &&
          std::find(key.choices.begin(), key.choices.end(), text) != key.choices.end()) {
        return raw;
      }
      for (const KeySpec::DeprecatedValue& d : key.deprecated) {
        if (raw.is_string() && text == d.value) {
          notes->push_back("'" + d.value + "' is deprecated (" + d.why + "); using '" +
                           d.replacement + "'");
          return Json(d.replacement);
        }
      }
      std::string list;
      for (const auto& c : key.choices) list += (list.empty() ? "" : ", ") + c;
      if (!key.fallback.empty()) {
        notes->push_back("must be one of " + list + "; got " + Show(raw) + "; using '" +
                         key.fallback + "'");
        return Json(key.fallback);
      }
      return InvalidArgument("must be one of " + list + "; got " + Show(raw));
    }
    case ValueKind::kList: {
      Json items = Json::array();
      if (raw.is_array()) {
        items = raw;
      } else if (raw.is_string() && from_text) {
        std::string_view t = Trim(text);
        if (!t.empty() && t.front() == '[') {
          auto parsed = ParseJson(t);
          if (!parsed.ok() || !parsed->is_array()) {
            return InvalidArgument("expects a JSON array of strings or a comma-separated list");
          }
          items = *parsed;
        } else {
          for (std::string_view part : Split(t, ',')) {
            part = Trim(part);
            if (part.empty()) continue;
            // "h1:acme:read,write,h2:beta:read": `write` is a scope of
            // the grant before it.
            if (key.grants && part.find(':') == std::string_view::npos && !items.empty()) {
              items.back() = items.back().get<std::string>() + "," + std::string(part);
              continue;
            }
            items.push_back(std::string(part));
          }
        }
      } else if (raw.is_string()) {
        items.push_back(raw);
      } else {
        return InvalidArgument("expects a list of strings, got " + Show(raw));
      }
      for (const auto& e : items) {
        if (!e.is_string()) return InvalidArgument("expects a list of strings, got " + Show(e));
        if (key.env_names && !IsEnvName(e.get<std::string>())) {
          return InvalidArgument("expects environment variable names, got " + Show(e));
        }
      }
      return items;
    }
    case ValueKind::kMap: {
      Json table = Json::object();
      if (raw.is_object()) {
        table = raw;
      } else if (raw.is_string() && from_text) {
        std::string_view t = Trim(text);
        if (!t.empty() && t.front() == '{') {
          auto parsed = ParseJson(t);
          if (!parsed.ok() || !parsed->is_object()) {
            return InvalidArgument("expects a JSON object of strings or NAME=value,NAME=value");
          }
          table = *parsed;
        } else {
          for (std::string_view part : Split(t, ',')) {
            if (Trim(part).empty()) continue;
            size_t eq = part.find('=');
            if (eq == std::string_view::npos) {
              return InvalidArgument("expects NAME=value entries, got '" + std::string(Trim(part)) +
                                     "'");
            }
            table[std::string(Trim(part.substr(0, eq)))] = std::string(part.substr(eq + 1));
          }
        }
      } else {
        return InvalidArgument("expects a table of strings (NAME = \"value\"), got " + Show(raw));
      }
      for (const auto& [name, value] : table.items()) {
        if (!value.is_string()) {
          return InvalidArgument("expects string values, got " + Show(value) + " for '" + name +
                                 "'");
        }
        if (key.env_names && !IsEnvName(name)) {
          return InvalidArgument("expects environment variable names, got '" + name + "'");
        }
        if (value.get<std::string>().find('\0') != std::string::npos) {
          return InvalidArgument("a value may not contain a NUL character ('" + name + "')");
        }
      }
      return table;
    }
  }
  return Internal("unknown value kind");
}

}  // namespace agentloop::config
