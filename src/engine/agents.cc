#include "engine/agents.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <sys/stat.h>

#include "base/strings.h"

namespace agentloop::engine {
namespace {

namespace fs = std::filesystem;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Whether `p` (canonical) is `root` (canonical) or below it.
bool Inside(const fs::path& p, const fs::path& root) {
  const fs::path rel = p.lexically_relative(root);
  if (rel.empty()) return false;
  const std::string first = rel.begin()->string();
  return first != "..";
}

// Fills `def` from its folder; problems instead of errors.
void ReadDefinition(AgentDefinition& def) {
  std::error_code ec;
  if (Status st = ValidateAgentName(def.name); !st.ok()) {
    def.problems.push_back(def.dir.string() + ": " + st.message());
    return;
  }
  const fs::file_status fst = fs::symlink_status(def.file, ec);
  if (!fs::exists(fst)) {
    def.problems.push_back(def.file.string() + ": missing (an agent's folder holds agent.toml)");
    return;
  }
  if (!fs::is_regular_file(fst)) {
    def.problems.push_back(def.file.string() + ": not a regular file");
    return;
  }
  const fs::path prompt = def.dir / kAgentSystemPromptName;
  const fs::file_status pst = fs::symlink_status(prompt, ec);
  if (fs::exists(pst)) {
    // Read only from inside the agent's folder: a link out of it is refused
    // here (and the read itself is confined, ReadConfinedFile).
    const fs::path canon = fs::canonical(prompt, ec);
    const fs::path dir = fs::canonical(def.dir, ec);
    if (canon.empty() || dir.empty() || !Inside(canon, dir) || !fs::is_regular_file(canon, ec)) {
      def.problems.push_back(
          prompt.string() + ": must be a file inside " + def.dir.string() +
          (canon.empty() ? std::string() : " (it leads to " + canon.string() + ")"));
      return;
    }
    def.system_prompt = prompt;
  }
  if (fs::exists(fs::symlink_status(def.dir / "skills", ec))) {
    def.warnings.push_back((def.dir / "skills").string() +
                           ": an agent's skills folder is not read yet; put its skills in the "
                           "user's or the workspace's skills folder");
  }
  Result<AgentFile> file = ReadAgentFile(def.file, def.system_prompt);
  if (!file.ok()) {
    def.problems.push_back(file.error().message());
    return;
  }
  def.warnings.insert(def.warnings.end(), file->warnings.begin(), file->warnings.end());
  const AgentSection& a = file->agent;
  def.description = a.description.value;
  def.is_default = a.is_default.value;
  if (!a.workspace.value.empty()) {
    def.workspace_policy = AgentWorkspacePolicy::kFixed;
    def.workspace = fs::path(a.workspace.value).lexically_normal();
  } else if (!a.workspace_root.value.empty()) {
    def.workspace_policy = AgentWorkspacePolicy::kRoot;
    def.workspace = fs::path(a.workspace_root.value).lexically_normal();
    def.create_workspace = a.create_workspace.value;
  }
}

AgentDefinition DefinitionAt(const fs::path& agents_dir, const std::string& name) {
  AgentDefinition def;
  def.name = name;
  def.dir = agents_dir / name;
  def.file = def.dir / kAgentFileName;
  ReadDefinition(def);
  return def;
}

// The canonical form of an existing directory of the agent's own
// configuration.
Result<fs::path> CanonicalDir(const AgentDefinition& agent, const fs::path& dir,
                              std::string_view key) {
  std::error_code ec;
  fs::path canon = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(canon, ec)) {
    return FailedPrecondition("agent '" + agent.name + "': " + std::string(key) + " " +
                              dir.string() + " is not a directory (" + agent.file.string() + ")");
  }
  return canon;
}

Result<fs::path> BelowRoot(const AgentDefinition& agent, std::string_view requested) {
  AL_ASSIGN_OR_RETURN(fs::path root, CanonicalDir(agent, agent.workspace, "agent.workspace_root"));
  const std::string req(requested);
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("agent '" + agent.name + "': workspace '" + req + "' " + why +
                           " (sessions of this agent work in a subdirectory of " + root.string() +
                           ")");
  };
  // Everything that can be judged from the text is, before anything on
  // disk is looked at or made: a refused value creates nothing.
  if (req.find('\0') != std::string::npos) return refuse("contains a NUL character");
  const fs::path rel(req);
  if (rel.is_absolute()) return refuse("must be a relative path");
  std::vector<fs::path> parts;
  for (const fs::path& part : rel) {
    const std::string name = part.string();
    if (name.empty() || name == ".") continue;
    if (name == "..") return refuse("may not contain '..'");
    if (name.size() > 255) return refuse("has a name longer than 255 bytes");
    parts.push_back(part);
  }
  if (req.size() > 1024) return refuse("is longer than 1024 bytes");
  // The part that exists is resolved and must stay a folder in the root.
  fs::path current = root;
  size_t i = 0;
  for (; i < parts.size(); ++i) {
    const fs::path next = current / parts[i];
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(next, ec);
    if (!fs::exists(st)) break;
    const fs::path canon = fs::canonical(next, ec);
    if (ec) return refuse("leads to " + next.string() + ", which cannot be resolved");
    if (!Inside(canon, root)) {
      return refuse("leads outside the root (" + next.string() + " is a link to " + canon.string() +
                    ")");
    }
    if (!fs::is_directory(canon, ec)) return refuse("names " + canon.string() + ", not a folder");
    current = canon;
  }
  if (i < parts.size() && !agent.create_workspace) {
    return refuse("does not exist (" + (current / parts[i]).string() +
                  "; agent.create_workspace = true creates it)");
  }
  // The rest is made, one folder below the other; on a failure the folders
  // made here are removed again. The first parent is a real directory
  // inside the root (checked above), so mkdir creates exactly this entry; a
  // link raced in is refused by the final check.
  std::vector<fs::path> made;
  auto undo = [&made] {
    for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
  };
  for (; i < parts.size(); ++i) {
    current /= parts[i];
    if (::mkdir(current.c_str(), 0755) != 0) {
      if (errno == EEXIST) continue;
      const int err = errno;
      undo();
      return FailedPrecondition("agent '" + agent.name + "': cannot create " + current.string() +
                                ": " + std::strerror(err));
    }
    made.push_back(current);
  }
  std::error_code ec;
  fs::path canon = fs::canonical(current, ec);
  if (ec || !Inside(canon, root) || !fs::is_directory(canon, ec)) {
    undo();
    return refuse("does not stay a folder inside the root");
  }
  return canon;
}

}  // namespace

