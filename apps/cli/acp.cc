// `agentloop acp`: agentloop as an Agent Client Protocol agent (acp/agent.h,
// docs/acp.md). The editor starts the process and speaks JSON-RPC over its
// stdin and stdout; stdout carries only protocol messages, everything else
// goes to stderr. Each session's workspace is the `cwd` the editor names,
// with that workspace's configuration layers and this command line's flags
// (provider, model, rules, budgets), as `agentloop chat -C CWD` would have.
#include <iostream>
#include <string>

#include "acp/agent.h"
#include "commands.h"
#include "settings.h"

#ifndef AL_VERSION
#define AL_VERSION "0.0.0"
#endif

namespace agentloop::cli {

int CmdAcp(const CommandEnv& e) {
  Result<CliSettings> base = LoadSettings(e.args, e.ctx);
  if (!base.ok()) {
    e.err << "agentloop: " << base.error().message() << "\n";
    return kExitUsage;
  }
  for (const std::string& w : base->loaded.warnings) e.err << "agentloop: warning: " << w << "\n";
  if (!base->provider_configured) {
    e.err << HowToConfigureProvider();
    return kExitUsage;
  }
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *base);
  if (!engine.ok()) {
    e.err << "agentloop: " << engine.error().message() << "\n";
    return ExitCodeFor(engine.error());
  }
  // The settings of a session in `cwd`: this command line with -C CWD.
  auto settings_for = [&e](const std::filesystem::path& cwd) -> Result<CliSettings> {
    CliArgs args = e.args;
    args.workspace = cwd.string();
    AL_ASSIGN_OR_RETURN(CliSettings s, LoadSettings(args, e.ctx));
    for (const std::string& w : s.loaded.warnings) e.err << "agentloop: warning: " << w << "\n";
    return s;
  };
  acp::AgentOptions options;
  options.version = AL_VERSION;
  options.new_session = [&](const std::filesystem::path& cwd) -> Result<SessionOptions> {
    AL_ASSIGN_OR_RETURN(CliSettings s, settings_for(cwd));
    if (!s.provider_configured) return InvalidArgument(HowToConfigureProvider());
    return s.session;
  };
  options.load_session = [&](const std::string& id,
                             const std::filesystem::path& cwd) -> Result<SessionOptions> {
    AL_ASSIGN_OR_RETURN(CliSettings s, settings_for(cwd));
    CliArgs args = e.args;
    args.workspace = cwd.string();
    // The stored session's own settings, with what the flags change.
    FillFromStoredSession(**engine, id, s, args);
    if (!s.provider_configured) return InvalidArgument(HowToConfigureProvider());
    return s.session;
  };
  acp::Agent agent(
      **engine, std::move(options),
      [&e](const std::string& line) { e.out << line << '\n'
                                            << std::flush; }, e.err);
  std::string line;
  while (std::getline(e.in, line)) agent.HandleLine(line);
  agent.Shutdown();
  return kExitOk;
}

}  // namespace agentloop::cli
