// Skills: reusable procedures in the common SKILL.md format, one folder per
// skill with optional extra files:
//
//   <skills dir>/<name>/SKILL.md
//     ---
//     name: release-notes
//     description: Draft release notes from the merged PRs since the last tag
//     ---
//     <body: instructions; $ARGUMENTS, $1, $2 ... are replaced on load>
//
// Skills come from the user's directory (~/.config/agentloop/skills) and the
// workspace's (.agentloop/skills); a workspace skill hides a user skill of
// the same name. A skill whose front matter does not parse, or whose name
// is not a slug (^[a-z0-9][a-z0-9-]*$, <= 64), or whose description is
// empty, is skipped with a warning. The folder name is not significant for
// reading; synthesize_skill writes <name>/SKILL.md.
//
// Thread-safety: like MemoryStore (paths only; concurrent calls are fine).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/status.h"

#include "learning/paths.h"

namespace agentloop::learning {

inline constexpr std::string_view kSkillFileName = "SKILL.md";
inline constexpr int kDefaultSkillIndexTokens = 200;
inline constexpr size_t kMaxSkillDescription = 1024;
inline constexpr size_t kMaxSkillBody = 20000;

struct Skill {
  std::string name;
  std::string description;
  std::string body;
  Scope scope = Scope::kWorkspace;
  std::filesystem::path dir;  // the skill's folder
};

// name slug, description 1..1024 characters, body 1..20000 characters.
Status ValidateSkill(const Skill& skill);
std::string RenderSkillFile(const Skill& skill);

// `body` with $ARGUMENTS replaced by `args` and $1, $2, ... by the
// whitespace-separated words of `args` ("double quotes" group words; a
// missing word is ""). When the body has no placeholder at all and `args` is not
// blank, "\n\nARGUMENTS: <args>" is appended so the arguments are not lost.
std::string SubstituteArguments(std::string_view body, std::string_view args);

class SkillStore {
 public:
  // Either directory may be empty (that scope is unavailable).
  SkillStore(std::filesystem::path user_dir, std::filesystem::path workspace_dir);

  const std::filesystem::path& dir(Scope scope) const {
    return scope == Scope::kUser ? user_dir_ : workspace_dir_;
  }

  // Every valid skill (workspace first, hidden user skills left out), each
  // scope by name.
  std::vector<Skill> List(std::vector<std::string>* warnings = nullptr) const;
  // Errors: kNotFound.
  Result<Skill> Get(const std::string& name) const;
  // Writes <dir>/<name>/SKILL.md. Errors: kInvalidArgument, kAlreadyExists
  // (the folder exists and !overwrite), kFailedPrecondition (no such scope).
  Result<std::filesystem::path> Write(const Skill& skill, bool overwrite);

  // "Available skills:\n- <name>: <description>\n..." within budget_tokens
  // (about 4 characters a token: at most budget_tokens * 4 bytes). Lines are
  // ordered by uses (usage.json in the scope's directory), then as List();
  // descriptions are sanitised to one line. Stops at the first line that does
  // not fit. "" when no skill exists or none fits.
  std::string Index(int budget_tokens = kDefaultSkillIndexTokens) const;

 private:
  std::filesystem::path user_dir_;
  std::filesystem::path workspace_dir_;
};

}  // namespace agentloop::learning
