// From the command line to the configuration layers and, through the
// engine's mapping (engine/options_from_config.h), to the SessionOptions of
// the CLI's sessions.
//
// Thread-safety: pure functions over values (they read files named by the
// configuration, nothing else).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/engine.h"
#include "agentloop/status.h"

#include "args.h"
#include "config/config.h"
#include "engine/options_from_config.h"

namespace agentloop::cli {

// What the process knows about its surroundings (passed explicitly so tests
// never touch the real environment).
struct CliContext {
  EnvMap env;
  std::filesystem::path cwd;
  bool stdin_tty = false;
  bool stdout_tty = false;
  bool stderr_tty = false;
  // Why the bash sandbox cannot run on this machine, empty when it can;
  // unset: bubblewrap is probed (BashSandboxUnavailableReason).
  std::function<std::string()> sandbox_unavailable;
};

struct CliSettings {
  LoadedConfig loaded;
  std::filesystem::path workspace;  // absolute, exists
  OutputFormat output = OutputFormat::kText;
  SessionOptions session;
  // provider.kind was set, or inferred from --script or an API key variable.
  bool provider_configured = false;
};

// -C/--workspace (relative to ctx.cwd) or the current directory, made
// absolute and normal. Errors: kInvalidArgument when it is not a directory.
Result<std::filesystem::path> ResolveWorkspace(const CliArgs& args, const CliContext& ctx);

// Loads the layers (user file, with --agent the agent's file, workspace
// file, environment, the flags of `args`) and maps them. With --agent the
// workspace follows the agent's policy (-C names the subdirectory of an
// agent with a workspace root). Errors: kInvalidArgument for configuration
// errors (named file and line, variable or flag), unreadable files named by
// the configuration (system prompt file), an unknown or broken agent and a
// workspace its policy refuses; the CLI exits 2 on them.
//
// For a subcommand that runs turns with a bash sandbox configured, checks
// once that bubblewrap can run here. When it cannot: with
// tools.sandbox_fallback = refuse, kInvalidArgument saying why and what to
// set; with warn, one warning (bash then runs unsandboxed); for a read-only
// command, one warning that bash is not offered (it never runs unsandboxed
// there).
Result<CliSettings> LoadSettings(const CliArgs& args, const CliContext& ctx);

// The configuration layers' sources of this command line (environment,
// --config, trust store, flags), without a workspace or agent.
ConfigSources BaseSources(const CliArgs& args, const CliContext& ctx);
// The directory whose agents/ holds the agents: that of --config FILE or
// $AGENTLOOP_CONFIG, else the user's config directory.
Result<std::filesystem::path> ConfigDirFor(const CliArgs& args, const CliContext& ctx);

// The engine's mapping context for this process (environment, current
// directory, whether a person is at a terminal).
engine::MappingContext MappingContextFor(const CliContext& ctx);

}  // namespace agentloop::cli
