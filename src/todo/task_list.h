// The todo list model and its reducer: rpiv-todo semantics (SEMANTICS 2.8).
//
// A TaskList is {tasks, next_id}. ApplyTodoCall(list, input) validates the
// whole call before changing anything and returns the new list, the human
// summary the model sees and the full snapshot (`details`) that is stored in
// the session and replayed: {action, params, tasks, nextId, error?}.
//
// Statuses and transitions:
//   pending     -> in_progress, completed, deleted
//   in_progress -> pending, completed, deleted
//   completed   -> deleted
//   deleted     (terminal)
// A transition to the current status is accepted (reported as "No change"
// when nothing else changed). `delete` tombstones (status deleted) rather
// than removing; `clear` drops everything and resets the id counter to 1.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"

namespace agentloop::todo {

enum class TaskStatus { kPending, kInProgress, kCompleted, kDeleted };
std::string_view TaskStatusName(TaskStatus s);  // "pending", "in_progress", ...
std::optional<TaskStatus> ParseTaskStatus(std::string_view name);
// Whether `from -> to` is allowed (same -> same always is).
bool IsTransitionValid(TaskStatus from, TaskStatus to);
// pending or in_progress.
inline bool IsOpen(TaskStatus s) {
  return s == TaskStatus::kPending || s == TaskStatus::kInProgress;
}

struct Task {
  int64_t id = 0;
  std::string subject;
  std::optional<std::string> description;
  std::optional<std::string> active_form;
  TaskStatus status = TaskStatus::kPending;
  std::vector<int64_t> blocked_by;  // insertion order; empty = field absent
  std::optional<std::string> owner;
  Json metadata;  // a non-empty object, or null when absent

  bool operator==(const Task&) const = default;
};

struct TaskList {
  std::vector<Task> tasks;  // creation order, tombstones included
  int64_t next_id = 1;

  bool operator==(const TaskList&) const = default;
};

// {id, subject, description?, activeForm?, status, blockedBy?, owner?, metadata?}
Json TaskToJson(const Task& task);
// Lenient: nullopt when id is not an integer, subject not a string or status
// unknown; optional fields of the wrong type are dropped.
std::optional<Task> TaskFromJson(const Json& j);

// Whether `details` looks like a todo snapshot: `tasks` is an array and
// `nextId` a number (the rpiv-todo replay test).
bool IsSnapshotDetails(const Json& details);
// The list held by snapshot details (malformed tasks are skipped; a
// non-integer or < 1 nextId becomes max(id)+1).
TaskList TaskListFromDetails(const Json& details);

struct TodoCallResult {
  TaskList list;        // the state after the call (unchanged on error)
  std::string content;  // "Created #3: ... (pending)", "Error: ..." ...
  bool is_error = false;
  Json details;  // {action, params, tasks, nextId, error?}
};

// Applies one `todo` call. `input` is the call's arguments (an object with
// `action`). Never fails: problems are in-band (`is_error`, content
// "Error: <message>", details.error) and leave the list unchanged.
TodoCallResult ApplyTodoCall(const TaskList& list, const Json& input);

// Removes terminal escape sequences, C0/C1 controls (newline, CR and tab
// become a space), U+2028/U+2029 (a space), bidi controls and LRM/RLM from
// model text shown in summaries (rpiv-todo `sanitizeTerminalText`). Invalid
// UTF-8 is replaced with U+FFFD.
std::string SanitizeTerminalText(std::string_view text);

}  // namespace agentloop::todo
