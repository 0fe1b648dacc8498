#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <sys/stat.h>

#include "base/glob.h"
#include "base/strings.h"
#include "tools/ignore.h"
#include "tools/paths.h"
#include "tools/tools.h"
#include "tools/walk.h"

namespace agentloop::tools {
namespace {

constexpr int kMaxLsDepth = 64;

struct Found {
  int64_t mtime_ns;
  std::string path;
};

bool HasHiddenSegment(std::string_view pattern) {
  for (std::string_view seg : Split(pattern, '/')) {
    if (!seg.empty() && seg[0] == '.' && seg != "." && seg != "..") return true;
  }
  return false;
}

}  // namespace

GlobTool::GlobTool(GlobToolOptions options)
    // Built once per process and shared by every instance.
    : BuiltinTool(SpecOnce([] {
        return BuiltinSpec(
            {.name = "glob",
             .description =
                 "Find files by name pattern, newest first (by modification time). Patterns: `*` "
                 "and `?` within a path segment, `**` for any number of directories, `[abc]`, "
                 "`{a,b}`; e.g. \"**/*.py\", \"src/**/*.{ts,tsx}\", \"*.md\" (top level only). "
                 "Matched against paths relative to `path` (default: the workspace root). Files "
                 "ignored by .gitignore/.ignore and hidden files are skipped unless the pattern "
                 "names a hidden segment.",
             .schema = R"({
      "type": "object",
      "properties": {
        "pattern": {"type": "string", "description": "Glob pattern, e.g. \"**/*.cc\"."},
        "path": {"type": "string", "description": "Directory to search from (default: the workspace root)."}
      },
      "required": ["pattern"],
      "additionalProperties": false
    })",
             .mutates = false,
             .parallel_safe = true,
             .target = RuleTarget::kSearchPath});
      })),
      options_(options) {}

