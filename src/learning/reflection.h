// The reflector's pure parts (SEMANTICS 3.2-3.6; moxxy reflector-default):
// the gate, the turn digest, the reply parser and the nudge block.
//
// A turn is described by a small event list of our own (TurnEvent) that
// mirrors the moxxy event kinds the seed reads. TurnEventsFromHistory builds
// it from the slice of a session's history that belongs to the turn plus the
// turn's counters, so the hook needs nothing but what OnTurnEnd is handed.
//
// Characters are Unicode code points (the seed counts UTF-16 units; the two
// agree for text in the Basic Multilingual Plane).
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/hook.h"
#include "agentloop/types.h"

namespace agentloop::learning {

inline constexpr int kReflectMinToolResults = 5;
inline constexpr int kReflectMinIterations = 8;
inline constexpr int kReflectTimeoutMs = 30'000;
inline constexpr size_t kMaxJsonSpan = 32 * 1024;
inline constexpr size_t kMaxDigestChars = 4000;
inline constexpr size_t kMaxSnippetChars = 600;
inline constexpr size_t kMaxErrorSnippetChars = 200;
inline constexpr size_t kMaxErrorSnippets = 5;
inline constexpr int64_t kReflectMaxTokens = 1200;
inline constexpr size_t kMaxProposals = 2;
inline constexpr size_t kMaxProposalTitle = 200;
inline constexpr size_t kMaxProposalNudge = 2000;

// The reflection request's system text (moxxy 0.27.0, verbatim).
extern const std::string_view kReflectSystemPrompt;

struct TurnEvent {
  enum class Kind {
    kUserPrompt,         // text
    kToolCallRequested,  // name
    kToolResult,         // ok; text = the error message when !ok
    kError,              // text = message (any engine-level error)
    kModelIteration,     // one model call
    kAssistantMessage,   // text = the message's text
  };
  Kind kind = Kind::kUserPrompt;
  std::string name;
  std::string text;
  bool ok = true;

  static TurnEvent UserPrompt(std::string text) {
    return {Kind::kUserPrompt, "", std::move(text), true};
  }
  static TurnEvent ToolCall(std::string name) {
    return {Kind::kToolCallRequested, std::move(name), "", true};
  }
  static TurnEvent ToolResult(bool ok, std::string error = "") {
    return {Kind::kToolResult, "", std::move(error), ok};
  }
  static TurnEvent Error(std::string message) {
    return {Kind::kError, "", std::move(message), true};
  }
  static TurnEvent Iteration() { return {Kind::kModelIteration, "", "", true}; }
  static TurnEvent Assistant(std::string text) {
    return {Kind::kAssistantMessage, "", std::move(text), true};
  }
};

// SEMANTICS 3.3: >= 5 tool results, or >= 1 error, or >= 8 model iterations.
bool ShouldReflect(std::span<const TurnEvent> events);

// SEMANTICS 3.4, exactly:
//   USER: <clip(first prompt, 600)>
//   TOOLS: a×2, b            (tool calls by name, first-seen order)
//   ERRORS: e1 | e2          (failed results' and errors' messages, clip 200, first 5)
//   ASSISTANT: <clip(last non-blank assistant text, 600)>
// each line only when non-empty, the whole clipped to 4000. Empty input: "".
std::string BuildTurnDigest(std::span<const TurnEvent> events);

// Index of the first message of the turn that ends `history`: the newest
// user-role message with no tag and no tool_result block (a person's words).
// history.size() when there is none.
size_t TurnStartIndex(std::span<const Message> history);

// The turn's events from its slice of the history (from TurnStartIndex) and
// its end info:
//  - the person's message -> user_prompt; a resumed turn without one in the
//    slice has none;
//  - each assistant message -> tool_call_requested per tool_use block, then
//    assistant_message with its text (when any);
//  - each tool_result block -> tool_result (ok = !is_error, text = content);
//  - a "compaction-summary" message -> nothing (compacting before a call
//    is routine);
//  - each of `info.prompt_too_long` (requests the provider rejected as
//    too long) -> error "context window exceeded — compacted older turns,
//    retrying" (the seed's retryable error);
//  - `counters.model_calls` model iterations;
//  - stop kFailed -> error with the stop reason.
std::vector<TurnEvent> TurnEventsFromHistory(std::span<const Message> turn_slice,
                                             const TurnEndInfo& info);

struct Proposal {
  std::string kind;  // "memory" | "skill"
  std::string title;
  std::string nudge;
  bool operator==(const Proposal&) const = default;
};

// SEMANTICS 3.5 parseReflectionReply: first ```/```json fence (else the whole
// text), first '[' to last ']', <= 32 KiB, JSON array of {kind: memory|skill,
// title: 1..200 chars, nudge: 1..2000 chars} (extra fields dropped; one bad
// item rejects all), first 2 kept. Any failure yields {}. Never throws.
std::vector<Proposal> ParseReflectionReply(std::string_view text);

// SEMANTICS 3.6 buildNudgeBlock, with title and nudge passed through
// SanitizeInline (caps 200 / 2000). Begins with "\n\n[reflection] ".
std::string BuildNudgeBlock(std::span<const Proposal> proposals);

}  // namespace agentloop::learning
