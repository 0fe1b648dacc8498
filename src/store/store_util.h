// Helpers shared by the store implementations (SQLite, PostgreSQL).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "agentloop/store.h"

namespace agentloop::store {

// The absolute, lexically normal form of a workspace path, without a
// trailing slash: the form stored and compared.
std::string NormalizeWorkspace(const std::filesystem::path& p);

// This machine's host name ("unknown" when it cannot be read).
std::string HostName();

Status SessionNotFound(std::string_view id);

// A stored checkpoint. Errors: kDataLoss naming the checkpoint.
Result<Checkpoint> ParseCheckpoint(const std::string& json, const std::string& id);

// The title candidate of a message event (the first untagged user message),
// or empty.
std::string TitleFrom(const Event& e);

// The outstanding item `pending_id` of a checkpoint the pending index points
// to. kDataLoss when the index and the checkpoint disagree.
Result<PendingItem> IndexedItem(const Checkpoint& cp, std::string_view pending_id,
                                const std::string& checkpoint_id);

}  // namespace agentloop::store
