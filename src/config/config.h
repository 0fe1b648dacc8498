// Layered configuration: TOML files, AGENTLOOP_* environment variables and
// command-line flags merged into one typed Config that remembers, for every
// value, where it came from (for `agentloop config show`).
//
// Layers, later wins:
//   1. defaults
//   2. the user file       $AGENTLOOP_CONFIG, else $XDG_CONFIG_HOME/agentloop/config.toml,
//                          else ~/.config/agentloop/config.toml
//   3. the workspace file  <workspace>/.agentloop/config.toml
//   2a. an agent's file     <config dir>/agents/<name>/agent.toml, when a
//                          session runs an agent (engine/agents.h): the
//                          operator's configuration, read in full
//   3. the workspace file  <workspace>/.agentloop/config.toml
//   4. environment         AGENTLOOP_<KEY> (dots and dashes become underscores)
//   5. flags               FlagOverride{key, value, flag} from the CLI
// Scalars: the last layer that sets a key wins. Lists (permission rules,
// skills and memory dirs, hooks, tools.env.pass) accumulate across layers,
// in layer order; tables of strings (tools.env.set) accumulate by name.
//
// Validation: an unknown key is a warning (with a suggestion); an
// out-of-range number is clamped to its cap with a warning (never honoured
// beyond it); a value of the wrong type, an unknown enum value or a malformed
// file is an error that names the file and line (or the variable or flag),
// except for an enum with a safe fallback (store.sync), where it is a warning
// and the fallback is used.
// The workspace file is written by whoever wrote the repository, so it is
// untrusted unless the person trusted this workspace (trust.h) and the file
// is byte for byte what they trusted. An untrusted file may set only an
// allow-list of harmless keys (config_keys.h WorkspacePolicy): the model
// name, todo-loop and reflector tuning, lower budgets and timeouts, skills
// and memory folders inside the workspace, and `ask`/`deny` rules, which
// only narrow. Everything else (allow rules, the default decision, the
// provider, its URL and key, the system prompt file, hooks, the approver,
// the sandbox, the store) is ignored, listed in LoadedConfig::ignored with
// the reason, and named in one warning line.
// The key reference is docs/config.md.
//
// Thread-safety: pure functions over values; nothing here touches the
// process environment except ProcessEnv().
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/env.h"
#include "agentloop/json.h"
#include "agentloop/mcp.h"
#include "agentloop/permission.h"
#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

// A copy of the process environment (for the CLI's main; tests build maps).
EnvMap ProcessEnv();

struct ConfigOrigin {
  enum class Kind { kDefault, kFile, kEnv, kFlag };
  Kind kind = Kind::kDefault;
  std::string source;  // kFile: path; kEnv: variable name; kFlag: flag, e.g. "--model"
  int line = 0;        // kFile: 1-based line of the value

  // "default", "/home/u/.config/agentloop/config.toml:3",
  // "env AGENTLOOP_MODEL", "flag --model".
  std::string ToString() const;
  bool operator==(const ConfigOrigin&) const = default;
};

template <typename T>
struct Sourced {
  T value{};
  ConfigOrigin origin;
};

enum class OutputFormat { kText, kJson, kStreamJson };
std::string_view OutputFormatName(OutputFormat f);  // "text" | "json" | "stream-json"

enum class ApproverKind {
  kAuto,  // console on a terminal, durable otherwise (the CLI decides)
  kConsole,
  kDurable,
  kWebhook,
};
std::string_view ApproverKindName(ApproverKind k);

struct CommandBudgetConfig {
  Sourced<int64_t> max_tool_calls;
  Sourced<int64_t> max_tokens;
  Sourced<int64_t> max_turns;
  Sourced<int64_t> max_wall_time_ms;  // 0: no wall-time limit
};

// One [[hooks]] entry: run `command` at `event` (a Hook method in snake case:
// turn_start, before_model_call, before_tool_call, after_tool_result,
// after_step, turn_end), for `tools` (empty: all).
struct HookConfig {
  std::string name;
  std::string event;
  std::string command;
  int64_t timeout_ms = 5000;
  std::vector<std::string> tools;
  ConfigOrigin origin;
};

