#include "settings.h"

#include <algorithm>
#include <system_error>

#include "config/trust.h"
#include "engine/agents.h"
#include "tools/builtin.h"

namespace agentloop::cli {
namespace fs = std::filesystem;

Result<fs::path> ResolveWorkspace(const CliArgs& args, const CliContext& ctx) {
  fs::path ws = args.workspace ? fs::path(*args.workspace) : ctx.cwd;
  if (ws.is_relative()) ws = ctx.cwd / ws;
  std::error_code ec;
  if (!fs::is_directory(ws, ec)) {
    return InvalidArgument("workspace " + ws.string() + " is not a directory");
  }
  fs::path canon = fs::weakly_canonical(ws, ec);
  if (ec) return ws.lexically_normal();
  return canon;
}

engine::MappingContext MappingContextFor(const CliContext& ctx) {
  engine::MappingContext m;
  m.env = ctx.env;
  m.cwd = ctx.cwd;
  m.interactive = ctx.stdin_tty && ctx.stderr_tty;
  return m;
}

namespace {

bool RunsTurns(Subcommand s) {
  return s == Subcommand::kRun || s == Subcommand::kChat || s == Subcommand::kResume ||
         s == Subcommand::kApprove || s == Subcommand::kDeny || s == Subcommand::kAnswer ||
         s == Subcommand::kAcp;
}

// See LoadSettings.
Status CheckSandbox(const CliArgs& args, const CliContext& ctx, CliSettings& s) {
  if (s.session.sandbox == SandboxMode::kOff || !RunsTurns(args.subcommand)) return Status::Ok();
  const std::string why =
      ctx.sandbox_unavailable ? ctx.sandbox_unavailable() : BashSandboxUnavailableReason();
  if (why.empty()) return Status::Ok();
  const Config& c = s.loaded.config;
  const std::string what = "the bash sandbox \"" + c.tools.sandbox.value + "\" (tools.sandbox, " +
                           c.tools.sandbox.origin.ToString() + ") cannot run here: " + why;
  if (IsReadOnly(s.session.command)) {
    s.loaded.warnings.push_back(what + "; bash is not offered to the read-only '" +
                                std::string(CommandKindName(s.session.command)) + "' command");
    return Status::Ok();
  }
  if (s.session.sandbox_fallback == SandboxFallback::kRefuse) {
    return InvalidArgument(what +
                           "; nothing was run. Set tools.sandbox_fallback = \"warn\" to run bash "
                           "unsandboxed, or tools.sandbox = \"off\" (or --sandbox off)");
  }
  s.loaded.warnings.push_back(what + "; bash runs UNSANDBOXED (tools.sandbox_fallback = warn, " +
                              c.tools.sandbox_fallback.origin.ToString() + ")");
  return Status::Ok();
}

}  // namespace

ConfigSources BaseSources(const CliArgs& args, const CliContext& ctx) {
  ConfigSources sources;
  sources.env = ctx.env;
  if (args.config_file) {
    fs::path file(*args.config_file);
    sources.user_file = file.is_relative() ? ctx.cwd / file : file;
  }
  if (auto data_dir = DefaultDataDir(ctx.env); data_dir.ok()) {
    sources.trust_store = TrustStorePath(*data_dir);
  }
  for (const ConfigFlag& f : args.config_flags) {
    sources.flags.push_back({f.key, f.value, f.flag});
  }
  return sources;
}

Result<fs::path> ConfigDirFor(const CliArgs& args, const CliContext& ctx) {
  const ConfigSources sources = BaseSources(args, ctx);
  return engine::AgentConfigDir(ctx.env, sources.user_file);
}

namespace {

// `--agent NAME`: the agent's layers and workspace (engine/agents.h).
Status LoadAgentSettings(const CliArgs& args, const CliContext& ctx, ConfigSources sources,
                         CliSettings& s) {
  AL_ASSIGN_OR_RETURN(fs::path config_dir, ConfigDirFor(args, ctx));
  Result<engine::AgentDefinition> agent = engine::LoadAgent(config_dir, *args.agent);
  if (!agent.ok()) return InvalidArgument(agent.error().message());
  // -C names a directory as usual (relative to the current one), except
  // for an agent with a workspace root: there it names the subdirectory.
  std::string requested = args.workspace.value_or("");
  if (agent->workspace_policy == engine::AgentWorkspacePolicy::kCaller ||
      (agent->workspace_policy == engine::AgentWorkspacePolicy::kFixed && args.workspace)) {
    AL_ASSIGN_OR_RETURN(fs::path ws, ResolveWorkspace(args, ctx));
    requested = ws.string();
  }
  Result<engine::AgentSettings> a =
      engine::AgentSessionOptions(*agent, std::move(sources), MappingContextFor(ctx), requested);
  if (!a.ok()) return InvalidArgument(a.error().message());
  s.loaded = std::move(a->loaded);
  s.workspace = std::move(a->workspace);
  s.session = std::move(a->session);
  s.provider_configured = a->provider_configured;
  for (const std::string& w : agent->warnings) {
    if (std::find(s.loaded.warnings.begin(), s.loaded.warnings.end(), w) ==
        s.loaded.warnings.end()) {
      s.loaded.warnings.push_back(w);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<CliSettings> LoadSettings(const CliArgs& args, const CliContext& ctx) {
  CliSettings s;
  ConfigSources sources = BaseSources(args, ctx);
  if (sources.user_file) {
    std::error_code ec;
    if (!fs::is_regular_file(*sources.user_file, ec)) {
      return InvalidArgument("--config " + sources.user_file->string() + " is not a file");
    }
  }
  if (args.agent) {
    AL_RETURN_IF_ERROR(LoadAgentSettings(args, ctx, std::move(sources), s));
  } else {
    AL_ASSIGN_OR_RETURN(s.workspace, ResolveWorkspace(args, ctx));
    sources.workspace = s.workspace;
    Result<LoadedConfig> loaded = LoadConfig(sources);
    if (!loaded.ok()) {
      // Every configuration problem is a usage/configuration error (exit 2).
      return InvalidArgument(loaded.error().message());
    }
    s.loaded = std::move(*loaded);
    AL_ASSIGN_OR_RETURN(s.session, engine::SessionOptionsFromConfig(s.loaded.config, s.workspace,
                                                                    MappingContextFor(ctx),
                                                                    &s.provider_configured));
    s.session.subagents.workspace_trusted = s.loaded.workspace_trusted;
  }
  s.output = s.loaded.config.output.value;
  if (args.session) s.session.session_id = *args.session;
  s.session.continue_latest = args.continue_latest;
  AL_RETURN_IF_ERROR(CheckSandbox(args, ctx, s));
  return s;
}

}  // namespace agentloop::cli
