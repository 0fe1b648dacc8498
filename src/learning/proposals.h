// ProposalStore: the reflector's proposals as items a person can review
// (`agentloop proposals list|accept ID|reject ID`). The reflector never
// writes memory or skills itself ("propose, don't write"); accepting a
// proposal is the person's explicit write.
//
// One JSON file per proposal in <data_dir>/proposals/<id>.json:
//   {"id": "prop_...", "kind": "memory"|"skill", "title", "content",
//    "session", "created_ms", "status": "pending"|"accepted"|"rejected",
//    "decided_ms", "written": "<path of the memory or skill written>"}
//
// Accepting a memory proposal saves a memory: name = Slugify(title), type
// "fact", description = title (cut to 280), body = content; a skill
// proposal writes a skill: name = Slugify(title), description = title, body =
// content. An existing memory or skill of that name is not overwritten: the
// name gets a numeric suffix (-2, -3, ...).
//
// Thread-safety: methods may be called concurrently; each file is replaced
// atomically. Two processes accepting the same id race benignly (both write
// the same content under possibly different names); the CLI is one person.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/status.h"

#include "learning/memory_store.h"
#include "learning/reflection.h"
#include "learning/skills.h"

namespace agentloop::learning {

struct ProposalRecord {
  std::string id;
  std::string kind;  // memory | skill
  std::string title;
  std::string content;
  std::string session;
  int64_t created_ms = 0;
  std::string status = "pending";  // pending | accepted | rejected
  int64_t decided_ms = 0;
  std::string written;  // accepted: the path written

  Json ToJson() const;
  static Result<ProposalRecord> FromJson(const Json& j);
};

class ProposalStore {
 public:
  // `now_ms` null: system clock.
  explicit ProposalStore(std::filesystem::path dir, std::function<int64_t()> now_ms = {});

  const std::filesystem::path& dir() const { return dir_; }

  // Stores a new pending proposal and returns it (with its id).
  Result<ProposalRecord> Add(const Proposal& proposal, const std::string& session_id);
  // Oldest first; only `status` when given. Unreadable files are skipped.
  std::vector<ProposalRecord> List(std::optional<std::string> status = std::nullopt) const;
  // By id or a unique prefix of at least 4 characters (with or without the
  // "prop_" prefix). Errors: kNotFound, kInvalidArgument (ambiguous / short).
  Result<ProposalRecord> Get(const std::string& id_or_prefix) const;

  // Writes the memory (into `memories`, scope `scope`) or the skill (into
  // `skills`) and marks the proposal accepted. Errors: kFailedPrecondition
  // when it is not pending; the store's errors (nothing is marked then).
  Result<ProposalRecord> Accept(const std::string& id_or_prefix, MemoryStore& memories,
                                SkillStore& skills, Scope scope = Scope::kUser);
  // Errors: kFailedPrecondition when it is not pending.
  Result<ProposalRecord> Reject(const std::string& id_or_prefix);

 private:
  Status Write(const ProposalRecord& record);

  std::filesystem::path dir_;
  std::function<int64_t()> now_ms_;
};

// Printable rows for `agentloop proposals list`:
//   ID                     KIND    STATUS    CREATED           TITLE
//   prop_0123456789abcdef  memory  pending   2024-05-01 12:00  The build needs -DFOO
// "No proposals.\n" when empty. Times are UTC.
std::string FormatProposals(const std::vector<ProposalRecord>& records);
// "2024-05-01 12:00" (UTC), or "never" for 0.
std::string FormatTimeMs(int64_t ms);

}  // namespace agentloop::learning
