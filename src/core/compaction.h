// Compaction of the history the model sees (SEMANTICS 4.6).
//
// Two callers:
//  - the proactive band: before a model call over the soft threshold
//    (0.7 of the context window), stage 1 drops the oldest half of the prior
//    head (history before the user's latest request); if still over,
//    stage 2 replaces everything before the last kKeepTail messages with
//    one summary, re-inserting the user's latest request after it. So older
//    steps of the running turn are summarised too.
//  - prompt-too-long recovery (CompactPriorHistory): only history before
//    the current turn, its last kKeepTail messages kept.
//
// Invariants of every plan: the last kKeepTail messages and the user's
// latest request stay; a cut never separates a tool_result from its
// tool_use. Compaction changes the view sent to the model only: the caller
// records it as a `compaction` event and the store keeps every message.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agentloop/transcript.h"

namespace agentloop {

inline constexpr size_t kKeepTail = 4;
inline constexpr size_t kSummaryChars = 500;
inline constexpr std::string_view kCompactionSummaryTag = "compaction-summary";

struct CompactionResult {
  size_t dropped = 0;              // messages removed from the front
  std::optional<Message> summary;  // inserted at the front, when set
  std::vector<Message> kept;       // re-inserted after the summary
  size_t from = 0;                 // message count before
  size_t to = 0;                   // message count after
};

// What a proactive compaction removes: messages [0, drop). With
// `summarize`, one summary replaces them; `keep_request` (an index below
// `drop`) is the user's latest request, re-inserted after the summary.
struct CompactionPlan {
  size_t drop = 0;
  bool summarize = false;
  std::optional<size_t> keep_request;
};

// Index where the untouchable tail begins: size - kKeepTail, moved back
// while it would start on a tool result (its call stays with it).
size_t TailStart(std::span<const Message> msgs);

// The user's latest request at or before `at`: the last user-role message
// with text and no tool results that the engine did not make (no tag).
std::optional<size_t> LatestRequest(std::span<const Message> msgs, size_t at);

// Stage 1: drop the oldest half (rounded up) of the prior head
// [0, min(request, TailStart)). nullopt when nothing can be dropped.
std::optional<CompactionPlan> PlanDropOldestHalf(std::span<const Message> msgs,
                                                 std::optional<size_t> request);

// Stage 2: summarise [0, TailStart) except the user's latest request.
// nullopt when there is nothing to summarise.
std::optional<CompactionPlan> PlanSummary(std::span<const Message> msgs,
                                          std::optional<size_t> request);

// The seed's truncating summary text of `dropped`: "role: text" flattened
// (tool calls as [tool_use name(args)], results as [tool_result for id]),
// cut to kSummaryChars, ending with "…".
std::string TruncatingSummary(std::span<const Message> dropped);

// The engine-made summary message for `count` compacted messages: tagged
// kCompactionSummaryTag, text "[compacted N earlier message(s)]\n" + `text`;
// `carried` (e.g. the todo list's snapshot) goes on its block's meta.
Message SummaryMessage(size_t count, const std::string& text, std::optional<Json> carried);

// Applies `plan` to `transcript` with `summary` (required when
// plan.summarize; ignored otherwise, except that a plan that only drops but
// must carry data passes a summary too).
CompactionResult ApplyCompaction(Transcript& transcript, const CompactionPlan& plan,
                                 std::optional<Message> summary);

// Prompt-too-long recovery: compacts `transcript` in place. `protect_from`
// is the index of the first message of the current turn (it and everything
// after stay). `attempt` is 1-based: the first drops the oldest half of the
// compactable head, later ones summarise it. nullopt: nothing to compact.
std::optional<CompactionResult> CompactPriorHistory(Transcript& transcript, size_t protect_from,
                                                    int attempt);

}  // namespace agentloop
