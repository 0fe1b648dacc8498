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

#include "base/strings.h"
#include "config/config_keys.h"

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
};

std::string Get(const EnvMap& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() ? std::string() : it->second;
}

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

Status ReadHooks(const toml::node& node, const std::filesystem::path& path, Layer& layer,
                 std::vector<std::string>& warnings) {
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

Status WalkTable(const toml::table& table, const std::string& prefix,
                 const std::filesystem::path& path, Layer& layer,
                 std::vector<std::string>& warnings) {
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
      AL_RETURN_IF_ERROR(ReadHooks(node, path, layer, warnings));
    } else if (const KeySpec* key = config::FindKey(name)) {
      layer.assignments.push_back({key, TomlToJson(node), false, FileOrigin(path, node)});
    } else if (config::IsTable(name)) {
      const toml::table* sub = node.as_table();
      if (sub == nullptr) return InvalidArgument(where + ": '" + name + "' must be a table");
      AL_RETURN_IF_ERROR(WalkTable(*sub, name, path, layer, warnings));
    } else {
      warnings.push_back(UnknownKey(where, name));
    }
  }
  return Status::Ok();
}

// Reads one TOML file into a layer; a missing file gives an empty layer.
Result<std::optional<Layer>> ReadFileLayer(const std::filesystem::path& path,
                                           std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<Layer>();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return FailedPrecondition("cannot read " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
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
  AL_RETURN_IF_ERROR(WalkTable(table, "", path, layer, warnings));
  return std::optional<Layer>(std::move(layer));
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

Status ApplyLayer(Layer layer, bool workspace, Config& config, std::vector<std::string>& warnings) {
  // Within a layer the all-commands budget keys go first, so that
  // budget.<command>.<field> in the same layer wins.
  std::stable_sort(layer.assignments.begin(), layer.assignments.end(),
                   [](const Assignment& a, const Assignment& b) {
                     return a.key->all_commands && !b.key->all_commands;
                   });
  for (const Assignment& a : layer.assignments) {
    const std::string where = a.origin.ToString();
    if (workspace && a.key->sensitive) {
      warnings.push_back(where + ": '" + a.key->name +
                         "' is ignored in a workspace config (a repository must not choose it); "
                         "set it in the user config, " +
                         config::EnvName(a.key->name) + " or a flag");
      continue;
    }
    std::vector<std::string> notes;
    auto value = config::Coerce(*a.key, a.raw, a.from_text, &notes);
    if (!value.ok())
      return InvalidArgument(where + ": " + a.key->name + " " + value.error().message());
    for (const auto& n : notes) warnings.push_back(where + ": " + a.key->name + ": " + n);
    a.key->set(config, *value, a.origin);
  }
  for (HookConfig& h : layer.hooks) {
    if (workspace) {
      warnings.push_back(h.origin.ToString() +
                         ": hooks are ignored in a workspace config (they run commands); "
                         "define them in the user config");
      continue;
    }
    config.hooks.push_back(std::move(h));
  }
  return Status::Ok();
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
  c.store.sync.value = "full";
  return c;
}

Result<std::filesystem::path> UserConfigDir(const EnvMap& env) {
  if (std::string x = Get(env, "XDG_CONFIG_HOME"); !x.empty() && x.front() == '/') {
    return std::filesystem::path(x) / "agentloop";
  }
  if (std::string h = Get(env, "HOME"); !h.empty()) {
    return std::filesystem::path(h) / ".config" / "agentloop";
  }
  return FailedPrecondition("cannot locate the user config directory: set HOME");
}

Result<std::filesystem::path> UserConfigPath(const EnvMap& env) {
  if (std::string p = Get(env, "AGENTLOOP_CONFIG"); !p.empty()) return std::filesystem::path(p);
  Result<std::filesystem::path> dir = UserConfigDir(env);
  if (!dir.ok()) {
    return FailedPrecondition("cannot locate the user config: set HOME or AGENTLOOP_CONFIG");
  }
  return *dir / "config.toml";
}

std::filesystem::path WorkspaceConfigPath(const std::filesystem::path& workspace) {
  return workspace / ".agentloop" / "config.toml";
}

Result<LoadedConfig> LoadConfig(const ConfigSources& sources) {
  LoadedConfig out;
  out.config = DefaultConfig();
  std::optional<std::filesystem::path> user_file = sources.user_file;
  if (!user_file) {
    auto p = UserConfigPath(sources.env);
    if (p.ok()) user_file = *p;  // no HOME at all: no user layer
  }
  struct FileLayer {
    std::filesystem::path path;
    bool workspace;
  };
  std::vector<FileLayer> files;
  if (user_file) files.push_back({*user_file, false});
  if (!sources.workspace.empty()) {
    std::filesystem::path ws = WorkspaceConfigPath(sources.workspace);
    // The same file twice (workspace = home) would count twice.
    std::error_code ec;
    if (!user_file || !std::filesystem::equivalent(ws, *user_file, ec)) files.push_back({ws, true});
  }
  for (const FileLayer& f : files) {
    AL_ASSIGN_OR_RETURN(std::optional<Layer> layer, ReadFileLayer(f.path, out.warnings));
    if (!layer) continue;
    out.files.push_back(f.path);
    AL_RETURN_IF_ERROR(ApplyLayer(std::move(*layer), f.workspace, out.config, out.warnings));
  }
  AL_RETURN_IF_ERROR(
      ApplyLayer(EnvLayer(sources.env, out.warnings), false, out.config, out.warnings));
  AL_ASSIGN_OR_RETURN(Layer flags, FlagLayer(sources.flags));
  AL_RETURN_IF_ERROR(ApplyLayer(std::move(flags), false, out.config, out.warnings));
  return out;
}

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
      out.push_back({k.name, std::move(v), origins[0].ToString()});
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
  return out;
}

std::string FormatConfig(const Config& config) {
  std::vector<ConfigEntry> entries = DescribeConfig(config);
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const auto& e : entries) {
    lefts.push_back(e.key + " = " + RedactSecrets(DumpJson(e.value)));
    width = std::max(width, lefts.back().size());
  }
  std::string out;
  for (size_t i = 0; i < entries.size(); ++i) {
    out += lefts[i];
    out.append(width - lefts[i].size() + 2, ' ');
    out += "# " + entries[i].origin + "\n";
  }
  return out;
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const KeySpec& k : config::Keys()) out.push_back(k.name);
  out.push_back("hooks");
  return out;
}

}  // namespace agentloop
