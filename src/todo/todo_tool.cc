#include "todo/todo_tool.h"

#include "todo/snapshot.h"

namespace agentloop::todo {
namespace {

constexpr const char* kDescription =
    "Track multi-step work as a task list that lives in this session.\n"
    "Actions: create (subject, or tasks[] for several independent tasks; optional "
    "description, activeForm, blockedBy, owner, metadata), update (id plus at least one of "
    "subject, description, activeForm, status, owner, metadata, addBlockedBy, removeBlockedBy), "
    "list (optional status filter, includeDeleted), get (id), delete (id; keeps a tombstone), "
    "clear (drops every task, ids restart at 1).\n"
    "Statuses: pending -> in_progress | completed | deleted; in_progress -> pending | completed | "
    "deleted; completed -> deleted; deleted is final.\n"
    "Guidance: use it for work of 3 or more steps; create independent tasks in one tasks[] call; "
    "mark a task in_progress BEFORE starting it and completed IMMEDIATELY when it is done and "
    "verified; keep exactly one task in_progress; never mark a task completed while its tests "
    "fail; change a status with {\"action\":\"update\",\"id\":N,\"status\":\"completed\"}. "
    "While tasks are open the session may continue on its own, so keep the list true.";

Json IdArray(const char* description) {
  return Json{{"type", "array"}, {"items", {{"type", "integer"}}}, {"description", description}};
}

}  // namespace

Json TodoInputSchema() {
  Json status_enum = Json::array({"pending", "in_progress", "completed", "deleted"});
  Json item = {
      {"type", "object"},
      {"properties",
       {{"subject", {{"type", "string"}}},
        {"description", {{"type", "string"}}},
        {"activeForm", {{"type", "string"}}},
        {"blockedBy", IdArray("Existing task ids this task waits on")},
        {"owner", {{"type", "string"}}},
        {"metadata", {{"type", "object"}}}}},
  };
  Json props = Json::object();
  props["action"] = {{"type", "string"},
                     {"enum", {"create", "update", "list", "get", "delete", "clear"}},
                     {"description", "What to do"}};
  props["subject"] = {{"type", "string"},
                      {"description", "Task subject line (required for a single create)"}};
  props["tasks"] = {
      {"type", "array"},
      {"items", item},
      {"description", "Batch create: several independent tasks (not together with subject)"}};
  props["description"] = {{"type", "string"}, {"description", "Long-form task description"}};
  props["activeForm"] = {
      {"type", "string"},
      {"description",
       "Present-continuous label shown while the task is in_progress (e.g. 'writing tests')"}};
  props["status"] = {{"type", "string"},
                     {"enum", status_enum},
                     {"description", "New status (update) or filter (list)"}};
  props["blockedBy"] = IdArray("Initial blockedBy ids (create only)");
  props["addBlockedBy"] = IdArray("Task ids to add to blockedBy (update only, additive)");
  props["removeBlockedBy"] = IdArray("Task ids to remove from blockedBy (update only)");
  props["owner"] = {{"type", "string"}, {"description", "Agent/owner assigned to this task"}};
  props["metadata"] = {
      {"type", "object"},
      {"description", "Arbitrary metadata; on update a null value deletes that key"}};
  props["id"] = {{"type", "integer"},
                 {"description", "Task id (required for update, get, delete)"}};
  props["includeDeleted"] = {
      {"type", "boolean"},
      {"description", "list only: also return deleted (tombstoned) tasks. Default false"}};
  return Json{{"type", "object"}, {"properties", props}, {"required", {"action"}}};
}

TodoTool::TodoTool() {
  // Built once per process and shared by every instance.
  static const std::shared_ptr<const ToolSpec> kSpec = [] {
    ToolSpec s;
    s.name = std::string(kTodoToolName);
    s.description = kDescription;
    s.input_schema = TodoInputSchema();
    s.mutates = false;
    s.parallel_safe = false;
    return std::make_shared<const ToolSpec>(std::move(s));
  }();
  spec_ = kSpec;
}

Result<ToolOutput> TodoTool::Run(const ToolCall& call, ToolContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  TaskList& list = lists_[ctx.session_id];
  TodoCallResult r = ApplyTodoCall(list, call.input);
  list = std::move(r.list);
  ToolOutput out;
  out.content = std::move(r.content);
  out.is_error = r.is_error;
  out.details = std::move(r.details);
  return out;
}

void TodoTool::ReplayFromHistory(const std::string& session_id, std::span<const Message> history) {
  TaskList list = ReplayList(history);
  std::lock_guard<std::mutex> lock(mu_);
  lists_[session_id] = std::move(list);
}

bool TodoTool::EnsureSeeded(const std::string& session_id, std::span<const Message> history,
                            std::span<const Message> tail) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lists_.count(session_id) > 0) return false;
  }
  TaskList list = ReplayList(history, tail);
  std::lock_guard<std::mutex> lock(mu_);
  return lists_.emplace(session_id, std::move(list)).second;
}

bool TodoTool::Knows(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lists_.count(session_id) > 0;
}

TaskList TodoTool::List(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lists_.find(session_id);
  return it == lists_.end() ? TaskList{} : it->second;
}

void TodoTool::ForgetSession(const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  lists_.erase(session_id);
}

void TodoReplayHook::BeforeModelCall(const HookContext& ctx, ModelRequest& request) {
  if (tool_ == nullptr || tool_->Knows(ctx.session_id)) return;
  // The tail may hold a stored message another hook moved there.
  tool_->EnsureSeeded(ctx.session_id, request.history, request.tail);
}

}  // namespace agentloop::todo
