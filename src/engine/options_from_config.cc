#include "engine/options_from_config.h"

#include "engine/system_prompt.h"

namespace agentloop::engine {
namespace {

namespace fs = std::filesystem;

// A path from the configuration: relative paths in a file are relative to
// that file's directory, from flags and the environment to the current
// directory.
fs::path ResolvePath(const Sourced<std::string>& v, const MappingContext& ctx) {
  fs::path p(v.value);
  if (p.is_absolute()) return p;
  if (v.origin.kind == ConfigOrigin::Kind::kFile) {
    return fs::path(v.origin.source).parent_path() / p;
  }
  return ctx.cwd / p;
}

void AddRules(const std::vector<Sourced<std::string>>& in,
              std::vector<SessionOptions::RuleSource>& out) {
  for (const Sourced<std::string>& r : in) {
    std::string source =
        r.origin.kind == ConfigOrigin::Kind::kFlag ? r.origin.source : r.origin.ToString();
    out.push_back({r.value, source});
  }
}

}  // namespace

EngineOptions EngineOptionsFromConfig(const Config& config, const EnvMap& env) {
  EngineOptions o;
  o.env = env;
  // The config module validated the value (an unknown one became "full").
  o.store_sync = config.store.sync.value == "normal" ? StoreSync::kNormal : StoreSync::kFull;
  o.store_url = config.store.url.value;
  o.store_lease_ttl = std::chrono::milliseconds(config.store.lease_ttl_ms.value);
  o.store_pool_timeout = std::chrono::milliseconds(config.store.pool_timeout_ms.value);
  o.summary_timeout = std::chrono::milliseconds(config.compaction.summary_timeout_ms.value);
  return o;
}

Result<SessionOptions> SessionOptionsFromConfig(const Config& config, const fs::path& workspace,
                                                const MappingContext& ctx,
                                                bool* provider_configured) {
  SessionOptions o;
  o.workspace = workspace;

  // Provider: configured, or inferred from --script or an API key.
  std::string kind = config.provider.kind.value;
  if (kind.empty() && !config.provider.script.value.empty()) kind = "script";
  if (kind.empty() && !EnvValue(ctx.env, "OPENAI_API_KEY").empty()) kind = "openai";
  if (kind.empty() && !EnvValue(ctx.env, "ANTHROPIC_API_KEY").empty()) kind = "anthropic";
  // A base URL alone names an OpenAI-compatible server (llama.cpp, vLLM,
  // Ollama), which may want no key.
  if (kind.empty() && !config.provider.base_url.value.empty()) kind = "openai";
  if (provider_configured != nullptr) *provider_configured = !kind.empty();
  if (!kind.empty()) {
    Result<ProviderKind> k = ParseProviderKind(kind);
    if (!k.ok()) {
      return InvalidArgument(k.error().message() + " (" + config.provider.kind.origin.ToString() +
                             ")");
    }
    o.provider = *k;
  }
  o.model = config.provider.model.value;
  o.base_url = config.provider.base_url.value;
  if (!config.provider.api_key_env.value.empty()) {
    // The variable's name is pinned to a new session (never the key).
    o.api_key_env = config.provider.api_key_env.value;
    o.api_key = EnvValue(ctx.env, config.provider.api_key_env.value);
    if (o.api_key.empty()) {
      return InvalidArgument("provider.api_key_env names " + config.provider.api_key_env.value +
                             " (" + config.provider.api_key_env.origin.ToString() +
                             "), but that variable is not set");
    }
  }
  if (!config.provider.script.value.empty()) {
    o.script_path = ResolvePath(config.provider.script, ctx).string();
  }
  o.use_max_tokens_field = config.provider.max_tokens_field.value == "max_tokens";
  if (config.provider.images.value == "send") o.images = true;
  if (config.provider.images.value == "describe") o.images = false;
  if (config.provider.context_window.value > 0) {
    o.context_window = config.provider.context_window.value;
  }
  if (config.provider.max_output_tokens.value > 0) {
    o.max_output_tokens = config.provider.max_output_tokens.value;
  }

  // Command and budgets: only values that were set somewhere; otherwise the
  // engine applies the command's defaults (also for a resumed session whose
  // command differs).
  o.command = config.command.value;
  const CommandBudgetConfig& b = config.budget[static_cast<size_t>(o.command)];
  auto set = [](const Sourced<int64_t>& v) {
    return v.origin.kind != ConfigOrigin::Kind::kDefault;
  };
  if (set(b.max_tool_calls)) o.max_tool_calls = static_cast<int>(b.max_tool_calls.value);
  if (set(b.max_tokens)) o.max_tokens = b.max_tokens.value;
  if (set(b.max_turns)) o.max_turns = static_cast<int>(b.max_turns.value);
  if (set(b.max_wall_time_ms) && b.max_wall_time_ms.value > 0) {
    o.max_wall_time = std::chrono::milliseconds(b.max_wall_time_ms.value);
  }

  if (!config.system_prompt_file.value.empty()) {
    fs::path p = ResolvePath(config.system_prompt_file, ctx);
    // Read only from inside the workspace, the user's config directory or
    // the context's roots, never through a symbolic link to a file elsewhere.
    std::vector<fs::path> roots = {workspace};
    if (auto dir = UserConfigDir(ctx.env); dir.ok()) roots.push_back(*dir);
    roots.insert(roots.end(), ctx.prompt_roots.begin(), ctx.prompt_roots.end());
    Result<std::string> text = ReadConfinedFile(p, roots, size_t{1} << 20);
    if (!text.ok()) {
      return InvalidArgument("system prompt file: " + text.error().message() + " (" +
                             config.system_prompt_file.origin.ToString() + ")");
    }
    o.system_prompt = std::move(*text);
    o.system_prompt_source = p.string();
  }

  AddRules(config.permissions.allow, o.allow);
  AddRules(config.permissions.ask, o.ask);
  AddRules(config.permissions.deny, o.deny);
  if (config.permissions.default_decision.value) {
    o.default_mutating = *config.permissions.default_decision.value;
    o.default_read_only = *config.permissions.default_decision.value;
  }

  switch (config.approver.kind.value) {
    case ApproverKind::kAuto:
      o.approver = ApproverMode::kAuto;
      break;
    case ApproverKind::kConsole:
      o.approver = ApproverMode::kConsole;
      break;
    case ApproverKind::kDurable:
      o.approver = ApproverMode::kDurable;
      break;
    case ApproverKind::kWebhook:
      o.approver = ApproverMode::kWebhook;
      break;
  }
  o.interactive = ctx.interactive;
  o.webhook_url = config.approver.webhook_url.value;
  if (!config.approver.secret_env.value.empty()) {
    o.webhook_secret_env = config.approver.secret_env.value;
    o.webhook_secret = EnvValue(ctx.env, config.approver.secret_env.value);
  }
  if (o.approver == ApproverMode::kWebhook && o.webhook_url.empty()) {
    return InvalidArgument("approver.kind is webhook (" + config.approver.kind.origin.ToString() +
                           ") but approver.webhook_url is not set");
  }

  // The config module checked the values.
  o.sandbox = ParseSandboxMode(config.tools.sandbox.value).value_or(SandboxMode::kOff);
  o.sandbox_network = config.tools.network.value;
  o.sandbox_fallback = config.tools.sandbox_fallback.value == "warn" ? SandboxFallback::kWarn
                                                                     : SandboxFallback::kRefuse;
  o.bash_timeout_ms = static_cast<int>(config.tools.bash_timeout_ms.value);
  for (const Sourced<std::string>* secret :
       {&config.provider.api_key_env, &config.approver.secret_env}) {
    if (!secret->value.empty()) o.env_remove.push_back(secret->value);
  }
  for (const Sourced<std::string>& name : config.tools.env.pass) o.env_pass.push_back(name.value);
  for (const auto& [name, value] : config.tools.env.set) o.env_set[name] = value.value;

  o.todo_loop = config.todo_loop.enabled.value;
  o.todo_max_rounds = static_cast<int>(config.todo_loop.max_rounds.value);
  o.todo_max_strikes = static_cast<int>(config.todo_loop.max_strikes.value);
  o.todo_inject_state = config.todo_loop.inject_state.value;
  o.todo_max_injected_tasks = static_cast<int>(config.todo_loop.max_injected_tasks.value);
  o.reflector = config.reflector.enabled.value;
  o.subagents.enabled = config.subagents.enabled.value;
  o.subagents.caps.max_depth = static_cast<int>(config.subagents.max_depth.value);
  o.subagents.caps.max_concurrent = static_cast<int>(config.subagents.max_concurrent.value);
  o.subagents.caps.max_spawns = static_cast<int>(config.subagents.max_spawns.value);
  o.mcp_servers = config.mcp_servers;
  return o;
}

}  // namespace agentloop::engine
