#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/diff.h"
#include "base/strings.h"
#include "env/files.h"
#include "tools/paths.h"
#include "tools/search.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

constexpr size_t kMaxEditFileBytes = 256u << 20;
constexpr size_t kMaxListedCandidates = 20;
// Larger files are changed without a diff (its cost grows with the size).
constexpr size_t kMaxDiffedFileBytes = 8u << 20;

uint64_t CountLines(std::string_view s) {
  if (s.empty()) return 0;
  return CountNewlines(s.data(), s.size()) + (s.back() != '\n');
}

std::string NotReadYet(const std::string& display, const char* action) {
  return display +
         " already exists and has not been read in this session. Read it with the "
         "read tool first, then " +
         action + " it.";
}

// Byte offsets of non-overlapping occurrences of `needle`.
std::vector<size_t> FindAll(std::string_view hay, std::string_view needle) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos + needle.size() <= hay.size()) {
    const void* hit = memmem(hay.data() + pos, hay.size() - pos, needle.data(), needle.size());
    if (hit == nullptr) break;
    size_t at = static_cast<size_t>(static_cast<const char*>(hit) - hay.data());
    out.push_back(at);
    pos = at + needle.size();
  }
  return out;
}

std::string JoinLineNumbers(std::string_view text, const std::vector<size_t>& offsets) {
  std::string out;
  size_t counted_pos = 0;
  uint64_t line = 1;
  for (size_t i = 0; i < offsets.size() && i < kMaxListedCandidates; ++i) {
    line += CountNewlines(text.data() + counted_pos, offsets[i] - counted_pos);
    counted_pos = offsets[i];
    if (!out.empty()) out += ", ";
    out += std::to_string(line);
  }
  if (offsets.size() > kMaxListedCandidates) out += ", ...";
  return out;
}

std::string ReplaceCrlf(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) out.push_back('\r');
    out.push_back(s[i]);
  }
  return out;
}

// Lines [first, last] of `text` (1-based) in cat -n style.
std::string Snippet(std::string_view text, uint64_t first, uint64_t last) {
  std::string out;
  size_t pos = 0;
  uint64_t ln = 1;
  while (pos <= text.size() && ln <= last) {
    const char* nl =
        static_cast<const char*>(std::memchr(text.data() + pos, '\n', text.size() - pos));
    size_t end = nl == nullptr ? text.size() : static_cast<size_t>(nl - text.data());
    if (ln >= first) {
      std::string_view line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      AppendNumberedLine(out, ln, TruncateUtf8(line, 2000));
    }
    if (nl == nullptr) break;
    pos = end + 1;
    ++ln;
  }
  return SanitizeUtf8(out);
}

// The change to `display` as a unified diff, with git's a/ b/ labels, cut
// at 64 KiB (it travels in events and the stored history). The diff of
// invalid UTF-8 is made valid, as everything in a JSON event must be.
std::string FileDiff(std::string_view before, std::string_view after, const std::string& display,
                     bool created) {
  if (before.size() > kMaxDiffedFileBytes || after.size() > kMaxDiffedFileBytes) return "";
  UnifiedDiffOptions o;
  o.max_bytes = 64 * 1024;
  return SanitizeUtf8(
      UnifiedDiff(before, after, created ? "/dev/null" : "a/" + display, "b/" + display, o));
}

}  // namespace

WriteTool::WriteTool()
    // Built once per process and shared by every instance.
    : BuiltinTool(SpecOnce([] {
        return BuiltinSpec(
            {.name = "write",
             .description =
                 "Write a file in the workspace, replacing it entirely (missing parent "
                 "directories are created; the write is atomic and keeps the file's permissions). "
                 "An existing file must have been read in this session first. Prefer edit for "
                 "changes to part of a file.",
             .schema = R"({
      "type": "object",
      "properties": {
        "file_path": {"type": "string", "description": "Path of the file, relative to the workspace root or absolute inside it."},
        "content": {"type": "string", "description": "The complete new content of the file."}
      },
      "required": ["file_path", "content"],
      "additionalProperties": false
    })",
             .mutates = true,
             .parallel_safe = false,
             .target = RuleTarget::kFilePath});
      })) {}

