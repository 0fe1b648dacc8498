// From the configuration layers (src/config) to what Engine::Create and
// Engine::OpenSession take: the one mapping of Config to EngineOptions and
// SessionOptions, shared by the CLI and the server.
//
// Thread-safety: pure functions over values (they read files named by the
// configuration, nothing else).
#pragma once

#include <filesystem>
#include <vector>

#include "agentloop/engine.h"
#include "agentloop/status.h"

#include "config/config.h"

namespace agentloop::engine {

// What the mapping needs besides the configuration.
struct MappingContext {
  // The process environment: API keys and webhook secrets named by the
  // configuration, HOME and XDG_CONFIG_HOME (the user's config directory).
  EnvMap env;
  // Relative paths from flags and the environment are relative to this;
  // those from a file to the file's directory.
  std::filesystem::path cwd;
  // A person is at a terminal (SessionOptions::interactive).
  bool interactive = false;
  // Directories besides the workspace and the user's config directory from
  // which system_prompt_file may be read (an agent's folder).
  std::vector<std::filesystem::path> prompt_roots;
};

// The process-wide part of the mapping: the environment and the store's
// durability (store.sync). Every command that opens the store uses it, so
// `agentloop approve` in another process honours the same setting.
EngineOptions EngineOptionsFromConfig(const Config& config, const EnvMap& env);

// The session part. `workspace` is absolute. `provider_configured` (may be
// null) is set when provider.kind was set, or inferred from
// provider.script or an API key variable (OPENAI_API_KEY,
// ANTHROPIC_API_KEY). Errors: kInvalidArgument naming the key and its origin
// (an unknown provider, an unset provider.api_key_env variable, a webhook
// approver without a URL, a system prompt file that cannot be read or lies
// outside the workspace, the user's config directory and
// ctx.prompt_roots).
Result<SessionOptions> SessionOptionsFromConfig(const Config& config,
                                                const std::filesystem::path& workspace,
                                                const MappingContext& ctx,
                                                bool* provider_configured);

}  // namespace agentloop::engine
