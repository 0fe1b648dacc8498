// The system prompt of a session: the built-in instructions (or the user's
// replacement), the workspace, the command, the workspace's AGENTS.md files
// (from the repository root down to the workspace) and extra sections such
// as the memory and skill indexes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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
std::vector<std::filesystem::path> FindAgentsFiles(const std::filesystem::path& workspace);

std::string BuildSystemPrompt(const SystemPromptParts& parts);

}  // namespace agentloop
