// A thin RAII layer over the SQLite C API, used only inside src/store.
//
// Db owns one connection; Stmt owns one prepared statement while it lives.
// Db::Prepare keeps finished statements in a per-connection cache keyed by
// their SQL text and hands them out again (reset, bindings cleared): the store
// runs the same few statements for every event, and parsing them each time was
// most of its CPU. A Stmt may outlive its Db (it is then finalized). Errors become
// Status values: SQLITE_BUSY/LOCKED -> kUnavailable, SQLITE_CORRUPT/NOTADB ->
// kDataLoss, SQLITE_CONSTRAINT -> kAlreadyExists, anything else kInternal.
//
// Thread-safety: none; the owner serialises access to a Db.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "agentloop/status.h"
#include "agentloop/store.h"

namespace agentloop::store {

Status SqliteError(sqlite3* db, int rc, std::string_view what);

struct StmtCache;

class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, sqlite3_stmt* stmt, std::shared_ptr<StmtCache> home = nullptr)
      : db_(db), stmt_(stmt), home_(std::move(home)) {}
  ~Stmt();
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Bind by 1-based index. Text is copied (SQLITE_TRANSIENT).
  Stmt& Bind(int index, std::string_view text);
  Stmt& Bind(int index, int64_t value);
  Stmt& BindNull(int index);
  // Makes the statement runnable again and clears its bindings.
  void Reset();

  // Steps once: true when a row is available, false when done.
  Result<bool> Step();
  // Steps to completion (for statements that return no rows).
  Status Run();

  int64_t Int(int col) const;
  std::string Text(int col) const;
  bool IsNull(int col) const;

 private:
  void Release();  // back to the cache, or finalized

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::shared_ptr<StmtCache> home_;  // null: not cached
};

class Db {
 public:
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Opens (creating) the file and sets WAL, the synchronous pragma, foreign
  // keys and the busy timeout. `sync`:
  //   kFull   synchronous=FULL: a commit is on disk when it returns (survives
  //           a power loss or OS crash).
  //   kNormal synchronous=NORMAL (with WAL): a commit survives a crash or kill
  //           of the process, but the last commits before a power loss or OS
  //           crash may be rolled back; the database stays consistent either
  //           way. Saves one fsync per commit.
  // The pragma is per connection: every process chooses for its own commits.
  static Result<std::unique_ptr<Db>> Open(const std::filesystem::path& path, int busy_timeout_ms,
                                          StoreSync sync = StoreSync::kFull);

  Result<Stmt> Prepare(std::string_view sql);
  // Runs one or more statements without results.
  Status Exec(const std::string& sql);
  int64_t Changes() const;
  // PRAGMA synchronous of this connection: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
  Result<int64_t> Synchronous();
  sqlite3* raw() const { return db_; }

 private:
  explicit Db(sqlite3* db);
  sqlite3* db_;
  std::shared_ptr<StmtCache> cache_;
};

// A transaction that rolls back unless committed.
class Txn {
 public:
  // immediate: BEGIN IMMEDIATE (takes the write lock now); else BEGIN.
  static Result<Txn> Begin(Db& db, bool immediate);
  Txn(Txn&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Txn& operator=(Txn&&) = delete;
  ~Txn();
  Status Commit();

 private:
  explicit Txn(Db* db) : db_(db) {}
  Db* db_;
};

}  // namespace agentloop::store
