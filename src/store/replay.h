// Rebuilding a session's history from its stored events (no I/O): the pure
// half of SessionStore::Load, shared by every store implementation.
//
//   rows (seq order) ──Replay──▶ messages, last turn_end, begun/ended calls
//                    ──CrashRepair──▶ the crash-recovery message, if needed
#pragma once

#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "agentloop/store.h"

namespace agentloop::store {

// Result contents of the crash-recovery tool_results (docs/storage.md).
inline constexpr std::string_view kRecoveryTag = "crash-recovery";
inline constexpr std::string_view kNotRunNotStarted =
    "not run: the process stopped before this tool call started";
// Begun, never ended: it may have done part or all of its work.
inline constexpr std::string_view kStartedNotFinished =
    "the tool call started but the process stopped before it finished; its result is unknown "
    "and its effects may have happened";
// Begun and ended, but the message with its result was never committed.
inline constexpr std::string_view kRanResultLost =
    "the tool call ran but the process stopped before its result was saved; its effects may "
    "have happened";

struct ReplayResult {
  std::vector<Message> messages;
  // turn_id of the event that appended messages.back() (for the repair).
  std::string last_message_turn_id;
  std::optional<LastTurnEnd> last_turn_end;
  // The newest turn_begin with no turn_end after it.
  std::optional<SessionSnapshot::BegunTurn> unfinished_turn;
  std::vector<LoadWarning> warnings;
  uint64_t last_seq = 0;
  std::set<std::string> begun;  // tool_call_begin ids
  std::set<std::string> ended;  // tool_call_end ids
  std::optional<SessionSnapshot::ContextMark> context_mark;
};

// Replays `rows` (ascending seq); also finds the last context measurement
// (SessionSnapshot::context_mark). Errors: kDataLoss when a message or
// compaction row cannot be parsed or applied (names the seq); other corrupt
// rows become warnings.
Result<ReplayResult> Replay(std::span<const StoredEvent> rows);

// The user message answering the unanswered tool_use blocks of the last
// message, or nullopt when the history does not end with such a message or
// `open` (the open checkpoint) covers it (a durable pause, not a crash).
// `last_closed` is the session's most recently closed checkpoint: when it
// covers the message (its batch was resolved but the process stopped before
// the turn resumed), its results_so_far are used for the ids they answer, so
// results of calls that did run are not lost.
std::optional<Message> CrashRepair(const ReplayResult& replay,
                                   const std::optional<Checkpoint>& open,
                                   const std::optional<Checkpoint>& last_closed = std::nullopt);

// The title of a session from a user message: whitespace runs collapsed to
// one space, trimmed, cut to 80 characters (code points).
std::string MakeTitle(std::string_view text);

}  // namespace agentloop::store
