// Where the learning loop keeps its files, and the user/workspace scope.
//
//   <data_dir>/memory/               user memories   (+ usage.json)
//   <workspace>/.agentloop/memory/   workspace memories (+ usage.json)
//   <config_dir>/skills/             user skills, e.g. ~/.config/agentloop/skills
//   <workspace>/.agentloop/skills/   workspace skills (+ usage.json in each)
//   <data_dir>/proposals/            reflection proposals (one JSON file each)
//
// A server with several tenants gives each its own user scope instead
// (UseTenantUserScope):
//   <data_dir>/tenants/<tenant>/memory/   the tenant's memories
//   <data_dir>/tenants/<tenant>/skills/   the tenant's skills
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::learning {

enum class Scope { kUser, kWorkspace };
std::string_view ScopeName(Scope scope);  // "user" | "workspace"
// Accepts "user" and "workspace" ("project" as an alias of workspace).
std::optional<Scope> ParseScope(std::string_view name);

struct LearningDirs {
  std::filesystem::path user_memory;
  std::filesystem::path workspace_memory;  // empty: no workspace scope
  std::filesystem::path user_skills;
  std::filesystem::path workspace_skills;  // empty: no workspace scope
  std::filesystem::path proposals;
};

// The layout above. `config_dir` is e.g. $XDG_CONFIG_HOME/agentloop or
// ~/.config/agentloop; `workspace` may be empty.
LearningDirs MakeLearningDirs(const std::filesystem::path& data_dir,
                              const std::filesystem::path& config_dir,
                              const std::filesystem::path& workspace);

// Makes the user scope of `dirs` the scope of `tenant`, a tenant of a server
// with several (docs/learning.md, "Tenants"): user_memory becomes
// <data_dir>/tenants/<tenant>/memory and user_skills
// <data_dir>/tenants/<tenant>/skills, so its sessions neither read nor
// write the user's own folders or another tenant's. An empty `tenant` (a
// session no tenant owns) leaves the user scope off (both folders empty).
// Errors: kInvalidArgument for a name that could leave its folder
// (ValidateTenantName), with `dirs` unchanged.
Status UseTenantUserScope(LearningDirs& dirs, const std::filesystem::path& data_dir,
                          std::string_view tenant);

// <data_dir>/tenants/<tenant>: the folder of a tenant's user scope (the
// name unchecked; UseTenantUserScope checks it).
std::filesystem::path TenantLearningDir(const std::filesystem::path& data_dir,
                                        std::string_view tenant);

// <workspace>/.agentloop/memory and <workspace>/.agentloop/skills.
std::filesystem::path WorkspaceMemoryDir(const std::filesystem::path& workspace);
std::filesystem::path WorkspaceSkillsDir(const std::filesystem::path& workspace);

// Clears dirs.workspace_memory and dirs.workspace_skills (no workspace
// scope) when an existing one's real location leaves the (canonical)
// workspace, e.g. a repository whose `.agentloop/memory` links to a folder
// of the user's: the learning tools must not read or write there. Notes
// each cleared folder in `dropped` (may be null).
void ConfineWorkspaceDirs(LearningDirs& dirs, const std::filesystem::path& workspace,
                          std::vector<std::string>* dropped);

// The skills folders that read-only tools may read beyond the workspace
// (ToolContext::extra_read_roots). Each existing folder is canonicalised and
// kept only when its real location stays where it belongs: the workspace
// folder inside the (canonical) workspace, the user folder inside the user's
// (canonical) config or data directory; never the file system root. A
// folder that is a symbolic link out of those (a repository whose
// `.agentloop/skills` links to `/`) is dropped with a note in `dropped`
// (may be null). A kept folder inside the workspace is not returned: the
// workspace is readable anyway.
std::vector<std::filesystem::path> SafeExtraReadRoots(const LearningDirs& dirs,
                                                      const std::filesystem::path& workspace,
                                                      const std::filesystem::path& config_dir,
                                                      const std::filesystem::path& data_dir,
                                                      std::vector<std::string>* dropped);

}  // namespace agentloop::learning
