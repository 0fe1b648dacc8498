// Glob patterns, one engine for every module: the permission rules (paths
// and shell command lines), the glob and grep tools, .gitignore files.
//
// Syntax: `*`, `?`, `[...]` (with `!`/`^` negation and ranges, `\` escapes
// inside), `{a,b}` alternatives (nestable; optional), `\x` a literal x.
//
// GlobMode::kPath (gitignore-like; `/` separates segments):
//  - `*`, `?` and classes never match `/`; `*` matches dotfiles too (`*`
//    matches `.env`): hiding dotfiles is the caller's choice, not the
//    pattern's;
//  - `**` as a whole segment matches zero or more whole segments:
//    `**/b` matches `b` and `x/y/b`; `a/**/b` matches `a/b` and `a/x/y/b`;
//    `a/**` matches `a` itself and everything below it; `**` alone matches
//    every path;
//  - `**` that is not a whole segment (`a**`, `src/**.cc`) is an ordinary
//    `*` (see has_partial_double_star()).
// GlobMode::kText: `*`, `?` and classes match any character, `/` included,
// and `**` is `*` (shell command lines).
//
// The caller chooses what text to match: a whole relative path, or (for a
// pattern without `/`, has_slash() false) the last component, as .gitignore
// and the permission rules do.
//
// Matching simulates the pattern as an NFA over the text (no backtracking),
// so its cost is bounded by O(text length x pattern length) whatever the
// pattern; common shapes (`*.ext`, `**/*.ext`, literals) take a fast path.
//
// Thread-safety: immutable after Compile; Match may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop {

enum class GlobMode { kPath, kText };

class GlobPattern {
 public:
  // `braces`: expand {a,b} (glob tool, grep's glob filter, rules);
  // gitignore files treat braces literally. kInvalidArgument for unbalanced
  // [ or {, a trailing lone `\`, or more than 1024 alternatives.
  static Result<GlobPattern> Compile(std::string_view pattern, GlobMode mode = GlobMode::kPath,
                                     bool braces = true);

  // Whether the whole of `path` matches.
  bool Match(std::string_view path) const;

  GlobMode mode() const { return mode_; }
  // True when the pattern has no wildcard and no alternatives.
  bool literal() const { return literal_; }
  // True when the pattern matches every text: `**` (path mode), `*` (text
  // mode, or a path pattern without `/`, matched against base names).
  bool matches_everything() const { return matches_everything_; }
  // Path mode: some `**` is not a whole segment and so is a plain `*`
  // (`src/**.cc` matches `src/a.cc`, not `src/x/a.cc`).
  bool has_partial_double_star() const { return partial_double_star_; }

  // True when the pattern contains a '/' (so it is matched against a path,
  // not a base name).
  bool has_slash() const { return has_slash_; }
  // True when some alternative can match across directories (`**`).
  bool recursive() const { return recursive_; }
  // Number of path segments every match has, or -1 when unbounded.
  int fixed_depth() const { return fixed_depth_; }
  // The longest leading run of whole literal segments common to all
  // alternatives, e.g. "src/lib" for "src/lib/**/*.cc" ("" if none).
  const std::string& literal_prefix() const { return literal_prefix_; }

 private:
  enum class Kind : uint8_t { kLit, kAny, kClass, kStar, kDirPrefix, kDStar };
  struct Token {
    Kind kind;
    uint8_t lit = 0;
    uint16_t cls = 0;  // index into classes_
  };
  enum class Fast : uint8_t { kNone, kExact, kStarSuffix, kAnyDirStarSuffix, kAnyDirExact };
  struct Alt {
    std::vector<Token> tokens;
    Fast fast = Fast::kNone;
    std::string literal;
  };

  bool MatchAlt(const Alt& alt, std::string_view text) const;

  GlobMode mode_ = GlobMode::kPath;
  bool literal_ = false;
  bool matches_everything_ = false;
  bool partial_double_star_ = false;
  std::vector<Alt> alts_;
  std::vector<std::vector<bool>> classes_;  // 256 flags each
  bool has_slash_ = false;
  bool recursive_ = false;
  int fixed_depth_ = 0;
  std::string literal_prefix_;
};

}  // namespace agentloop
