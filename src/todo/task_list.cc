// rpiv-todo's reducer and response envelope, ported: validation first, then
// one commit; summaries byte-compatible with rpiv-todo's content strings.
#include "todo/task_list.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "base/strings.h"

namespace agentloop::todo {
namespace {

constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 - 1

// An integral JSON number (3 or 3.0) as int64.
std::optional<int64_t> AsInteger(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(kMaxSafeInteger)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > kMaxSafeInteger) {
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::string Hash(int64_t id) { return "#" + std::to_string(id); }

bool IsBlank(const std::string& s) { return Trim(s).empty(); }

// The arguments of one call, type-checked. Absent and null are the same.
struct Params {
  std::optional<std::string> subject;
  std::optional<std::string> description;
  std::optional<std::string> active_form;
  std::optional<std::string> owner;
  std::optional<TaskStatus> status;
  std::optional<std::vector<int64_t>> blocked_by;
  std::optional<std::vector<int64_t>> add_blocked_by;
  std::optional<std::vector<int64_t>> remove_blocked_by;
  std::optional<Json> metadata;  // an object
  std::optional<int64_t> id;
  bool include_deleted = false;
  const Json* tasks = nullptr;  // create batch, when an array
};

const Json* Get(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Parses `obj` into `p`; returns an error message or "".
std::string ParseParams(const Json& obj, Params& p, const std::string& where) {
  auto str = [&](const char* key, std::optional<std::string>& out) -> std::string {
    const Json* v = Get(obj, key);
    if (v == nullptr) return "";
    if (!v->is_string()) return where + key + " must be a string";
    out = v->get<std::string>();
    return "";
  };
  auto ids = [&](const char* key, std::optional<std::vector<int64_t>>& out) -> std::string {
    const Json* v = Get(obj, key);
    if (v == nullptr) return "";
    if (!v->is_array()) return where + key + " must be an array of task ids";
    std::vector<int64_t> list;
    for (const Json& e : *v) {
      auto n = AsInteger(e);
      if (!n) return where + key + " must be an array of task ids";
      list.push_back(*n);
    }
    out = std::move(list);
    return "";
  };
  std::string err;
  if (!(err = str("subject", p.subject)).empty()) return err;
  if (!(err = str("description", p.description)).empty()) return err;
  if (!(err = str("activeForm", p.active_form)).empty()) return err;
  if (!(err = str("owner", p.owner)).empty()) return err;
  if (const Json* v = Get(obj, "status")) {
    std::optional<TaskStatus> s;
    if (v->is_string()) s = ParseTaskStatus(v->get<std::string>());
    if (!s) return where + "status must be one of pending, in_progress, completed, deleted";
    p.status = s;
  }
  if (!(err = ids("blockedBy", p.blocked_by)).empty()) return err;
  if (!(err = ids("addBlockedBy", p.add_blocked_by)).empty()) return err;
  if (!(err = ids("removeBlockedBy", p.remove_blocked_by)).empty()) return err;
  if (const Json* v = Get(obj, "metadata")) {
    if (!v->is_object()) return where + "metadata must be an object";
    p.metadata = *v;
  }
  if (const Json* v = Get(obj, "id")) {
    auto n = AsInteger(*v);
    if (!n) return where + "id must be an integer";
    p.id = n;
  }
  if (const Json* v = Get(obj, "includeDeleted")) {
    if (!v->is_boolean()) return where + "includeDeleted must be a boolean";
    p.include_deleted = v->get<bool>();
  }
  if (const Json* v = Get(obj, "tasks"); v != nullptr && v->is_array()) p.tasks = v;
  return "";
}

const Task* Find(const std::vector<Task>& tasks, int64_t id) {
  for (const Task& t : tasks) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

Task BuildCreated(int64_t id, const Params& spec, const std::string& subject) {
  Task t;
  t.id = id;
  t.subject = subject;
  t.status = TaskStatus::kPending;
  // Only truthy values are kept on create (rpiv-todo).
  if (spec.description && !spec.description->empty()) t.description = spec.description;
  if (spec.active_form && !spec.active_form->empty()) t.active_form = spec.active_form;
  if (spec.blocked_by) t.blocked_by = *spec.blocked_by;
  if (spec.owner && !spec.owner->empty()) t.owner = spec.owner;
  if (spec.metadata && !spec.metadata->empty()) t.metadata = *spec.metadata;
  return t;
}

std::string ValidateCreateBlockedBy(const TaskList& list, const Params& spec,
                                    const std::set<int64_t>& siblings) {
  if (!spec.blocked_by) return "";
  for (int64_t dep : *spec.blocked_by) {
    if (siblings.count(dep) > 0) {
      return "blockedBy: " + Hash(dep) +
             " is another item in this batch; create the prerequisite first, then the "
             "dependent with blockedBy";
    }
    const Task* t = Find(list.tasks, dep);
    if (t == nullptr) return "blockedBy: " + Hash(dep) + " not found";
    if (t->status == TaskStatus::kDeleted) return "blockedBy: " + Hash(dep) + " is deleted";
  }
  return "";
}

// Whether giving task `id` the edges `blocked_by` closes a cycle: some
// dependency reaches `id` again through the other tasks' blockedBy edges.
bool DetectCycle(const std::vector<Task>& tasks, int64_t id,
                 const std::vector<int64_t>& blocked_by) {
  std::map<int64_t, const std::vector<int64_t>*> edges;
  for (const Task& t : tasks) edges[t.id] = &t.blocked_by;
  edges[id] = &blocked_by;
  std::set<int64_t> seen;
  std::vector<int64_t> stack(blocked_by.begin(), blocked_by.end());
  while (!stack.empty()) {
    int64_t cur = stack.back();
    stack.pop_back();
    if (cur == id) return true;
    if (!seen.insert(cur).second) continue;
    auto it = edges.find(cur);
    if (it == edges.end()) continue;
    for (int64_t next : *it->second) stack.push_back(next);
  }
  return false;
}

std::string JoinIds(const std::vector<int64_t>& ids, const char* sep) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += sep;
    out += Hash(ids[i]);
  }
  return out;
}

std::string ListLine(const Task& t) {
  std::string line = "[" + std::string(TaskStatusName(t.status)) + "] " + Hash(t.id) + " " +
                     SanitizeTerminalText(t.subject);
  if (t.status == TaskStatus::kInProgress && t.active_form && !t.active_form->empty()) {
    line += " (" + SanitizeTerminalText(*t.active_form) + ")";
  }
  if (!t.blocked_by.empty()) line += " \xE2\x9B\x93 " + JoinIds(t.blocked_by, ",");  // ⛓
  return line;
}

std::string GetLines(const Task& t, const TaskList& list) {
  std::vector<int64_t> blocks;
  for (const Task& other : list.tasks) {
    for (int64_t dep : other.blocked_by) {
      if (dep == t.id) {
        blocks.push_back(other.id);
        break;
      }
    }
  }
  std::string out = Hash(t.id) + " [" + std::string(TaskStatusName(t.status)) + "] " +
                    SanitizeTerminalText(t.subject);
  if (t.description && !t.description->empty()) {
    out += "\n  description: " + SanitizeTerminalText(*t.description);
  }
  if (t.active_form && !t.active_form->empty()) {
    out += "\n  activeForm: " + SanitizeTerminalText(*t.active_form);
  }
  if (!t.blocked_by.empty()) out += "\n  blockedBy: " + JoinIds(t.blocked_by, ", ");
  if (!blocks.empty()) out += "\n  blocks: " + JoinIds(blocks, ", ");
  if (t.owner && !t.owner->empty()) out += "\n  owner: " + SanitizeTerminalText(*t.owner);
  return out;
}

Json Details(const std::string& action, const Json& input, const TaskList& list,
             const std::string* error) {
  Json d = Json::object();
  d["action"] = action;
  d["params"] = input.is_object() ? input : Json::object();
  Json tasks = Json::array();
  for (const Task& t : list.tasks) tasks.push_back(TaskToJson(t));
  d["tasks"] = std::move(tasks);
  d["nextId"] = list.next_id;
  if (error != nullptr) d["error"] = *error;
  return d;
}

TodoCallResult Error(const TaskList& list, const std::string& action, const Json& input,
                     const std::string& message) {
  TodoCallResult r;
  r.list = list;
  r.content = "Error: " + message;
  r.is_error = true;
  r.details = Details(action, input, list, &message);
  return r;
}

TodoCallResult Ok(TaskList list, const std::string& action, const Json& input,
                  std::string content) {
  TodoCallResult r;
  r.details = Details(action, input, list, nullptr);
  r.list = std::move(list);
  r.content = std::move(content);
  return r;
}

TodoCallResult Create(const TaskList& list, const Json& input, const Params& p) {
  const std::string action = "create";
  bool has_subject = p.subject && !IsBlank(*p.subject);
  if (p.tasks != nullptr && has_subject) {
    return Error(list, action, input, "create requires subject or tasks[], not both");
  }
  std::vector<std::pair<Params, std::string>> items;
  std::set<int64_t> siblings;
  if (p.tasks != nullptr) {
    if (p.tasks->empty()) return Error(list, action, input, "tasks[] must be non-empty");
    for (size_t i = 0; i < p.tasks->size(); ++i) {
      const Json& item = (*p.tasks)[i];
      std::string where = "tasks[" + std::to_string(i) + "]: ";
      Params spec;
      if (!item.is_object())
        return Error(list, action, input, where + "subject required for create");
      if (std::string err = ParseParams(item, spec, where); !err.empty()) {
        return Error(list, action, input, err);
      }
      if (!spec.subject || IsBlank(*spec.subject)) {
        return Error(list, action, input, where + "subject required for create");
      }
      std::string subject = *spec.subject;
      items.emplace_back(std::move(spec), std::move(subject));
    }
    for (size_t i = 0; i < items.size(); ++i)
      siblings.insert(list.next_id + static_cast<int64_t>(i));
  } else {
    if (!has_subject) return Error(list, action, input, "subject required for create");
    items.emplace_back(p, *p.subject);
  }
  for (const auto& [spec, subject] : items) {
    if (std::string err = ValidateCreateBlockedBy(list, spec, siblings); !err.empty()) {
      return Error(list, action, input, err);
    }
  }
  TaskList next = list;
  std::string content;
  for (const auto& [spec, subject] : items) {
    Task t = BuildCreated(next.next_id, spec, subject);
    next.next_id += 1;
    if (!content.empty()) content += "\n";
    content += "Created " + Hash(t.id) + ": " + SanitizeTerminalText(t.subject) + " (pending)";
    next.tasks.push_back(std::move(t));
  }
  return Ok(std::move(next), action, input, std::move(content));
}

TodoCallResult Update(const TaskList& list, const Json& input, const Params& p) {
  const std::string action = "update";
  if (!p.id) return Error(list, action, input, "id required for update");
  size_t idx = list.tasks.size();
  for (size_t i = 0; i < list.tasks.size(); ++i) {
    if (list.tasks[i].id == *p.id) {
      idx = i;
      break;
    }
  }
  if (idx == list.tasks.size()) return Error(list, action, input, Hash(*p.id) + " not found");
  const Task& current = list.tasks[idx];

  bool has_mutation = p.subject || p.description || p.active_form || p.status || p.owner ||
                      p.metadata || (p.add_blocked_by && !p.add_blocked_by->empty()) ||
                      (p.remove_blocked_by && !p.remove_blocked_by->empty());
  if (!has_mutation) {
    return Error(list, action, input,
                 "update requires at least one mutable field: subject, description, activeForm, "
                 "status, owner, metadata, addBlockedBy, or removeBlockedBy");
  }

  TaskStatus new_status = current.status;
  if (p.status) {
    if (!IsTransitionValid(current.status, *p.status)) {
      return Error(list, action, input,
                   "illegal transition " + std::string(TaskStatusName(current.status)) +
                       " \xE2\x86\x92 " + std::string(TaskStatusName(*p.status)));
    }
    new_status = *p.status;
  }

  std::vector<int64_t> blocked = current.blocked_by;
  if (p.remove_blocked_by && !p.remove_blocked_by->empty()) {
    std::unordered_set<int64_t> drop(p.remove_blocked_by->begin(), p.remove_blocked_by->end());
    std::erase_if(blocked, [&](int64_t dep) { return drop.count(dep) > 0; });
  }
  if (p.add_blocked_by && !p.add_blocked_by->empty()) {
    for (int64_t dep : *p.add_blocked_by) {
      if (dep == current.id) {
        return Error(list, action, input, "cannot block " + Hash(current.id) + " on itself");
      }
      const Task* t = Find(list.tasks, dep);
      if (t == nullptr)
        return Error(list, action, input, "addBlockedBy: " + Hash(dep) + " not found");
      if (t->status == TaskStatus::kDeleted) {
        return Error(list, action, input, "addBlockedBy: " + Hash(dep) + " is deleted");
      }
      if (std::find(blocked.begin(), blocked.end(), dep) == blocked.end()) blocked.push_back(dep);
    }
    if (DetectCycle(list.tasks, current.id, blocked)) {
      return Error(list, action, input, "addBlockedBy would create a cycle in the blockedBy graph");
    }
  }

  Json metadata = current.metadata;
  if (p.metadata) {
    Json merged = current.metadata.is_object() ? current.metadata : Json::object();
    for (auto it = p.metadata->begin(); it != p.metadata->end(); ++it) {
      if (it.value().is_null()) {
        merged.erase(it.key());
      } else {
        merged[it.key()] = it.value();
      }
    }
    metadata = merged.empty() ? Json() : merged;
  }

  Task updated = current;
  updated.status = new_status;
  if (p.subject) updated.subject = *p.subject;
  if (p.description) updated.description = p.description;
  if (p.active_form) updated.active_form = p.active_form;
  if (p.owner) updated.owner = p.owner;
  updated.blocked_by = std::move(blocked);
  updated.metadata = std::move(metadata);

  bool changed = !(updated == current);
  std::string content;
  if (!changed) {
    content = "No change: " + Hash(updated.id) + " already matches the requested values (status: " +
              std::string(TaskStatusName(new_status)) + ")";
  } else {
    content = "Updated " + Hash(updated.id);
    if (current.status != new_status) {
      content += " (" + std::string(TaskStatusName(current.status)) + " \xE2\x86\x92 " +
                 std::string(TaskStatusName(new_status)) + ")";
    }
  }
  TaskList next = list;
  next.tasks[idx] = std::move(updated);
  return Ok(std::move(next), action, input, std::move(content));
}

}  // namespace

std::string_view TaskStatusName(TaskStatus s) {
  switch (s) {
    case TaskStatus::kPending:
      return "pending";
    case TaskStatus::kInProgress:
      return "in_progress";
    case TaskStatus::kCompleted:
      return "completed";
    case TaskStatus::kDeleted:
      return "deleted";
  }
  return "pending";
}

std::optional<TaskStatus> ParseTaskStatus(std::string_view name) {
  if (name == "pending") return TaskStatus::kPending;
  if (name == "in_progress") return TaskStatus::kInProgress;
  if (name == "completed") return TaskStatus::kCompleted;
  if (name == "deleted") return TaskStatus::kDeleted;
  return std::nullopt;
}

bool IsTransitionValid(TaskStatus from, TaskStatus to) {
  if (from == to) return true;
  switch (from) {
    case TaskStatus::kPending:
    case TaskStatus::kInProgress:
      return true;  // to any other status
    case TaskStatus::kCompleted:
      return to == TaskStatus::kDeleted;
    case TaskStatus::kDeleted:
      return false;
  }
  return false;
}

Json TaskToJson(const Task& t) {
  Json j = Json::object();
  j["id"] = t.id;
  j["subject"] = t.subject;
  if (t.description) j["description"] = *t.description;
  if (t.active_form) j["activeForm"] = *t.active_form;
  j["status"] = std::string(TaskStatusName(t.status));
  if (!t.blocked_by.empty()) j["blockedBy"] = t.blocked_by;
  if (t.owner) j["owner"] = *t.owner;
  if (t.metadata.is_object() && !t.metadata.empty()) j["metadata"] = t.metadata;
  return j;
}

std::optional<Task> TaskFromJson(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  Task t;
  auto id = j.find("id");
  if (id == j.end()) return std::nullopt;
  auto n = AsInteger(*id);
  if (!n) return std::nullopt;
  t.id = *n;
  auto subject = j.find("subject");
  if (subject == j.end() || !subject->is_string()) return std::nullopt;
  t.subject = subject->get<std::string>();
  auto status = j.find("status");
  if (status == j.end() || !status->is_string()) return std::nullopt;
  auto s = ParseTaskStatus(status->get<std::string>());
  if (!s) return std::nullopt;
  t.status = *s;
  auto opt_str = [&](const char* key, std::optional<std::string>& out) {
    if (auto it = j.find(key); it != j.end() && it->is_string()) out = it->get<std::string>();
  };
  opt_str("description", t.description);
  opt_str("activeForm", t.active_form);
  opt_str("owner", t.owner);
  if (auto it = j.find("blockedBy"); it != j.end() && it->is_array()) {
    for (const Json& e : *it) {
      if (auto dep = AsInteger(e)) t.blocked_by.push_back(*dep);
    }
  }
  if (auto it = j.find("metadata"); it != j.end() && it->is_object() && !it->empty()) {
    t.metadata = *it;
  }
  return t;
}

bool IsSnapshotDetails(const Json& details) {
  if (!details.is_object()) return false;
  auto tasks = details.find("tasks");
  auto next = details.find("nextId");
  return tasks != details.end() && tasks->is_array() && next != details.end() && next->is_number();
}

TaskList TaskListFromDetails(const Json& details) {
  TaskList list;
  if (!IsSnapshotDetails(details)) return list;
  int64_t max_id = 0;
  for (const Json& j : details["tasks"]) {
    if (auto t = TaskFromJson(j)) {
      max_id = std::max(max_id, t->id);
      list.tasks.push_back(std::move(*t));
    }
  }
  auto next = AsInteger(details["nextId"]);
  list.next_id = (next && *next >= 1) ? *next : max_id + 1;
  return list;
}

TodoCallResult ApplyTodoCall(const TaskList& list, const Json& input) {
  std::string action;
  if (input.is_object()) {
    if (auto it = input.find("action"); it != input.end() && it->is_string()) {
      action = it->get<std::string>();
    }
  }
  if (action.empty()) {
    return Error(list, action, input,
                 "action required: one of create, update, list, get, delete, clear");
  }
  if (action != "create" && action != "update" && action != "list" && action != "get" &&
      action != "delete" && action != "clear") {
    return Error(
        list, action, input,
        "unknown action \"" + action + "\": use create, update, list, get, delete or clear");
  }
  Params p;
  if (std::string err = ParseParams(input, p, ""); !err.empty()) {
    return Error(list, action, input, err);
  }

  if (action == "create") return Create(list, input, p);
  if (action == "update") return Update(list, input, p);
  if (action == "list") {
    std::string content;
    for (const Task& t : list.tasks) {
      if (!p.include_deleted && t.status == TaskStatus::kDeleted) continue;
      if (p.status && t.status != *p.status) continue;
      if (!content.empty()) content += "\n";
      content += ListLine(t);
    }
    if (content.empty()) content = "No tasks";
    return Ok(list, action, input, std::move(content));
  }
  if (action == "get") {
    if (!p.id) return Error(list, action, input, "id required for get");
    const Task* t = Find(list.tasks, *p.id);
    if (t == nullptr) return Error(list, action, input, Hash(*p.id) + " not found");
    return Ok(list, action, input, GetLines(*t, list));
  }
  if (action == "delete") {
    if (!p.id) return Error(list, action, input, "id required for delete");
    TaskList next = list;
    for (Task& t : next.tasks) {
      if (t.id != *p.id) continue;
      if (t.status == TaskStatus::kDeleted) {
        return Error(list, action, input, Hash(t.id) + " is already deleted");
      }
      t.status = TaskStatus::kDeleted;
      std::string content = "Deleted " + Hash(t.id) + ": " + SanitizeTerminalText(t.subject);
      return Ok(std::move(next), action, input, std::move(content));
    }
    return Error(list, action, input, Hash(*p.id) + " not found");
  }
  // clear
  size_t count = list.tasks.size();
  return Ok(TaskList{}, action, input, "Cleared " + std::to_string(count) + " tasks");
}

std::string SanitizeTerminalText(std::string_view text) {
  std::string in = SanitizeUtf8(text);
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    auto c = static_cast<unsigned char>(in[i]);
    if (c == 0x1B) {                                // ESC
      if (i + 1 < in.size() && in[i + 1] == '[') {  // CSI: parameters then a final byte
        size_t j = i + 2;
        while (j < in.size() && !(in[j] >= 0x40 && in[j] <= 0x7E)) ++j;
        i = std::min(j + 1, in.size());
      } else if (i + 1 < in.size() && in[i + 1] == ']') {  // OSC: up to BEL or ESC '\'
        size_t j = i + 2;
        while (j < in.size() && in[j] != '\x07' &&
               !(in[j] == 0x1B && j + 1 < in.size() && in[j + 1] == '\\'))
          ++j;
        if (j < in.size() && in[j] == '\x07') {
          i = j + 1;
        } else {
          i = std::min(j + 2, in.size());
        }
      } else {
        i = std::min(i + 2, in.size());  // ESC + one character
      }
      continue;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7F) {
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    Utf8Char d = DecodeUtf8(in, i);  // valid: `in` is sanitized
    size_t n = d.size;
    char32_t cp = d.cp;
    if (cp >= 0x80 && cp <= 0x9F) {  // C1
    } else if (cp == 0x2028 || cp == 0x2029) {
      out += ' ';
    } else if (cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
               (cp >= 0x2066 && cp <= 0x2069) || cp == 0x061C) {
    } else {
      out.append(in, i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace agentloop::todo
