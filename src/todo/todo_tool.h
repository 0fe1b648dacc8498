// TodoTool: the `todo` tool (rpiv-todo semantics, SEMANTICS 2.8) and the
// hook that seeds it from a session's history.
//
// The list lives in the session: every result carries the full snapshot in
// ToolOutput::details ({action, params, tasks, nextId, error?}), which the
// engine stores in the tool_result block's meta under "details". The newest
// snapshot in the history wins, so the list survives a restart.
//
// The tool keeps a working copy per session id (Run() only gets a
// ToolContext). A session's copy is seeded from its history by
// ReplayFromHistory() — call it when a session is loaded or rewound, or
// register a TodoReplayHook, which seeds a session the tool does not know yet
// from the first model request's history. Run() on an unseeded session
// starts from an empty list.
//
// Spec: name "todo", mutates=false (it edits only the session's own list, so
// plan and explain may use it), parallel_safe=false.
//
// Thread-safety: all methods are thread-safe (one mutex).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "agentloop/hook.h"
#include "agentloop/tool.h"

#include "todo/task_list.h"

namespace agentloop::todo {

class TodoTool : public Tool {
 public:
  TodoTool();

  const ToolSpec& spec() const override { return *spec_; }
  std::shared_ptr<const ToolSpec> shared_spec() const override { return spec_; }

  // Applies the call to the session's list. Never returns a non-OK Status:
  // rejected calls are is_error outputs ("Error: ...") with the unchanged
  // snapshot in details.
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

  // Sets the session's list from the newest snapshot in `history` (an empty
  // list when there is none).
  void ReplayFromHistory(const std::string& session_id, std::span<const Message> history);
  // Seeds only when the session is not known yet. Returns true when it seeded.
  // `tail`: a request's transient messages, read after `history`.
  bool EnsureSeeded(const std::string& session_id, std::span<const Message> history,
                    std::span<const Message> tail = {});
  bool Knows(const std::string& session_id) const;
  // The session's current list (empty when unknown).
  TaskList List(const std::string& session_id) const;
  void ForgetSession(const std::string& session_id);

 private:
  std::shared_ptr<const ToolSpec> spec_;  // immutable, shared by every instance
  mutable std::mutex mu_;
  std::map<std::string, TaskList> lists_;  // Guarded by mu_.
};

// Seeds `tool` for a session from the history of its first model request.
// Register it alongside the tool (it is independent of the todo loop and its
// kill switches).
class TodoReplayHook : public Hook {
 public:
  explicit TodoReplayHook(std::shared_ptr<TodoTool> tool) : tool_(std::move(tool)) {}
  std::string_view name() const override { return "todo-replay"; }
  std::chrono::milliseconds timeout() const override { return {}; }  // inline: never blocks
  void BeforeModelCall(const HookContext& ctx, ModelRequest& request) override;

 private:
  std::shared_ptr<TodoTool> tool_;
};

// The tool's JSON Schema (also used by tests).
Json TodoInputSchema();

}  // namespace agentloop::todo