Result<ToolOutput> GlobTool::Run(const ToolCall& call, ToolContext& ctx) {
  std::string pattern = StringArg(call.input, "pattern");
  std::string base_input = StringArg(call.input, "path", ".");
  if (pattern.empty()) return ToolOutput::Error("pattern is empty");
  if (pattern[0] == '/') {
    // An absolute pattern: split off its literal directory part as the base.
    auto g = GlobPattern::Compile(pattern.substr(1));
    if (!g.ok()) return ToolOutput::Error("invalid pattern: " + g.error().message());
    std::string lit = "/" + g->literal_prefix();
    base_input = lit;
    pattern = pattern.substr(std::min(pattern.size(), lit.size() + 1));
    if (pattern.empty()) return ToolOutput::Error("the pattern names a directory, not files");
  }
  auto glob = GlobPattern::Compile(pattern);
  if (!glob.ok()) return ToolOutput::Error("invalid pattern: " + glob.error().message());

  auto base = ResolvePath(ctx, base_input, Access::kRead);
  if (!base.ok()) return ToolOutput::Error(base.error().message());
  if (!base->exists) return ToolOutput::Error("Directory not found: " + base->display);
  if (!base->is_dir) return ToolOutput::Error(base->display + " is not a directory");

  // Start the walk below the pattern's literal directories when they exist.
  std::string prefix = glob->literal_prefix();
  std::string start = base->abs;
  if (!prefix.empty()) {
    auto deeper = ResolvePath(ctx, base->abs + "/" + prefix, Access::kRead);
    if (!deeper.ok()) return ToolOutput::Error(deeper.error().message());
    if (!deeper->exists || !deeper->is_dir) {
      return ToolOutput::Ok("No files found matching " + pattern + " in " + base->display + ".");
    }
    start = deeper->abs;
  }
  WalkOptions wopts;
  wopts.ignore_root = base->in_workspace ? ctx.workspace.string() : std::string();
  wopts.start = start;
  wopts.include_hidden = HasHiddenSegment(pattern);
  wopts.threads = options_.threads;
  wopts.stop = ctx.stop;
  int prefix_segments = prefix.empty() ? 0 : static_cast<int>(Split(prefix, '/').size());
  if (glob->fixed_depth() >= 0) wopts.max_depth = glob->fixed_depth() - prefix_segments;

  const std::string rel_prefix = prefix.empty() ? "" : prefix + "/";
  const std::string display_prefix = (base->display == "." ? "" : base->display + "/");
  std::vector<std::vector<Found>> per_worker(static_cast<size_t>(WalkThreads(wopts)));
  Status walked = Walk(wopts, [&](int wi, const WalkEntry& e) {
    thread_local std::string rel;
    rel.assign(rel_prefix);
    rel.append(e.rel);
    if (!glob->Match(rel)) return;
    // Names a rule keeps from reading are left out too.
    if (ctx.path_rule && ctx.path_rule("glob", std::string(e.abs)) != PathRule::kNone) return;
    struct stat st;
    if (fstatat(AT_FDCWD, e.abs.data(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      return;
    }
    int64_t ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    per_worker[static_cast<size_t>(wi)].push_back({ns, display_prefix + rel});
  });
  if (walked.code() == Code::kCancelled) return ToolOutput::Error("glob was cancelled");
  AL_RETURN_IF_ERROR(walked);

  std::vector<Found> found;
  for (auto& v : per_worker) {
    for (auto& f : v) found.push_back(std::move(f));
  }
  const size_t total = found.size();
  ToolOutput out;
  out.details = Json{{"matches", total}};
  if (found.empty()) {
    out.content = "No files found matching " + pattern + " in " + base->display + ".";
    return out;
  }
  auto newer = [](const Found& a, const Found& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.path < b.path;
  };
  size_t keep = options_.max_results == 0 ? total : std::min(total, options_.max_results);
  std::partial_sort(found.begin(), found.begin() + static_cast<ptrdiff_t>(keep), found.end(),
                    newer);
  std::string text;
  for (size_t i = 0; i < keep; ++i) {
    text += found[i].path;
    text.push_back('\n');
  }
  if (keep < total) {
    text += "\n[Showing the " + std::to_string(keep) + " most recently modified of " +
            std::to_string(total) + " matching files; " + std::to_string(total - keep) +
            " more not shown. Use a more specific pattern or path.]\n";
  }
  CapAtLine(text, options_.output_cap_chars,
            "[Output truncated at " + std::to_string(options_.output_cap_chars) +
                " characters. Use a more specific pattern or path.]\n");
  out.content = SanitizeUtf8(text);
  out.details["truncated"] = keep < total;
  return out;
}

LsTool::LsTool(size_t max_entries, size_t output_cap_chars)
    // Built once per process and shared by every instance.
    : BuiltinTool(SpecOnce([] {
        return BuiltinSpec({.name = "ls",
                            .description =
                                "List a directory as a tree (recursively, directories marked with "
                                "a trailing '/'), skipping .git and entries ignored by "
                                ".gitignore/.ignore. `ignore` takes glob patterns of names or "
                                "paths to leave out, e.g. [\"node_modules\", \"*.log\"]. Prefer "
                                "glob and grep to find specific files.",
                            .schema = R"({
      "type": "object",
      "properties": {
        "path": {"type": "string", "description": "Directory to list (default: the workspace root)."},
        "ignore": {"type": "array", "items": {"type": "string"}, "description": "Glob patterns of entries to leave out."}
      },
      "additionalProperties": false
    })",
                            .mutates = false,
                            .parallel_safe = true,
                            .target = RuleTarget::kSearchPath});
      })),
      max_entries_(max_entries),
      output_cap_chars_(output_cap_chars) {}

