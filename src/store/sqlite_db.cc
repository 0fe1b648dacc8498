#include "store/sqlite_db.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace agentloop::store {

// Idle prepared statements of one connection, by SQL text (one per text: a
// statement taken twice at once gets a fresh second copy, finalized when
// done). `open` turns false when the Db closes; later releases finalize.
struct StmtCache {
  bool open = true;
  // Transparent: Prepare looks up by string_view without building a string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view v) const { return std::hash<std::string_view>{}(v); }
  };
  std::unordered_map<std::string, sqlite3_stmt*, Hash, std::equal_to<>> idle;
};

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable("database is busy: " + msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLoss(msg);
    case SQLITE_CONSTRAINT:
      return AlreadyExists(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return FailedPrecondition(msg);
    default:
      return Internal(msg);
  }
}

void Stmt::Release() {
  if (stmt_ == nullptr) return;
  sqlite3_stmt* st = std::exchange(stmt_, nullptr);
  if (home_ && home_->open) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    auto [it, inserted] = home_->idle.try_emplace(sqlite3_sql(st), st);
    if (inserted) {
      home_.reset();
      return;
    }
  }
  home_.reset();
  sqlite3_finalize(st);
}

Stmt::~Stmt() { Release(); }

Stmt::Stmt(Stmt&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      home_(std::move(other.home_)) {}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    home_ = std::move(other.home_);
  }
  return *this;
}

Stmt& Stmt::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Stmt& Stmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Result<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, "sqlite step");
}

Status Stmt::Run() {
  for (;;) {
    AL_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string Stmt::Text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

bool Stmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

Db::Db(sqlite3* db) : db_(db), cache_(std::make_shared<StmtCache>()) {}

Db::~Db() {
  cache_->open = false;
  for (auto& [sql, st] : cache_->idle) sqlite3_finalize(st);
  cache_->idle.clear();
  sqlite3_close_v2(db_);  // deferred while a live Stmt still holds a statement
}

Result<std::unique_ptr<Db>> Db::Open(const std::filesystem::path& path, int busy_timeout_ms,
                                     StoreSync sync) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteError(raw, rc, "cannot open " + path.string());
    sqlite3_close_v2(raw);
    return s;
  }
  std::unique_ptr<Db> db(new Db(raw));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  // journal_mode returns the resulting mode; anything but WAL means the file
  // system refused it, and durability assumptions would not hold.
  AL_ASSIGN_OR_RETURN(Stmt wal, db->Prepare("PRAGMA journal_mode=WAL"));
  AL_ASSIGN_OR_RETURN(bool row, wal.Step());
  if (!row || wal.Text(0) != "wal") {
    return FailedPrecondition("cannot enable WAL journal mode on " + path.string());
  }
  AL_RETURN_IF_ERROR(db->Exec(sync == StoreSync::kNormal ? "PRAGMA synchronous=NORMAL;"
                                                         : "PRAGMA synchronous=FULL;"));
  AL_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON;"));
  return db;
}

Result<Stmt> Db::Prepare(std::string_view sql) {
  // Keyed by the text as given; sqlite3_sql() returns the same text (the
  // statements here are single statements without trailing text).
  auto it = cache_->idle.find(sql);
  if (it != cache_->idle.end()) {
    sqlite3_stmt* st = it->second;
    cache_->idle.erase(it);
    return Stmt(db_, st, cache_);
  }
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, &tail);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, "sqlite prepare");
  // Only a statement whose text is exactly `sql` can be found again.
  bool cacheable = stmt != nullptr && tail == sql.data() + sql.size() && sqlite3_sql(stmt) == sql;
  return Stmt(db_, stmt, cacheable ? cache_ : nullptr);
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (err != nullptr) sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, "sqlite exec");
  return Status::Ok();
}

int64_t Db::Changes() const { return sqlite3_changes(db_); }

Result<int64_t> Db::Synchronous() {
  AL_ASSIGN_OR_RETURN(Stmt st, Prepare("PRAGMA synchronous"));
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Internal("PRAGMA synchronous returned no row");
  return st.Int(0);
}

Result<Txn> Txn::Begin(Db& db, bool immediate) {
  AL_ASSIGN_OR_RETURN(Stmt begin, db.Prepare(immediate ? "BEGIN IMMEDIATE" : "BEGIN"));
  AL_RETURN_IF_ERROR(begin.Run());
  return Txn(&db);
}

Txn::~Txn() {
  if (db_ != nullptr) (void)db_->Exec("ROLLBACK");
}

Status Txn::Commit() {
  Db* db = std::exchange(db_, nullptr);
  Status s = [&] {
    AL_ASSIGN_OR_RETURN(Stmt commit, db->Prepare("COMMIT"));
    return commit.Run();
  }();
  if (!s.ok()) (void)db->Exec("ROLLBACK");
  return s;
}

}  // namespace agentloop::store
