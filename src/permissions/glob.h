// Glob patterns for permission rules: a small compiled matcher shared by
// command patterns (`bash(git status*)`) and path patterns (`read(src/**)`).
//
// Syntax (both modes): `*`, `?`, `[abc]`, `[a-z]`, `[!x]` (or `[^x]`),
// `{a,b}` alternatives (not nested), `\x` a literal x.
//  - Command mode: `*` and `?` match any character, spaces and `/` included.
//    A trailing `:*` is a word prefix: `npm run test:*` matches
//    `npm run test` and `npm run test <anything>`, not `npm run tests`.
//  - Path mode: `*` and `?` never match `/`; `**` matches any run of
//    characters, `/` included, and `a/**/b` also matches `a/b`. A trailing
//    `/**` also matches the directory itself. A pattern with no `/` is
//    matched against the last path component (like .gitignore): `*.md`
//    matches `docs/a.md`.
//
// Matching is linear in pattern length times text length (memoised), so a
// hostile pattern or command line cannot make it blow up.
//
// Thread-safety: a compiled Glob is immutable and may be shared.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::permissions {

enum class GlobMode { kCommand, kPath };

class Glob {
 public:
  // Compiles `pattern`. Errors (kInvalidArgument): an unterminated `[` or
  // `{`, a trailing `\`, more than 64 brace alternatives.
  static Result<Glob> Compile(std::string_view pattern, GlobMode mode);

  // Whether the whole of `text` matches.
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

  struct Token;

 private:
  std::string pattern_;
  GlobMode mode_ = GlobMode::kCommand;
  bool matches_everything_ = false;
  bool literal_ = true;
  bool basename_only_ = false;
  bool absolute_ = false;
  // One token sequence per brace alternative.
  std::shared_ptr<const std::vector<std::vector<Token>>> alternatives_;
};

}  // namespace agentloop::permissions
