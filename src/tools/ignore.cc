#include "tools/ignore.h"

#include <unistd.h>

#include <sys/stat.h>

#include "env/files.h"

namespace agentloop::tools {
namespace {

enum class Verdict { kNone, kIgnore, kKeep };

Verdict Check(const std::vector<IgnoreRule>& rules, std::string_view rel, std::string_view base,
              bool is_dir) {
  for (auto it = rules.rbegin(); it != rules.rend(); ++it) {
    if (it->dir_only && !is_dir) continue;
    if (it->glob.Match(it->anchored ? rel : base)) {
      return it->negate ? Verdict::kKeep : Verdict::kIgnore;
    }
  }
  return Verdict::kNone;
}

std::vector<IgnoreRule> LoadRules(const std::string& path) {
  auto text = ReadFileToString(path, 16u << 20);
  if (!text.ok()) return {};
  return ParseIgnoreFile(*text);
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

std::vector<IgnoreRule> ParseIgnoreFile(std::string_view text) {
  std::vector<IgnoreRule> rules;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    while (!line.empty() && line.back() == ' ' &&
           !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
      line.remove_suffix(1);
    }
    IgnoreRule rule;
    if (!line.empty() && line[0] == '!') {
      rule.negate = true;
      line.remove_prefix(1);
    }
    if (!line.empty() && line.back() == '/') {
      rule.dir_only = true;
      line.remove_suffix(1);
    }
    if (line.empty()) continue;
    if (line.find('/') != std::string_view::npos) {
      rule.anchored = true;
      if (line[0] == '/') line.remove_prefix(1);
    }
    auto glob = GlobPattern::Compile(line, GlobMode::kPath, /*braces=*/false);
    if (!glob.ok()) continue;
    rule.glob = std::move(*glob);
    rules.push_back(std::move(rule));
  }
  return rules;
}

std::shared_ptr<const IgnoreNode> LoadIgnoreNode(std::shared_ptr<const IgnoreNode> parent,
                                                 const std::string& dir, bool has_gitignore,
                                                 bool has_dot_ignore, bool load_exclude) {
  if (!has_gitignore && !has_dot_ignore && !load_exclude) return parent;
  auto node = std::make_shared<IgnoreNode>();
  node->parent = std::move(parent);
  node->dir = dir;
  if (has_gitignore) node->git_ignore = LoadRules(dir + "/.gitignore");
  if (has_dot_ignore) node->dot_ignore = LoadRules(dir + "/.ignore");
  if (load_exclude) node->exclude = LoadRules(dir + "/.git/info/exclude");
  if (node->git_ignore.empty() && node->dot_ignore.empty() && node->exclude.empty()) {
    return node->parent;
  }
  return node;
}

bool IsIgnored(const IgnoreNode* node, std::string_view abs_path, bool is_dir) {
  size_t slash = abs_path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? abs_path : abs_path.substr(slash + 1);
  const IgnoreNode* exclude_node = nullptr;
  for (; node != nullptr; node = node->parent.get()) {
    if (abs_path.size() <= node->dir.size() + 1 || abs_path[node->dir.size()] != '/' ||
        abs_path.compare(0, node->dir.size(), node->dir) != 0) {
      continue;
    }
    std::string_view rel = abs_path.substr(node->dir.size() + 1);
    Verdict v = Check(node->dot_ignore, rel, base, is_dir);
    if (v == Verdict::kNone) v = Check(node->git_ignore, rel, base, is_dir);
    if (v != Verdict::kNone) return v == Verdict::kIgnore;
    if (!node->exclude.empty()) exclude_node = node;
  }
  if (exclude_node != nullptr) {
    std::string_view rel = abs_path.substr(exclude_node->dir.size() + 1);
    return Check(exclude_node->exclude, rel, base, is_dir) == Verdict::kIgnore;
  }
  return false;
}

std::shared_ptr<const IgnoreNode> IgnoreChainAbove(const std::string& root,
                                                   const std::string& dir) {
  std::shared_ptr<const IgnoreNode> chain;
  bool exclude = Exists(root + "/.git/info/exclude");
  if (dir == root) {
    // The walker loads root's .gitignore/.ignore; only exclude comes from here.
    if (!exclude) return nullptr;
    auto node = std::make_shared<IgnoreNode>();
    node->dir = root;
    node->exclude = LoadRules(root + "/.git/info/exclude");
    return node;
  }
  std::string cur = root;
  std::string_view rest = std::string_view(dir).substr(root.size());  // "/a/b/c"
  bool first = true;
  while (true) {
    chain = LoadIgnoreNode(chain, cur, Exists(cur + "/.gitignore"), Exists(cur + "/.ignore"),
                           first && exclude);
    first = false;
    if (rest.empty()) break;
    size_t next = rest.find('/', 1);
    std::string_view seg = rest.substr(0, next);
    if (next == std::string_view::npos) break;  // `seg` is dir's own name: stop above it
    cur += seg;
    rest.remove_prefix(next);
  }
  return chain;
}

}  // namespace agentloop::tools
