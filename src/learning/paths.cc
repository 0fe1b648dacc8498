#include "learning/paths.h"

#include "base/strings.h"

namespace agentloop::learning {
namespace {

bool IsWithinDir(const std::filesystem::path& path, const std::filesystem::path& root) {
  if (root.empty()) return false;
  std::string p = path.generic_string();
  std::string r = root.generic_string();
  if (r == "/") return true;
  return p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && p[r.size()] == '/');
}

std::filesystem::path CanonicalOrEmpty(const std::filesystem::path& p) {
  if (p.empty()) return {};
  std::error_code ec;
  auto c = std::filesystem::canonical(p, ec);
  return ec ? std::filesystem::path() : c;
}

}  // namespace

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

std::filesystem::path TenantLearningDir(const std::filesystem::path& data_dir,
                                        std::string_view tenant) {
  return data_dir / "tenants" / std::string(tenant);
}

Status UseTenantUserScope(LearningDirs& dirs, const std::filesystem::path& data_dir,
                          std::string_view tenant) {
  if (tenant.empty()) {
    dirs.user_memory.clear();
    dirs.user_skills.clear();
    return Status::Ok();
  }
  if (Status valid = ValidateTenantName(tenant); !valid.ok()) return valid;
  const std::filesystem::path own = TenantLearningDir(data_dir, tenant);
  dirs.user_memory = own / "memory";
  dirs.user_skills = own / "skills";
  return Status::Ok();
}

void ConfineWorkspaceDirs(LearningDirs& dirs, const std::filesystem::path& workspace,
                          std::vector<std::string>* dropped) {
  const auto ws = CanonicalOrEmpty(workspace);
  for (std::filesystem::path* dir : {&dirs.workspace_memory, &dirs.workspace_skills}) {
    if (dir->empty()) continue;
    // The folder, or the nearest existing entry above it, must stay inside;
    // a dangling link on the way (creating the folder would follow it)
    // counts as outside.
    std::filesystem::path probe = *dir;
    std::error_code ec;
    while (!std::filesystem::exists(std::filesystem::symlink_status(probe, ec)) &&
           probe != probe.parent_path()) {
      probe = probe.parent_path();
    }
    std::filesystem::path canon = CanonicalOrEmpty(probe);
    if (!canon.empty() && !ws.empty() && IsWithinDir(canon, ws)) continue;
    if (canon.empty()) canon = probe;
    if (dropped != nullptr) {
      dropped->push_back("the workspace folder " + dir->string() + " leads to " + canon.string() +
                         ", outside the workspace; the workspace scope of the learning tools "
                         "is off");
    }
    dir->clear();
  }
}

std::vector<std::filesystem::path> SafeExtraReadRoots(const LearningDirs& dirs,
                                                      const std::filesystem::path& workspace,
                                                      const std::filesystem::path& config_dir,
                                                      const std::filesystem::path& data_dir,
                                                      std::vector<std::string>* dropped) {
  std::vector<std::filesystem::path> out;
  const auto ws = CanonicalOrEmpty(workspace);
  const auto config = CanonicalOrEmpty(config_dir);
  const auto data = CanonicalOrEmpty(data_dir);
  auto consider = [&](const std::filesystem::path& dir, bool user) {
    auto canon = CanonicalOrEmpty(dir);
    if (canon.empty()) return;  // missing: nothing to read
    bool ok = canon != canon.root_path();
    if (ok && user) ok = IsWithinDir(canon, config) || IsWithinDir(canon, data);
    if (ok && !user) ok = IsWithinDir(canon, ws);
    if (!ok) {
      if (dropped != nullptr) {
        dropped->push_back("the skills folder " + dir.string() + " leads to " + canon.string() +
                           ", outside " +
                           (user ? "the user's config and data directories" : "the workspace") +
                           "; its files are not readable by the tools");
      }
      return;
    }
    if (!ws.empty() && IsWithinDir(canon, ws)) return;
    out.push_back(canon);
  };
  consider(dirs.user_skills, true);
  consider(dirs.workspace_skills, false);
  return out;
}

}  // namespace agentloop::learning
