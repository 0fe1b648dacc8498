#include <fcntl.h>

#include "base/strings.h"
#include "tools/paths.h"
#include "tools/search.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

constexpr int64_t kDefaultLimit = 2000;
constexpr size_t kMaxLineChars = 2000;

// Files this large are mapped rather than read: the tool shows at most
// 2000 lines of them, so copying all of a big log into memory would be waste.
constexpr size_t kReadMapThreshold = 1u << 20;

}  // namespace

ReadTool::ReadTool(size_t max_output_bytes)
    // Built once per process and shared by every instance.
    : BuiltinTool(SpecOnce([] {
        return BuiltinSpec({.name = "read",
                            .description =
                                "Read a text file from the workspace. Returns lines numbered like "
                                "`cat -n` (line number, tab, text). Reads up to 2000 lines from "
                                "`offset` (1-based line number, default 1); use `offset` and "
                                "`limit` to page through long files. Lines longer than 2000 "
                                "characters are cut. Binary files are reported, not shown. Read a "
                                "file before you write or edit it.",
                            .schema = R"({
      "type": "object",
      "properties": {
        "file_path": {"type": "string", "description": "Path of the file, relative to the workspace root or absolute inside it."},
        "offset": {"type": "integer", "minimum": 1, "description": "1-based line number to start from (default 1)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return (default 2000)."}
      },
      "required": ["file_path"],
      "additionalProperties": false
    })",
                            .mutates = false,
                            .parallel_safe = true,
                            .target = RuleTarget::kFilePath});
      })),
      max_output_bytes_(max_output_bytes) {}

Result<ToolOutput> ReadTool::Run(const ToolCall& call, ToolContext& ctx) {
  const std::string input_path = StringArg(call.input, "file_path");
  int64_t offset = std::max<int64_t>(1, IntArg(call.input, "offset", 1));
  int64_t limit = IntArg(call.input, "limit", kDefaultLimit);
  if (limit < 1) return ToolOutput::Error("limit must be at least 1");

  auto resolved = ResolvePath(ctx, input_path, Access::kRead);
  if (!resolved.ok()) return ToolOutput::Error(resolved.error().message());
  const ResolvedPath& rp = *resolved;
  if (!rp.exists) {
    return ToolOutput::Error("File not found: " + rp.display +
                             ". Check the path with glob or ls (paths are relative to the "
                             "workspace root).");
  }
  if (rp.is_dir) {
    return ToolOutput::Error(rp.display + " is a directory, not a file; use ls to list it.");
  }
  if (PathRuleFor(ctx, "read", rp.abs) == PathRule::kDeny) {
    return ToolOutput::Error(DeniedByRule("read", rp.display));
  }
  // Opened along the resolved path without following any link, so what is
  // read is the file that was checked.
  auto parent = OpenParent(ctx, rp, Access::kRead, false);
  if (!parent.ok()) return ToolOutput::Error(parent.error().message());
  auto fd = OpenEntryNoFollow(parent->dir.get(), parent->name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!fd.ok()) {
    return ToolOutput::Error("Cannot read " + rp.display + ": " + fd.error().message());
  }
  FileReader file(kReadMapThreshold);
  std::string_view data;
  // The front end's text of the file (ToolContext::files), once the path
  // passed every check above.
  std::string from_files;
  if (ctx.files) {
    Result<std::string> text = ctx.files->ReadText(rp.abs, ctx.stop);
    if (!text.ok()) {
      return ToolOutput::Error("Cannot read " + rp.display + ": " + text.error().message());
    }
    from_files = std::move(*text);
    data = from_files;
  } else if (!file.ReadFd(fd->Release(), &data)) {
    return ToolOutput::Error("Cannot read " + rp.display + ": " + file.error());
  }
  if (ctx.ledger) ctx.ledger->MarkRead(rp.abs);

  ToolOutput out;
  out.details = Json{{"path", rp.display}, {"bytes", data.size()}};
  if (data.empty()) {
    out.content = "The file " + rp.display + " exists but is empty (0 bytes).";
    return out;
  }
  if (LooksBinary(data)) {
    out.content = rp.display + " is a binary file (" + std::to_string(data.size()) +
                  " bytes); it cannot be shown as text.";
    out.details["binary"] = true;
    return out;
  }

  const uint64_t total_lines = CountNewlines(data.data(), data.size()) + (data.back() != '\n');
  if (static_cast<uint64_t>(offset) > total_lines) {
    return ToolOutput::Error("offset " + std::to_string(offset) + " is past the end of " +
                             rp.display + ", which has " + std::to_string(total_lines) + " lines.");
  }
  // Skip to the first requested line.
  size_t pos = 0;
  for (int64_t ln = 1; ln < offset; ++ln) {
    const void* nl = std::memchr(data.data() + pos, '\n', data.size() - pos);
    pos = static_cast<const char*>(nl) - data.data() + 1;
  }
  std::string text;
  uint64_t lineno = static_cast<uint64_t>(offset);
  uint64_t shown = 0;
  bool crlf = false;
  bool cut_lines = false;
  bool size_capped = false;
  while (pos < data.size() && shown < static_cast<uint64_t>(limit)) {
    const char* nl =
        static_cast<const char*>(std::memchr(data.data() + pos, '\n', data.size() - pos));
    size_t end = nl == nullptr ? data.size() : static_cast<size_t>(nl - data.data());
    std::string_view line = data.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
      crlf = true;
    }
    std::string shown_line;
    if (line.size() > kMaxLineChars) {
      std::string_view head = TruncateUtf8(line, kMaxLineChars);
      shown_line = std::string(head) + " [... line truncated, " +
                   std::to_string(line.size() - head.size()) + " more bytes]";
      cut_lines = true;
    } else {
      shown_line = std::string(line);
    }
    if (text.size() + shown_line.size() + 8 > max_output_bytes_ && shown > 0) {
      size_capped = true;
      break;
    }
    AppendNumberedLine(text, lineno, shown_line);
    ++lineno;
    ++shown;
    pos = end + 1;
  }
  out.content = SanitizeUtf8(text);
  const uint64_t last_shown = static_cast<uint64_t>(offset) + shown - 1;
  std::string notes;
  if (last_shown < total_lines) {
    notes += "(Showing lines " + std::to_string(offset) + "-" + std::to_string(last_shown) +
             " of " + std::to_string(total_lines) +
             (size_capped ? ", output size limit reached" : "") +
             ". Use offset=" + std::to_string(last_shown + 1) + " to read more.)\n";
  }
  if (cut_lines) notes += "(Some lines were longer than 2000 characters and were cut.)\n";
  if (crlf) notes += "(The file has CRLF line endings; the \\r characters are not shown.)\n";
  if (!notes.empty()) out.content += "\n" + notes;
  out.details["first_line"] = offset;
  out.details["lines_shown"] = shown;
  out.details["total_lines"] = total_lines;
  return out;
}

}  // namespace agentloop::tools
