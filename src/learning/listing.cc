#include "learning/listing.h"

#include <cmath>

#include "learning/proposals.h"
#include "learning/text.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace {

void Fill(UsageRow& row, const UsageMap& usage) {
  auto it = usage.find(row.name);
  if (it == usage.end()) return;
  row.uses = it->second.uses;
  row.last_used_ms = it->second.last_used_ms;
  row.completed = it->second.completed;
  row.not_completed = it->second.not_completed;
}

std::string Pad(std::string s, size_t width) { return PadCodePoints(std::move(s), width) + " "; }

std::string PadLeft(const std::string& s, size_t width) {
  return (s.size() < width ? std::string(width - s.size(), ' ') : "") + s + " ";
}

}  // namespace

std::optional<double> UsageRow::CompletionRate() const {
  int64_t n = completed + not_completed;
  if (n == 0) return std::nullopt;
  return static_cast<double>(completed) / static_cast<double>(n);
}

std::vector<UsageRow> MemoryRows(const MemoryStore& store) {
  UsageMap usage[2] = {LoadUsage(store.dir(Scope::kWorkspace)), LoadUsage(store.dir(Scope::kUser))};
  std::vector<UsageRow> rows;
  for (const Memory& m : store.List()) {
    UsageRow row;
    row.kind = "memory";
    row.name = m.name;
    row.scope = std::string(ScopeName(m.scope));
    row.type = m.type;
    row.description = m.description;
    row.path = m.path.string();
    Fill(row, usage[m.scope == Scope::kWorkspace ? 0 : 1]);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<UsageRow> SkillRows(const SkillStore& store) {
  UsageMap usage[2] = {LoadUsage(store.dir(Scope::kWorkspace)), LoadUsage(store.dir(Scope::kUser))};
  std::vector<UsageRow> rows;
  for (const Skill& s : store.List()) {
    UsageRow row;
    row.kind = "skill";
    row.name = s.name;
    row.scope = std::string(ScopeName(s.scope));
    row.description = s.description;
    row.path = s.dir.string();
    Fill(row, usage[s.scope == Scope::kWorkspace ? 0 : 1]);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FormatUsageRows(const std::vector<UsageRow>& rows, const std::string& kind) {
  if (rows.empty()) return kind == "skill" ? "No skills.\n" : "No memories.\n";
  size_t name_w = 4;
  for (const auto& r : rows) name_w = std::max(name_w, r.name.size());
  std::string out = Pad("NAME", name_w) + Pad("SCOPE", 9) + PadLeft("USES", 5) +
                    Pad("LAST USED", 16) + Pad("COMPLETED", 10) + "DESCRIPTION\n";
  for (const auto& r : rows) {
    std::string completed = "-";
    if (auto rate = r.CompletionRate()) {
      completed = std::to_string(r.completed) + "/" +
                  std::to_string(r.completed + r.not_completed) + " " +
                  std::to_string(static_cast<int>(std::lround(*rate * 100))) + "%";
    }
    out += Pad(r.name, name_w) + Pad(r.scope, 9) + PadLeft(std::to_string(r.uses), 5) +
           Pad(FormatTimeMs(r.last_used_ms), 16) + Pad(completed, 10) +
           SanitizeInline(r.description, 60) + "\n";
  }
  return out;
}

}  // namespace agentloop::learning
