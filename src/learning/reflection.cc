#include "learning/reflection.h"

#include <map>

#include "agentloop/json.h"

#include "learning/text.h"

namespace agentloop::learning {

const std::string_view kReflectSystemPrompt =
    "You review a single finished agent turn and decide whether anything is worth remembering "
    "for the future.\n"
    "\n"
    "Look for exactly two things:\n"
    "- a durable FACT worth saving to long-term memory (a stable preference, a project detail, a "
    "hard-won answer) → kind \"memory\"\n"
    "- a repeated multi-step PROCEDURE worth capturing as a reusable skill → kind \"skill\"\n"
    "\n"
    "Be strict. Most turns warrant NOTHING. Never propose transient chit-chat, one-off values, or "
    "things already obvious from context.\n"
    "\n"
    "Output ONLY a JSON array with 0, 1, or 2 items — no prose, no code fences. Each item:\n"
    "  { \"kind\": \"memory\" | \"skill\", \"title\": \"<= 80 chars\", \"nudge\": \"one paragraph "
    "addressed to the assistant, suggesting it consider saving this\" }\n"
    "Return [] when nothing is worth proposing.";

bool ShouldReflect(std::span<const TurnEvent> events) {
  int tool_results = 0;
  int errors = 0;
  int iterations = 0;
  for (const auto& e : events) {
    switch (e.kind) {
      case TurnEvent::Kind::kToolResult:
        ++tool_results;
        break;
      case TurnEvent::Kind::kError:
        ++errors;
        break;
      case TurnEvent::Kind::kModelIteration:
        ++iterations;
        break;
      default:
        break;
    }
  }
  return tool_results >= kReflectMinToolResults || errors >= 1 ||
         iterations >= kReflectMinIterations;
}

std::string BuildTurnDigest(std::span<const TurnEvent> events) {
  std::vector<std::string> parts;
  for (const auto& e : events) {
    if (e.kind == TurnEvent::Kind::kUserPrompt) {
      parts.push_back("USER: " + Clip(e.text, kMaxSnippetChars));
      break;
    }
  }

  std::vector<std::string> order;
  std::map<std::string, int> counts;
  for (const auto& e : events) {
    if (e.kind != TurnEvent::Kind::kToolCallRequested) continue;
    if (counts[e.name]++ == 0) order.push_back(e.name);
  }
  if (!order.empty()) {
    std::string list;
    for (const auto& name : order) {
      if (!list.empty()) list += ", ";
      list += name;
      if (counts[name] > 1) list += "×" + std::to_string(counts[name]);
    }
    parts.push_back("TOOLS: " + list);
  }

  std::vector<std::string> errors;
  for (const auto& e : events) {
    // The seed takes a failed result's message only when it is non-empty,
    // but an error event's message always.
    if (e.kind == TurnEvent::Kind::kToolResult && !e.ok && !e.text.empty()) {
      errors.push_back(Clip(e.text, kMaxErrorSnippetChars));
    } else if (e.kind == TurnEvent::Kind::kError) {
      errors.push_back(Clip(e.text, kMaxErrorSnippetChars));
    }
  }
  if (!errors.empty()) {
    std::string joined;
    for (size_t i = 0; i < errors.size() && i < kMaxErrorSnippets; ++i) {
      if (i > 0) joined += " | ";
      joined += errors[i];
    }
    parts.push_back("ERRORS: " + joined);
  }

  const std::string* final_text = nullptr;
  for (const auto& e : events) {
    if (e.kind == TurnEvent::Kind::kAssistantMessage && !Clip(e.text, 1).empty()) {
      final_text = &e.text;
    }
  }
  if (final_text) parts.push_back("ASSISTANT: " + Clip(*final_text, kMaxSnippetChars));

  std::string all;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) all += "\n";
    all += parts[i];
  }
  return Clip(all, kMaxDigestChars);
}

namespace {

bool IsPersonMessage(const Message& m) {
  if (m.role != Role::kUser || !m.tag.empty()) return false;
  for (const auto& b : m.content) {
    if (b.type == BlockType::kToolResult) return false;
  }
  return true;
}

}  // namespace

size_t TurnStartIndex(std::span<const Message> history) {
  for (size_t i = history.size(); i > 0; --i) {
    if (IsPersonMessage(history[i - 1])) return i - 1;
  }
  return history.size();
}

