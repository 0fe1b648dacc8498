#include "store/pg_conn.h"

#include <cstdlib>
#include <cstring>

#include <libpq-fe.h>

#include "store/libpq_loader.h"

namespace agentloop::store {

PgRows::PgRows(pg_result* r) : r_(r, [](pg_result* p) { PQclear(p); }) {}

int PgRows::size() const { return r_ ? PQntuples(r_.get()) : 0; }

std::string PgRows::Text(int row, int col) const {
  const char* v = PQgetvalue(r_.get(), row, col);
  return std::string(v, static_cast<size_t>(PQgetlength(r_.get(), row, col)));
}

int64_t PgRows::Int(int row, int col) const {
  return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
}

bool PgRows::Null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }

int64_t PgRows::affected() const {
  const char* n = r_ ? PQcmdTuples(r_.get()) : "";
  return n[0] == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

std::string RedactPgUrl(std::string_view url) {
  // scheme://user:password@host... -> scheme://user:***@host...
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  size_t at = url.find('@', scheme + 3);
  if (at == std::string_view::npos) return std::string(url);
  size_t colon = url.find(':', scheme + 3);
  if (colon == std::string_view::npos || colon > at) return std::string(url);
  return std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
}

namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Result<std::unique_ptr<PgConn>> PgConn::Connect(const std::string& url) {
  AL_RETURN_IF_ERROR(LoadLibpq());
  PGconn* c = PQconnectdb(url.c_str());
  if (c == nullptr) return Unavailable("PostgreSQL: out of memory connecting");
  if (PQstatus(c) != CONNECTION_OK) {
    std::string msg = Trim(PQerrorMessage(c));
    PQfinish(c);
    return Unavailable("cannot connect to PostgreSQL at " + RedactPgUrl(url) + ": " + msg);
  }
  // Server notices ("relation ... already exists, skipping") are not errors
  // and must not reach the user's terminal.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<PgConn>(new PgConn(c));
}

PgConn::~PgConn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

bool PgConn::healthy() const { return PQstatus(conn_) == CONNECTION_OK; }

Status PgConn::ExecScript(std::string_view sql) {
  std::string text(sql);
  return Finish(PQexec(conn_, text.c_str())).status();
}

Result<PgRows> PgConn::Exec(std::string_view sql, const std::vector<PgParam>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const PgParam& p : params) values.push_back(p ? p->c_str() : nullptr);
  const int n = static_cast<int>(params.size());
  auto named = prepared_.find(sql);
  if (named == prepared_.end() && prepared_.size() < kMaxPrepared) {
    std::string name = "al" + std::to_string(prepared_.size());
    std::string text(sql);
    // Prepared statements are not transactional: one prepared inside a
    // transaction that rolls back stays. A statement that fails to prepare
    // (an aborted transaction, a syntax error) is not remembered and runs
    // unnamed below, which reports the error.
    pg_result* made = PQprepare(conn_, name.c_str(), text.c_str(), n, nullptr);
    const bool ok = made != nullptr && PQresultStatus(made) == PGRES_COMMAND_OK;
    PQclear(made);
    if (ok) named = prepared_.emplace(std::move(text), std::move(name)).first;
  }
  if (named != prepared_.end()) {
    return Finish(
        PQexecPrepared(conn_, named->second.c_str(), n, values.data(), nullptr, nullptr, 0));
  }
  std::string text(sql);
  return Finish(PQexecParams(conn_, text.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0));
}

Result<PgRows> PgConn::Finish(pg_result* r) {
  retryable_ = false;
  PgRows rows(r);
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return rows;
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string code = state != nullptr ? state : "";
  std::string msg =
      Trim(r != nullptr && PQresultErrorMessage(r)[0] != '\0' ? PQresultErrorMessage(r)
                                                              : PQerrorMessage(conn_));
  if (code == "23505") return AlreadyExists("PostgreSQL: " + msg);
  if (code == "40001" || code == "40P01") {
    retryable_ = true;
    return Unavailable("PostgreSQL: " + msg);
  }
  if (!healthy() || code.rfind("08", 0) == 0 || code.rfind("57P", 0) == 0) {
    return Unavailable("PostgreSQL is unavailable: " + msg);
  }
  return Internal("PostgreSQL: " + msg);
}

}  // namespace agentloop::store
