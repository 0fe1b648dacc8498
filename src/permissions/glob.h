// Glob patterns of permission rules, over the one glob engine (base/glob.h),
// for command patterns (`bash(git status*)`) and path patterns
// (`read(src/**)`).
//
//  - Command patterns (GlobMode::kText): `*` and `?` match any character,
//    spaces and `/` included. A trailing `:*` is a word prefix:
//    `npm run test:*` matches `npm run test` and `npm run test <anything>`,
//    not `npm run tests`.
//  - Path patterns (GlobMode::kPath): the engine's gitignore-like rules
//    (`*` never crosses `/`; `**` as a whole segment matches zero or more
//    segments, so `a/**/b` matches `a/b` and `a/**` matches `a`). A pattern
//    with no `/` is matched against the last path component (like
//    .gitignore): `*.md` matches `docs/a.md`. A `**` that is not a whole
//    segment in a pattern with `/` (`src/**.cc`) is refused: the engine reads
//    it as `*`, and a rule that looks recursive must not silently cover one
//    directory only.
//
// Matching is linear in pattern length times text length, so a hostile
// pattern or command line cannot make it blow up.
//
// Thread-safety: a compiled Glob is immutable and may be shared.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

#include "base/glob.h"

namespace agentloop::permissions {

class Glob {
 public:
  // Compiles `pattern`. Errors (kInvalidArgument): an unterminated `[` or
  // `{`, a trailing `\`, too many brace alternatives, and in path mode a
  // `**` that is not a whole segment of a pattern with `/`.
  static Result<Glob> Compile(std::string_view pattern, GlobMode mode);

  // Whether the whole of `text` matches (for a basename_only pattern: the
  // last component of `text`).
  bool Matches(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }
  // True when the pattern matches every text (e.g. `*` in command mode, `**`
  // in path mode).
  bool MatchesEverything() const { return matches_everything_; }
  // True when the pattern has no wildcard at all.
  bool IsLiteral() const { return literal_; }
  // In path mode: the pattern has no `/` and is matched against basenames.
  bool basename_only() const { return basename_only_; }
  // In path mode: the pattern starts with `/`.
  bool absolute() const { return absolute_; }

 private:
  std::string pattern_;
  bool matches_everything_ = false;
  bool literal_ = true;
  bool basename_only_ = false;
  bool absolute_ = false;
  // The pattern; for `prefix:*` the two forms `prefix *` and `prefix`.
  std::vector<GlobPattern> forms_;
};

}  // namespace agentloop::permissions
