// Reading the todo list and the loop's anchor out of a session's history.
//
// The list lives in the session: every `todo` tool result carries the full
// snapshot in its tool_result block's meta ({"details": {action, params,
// tasks, nextId, error?}}), and the newest one wins (rpiv-todo replay). Both
// the tool (after a restart) and the loop hook read it from the history, so
// they always agree.
//
// A snapshot is recognised in either of two places, scanning from the end:
//  - a kToolResult block whose meta.details has `tasks` (array) and numeric
//    `nextId`, and whose tool_use (matched by tool_use_id in the nearest
//    preceding assistant message that has it) is named "todo";
//  - a block whose meta has "todo_snapshot" ({tasks, nextId}) in a user
//    message with a non-empty tag (an engine-made entry such as a compaction
//    summary): compaction can carry the list over this way when it drops the
//    tool result that held it (see CarriedSnapshotMeta()).
//
// Message classes used by the loop (our equivalents of Pi's roles):
//  - tool-result message: role user, non-empty, every block a kToolResult
//    (Pi `toolResult`);
//  - marker: role user, tag "todo-loop:continue" (Pi `custom` marker);
//  - human message: role user, no tag, at least one kText block, not a
//    tool-result message;
//  - user-role (for the marker rule): role user and not a tool-result message
//    (so markers and other tagged entries count, as Pi projects them to user).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/types.h"

#include "todo/task_list.h"

namespace agentloop::todo {

inline constexpr std::string_view kTodoToolName = "todo";
inline constexpr std::string_view kMarkerTag = "todo-loop:continue";
// Constant, no counters: a stale marker cannot claim some other round. It
// states the instruction because with injectState off it is the only text
// the model receives.
inline constexpr std::string_view kMarkerBody =
    "Continue with the open todo tasks. If the human's latest instruction says to stop or limits "
    "what to do, do that instead.";

bool IsToolResultMessage(const Message& m);
bool IsMarker(const Message& m);
bool IsHumanMessage(const Message& m);
bool IsUserRole(const Message& m);

// The hidden continuation marker appended to the stored history when the
// loop continues: role user, tag kMarkerTag, one text block kMarkerBody.
Message MakeMarker();

struct SnapshotTask {
  int64_t id = 0;
  std::string status;  // "pending" | "in_progress" | "completed"
  std::string subject;
  std::string active_form;

  bool operator==(const SnapshotTask&) const = default;
};

struct TodoSnapshot {
  std::vector<SnapshotTask> tasks;  // tracked tasks, tombstones excluded, list order
  std::vector<SnapshotTask> open;   // pending or in_progress, list order
  std::string signature;            // "1:pending,2:completed"; "" when no list
  std::string anchor;               // id of the newest human message; "" when none
};

// The newest snapshot details in `history` followed by `tail` (a request's
// transient messages), or nullopt when there is none.
std::optional<Json> FindLatestDetails(std::span<const Message> history,
                                      std::span<const Message> tail = {});

// The list the history holds (empty list, next_id 1, when none).
TaskList ReplayList(std::span<const Message> history, std::span<const Message> tail = {});

// The loop's view of the history: tracked/open tasks, signature and anchor.
TodoSnapshot ReadSnapshot(std::span<const Message> history, std::span<const Message> tail = {});

// Remembers how far one session's history has been searched, so that the
// loop's per-step reads cost O(new messages), not O(history): a session's
// history only grows between steps. A history that changed otherwise
// (compaction replaced its prefix, a message was popped) is recognised by
// the uids of its first and last searched messages and searched again in
// full; messages without a uid (0) are always searched in full.
// Not thread-safe: one per session, used by one step at a time.
class SnapshotCursor {
 public:
  // Same results as ReadSnapshot(history, tail).
  TodoSnapshot Read(std::span<const Message> history, std::span<const Message> tail = {});

 private:
  size_t searched_ = 0;  // history[0, searched_) has been searched
  uint64_t first_uid_ = 0;
  uint64_t last_uid_ = 0;
  std::optional<Json> details_;  // newest snapshot details in that prefix
  std::string anchor_;           // newest human anchor in that prefix
};

// The anchor: "<index>:<fnv1a-64 hex of the joined text>" of the newest human
// message (index into history+tail), "" when there is none. The index makes
// two identical messages ("go on", "go on") distinct budgets; note that a
// compaction that drops earlier messages shifts the index and so starts a new
// budget, like a new human message would.
std::string NewestHumanAnchor(std::span<const Message> history, std::span<const Message> tail = {});

// For compaction: the meta to put on a block of the engine-made message that
// replaces `dropped` ({"todo_snapshot": {tasks, nextId}}), or nullopt when
// `dropped` holds no todo snapshot.
std::optional<Json> CarriedSnapshotMeta(std::span<const Message> dropped);

}  // namespace agentloop::todo
