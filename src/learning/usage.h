// Usage counts of memories and skills: a JSON sidecar `usage.json` in each
// store directory, so entries that are never used (or whose turns do not
// complete) can be found and pruned.
//
//   {"version": 1, "entries": {"<name>": {"uses": 3, "last_used_ms": 1714...,
//     "completed": 2, "not_completed": 1, "open_turns": ["turn_..."]}}}
//
// A use is recorded when a body is loaded (memory_search returning it, the
// skill tool); the outcome when the turn that used it ends: completed or not.
// A paused turn's outcome is recorded when it finally ends in this process;
// uses whose outcome was never seen (process exit) stay in neither count.
//
// Updates are read-modify-write under an exclusive flock(2) on the store
// directory, and the file is replaced atomically (temp file + rename), so
// concurrent processes never lose an update or see a torn file.
//
// Thread-safety: the free functions are safe to call concurrently;
// UsageTracker is thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agentloop/hook.h"
#include "agentloop/status.h"

namespace agentloop::learning {

inline constexpr std::string_view kUsageFileName = "usage.json";
inline constexpr size_t kMaxOpenTurns = 16;

struct UsageEntry {
  int64_t uses = 0;
  int64_t last_used_ms = 0;  // Unix epoch ms; 0: never
  int64_t completed = 0;
  int64_t not_completed = 0;
  std::vector<std::string> open_turns;  // turns that used it and have not ended yet

  bool operator==(const UsageEntry&) const = default;
};
using UsageMap = std::map<std::string, UsageEntry>;

// The sidecar of `store_dir`; empty when it does not exist. A corrupt file
// reads as empty (it is rewritten on the next update).
UsageMap LoadUsage(const std::filesystem::path& store_dir);

// uses += 1, last_used_ms = now_ms, turn_id joins open_turns (deduplicated,
// at most kMaxOpenTurns, oldest dropped). Creates the directory if needed.
Status RecordUseIn(const std::filesystem::path& store_dir, const std::string& name,
                   const std::string& turn_id, int64_t now_ms);
// When turn_id is in `name`'s open_turns: removes it and counts the outcome.
Status RecordOutcomeIn(const std::filesystem::path& store_dir, const std::string& name,
                       const std::string& turn_id, bool completed);
// Drops `name` (after the memory or skill was deleted).
Status ForgetUsageIn(const std::filesystem::path& store_dir, const std::string& name);

enum class UsageKind { kMemory, kSkill };
std::string_view UsageKindName(UsageKind kind);  // "memory" | "skill"

// The marker a tool puts in ToolOutput::details so UsageHook can record a
// use: details["learning_use"] = [{"kind", "store", "name"}].
inline constexpr std::string_view kUseDetailsKey = "learning_use";
Json UseDetail(UsageKind kind, const std::filesystem::path& store_dir, const std::string& name);

// Records uses and, when their turn ends, its outcome.
class UsageTracker {
 public:
  // `now_ms`: wall clock in Unix epoch ms (null: system clock).
  explicit UsageTracker(std::function<int64_t()> now_ms = {});

  // Records the use now and remembers it for RecordTurnOutcome(turn_id).
  Status RecordUse(UsageKind kind, const std::filesystem::path& store_dir, const std::string& name,
                   const std::string& session_id, const std::string& turn_id);
  // Counts `completed` for every use recorded under `turn_id` and forgets them.
  Status RecordTurnOutcome(const std::string& turn_id, bool completed);

 private:
  std::function<int64_t()> now_ms_;
  std::mutex mu_;
  // turn id -> (store dir, name) used in it.  Guarded by mu_.
  std::map<std::string, std::set<std::pair<std::filesystem::path, std::string>>> open_;
};

// AfterToolResult records the uses a tool reported in details
// (kUseDetailsKey); OnTurnEnd records the outcome (stop == kCompleted), except
// for a paused turn (pending approval / question), whose outcome comes later.
class UsageHook : public Hook {
 public:
  explicit UsageHook(std::shared_ptr<UsageTracker> tracker) : tracker_(std::move(tracker)) {}
  std::string_view name() const override { return "learning-usage"; }
  // Inline. Not free of blocking: a result or turn end that reports memory or
  // skill uses updates the sidecar file (flock on its directory, write,
  // fsync) on the turn's thread; calls without uses touch no file. The flock
  // waits at most ~2 s, then the update is skipped.
  std::chrono::milliseconds timeout() const override { return {}; }
  void AfterToolResult(const HookContext& ctx, const ToolCall& call,
                       const ToolOutput& output) override;
  TurnEndVerdict OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) override;

 private:
  std::shared_ptr<UsageTracker> tracker_;
};

}  // namespace agentloop::learning
