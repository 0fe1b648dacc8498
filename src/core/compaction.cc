#include "core/compaction.h"

#include "base/strings.h"
#include "protocol/image.h"

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
        for (const auto& image : b.images) s += " " + DescribeImage(image, "history summarised");
        break;
      case BlockType::kImage:
        s += DescribeImage(b, "history summarised");
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

size_t TailStart(std::span<const Message> msgs) {
  if (msgs.size() <= kKeepTail) return 0;
  size_t t = msgs.size() - kKeepTail;
  while (t > 0 && IsToolResultMessage(msgs[t])) --t;
  return t;
}

std::optional<size_t> LatestRequest(std::span<const Message> msgs, size_t at) {
  if (msgs.empty()) return std::nullopt;
  if (at >= msgs.size()) at = msgs.size() - 1;
  for (size_t i = at + 1; i-- > 0;) {
    const Message& m = msgs[i];
    if (m.role != Role::kUser || !m.tag.empty() || IsToolResultMessage(m)) continue;
    for (const auto& b : m.content) {
      if (b.type == BlockType::kText && !b.text.empty()) return i;
    }
  }
  return std::nullopt;
}

std::optional<CompactionPlan> PlanDropOldestHalf(std::span<const Message> msgs,
                                                 std::optional<size_t> request) {
  size_t head = TailStart(msgs);
  if (request && *request < head) head = *request;
  if (head == 0) return std::nullopt;
  size_t cut = SafeCut(msgs, (head + 1) / 2, head);
  if (cut == 0) return std::nullopt;
  return CompactionPlan{.drop = cut, .summarize = false, .keep_request = std::nullopt};
}

std::optional<CompactionPlan> PlanSummary(std::span<const Message> msgs,
                                          std::optional<size_t> request) {
  size_t cut = TailStart(msgs);
  if (cut == 0) return std::nullopt;
  CompactionPlan plan{.drop = cut, .summarize = true, .keep_request = std::nullopt};
  if (request && *request < cut) {
    plan.keep_request = request;
    // Only the request itself and nothing else: not worth a summary.
    if (cut == 1) return std::nullopt;
  }
  // A lone leading summary is already as small as it gets.
  if (cut == 1 && msgs[0].tag == kCompactionSummaryTag) return std::nullopt;
  return plan;
}

std::string TruncatingSummary(std::span<const Message> dropped) {
  std::string flat;
  for (size_t i = 0; i < dropped.size() && flat.size() < kSummaryChars * 2; ++i) {
    flat += Flatten(dropped[i]);
  }
  std::string text(TruncateUtf8(SanitizeUtf8(flat), kSummaryChars));
  text += "\xE2\x80\xA6";  // …
  return text;
}

Message SummaryMessage(size_t count, const std::string& text, std::optional<Json> carried) {
  Message summary;
  summary.role = Role::kUser;
  summary.tag = std::string(kCompactionSummaryTag);
  ContentBlock b =
      ContentBlock::Text("[compacted " + std::to_string(count) + " earlier message(s)]\n" + text);
  if (carried) b.meta = std::move(*carried);
  summary.content.push_back(std::move(b));
  return summary;
}

CompactionResult ApplyCompaction(Transcript& transcript, const CompactionPlan& plan,
                                 std::optional<Message> summary) {
  auto msgs = transcript.messages();
  CompactionResult r;
  r.from = msgs.size();
  r.dropped = plan.drop;
  r.summary = std::move(summary);
  if (plan.keep_request && *plan.keep_request < plan.drop) {
    r.kept.push_back(msgs[*plan.keep_request]);
  }
  std::vector<Message> replacement;
  if (r.summary) replacement.push_back(*r.summary);
  for (const Message& m : r.kept) replacement.push_back(m);
  transcript.ReplacePrefix(r.dropped, std::move(replacement));
  r.to = transcript.size();
  return r;
}

std::optional<CompactionResult> CompactPriorHistory(Transcript& transcript, size_t protect_from,
                                                    int attempt) {
  auto msgs = transcript.messages();
  if (protect_from > msgs.size()) protect_from = msgs.size();
  if (protect_from <= kKeepTail) return std::nullopt;
  size_t head = protect_from - kKeepTail;
  CompactionPlan plan;
  std::optional<Message> summary;
  if (attempt <= 1) {
    size_t cut = SafeCut(msgs, (head + 1) / 2, head);
    if (cut == 0) return std::nullopt;
    plan.drop = cut;
  } else {
    size_t cut = SafeCut(msgs, head, protect_from);
    if (cut == 0) return std::nullopt;
    plan.drop = cut;
    plan.summarize = true;
    summary = SummaryMessage(cut, TruncatingSummary(msgs.subspan(0, cut)), std::nullopt);
  }
  return ApplyCompaction(transcript, plan, std::move(summary));
}

}  // namespace agentloop
