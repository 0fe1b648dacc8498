#include "tools/change_preview.h"

#include <fcntl.h>

#include <system_error>

#include "agentloop/tool.h"

#include "base/diff.h"
#include "base/strings.h"
#include "env/files.h"
#include "tools/paths.h"

namespace agentloop::tools {
namespace {

// Files larger than this are not read for a preview.
constexpr size_t kMaxPreviewedBytes = 8u << 20;

std::string PreviewArg(const Json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

size_t CountMatches(std::string_view hay, std::string_view needle, size_t stop_at) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string_view::npos && n < stop_at;
       pos = hay.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

std::string ReplaceEvery(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t prev = 0;
  for (size_t pos = text.find(from); pos != std::string_view::npos;
       pos = text.find(from, pos + from.size())) {
    out.append(text.substr(prev, pos - prev)).append(to);
    prev = pos + from.size();
  }
  out.append(text.substr(prev));
  return out;
}

size_t LineCount(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

std::string Lines(size_t n) { return std::to_string(n) + (n == 1 ? " line" : " lines"); }

}  // namespace

Json ChangePreview::ToJson() const {
  Json out = {{"path", path}, {"created", created}, {"diff", diff}};
  if (!note.empty()) out["note"] = note;
  return out;
}

std::string ChangePreview::Summary() const {
  if (created) return "(new file, " + Lines(new_lines) + ")";
  if (!note.empty()) return "";
  if (diff.empty()) return "no change: the file already has this content";
  if (replaces_file) {
    return "replaces the whole file (" + Lines(old_lines) + ") with " + Lines(new_lines);
  }
  return "";
}

bool HasChangePreview(std::string_view tool) { return tool == "write" || tool == "edit"; }

Result<ChangePreview> PreviewChange(std::string_view tool, const Json& args,
                                    const std::filesystem::path& workspace,
                                    const ChangePreviewOptions& options) {
  if (!HasChangePreview(tool)) {
    return InvalidArgument("a change is shown for a write or edit call, not for '" +
                           std::string(tool) + "'");
  }
  if (!args.is_object() || !args.contains("file_path") || !args["file_path"].is_string()) {
    return InvalidArgument("the call's arguments have no file_path string");
  }
  std::error_code ec;
  ToolContext ctx;
  ctx.workspace = std::filesystem::canonical(workspace, ec);
  if (ec) {
    return FailedPrecondition("the session's workspace " + workspace.string() +
                              " cannot be opened: " + ec.message());
  }
  AL_ASSIGN_OR_RETURN(ResolvedPath rp,
                      ResolvePath(ctx, args["file_path"].get<std::string>(), Access::kWrite));
  ChangePreview out;
  out.path = rp.display;
  out.created = !rp.exists;
  const bool write = tool == "write";
  if (write) out.new_lines = LineCount(PreviewArg(args, "content"));
  if (!options.withheld.empty()) {
    out.note = "the content of " + rp.display + " is not shown: " + options.withheld;
    return out;
  }
  if (rp.is_dir) {
    out.note = rp.display + " is a directory";
    return out;
  }
  std::string before;
  if (rp.exists) {
    AL_ASSIGN_OR_RETURN(OpenedParent parent, OpenParent(ctx, rp, Access::kRead, false));
    AL_ASSIGN_OR_RETURN(UniqueFd fd, OpenEntryNoFollow(parent.dir.get(), parent.name,
                                                       O_RDONLY | O_NOCTTY | O_NONBLOCK));
    auto loaded = ReadFdToString(fd.get(), rp.display, kMaxPreviewedBytes);
    if (!loaded.ok()) {
      out.note = "the file cannot be diffed: " + loaded.error().message();
      return out;
    }
    before = std::move(*loaded);
    out.old_lines = LineCount(before);
  }
  std::string after;
  if (write) {
    after = PreviewArg(args, "content");
    out.replaces_file = rp.exists;
  } else {
    const std::string old_string = PreviewArg(args, "old_string");
    const std::string new_string = PreviewArg(args, "new_string");
    const bool replace_all = args.value("replace_all", false) == true;
    size_t hits = old_string.empty() ? 0 : CountMatches(before, old_string, 2);
    if (!rp.exists || hits == 0) {
      out.note = "old_string is not in " + rp.display + " as it is now";
      return out;
    }
    if (hits > 1 && !replace_all) {
      out.note = "old_string occurs more than once in " + rp.display +
                 " (the edit fails unless replace_all is set)";
      return out;
    }
    after = ReplaceEvery(before, old_string, new_string);
    out.new_lines = LineCount(after);
  }
  if (after.size() > kMaxPreviewedBytes) {
    out.note = "the new text is too large to diff";
    return out;
  }
  out.diff = SanitizeUtf8(
      UnifiedDiff(before, after, rp.exists ? "a/" + rp.display : "/dev/null", "b/" + rp.display));
  if (options.max_diff_bytes > 0 && out.diff.size() > options.max_diff_bytes) {
    // Cut at a line's end, as UnifiedDiffOptions::max_bytes cuts.
    size_t cut = out.diff.rfind('\n', options.max_diff_bytes);
    cut = cut == std::string::npos ? 0 : cut + 1;
    const size_t left = out.diff.size() - cut;
    out.diff.resize(cut);
    out.diff += "... (diff cut: " + std::to_string(left) + " more bytes)\n";
    out.truncated = true;
  }
  return out;
}

}  // namespace agentloop::tools
