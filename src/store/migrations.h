// Numbered schema migrations (src/store/migrations/NNNN_name.sql, compiled
// into the binary by CMake) and the runner that applies them.
//
// Each migration runs in its own BEGIN IMMEDIATE transaction together with
// its row in `schema_migrations`, so a crash leaves the database at a whole
// version and two processes opening a fresh database do not both apply it.
#pragma once

#include <span>
#include <string_view>

#include "agentloop/status.h"

#include "store/sqlite_db.h"

namespace agentloop::store {

struct Migration {
  int version;            // NNNN from the file name
  std::string_view name;  // the file name
  std::string_view sql;
};

// The migrations of this build, ascending and gap-free from 1.
std::span<const Migration> BuiltinMigrations();

// Applies the migrations newer than the database's version. Errors:
// kFailedPrecondition when the database has a version newer than the newest
// of `migrations` (written by a newer agentloop); SQLite errors otherwise.
Status ApplyMigrations(Db& db, std::span<const Migration> migrations, int64_t now_ms);

// The highest applied version (0 for a fresh database).
Result<int> SchemaVersion(Db& db);

}  // namespace agentloop::store