Result<ToolOutput> WriteTool::Run(const ToolCall& call, ToolContext& ctx) {
  const std::string input_path = StringArg(call.input, "file_path");
  const std::string content = StringArg(call.input, "content");
  auto resolved = ResolvePath(ctx, input_path, Access::kWrite);
  if (!resolved.ok()) return ToolOutput::Error(resolved.error().message());
  const ResolvedPath& rp = *resolved;
  if (rp.is_dir) return ToolOutput::Error(rp.display + " is a directory; give a file path.");
  if (rp.exists && ctx.ledger && !ctx.ledger->WasRead(rp.abs)) {
    return ToolOutput::Error(NotReadYet(rp.display, "write"));
  }
  if (PathRuleFor(ctx, "write", rp.abs) == PathRule::kDeny) {
    return ToolOutput::Error(DeniedByRule("write", rp.display));
  }
  // The directory is opened (and missing ones made) without following any
  // link; the temporary file and the rename stay inside it.
  auto parent = OpenParent(ctx, rp, Access::kWrite, !rp.exists);
  if (!parent.ok())
    return ToolOutput::Error("Cannot write " + rp.display + ": " + parent.error().message());
  // The text replaced, for the diff; a file too large to edit is not diffed.
  std::optional<std::string> previous;
  if (!rp.exists) {
    previous.emplace();
  } else if (ctx.files) {
    if (auto loaded = ctx.files->ReadText(rp.abs, ctx.stop); loaded.ok()) {
      previous = std::move(*loaded);
    }
  } else if (auto fd = OpenEntryNoFollow(parent->dir.get(), parent->name,
                                         O_RDONLY | O_NOCTTY | O_NONBLOCK);
             fd.ok()) {
    if (auto loaded = ReadFdToString(fd->get(), rp.display, kMaxEditFileBytes); loaded.ok()) {
      previous = std::move(*loaded);
    }
  }
  Status s = ctx.files ? ctx.files->WriteText(rp.abs, content, ctx.stop)
                       : WriteFileAtomicAt(parent->dir.get(), parent->name, content, rp.display);
  if (!s.ok()) return ToolOutput::Error("Cannot write " + rp.display + ": " + s.message());
  if (ctx.ledger) ctx.ledger->MarkRead(rp.abs);
  ToolOutput out = ToolOutput::Ok((rp.exists ? "Overwrote " : "Created ") + rp.display + " (" +
                                  std::to_string(content.size()) + " bytes, " +
                                  std::to_string(CountLines(content)) + " lines).");
  out.details = Json{{"path", rp.display}, {"created", !rp.exists}, {"bytes", content.size()}};
  if (previous) {
    if (std::string diff = FileDiff(*previous, content, rp.display, !rp.exists); !diff.empty()) {
      out.details["diff"] = std::move(diff);
    }
  }
  return out;
}

EditTool::EditTool()
    // Built once per process and shared by every instance.
    : BuiltinTool(SpecOnce([] {
        return BuiltinSpec({.name = "edit",
                            .description =
                                "Replace text in a file: `old_string` must occur exactly once "
                                "(include enough surrounding lines to make it unique) unless "
                                "`replace_all` is true. Match the file's text exactly, including "
                                "indentation, without the line-number prefix that read shows. The "
                                "file must have been read in this session first. Line endings, a "
                                "missing final newline and other bytes outside the replaced text "
                                "are preserved.",
                            .schema = R"({
      "type": "object",
      "properties": {
        "file_path": {"type": "string", "description": "Path of the file, relative to the workspace root or absolute inside it."},
        "old_string": {"type": "string", "description": "The exact text to replace."},
        "new_string": {"type": "string", "description": "The replacement text (must differ from old_string)."},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one (default false)."}
      },
      "required": ["file_path", "old_string", "new_string"],
      "additionalProperties": false
    })",
                            .mutates = true,
                            .parallel_safe = false,
                            .target = RuleTarget::kFilePath});
      })) {}

