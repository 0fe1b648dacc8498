// Ignore rules from .gitignore, .ignore and .git/info/exclude, with git's
// semantics: blank lines and '#' comments skipped, '!' re-includes, a
// trailing '/' matches directories only, a pattern with a '/' before its end
// is anchored to the file's directory, otherwise it matches a base name at
// any depth below it. Deeper files win over shallower ones; within a
// directory .ignore wins over .gitignore; .git/info/exclude comes last.
// Within a file the last matching line wins.
//
// Thread-safety: nodes are immutable once built and shared between walker
// threads through shared_ptr<const IgnoreNode>.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/glob.h"

namespace agentloop::tools {

struct IgnoreRule {
  GlobPattern glob;
  bool negate = false;
  bool dir_only = false;
  bool anchored = false;
};

// Parses the text of one ignore file. Invalid lines are skipped.
std::vector<IgnoreRule> ParseIgnoreFile(std::string_view text);

// The rules of one directory, linked to the nearest ancestor with rules.
struct IgnoreNode {
  std::shared_ptr<const IgnoreNode> parent;
  std::string dir;                     // absolute, no trailing '/'
  std::vector<IgnoreRule> dot_ignore;  // .ignore
  std::vector<IgnoreRule> git_ignore;  // .gitignore
  std::vector<IgnoreRule> exclude;     // .git/info/exclude (workspace root only)
};

// Loads the ignore files present in `dir` (the flags say which exist, as the
// caller has usually just listed the directory). Returns `parent` unchanged
// when there is nothing to load.
std::shared_ptr<const IgnoreNode> LoadIgnoreNode(std::shared_ptr<const IgnoreNode> parent,
                                                 const std::string& dir, bool has_gitignore,
                                                 bool has_dot_ignore, bool load_exclude);

// Whether `abs_path` (absolute, below the nodes' directories) is ignored.
bool IsIgnored(const IgnoreNode* node, std::string_view abs_path, bool is_dir);

// The chain of nodes for `dir` built from `root` down to `dir`'s parent
// (`dir` itself is loaded by the walker when it lists it). `root` gets
// .git/info/exclude too. REQUIRES: dir is root or below it.
std::shared_ptr<const IgnoreNode> IgnoreChainAbove(const std::string& root, const std::string& dir);

}  // namespace agentloop::tools
