#include "undo.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>

#include "base/diff.h"
#include "base/strings.h"

namespace agentloop::cli {
namespace {

struct Hunk {
  size_t new_start = 0;  // 1-based line of the first line in the new text
  std::vector<std::string> before, after;
  bool before_no_eol = false, after_no_eol = false;
};

// "@@ -a,b +c,d @@": the new side's first line.
bool ParseHunkHeader(std::string_view line, size_t* new_start) {
  size_t plus = line.find(" +");
  if (plus == std::string_view::npos) return false;
  std::string digits;
  for (size_t i = plus + 2; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
    digits += line[i];
  }
  if (digits.empty()) return false;
  *new_start = std::strtoull(digits.c_str(), nullptr, 10);
  return true;
}

// Lines of `text` without their '\n'; *no_eol when the last has none.
std::vector<std::string> Lines(std::string_view text, bool* no_eol) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) {
      out.emplace_back(text.substr(at));
      *no_eol = true;
      return out;
    }
    out.emplace_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  *no_eol = false;
  return out;
}

}  // namespace

std::vector<FileChange> FileChanges(std::span<const Message> history) {
  std::map<std::string, std::string> tools;  // tool_use id -> tool
  std::vector<FileChange> out;
  for (const Message& m : history) {
    for (const ContentBlock& b : m.content) {
      if (b.type == BlockType::kToolUse) tools[b.id] = b.name;
      if (b.type != BlockType::kToolResult || b.is_error || !b.meta.is_object()) continue;
      auto details = b.meta.find("details");
      if (details == b.meta.end() || !details->is_object()) continue;
      auto diff = details->find("diff");
      auto path = details->find("path");
      if (diff == details->end() || !diff->is_string() || path == details->end() ||
          !path->is_string()) {
        continue;
      }
      FileChange c;
      c.tool_use_id = b.tool_use_id;
      c.tool = tools.count(b.tool_use_id) ? tools[b.tool_use_id] : std::string();
      c.path = path->get<std::string>();
      c.created = details->value("created", false);
      c.diff = diff->get<std::string>();
      out.push_back(std::move(c));
    }
  }
  return out;
}

Result<std::string> ReverseDiff(std::string_view current, std::string_view diff) {
  if (diff.find("\xEF\xBF\xBD") != std::string_view::npos) {
    return FailedPrecondition(
        "the recorded diff had bytes replaced to be shown; it cannot be reversed exactly");
  }
  std::vector<Hunk> hunks;
  char last = ' ';  // the kind of the previous line: ' ', '-' or '+'
  for (std::string_view line : Split(diff, '\n')) {
    if (line.empty()) continue;
    if (line.starts_with("--- ") || line.starts_with("+++ ")) {
      if (hunks.empty()) continue;
    }
    if (line.starts_with("@@")) {
      Hunk h;
      if (!ParseHunkHeader(line, &h.new_start)) {
        return InvalidArgument("malformed hunk header: " + std::string(line));
      }
      hunks.push_back(std::move(h));
      continue;
    }
    if (hunks.empty()) continue;  // the file header
    Hunk& h = hunks.back();
    switch (line[0]) {
      case ' ':
        h.before.emplace_back(line.substr(1));
        h.after.emplace_back(line.substr(1));
        last = ' ';
        break;
      case '-':
        h.before.emplace_back(line.substr(1));
        last = '-';
        break;
      case '+':
        h.after.emplace_back(line.substr(1));
        last = '+';
        break;
      case '\\':
        // "\ No newline at end of file" ends the line before it: of the old
        // side (-), the new side (+) or both (context).
        if (last != '+') h.before_no_eol = true;
        if (last != '-') h.after_no_eol = true;
        break;
      default:
        return FailedPrecondition("the recorded diff was cut (" + std::string(line) +
                                  "); it cannot be reversed");
    }
  }
  if (hunks.empty()) return InvalidArgument("the diff has no hunks");

  bool no_eol = false;
  std::vector<std::string> lines = Lines(current, &no_eol);
  std::vector<std::string> restored;
  size_t next = 0;  // first line of `lines` not yet copied
  bool restored_no_eol = no_eol;
  for (const Hunk& h : hunks) {
    // A hunk of a side with no lines sits after line new_start (diff's
    // convention for an empty range).
    size_t at = h.after.empty() ? h.new_start : (h.new_start == 0 ? 0 : h.new_start - 1);
    if (at < next || at + h.after.size() > lines.size()) {
      return FailedPrecondition("the file changed since (a changed region is gone)");
    }
    for (size_t i = 0; i < h.after.size(); ++i) {
      if (lines[at + i] != h.after[i]) {
        return FailedPrecondition("the file changed since (line " + std::to_string(at + i + 1) +
                                  " differs)");
      }
    }
    const bool reaches_end = at + h.after.size() == lines.size();
    if (reaches_end && h.after_no_eol != no_eol && !h.after.empty()) {
      return FailedPrecondition("the file changed since (its last line ending)");
    }
    restored.insert(restored.end(), lines.begin() + static_cast<std::ptrdiff_t>(next),
                    lines.begin() + static_cast<std::ptrdiff_t>(at));
    restored.insert(restored.end(), h.before.begin(), h.before.end());
    next = at + h.after.size();
    if (reaches_end) restored_no_eol = h.before_no_eol;
  }
  restored.insert(restored.end(), lines.begin() + static_cast<std::ptrdiff_t>(next), lines.end());
  std::string out;
  for (size_t i = 0; i < restored.size(); ++i) {
    out += restored[i];
    if (i + 1 < restored.size() || !restored_no_eol) out += '\n';
  }
  return out;
}

Result<std::string> RevertChange(const FileChange& change, const std::filesystem::path& workspace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(workspace, ec);
  fs::path target = fs::path(change.path);
  if (target.is_relative()) target = workspace / target;
  const fs::path real = fs::weakly_canonical(target, ec);
  if (ec) return FailedPrecondition("cannot resolve " + change.path + ": " + ec.message());
  const fs::path rel = real.lexically_relative(root);
  if (rel.empty() || rel.native().starts_with("..")) {
    return PermissionDenied(change.path + " is not inside the workspace " + root.string());
  }
  std::ifstream in(real, std::ios::binary);
  if (!in) return FailedPrecondition(change.path + " is gone; nothing to revert");
  const std::string current((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  Result<std::string> before = ReverseDiff(current, change.diff);
  if (!before.ok()) return Status(before.error()).WithContext("reverting " + change.path);
  const std::string shown = UnifiedDiff(current, *before, "a/" + change.path,
                                        change.created ? "/dev/null" : "b/" + change.path);
  if (change.created) {
    if (!before->empty())
      return FailedPrecondition("reverting " + change.path + ": not a creation");
    if (!fs::remove(real, ec) || ec) {
      return Internal("cannot remove " + change.path + ": " + ec.message());
    }
    return shown;
  }
  // Written in place: the file keeps its mode and owner.
  std::ofstream out(real, std::ios::binary | std::ios::trunc);
  if (!out) return Internal("cannot open " + change.path + " for writing");
  out << *before;
  out.close();
  if (!out) return Internal("cannot write " + change.path);
  return shown;
}

}  // namespace agentloop::cli