Result<ToolOutput> EditTool::Run(const ToolCall& call, ToolContext& ctx) {
  const std::string input_path = StringArg(call.input, "file_path");
  std::string old_string = StringArg(call.input, "old_string");
  std::string new_string = StringArg(call.input, "new_string");
  const bool replace_all = BoolArg(call.input, "replace_all", false);
  if (old_string.empty()) {
    return ToolOutput::Error(
        "old_string is empty; give the exact text to replace (use write "
        "to create a new file).");
  }
  if (old_string == new_string) {
    return ToolOutput::Error(
        "old_string and new_string are identical; there is nothing to "
        "change.");
  }
  auto resolved = ResolvePath(ctx, input_path, Access::kWrite);
  if (!resolved.ok()) return ToolOutput::Error(resolved.error().message());
  const ResolvedPath& rp = *resolved;
  if (!rp.exists) {
    return ToolOutput::Error("File not found: " + rp.display + ". Use write to create a new file.");
  }
  if (rp.is_dir) return ToolOutput::Error(rp.display + " is a directory, not a file.");
  if (ctx.ledger && !ctx.ledger->WasRead(rp.abs)) {
    return ToolOutput::Error(NotReadYet(rp.display, "edit"));
  }
  if (PathRuleFor(ctx, "edit", rp.abs) == PathRule::kDeny) {
    return ToolOutput::Error(DeniedByRule("edit", rp.display));
  }
  // Read and replaced within one directory opened without following links.
  auto parent = OpenParent(ctx, rp, Access::kWrite, false);
  if (!parent.ok())
    return ToolOutput::Error("Cannot edit " + rp.display + ": " + parent.error().message());
  auto fd = OpenEntryNoFollow(parent->dir.get(), parent->name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!fd.ok()) return ToolOutput::Error("Cannot read " + rp.display + ": " + fd.error().message());
  // The front end's text of the file (ToolContext::files), once the path
  // passed every check above.
  auto loaded = ctx.files ? ctx.files->ReadText(rp.abs, ctx.stop)
                          : ReadFdToString(fd->get(), rp.display, kMaxEditFileBytes);
  fd->Reset();
  if (!loaded.ok()) {
    return ToolOutput::Error("Cannot read " + rp.display + ": " + loaded.error().message());
  }
  const std::string& text = *loaded;

  std::vector<size_t> hits = FindAll(text, old_string);
  bool converted = false;
  if (hits.empty() && text.find("\r\n") != std::string::npos &&
      old_string.find('\n') != std::string::npos) {
    // The model wrote LF where the file has CRLF: match and write CRLF.
    std::string crlf_old = ReplaceCrlf(old_string);
    std::vector<size_t> crlf_hits = FindAll(text, crlf_old);
    if (!crlf_hits.empty()) {
      old_string = std::move(crlf_old);
      new_string = ReplaceCrlf(new_string);
      hits = std::move(crlf_hits);
      converted = true;
    }
  }
  if (hits.empty()) {
    std::string msg = "old_string was not found in " + rp.display + ".";
    // Point at lines holding its first non-blank line, ignoring indentation.
    std::string_view first;
    for (std::string_view l : Split(old_string, '\n')) {
      if (!Trim(l).empty()) {
        first = Trim(l);
        break;
      }
    }
    std::vector<size_t> near = first.empty() ? std::vector<size_t>() : FindAll(text, first);
    if (!near.empty()) {
      msg += " Its first line (\"" + std::string(TruncateUtf8(first, 80)) +
             "\") appears at line(s) " + JoinLineNumbers(text, near) +
             "; the lines around it differ (check whitespace and indentation).";
    }
    msg += " Re-read the file and copy the text exactly, without line-number prefixes.";
    return ToolOutput::Error(SanitizeUtf8(msg));
  }
  if (hits.size() > 1 && !replace_all) {
    return ToolOutput::Error("old_string occurs " + std::to_string(hits.size()) + " times in " +
                             rp.display + " (at lines " + JoinLineNumbers(text, hits) +
                             "). Include more surrounding lines to make it unique, or set "
                             "replace_all to true.");
  }

  std::string updated;
  updated.reserve(text.size() + hits.size() * (new_string.size() + 1));
  size_t prev = 0;
  size_t first_new_at = 0;
  for (size_t i = 0; i < hits.size(); ++i) {
    updated.append(text, prev, hits[i] - prev);
    if (i == 0) first_new_at = updated.size();
    updated += new_string;
    prev = hits[i] + old_string.size();
  }
  updated.append(text, prev, std::string::npos);

  Status s = ctx.files ? ctx.files->WriteText(rp.abs, updated, ctx.stop)
                       : WriteFileAtomicAt(parent->dir.get(), parent->name, updated, rp.display);
  if (!s.ok()) return ToolOutput::Error("Cannot write " + rp.display + ": " + s.message());

  uint64_t start_line = CountNewlines(updated.data(), first_new_at) + 1;
  uint64_t end_line = start_line + CountNewlines(new_string.data(), new_string.size());
  std::string content = "Edited " + rp.display + ": replaced " + std::to_string(hits.size()) +
                        (hits.size() == 1 ? " occurrence" : " occurrences") +
                        (converted ? " (matched with the file's CRLF line endings)" : "") + ".\n";
  if (hits.size() > 1) content += "First replaced region:\n";
  content += Snippet(updated, start_line > 3 ? start_line - 3 : 1, end_line + 3);
  ToolOutput out = ToolOutput::Ok(std::move(content));
  out.details =
      Json{{"path", rp.display}, {"replacements", hits.size()}, {"first_line", start_line}};
  if (std::string diff = FileDiff(text, updated, rp.display, false); !diff.empty()) {
    out.details["diff"] = std::move(diff);
  }
  return out;
}

}  // namespace agentloop::tools
