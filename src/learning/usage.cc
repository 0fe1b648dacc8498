#include "learning/usage.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <thread>

#include <sys/file.h>

#include "agentloop/events.h"
#include "agentloop/json.h"

#include "env/files.h"

namespace agentloop::learning {
namespace fs = std::filesystem;
namespace {

// An exclusive flock on a directory, released on destruction. Bounded: the
// usage hook runs on the turn's thread, so a holder that never lets go (a
// stopped process) must not stall the turn; after ~2 s the lock is not taken
// and the update is skipped (use counts are advisory).
class DirLock {
 public:
  explicit DirLock(const fs::path& dir) {
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    auto pause = std::chrono::microseconds(200);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if ((errno != EWOULDBLOCK && errno != EINTR) ||
          std::chrono::steady_clock::now() >= deadline) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(50000));
    }
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

int64_t GetInt(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

UsageMap Decode(const Json& root) {
  UsageMap out;
  if (!root.is_object()) return out;
  auto entries = root.find("entries");
  if (entries == root.end() || !entries->is_object()) return out;
  for (auto it = entries->begin(); it != entries->end(); ++it) {
    if (!it.value().is_object()) continue;
    UsageEntry e;
    e.uses = GetInt(it.value(), "uses");
    e.last_used_ms = GetInt(it.value(), "last_used_ms");
    e.completed = GetInt(it.value(), "completed");
    e.not_completed = GetInt(it.value(), "not_completed");
    auto turns = it.value().find("open_turns");
    if (turns != it.value().end() && turns->is_array()) {
      for (const auto& t : *turns) {
        if (t.is_string()) e.open_turns.push_back(t.get<std::string>());
      }
    }
    out[it.key()] = std::move(e);
  }
  return out;
}

Json Encode(const UsageMap& map) {
  Json entries = Json::object();
  for (const auto& [name, e] : map) {
    entries[name] = Json{{"uses", e.uses},
                         {"last_used_ms", e.last_used_ms},
                         {"completed", e.completed},
                         {"not_completed", e.not_completed},
                         {"open_turns", e.open_turns}};
  }
  return Json{{"version", 1}, {"entries", entries}};
}

UsageMap LoadUnlocked(const fs::path& dir) {
  Result<std::string> text = ReadFileToString(dir / kUsageFileName, size_t{16} << 20);
  if (!text.ok()) return {};
  Result<Json> j = ParseJson(*text);
  return j.ok() ? Decode(*j) : UsageMap{};
}

// Runs `edit` on the sidecar under the directory lock; writes when it returns
// true.
template <typename Fn>
Status Update(const fs::path& dir, Fn&& edit) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  DirLock lock(dir);
  if (!lock.ok()) return Internal("cannot lock " + dir.string());
  UsageMap map = LoadUnlocked(dir);
  if (!edit(map)) return Status::Ok();
  return WriteFileAtomic(dir / kUsageFileName, Encode(map).dump(2) + "\n");
}

}  // namespace

UsageMap LoadUsage(const fs::path& store_dir) {
  std::error_code ec;
  if (!fs::is_directory(store_dir, ec)) return {};
  return LoadUnlocked(store_dir);
}

Status RecordUseIn(const fs::path& store_dir, const std::string& name, const std::string& turn_id,
                   int64_t now_ms) {
  return Update(store_dir, [&](UsageMap& map) {
    UsageEntry& e = map[name];
    e.uses++;
    e.last_used_ms = now_ms;
    if (!turn_id.empty() &&
        std::find(e.open_turns.begin(), e.open_turns.end(), turn_id) == e.open_turns.end()) {
      e.open_turns.push_back(turn_id);
      if (e.open_turns.size() > kMaxOpenTurns) e.open_turns.erase(e.open_turns.begin());
    }
    return true;
  });
}

Status RecordOutcomeIn(const fs::path& store_dir, const std::string& name,
                       const std::string& turn_id, bool completed) {
  return Update(store_dir, [&](UsageMap& map) {
    auto it = map.find(name);
    if (it == map.end()) return false;
    auto& turns = it->second.open_turns;
    auto t = std::find(turns.begin(), turns.end(), turn_id);
    if (t == turns.end()) return false;
    turns.erase(t);
    (completed ? it->second.completed : it->second.not_completed)++;
    return true;
  });
}

Status ForgetUsageIn(const fs::path& store_dir, const std::string& name) {
  std::error_code ec;
  if (!fs::is_directory(store_dir, ec)) return Status::Ok();
  return Update(store_dir, [&](UsageMap& map) { return map.erase(name) > 0; });
}

std::string_view UsageKindName(UsageKind kind) {
  return kind == UsageKind::kMemory ? "memory" : "skill";
}

Json UseDetail(UsageKind kind, const fs::path& store_dir, const std::string& name) {
  return Json{{"kind", UsageKindName(kind)}, {"store", store_dir.string()}, {"name", name}};
}

UsageTracker::UsageTracker(std::function<int64_t()> now_ms) : now_ms_(std::move(now_ms)) {
  if (!now_ms_) now_ms_ = SystemNowMs;
}

Status UsageTracker::RecordUse(UsageKind kind, const fs::path& store_dir, const std::string& name,
                               const std::string& session_id, const std::string& turn_id) {
  (void)kind;
  (void)session_id;
  AL_RETURN_IF_ERROR(RecordUseIn(store_dir, name, turn_id, now_ms_()));
  if (!turn_id.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    open_[turn_id].insert({store_dir, name});
  }
  return Status::Ok();
}

Status UsageTracker::RecordTurnOutcome(const std::string& turn_id, bool completed) {
  std::set<std::pair<fs::path, std::string>> uses;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(turn_id);
    if (it == open_.end()) return Status::Ok();
    uses = std::move(it->second);
    open_.erase(it);
  }
  Status first;
  for (const auto& [dir, name] : uses) {
    Status s = RecordOutcomeIn(dir, name, turn_id, completed);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

void UsageHook::AfterToolResult(const HookContext& ctx, const ToolCall& call,
                                const ToolOutput& output) {
  (void)call;
  if (!output.details.is_object()) return;
  auto it = output.details.find(kUseDetailsKey);
  if (it == output.details.end() || !it->is_array()) return;
  for (const auto& use : *it) {
    if (!use.is_object() || !use.contains("store") || !use.contains("name")) continue;
    if (!use["store"].is_string() || !use["name"].is_string()) continue;
    UsageKind kind = use.value("kind", "") == "skill" ? UsageKind::kSkill : UsageKind::kMemory;
    (void)tracker_->RecordUse(kind, use["store"].get<std::string>(), use["name"].get<std::string>(),
                              ctx.session_id, ctx.turn_id);
  }
}

TurnEndVerdict UsageHook::OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) {
  if (info.stop == StopReason::kPendingApproval || info.stop == StopReason::kPendingQuestion) {
    return {};
  }
  (void)tracker_->RecordTurnOutcome(ctx.turn_id, info.stop == StopReason::kCompleted);
  return {};
}

}  // namespace agentloop::learning
