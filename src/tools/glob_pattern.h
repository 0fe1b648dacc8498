// Glob patterns for file paths: `*`, `?`, `[...]` (with `!`/`^` negation and
// ranges), `**` as a whole path segment, `{a,b}` alternatives (optional) and
// backslash escapes. `*`, `?` and classes never match '/'.
//
// Matching simulates the pattern as an NFA over the path (no backtracking),
// so its cost is bounded by O(path length x pattern length) whatever the
// pattern; common shapes (`*.ext`, `**/*.ext`, literals) take a fast path.
//
// Thread-safety: immutable after Compile; Match may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::tools {

class GlobPattern {
 public:
  // `braces`: expand {a,b} (glob tool, grep's glob filter); gitignore files
  // treat braces literally. kInvalidArgument for unbalanced [ or {, or too
  // many alternatives.
  static Result<GlobPattern> Compile(std::string_view pattern, bool braces = true);

  // Whether the whole of `path` matches.
  bool Match(std::string_view path) const;

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

  bool MatchAlt(const Alt& alt, std::string_view path) const;

  std::vector<Alt> alts_;
  std::vector<std::vector<bool>> classes_;  // 256 flags each
  bool has_slash_ = false;
  bool recursive_ = false;
  int fixed_depth_ = 0;
  std::string literal_prefix_;
};

}  // namespace agentloop::tools
