#include <fcntl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "base/glob.h"
#include "base/strings.h"
#include "tools/paths.h"
#include "tools/search.h"
#include "tools/tools.h"
#include "tools/walk.h"

namespace agentloop::tools {
namespace {

// File types for the `type` argument: globs matched against base names.
const std::map<std::string, std::string>& FileTypes() {
  static const auto* types = new std::map<std::string, std::string>{
      {"c", "*.{c,h}"},
      {"cc", "*.{c,cc,cpp,cxx,c++,h,hh,hpp,hxx,h++,inl,ipp,tcc}"},
      {"cpp", "*.{c,cc,cpp,cxx,c++,h,hh,hpp,hxx,h++,inl,ipp,tcc}"},
      {"cmake", "{*.cmake,CMakeLists.txt}"},
      {"cs", "*.cs"},
      {"css", "*.{css,scss,sass,less}"},
      {"go", "*.go"},
      {"html", "*.{html,htm,xhtml}"},
      {"java", "*.java"},
      {"js", "*.{js,mjs,cjs,jsx}"},
      {"json", "*.{json,jsonl,json5}"},
      {"kotlin", "*.{kt,kts}"},
      {"lua", "*.lua"},
      {"make", "{Makefile,makefile,GNUmakefile,*.mk,*.mak}"},
      {"md", "*.{md,markdown,mdx}"},
      {"php", "*.php"},
      {"proto", "*.proto"},
      {"py", "*.{py,pyi}"},
      {"rb", "*.{rb,gemspec}"},
      {"rs", "*.rs"},
      {"rust", "*.rs"},
      {"sh", "*.{sh,bash,zsh}"},
      {"sql", "*.sql"},
      {"swift", "*.swift"},
      {"toml", "*.toml"},
      {"ts", "*.{ts,tsx,mts,cts}"},
      {"txt", "*.txt"},
      {"xml", "*.xml"},
      {"yaml", "*.{yaml,yml}"},
  };
  return *types;
}

std::string TypeNames() {
  std::string out;
  for (const auto& [name, _] : FileTypes()) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Path order: component by component ('/' sorts before every other byte).
bool PathLess(const std::string& a, const std::string& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]);
    unsigned char y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    if (x == '/') return true;
    if (y == '/') return false;
    return x < y;
  }
  return a.size() < b.size();
}

}  // namespace

GrepTool::GrepTool(GrepToolOptions options)
    // Built once per process and shared by every instance.
    : BuiltinTool(SpecOnce([] {
        return BuiltinSpec(
            {.name = "grep",
             .description =
                 "Search file contents with a regular expression (RE2 syntax, like ripgrep). "
                 "Searches the workspace (or `path`) recursively, skipping files ignored by "
                 ".gitignore/.ignore, hidden files and binary files. Filter files with `glob` "
                 "(e.g. \"*.{ts,tsx}\") or `type` (e.g. \"py\", \"cc\", \"rs\"). `output_mode`: "
                 "\"files_with_matches\" (default: matching file paths), \"content\" "
                 "(path:line:text, with `context` lines around each match) or \"count\" "
                 "(path:count). Results are sorted by path; limit them with `head_limit`.",
             .schema = R"({
      "type": "object",
      "properties": {
        "pattern": {"type": "string", "description": "Regular expression (RE2). Escape metacharacters for a literal search, e.g. \"foo\\\\(\"."},
        "path": {"type": "string", "description": "File or directory to search (default: the workspace root)."},
        "glob": {"type": "string", "description": "Only search files whose name (or path, if the glob has a '/') matches, e.g. \"*.js\", \"src/**/*.{c,h}\"."},
        "type": {"type": "string", "description": "Only search files of this type: c, cc/cpp, cmake, cs, css, go, html, java, js, json, kotlin, lua, make, md, php, proto, py, rb, rs, sh, sql, swift, toml, ts, txt, xml, yaml."},
        "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "What to return (default files_with_matches)."},
        "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
        "context": {"type": "integer", "minimum": 0, "maximum": 100, "description": "Lines of context before and after each match (content mode)."},
        "head_limit": {"type": "integer", "minimum": 0, "description": "Return at most this many lines/files/entries (0 or absent: no limit besides the output size cap)."},
        "multiline": {"type": "boolean", "description": "Let the pattern span lines; '.' then matches newlines too (default false)."}
      },
      "required": ["pattern"],
      "additionalProperties": false
    })",
             .mutates = false,
             .parallel_safe = true,
             .target = RuleTarget::kSearchPath});
      })),
      options_(options) {}

