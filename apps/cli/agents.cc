// `agentloop agents list | show NAME`: the agents of the configuration
// directory (engine/agents.h, docs/agents.md).
#include "engine/agents.h"

#include "base/strings.h"
#include "commands.h"
#include "config/config.h"

namespace agentloop::cli {
namespace {

namespace fs = std::filesystem;

int AgentsError(const CommandEnv& e, bool json, const Status& s) {
  if (json) e.out << DumpJson(Json{{"error", s.message()}}) << "\n";
  e.err << "agentloop: " << s.message() << "\n";
  return s.code() == Code::kInvalidArgument || s.code() == Code::kNotFound ? kExitUsage
                                                                           : kExitFailed;
}

Json AgentJson(const engine::AgentDefinition& a) {
  Json j{{"name", a.name},
         {"description", a.description},
         {"dir", a.dir.string()},
         {"workspace_policy", std::string(engine::AgentWorkspacePolicyName(a.workspace_policy))},
         {"workspace", a.workspace.empty() ? Json(nullptr) : Json(a.workspace.string())},
         {"create_workspace", a.create_workspace},
         {"system_prompt", a.system_prompt ? Json(a.system_prompt->string()) : Json(nullptr)},
         {"ok", a.ok()},
         {"problems", a.problems},
         {"warnings", a.warnings}};
  return j;
}

std::string WorkspaceText(const engine::AgentDefinition& a) {
  switch (a.workspace_policy) {
    case engine::AgentWorkspacePolicy::kFixed:
      return a.workspace.string() + " (every session)";
    case engine::AgentWorkspacePolicy::kRoot:
      return "a subdirectory of " + a.workspace.string() +
             (a.create_workspace ? " (created when missing)" : "");
    case engine::AgentWorkspacePolicy::kCaller:
      break;
  }
  return "the caller's (-C or the current directory)";
}

int List(const CommandEnv& e, bool json, const fs::path& config_dir) {
  Result<std::vector<engine::AgentDefinition>> agents = engine::LoadAgents(config_dir);
  if (!agents.ok()) return AgentsError(e, json, agents.error());
  if (json) {
    Json arr = Json::array();
    for (const auto& a : *agents) arr.push_back(AgentJson(a));
    e.out << DumpJson(Json{{"agents_dir", engine::AgentsDir(config_dir).string()},
                           {"agents", std::move(arr)}})
          << "\n";
    return kExitOk;
  }
  if (agents->empty()) {
    e.out << "no agents in " << engine::AgentsDir(config_dir).string() << "\n";
    return kExitOk;
  }
  size_t width = 0;
  for (const auto& a : *agents) width = std::max(width, a.name.size());
  for (const auto& a : *agents) {
    e.out << a.name << std::string(width - a.name.size() + 2, ' ')
          << (a.ok() ? a.description : "(cannot run)") << "\n";
    for (const std::string& p : a.problems) e.out << "  error: " << p << "\n";
  }
  return kExitOk;
}

int Show(const CommandEnv& e, bool json, const fs::path& config_dir, const std::string& name) {
  Result<engine::AgentDefinition> agent = engine::LoadAgent(config_dir, name);
  if (!agent.ok()) return AgentsError(e, json, agent.error());
  // The agent's own settings: the user file, the agent's file, the
  // environment and flags (a workspace's file joins only in a session).
  ConfigSources sources = BaseSources(e.args, e.ctx);
  sources.agent_file = agent->file;
  sources.agent_system_prompt = agent->system_prompt;
  Result<LoadedConfig> loaded = LoadConfig(sources);
  if (!loaded.ok()) return AgentsError(e, json, InvalidArgument(loaded.error().message()));
  for (const std::string& w : loaded->warnings) e.err << "agentloop: warning: " << w << "\n";
  if (json) {
    Json entries = Json::array();
    for (const ConfigEntry& c : DescribeConfig(loaded->config)) {
      entries.push_back(Json{{"key", c.key}, {"value", c.value}, {"origin", c.origin}});
    }
    Json files = Json::array();
    for (const auto& f : loaded->files) files.push_back(f.string());
    e.out << DumpJson(Json{{"agent", AgentJson(*agent)}, {"entries", entries}, {"files", files}})
          << "\n";
    return kExitOk;
  }
  e.out << "# agent " << agent->name << "\n";
  if (!agent->description.empty()) e.out << "# description " << agent->description << "\n";
  e.out << "# folder " << agent->dir.string() << "\n";
  e.out << "# workspace " << WorkspaceText(*agent) << "\n";
  e.out << "# system prompt "
        << (agent->system_prompt ? agent->system_prompt->string() : std::string("built-in"))
        << "\n";
  for (const auto& f : loaded->files) e.out << "# read " << f.string() << "\n";
  e.out << FormatConfig(loaded->config);
  return kExitOk;
}

}  // namespace

int CmdAgents(const CommandEnv& e) {
  bool json = false;
  if (auto o = e.args.FlagValue("output")) json = *o != "text";
  Result<fs::path> config_dir = ConfigDirFor(e.args, e.ctx);
  if (!config_dir.ok()) return AgentsError(e, json, config_dir.error());
  const auto& p = e.args.positionals;
  if (p[0] == "list") return List(e, json, *config_dir);
  return Show(e, json, *config_dir, p[1]);
}

}  // namespace agentloop::cli