// One [[notify]] entry (docs/notifications.md): a channel the server
// sends an agent's notifications through. Read from the user's file and an
// agent's agent.toml only, never from a workspace file (a repository must
// not send its sessions' approvals elsewhere). Secrets are never values
// here: each `*_env` names the variable that holds one. Checked when read
// (ParseNotifyEntry): an unknown key or value is an error.
struct NotifyConfig {
  std::string channel;              // "webhook" | "email" | "slack"
  std::vector<std::string> events;  // of NotifyEvents(); default: the two that need a person
  // webhook
  std::string url;
  std::string secret_env;
  // email
  std::string smtp_url;  // smtp://host[:port] (STARTTLS) | smtps://host[:port]
  std::string tls;       // "" (required) | "none" (smtp:// to a loopback host only)
  std::string smtp_user;
  std::string smtp_password_env;
  std::string from;
  std::vector<std::string> to;
  std::string ca_file;     // PEM bundle the server's certificate is checked against
  int64_t timeout_s = 60;  // one SMTP transfer, connection included
  // slack
  std::string bot_token_env;
  std::string slack_channel;
  std::string api_base_url;  // "": https://slack.com/api
  std::string webhook_url;
  std::string signing_secret_env;
  ConfigOrigin origin;
};

// "approval.requested", "question.asked", "turn.completed".
const std::vector<std::string>& NotifyEvents();

// One [[notify]] table as JSON (TOML converted), read from `origin`.
// Errors: kInvalidArgument naming the file, line and what is wrong.
Result<NotifyConfig> ParseNotifyEntry(const Json& entry, const ConfigOrigin& origin);

struct Config {
  struct Provider {
    Sourced<std::string>
        kind;  // "" (not configured) | openai | anthropic | openai-responses | script
    Sourced<std::string> model;
    Sourced<std::string> base_url;
    Sourced<std::string> api_key_env;       // "": the provider's usual variable
    Sourced<std::string> max_tokens_field;  // "" | max_tokens | max_completion_tokens
    Sourced<std::string> script;            // the scripted provider's script file
    Sourced<std::string> images;            // "" | auto | send | describe
    // 0: the built-in table's numbers for the model (docs/config.md).
    Sourced<int64_t> context_window;
    Sourced<int64_t> max_output_tokens;
  } provider;

  Sourced<CommandKind> command;
  Sourced<OutputFormat> output;
  Sourced<std::string> system_prompt_file;
  // Indexed by CommandKind (code, explain, fix, plan, build).
  std::array<CommandBudgetConfig, 5> budget;

  struct Permissions {
    std::vector<Sourced<std::string>> allow;  // rule strings, e.g. "bash(git status*)"
    std::vector<Sourced<std::string>> ask;
    std::vector<Sourced<std::string>> deny;
    // nullopt: ask for mutating tools, allow read-only ones.
    Sourced<std::optional<Decision>> default_decision;
  } permissions;

  struct Approver {
    Sourced<ApproverKind> kind;
    Sourced<std::string> webhook_url;
    Sourced<std::string> secret_env;  // variable holding the HMAC secret
  } approver;

  // Not from the workspace file (a repository must not loosen the sandbox,
  // turn the network on or choose bash's environment).
  struct Tools {
    // The bash sandbox: "off" | "read-only" | "workspace-write"
    // (docs/tools.md). The earlier values "workspace" and "none" meant
    // nothing for bash and are read as "off", with a warning.
    Sourced<std::string> sandbox;
    Sourced<bool> network;                  // sandboxed bash may use the network
    Sourced<std::string> sandbox_fallback;  // "refuse" | "warn": bubblewrap cannot run here
    Sourced<int64_t> bash_timeout_ms;
    struct Env {
      // Variables kept in bash's environment although their names look
      // like secrets (accumulates across layers).
      std::vector<Sourced<std::string>> pass;
      // Fixed values added to bash's environment; per name, the later layer
      // wins.
      std::map<std::string, Sourced<std::string>> set;
    } env;
  } tools;

  struct TodoLoop {
    Sourced<bool> enabled;
    Sourced<int64_t> max_rounds;
    Sourced<int64_t> max_strikes;
    Sourced<bool> inject_state;
    Sourced<int64_t> max_injected_tasks;
  } todo_loop;

  struct Reflector {
    Sourced<bool> enabled;
  } reflector;

  // Subagents (docs/subagents.md): whether agent definitions are offered as
  // agent__<name> tools, and the caps of one root turn's tree.
  struct Subagents {
    Sourced<bool> enabled;
    Sourced<int64_t> max_depth;
    Sourced<int64_t> max_concurrent;
    Sourced<int64_t> max_spawns;
  } subagents;

