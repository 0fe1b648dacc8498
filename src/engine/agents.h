// Agents: named session definitions an operator keeps in the configuration
// directory (docs/agents.md), served by `agentloop serve` and run by
// `agentloop run --agent NAME`.
//
//   <config dir>/agents/<name>/agent.toml   the keys of config.toml, plus [agent]
//   <config dir>/agents/<name>/system.md    optional: replaces the built-in system prompt
//
// agent.toml is the operator's configuration, trusted like the user's
// config.toml: its layer comes after the user file and before the
// workspace file (still untrusted, read with its allow-list), the
// environment and flags. It is checked strictly: an unknown key is an error.
// The [agent] table holds the description and where sessions work: a fixed
// `workspace`, or a `workspace_root` under which each session names a
// relative subdirectory (ResolveAgentWorkspace), or neither (the caller's
// workspace).
//
// Entries of agents/ that are not folders (a later `<name>.md` form) and
// hidden entries are not agents and are skipped.
//
// Thread-safety: pure functions over values; they read the file system.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/engine.h"
#include "agentloop/status.h"

#include "config/config.h"
#include "engine/options_from_config.h"

namespace agentloop::engine {

inline constexpr std::string_view kAgentFileName = "agent.toml";
inline constexpr std::string_view kAgentSystemPromptName = "system.md";

enum class AgentWorkspacePolicy {
  kCaller,  // neither key: the caller's workspace
  kFixed,   // agent.workspace: every session works there
  kRoot,    // agent.workspace_root: a session names a subdirectory
};
std::string_view AgentWorkspacePolicyName(AgentWorkspacePolicy p);  // "caller" | "fixed" | "root"

struct AgentDefinition {
  std::string name;
  std::string description;
  std::filesystem::path dir;   // <config dir>/agents/<name>
  std::filesystem::path file;  // dir/agent.toml
  // dir/system.md when it exists.
  std::optional<std::filesystem::path> system_prompt;
  AgentWorkspacePolicy workspace_policy = AgentWorkspacePolicy::kCaller;
  std::filesystem::path workspace;  // kFixed: the directory; kRoot: the root
  bool create_workspace = false;    // kRoot: missing subdirectories are created
  // agent.default: a server's new session that names no agent gets this one.
  bool is_default = false;
  // Why the agent cannot run, each naming the file and line; empty: it can.
  std::vector<std::string> problems;
  // Notes that do not stop it (a clamped number, an unsupported folder).
  std::vector<std::string> warnings;

  bool ok() const { return problems.empty(); }
};

// <config_dir>/agents
std::filesystem::path AgentsDir(const std::filesystem::path& config_dir);
// The configuration directory of a config file: the directory holding it
// (`--config FILE`, $AGENTLOOP_CONFIG), else UserConfigDir(env).
Result<std::filesystem::path> AgentConfigDir(const EnvMap& env,
                                             const std::optional<std::filesystem::path>& file);

// Checks a name: [a-z0-9][a-z0-9_-]{0,63}. Errors: kInvalidArgument saying so.
Status ValidateAgentName(std::string_view name);

// Every agent of <config_dir>/agents, by name. An agent with an error is
// listed with its problems and does not keep the others from loading.
// No agents/ directory: an empty list. Errors: kFailedPrecondition when
// agents/ exists but cannot be listed.
Result<std::vector<AgentDefinition>> LoadAgents(const std::filesystem::path& config_dir);

// One agent. Errors: kInvalidArgument for a bad name; kNotFound naming the
// agents directory (with the closest name, when one is close); the agent's
// problems as kInvalidArgument (a definition with an error never runs).
Result<AgentDefinition> LoadAgent(const std::filesystem::path& config_dir, std::string_view name);

// The workspace of a session of `agent`. `requested` is what the caller asked
// for (a server request's workspace, the CLI's -C; empty: none):
//  - kFixed: the agent's directory; a request for another directory (or a
//    relative path) is refused.
//  - kRoot: `requested` is a relative path below the root, made of plain
//    names (no absolute path, no `..`, no `.`-only or empty request means the
//    root itself); every existing component must stay inside the root after
//    symbolic links are followed; a missing directory is created when
//    agent.create_workspace is set, else refused.
//  - kCaller: `requested` when given (an absolute directory), else
//    `fallback`. The caller decides whether it lets clients choose.
// Returns the canonical directory. Errors: kInvalidArgument saying what was
// wrong and naming the agent; kFailedPrecondition when the agent's own
// directory is missing or cannot be created.
Result<std::filesystem::path> ResolveAgentWorkspace(const AgentDefinition& agent,
                                                    std::string_view requested,
                                                    const std::filesystem::path& fallback);

// What a session of an agent runs with.
struct AgentSettings {
  LoadedConfig loaded;              // every layer, with provenance
  std::filesystem::path workspace;  // canonical
  SessionOptions session;
  bool provider_configured = false;  // see SessionOptionsFromConfig
};

// Loads the layers for a session of `agent`: `base` (its env, user file,
// trust store and flags; its workspace and agent fields are replaced) with
// the agent's file and system.md, in the workspace ResolveAgentWorkspace
// gives for `requested` (`ctx.cwd` is the kCaller fallback), and maps them
// (SessionOptionsFromConfig, with the agent's folder as a root for its
// system prompt). Errors: kInvalidArgument for the agent's problems, a
// refused workspace, configuration errors; as LoadConfig otherwise.
Result<AgentSettings> AgentSessionOptions(const AgentDefinition& agent, ConfigSources base,
                                          const MappingContext& ctx, std::string_view requested);

}  // namespace agentloop::engine
