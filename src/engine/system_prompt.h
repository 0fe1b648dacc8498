// The system prompt of a session: the built-in instructions (or the user's
// replacement), the workspace, the command, the workspace's AGENTS.md files
// (from the repository root down to the workspace) and extra sections such
// as the memory and skill indexes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

struct SystemPromptParts {
  std::optional<std::string> base_override;
  std::filesystem::path workspace;
  CommandKind command = CommandKind::kCode;
  std::vector<std::string> extra_sections;
};

// AGENTS.md files that apply to `workspace`, outermost first: the
// workspace's own and its parents' up to the repository root (the nearest
// directory with a .git entry). Outside a repository only the workspace's.
// A directory without AGENTS.md contributes its CLAUDE.md instead.
// Each is returned by its canonical path, and only when that stays inside
// the repository root (outside a repository: the workspace); an AGENTS.md
// that is a symbolic link to a file elsewhere is left out.
std::vector<std::filesystem::path> FindAgentsFiles(const std::filesystem::path& workspace);

// Reads `file` (at most `max_bytes`) only when its canonical path lies inside
// one of `roots` (the workspace, the user's config directory): the file is
// opened beneath that root without following any symbolic link, so a link
// swapped in after the check is refused too. Errors name the file and why:
// kPermissionDenied when it leads outside every root.
Result<std::string> ReadConfinedFile(const std::filesystem::path& file,
                                     const std::vector<std::filesystem::path>& roots,
                                     size_t max_bytes);

std::string BuildSystemPrompt(const SystemPromptParts& parts);

}  // namespace agentloop