std::string_view AgentWorkspacePolicyName(AgentWorkspacePolicy p) {
  switch (p) {
    case AgentWorkspacePolicy::kCaller:
      return "caller";
    case AgentWorkspacePolicy::kFixed:
      return "fixed";
    case AgentWorkspacePolicy::kRoot:
      return "root";
  }
  return "caller";
}

fs::path AgentsDir(const fs::path& config_dir) { return config_dir / "agents"; }

Result<fs::path> AgentConfigDir(const EnvMap& env, const std::optional<fs::path>& file) {
  if (file) return file->parent_path().empty() ? fs::path(".") : file->parent_path();
  if (std::string p = EnvValue(env, "AGENTLOOP_CONFIG"); !p.empty()) {
    fs::path parent = fs::path(p).parent_path();
    return parent.empty() ? fs::path(".") : parent;
  }
  return UserConfigDir(env);
}

Status ValidateAgentName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 64 && name[0] != '_' && name[0] != '-';
  for (char c : name) ok = ok && IsNameChar(c);
  if (ok) return Status::Ok();
  return InvalidArgument("agent name '" + std::string(name) +
                         "' must match [a-z0-9][a-z0-9_-]{0,63} (lower case letters, digits, "
                         "'_' and '-')");
}

Result<std::vector<AgentDefinition>> LoadAgents(const fs::path& config_dir) {
  const fs::path dir = AgentsDir(config_dir);
  std::vector<AgentDefinition> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  fs::directory_iterator it(dir, ec);
  if (ec) return FailedPrecondition("cannot list " + dir.string() + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return FailedPrecondition("cannot list " + dir.string() + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code dec;
    if (!it->is_directory(dec)) continue;
    out.push_back(DefinitionAt(dir, name));
  }
  std::sort(out.begin(), out.end(),
            [](const AgentDefinition& a, const AgentDefinition& b) { return a.name < b.name; });
  return out;
}

Result<AgentDefinition> LoadAgent(const fs::path& config_dir, std::string_view name) {
  AL_RETURN_IF_ERROR(ValidateAgentName(name));
  const fs::path dir = AgentsDir(config_dir);
  std::error_code ec;
  if (!fs::is_directory(dir / std::string(name), ec)) {
    std::string msg = "no agent '" + std::string(name) + "' in " + dir.string();
    if (Result<std::vector<AgentDefinition>> all = LoadAgents(config_dir); all.ok()) {
      std::vector<std::string_view> names;
      for (const AgentDefinition& a : *all) names.emplace_back(a.name);
      if (std::string hint = ClosestMatch(name, names, 3); !hint.empty()) {
        msg += " (did you mean '" + hint + "'?)";
      }
    }
    return NotFound(msg);
  }
  AgentDefinition def = DefinitionAt(dir, std::string(name));
  if (!def.ok()) {
    std::string msg = "agent '" + def.name + "' cannot run:";
    for (const std::string& p : def.problems) msg += "\n  " + p;
    return InvalidArgument(msg);
  }
  return def;
}

Result<fs::path> ResolveAgentWorkspace(const AgentDefinition& agent, std::string_view requested,
                                       const fs::path& fallback) {
  std::error_code ec;
  switch (agent.workspace_policy) {
    case AgentWorkspacePolicy::kFixed: {
      AL_ASSIGN_OR_RETURN(fs::path ws, CanonicalDir(agent, agent.workspace, "agent.workspace"));
      if (!requested.empty()) {
        const fs::path asked_path(std::string{requested});
        fs::path asked;
        if (asked_path.is_absolute()) asked = fs::weakly_canonical(asked_path, ec);
        if (asked.empty() || ec || asked != ws) {
          return InvalidArgument("agent '" + agent.name + "' works only in " + ws.string() +
                                 " (agent.workspace, " + agent.file.string() +
                                 "); a session cannot choose workspace '" + std::string(requested) +
                                 "'");
        }
      }
      return ws;
    }
    case AgentWorkspacePolicy::kRoot:
      return BelowRoot(agent, requested);
    case AgentWorkspacePolicy::kCaller:
      break;
  }
  fs::path ws = requested.empty() ? fallback : fs::path(std::string(requested));
  if (!ws.is_absolute()) {
    return InvalidArgument("workspace '" + ws.string() + "' must be an absolute path");
  }
  fs::path canon = fs::canonical(ws, ec);
  if (ec || !fs::is_directory(canon, ec)) {
    return InvalidArgument("workspace " + ws.string() + " is not a directory");
  }
  return canon;
}

Result<AgentSettings> AgentSessionOptions(const AgentDefinition& agent, ConfigSources base,
                                          const MappingContext& ctx, std::string_view requested) {
  if (!agent.ok()) {
    std::string msg = "agent '" + agent.name + "' cannot run:";
    for (const std::string& p : agent.problems) msg += "\n  " + p;
    return InvalidArgument(msg);
  }
  AgentSettings out;
  AL_ASSIGN_OR_RETURN(out.workspace, ResolveAgentWorkspace(agent, requested, ctx.cwd));
  base.workspace = out.workspace;
  base.agent_file = agent.file;
  base.agent_system_prompt = agent.system_prompt;
  Result<LoadedConfig> loaded = LoadConfig(base);
  if (!loaded.ok()) return InvalidArgument(loaded.error().message());
  out.loaded = std::move(*loaded);
  MappingContext mctx = ctx;
  mctx.prompt_roots.push_back(agent.dir);
  AL_ASSIGN_OR_RETURN(out.session, SessionOptionsFromConfig(out.loaded.config, out.workspace, mctx,
                                                            &out.provider_configured));
  out.session.subagents.workspace_trusted = out.loaded.workspace_trusted;
  return out;
}

}  // namespace agentloop::engine
