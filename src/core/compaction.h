// Compaction of older history after a prompt-too-long answer (SEMANTICS 4.6).
//
// Only the history before the current turn is compacted, and its last
// `kKeepTail` messages are kept. The first attempt drops the oldest half of
// the compactable head; later attempts replace what is left of the head with
// one summary message. Cuts never orphan a tool_result from its tool_use.
#pragma once

#include <optional>

#include "agentloop/transcript.h"

namespace agentloop {

inline constexpr size_t kKeepTail = 4;
inline constexpr size_t kSummaryChars = 500;

struct CompactionResult {
  size_t dropped = 0;              // messages removed from the front
  std::optional<Message> summary;  // inserted at the front, when set
  size_t from = 0;                 // message count before
  size_t to = 0;                   // message count after
};

// Compacts `transcript` in place. `protect_from` is the index of the first
// message of the current turn (it and everything after stay). `attempt` is
// 1-based. Returns nullopt when nothing can be compacted.
std::optional<CompactionResult> CompactPriorHistory(Transcript& transcript, size_t protect_from,
                                                    int attempt);

}  // namespace agentloop
