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

// The newest snapshot details among all[lo, hi).
std::optional<Json> FindIn(const Combined& all, size_t lo, size_t hi) {
  for (size_t i = hi; i-- > lo;) {
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

std::optional<Json> FindIn(const Combined& all) { return FindIn(all, 0, all.size()); }

// The anchor of the newest human message among all[lo, hi), "" when none.
std::string AnchorIn(const Combined& all, size_t lo, size_t hi) {
  for (size_t i = hi; i-- > lo;) {
    const Message& m = all[i];
    if (!IsHumanMessage(m)) continue;
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(Fnv1a(m.JoinedText())));
    return std::to_string(i) + ":" + hex;
  }
  return "";
}

TodoSnapshot SnapshotFrom(const std::optional<Json>& details, std::string anchor) {
  TodoSnapshot snap;
  TaskList list = details ? TaskListFromDetails(*details) : TaskList{};
  for (const Task& t : list.tasks) {
    if (t.status == TaskStatus::kDeleted) continue;
    SnapshotTask st{t.id, std::string(TaskStatusName(t.status)), t.subject,
                    t.active_form.value_or("")};
    if (!snap.signature.empty()) snap.signature += ",";
    snap.signature += std::to_string(t.id) + ":" + st.status;
    if (IsOpen(t.status)) snap.open.push_back(st);
    snap.tasks.push_back(std::move(st));
  }
  snap.anchor = std::move(anchor);
  return snap;
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
  return AnchorIn(all, 0, all.size());
}

TodoSnapshot ReadSnapshot(std::span<const Message> history, std::span<const Message> tail) {
  Combined all(history, tail);
  return SnapshotFrom(FindIn(all), AnchorIn(all, 0, all.size()));
}

TodoSnapshot SnapshotCursor::Read(std::span<const Message> history, std::span<const Message> tail) {
  Combined all(history, tail);
  const size_t n = history.size();
  bool same = searched_ > 0 && searched_ <= n && first_uid_ != 0 && last_uid_ != 0 &&
              history.front().uid == first_uid_ && history[searched_ - 1].uid == last_uid_;
  if (!same) {
    searched_ = 0;
    details_.reset();
    anchor_.clear();
  }
  if (auto d = FindIn(all, searched_, n)) details_ = std::move(d);
  if (std::string a = AnchorIn(all, searched_, n); !a.empty()) anchor_ = std::move(a);
  searched_ = n;
  first_uid_ = n > 0 ? history.front().uid : 0;
  last_uid_ = n > 0 ? history.back().uid : 0;
  // The tail is transient: searched every time, and newer than the history.
  std::optional<Json> tail_details = FindIn(all, n, all.size());
  std::string tail_anchor = AnchorIn(all, n, all.size());
  return SnapshotFrom(tail_details ? tail_details : details_,
                      tail_anchor.empty() ? anchor_ : tail_anchor);
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
