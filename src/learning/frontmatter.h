// A small reader and writer for the front matter of memory files and
// SKILL.md: a block of `key: value` lines between two `---` lines at the top
// of a Markdown file, followed by the body.
//
// Supported values (a YAML subset, enough for hand-written SKILL.md files):
// plain scalars, "double-quoted" (JSON escapes), 'single-quoted' ('' is a
// quote), [a, b] flow lists, and `>` / `|` block scalars (the indented lines
// that follow; `>` folds them with spaces, `|` keeps newlines). Comment lines
// (#) and blank lines are skipped. Unknown keys are kept.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::learning {

struct FrontMatter {
  std::map<std::string, std::string> fields;              // scalars
  std::map<std::string, std::vector<std::string>> lists;  // [a, b] values
  std::string body;                                       // after the closing ---

  // The scalar `key`, or "" when absent.
  std::string Get(const std::string& key) const;
};

// Errors: kInvalidArgument when the text does not start with a `---` line or
// the block is not closed.
Result<FrontMatter> ParseFrontMatter(std::string_view text);

// A double-quoted scalar (JSON string syntax, which YAML accepts).
std::string QuoteScalar(std::string_view value);

}  // namespace agentloop::learning
