// Wiring: turns a session specification (SessionOptions) into the parts a
// session's turns run with: the tool registry, the permission policy, the
// hooks and the system prompt. Every front end that needs one of these (a
// session, `agentloop permissions check`, the server) builds it here, so a
// tool is offered, judged and prompted for the same way everywhere.
//
// Pure with respect to the engine: no store, no session lock, no network.
// It reads the file system only where the parts themselves do (the learning
// directories, the memory and skill indexes for the prompt).
//
// Thread-safety: pure functions over values.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/engine.h"
#include "agentloop/hook.h"
#include "agentloop/tool.h"

#include "learning/paths.h"
#include "learning/reflector_hook.h"
#include "mcp/servers.h"
#include "permissions/policy.h"
#include "todo/todo_loop_hook.h"
#include "todo/todo_tool.h"

namespace agentloop::engine {

// What the wiring reads besides the specification.
struct WiringContext {
  EnvMap env;                        // HOME and the XDG directories
  std::filesystem::path data_dir;    // the engine's data directory (memory, proposals)
  std::filesystem::path config_dir;  // the user's configuration directory; empty: none
  // Hidden in every sandbox (bash, MCP servers) besides `config_dir` and
  // `data_dir`: EngineOptions::sandbox_hidden (a server's configuration, its
  // agents' workspace roots).
  std::vector<std::filesystem::path> hidden_paths;
  // Set: the learning tools' and the prompt's user scope is this tenant's
  // (learning::UseTenantUserScope; EngineOptions::tenant_user_scopes), ""
  // none at all. Unset: the user's own.
  std::optional<std::string> user_scope_tenant;
  // Start the specification's MCP servers and offer their tools (a session
  // that runs turns); off, they are left out (permissions check).
  bool start_mcp_servers = false;
};

// The context of a process whose environment is `env` and data directory
// `data_dir` (empty: DefaultDataDir(env)).
WiringContext MakeWiringContext(const EnvMap& env, std::filesystem::path data_dir = {});

struct WiredTools {
  // The built-in tools, todo, ask_user, the memory and skill tools, the
  // specification's extra tools, then the MCP servers' tools, in that order.
  ToolRegistry registry;
  std::shared_ptr<todo::TodoTool> todo;
  learning::LearningDirs learning_dirs;
  // Folders outside the workspace that `read` may read (skills).
  std::vector<std::filesystem::path> extra_read_roots;
  std::vector<std::string> warnings;
  // The MCP servers' states; their processes live as long as their tools.
  std::vector<mcp::ServerStatus> mcp_servers;
};

// Errors: kInvalidArgument for an extra tool that is null or has the name of
// a tool the engine already offers, or a `user_scope_tenant` that cannot
// name a folder; kFailedPrecondition for a required MCP
// server that did not start.
Result<WiredTools> WireTools(const SessionOptions& spec, const WiringContext& ctx);

struct WiredPolicy {
  std::shared_ptr<const permissions::RulesPolicy> rules;
  std::vector<std::string> warnings;
};

// The specification's rules (deny, ask, allow), defaults and read-only
// command over the tools of `registry`; the user's configuration directory
// and the data directory are protected roots. Errors: kInvalidArgument
// naming a rule that does not parse.
Result<WiredPolicy> WirePolicy(const SessionOptions& spec, const ToolRegistry& registry,
                               const WiringContext& ctx);

// Where the built-in hooks report while a turn runs (may be empty).
struct HookSinks {
  todo::NotifyFn notify;
};

struct WiredHooks {
  // In the order they run: the todo replay, the todo loop (when on), usage,
  // the reflector (when on), then the specification's extra hooks.
  std::vector<std::shared_ptr<Hook>> all;
  std::shared_ptr<todo::TodoLoopHook> todo_loop;       // null when off
  std::shared_ptr<learning::ReflectorHook> reflector;  // null when off
};

// `provider` is the one the reflector asks (may be null: no reflection).
// Errors: kInvalidArgument for a null extra hook.
Result<WiredHooks> WireHooks(const SessionOptions& spec, const WiredTools& tools,
                             std::shared_ptr<ModelProvider> provider, const WiringContext& ctx,
                             HookSinks sinks);

// The system prompt: the built-in one (or the specification's), AGENTS.md,
// the memory and skill indexes, and the `instructions` of the ready MCP
// servers in `mcp` (each cut at kMcpInstructionsChars, labelled as the
// server's words).
inline constexpr size_t kMcpInstructionsChars = 2000;
std::string WireSystemPrompt(const SessionOptions& spec, const learning::LearningDirs& dirs,
                             const std::vector<mcp::ServerStatus>& mcp = {});

}  // namespace agentloop::engine