  struct Store {
    // "full" (a commit is on disk when it returns) | "normal" (survives a
    // crash of the process, not necessarily a power loss); agentloop/store.h
    // StoreSync. Not from the workspace file.
    Sourced<std::string> sync;
    // Empty: the SQLite database in the data directory. Otherwise a
    // "postgresql://" URL of a shared PostgreSQL store (docs/storage.md,
    // "PostgreSQL"). Not from the workspace file; `config show` prints it
    // without its password.
    Sourced<std::string> url;
    // The PostgreSQL store's lease TTL: a session whose running instance
    // has not renewed its lease for this long is taken over by another
    // (docs/storage.md, "Leases and fencing"). Not from the workspace file.
    Sourced<int64_t> lease_ttl_ms;
    // How long a PostgreSQL store call waits for a free pooled connection
    // before failing unavailable (503 from the server); 0: the lease TTL
    // (docs/storage.md, "PostgreSQL"). Not from the workspace file.
    Sourced<int64_t> pool_timeout_ms;
  } store;

  struct Compaction {
    // The bound on the side request that writes a compaction summary
    // (retries included); past it the truncating summary is used.
    Sourced<int64_t> summary_timeout_ms;
  } compaction;

  // `agentloop serve` (docs/server.md). Not from the workspace file.
  struct Server {
    Sourced<std::string> listen;  // HOST:PORT
    // "<sha256 hex of the token>:<tenant>:<scope>[,<scope>...]"
    std::vector<Sourced<std::string>> tokens;
    std::vector<Sourced<std::string>> allowed_origins;
    // scheme://host[:port] that links in notifications use (empty: the
    // listen address over http).
    Sourced<std::string> public_url;
    Sourced<int64_t> link_ttl_s;  // how long an approve/deny link works
    // How long an undelivered notification waits before it is tried again
    // (from the store's outbox, also by a restarted server).
    Sourced<int64_t> notify_retry_s;
    // Threads of `agentloop serve` that run turn steps and store calls.
    Sourced<int64_t> worker_threads;
    // Inputs that may wait in a session's queue (on_busy: "enqueue").
    Sourced<int64_t> max_queued_inputs;
  } server;

  std::vector<Sourced<std::string>> skills_dirs;
  std::vector<Sourced<std::string>> memory_dirs;
  std::vector<HookConfig> hooks;
  // [mcp_servers.NAME] tables, in order of first appearance; a later layer's
  // table of the same NAME replaces the whole entry. Not from an untrusted
  // workspace file (a server is a process it would start).
  std::vector<McpServerSpec> mcp_servers;
  // [[notify]] entries, accumulated in layer order (user file, agent file).
  std::vector<NotifyConfig> notify;

  // The budget of `kind` as the engine uses it.
  Budget BudgetFor(CommandKind kind) const;
};

// Every value at its default (origin kDefault).
Config DefaultConfig();

// A flag from the command line. `key` is a config key ("provider.model");
// the budget keys also exist without a command ("budget.max_tool_calls")
// and then apply to every command. For list keys each override appends one
// element (so `--allow` may repeat).
struct FlagOverride {
  std::string key;
  std::string value;
  std::string flag;  // as typed, for provenance, e.g. "--model"
};

// The [agent] table of an agent's agent.toml (docs/agents.md): what the
// agent is and where its sessions work. Paths are absolute (checked).
struct AgentSection {
  Sourced<std::string> description;
  // Every session of the agent works in this directory.
  Sourced<std::string> workspace;
  // A session names a relative subdirectory of this directory (confined to
  // it); at most one of `workspace` and `workspace_root` is set.
  Sourced<std::string> workspace_root;
  // Under workspace_root: a missing subdirectory is created.
  Sourced<bool> create_workspace;
  // agent.default: the agent a server's new session gets when its request
  // names none and the server serves several.
  Sourced<bool> is_default;
};

struct ConfigSources {
  EnvMap env;
  std::filesystem::path workspace;  // empty: no workspace file
  // Overrides the user file location (tests); otherwise UserConfigPath(env).
  std::optional<std::filesystem::path> user_file;
  // The record of trusted workspaces (trust.h). Unset: the workspace file is
  // untrusted.
  std::optional<std::filesystem::path> trust_store;
  std::vector<FlagOverride> flags;
  // An agent's agent.toml, applied after the user file (layer 2a). Read
  // strictly: an unknown key is an error, not a warning. Its [agent] table
  // goes to LoadedConfig::agent.
  std::optional<std::filesystem::path> agent_file;
  // The agent's system.md: applied as `system_prompt_file` of the agent's
  // layer. Errors: kInvalidArgument when agent.toml sets system_prompt_file
  // too.
  std::optional<std::filesystem::path> agent_system_prompt;
};

