#include "todo/snapshot.h"

#include <cstdio>

namespace agentloop::todo {
namespace {

// history followed by tail, indexable.
class Combined {
 public:
  Combined(std::span<const Message> history, std::span<const Message> tail)
      : history_(history), tail_(tail) {}
  size_t size() const { return history_.size() + tail_.size(); }
  const Message& operator[](size_t i) const {
    return i < history_.size() ? history_[i] : tail_[i - history_.size()];
  }

 private:
  std::span<const Message> history_;
  std::span<const Message> tail_;
};

// The name of the tool_use `id` in the nearest assistant message before
// index `before` that has it; "" when none.
std::string ToolUseName(const Combined& all, size_t before, const std::string& id) {
  for (size_t i = before; i-- > 0;) {
    const Message& m = all[i];
    if (m.role != Role::kAssistant) continue;
    for (const ContentBlock& b : m.content) {
      if (b.type == BlockType::kToolUse && b.id == id) return b.name;
    }
  }
  return "";
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

std::optional<Json> FindIn(const Combined& all) {
  for (size_t i = all.size(); i-- > 0;) {
    const Message& m = all[i];
    if (m.role != Role::kUser) continue;
    for (size_t k = m.content.size(); k-- > 0;) {
      const ContentBlock& b = m.content[k];
      if (!b.meta.is_object()) continue;
      if (b.type == BlockType::kToolResult) {
        auto d = b.meta.find("details");
        if (d == b.meta.end() || !IsSnapshotDetails(*d)) continue;
        if (ToolUseName(all, i, b.tool_use_id) != kTodoToolName) continue;
        return *d;
      }
      if (!m.tag.empty()) {
        auto d = b.meta.find("todo_snapshot");
        if (d != b.meta.end() && IsSnapshotDetails(*d)) return *d;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

bool IsToolResultMessage(const Message& m) {
  if (m.role != Role::kUser || m.content.empty()) return false;
  for (const ContentBlock& b : m.content) {
    if (b.type != BlockType::kToolResult) return false;
  }
  return true;
}

bool IsMarker(const Message& m) { return m.role == Role::kUser && m.tag == kMarkerTag; }

bool IsHumanMessage(const Message& m) {
  if (m.role != Role::kUser || !m.tag.empty() || IsToolResultMessage(m)) return false;
  for (const ContentBlock& b : m.content) {
    if (b.type == BlockType::kText) return true;
  }
  return false;
}

bool IsUserRole(const Message& m) { return m.role == Role::kUser && !IsToolResultMessage(m); }

Message MakeMarker() {
  Message m;
  m.role = Role::kUser;
  m.content.push_back(ContentBlock::Text(std::string(kMarkerBody)));
  m.tag = std::string(kMarkerTag);
  return m;
}

std::optional<Json> FindLatestDetails(std::span<const Message> history,
                                      std::span<const Message> tail) {
  return FindIn(Combined(history, tail));
}

TaskList ReplayList(std::span<const Message> history, std::span<const Message> tail) {
  auto details = FindLatestDetails(history, tail);
  if (!details) return TaskList{};
  return TaskListFromDetails(*details);
}

std::string NewestHumanAnchor(std::span<const Message> history, std::span<const Message> tail) {
  Combined all(history, tail);
  for (size_t i = all.size(); i-- > 0;) {
    const Message& m = all[i];
    if (!IsHumanMessage(m)) continue;
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(Fnv1a(m.JoinedText())));
    return std::to_string(i) + ":" + hex;
  }
  return "";
}

TodoSnapshot ReadSnapshot(std::span<const Message> history, std::span<const Message> tail) {
  TodoSnapshot snap;
  TaskList list = ReplayList(history, tail);
  for (const Task& t : list.tasks) {
    if (t.status == TaskStatus::kDeleted) continue;
    SnapshotTask st{t.id, std::string(TaskStatusName(t.status)), t.subject,
                    t.active_form.value_or("")};
    if (!snap.signature.empty()) snap.signature += ",";
    snap.signature += std::to_string(t.id) + ":" + st.status;
    if (IsOpen(t.status)) snap.open.push_back(st);
    snap.tasks.push_back(std::move(st));
  }
  snap.anchor = NewestHumanAnchor(history, tail);
  return snap;
}

std::optional<Json> CarriedSnapshotMeta(std::span<const Message> dropped) {
  auto details = FindLatestDetails(dropped);
  if (!details) return std::nullopt;
  Json carried = Json::object();
  carried["tasks"] = (*details)["tasks"];
  carried["nextId"] = (*details)["nextId"];
  Json meta = Json::object();
  meta["todo_snapshot"] = std::move(carried);
  return meta;
}

}  // namespace agentloop::todo
