// Confinement of model-supplied paths to the workspace.
//
// A path may be relative to the workspace root or absolute. It is resolved
// component by component, following symbolic links (at most 40, so a loop is
// reported as such); the resolved location must lie inside the workspace, or
// for reads inside one of ToolContext::extra_read_roots. Components that do
// not exist yet are appended lexically (for writes that create files).
//
// Failures are kPermissionDenied / kNotFound / kInvalidArgument Statuses whose
// message is written for the model; tools turn them into is_error results.
//
// Thread-safety: free functions.
#pragma once

#include <string>
#include <string_view>

#include "agentloop/status.h"
#include "agentloop/tool.h"

#include "env/files.h"

namespace agentloop::tools {

enum class Access { kRead, kWrite };

struct ResolvedPath {
  std::string abs;      // resolved absolute path (symlinks resolved)
  std::string display;  // relative to the workspace when inside it, else abs
  bool exists = false;
  bool is_dir = false;
  bool in_workspace = true;
};

Result<ResolvedPath> ResolvePath(const ToolContext& ctx, std::string_view input, Access access);

// Whether `path` is `root` or below it (both absolute, normalised).
bool IsWithin(std::string_view path, std::string_view root);

// Path shown to the model for an absolute path.
std::string DisplayPath(const ToolContext& ctx, std::string_view abs);

// The directory holding a resolved path, opened race-free, and the name of
// the path's last component in it.
struct OpenedParent {
  UniqueFd dir;
  std::string name;
};

// Opens the directory that holds `rp` beneath its root (the workspace, or
// for reads the extra read root that holds it) along rp.abs, which has every
// symbolic link already resolved and confined by ResolvePath: no link is
// followed on the way (env/files.h OpenDirBeneath), so a directory swapped
// for a symbolic link after ResolvePath makes the open fail instead of
// leading elsewhere. `create` makes missing directories. Open the file with
// OpenEntryNoFollow(dir, name). Errors are written for the model.
Result<OpenedParent> OpenParent(const ToolContext& ctx, const ResolvedPath& rp, Access access,
                                bool create);

// ctx.path_rule for `tool` and `abs`, kNone when the context has none.
PathRule PathRuleFor(const ToolContext& ctx, std::string_view tool, const std::string& abs);

// The error shown when a deny rule covers the real path a tool reached.
std::string DeniedByRule(std::string_view tool, std::string_view display);

}  // namespace agentloop::tools