// A value of the workspace file that was not applied, and why.
struct IgnoredSetting {
  std::string key;  // "provider.base_url", "skills.dirs[1]", "hooks[0]"
  Json value;
  ConfigOrigin origin;
  std::string reason;
};

// How the workspace file was read.
enum class WorkspaceTrust {
  kNoFile,     // there is no workspace file (nor a .mcp.json)
  kUntrusted,  // read with the allow-list
  kChanged,    // trusted once, changed since: read with the allow-list
  kTrusted,    // trusted and unchanged: read in full
};
std::string_view WorkspaceTrustName(WorkspaceTrust t);  // "none" | "untrusted" | ...

struct LoadedConfig {
  Config config;
  // Human-readable, each starting with its location ("file:line: ...").
  std::vector<std::string> warnings;
  std::vector<std::filesystem::path> files;  // the files that existed and were read
  WorkspaceTrust workspace_trust = WorkspaceTrust::kNoFile;
  // The person trusted the workspace as it is now: kTrusted, or a trust
  // recorded while it had neither file, and it still has neither. What else
  // the workspace defines for the engine (its subagents) is used as written
  // only then.
  bool workspace_trusted = false;
  // WorkspaceTrustHash of the workspace file and .mcp.json as read; empty
  // without either.
  std::string workspace_sha256;
  std::vector<IgnoredSetting> ignored;
  AgentSection agent;  // from ConfigSources::agent_file; empty without one
};

// The user's agentloop config directory (config.toml, skills, the todo-loop
// kill switch): $XDG_CONFIG_HOME/agentloop (absolute XDG_CONFIG_HOME only),
// else $HOME/.config/agentloop. Errors: kFailedPrecondition when neither is set.
Result<std::filesystem::path> UserConfigDir(const EnvMap& env);
// $AGENTLOOP_CONFIG, else $XDG_CONFIG_HOME/agentloop/config.toml (absolute
// XDG_CONFIG_HOME only), else $HOME/.config/agentloop/config.toml.
// Errors: kFailedPrecondition when none is set.
Result<std::filesystem::path> UserConfigPath(const EnvMap& env);
// <workspace>/.agentloop/config.toml
std::filesystem::path WorkspaceConfigPath(const std::filesystem::path& workspace);

// Loads and merges every layer. A missing file is skipped. Errors:
// kInvalidArgument naming the file and line (malformed TOML, wrong type,
// unknown enum value), the variable, or the flag; kFailedPrecondition when a
// file exists but cannot be read.
Result<LoadedConfig> LoadConfig(const ConfigSources& sources);

// An agent's agent.toml checked on its own, as LoadConfig checks it (TOML,
// types, enum values, [agent]), with the warnings it gives (clamped numbers).
struct AgentFile {
  AgentSection agent;
  Config config;  // DefaultConfig() with the file applied
  std::vector<std::string> warnings;
};
// Errors: kInvalidArgument naming the file and line (an unknown key is one,
// with the closest known key); kNotFound when the file does not exist;
// kFailedPrecondition when it cannot be read.
Result<AgentFile> ReadAgentFile(const std::filesystem::path& file,
                                const std::optional<std::filesystem::path>& system_prompt = {});

// One line of `agentloop config show`.
struct ConfigEntry {
  std::string key;  // list elements are "key[i]"
  Json value;
  std::string origin;  // ConfigOrigin::ToString()
};
// Every key (defaults included) in reference order.
std::vector<ConfigEntry> DescribeConfig(const Config& config);
// DescribeConfig as aligned text: `key = value  # origin` per line.
std::string FormatConfig(const Config& config);

// The workspace file's trust and what it set that was ignored, for `config
// show`: "# workspace config FILE: untrusted" then one line per ignored
// value, `# ignored KEY = VALUE  (ORIGIN: REASON)`. Empty without a
// workspace file.
std::string FormatWorkspaceTrust(const LoadedConfig& loaded);

// The known keys (reference order), e.g. for `--help` or completion.
std::vector<std::string> ConfigKeys();

}  // namespace agentloop