std::vector<TurnEvent> TurnEventsFromHistory(std::span<const Message> turn_slice,
                                             const TurnEndInfo& info) {
  std::vector<TurnEvent> events;
  for (const auto& m : turn_slice) {
    // A compaction's summary is routine (the band compacts before a call):
    // no event. Only a rejection by the provider is an error (below).
    if (m.tag == "compaction-summary") continue;
    if (m.role == Role::kAssistant) {
      for (const auto& b : m.content) {
        if (b.type == BlockType::kToolUse) events.push_back(TurnEvent::ToolCall(b.name));
      }
      std::string text = m.JoinedText();
      if (!text.empty()) events.push_back(TurnEvent::Assistant(std::move(text)));
      continue;
    }
    if (m.role == Role::kUser) {
      bool any_result = false;
      for (const auto& b : m.content) {
        if (b.type != BlockType::kToolResult) continue;
        any_result = true;
        events.push_back(TurnEvent::ToolResult(!b.is_error, b.is_error ? b.text : ""));
      }
      if (!any_result && IsPersonMessage(m))
        events.push_back(TurnEvent::UserPrompt(m.JoinedText()));
    }
  }
  for (int i = 0; i < info.prompt_too_long; ++i) {
    events.push_back(TurnEvent::Error("context window exceeded — compacted older turns, retrying"));
  }
  for (int i = 0; i < info.counters.model_calls; ++i) events.push_back(TurnEvent::Iteration());
  if (info.stop == StopReason::kFailed) {
    events.push_back(TurnEvent::Error(info.reason.empty() ? "turn failed" : info.reason));
  }
  return events;
}

namespace {

bool ValidString(const Json& obj, const char* key, size_t max, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return false;
  const auto& s = it->get_ref<const std::string&>();
  size_t n = CodePointCount(s);
  if (n < 1 || n > max) return false;
  out = s;
  return true;
}

std::vector<Proposal> ParseUnsafe(std::string_view text) {
  std::string_view candidate = text;
  size_t fence = text.find("```");
  if (fence != std::string_view::npos) {
    size_t q = fence + 3;
    if (text.substr(q, 4) == "json") q += 4;
    if (q < text.size() && text[q] == '\n') ++q;
    size_t close = text.find("```", q);
    if (close != std::string_view::npos) candidate = text.substr(q, close - q);
  }
  size_t start = candidate.find('[');
  size_t end = candidate.rfind(']');
  if (start == std::string_view::npos || end == std::string_view::npos || end <= start) return {};
  std::string_view span = candidate.substr(start, end - start + 1);
  if (span.size() > kMaxJsonSpan) return {};
  Result<Json> parsed = ParseJson(span);
  if (!parsed.ok() || !parsed->is_array()) return {};
  std::vector<Proposal> out;
  for (const auto& item : *parsed) {
    if (!item.is_object()) return {};
    Proposal p;
    auto kind = item.find("kind");
    if (kind == item.end() || !kind->is_string()) return {};
    p.kind = kind->get<std::string>();
    if (p.kind != "memory" && p.kind != "skill") return {};
    if (!ValidString(item, "title", kMaxProposalTitle, p.title)) return {};
    if (!ValidString(item, "nudge", kMaxProposalNudge, p.nudge)) return {};
    out.push_back(std::move(p));
  }
  if (out.size() > kMaxProposals) out.resize(kMaxProposals);
  return out;
}

}  // namespace

std::vector<Proposal> ParseReflectionReply(std::string_view text) {
  try {
    return ParseUnsafe(text);
  } catch (...) {
    return {};
  }
}

std::string BuildNudgeBlock(std::span<const Proposal> proposals) {
  std::string lines;
  for (size_t i = 0; i < proposals.size(); ++i) {
    const Proposal& p = proposals[i];
    if (i > 0) lines += "\n";
    lines += "- (" + SanitizeInline(p.kind, 16) + ") " +
             SanitizeInline(p.title, kMaxProposalTitle) + ": " +
             SanitizeInline(p.nudge, kMaxProposalNudge);
  }
  return "\n\n[reflection] A background review of the last turn surfaced " +
         std::to_string(proposals.size()) +
         " suggestion(s) you MAY act on if genuinely useful (otherwise ignore):\n" + lines +
         "\nTo persist one, you may call `memory_save` (a durable fact) or `synthesize_skill` "
         "(a repeatable procedure) — each asks the user for permission first. Do not act unless "
         "it clearly helps.";
}

}  // namespace agentloop::learning