Result<ToolOutput> LsTool::Run(const ToolCall& call, ToolContext& ctx) {
  auto resolved = ResolvePath(ctx, StringArg(call.input, "path", "."), Access::kRead);
  if (!resolved.ok()) return ToolOutput::Error(resolved.error().message());
  const ResolvedPath& rp = *resolved;
  if (!rp.exists) return ToolOutput::Error("Directory not found: " + rp.display);
  if (!rp.is_dir) return ToolOutput::Error(rp.display + " is a file, not a directory; use read.");

  std::vector<GlobPattern> ignores;
  if (auto it = call.input.find("ignore"); it != call.input.end() && it->is_array()) {
    for (const auto& g : *it) {
      if (!g.is_string()) continue;
      auto compiled = GlobPattern::Compile(g.get<std::string>());
      if (!compiled.ok()) {
        return ToolOutput::Error("invalid ignore pattern '" + g.get<std::string>() +
                                 "': " + compiled.error().message());
      }
      ignores.push_back(std::move(*compiled));
    }
  }
  const std::string ws = ctx.workspace.string();
  std::shared_ptr<const IgnoreNode> root_chain;
  if (rp.in_workspace) root_chain = IgnoreChainAbove(ws, rp.abs);

  std::string text = (rp.display == "." ? ws : rp.display) + "/\n";
  size_t entries = 0;
  bool stopped = false;
  // Depth-first, names sorted, each directory followed by its contents.
  std::function<void(const std::string&, const std::string&, int,
                     std::shared_ptr<const IgnoreNode>)>
      list = [&](const std::string& abs, const std::string& rel, int depth,
                 std::shared_ptr<const IgnoreNode> parent) {
        if (stopped || depth > kMaxLsDepth || ctx.stop.stop_requested()) return;
        DIR* dir = opendir(abs.c_str());
        if (dir == nullptr) return;
        std::vector<std::pair<std::string, bool>> items;
        bool has_gitignore = false;
        bool has_dot_ignore = false;
        while (struct dirent* de = readdir(dir)) {
          std::string name = de->d_name;
          if (name == "." || name == ".." || name == ".git") continue;
          if (name == ".gitignore") has_gitignore = true;
          if (name == ".ignore") has_dot_ignore = true;
          struct stat st;
          if (lstat((abs + "/" + name).c_str(), &st) != 0) continue;
          // Entries a rule keeps from reading are left out (with their
          // contents, for a directory).
          if (ctx.path_rule && ctx.path_rule("ls", abs + "/" + name) != PathRule::kNone) continue;
          items.emplace_back(std::move(name), S_ISDIR(st.st_mode));
        }
        closedir(dir);
        std::sort(items.begin(), items.end());
        auto node = rp.in_workspace
                        ? LoadIgnoreNode(parent, abs, has_gitignore, has_dot_ignore, false)
                        : nullptr;
        const std::string indent(static_cast<size_t>(depth) * 2, ' ');
        for (const auto& [name, is_dir] : items) {
          std::string child = abs + "/" + name;
          std::string child_rel = rel.empty() ? name : rel + "/" + name;
          if (node != nullptr && IsIgnored(node.get(), child, is_dir)) continue;
          bool skip = false;
          for (const auto& g : ignores) skip = skip || g.Match(g.has_slash() ? child_rel : name);
          if (skip) continue;
          if (entries >= max_entries_) {
            stopped = true;
            return;
          }
          ++entries;
          text += indent + name + (is_dir ? "/\n" : "\n");
          if (is_dir) list(child, child_rel, depth + 1, node);
          if (stopped) return;
        }
      };
  list(rp.abs, "", 1, root_chain);
  if (ctx.stop.stop_requested()) return ToolOutput::Error("ls was cancelled");
  size_t omitted = stopped ? 1 : 0;
  ToolOutput out;
  if (omitted > 0) {
    text += "\n[Listing stopped after " + std::to_string(entries) +
            " entries; more are not shown. List a subdirectory or use glob.]\n";
  }
  CapAtLine(text, output_cap_chars_,
            "[Output truncated at " + std::to_string(output_cap_chars_) +
                " characters. List a subdirectory or use glob.]\n");
  out.content = SanitizeUtf8(text);
  out.details = Json{{"entries", entries}, {"truncated", stopped}};
  return out;
}

}  // namespace agentloop::tools