Result<ToolOutput> GrepTool::Run(const ToolCall& call, ToolContext& ctx) {
  const Json& in = call.input;
  const std::string pattern = StringArg(in, "pattern");
  const std::string mode_name = StringArg(in, "output_mode", "files_with_matches");
  const bool ci = BoolArg(in, "case_insensitive", false);
  const bool multiline = BoolArg(in, "multiline", false);
  const int64_t context = IntArg(in, "context", 0);
  const int64_t head_limit = IntArg(in, "head_limit", 0);
  const std::string glob = StringArg(in, "glob");
  const std::string type = StringArg(in, "type");

  SearchOptions sopts;
  if (mode_name == "content") {
    sopts.mode = OutputMode::kContent;
  } else if (mode_name == "count") {
    sopts.mode = OutputMode::kCount;
  } else if (mode_name == "files_with_matches") {
    sopts.mode = OutputMode::kFilesWithMatches;
  } else {
    return ToolOutput::Error("output_mode must be content, files_with_matches or count");
  }
  if (context < 0 || context > 100) return ToolOutput::Error("context must be between 0 and 100");
  if (head_limit < 0) return ToolOutput::Error("head_limit must not be negative");
  sopts.before_context = sopts.after_context = static_cast<int>(context);

  auto matcher = Matcher::Create(pattern, ci, multiline);
  if (!matcher.ok()) return ToolOutput::Error(matcher.error().message());

  std::unique_ptr<GlobPattern> glob_filter;
  if (!glob.empty()) {
    auto g = GlobPattern::Compile(glob);
    if (!g.ok()) return ToolOutput::Error("invalid glob '" + glob + "': " + g.error().message());
    glob_filter = std::make_unique<GlobPattern>(std::move(*g));
  }
  std::unique_ptr<GlobPattern> type_filter;
  if (!type.empty()) {
    auto it = FileTypes().find(type);
    if (it == FileTypes().end()) {
      return ToolOutput::Error("unknown type '" + type + "'; known types: " + TypeNames() +
                               ". Or use glob instead.");
    }
    type_filter = std::make_unique<GlobPattern>(std::move(*GlobPattern::Compile(it->second)));
  }

  auto resolved = ResolvePath(ctx, StringArg(in, "path", "."), Access::kRead);
  if (!resolved.ok()) return ToolOutput::Error(resolved.error().message());
  const ResolvedPath& rp = *resolved;
  if (!rp.exists) return ToolOutput::Error("Path not found: " + rp.display);

  std::vector<FileResult> results;
  uint64_t files_searched = 0;
  uint64_t withheld = 0;
  if (!rp.is_dir) {
    // An explicit file is searched even if hidden, ignored or binary.
    if (PathRuleFor(ctx, "grep", rp.abs) == PathRule::kDeny) {
      return ToolOutput::Error(DeniedByRule("grep", rp.display));
    }
    auto parent = OpenParent(ctx, rp, Access::kRead, false);
    if (!parent.ok()) return ToolOutput::Error(parent.error().message());
    auto fd = OpenEntryNoFollow(parent->dir.get(), parent->name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (!fd.ok())
      return ToolOutput::Error("Cannot read " + rp.display + ": " + fd.error().message());
    FileReader reader;
    std::string_view data;
    if (!reader.ReadFd(fd->Release(), &data)) {
      return ToolOutput::Error("Cannot read " + rp.display);
    }
    files_searched = 1;
    FileResult r;
    if (LooksBinary(data) && sopts.mode == OutputMode::kContent) {
      if ((*matcher)->Any(data.data(), data.size())) {
        r.path = rp.display;
        r.matches = r.entries = 1;
        r.text = "Binary file " + rp.display + " matches\n";
        results.push_back(std::move(r));
      }
    } else if (SearchBuffer(**matcher, data.data(), data.size(), rp.display, sopts, &r)) {
      results.push_back(std::move(r));
    }
  } else {
    WalkOptions wopts;
    wopts.ignore_root = rp.in_workspace ? ctx.workspace.string() : std::string();
    wopts.start = rp.abs;
    wopts.threads = options_.threads;
    wopts.stop = ctx.stop;
    const int nworkers = WalkThreads(wopts);
    struct Worker {
      std::unique_ptr<Matcher> matcher;
      FileReader reader;
      std::vector<FileResult> results;
      uint64_t searched = 0;
      uint64_t withheld = 0;
      std::string display;
    };
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < nworkers; ++i) {
      auto w = std::make_unique<Worker>();
      w->matcher = (*matcher)->Clone();
      workers.push_back(std::move(w));
    }
    const std::string prefix = rp.display == "." ? "" : rp.display + "/";
    Status walked = Walk(wopts, [&](int wi, const WalkEntry& e) {
      if (type_filter && !type_filter->Match(e.name)) return;
      if (glob_filter && !glob_filter->Match(glob_filter->has_slash() ? e.rel : e.name)) return;
      Worker& w = *workers[static_cast<size_t>(wi)];
      // A file a rule keeps from reading is left out: approving a search of
      // the directory is not approving a read of it.
      if (ctx.path_rule && ctx.path_rule("grep", std::string(e.abs)) != PathRule::kNone) {
        ++w.withheld;
        return;
      }
      std::string_view data;
      if (!w.reader.Read(e.abs.data(), &data) || data.empty()) return;
      ++w.searched;
      if (LooksBinary(data)) return;
      w.display.assign(prefix);
      w.display.append(e.rel);
      FileResult r;
      if (SearchBuffer(*w.matcher, data.data(), data.size(), w.display, sopts, &r)) {
        w.results.push_back(std::move(r));
      }
    });
    if (walked.code() == Code::kCancelled) return ToolOutput::Error("grep was cancelled");
    AL_RETURN_IF_ERROR(walked);
    size_t total = 0;
    for (auto& w : workers) total += w->results.size();
    results.reserve(total);
    for (auto& w : workers) {
      files_searched += w->searched;
      withheld += w->withheld;
      for (auto& r : w->results) results.push_back(std::move(r));
    }
  }

  std::sort(results.begin(), results.end(),
            [](const FileResult& a, const FileResult& b) { return PathLess(a.path, b.path); });

  uint64_t total_entries = 0;
  uint64_t total_matches = 0;
  for (const auto& r : results) {
    total_entries += r.entries;
    total_matches += r.matches;
  }
  ToolOutput out;
  out.details = Json{
      {"files", results.size()}, {"matches", total_matches}, {"files_searched", files_searched}};
  const std::string withheld_note =
      withheld == 0
          ? std::string()
          : "\n[" + std::to_string(withheld) + (withheld == 1 ? " file was" : " files were") +
                " not searched: a permission rule keeps them from being read.]\n";
  if (withheld > 0) out.details["withheld"] = withheld;
  if (results.empty()) {
    out.content = "No matches found." + withheld_note;
    return out;
  }

  const char* unit = sopts.mode == OutputMode::kContent ? "lines" : "files";
  std::string text;
  uint64_t shown = 0;
  const uint64_t limit = head_limit > 0 ? static_cast<uint64_t>(head_limit) : UINT64_MAX;
  bool limited = false;
  for (const auto& r : results) {
    if (shown + r.entries <= limit) {
      text += r.text;
      shown += r.entries;
      if (text.size() > options_.output_cap_chars) break;
      continue;
    }
    // Take the first lines of this file's entries up to the limit.
    size_t pos = 0;
    while (shown < limit && pos < r.text.size()) {
      size_t nl = r.text.find('\n', pos);
      if (nl == std::string::npos) nl = r.text.size() - 1;
      text.append(r.text, pos, nl + 1 - pos);
      pos = nl + 1;
      ++shown;
    }
    limited = true;
    break;
  }
  if (limited) {
    text += "\n[Showing the first " + std::to_string(shown) + " of " +
            std::to_string(total_entries) + " " + unit +
            " (head_limit=" + std::to_string(head_limit) + "); " +
            std::to_string(total_entries - shown) + " more not shown.]\n";
  }
  if (text.size() > options_.output_cap_chars) {
    // Count the entries that survive the cut to say how many were left out.
    std::string capped = text.substr(0, options_.output_cap_chars);
    size_t cut = capped.rfind('\n');
    capped.resize(cut == std::string::npos ? 0 : cut + 1);
    uint64_t kept = static_cast<uint64_t>(std::count(capped.begin(), capped.end(), '\n'));
    capped += "\n[Output truncated at " + std::to_string(options_.output_cap_chars) +
              " characters: showing " + std::to_string(kept) + " of " +
              std::to_string(total_entries) + " " + unit + "; " +
              std::to_string(total_entries > kept ? total_entries - kept : 0) +
              " more not shown. Narrow the search with path, glob, type or a more specific "
              "pattern, or use head_limit.]\n";
    text = std::move(capped);
    out.details["truncated"] = true;
  }
  out.details["truncated"] = out.details.value("truncated", false) || limited;
  out.content = SanitizeUtf8(text) + withheld_note;
  return out;
}

}  // namespace agentloop::tools
