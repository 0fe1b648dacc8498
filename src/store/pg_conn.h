// A thin RAII layer over libpq, used only inside src/store.
//
// PgConn owns one connection; Exec runs one statement with text parameters
// (no SQL is ever built from values) and returns its rows. The first
// kMaxPrepared distinct statement texts a connection runs are prepared on it
// once (PQprepare) and executed by name after (PQexecPrepared): the server
// parses and plans a statement the store repeats once per connection, not
// once per call. Statements past that bound run unnamed (PQexecParams).
// Errors become Status values by SQLSTATE: 23505 (unique violation) ->
// kAlreadyExists, 40001/40P01 (serialization failure, deadlock) ->
// kUnavailable and retryable(), class 08 and 57P (connection lost, server
// shutting down) and a broken connection -> kUnavailable, anything else
// kInternal.
//
// Thread-safety: none; a PgConn is used by one thread at a time (the store's
// pool hands each call its own).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

struct pg_conn;
struct pg_result;

namespace agentloop::store {

using PgParam = std::optional<std::string>;  // nullopt: SQL NULL

inline PgParam P(std::string_view s) { return std::string(s); }
inline PgParam P(const std::string& s) { return s; }
inline PgParam P(const char* s) { return std::string(s); }
inline PgParam P(int64_t v) { return std::to_string(v); }
inline PgParam P(uint64_t v) { return std::to_string(v); }
inline PgParam P(int v) { return std::to_string(v); }

class PgRows {
 public:
  PgRows() = default;
  explicit PgRows(pg_result* r);
  int size() const;  // rows
  bool empty() const { return size() == 0; }
  std::string Text(int row, int col) const;
  int64_t Int(int row, int col) const;
  bool Null(int row, int col) const;
  // Rows changed by an INSERT/UPDATE/DELETE.
  int64_t affected() const;

 private:
  std::shared_ptr<pg_result> r_;
};

class PgConn {
 public:
  // Connects (blocking). Errors: kUnavailable with libpq's message; the
  // password of the URL never appears in it.
  static Result<std::unique_ptr<PgConn>> Connect(const std::string& url);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  Result<PgRows> Exec(std::string_view sql, const std::vector<PgParam>& params = {});
  // How many distinct statement texts a connection prepares at most (the
  // store's statements are a few dozen; the texts built per call, such as a
  // multi-row INSERT, vary in a small range).
  static constexpr size_t kMaxPrepared = 256;
  // Statements prepared on this connection so far (tests).
  size_t prepared() const { return prepared_.size(); }
  // Runs several `;`-separated statements without parameters (a migration).
  Status ExecScript(std::string_view sql);
  // The connection is usable (not lost).
  bool healthy() const;
  // The last error was a serialization failure or a deadlock: the whole
  // transaction may be run again.
  bool retryable() const { return retryable_; }
  pg_conn* raw() { return conn_; }
  // The pool's generation when this connection was opened (PostgresStore).
  uint64_t generation = 0;

 private:
  explicit PgConn(pg_conn* c) : conn_(c) {}
  Result<PgRows> Finish(pg_result* r);
  pg_conn* conn_;
  bool retryable_ = false;
  // Statement text -> its prepared statement's name on this connection.
  std::map<std::string, std::string, std::less<>> prepared_;
};

// The URL with its password replaced by "***" (for messages and logs).
std::string RedactPgUrl(std::string_view url);

}  // namespace agentloop::store
