// Printable listings for `agentloop memory list` and `agentloop skills list`:
// every entry with its scope and usage (usage.h), so stale entries can be
// pruned.
//
// Thread-safety: pure functions over the stores (which read files).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "learning/memory_store.h"
#include "learning/skills.h"

namespace agentloop::learning {

struct UsageRow {
  std::string kind;  // memory | skill
  std::string name;
  std::string scope;  // user | workspace
  std::string type;   // memories only
  std::string description;
  std::string path;
  int64_t uses = 0;
  int64_t last_used_ms = 0;
  int64_t completed = 0;
  int64_t not_completed = 0;

  // completed / (completed + not_completed); nullopt when no outcome is known.
  std::optional<double> CompletionRate() const;
};

std::vector<UsageRow> MemoryRows(const MemoryStore& store);
std::vector<UsageRow> SkillRows(const SkillStore& store);

// A table:
//   NAME              SCOPE      USES  LAST USED         COMPLETED  DESCRIPTION
//   build-command     workspace     3  2024-05-01 12:00  2/3 67%    How to build ...
// COMPLETED is "-" when no outcome is known. "No memories.\n" / "No skills.\n"
// (by `kind`) when empty.
std::string FormatUsageRows(const std::vector<UsageRow>& rows, const std::string& kind);

}  // namespace agentloop::learning
