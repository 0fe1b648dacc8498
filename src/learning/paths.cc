#include "learning/paths.h"

namespace agentloop::learning {

std::string_view ScopeName(Scope scope) { return scope == Scope::kUser ? "user" : "workspace"; }

std::optional<Scope> ParseScope(std::string_view name) {
  if (name == "user") return Scope::kUser;
  if (name == "workspace" || name == "project") return Scope::kWorkspace;
  return std::nullopt;
}

std::filesystem::path WorkspaceMemoryDir(const std::filesystem::path& workspace) {
  return workspace / ".agentloop" / "memory";
}

std::filesystem::path WorkspaceSkillsDir(const std::filesystem::path& workspace) {
  return workspace / ".agentloop" / "skills";
}

LearningDirs MakeLearningDirs(const std::filesystem::path& data_dir,
                              const std::filesystem::path& config_dir,
                              const std::filesystem::path& workspace) {
  LearningDirs d;
  d.user_memory = data_dir / "memory";
  d.proposals = data_dir / "proposals";
  if (!config_dir.empty()) d.user_skills = config_dir / "skills";
  if (!workspace.empty()) {
    d.workspace_memory = WorkspaceMemoryDir(workspace);
    d.workspace_skills = WorkspaceSkillsDir(workspace);
  }
  return d;
}

}  // namespace agentloop::learning
