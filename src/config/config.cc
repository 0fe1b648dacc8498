// LoadConfig: defaults, then each layer turned into a list of assignments
// (key, raw value, origin) and applied in order. Module note:
//
//   user file ─┐
//   ws file   ─┼─▶ assignments ─▶ Coerce (type, enum, clamp) ─▶ KeySpec::set
//   env       ─┤
//   flags     ─┘
#include "config/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "base/env_map.h"
#include "base/strings.h"
#include "config/config_keys.h"
#include "config/trust.h"

extern char** environ;

namespace agentloop {
namespace {

using config::KeySpec;
using config::ValueKind;

struct Assignment {
  const KeySpec* key;
  Json raw;
  bool from_text;  // env and flag strings are parsed ("42", "true", "a,b")
  ConfigOrigin origin;
};

struct Layer {
  std::vector<Assignment> assignments;
  std::vector<HookConfig> hooks;
  std::vector<McpServerSpec> mcp_servers;
  // [[notify]] tables as read, checked when the layer is applied (never for
  // a workspace file, whose entries are ignored unread).
  std::vector<std::pair<Json, ConfigOrigin>> notify;
};

ConfigOrigin FileOrigin(const std::filesystem::path& path, const toml::node& node) {
  return {ConfigOrigin::Kind::kFile, path.string(), static_cast<int>(node.source().begin.line)};
}

Json TomlToJson(const toml::node& node) {
  if (auto v = node.as_integer()) return Json(v->get());
  if (auto v = node.as_floating_point()) return Json(v->get());
  if (auto v = node.as_boolean()) return Json(v->get());
  if (auto v = node.as_string()) return Json(v->get());
  if (auto a = node.as_array()) {
    Json out = Json::array();
    for (const auto& e : *a) out.push_back(TomlToJson(e));
    return out;
  }
  if (auto t = node.as_table()) {
    Json out = Json::object();
    for (const auto& [k, v] : *t) out[std::string(k.str())] = TomlToJson(v);
    return out;
  }
  std::ostringstream os;  // dates and times: their TOML text
  if (auto v = node.as_date()) os << v->get();
  if (auto v = node.as_time()) os << v->get();
  if (auto v = node.as_date_time()) os << v->get();
  return Json(os.str());
}

std::string UnknownKey(const std::string& where, const std::string& name) {
  std::string msg = where + ": unknown key '" + name + "'";
  std::string hint = config::Suggest(name);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  return msg;
}

// `strict`: an unknown key of an entry is an error (an agent's file), not a
// warning.
Status ReadHooks(const toml::node& node, const std::filesystem::path& path, Layer& layer,
                 std::vector<std::string>& warnings, bool strict) {
  const std::string where = path.string() + ":" + std::to_string(node.source().begin.line);
  const toml::array* arr = node.as_array();
  if (arr == nullptr)
    return InvalidArgument(where + ": hooks must be an array of tables ([[hooks]])");
  for (const toml::node& entry : *arr) {
    const std::string at = path.string() + ":" + std::to_string(entry.source().begin.line);
    const toml::table* t = entry.as_table();
    if (t == nullptr) return InvalidArgument(at + ": each hooks entry must be a table");
    HookConfig h;
    h.origin = FileOrigin(path, entry);
    for (const auto& [k, v] : *t) {
      const std::string key(k.str());
      const std::string kat = path.string() + ":" + std::to_string(v.source().begin.line);
      Json j = TomlToJson(v);
      if (key == "name" || key == "event" || key == "command") {
        if (!j.is_string()) return InvalidArgument(kat + ": hooks." + key + " expects a string");
        (key == "name" ? h.name : key == "event" ? h.event : h.command) = j.get<std::string>();
      } else if (key == "timeout_ms") {
        KeySpec spec;
        spec.name = "hooks.timeout_ms";
        spec.kind = ValueKind::kInt;
        spec.min = 100;
        spec.max = 600'000;
        std::vector<std::string> notes;
        auto c = config::Coerce(spec, j, false, &notes);
        if (!c.ok()) return InvalidArgument(kat + ": hooks.timeout_ms " + c.error().message());
        for (const auto& n : notes) warnings.push_back(kat + ": hooks.timeout_ms: " + n);
        h.timeout_ms = c->get<int64_t>();
      } else if (key == "tools") {
        KeySpec spec;
        spec.name = "hooks.tools";
        spec.kind = ValueKind::kList;
        std::vector<std::string> notes;
        auto c = config::Coerce(spec, j, false, &notes);
        if (!c.ok()) return InvalidArgument(kat + ": hooks.tools " + c.error().message());
        for (const auto& e : *c) h.tools.push_back(e.get<std::string>());
      } else if (strict) {
        return InvalidArgument(kat + ": unknown key 'hooks." + key + "'");
      } else {
        warnings.push_back(kat + ": unknown key 'hooks." + key + "'");
      }
    }
    if (h.command.empty()) return InvalidArgument(at + ": hooks entry without a command");
    const auto& events = config::HookEvents();
    if (std::find(events.begin(), events.end(), h.event) == events.end()) {
      std::string list;
      for (const auto& e : events) list += (list.empty() ? "" : ", ") + e;
      return InvalidArgument(at + ": hooks.event must be one of " + list + "; got '" + h.event +
                             "'");
    }
    layer.hooks.push_back(std::move(h));
  }
  return Status::Ok();
}

// [mcp_servers.NAME] tables. `strict`: an unknown key is an error.
Status ReadMcpServers(const toml::node& node, const std::filesystem::path& path, Layer& layer,
                      std::vector<std::string>& warnings, bool strict) {
  const std::string where = path.string() + ":" + std::to_string(node.source().begin.line);
  const toml::table* servers = node.as_table();
  if (servers == nullptr) {
    return InvalidArgument(where + ": mcp_servers must be a table of tables ([mcp_servers.NAME])");
  }
  // toml++ iterates keys sorted by name; keep the file's order.
  std::vector<std::pair<std::string_view, const toml::node*>> entries;
  for (const auto& [k, n] : *servers) entries.emplace_back(k.str(), &n);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  for (const auto& [k, entry_ptr] : entries) {
    const toml::node& entry = *entry_ptr;
    const std::string name(k);
    const std::string at = path.string() + ":" + std::to_string(entry.source().begin.line);
    const std::string prefix = "mcp_servers." + name;
    const toml::table* t = entry.as_table();
    if (t == nullptr) return InvalidArgument(at + ": " + prefix + " must be a table");
    if (name.empty()) return InvalidArgument(at + ": an MCP server needs a name");
    McpServerSpec s;
    s.name = name;
    s.source = at;
    for (const auto& [kk, v] : *t) {
      const std::string key(kk.str());
      const std::string kat = path.string() + ":" + std::to_string(v.source().begin.line);
      const std::string full = prefix + "." + key;
      Json j = TomlToJson(v);
      auto str = [&](std::string& field) -> Status {
        if (!j.is_string()) return InvalidArgument(kat + ": " + full + " expects a string");
        field = j.get<std::string>();
        return Status::Ok();
      };
      auto list = [&](std::vector<std::string>& field) -> Status {
        if (!j.is_array()) return InvalidArgument(kat + ": " + full + " expects a list of strings");
        for (const Json& e : j) {
          if (!e.is_string()) {
            return InvalidArgument(kat + ": " + full + " expects a list of strings");
          }
          field.push_back(e.get<std::string>());
        }
        return Status::Ok();
      };
      auto boolean = [&](bool& field) -> Status {
        if (!j.is_boolean()) return InvalidArgument(kat + ": " + full + " expects a boolean");
        field = j.get<bool>();
        return Status::Ok();
      };
      auto millis = [&](int64_t& field, int64_t max) -> Status {
        KeySpec spec;
        spec.name = full;
        spec.kind = ValueKind::kInt;
        spec.min = 1;
        spec.max = max;
        std::vector<std::string> notes;
        auto c = config::Coerce(spec, j, false, &notes);
        if (!c.ok()) return InvalidArgument(kat + ": " + full + " " + c.error().message());
        for (const auto& n : notes) warnings.push_back(kat + ": " + full + ": " + n);
        field = c->get<int64_t>();
        return Status::Ok();
      };
      if (key == "command") {
        AL_RETURN_IF_ERROR(str(s.command));
      } else if (key == "args") {
        AL_RETURN_IF_ERROR(list(s.args));
      } else if (key == "env") {
        if (!j.is_object())
          return InvalidArgument(kat + ": " + full + " expects a table of strings");
        for (const auto& [ek, ev] : j.items()) {
          if (!ev.is_string()) {
            return InvalidArgument(kat + ": " + full + "." + ek + " expects a string");
          }
          s.env[ek] = ev.get<std::string>();
        }
      } else if (key == "url") {
        AL_RETURN_IF_ERROR(str(s.url));
      } else if (key == "bearer_token_env_var") {
        AL_RETURN_IF_ERROR(str(s.bearer_token_env_var));
      } else if (key == "enabled") {
        AL_RETURN_IF_ERROR(boolean(s.enabled));
      } else if (key == "required") {
        AL_RETURN_IF_ERROR(boolean(s.required));
      } else if (key == "trusted") {
        AL_RETURN_IF_ERROR(boolean(s.trusted));
      } else if (key == "startup_timeout_ms") {
        AL_RETURN_IF_ERROR(millis(s.startup_timeout_ms, 600'000));
      } else if (key == "tool_timeout_ms") {
        AL_RETURN_IF_ERROR(millis(s.tool_timeout_ms, 600'000));
      } else if (key == "enabled_tools") {
        AL_RETURN_IF_ERROR(list(s.enabled_tools));
      } else if (key == "disabled_tools") {
        AL_RETURN_IF_ERROR(list(s.disabled_tools));
      } else if (strict) {
        return InvalidArgument(kat + ": unknown key '" + full + "'");
      } else {
        warnings.push_back(kat + ": unknown key '" + full + "'");
      }
    }
    if (s.command.empty() == s.url.empty()) {
      return InvalidArgument(at + ": " + prefix +
                             " needs exactly one of 'command' (stdio) and 'url' (HTTP)");
    }
    layer.mcp_servers.push_back(std::move(s));
  }
  return Status::Ok();
}

// Expands ${VAR} and ${VAR:-default} in a value of `.mcp.json` from `env`
// (the form other agents read). Errors name the variable that is unset and
// has no default.
Result<std::string> ExpandMcpJsonValue(const std::string& in, const EnvMap& env) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    size_t open = in.find("${", i);
    if (open == std::string::npos) break;
    size_t close = in.find('}', open + 2);
    if (close == std::string::npos) break;
    out.append(in, i, open - i);
    std::string body = in.substr(open + 2, close - open - 2);
    std::optional<std::string> fallback;
    if (size_t d = body.find(":-"); d != std::string::npos) {
      fallback = body.substr(d + 2);
      body = body.substr(0, d);
    }
    auto it = env.find(body);
    if (it != env.end() && !it->second.empty()) {
      out += it->second;
    } else if (fallback) {
      out += *fallback;
    } else {
      return InvalidArgument("${" + body + "} is not set and has no default (${" + body +
                             ":-default})");
    }
    i = close + 1;
  }
  out.append(in, i, std::string::npos);
  return out;
}

// The servers of a project's `.mcp.json` ({"mcpServers": {NAME: {command,
// args, env} | {type: "http", url, headers}}}). An entry agentloop cannot
// run as written is left out with a warning naming it, so one odd entry
// does not cost the others; a file that is not such an object is one
// warning.
std::vector<McpServerSpec> McpJsonServers(const std::string& text,
                                          const std::filesystem::path& path, const EnvMap& env,
                                          std::vector<std::string>& warnings) {
  std::vector<McpServerSpec> out;
  const std::string file = path.string();
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    warnings.push_back(file + ": not a JSON object; its MCP servers are not read");
    return out;
  }
  if (!j.contains("mcpServers")) return out;
  if (!j["mcpServers"].is_object()) {
    warnings.push_back(file + ": mcpServers is not an object; its MCP servers are not read");
    return out;
  }
  for (const auto& [name, e] : j["mcpServers"].items()) {
    const std::string where = file + ": mcpServers." + name;
    auto skip = [&](const std::string& why) { warnings.push_back(where + " is left out: " + why); };
    if (name.empty()) {
      skip("an MCP server needs a name");
      continue;
    }
    if (!e.is_object()) {
      skip("not an object");
      continue;
    }
    McpServerSpec s;
    s.name = name;
    s.source = where;
    std::string type =
        e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : std::string();
    std::string problem;
    auto expand = [&](const Json& v, const std::string& key) -> std::optional<std::string> {
      if (!v.is_string()) {
        problem = key + " is not a string";
        return std::nullopt;
      }
      Result<std::string> r = ExpandMcpJsonValue(v.get<std::string>(), env);
      if (!r.ok()) {
        problem = key + ": " + r.error().message();
        return std::nullopt;
      }
      return *r;
    };
    for (const auto& [key, v] : e.items()) {
      if (!problem.empty()) break;
      if (key == "type") {
        if (type != "stdio" && type != "http" && type != "streamable-http") {
          problem = "type '" + (v.is_string() ? v.get<std::string>() : v.dump()) +
                    "' is not supported (stdio or http; the older sse transport is not)";
        }
      } else if (key == "command") {
        if (auto x = expand(v, key)) s.command = *x;
      } else if (key == "args") {
        if (!v.is_array()) {
          problem = "args is not a list of strings";
          continue;
        }
        for (const Json& a : v) {
          auto x = expand(a, "args");
          if (!x) break;
          s.args.push_back(*x);
        }
      } else if (key == "env") {
        if (!v.is_object()) {
          problem = "env is not an object of strings";
          continue;
        }
        for (const auto& [k, ev] : v.items()) {
          auto x = expand(ev, "env." + k);
          if (!x) break;
          s.env[k] = *x;
        }
      } else if (key == "url") {
        if (auto x = expand(v, key)) s.url = *x;
      } else if (key == "headers") {
        // The token stays in the environment: only `Authorization: Bearer
        // ${VAR}` can be carried over (as bearer_token_env_var).
        if (!v.is_object()) {
          problem = "headers is not an object";
          continue;
        }
        for (const auto& [h, hv] : v.items()) {
          std::string value = hv.is_string() ? hv.get<std::string>() : std::string();
          std::string lower = h;
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (lower == "authorization" && value.rfind("Bearer ${", 0) == 0 && value.back() == '}' &&
              value.find(":-") == std::string::npos) {
            s.bearer_token_env_var = value.substr(9, value.size() - 10);
          } else {
            problem = "header '" + h +
                      "' cannot be sent (only \"Authorization\": \"Bearer ${VAR}\" is, as "
                      "bearer_token_env_var)";
            break;
          }
        }
      } else {
        warnings.push_back(where + ": unknown key '" + key + "' is ignored");
      }
    }
    if (problem.empty() && s.command.empty() == s.url.empty()) {
      problem = "it needs exactly one of 'command' (stdio) and 'url' (HTTP)";
    }
    if (!problem.empty()) {
      skip(problem);
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

// How a file is read: a user or workspace file warns about unknown keys; an
// agent's file (`agent` set) rejects them and has an [agent] table.
struct FileMode {
  AgentSection* agent = nullptr;
};

// The keys of the [agent] table.
constexpr std::string_view kAgentKeys[] = {"description", "workspace", "workspace_root",
                                           "create_workspace", "default"};

Status ReadAgentTable(const toml::node& node, const std::filesystem::path& path,
                      AgentSection& agent) {
  const std::string where = path.string() + ":" + std::to_string(node.source().begin.line);
  const toml::table* t = node.as_table();
  if (t == nullptr) return InvalidArgument(where + ": 'agent' must be a table");
  for (const auto& [k, v] : *t) {
    const std::string key(k.str());
    const std::string at = path.string() + ":" + std::to_string(v.source().begin.line);
    const ConfigOrigin origin = FileOrigin(path, v);
    if (key == "create_workspace") {
      const auto* b = v.as_boolean();
      if (b == nullptr) return InvalidArgument(at + ": agent.create_workspace expects a boolean");
      agent.create_workspace = {b->get(), origin};
      continue;
    }
    if (key == "default") {
      const auto* b = v.as_boolean();
      if (b == nullptr) return InvalidArgument(at + ": agent.default expects a boolean");
      agent.is_default = {b->get(), origin};
      continue;
    }
    Sourced<std::string>* field = key == "description"      ? &agent.description
                                  : key == "workspace"      ? &agent.workspace
                                  : key == "workspace_root" ? &agent.workspace_root
                                                            : nullptr;
    if (field == nullptr) {
      std::vector<std::string_view> names(std::begin(kAgentKeys), std::end(kAgentKeys));
      std::string msg = at + ": unknown key 'agent." + key + "'";
      if (std::string hint = ClosestMatch(key, names); !hint.empty()) {
        msg += " (did you mean 'agent." + hint + "'?)";
      }
      return InvalidArgument(msg);
    }
    const auto* str = v.as_string();
    if (str == nullptr) return InvalidArgument(at + ": agent." + key + " expects a string");
    *field = {str->get(), origin};
    if (key != "description" && !std::filesystem::path(field->value).is_absolute()) {
      return InvalidArgument(at + ": agent." + key + " must be an absolute path; got '" +
                             field->value + "'");
    }
  }
  if (!agent.workspace.value.empty() && !agent.workspace_root.value.empty()) {
    return InvalidArgument(agent.workspace_root.origin.ToString() +
                           ": agent.workspace and agent.workspace_root exclude each other "
                           "(one fixed directory, or a root for sessions' subdirectories)");
  }
  if (agent.create_workspace.value && agent.workspace_root.value.empty()) {
    return InvalidArgument(agent.create_workspace.origin.ToString() +
                           ": agent.create_workspace needs agent.workspace_root");
  }
  return Status::Ok();
}

Status WalkTable(const toml::table& table, const std::string& prefix,
                 const std::filesystem::path& path, Layer& layer,
                 std::vector<std::string>& warnings, const FileMode& mode) {
  // toml++ iterates keys sorted by name; report in file order instead.
  std::vector<std::pair<std::string_view, const toml::node*>> entries;
  for (const auto& [k, node] : table) entries.emplace_back(k.str(), &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  for (const auto& [k, node_ptr] : entries) {
    const toml::node& node = *node_ptr;
    const std::string name = prefix.empty() ? std::string(k) : prefix + "." + std::string(k);
    const std::string where = path.string() + ":" + std::to_string(node.source().begin.line);
    if (name == "hooks") {
      AL_RETURN_IF_ERROR(ReadHooks(node, path, layer, warnings, mode.agent != nullptr));
    } else if (name == "notify") {
      const toml::array* arr = node.as_array();
      if (arr == nullptr) {
        return InvalidArgument(where + ": notify must be an array of tables ([[notify]])");
      }
      for (const toml::node& entry : *arr)
        layer.notify.emplace_back(TomlToJson(entry), FileOrigin(path, entry));
    } else if (name == "mcp_servers") {
      AL_RETURN_IF_ERROR(ReadMcpServers(node, path, layer, warnings, mode.agent != nullptr));
    } else if (name == "agent" && mode.agent != nullptr) {
      AL_RETURN_IF_ERROR(ReadAgentTable(node, path, *mode.agent));
    } else if (const KeySpec* key = config::FindKey(name)) {
      layer.assignments.push_back({key, TomlToJson(node), false, FileOrigin(path, node)});
    } else if (config::IsTable(name)) {
      const toml::table* sub = node.as_table();
      if (sub == nullptr) return InvalidArgument(where + ": '" + name + "' must be a table");
      AL_RETURN_IF_ERROR(WalkTable(*sub, name, path, layer, warnings, mode));
    } else if (mode.agent != nullptr) {
      // A key of [agent] written at the top (`description = ...`), or close
      // to one, when no configuration key is closer.
      std::vector<std::string> agent_names = {"agent"};
      std::string hint;
      for (std::string_view field : kAgentKeys) {
        agent_names.push_back("agent." + std::string(field));
        if (name == field) hint = agent_names.back();
      }
      if (hint.empty() && config::Suggest(name).empty()) {
        std::vector<std::string_view> views(agent_names.begin(), agent_names.end());
        hint = ClosestMatch(name, views);
      }
      if (!hint.empty()) {
        return InvalidArgument(where + ": unknown key '" + name + "' (did you mean '" + hint +
                               "'?)");
      }
      return InvalidArgument(UnknownKey(where, name));
    } else {
      warnings.push_back(UnknownKey(where, name));
    }
  }
  return Status::Ok();
}

// The bytes of one file; nullopt when it does not exist.
Result<std::optional<std::string>> ReadFileText(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return FailedPrecondition("cannot read " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::optional<std::string>(buf.str());
}

// Parses one TOML file's text into a layer.
Result<Layer> ParseFileLayer(const std::string& text, const std::filesystem::path& path,
                             std::vector<std::string>& warnings, const FileMode& mode = {}) {
  toml::table table;
  try {
    table = toml::parse(text, path.string());
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return InvalidArgument(path.string() + ":" + std::to_string(b.line) + ":" +
                           std::to_string(b.column) +
                           ": invalid TOML: " + std::string(e.description()));
  } catch (const std::exception& e) {
    return InvalidArgument(path.string() + ": invalid TOML: " + e.what());
  }
  Layer layer;
  AL_RETURN_IF_ERROR(WalkTable(table, "", path, layer, warnings, mode));
  return layer;
}

Layer EnvLayer(const EnvMap& env, std::vector<std::string>& warnings) {
  // Variables that belong to agentloop but are not config keys.
  static const char* const kNotKeys[] = {"AGENTLOOP_HOME", "AGENTLOOP_CONFIG", "AGENTLOOP_LOG"};
  Layer layer;
  for (const auto& [name, value] : env) {
    if (!StartsWith(name, "AGENTLOOP_") || value.empty()) continue;
    if (std::find(std::begin(kNotKeys), std::end(kNotKeys), name) != std::end(kNotKeys)) continue;
    const KeySpec* key = config::FindEnvKey(name);
    if (key == nullptr) {
      warnings.push_back("environment: unknown variable " + name);
      continue;
    }
    layer.assignments.push_back({key, Json(value), true, {ConfigOrigin::Kind::kEnv, name, 0}});
  }
  return layer;
}

Result<Layer> FlagLayer(const std::vector<FlagOverride>& flags) {
  Layer layer;
  for (const FlagOverride& f : flags) {
    const KeySpec* key = config::FindKey(f.key);
    if (key == nullptr)
      return InvalidArgument("flag " + f.flag + ": unknown config key '" + f.key + "'");
    ConfigOrigin origin{ConfigOrigin::Kind::kFlag, f.flag.empty() ? f.key : f.flag, 0};
    if (key->kind == ValueKind::kList) {
      // One element per flag: `--allow 'bash(a,b)'` must not be split.
      layer.assignments.push_back({key, Json::array({f.value}), false, origin});
    } else {
      layer.assignments.push_back({key, Json(f.value), true, origin});
    }
  }
  return layer;
}

// How much of a layer is applied.
struct LayerContext {
  bool allow_list_only = false;  // an untrusted workspace file
  bool workspace_file = false;   // the workspace file, trusted or not
  std::filesystem::path workspace;
  std::vector<IgnoredSetting>* ignored = nullptr;
};

bool LowersOrKeeps(const KeySpec& key, int64_t current, int64_t value) {
  // A wall-time limit of 0 means none: the highest value there is.
  if (EndsWith(key.name, "max_wall_time_ms")) {
    if (current == 0) return true;
    if (value == 0) return false;
  }
  return value <= current;
}

// Applies an untrusted workspace assignment under its key's WorkspacePolicy.
void ApplyAllowListed(const Assignment& a, const Json& value, const LayerContext& ctx,
                      Config& config) {
  auto ignore = [&](std::string key, Json v, std::string reason) {
    ctx.ignored->push_back({std::move(key), std::move(v), a.origin, std::move(reason)});
  };
  switch (a.key->from_workspace) {
    case config::WorkspacePolicy::kIgnored:
      ignore(a.key->name, a.raw, config::WorkspaceRefusal(*a.key));
      return;
    case config::WorkspacePolicy::kAllowed:
    case config::WorkspacePolicy::kNarrowingRules:
      a.key->set(config, value, a.origin);
      return;
    case config::WorkspacePolicy::kNarrowOnly: {
      const int64_t v = value.get<int64_t>();
      std::vector<const KeySpec*> targets;
      if (a.key->all_commands) {
        // budget.FIELD stands for every budget.COMMAND.FIELD.
        const std::string field = a.key->name.substr(a.key->name.rfind('.'));
        for (const KeySpec& k : config::Keys()) {
          if (!k.all_commands && StartsWith(k.name, "budget.") && EndsWith(k.name, field)) {
            targets.push_back(&k);
          }
        }
      } else {
        targets.push_back(a.key);
      }
      for (const KeySpec* k : targets) {
        const int64_t current = k->get(config).get<int64_t>();
        if (LowersOrKeeps(*k, current, v)) {
          k->set(config, Json(v), a.origin);
        } else {
          ignore(k->name, Json(v),
                 "a repository may only lower it (it is " + std::to_string(current) + ")");
        }
      }
      return;
    }
    case config::WorkspacePolicy::kInsideWorkspace: {
      const std::filesystem::path base = std::filesystem::path(a.origin.source).parent_path();
      const std::filesystem::path ws = ctx.workspace.lexically_normal();
      Json kept = Json::array();
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string text = value[i].get<std::string>();
        const std::filesystem::path p(text);
        bool inside = false;
        if (!text.empty() && text[0] != '~' && !p.is_absolute()) {
          const std::filesystem::path full = (base / p).lexically_normal();
          const std::filesystem::path rel = full.lexically_relative(ws);
          inside = !rel.empty() && *rel.begin() != "..";
        }
        if (inside) {
          kept.push_back(value[i]);
        } else {
          ignore(a.key->name + "[" + std::to_string(i) + "]", value[i],
                 "a repository may name only folders inside the workspace (a relative path "
                 "that stays in it)");
        }
      }
      if (!kept.empty()) a.key->set(config, kept, a.origin);
      return;
    }
  }
}

Status ApplyLayer(Layer layer, const LayerContext& ctx, Config& config,
                  std::vector<std::string>& warnings) {
  // Within a layer the all-commands budget keys go first, so that
  // budget.<command>.<field> in the same layer wins.
  std::stable_sort(layer.assignments.begin(), layer.assignments.end(),
                   [](const Assignment& a, const Assignment& b) {
                     return a.key->all_commands && !b.key->all_commands;
                   });
  for (const Assignment& a : layer.assignments) {
    const std::string where = a.origin.ToString();
    if (ctx.allow_list_only && a.key->from_workspace == config::WorkspacePolicy::kIgnored) {
      // Not even type-checked: a value that is never applied cannot fail the load.
      ApplyAllowListed(a, a.raw, ctx, config);
      continue;
    }
    std::vector<std::string> notes;
    auto value = config::Coerce(*a.key, a.raw, a.from_text, &notes);
    if (!value.ok())
      return InvalidArgument(where + ": " + a.key->name + " " + value.error().message());
    for (const auto& n : notes) warnings.push_back(where + ": " + a.key->name + ": " + n);
    if (ctx.allow_list_only) {
      ApplyAllowListed(a, *value, ctx, config);
    } else {
      a.key->set(config, *value, a.origin);
    }
  }
  for (size_t i = 0; i < layer.hooks.size(); ++i) {
    HookConfig& h = layer.hooks[i];
    if (ctx.allow_list_only) {
      ctx.ignored->push_back({"hooks[" + std::to_string(i) + "]",
                              Json{{"event", h.event}, {"command", h.command}}, h.origin,
                              "hooks run commands"});
      continue;
    }
    // Nothing runs command hooks: a guard hook configured here would
    // silently block nothing, so the configuration is refused instead.
    return InvalidArgument(h.origin.ToString() + ": [[hooks]] (event '" + h.event + "', command '" +
                           h.command +
                           "') are not supported: agentloop runs no command hooks, so this "
                           "hook would never see or block a call; remove the entry (for "
                           "guarding calls use [permissions] deny/ask rules)");
  }
  for (auto& [entry, origin] : layer.notify) {
    if (ctx.workspace_file) {
      // Trusted or not: whoever wrote the repository must not choose where
      // its sessions' approvals (and their links) are sent.
      if (ctx.ignored != nullptr) {
        ctx.ignored->push_back({"notify", std::move(entry), origin,
                                "notifications carry links that decide approvals; configure "
                                "them in the user file or an agent's agent.toml"});
      }
      continue;
    }
    AL_ASSIGN_OR_RETURN(NotifyConfig n, ParseNotifyEntry(entry, origin));
    config.notify.push_back(std::move(n));
  }
  for (McpServerSpec& s : layer.mcp_servers) {
    if (ctx.allow_list_only) {
      ctx.ignored->push_back({"mcp_servers." + s.name,
                              Json{{"command", s.command}, {"args", s.args}, {"url", s.url}},
                              ConfigOrigin{ConfigOrigin::Kind::kFile, s.source, 0},
                              "MCP servers start processes and reach the network"});
      continue;
    }
    auto same = std::find_if(config.mcp_servers.begin(), config.mcp_servers.end(),
                             [&](const McpServerSpec& e) { return e.name == s.name; });
    if (same != config.mcp_servers.end()) {
      *same = std::move(s);
    } else {
      config.mcp_servers.push_back(std::move(s));
    }
  }
  return Status::Ok();
}

// The one warning line of a workspace file read with the allow-list.
std::string IgnoredWarning(const std::filesystem::path& file, WorkspaceTrust trust,
                           const std::vector<IgnoredSetting>& ignored) {
  std::vector<std::string> names;
  for (const IgnoredSetting& i : ignored) {
    std::string name = i.key.substr(0, i.key.find('['));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  std::string head = trust == WorkspaceTrust::kChanged
                         ? file.string() +
                               " changed since this workspace was trusted, so it is "
                               "untrusted again"
                         : file.string() + " is untrusted";
  if (names.empty()) return head + " (nothing it sets was ignored; 'agentloop trust' trusts it)";
  return head + ": ignored " + list +
         " ('agentloop config show' says why; 'agentloop trust' reads it in full)";
}

// An agent's agent.toml as a layer (its [agent] table into `agent`), with
// its system.md as the layer's system_prompt_file.
Result<Layer> AgentLayer(const std::filesystem::path& file,
                         const std::optional<std::filesystem::path>& system_prompt,
                         AgentSection& agent, std::vector<std::string>& warnings) {
  AL_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadFileText(file));
  if (!text) return NotFound(file.string() + " does not exist");
  FileMode mode;
  mode.agent = &agent;
  AL_ASSIGN_OR_RETURN(Layer layer, ParseFileLayer(*text, file, warnings, mode));
  if (system_prompt) {
    for (const Assignment& a : layer.assignments) {
      if (a.key->name == "system_prompt_file") {
        return InvalidArgument(a.origin.ToString() + ": system_prompt_file is set, and " +
                               system_prompt->string() +
                               " exists too: the agent's system prompt is one of them");
      }
    }
    layer.assignments.push_back(
        {config::FindKey("system_prompt_file"), Json(system_prompt->string()), false,
         ConfigOrigin{ConfigOrigin::Kind::kFile, system_prompt->string(), 0}});
  }
  return layer;
}

}  // namespace

EnvMap ProcessEnv() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::string ConfigOrigin::ToString() const {
  switch (kind) {
    case Kind::kDefault:
      return "default";
    case Kind::kFile:
      return line > 0 ? source + ":" + std::to_string(line) : source;
    case Kind::kEnv:
      return "env " + source;
    case Kind::kFlag:
      return "flag " + source;
  }
  return "default";
}

std::string_view OutputFormatName(OutputFormat f) {
  switch (f) {
    case OutputFormat::kText:
      return "text";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kStreamJson:
      return "stream-json";
  }
  return "text";
}

std::string_view ApproverKindName(ApproverKind k) {
  switch (k) {
    case ApproverKind::kAuto:
      return "auto";
    case ApproverKind::kConsole:
      return "console";
    case ApproverKind::kDurable:
      return "durable";
    case ApproverKind::kWebhook:
      return "webhook";
  }
  return "auto";
}

Budget Config::BudgetFor(CommandKind kind) const {
  const CommandBudgetConfig& b = budget[static_cast<size_t>(kind)];
  Budget out;
  out.max_tool_calls = static_cast<int>(b.max_tool_calls.value);
  out.max_tokens = b.max_tokens.value;
  out.max_turns = static_cast<int>(b.max_turns.value);
  if (b.max_wall_time_ms.value > 0)
    out.max_wall_time = std::chrono::milliseconds(b.max_wall_time_ms.value);
  return out;
}

Config DefaultConfig() {
  Config c;  // Sourced<> origins default to kDefault
  c.command.value = CommandKind::kCode;
  c.output.value = OutputFormat::kText;
  for (size_t i = 0; i < c.budget.size(); ++i) {
    Budget d = DefaultBudget(static_cast<CommandKind>(i));
    c.budget[i].max_tool_calls.value = d.max_tool_calls;
    c.budget[i].max_tokens.value = d.max_tokens;
    c.budget[i].max_turns.value = d.max_turns;
    c.budget[i].max_wall_time_ms.value = d.max_wall_time ? d.max_wall_time->count() : 0;
  }
  c.approver.kind.value = ApproverKind::kAuto;
  c.tools.sandbox.value = "off";
  c.tools.network.value = false;
  c.tools.sandbox_fallback.value = "refuse";
  c.tools.bash_timeout_ms.value = 120'000;
  c.todo_loop.enabled.value = true;
  c.todo_loop.max_rounds.value = 12;
  c.todo_loop.max_strikes.value = 2;
  c.todo_loop.inject_state.value = true;
  c.todo_loop.max_injected_tasks.value = 6;
  c.reflector.enabled.value = false;
  c.subagents.enabled.value = true;
  c.subagents.max_depth.value = 2;
  c.subagents.max_concurrent.value = 3;
  c.subagents.max_spawns.value = 20;
  c.store.sync.value = "full";
  c.store.lease_ttl_ms.value = 30'000;
  c.store.pool_timeout_ms.value = 0;
  c.compaction.summary_timeout_ms.value = 60'000;
  c.server.listen.value = "127.0.0.1:7878";
  c.server.link_ttl_s.value = 3 * 24 * 3600;
  c.server.notify_retry_s.value = 60;
  c.server.worker_threads.value = 2;
  c.server.max_queued_inputs.value = 16;
  return c;
}

Result<std::filesystem::path> UserConfigDir(const EnvMap& env) {
  if (auto dir = XdgUserDir(env, "XDG_CONFIG_HOME", ".config")) return *dir / "agentloop";
  return FailedPrecondition("cannot locate the user config directory: set HOME");
}

Result<std::filesystem::path> UserConfigPath(const EnvMap& env) {
  if (std::string p = EnvValue(env, "AGENTLOOP_CONFIG"); !p.empty())
    return std::filesystem::path(p);
  Result<std::filesystem::path> dir = UserConfigDir(env);
  if (!dir.ok()) {
    return FailedPrecondition("cannot locate the user config: set HOME or AGENTLOOP_CONFIG");
  }
  return *dir / "config.toml";
}

std::filesystem::path WorkspaceConfigPath(const std::filesystem::path& workspace) {
  return workspace / ".agentloop" / "config.toml";
}

std::string_view WorkspaceTrustName(WorkspaceTrust t) {
  switch (t) {
    case WorkspaceTrust::kNoFile:
      return "none";
    case WorkspaceTrust::kUntrusted:
      return "untrusted";
    case WorkspaceTrust::kChanged:
      return "changed";
    case WorkspaceTrust::kTrusted:
      return "trusted";
  }
  return "untrusted";
}

Result<LoadedConfig> LoadConfig(const ConfigSources& sources) {
  LoadedConfig out;
  out.config = DefaultConfig();
  std::optional<std::filesystem::path> user_file = sources.user_file;
  if (!user_file) {
    auto p = UserConfigPath(sources.env);
    if (p.ok()) user_file = *p;  // no HOME at all: no user layer
  }
  if (user_file) {
    AL_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadFileText(*user_file));
    if (text) {
      AL_ASSIGN_OR_RETURN(Layer layer, ParseFileLayer(*text, *user_file, out.warnings));
      out.files.push_back(*user_file);
      AL_RETURN_IF_ERROR(ApplyLayer(std::move(layer), LayerContext{}, out.config, out.warnings));
    }
  }
  if (sources.agent_file) {
    AL_ASSIGN_OR_RETURN(Layer layer, AgentLayer(*sources.agent_file, sources.agent_system_prompt,
                                                out.agent, out.warnings));
    out.files.push_back(*sources.agent_file);
    AL_RETURN_IF_ERROR(ApplyLayer(std::move(layer), LayerContext{}, out.config, out.warnings));
  }
  if (!sources.workspace.empty()) {
    const std::filesystem::path ws_file = WorkspaceConfigPath(sources.workspace);
    // The same file twice (workspace = home) would count twice.
    std::error_code ec;
    const bool is_user_file = user_file && std::filesystem::equivalent(ws_file, *user_file, ec);
    std::optional<std::string> text;
    if (!is_user_file) {
      AL_ASSIGN_OR_RETURN(text, ReadFileText(ws_file));
    }
    const std::filesystem::path mcp_file = ProjectMcpJsonPath(sources.workspace);
    AL_ASSIGN_OR_RETURN(std::optional<std::string> mcp_text, ReadFileText(mcp_file));
    if (text || mcp_text) {
      out.workspace_sha256 = WorkspaceTrustHash(sources.workspace, text, mcp_text).value_or("");
      out.workspace_trust = WorkspaceTrust::kUntrusted;
      if (sources.trust_store) {
        Result<std::optional<TrustRecord>> rec = FindTrust(*sources.trust_store, sources.workspace);
        if (!rec.ok()) {
          out.warnings.push_back(rec.error().message());
        } else if (*rec) {
          out.workspace_trust = (*rec)->config_sha256 == out.workspace_sha256
                                    ? WorkspaceTrust::kTrusted
                                    : WorkspaceTrust::kChanged;
        }
      }
      out.workspace_trusted = out.workspace_trust == WorkspaceTrust::kTrusted;
    } else if (sources.trust_store) {
      Result<std::optional<TrustRecord>> rec = FindTrust(*sources.trust_store, sources.workspace);
      out.workspace_trusted = rec.ok() && *rec && !(*rec)->config_sha256;
    }
    if (mcp_text) {
      // Before the workspace's own file: a [mcp_servers.NAME] there replaces
      // the entry of the same name. Untrusted, nothing starts: the servers
      // are listed as ignored.
      Layer layer;
      std::vector<std::string> mcp_warnings;
      layer.mcp_servers = McpJsonServers(*mcp_text, mcp_file, sources.env, mcp_warnings);
      out.files.push_back(mcp_file);
      LayerContext ctx;
      ctx.allow_list_only = out.workspace_trust != WorkspaceTrust::kTrusted;
      ctx.workspace = sources.workspace;
      ctx.ignored = &out.ignored;
      const size_t ignored_before = out.ignored.size();
      AL_RETURN_IF_ERROR(ApplyLayer(std::move(layer), ctx, out.config, out.warnings));
      if (ctx.allow_list_only) {
        std::string names;
        for (size_t i = ignored_before; i < out.ignored.size(); ++i) {
          names += (names.empty() ? "" : ", ") + out.ignored[i].key.substr(12);
        }
        if (!names.empty()) {
          out.warnings.push_back(
              mcp_file.string() +
              (out.workspace_trust == WorkspaceTrust::kChanged
                   ? " or the workspace's config file changed since this workspace was trusted"
                   : " is in a workspace that is not trusted") +
              ": its MCP servers (" + names + ") are not started ('agentloop trust' starts them)");
        }
      } else {
        for (std::string& w : mcp_warnings) out.warnings.push_back(std::move(w));
      }
    }
    if (text) {
      AL_ASSIGN_OR_RETURN(Layer layer, ParseFileLayer(*text, ws_file, out.warnings));
      out.files.push_back(ws_file);
      LayerContext ctx;
      ctx.allow_list_only = out.workspace_trust != WorkspaceTrust::kTrusted;
      ctx.workspace_file = true;
      ctx.workspace = sources.workspace;
      ctx.ignored = &out.ignored;
      const size_t ignored_before = out.ignored.size();
      AL_RETURN_IF_ERROR(ApplyLayer(std::move(layer), ctx, out.config, out.warnings));
      const std::vector<IgnoredSetting> of_file(out.ignored.begin() + ignored_before,
                                                out.ignored.end());
      if (ctx.allow_list_only &&
          (!of_file.empty() || out.workspace_trust == WorkspaceTrust::kChanged)) {
        out.warnings.push_back(IgnoredWarning(ws_file, out.workspace_trust, of_file));
      } else if (!of_file.empty()) {
        out.warnings.push_back(ws_file.string() +
                               ": [[notify]] is never read from a workspace file, trusted or "
                               "not (configure it in the user file or an agent's agent.toml)");
      }
    }
  }
  AL_RETURN_IF_ERROR(
      ApplyLayer(EnvLayer(sources.env, out.warnings), LayerContext{}, out.config, out.warnings));
  AL_ASSIGN_OR_RETURN(Layer flags, FlagLayer(sources.flags));
  AL_RETURN_IF_ERROR(ApplyLayer(std::move(flags), LayerContext{}, out.config, out.warnings));
  return out;
}

Result<AgentFile> ReadAgentFile(const std::filesystem::path& file,
                                const std::optional<std::filesystem::path>& system_prompt) {
  AgentFile out;
  out.config = DefaultConfig();
  AL_ASSIGN_OR_RETURN(Layer layer, AgentLayer(file, system_prompt, out.agent, out.warnings));
  AL_RETURN_IF_ERROR(ApplyLayer(std::move(layer), LayerContext{}, out.config, out.warnings));
  return out;
}

namespace {

// store.url's password ("postgresql://user:pw@host/db") as "***".
Json RedactUrlPassword(std::string_view key, const Json& value) {
  if (key != "store.url" || !value.is_string()) return value;
  std::string url = value.get<std::string>();
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return value;
  size_t at = url.find('@', scheme + 3);
  size_t colon = url.find(':', scheme + 3);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return value;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace

std::vector<ConfigEntry> DescribeConfig(const Config& config) {
  std::vector<ConfigEntry> out;
  for (const KeySpec& k : config::Keys()) {
    if (k.all_commands) continue;
    Json v = k.get(config);
    std::vector<ConfigOrigin> origins = k.origins(config);
    if (k.kind == ValueKind::kList) {
      if (v.empty()) out.push_back({k.name, Json::array(), "default"});
      for (size_t i = 0; i < v.size(); ++i) {
        out.push_back({k.name + "[" + std::to_string(i) + "]", v[i], origins[i].ToString()});
      }
    } else if (k.kind == ValueKind::kMap) {
      if (v.empty()) out.push_back({k.name, Json::object(), "default"});
      size_t i = 0;
      for (const auto& [name, value] : v.items()) {
        out.push_back({k.name + "." + name, value, origins[i++].ToString()});
      }
    } else {
      out.push_back({k.name, RedactUrlPassword(k.name, v), origins[0].ToString()});
    }
  }
  if (config.hooks.empty()) out.push_back({"hooks", Json::array(), "default"});
  for (size_t i = 0; i < config.hooks.size(); ++i) {
    const HookConfig& h = config.hooks[i];
    out.push_back({"hooks[" + std::to_string(i) + "]",
                   Json{{"name", h.name},
                        {"event", h.event},
                        {"command", h.command},
                        {"timeout_ms", h.timeout_ms},
                        {"tools", h.tools}},
                   h.origin.ToString()});
  }
  if (config.notify.empty()) out.push_back({"notify", Json::array(), "default"});
  for (size_t i = 0; i < config.notify.size(); ++i) {
    const NotifyConfig& n = config.notify[i];
    // Only what is not secret: variables' names, and whether a Slack
    // incoming webhook (a secret URL) is set.
    Json v = {{"channel", n.channel}, {"events", n.events}};
    auto add = [&](const char* key, const std::string& value) {
      if (!value.empty()) v[key] = value;
    };
    add("url", n.url);
    add("secret_env", n.secret_env);
    add("smtp_url", n.smtp_url);
    add("tls", n.tls);
    add("smtp_user", n.smtp_user);
    add("smtp_password_env", n.smtp_password_env);
    add("from", n.from);
    if (!n.to.empty()) v["to"] = n.to;
    add("ca_file", n.ca_file);
    if (n.channel == "email") v["timeout_s"] = n.timeout_s;
    add("bot_token_env", n.bot_token_env);
    add("slack_channel", n.slack_channel);
    add("api_base_url", n.api_base_url);
    if (!n.webhook_url.empty()) v["webhook_url"] = "***";
    add("signing_secret_env", n.signing_secret_env);
    out.push_back({"notify[" + std::to_string(i) + "]", std::move(v), n.origin.ToString()});
  }
  if (config.mcp_servers.empty()) out.push_back({"mcp_servers", Json::object(), "default"});
  for (const McpServerSpec& s : config.mcp_servers) {
    Json env_names = Json::array();  // values may be secrets: names only
    for (const auto& [name, value] : s.env) env_names.push_back(name);
    out.push_back({"mcp_servers." + s.name,
                   Json{{"command", s.command},
                        {"args", s.args},
                        {"env", env_names},
                        {"url", s.url},
                        {"bearer_token_env_var", s.bearer_token_env_var},
                        {"enabled", s.enabled},
                        {"startup_timeout_ms", s.startup_timeout_ms},
                        {"tool_timeout_ms", s.tool_timeout_ms},
                        {"enabled_tools", s.enabled_tools},
                        {"disabled_tools", s.disabled_tools},
                        {"required", s.required},
                        {"trusted", s.trusted}},
                   s.source});
  }
  return out;
}

std::string FormatConfig(const Config& config) {
  std::vector<ConfigEntry> entries = DescribeConfig(config);
  // Origins line up in one column, which the short `key = value` lines set:
  // a long value (an MCP server's table, a hook) is followed by its origin
  // two spaces after it and pads no other line.
  constexpr size_t kMaxColumn = 60;
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const auto& e : entries) {
    lefts.push_back(e.key + " = " + RedactSecrets(DumpJson(e.value)));
    if (lefts.back().size() <= kMaxColumn) width = std::max(width, lefts.back().size());
  }
  std::string out;
  for (size_t i = 0; i < entries.size(); ++i) {
    out += lefts[i];
    out.append(lefts[i].size() < width ? width - lefts[i].size() + 2 : 2, ' ');
    out += "# " + entries[i].origin + "\n";
  }
  return out;
}

std::string FormatWorkspaceTrust(const LoadedConfig& loaded) {
  if (loaded.workspace_trust == WorkspaceTrust::kNoFile) return "";
  std::string out = "# workspace config: ";
  switch (loaded.workspace_trust) {
    case WorkspaceTrust::kTrusted:
      out += "trusted (read in full)\n";
      break;
    case WorkspaceTrust::kChanged:
      out += "changed since it was trusted: untrusted again (read with the allow-list)\n";
      break;
    default:
      out += "untrusted (read with the allow-list; 'agentloop trust' reads it in full)\n";
      break;
  }
  for (const IgnoredSetting& i : loaded.ignored) {
    out += "# ignored " + i.key + " = " +
           RedactSecrets(DumpJson(RedactUrlPassword(i.key, i.value))) + "  (" +
           i.origin.ToString() + ": " + i.reason + ")\n";
  }
  return out;
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const KeySpec& k : config::Keys()) out.push_back(k.name);
  out.push_back("hooks");
  out.push_back("notify");
  out.push_back("mcp_servers");
  return out;
}

}  // namespace agentloop
