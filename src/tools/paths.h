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

}  // namespace agentloop::tools
