// The learning loop's tools:
//
//   memory_save       mutates  {name, type, description, body, tags?, scope?}
//   memory_search     read     {query?, name?, scope?, limit?}  bodies on demand
//   memory_delete     mutates  {name, scope?}
//   skill             read     {skill, args?}   the body, $ARGUMENTS substituted
//   synthesize_skill  mutates  {name, description, body, scope?, overwrite?}
//
// The mutating ones go through the normal permission/approval path (they
// are `ask` by default like every mutating tool). Invalid input is an
// is_error result naming the broken rule, never a failed turn.
//
// Scopes: memory_save defaults to "user" for type preference and to
// "workspace" otherwise; synthesize_skill defaults to "user" (moxxy). The
// workspace directories come from LearningDirs when set, else from the
// call's ToolContext::workspace (<workspace>/.agentloop/...).
//
// memory_search and skill report what they loaded in
// details[kUseDetailsKey] for UsageHook.
//
// Thread-safety: the tools hold only paths; Run() may be called concurrently.
#pragma once

#include <memory>
#include <vector>

#include "agentloop/tool.h"

#include "learning/paths.h"

namespace agentloop::learning {

inline constexpr size_t kDefaultSearchLimit = 5;
inline constexpr size_t kMaxSearchLimit = 20;

// The five tools above, in that order.
std::vector<std::shared_ptr<Tool>> MakeLearningTools(const LearningDirs& dirs);

std::shared_ptr<Tool> MakeMemorySaveTool(const LearningDirs& dirs);
std::shared_ptr<Tool> MakeMemorySearchTool(const LearningDirs& dirs);
std::shared_ptr<Tool> MakeMemoryDeleteTool(const LearningDirs& dirs);
std::shared_ptr<Tool> MakeSkillTool(const LearningDirs& dirs);
std::shared_ptr<Tool> MakeSynthesizeSkillTool(const LearningDirs& dirs);

// The system-prompt section: the memory index (within memory_budget_chars)
// and the skills index (within skill_budget_tokens), each only when non-empty,
// separated by a blank line. "" when there is neither. `workspace` fills
// unset workspace directories.
std::string LearningPromptSection(const LearningDirs& dirs, const std::filesystem::path& workspace,
                                  size_t memory_budget_chars = 2000, int skill_budget_tokens = 200);

}  // namespace agentloop::learning
