// The registry of configuration keys: name, type, range, and how a value is
// read from and written into Config. Everything that lists keys (TOML walk,
// environment mapping, flags, `config show`, docs) goes through it, so a key
// is added in exactly one place (config_keys.cc).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace agentloop::config {

// kMap: a table of strings by name (TOML `{NAME = "value"}`).
enum class ValueKind { kInt, kBool, kString, kEnum, kList, kMap };

// The allow-list of an untrusted workspace file (a cloned repository). The
// default is kIgnored: a key is readable from a repository only when this
// registry says so, so a key added later is refused until someone decides.
enum class WorkspacePolicy {
  kIgnored,          // never from an untrusted workspace file
  kAllowed,          // harmless: the model name, todo-loop and reflector tuning
  kNarrowOnly,       // kInt only: applied when it lowers the value (budgets, timeouts)
  kInsideWorkspace,  // kList of paths: each must be relative and stay inside the workspace
  kNarrowingRules,   // permissions.ask / permissions.deny: they only narrow
};

struct KeySpec {
  std::string name;
  ValueKind kind = ValueKind::kString;
  int64_t min = 0;  // kInt: values are clamped to [min, max]
  int64_t max = 0;
  std::vector<std::string> choices;  // kEnum
  // kEnum: when set, an unknown value (or one of the wrong type) is a warning
  // and this value is used, instead of an error. For keys whose default is
  // the safe choice (store.sync).
  std::string fallback;
  // What an untrusted workspace file may do with this key (see
  // WorkspacePolicy); a trusted workspace's file sets every key.
  WorkspacePolicy from_workspace = WorkspacePolicy::kIgnored;
  // kEnum: earlier values still read, as `replacement`, with a warning that
  // says `why`.
  struct DeprecatedValue {
    std::string value;
    std::string replacement;
    std::string why;
  };
  std::vector<DeprecatedValue> deprecated;
  // kList, kMap: the strings are environment variable names (kMap: its keys),
  // checked to be [A-Za-z_][A-Za-z0-9_]*.
  bool env_names = false;
  // kList of "<hash>:<tenant>:<scope>[,<scope>...]" grants (server.tokens):
  // a comma-separated string is cut only before an item that has a ':', so
  // the scopes' own commas stay with their grant.
  bool grants = false;
  // "budget.max_tool_calls" and friends: set every command's value; not
  // shown by `config show` (the per-command keys are).
  bool all_commands = false;
  // Writes a value already checked by Coerce.
  std::function<void(Config&, const Json&, const ConfigOrigin&)> set;
  // The current value (kList: an array; kMap: an object) and its origin(s)
  // (kList: one per element; kMap: one per name, in name order).
  std::function<Json(const Config&)> get;
  std::function<std::vector<ConfigOrigin>(const Config&)> origins;
};

// All keys in reference order.
const std::vector<KeySpec>& Keys();
const KeySpec* FindKey(std::string_view name);
// Whether `name` is a table that contains keys ("provider", "budget.code").
bool IsTable(std::string_view name);
// "AGENTLOOP_PROVIDER_MODEL" -> the key, including the short aliases
// (AGENTLOOP_PROVIDER, AGENTLOOP_MODEL, AGENTLOOP_BASE_URL). Null if none.
const KeySpec* FindEnvKey(std::string_view var);
std::string EnvName(std::string_view key);
// The closest known key or table to `name`, or empty.
std::string Suggest(std::string_view name);

// Checks and converts `raw` to the key's type. `from_text`: `raw` is a
// string from the environment or a flag, to be parsed ("42", "true",
// "a,b"; kMap: a JSON object or "NAME=value,NAME=value"). Clamping,
// fallback and deprecation notes are appended to `notes`. Errors: the
// reason, without location (the caller adds it).
Result<Json> Coerce(const KeySpec& key, const Json& raw, bool from_text,
                    std::vector<std::string>* notes);

// Why an untrusted workspace file may not set `key` (kIgnored keys), in
// words for `config show`.
std::string WorkspaceRefusal(const KeySpec& key);

// Hook events accepted in [[hooks]].
const std::vector<std::string>& HookEvents();

}  // namespace agentloop::config
