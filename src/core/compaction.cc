#include "core/compaction.h"

#include "base/strings.h"

namespace agentloop {
namespace {

bool IsToolResultMessage(const Message& m) {
  if (m.role != Role::kUser || m.content.empty()) return false;
  for (const auto& b : m.content) {
    if (b.type != BlockType::kToolResult) return false;
  }
  return true;
}

// Flattens a message for the summary: "role: text", tool calls and results
// as [tool_use name(args)] / [tool_result for id] content.
std::string Flatten(const Message& m) {
  std::string s(RoleName(m.role));
  s += ": ";
  for (const auto& b : m.content) {
    switch (b.type) {
      case BlockType::kText:
        s += b.text;
        break;
      case BlockType::kToolUse:
        s += "[tool_use " + b.name + "(" + b.input.dump() + ")]";
        break;
      case BlockType::kToolResult:
        s += "[tool_result for " + b.tool_use_id + "] " + (b.is_error ? "ERROR: " : "") + b.text;
        break;
      case BlockType::kThinking:
      case BlockType::kRedactedThinking:
        break;
    }
    s += ' ';
  }
  return s;
}

// Moves a cut point forward past messages that would start the history
// invalidly (tool results whose tool_use was cut).
size_t SafeCut(std::span<const Message> msgs, size_t cut, size_t limit) {
  while (cut < limit && IsToolResultMessage(msgs[cut])) ++cut;
  return cut;
}

}  // namespace

std::optional<CompactionResult> CompactPriorHistory(Transcript& transcript, size_t protect_from,
                                                    int attempt) {
  auto msgs = transcript.messages();
  if (protect_from > msgs.size()) protect_from = msgs.size();
  if (protect_from <= kKeepTail) return std::nullopt;
  size_t head = protect_from - kKeepTail;
  // A leading summary from an earlier compaction counts as head too.
  CompactionResult r;
  r.from = msgs.size();
  if (attempt <= 1) {
    size_t cut = SafeCut(msgs, (head + 1) / 2, head);
    if (cut == 0) return std::nullopt;
    r.dropped = cut;
  } else {
    size_t cut = SafeCut(msgs, head, protect_from);
    if (cut == 0) return std::nullopt;
    std::string flat;
    for (size_t i = 0; i < cut && flat.size() < kSummaryChars * 2; ++i) flat += Flatten(msgs[i]);
    Message summary;
    summary.role = Role::kUser;
    summary.tag = "compaction-summary";
    std::string text = "[compacted " + std::to_string(cut) + " earlier message(s)]\n";
    text += std::string(TruncateUtf8(SanitizeUtf8(flat), kSummaryChars));
    text += "\xE2\x80\xA6";  // …
    summary.content.push_back(ContentBlock::Text(std::move(text)));
    r.dropped = cut;
    r.summary = summary;
  }
  std::vector<Message> replacement;
  if (r.summary) replacement.push_back(*r.summary);
  transcript.ReplacePrefix(r.dropped, std::move(replacement));
  r.to = transcript.size();
  return r;
}

}  // namespace agentloop
