// PostgresStore: the PostgreSQL backend of the store core (store_core.h) on
// a shared database. Where other instances race (lock takeover, resolve,
// claim, crash repair) a statement of the transaction locks the row the
// decision is about (StoreTxn's contracts say which).
#include "store/postgres_store.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <tuple>

#include "agentloop/event_data.h"

#include "base/ids.h"
#include "protocol/codec.h"
#include "store/pg_listener.h"
#include "store/replay.h"
#include "store/store_util.h"

namespace agentloop::store {
namespace {

constexpr PgMigration kPgMigrations[] = {
#include "pg_migrations.inc"
};

// The channel of wake-up announcements (the payload is the session id).
constexpr char kWakeupChannel[] = "agentloop_wakeup";

// Any key: the migrators of all agentloop instances take the same one.
constexpr char kMigrationLock[] = "SELECT pg_advisory_xact_lock(7300719001)";

constexpr char kSessionColumns[] =
    "id, workspace, provider, model, command, title, created_at_ms, updated_at_ms, last_seq,"
    " tenant, agent, metadata, parent_id";

SessionInfo ReadSession(const PgRows& r, int row) {
  SessionInfo s;
  s.id = r.Text(row, 0);
  s.workspace = r.Text(row, 1);
  s.provider = r.Text(row, 2);
  s.model = r.Text(row, 3);
  s.command = r.Text(row, 4);
  s.title = r.Text(row, 5);
  s.created_at_ms = r.Int(row, 6);
  s.updated_at_ms = r.Int(row, 7);
  s.last_seq = static_cast<uint64_t>(r.Int(row, 8));
  s.tenant = r.Text(row, 9);
  s.agent = r.Text(row, 10);
  s.parent_id = r.Text(row, 12);
  if (std::string meta = r.Text(row, 11); !meta.empty()) {
    s.metadata = Json::parse(meta, nullptr, /*allow_exceptions=*/false);
    if (s.metadata.is_discarded()) s.metadata = nullptr;
  }
  return s;
}

template <class T>
const Status* ErrorOf(const Result<T>& r) {
  return r.ok() ? nullptr : &r.error();
}
inline const Status* ErrorOf(const Status& s) { return s.ok() ? nullptr : &s; }

// The tenant parameter of a statement that restricts itself with
// "($n::text IS NULL OR tenant = $n)": NULL matches every tenant.
PgParam TenantParam(TenantFilter tenant) { return tenant ? P(*tenant) : PgParam(); }

}  // namespace

std::span<const PgMigration> BuiltinPgMigrations() { return kPgMigrations; }

Result<int> PgSchemaVersion(PgConn& c) {
  AL_ASSIGN_OR_RETURN(PgRows has, c.Exec("SELECT to_regclass('schema_migrations') IS NOT NULL"));
  if (has.Text(0, 0) != "t") return 0;
  AL_ASSIGN_OR_RETURN(PgRows v, c.Exec("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  return static_cast<int>(v.Int(0, 0));
}

namespace {

Status NewerSchema(int current, int newest) {
  return FailedPrecondition("the PostgreSQL session database has schema version " +
                            std::to_string(current) + " but this agentloop knows only up to " +
                            std::to_string(newest) +
                            "; it was written by a newer agentloop: upgrade agentloop");
}

}  // namespace

Result<int> ApplyPgMigrations(PgConn& c, std::span<const PgMigration> migrations, int64_t now_ms) {
  const int newest = migrations.empty() ? 0 : migrations.back().version;
  // The common case, an up-to-date database, takes no lock.
  AL_ASSIGN_OR_RETURN(int seen, PgSchemaVersion(c));
  if (seen == newest) return seen;
  if (seen > newest) return NewerSchema(seen, newest);
  AL_RETURN_IF_ERROR(c.Exec("BEGIN").status());
  auto run = [&]() -> Result<int> {
    AL_RETURN_IF_ERROR(c.Exec(kMigrationLock).status());
    AL_RETURN_IF_ERROR(c.Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                              " version integer PRIMARY KEY, name text NOT NULL,"
                              " applied_at_ms bigint NOT NULL)")
                           .status());
    // Read again under the lock: another instance may have migrated.
    AL_ASSIGN_OR_RETURN(int current, PgSchemaVersion(c));
    if (current > newest) return NewerSchema(current, newest);
    for (const PgMigration& m : migrations) {
      if (m.version <= current) continue;
      AL_RETURN_IF_ERROR(c.ExecScript(m.sql).WithContext(std::string(m.name)));
      AL_RETURN_IF_ERROR(c.Exec("INSERT INTO schema_migrations (version, name, applied_at_ms)"
                                " VALUES ($1, $2, $3)",
                                {P(m.version), P(m.name), P(now_ms)})
                             .status());
    }
    AL_RETURN_IF_ERROR(c.Exec("COMMIT").status());
    return current;
  };
  Result<int> out = run();
  if (!out.ok()) (void)c.Exec("ROLLBACK");
  return out;
}

// --- the pool -----------------------------------------------------------------

PostgresStore::PostgresStore(std::string url, PostgresStoreOptions options)
    : StoreCore(static_cast<StoreBackend&>(*this)),
      url_(std::move(url)),
      options_(std::move(options)),
      host_(HostName()) {
  if (options_.pool_size < 1) options_.pool_size = 1;
  if (options_.pool_timeout <= std::chrono::milliseconds::zero()) {
    options_.pool_timeout = options_.lock_ttl;
  }
}

PostgresStore::~PostgresStore() { StopHeartbeatThread(); }

Result<std::unique_ptr<PgConn>> PostgresStore::Checkout() {
  uint64_t generation = 0;
  {
    std::unique_lock lk(pool_mu_);
    // Bounded: with every connection held by a stuck statement, a caller
    // (a server worker thread) gets an error to answer with, not a hang.
    if (!pool_cv_.wait_for(lk, options_.pool_timeout,
                           [&] { return !idle_.empty() || open_ < options_.pool_size; })) {
      return Unavailable("no free connection in the PostgreSQL store's pool: all " +
                         std::to_string(options_.pool_size) + " stayed in use for " +
                         std::to_string(options_.pool_timeout.count()) +
                         " ms (store.pool_timeout_ms); try again later");
    }
    if (!idle_.empty()) {
      std::unique_ptr<PgConn> c = std::move(idle_.front());
      idle_.pop_front();
      return c;
    }
    ++open_;
    generation = generation_;
  }
  auto c = PgConn::Connect(url_);
  if (!c.ok()) {
    std::lock_guard lk(pool_mu_);
    --open_;
    pool_cv_.notify_one();
  } else {
    (*c)->generation = generation;
  }
  return c;
}

void PostgresStore::Return(std::unique_ptr<PgConn> conn) {
  std::deque<std::unique_ptr<PgConn>> stale;  // closed outside the mutex
  {
    std::lock_guard lk(pool_mu_);
    if (conn && conn->healthy() && conn->generation == generation_) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;  // a lost or stale connection is dropped; the next call connects anew
      if (conn && !conn->healthy() && conn->generation == generation_) {
        ++generation_;
        open_ -= static_cast<int>(idle_.size());
        stale.swap(idle_);
      }
    }
  }
  pool_cv_.notify_all();
  conn.reset();
}

template <class F>
auto PostgresStore::WithConn(F&& fn, bool rerun_if_lost) -> decltype(fn(std::declval<PgConn&>())) {
  for (int attempt = 0;; ++attempt) {
    AL_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> c, Checkout());
    auto out = fn(*c);
    const bool lost = !c->healthy();
    Return(std::move(c));
    if (ErrorOf(out) != nullptr && lost && rerun_if_lost && attempt == 0) continue;
    return out;
  }
}

template <class F>
auto PostgresStore::InTxn(F&& fn) -> decltype(fn(std::declval<PgConn&>())) {
  for (int attempt = 0;; ++attempt) {
    AL_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> c, Checkout());
    Status begun = c->Exec("BEGIN").status();
    if (!begun.ok()) {
      const bool lost = !c->healthy();
      Return(std::move(c));
      if (lost && attempt < 2) continue;  // nothing was sent: safe to retry
      return begun;
    }
    auto out = fn(*c);
    bool retry = false;
    if (ErrorOf(out) == nullptr) {
      auto committed = c->Exec("COMMIT");
      if (!committed.ok()) {
        retry = c->retryable();
        if (!retry || attempt >= 5) {
          Return(std::move(c));
          return committed.error();
        }
      }
    } else {
      retry = c->retryable();
      (void)c->Exec("ROLLBACK");
    }
    Return(std::move(c));
    if (retry && attempt < 5) continue;
    return out;
  }
}

template <class F>
auto PostgresStore::RideOutOutage(F&& attempt) -> decltype(attempt(false)) {
  const auto deadline = std::chrono::steady_clock::now() + options_.lock_ttl;
  std::chrono::milliseconds delay(50);
  for (bool again = false;; again = true) {
    auto out = attempt(again);
    const Status* e = ErrorOf(out);
    if (e == nullptr || e->code() != Code::kUnavailable) return out;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return out;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, std::chrono::milliseconds(1000));
  }
}

int64_t PostgresStore::Now() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& url,
                                                           PostgresStoreOptions options) {
  std::unique_ptr<PostgresStore> store(new PostgresStore(url, std::move(options)));
  AL_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> c, store->Checkout());
  auto pgs = BuiltinPgMigrations();
  const int newest = pgs.back().version;
  if (store->options_.migrate) {
    AL_RETURN_IF_ERROR(
        ApplyPgMigrations(*c, pgs, store->Now()).status().WithContext(RedactPgUrl(url)));
  } else {
    AL_ASSIGN_OR_RETURN(int v, PgSchemaVersion(*c));
    if (v > newest) return NewerSchema(v, newest).WithContext(RedactPgUrl(url));
    if (v < newest) {
      return FailedPrecondition(RedactPgUrl(url) + ": the session database has schema version " +
                                std::to_string(v) + "; this agentloop needs " +
                                std::to_string(newest) + ": run `agentloop store migrate`");
    }
  }
  store->Return(std::move(c));
  return store;
}

// --- transactions (StoreBackend) ----------------------------------------------

// The statements of a transaction on one pooled connection. Made by Run,
// used only inside the work it runs.
class PgTxn final : public StoreTxn {
 public:
  PgTxn(PostgresStore& store, PgConn& conn, bool again) : s_(store), c_(conn), again_(again) {}

  bool again() const override { return again_; }
  Result<std::optional<StoredHolder>> LockHolder(std::string_view session_id,
                                                 TenantFilter tenant) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT lease_token IS NOT NULL, lease_pid, lease_host,"
                                          " lease_acquired_at_ms, lease_heartbeat_at_ms,"
                                          " lease_token FROM sessions WHERE id = $1"
                                          " AND ($2::text IS NULL OR tenant = $2) FOR UPDATE",
                                          {P(session_id), tenant ? P(*tenant) : PgParam()}));
    if (r.empty()) return SessionNotFound(session_id);
    if (r.Text(0, 0) != "t") return std::optional<StoredHolder>();
    return std::optional<StoredHolder>(
        StoredHolder{r.Int(0, 1), r.Text(0, 2), r.Int(0, 3), r.Int(0, 4), r.Text(0, 5)});
  }

  Result<SessionInfo> Session(std::string_view session_id, TenantFilter tenant) override {
    return s_.GetSessionOn(c_, session_id, tenant);
  }
  Result<std::vector<StoredEvent>> Events(std::string_view session_id, const EventQuery& query,
                                          TenantFilter tenant) override {
    return s_.EventsOn(c_, session_id, query, tenant);
  }
  Result<std::vector<std::string>> SessionsWithPrefix(std::string_view prefix,
                                                      int64_t limit) override {
    AL_ASSIGN_OR_RETURN(PgRows r,
                        c_.Exec("SELECT id FROM sessions WHERE left(id, $1) = $2"
                                " LIMIT $3",
                                {P(static_cast<int64_t>(prefix.size())), P(prefix), P(limit)}));
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  }
  Status Relabel(std::string_view session_id, TenantFilter tenant,
                 const std::optional<std::string>& title,
                 const std::optional<std::string>& metadata) override {
    AL_ASSIGN_OR_RETURN(PgRows r,
                        c_.Exec("UPDATE sessions SET title = COALESCE($2, title),"
                                " metadata = COALESCE($3, metadata) WHERE id = $1"
                                " AND ($4::text IS NULL OR tenant = $4)",
                                {P(session_id), title ? P(*title) : PgParam(),
                                 metadata ? P(*metadata) : PgParam(), TenantParam(tenant)}));
    if (r.affected() == 0) return SessionNotFound(session_id);
    return Status::Ok();
  }
  Result<std::string> SettingsText(std::string_view session_id, TenantFilter tenant) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT settings FROM sessions WHERE id = $1"
                                          " AND ($2::text IS NULL OR tenant = $2)",
                                          {P(session_id), TenantParam(tenant)}));
    if (r.empty()) return SessionNotFound(session_id);
    return r.Text(0, 0);
  }
  Result<std::optional<std::string>> StateText(std::string_view session_id,
                                               std::string_view key) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT json FROM session_state"
                                          " WHERE session_id = $1 AND key = $2",
                                          {P(session_id), P(key)}));
    if (r.empty()) return std::optional<std::string>();
    return std::optional<std::string>(r.Text(0, 0));
  }
  Result<uint64_t> LastSeq(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(PgRows r,
                        c_.Exec("SELECT last_seq FROM sessions WHERE id = $1", {P(session_id)}));
    if (r.empty()) return SessionNotFound(session_id);
    return static_cast<uint64_t>(r.Int(0, 0));
  }
  Status CheckFence(std::string_view session_id, const LockFence& fence) override {
    return s_.CheckFenceOn(c_, session_id, fence);
  }
  Result<int64_t> InsertSession(const SessionInfo& s, const Json& settings,
                                const std::string* lock_token, int64_t owner_pid) override {
    AL_RETURN_IF_ERROR(s_.InsertSession(c_, s, settings, lock_token, owner_pid));
    // A new session's first holder has epoch 1.
    return int64_t{lock_token != nullptr ? 1 : 0};
  }
  Status DeleteSession(std::string_view session_id) override {
    return c_.Exec("DELETE FROM sessions WHERE id = $1", {P(session_id)}).status();
  }
  Result<int64_t> TakeLock(std::string_view session_id, const std::string& token, int64_t owner_pid,
                           int64_t now) override {
    AL_ASSIGN_OR_RETURN(
        PgRows r, c_.Exec("UPDATE sessions SET lease_token = $2, lease_pid = $3, lease_host = $4,"
                          " lease_epoch = lease_epoch + 1, lease_acquired_at_ms = $5,"
                          " lease_heartbeat_at_ms = $5 WHERE id = $1 RETURNING lease_epoch",
                          {P(session_id), P(token), P(owner_pid), P(s_.host_), P(now)}));
    if (r.empty()) return SessionNotFound(session_id);
    return r.Int(0, 0);
  }
  Result<int64_t> RenewLocks(std::span<const std::pair<std::string, std::string>> held,
                             int64_t now) override {
    // One statement per 1,000 held leases (a statement takes at most
    // 65,535 parameters).
    constexpr size_t kChunk = 1000;
    int64_t renewed = 0;
    for (size_t start = 0; start < held.size(); start += kChunk) {
      const size_t end = std::min(held.size(), start + kChunk);
      std::string sql = "UPDATE sessions s SET lease_heartbeat_at_ms = $1 FROM (VALUES ";
      std::vector<PgParam> params = {P(now)};
      for (size_t i = start; i < end; ++i) {
        if (i > start) sql += ", ";
        sql += "($" + std::to_string(params.size() + 1) + ", $" +
               std::to_string(params.size() + 2) + ")";
        params.push_back(P(held[i].first));
        params.push_back(P(held[i].second));
      }
      sql += ") AS h(id, token) WHERE s.id = h.id AND s.lease_token = h.token";
      AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec(sql, params));
      renewed += r.affected();
    }
    return renewed;
  }
  Status ReleaseLock(std::string_view session_id, const std::string& token) override {
    return c_
        .Exec(
            "UPDATE sessions SET lease_token = NULL, lease_pid = NULL, lease_host = NULL,"
            " lease_acquired_at_ms = NULL, lease_heartbeat_at_ms = NULL"
            " WHERE id = $1 AND lease_token = $2",
            {P(session_id), P(token)})
        .status();
  }
  Status LockSession(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(
        PgRows r, c_.Exec("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", {P(session_id)}));
    if (r.empty()) return SessionNotFound(session_id);
    return Status::Ok();
  }
  Status Append(std::string_view session_id, std::span<const Event> events, int64_t now,
                const LockFence* fence) override {
    return s_.AppendOn(c_, session_id, events, now, fence, again_);
  }

  Result<std::vector<IndexRow>> IndexRows(const IndexFilter& filter) override {
    std::string sql =
        "SELECT p.pending_id, p.session_id, p.checkpoint_id, p.created_at_ms, c.turn_id, c.json,"
        " p.resolved, c.state FROM pending_index p JOIN checkpoints c ON c.id = p.checkpoint_id";
    std::vector<PgParam> params;
    if (filter.pending_id) {
      sql += " WHERE p.pending_id = $1";
      params.push_back(P(*filter.pending_id));
    } else {
      sql += " WHERE c.state = 0 AND NOT p.resolved AND ($1::text IS NULL OR p.session_id = $1)";
      params.push_back(filter.session_id ? P(*filter.session_id) : PgParam());
    }
    sql += " AND ($2::text IS NULL OR p.tenant = $2) ORDER BY p.created_at_ms, p.ord";
    params.push_back(filter.tenant ? P(*filter.tenant) : PgParam());
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec(sql, params));
    std::vector<IndexRow> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      out.push_back(IndexRow{r.Text(i, 0), r.Text(i, 1), r.Text(i, 2), r.Int(i, 3), r.Text(i, 4),
                             r.Text(i, 5), r.Text(i, 6) == "t",
                             static_cast<CheckpointState>(r.Int(i, 7))});
    }
    return out;
  }
  Result<std::optional<StoredCheckpoint>> ClaimIndexedItem(std::string_view pending_id,
                                                           TenantFilter tenant) override {
    const auto none = std::optional<StoredCheckpoint>();
    AL_ASSIGN_OR_RETURN(PgRows where, c_.Exec("SELECT checkpoint_id FROM pending_index"
                                              " WHERE pending_id = $1 AND NOT resolved"
                                              " AND ($2::text IS NULL OR tenant = $2)",
                                              {P(pending_id), tenant ? P(*tenant) : PgParam()}));
    if (where.empty()) return none;
    StoredCheckpoint cp{where.Text(0, 0), {}};
    // The checkpoint's row lock serialises every decision of the batch (and
    // a superseding SaveCheckpoint): taken before any pending row.
    AL_ASSIGN_OR_RETURN(PgRows row, c_.Exec("SELECT json, state FROM checkpoints WHERE id = $1"
                                            " FOR UPDATE",
                                            {P(cp.id)}));
    if (row.empty() || row.Int(0, 1) != static_cast<int>(CheckpointState::kOpen)) return none;
    // The one conditional update: of all concurrent deciders of this item
    // exactly one changes the row (the others wait for the checkpoint lock,
    // then find it resolved).
    AL_ASSIGN_OR_RETURN(PgRows won, c_.Exec("UPDATE pending_index SET resolved = true"
                                            " WHERE pending_id = $1 AND NOT resolved",
                                            {P(pending_id)}));
    if (won.affected() == 0) return none;
    cp.json = row.Text(0, 0);
    return std::optional<StoredCheckpoint>(std::move(cp));
  }
  Result<std::vector<std::string>> PausedCheckpoints(std::string_view session_id) override {
    // Checkpoint rows are locked before their pending rows, as a decision
    // locks them.
    AL_ASSIGN_OR_RETURN(PgRows open, c_.Exec("SELECT id FROM checkpoints WHERE session_id = $1"
                                             " AND state IN (0, 2) ORDER BY id FOR UPDATE",
                                             {P(session_id)}));
    std::vector<std::string> out;
    for (int i = 0; i < open.size(); ++i) out.push_back(open.Text(i, 0));
    return out;
  }
  Status InsertCheckpoint(const std::string& id, const Checkpoint& checkpoint,
                          int64_t now) override {
    // The session's tenant is copied onto every row of it.
    AL_RETURN_IF_ERROR(c_.Exec("INSERT INTO checkpoints (id, tenant, session_id, turn_id, json,"
                               " state, created_at_ms, updated_at_ms)"
                               " SELECT $1, tenant, id, $3, $4, 0, $5, $5 FROM sessions"
                               " WHERE id = $2",
                               {P(id), P(checkpoint.session_id), P(checkpoint.turn_id),
                                P(DumpJson(ToJson(checkpoint))), P(now)})
                           .status());
    for (const PendingItem& item : checkpoint.outstanding) {
      auto r = c_.Exec(
          "INSERT INTO pending_index (pending_id, tenant, checkpoint_id, session_id,"
          " created_at_ms) SELECT $1, tenant, $2, session_id, $3 FROM checkpoints WHERE id = $2",
          {P(item.id), P(id), P(now)});
      if (!r.ok() && r.error().code() == Code::kAlreadyExists) {
        return AlreadyExists("pending id " + item.id + " already exists");
      }
      AL_RETURN_IF_ERROR(r.status());
    }
    return Status::Ok();
  }
  Result<std::optional<StoredCheckpoint>> NewestCheckpoint(std::string_view session_id,
                                                           CheckpointState state) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT id, json FROM checkpoints"
                                          " WHERE session_id = $1 AND state = $2"
                                          " ORDER BY updated_at_ms DESC, ord DESC LIMIT 1",
                                          {P(session_id), P(static_cast<int>(state))}));
    if (r.empty()) return std::optional<StoredCheckpoint>();
    return std::optional<StoredCheckpoint>(StoredCheckpoint{r.Text(0, 0), r.Text(0, 1)});
  }
  Status UpdateCheckpoint(const std::string& id, const Checkpoint& checkpoint,
                          int64_t now) override {
    return c_
        .Exec("UPDATE checkpoints SET json = $2, updated_at_ms = $3 WHERE id = $1",
              {P(id), P(DumpJson(ToJson(checkpoint))), P(now)})
        .status();
  }
  Status SetCheckpointState(const std::string& id, CheckpointState state, int64_t now) override {
    return s_.SetCheckpointStateOn(c_, id, state, now);
  }
  Status SettleIndexRowsExcept(const std::string& id,
                               std::span<const PendingItem> outstanding) override {
    // The ids kept, as a text[] literal.
    std::string keep = "{";
    for (size_t i = 0; i < outstanding.size(); ++i) {
      if (i > 0) keep += ",";
      keep += "\"";
      for (char ch : outstanding[i].id) {
        if (ch == '"' || ch == '\\') keep += '\\';
        keep += ch;
      }
      keep += "\"";
    }
    keep += "}";
    return c_
        .Exec(
            "UPDATE pending_index SET resolved = true WHERE checkpoint_id = $1 AND NOT resolved"
            " AND NOT (pending_id = ANY ($2::text[]))",
            {P(id), P(keep)})
        .status();
  }
  Result<std::optional<StoredCheckpoint>> TakeDecidedCheckpoint(
      std::string_view session_id) override {
    // SKIP LOCKED: a taker that finds the row taken by another is not the
    // one that gets it (the other closes it).
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT id, json FROM checkpoints"
                                          " WHERE session_id = $1 AND state = 2"
                                          " ORDER BY updated_at_ms DESC, ord DESC LIMIT 1"
                                          " FOR UPDATE SKIP LOCKED",
                                          {P(session_id)}));
    if (r.empty()) return std::optional<StoredCheckpoint>();
    return std::optional<StoredCheckpoint>(StoredCheckpoint{r.Text(0, 0), r.Text(0, 1)});
  }

  Result<bool> HasPausedBatch(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(PgRows paused, c_.Exec("SELECT 1 FROM checkpoints WHERE session_id = $1"
                                               " AND state IN (0, 2) LIMIT 1",
                                               {P(session_id)}));
    return !paused.empty();
  }

  Result<int64_t> InsertQueuedInput(std::string_view session_id,
                                    const QueuedInput& input) override {
    // The session's row lock orders its enqueuers (positions do not race).
    AL_ASSIGN_OR_RETURN(
        PgRows s, c_.Exec("SELECT tenant FROM sessions WHERE id = $1 FOR UPDATE", {P(session_id)}));
    if (s.empty()) return SessionNotFound(session_id);
    AL_RETURN_IF_ERROR(c_.Exec("INSERT INTO session_inputs (id, tenant, session_id, position,"
                               " input, continue_turn, created_at_ms) SELECT $1::text, $2::text,"
                               " $3::text, COALESCE(MAX(position), 0) + 1, $4::text, $5::boolean,"
                               " $6::bigint FROM session_inputs WHERE session_id = $3",
                               {P(input.id), P(s.Text(0, 0)), P(session_id), P(input.input),
                                P(input.continue_turn ? "true" : "false"), P(input.created_at_ms)})
                           .status());
    AL_ASSIGN_OR_RETURN(
        PgRows n,
        c_.Exec("SELECT COUNT(*) FROM session_inputs WHERE session_id = $1", {P(session_id)}));
    return n.Int(0, 0);
  }
  Result<std::vector<QueuedInput>> QueuedInputs(std::string_view session_id,
                                                int64_t limit) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT id, input, continue_turn, created_at_ms"
                                          " FROM session_inputs WHERE session_id = $1"
                                          " ORDER BY position LIMIT $2",
                                          {P(session_id), limit < 0 ? PgParam() : P(limit)}));
    std::vector<QueuedInput> out;
    for (int i = 0; i < r.size(); ++i) {
      out.push_back(QueuedInput{r.Text(i, 0), std::string(session_id), r.Text(i, 1),
                                r.Text(i, 2) == "t", r.Int(i, 3)});
    }
    return out;
  }
  Result<bool> DeleteQueuedInput(std::string_view session_id, std::string_view input_id) override {
    AL_ASSIGN_OR_RETURN(PgRows taken,
                        c_.Exec("DELETE FROM session_inputs WHERE id = $1 AND session_id = $2",
                                {P(input_id), P(session_id)}));
    return taken.affected() > 0;
  }

  Status PutState(std::string_view session_id, std::string_view key, const Json& value,
                  int64_t now) override {
    AL_ASSIGN_OR_RETURN(
        PgRows r, c_.Exec("INSERT INTO session_state (tenant, session_id, key, json, updated_at_ms)"
                          " SELECT tenant, id, $2, $3, $4 FROM sessions WHERE id = $1"
                          " ON CONFLICT (session_id, key) DO UPDATE SET json = excluded.json,"
                          " updated_at_ms = excluded.updated_at_ms",
                          {P(session_id), P(key), P(DumpJson(value)), P(now)}));
    if (r.affected() == 0) return SessionNotFound(session_id);
    return Status::Ok();
  }
  Status PutSettings(std::string_view session_id, const Json& settings) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("UPDATE sessions SET settings = $2 WHERE id = $1",
                                          {P(session_id), P(DumpJson(settings))}));
    if (r.affected() == 0) return SessionNotFound(session_id);
    return Status::Ok();
  }

  Status ForgetIdempotencyKeys(int64_t before_ms, int64_t in_flight_before_ms) override {
    return c_
        .Exec(
            "DELETE FROM idempotency_keys WHERE created_at_ms < $1"
            " OR (response IS NULL AND created_at_ms < $2)",
            {P(before_ms), P(in_flight_before_ms)})
        .status();
  }
  Result<bool> InsertIdempotencyKey(std::string_view tenant, std::string_view key,
                                    std::string_view fingerprint, int64_t now) override {
    // ON CONFLICT waits for a racing inserter to commit.
    AL_ASSIGN_OR_RETURN(PgRows ins, c_.Exec("INSERT INTO idempotency_keys (tenant, key,"
                                            " fingerprint, created_at_ms)"
                                            " VALUES ($1, $2, $3, $4)"
                                            " ON CONFLICT (tenant, key) DO NOTHING",
                                            {P(tenant), P(key), P(fingerprint), P(now)}));
    return ins.affected() == 1;
  }
  Result<std::optional<IdempotencyRecord>> IdempotencyKey(std::string_view tenant,
                                                          std::string_view key) override {
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT fingerprint, response IS NULL, response"
                                          " FROM idempotency_keys WHERE tenant = $1 AND key = $2",
                                          {P(tenant), P(key)}));
    if (r.empty()) return std::optional<IdempotencyRecord>();
    IdempotencyRecord rec{r.Text(0, 0), std::nullopt};
    if (r.Text(0, 1) != "t") rec.response = r.Text(0, 2);
    return std::optional<IdempotencyRecord>(std::move(rec));
  }
  Status SetIdempotencyResponse(std::string_view tenant, std::string_view key,
                                std::optional<std::string_view> response) override {
    if (!response) {
      return c_
          .Exec("DELETE FROM idempotency_keys WHERE tenant = $1 AND key = $2", {P(tenant), P(key)})
          .status();
    }
    return c_
        .Exec("UPDATE idempotency_keys SET response = $3 WHERE tenant = $1 AND key = $2",
              {P(tenant), P(key), P(*response)})
        .status();
  }
  Result<bool> InsertNotification(const OutboxNotification& n, int64_t now,
                                  int64_t due_at_ms) override {
    AL_ASSIGN_OR_RETURN(
        PgRows r,
        c_.Exec(
            "INSERT INTO notification_outbox (id, session_id, tenant, agent, event, body,"
            " created_at_ms, due_at_ms) SELECT $1, id, tenant, $3, $4, $5, $6, $7"
            " FROM sessions WHERE id = $2 ON CONFLICT (id) DO NOTHING",
            {P(n.id), P(n.session_id), P(n.agent), P(n.event), P(n.body), P(now), P(due_at_ms)}));
    return r.affected() == 1;
  }
  Status ForgetNotifications(int64_t before_ms) override {
    return c_.Exec("DELETE FROM notification_outbox WHERE created_at_ms < $1", {P(before_ms)})
        .status();
  }
  Result<std::vector<OutboxNotification>> ClaimDueNotifications(int64_t now, int64_t due_again_ms,
                                                                int64_t limit) override {
    // SKIP LOCKED: instances claiming together take different rows.
    AL_ASSIGN_OR_RETURN(
        PgRows r,
        c_.Exec("UPDATE notification_outbox o SET due_at_ms = $2 FROM (SELECT id FROM"
                " notification_outbox WHERE due_at_ms IS NOT NULL AND due_at_ms <= $1"
                " ORDER BY created_at_ms, id LIMIT $3 FOR UPDATE SKIP LOCKED) d WHERE o.id = d.id"
                " RETURNING o.id, o.session_id, o.agent, o.event, o.body, o.created_at_ms",
                {P(now), P(due_again_ms), P(limit)}));
    std::vector<OutboxNotification> out;
    for (int i = 0; i < r.size(); ++i) {
      out.push_back(OutboxNotification{r.Text(i, 0), r.Text(i, 1), r.Text(i, 2), r.Text(i, 3),
                                       r.Text(i, 4), r.Int(i, 5)});
    }
    std::sort(out.begin(), out.end(), [](const OutboxNotification& a, const OutboxNotification& b) {
      return std::tie(a.created_at_ms, a.id) < std::tie(b.created_at_ms, b.id);
    });
    return out;
  }
  Status FinishNotification(std::string_view id) override {
    return c_.Exec("UPDATE notification_outbox SET due_at_ms = NULL WHERE id = $1", {P(id)})
        .status();
  }
  Status InsertRevokedCredential(std::string_view tenant, std::string_view id,
                                 int64_t expires_at_ms) override {
    return c_
        .Exec(
            "INSERT INTO revoked_credentials (id, tenant, expires_at_ms) VALUES ($1, $2, $3)"
            " ON CONFLICT (id) DO NOTHING",
            {P(id), P(tenant), P(expires_at_ms)})
        .status();
  }
  Result<std::vector<std::string>> RevokedCredentials(int64_t now) override {
    AL_RETURN_IF_ERROR(
        c_.Exec("DELETE FROM revoked_credentials WHERE expires_at_ms <= $1", {P(now)}).status());
    AL_ASSIGN_OR_RETURN(PgRows r, c_.Exec("SELECT id FROM revoked_credentials ORDER BY id"));
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  }

  Status LeaveWakeup(std::string_view session_id, int64_t due_at_ms, int64_t now,
                     bool earliest) override {
    AL_RETURN_IF_ERROR(
        c_.Exec("INSERT INTO session_wakeups (session_id, tenant, not_before_ms, created_at_ms)"
                " SELECT id, tenant, $2, $3 FROM sessions WHERE id = $1"
                " ON CONFLICT (session_id) DO UPDATE SET not_before_ms = CASE WHEN $4"
                " THEN LEAST(session_wakeups.not_before_ms, excluded.not_before_ms)"
                " ELSE excluded.not_before_ms END",
                {P(session_id), P(due_at_ms), P(now), P(earliest ? "true" : "false")})
            .status());
    // NOTIFY is delivered only if this transaction commits.
    return c_.Exec("SELECT pg_notify('" + std::string(kWakeupChannel) + "', $1)", {P(session_id)})
        .status();
  }
  Status DropWakeupUnlessQueued(std::string_view session_id) override {
    return s_.DropWakeupUnlessQueuedOn(c_, session_id);
  }

 private:
  PostgresStore& s_;
  PgConn& c_;
  bool again_;
};

Status PostgresStore::Run(TxnKind kind, const std::function<Status(StoreTxn&)>& work) {
  switch (kind) {
    case TxnKind::kRead:
      return WithConn([&](PgConn& c) {
        PgTxn t(*this, c, false);
        return work(t);
      });
    case TxnKind::kSnapshot:
      // REPEATABLE READ: every statement reads the same snapshot.
      return WithConn([&](PgConn& c) -> Status {
        AL_RETURN_IF_ERROR(c.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
        PgTxn t(*this, c, false);
        Status s = work(t);
        (void)c.Exec(s.ok() ? "COMMIT" : "ROLLBACK");
        return s;
      });
    case TxnKind::kLeaseWrite:
      return RideOutOutage([&](bool again) { return Write(false, again, work); });
    case TxnKind::kWrite:
      break;
    case TxnKind::kDecision:
      return Write(true, false, work);
  }
  return Write(false, false, work);
}

// --- group commit -------------------------------------------------------------

Status PostgresStore::CommitAlone(const QueuedWrite& w) {
  return InTxn([&](PgConn& c) {
    PgTxn t(*this, c, w.again);
    return (*w.work)(t);
  });
}

Status PostgresStore::Write(bool decision, bool again,
                            const std::function<Status(StoreTxn&)>& work) {
  QueuedWrite w{&work, again, Status::Ok(), false};
  const size_t max = static_cast<size_t>(std::clamp(options_.group_commit_max, 1, 32));
  const int max_step_writers = std::max(1, options_.pool_size - 2);
  std::unique_lock ql(q_mu_);
  (decision ? decision_lane_ : step_lane_).push_back(&w);
  q_cv_.notify_all();  // WaitForQueuedWrites
  while (!w.done) {
    // A writer's place: the decisions' own, or one of the steps' (which
    // takes queued decisions first too).
    const bool as_decider = !decision_lane_.empty() && decision_writers_ == 0;
    const bool as_stepper = !as_decider && step_writers_ < max_step_writers &&
                            !(decision_lane_.empty() && step_lane_.empty());
    if (!as_decider && !as_stepper) {
      q_cv_.wait(ql);
      continue;
    }
    ++(as_decider ? decision_writers_ : step_writers_);
    std::vector<QueuedWrite*> batch;
    size_t decisions = 0;
    for (auto* lane : {&decision_lane_, &step_lane_}) {
      if (as_decider && lane == &step_lane_) break;
      while (batch.size() < max && !lane->empty()) {
        batch.push_back(lane->front());
        lane->pop_front();
      }
      if (lane == &decision_lane_) decisions = batch.size();
    }
    std::function<void(size_t, size_t)> hook = before_batch_;
    ql.unlock();
    if (hook) hook(decisions, batch.size() - decisions);
    CommitBatch(batch);
    ql.lock();
    --(as_decider ? decision_writers_ : step_writers_);
    if (batch.size() > 1) ++stats_.batches;
    stats_.writes += batch.size();
    stats_.largest = std::max(stats_.largest, batch.size());
    for (QueuedWrite* q : batch) q->done = true;
    // The batch's callers, and a caller waiting for a writer's place.
    q_cv_.notify_all();
  }
  return w.result;
}

void PostgresStore::CommitBatch(std::span<QueuedWrite* const> batch) {
  if (batch.size() == 1) {
    batch[0]->result = CommitAlone(*batch[0]);
    return;
  }
  Result<std::unique_ptr<PgConn>> checked = Checkout();
  if (!checked.ok()) {
    for (QueuedWrite* q : batch) q->result = checked.error();
    return;
  }
  std::unique_ptr<PgConn> conn = std::move(*checked);
  PgConn& c = *conn;
  // Whether each write ran and failed by itself (rolled back to its
  // savepoint), and whether it runs again alone after the batch (a
  // deadlock's victim: its locks were given up, not its neighbours').
  std::vector<bool> failed(batch.size(), false);
  std::vector<bool> again_alone(batch.size(), false);
  // The transaction ended before COMMIT (nothing of it is stored).
  bool whole_failed = false;
  for (size_t i = 0; i < batch.size() && !whole_failed; ++i) {
    QueuedWrite* q = batch[i];
    // One round trip: the savepoint of this write, after the release of
    // the one before it (or after BEGIN).
    Status s = c.ExecScript(i == 0 ? "BEGIN; SAVEPOINT w" : "RELEASE w; SAVEPOINT w");
    if (!s.ok()) {
      whole_failed = true;
      break;
    }
    PgTxn t(*this, c, q->again);
    s = (*q->work)(t);
    if (s.ok()) continue;
    const bool retryable = c.retryable();
    if (!c.healthy()) {
      // The connection is gone with the transaction: not stored.
      whole_failed = true;
      break;
    }
    failed[i] = true;
    again_alone[i] = retryable;
    q->result = std::move(s);
    if (!c.ExecScript("ROLLBACK TO w").ok()) whole_failed = true;
  }
  Status committed = Status::Ok();
  if (!whole_failed) {
    committed = c.Exec("COMMIT").status();
  } else if (c.healthy()) {
    (void)c.ExecScript("ROLLBACK");
  }
  // COMMIT sent and no answer: the batch may be stored or not.
  const bool unknown = !whole_failed && !committed.ok() && !c.healthy();
  Return(std::move(conn));
  if (!whole_failed && committed.ok()) {
    for (size_t i = 0; i < batch.size(); ++i) {
      if (again_alone[i]) batch[i]->result = CommitAlone(*batch[i]);
    }
    return;
  }
  // Otherwise the batch as a whole failed. When nothing of it is stored,
  // each write that did not fail by itself runs again alone, so one bad
  // write or a lost connection never fails the others; when its COMMIT's
  // outcome is unknown, each of those callers gets that error (a deadlock's
  // victim, rolled back either way, still runs again).
  uint64_t reruns = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (failed[i] && !again_alone[i]) continue;
    if (unknown && !failed[i]) {
      batch[i]->result = committed;
      continue;
    }
    batch[i]->result = CommitAlone(*batch[i]);
    ++reruns;
  }
  std::lock_guard ql(q_mu_);
  stats_.reruns += reruns;
}

PostgresStore::GroupCommitStats PostgresStore::group_commit_stats() {
  std::lock_guard ql(q_mu_);
  return stats_;
}

void PostgresStore::SetBeforeBatchForTest(std::function<void(size_t, size_t)> hook) {
  std::lock_guard ql(q_mu_);
  before_batch_ = std::move(hook);
}

bool PostgresStore::WaitForQueuedWrites(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock ql(q_mu_);
  return q_cv_.wait_for(ql, timeout,
                        [&] { return decision_lane_.size() + step_lane_.size() >= n; });
}

// --- sessions -------------------------------------------------------------------

Status PostgresStore::InsertSession(PgConn& c, const SessionInfo& s, const Json& settings,
                                    const std::string* lock_token, int64_t owner_pid) {
  auto r = c.Exec(
      "INSERT INTO sessions (id, workspace, provider, model, command, title, created_at_ms,"
      " updated_at_ms, settings, tenant, agent, metadata, lease_token, lease_pid, lease_host,"
      " lease_epoch, lease_acquired_at_ms, lease_heartbeat_at_ms, parent_id)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, $12, $13, $14,"
      " CASE WHEN $12::text IS NULL THEN 0 ELSE 1 END, $15, $15, $16)",
      {P(s.id), P(s.workspace.string()), P(s.provider), P(s.model), P(s.command), P(s.title),
       P(s.created_at_ms), P(settings.is_null() ? std::string() : DumpJson(settings)), P(s.tenant),
       P(s.agent), P(s.metadata.is_null() ? std::string() : DumpJson(s.metadata)),
       lock_token ? P(*lock_token) : PgParam(), lock_token ? P(owner_pid) : PgParam(),
       lock_token ? P(host_) : PgParam(), lock_token ? P(s.created_at_ms) : PgParam(),
       P(s.parent_id)});
  if (!r.ok() && r.error().code() == Code::kAlreadyExists) {
    return AlreadyExists("session " + s.id + " already exists");
  }
  return r.status();
}

Result<std::vector<SessionInfo>> PostgresStore::ListSessions(const SessionListOptions& options) {
  std::string sql = std::string("SELECT ") + kSessionColumns + " FROM sessions WHERE true";
  std::vector<PgParam> params;
  auto add = [&](PgParam p) {
    params.push_back(std::move(p));
    return "$" + std::to_string(params.size());
  };
  if (options.workspace) sql += " AND workspace = " + add(NormalizeWorkspace(*options.workspace));
  if (options.tenant) sql += " AND tenant = " + add(*options.tenant);
  if (options.agent) sql += " AND agent = " + add(*options.agent);
  if (options.parent_id) sql += " AND parent_id = " + add(*options.parent_id);
  if (!options.after_id.empty()) {
    sql +=
        " AND activity < (SELECT activity FROM sessions WHERE id = " + add(options.after_id) + ")";
  }
  sql += " ORDER BY activity DESC";
  if (options.limit > 0) sql += " LIMIT " + add(P(int64_t{options.limit}));
  return WithConn([&](PgConn& c) -> Result<std::vector<SessionInfo>> {
    if (!options.after_id.empty() && !GetSessionOn(c, options.after_id).ok()) {
      return NotFound("the listing cannot continue after session " + options.after_id +
                      ": it no longer exists");
    }
    AL_ASSIGN_OR_RETURN(PgRows r, c.Exec(sql, params));
    std::vector<SessionInfo> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(ReadSession(r, i));
    return out;
  });
}

Result<SessionInfo> PostgresStore::GetSessionOn(PgConn& c, std::string_view session_id,
                                                TenantFilter tenant) {
  AL_ASSIGN_OR_RETURN(PgRows r, c.Exec(std::string("SELECT ") + kSessionColumns +
                                           " FROM sessions WHERE id = $1"
                                           " AND ($2::text IS NULL OR tenant = $2)",
                                       {P(session_id), TenantParam(tenant)}));
  if (r.empty()) return SessionNotFound(session_id);
  return ReadSession(r, 0);
}

// --- fencing --------------------------------------------------------------------

Status PostgresStore::CheckFence(const PgRows& row, std::string_view session_id,
                                 const PgFence& fence) {
  // Columns 3-6: lease_token, lease_epoch, lease_pid, lease_host.
  if (!row.Null(0, 3) && row.Text(0, 3) == fence.token && row.Int(0, 4) == fence.epoch) {
    return Status::Ok();
  }
  std::string now_held = row.Null(0, 3) ? std::string("nobody holds it now")
                                        : "it is held by pid " + std::to_string(row.Int(0, 5)) +
                                              " on " + row.Text(0, 6) + " (epoch " +
                                              std::to_string(row.Int(0, 4)) + ")";
  return LeaseLost("session " + std::string(session_id) + ": this process lost its lease (epoch " +
                   std::to_string(fence.epoch) + ") and may not write to it; " + now_held);
}

Status PostgresStore::CheckFenceOn(PgConn& c, std::string_view session_id, const PgFence& fence) {
  AL_ASSIGN_OR_RETURN(PgRows r, c.Exec("SELECT tenant, title, last_seq, lease_token, lease_epoch,"
                                       " lease_pid, lease_host FROM sessions"
                                       " WHERE id = $1 FOR UPDATE",
                                       {P(session_id)}));
  if (r.empty()) return SessionNotFound(session_id);
  return CheckFence(r, session_id, fence);
}

// --- the event log --------------------------------------------------------------

Status PostgresStore::AppendOn(PgConn& c, std::string_view session_id,
                               std::span<const Event> events, int64_t now, const PgFence* fence,
                               bool again) {
  // The row lock orders this session's appends: they commit in seq order.
  // It also fences them: a takeover (AcquireLock) updates this row, so it
  // commits either before this read (the epoch differs: refused) or after
  // this transaction.
  AL_ASSIGN_OR_RETURN(PgRows s, c.Exec("SELECT tenant, title, last_seq, lease_token, lease_epoch,"
                                       " lease_pid, lease_host FROM sessions"
                                       " WHERE id = $1 FOR UPDATE",
                                       {P(session_id)}));
  if (s.empty()) return SessionNotFound(session_id);
  if (fence != nullptr) AL_RETURN_IF_ERROR(CheckFence(s, session_id, *fence));
  const std::string tenant = s.Text(0, 0);
  const std::string old_title = s.Text(0, 1);
  uint64_t last = static_cast<uint64_t>(s.Int(0, 2));
  if (again) {
    // An earlier attempt may have committed the batch (whole: it is one
    // transaction) and lost only the reply: then its last event is stored,
    // byte for byte, at its seq.
    const Event* final_event = nullptr;
    for (const Event& e : events) {
      if (ShouldPersist(e.type)) final_event = &e;
    }
    if (final_event != nullptr && final_event->seq <= last) {
      AL_ASSIGN_OR_RETURN(PgRows stored,
                          c.Exec("SELECT json FROM session_events WHERE session_id = $1"
                                 " AND seq = $2",
                                 {P(session_id), P(final_event->seq)}));
      if (!stored.empty() && stored.Text(0, 0) == final_event->Dump(session_id)) {
        return Status::Ok();
      }
    }
  }
  std::string title = old_title;
  std::string sql =
      "INSERT INTO session_events (tenant, session_id, seq, type, turn_id, json, created_at_ms)"
      " VALUES ";
  std::vector<PgParam> params = {P(tenant), P(session_id), P(now)};
  size_t rows = 0;
  for (const Event& e : events) {
    if (!ShouldPersist(e.type)) continue;
    AL_RETURN_IF_ERROR(CheckAppendable(e, session_id, &last));
    const size_t base = params.size();
    params.push_back(P(e.seq));
    params.push_back(P(EventTypeName(e.type)));
    params.push_back(P(e.turn_id));
    params.push_back(P(e.Dump(session_id)));
    if (rows++ > 0) sql += ", ";
    sql += "($1, $2, $" + std::to_string(base + 1) + ", $" + std::to_string(base + 2) + ", $" +
           std::to_string(base + 3) + ", $" + std::to_string(base + 4) + ", $3)";
    if (title.empty()) title = TitleFrom(e);
  }
  if (rows == 0) return Status::Ok();
  AL_RETURN_IF_ERROR(c.Exec(sql, params).status());
  // A fenced append renews the lease it proved current (no extra statement).
  return c
      .Exec(
          "UPDATE sessions SET last_seq = $2, updated_at_ms = $3, title = $4,"
          " activity = nextval('session_activity'),"
          " lease_heartbeat_at_ms = CASE WHEN $5 THEN $3 ELSE lease_heartbeat_at_ms END"
          " WHERE id = $1",
          {P(session_id), P(last), P(now), P(title), P(fence != nullptr ? "true" : "false")})
      .status();
}

Result<std::vector<StoredEvent>> PostgresStore::EventsOn(PgConn& c, std::string_view session_id,
                                                         const EventQuery& query,
                                                         TenantFilter tenant) {
  const EventQuerySql q = BuildEventQuerySql(query, 3, "$");
  std::vector<PgParam> params = {P(session_id), TenantParam(tenant), P(query.after_seq)};
  if (q.has_turn) params.push_back(P(query.turn_id));
  for (const std::string& type : query.types) params.push_back(P(type));
  if (q.has_limit) params.push_back(P(static_cast<int64_t>(query.limit)));
  AL_ASSIGN_OR_RETURN(PgRows r, c.Exec("SELECT seq, type, turn_id, json, created_at_ms"
                                       " FROM session_events WHERE session_id = $1"
                                       " AND ($2::text IS NULL OR tenant = $2)" +
                                           q.where_order_limit,
                                       params));
  std::vector<StoredEvent> out;
  out.reserve(static_cast<size_t>(r.size()));
  for (int i = 0; i < r.size(); ++i) {
    out.push_back({static_cast<uint64_t>(r.Int(i, 0)), r.Text(i, 1), r.Text(i, 2), r.Text(i, 3),
                   r.Int(i, 4)});
  }
  return out;
}

// --- the session lock (a lease) ---------------------------------------------------

// --- durable pauses -----------------------------------------------------------

Status PostgresStore::SetCheckpointStateOn(PgConn& c, const std::string& checkpoint_id,
                                           CheckpointState state, int64_t now) {
  AL_RETURN_IF_ERROR(c.Exec("UPDATE pending_index SET resolved = true"
                            " WHERE checkpoint_id = $1 AND NOT resolved",
                            {P(checkpoint_id)})
                         .status());
  return c
      .Exec("UPDATE checkpoints SET state = $2, updated_at_ms = $3 WHERE id = $1",
            {P(checkpoint_id), P(static_cast<int>(state)), P(now)})
      .status();
}

Result<std::vector<std::string>> PostgresStore::ListDecided() {
  return WithConn([&](PgConn& c) -> Result<std::vector<std::string>> {
    AL_ASSIGN_OR_RETURN(PgRows r, c.Exec("SELECT session_id FROM checkpoints WHERE state = 2"
                                         " ORDER BY updated_at_ms, ord"));
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  });
}

// --- wake-ups --------------------------------------------------------------------

Result<WakeupClaim> PostgresStore::ClaimWakeups(int limit, std::chrono::milliseconds retry_after) {
  const int64_t now = Now();
  return InTxn([&](PgConn& c) -> Result<WakeupClaim> {
    WakeupClaim out;
    // Rows of sessions with no decided batch and no queued input left are
    // stale: dropped.
    AL_RETURN_IF_ERROR(c.Exec("DELETE FROM session_wakeups w WHERE w.not_before_ms <= $1"
                              " AND NOT EXISTS (SELECT 1 FROM checkpoints k"
                              " WHERE k.session_id = w.session_id AND k.state = 2)"
                              " AND NOT EXISTS (SELECT 1 FROM session_inputs i"
                              " WHERE i.session_id = w.session_id)",
                              {P(now)})
                           .status());
    // SKIP LOCKED: instances claiming together take different rows. A
    // session with queued inputs but an open pause is claimed (due again
    // later) without being handed out: its inputs wait for the decision,
    // whose wake-up makes the row due again.
    AL_ASSIGN_OR_RETURN(PgRows r,
                        c.Exec("UPDATE session_wakeups w SET not_before_ms = $2 WHERE session_id IN"
                               " (SELECT session_id FROM session_wakeups WHERE not_before_ms <= $1"
                               " ORDER BY not_before_ms LIMIT $3 FOR UPDATE SKIP LOCKED)"
                               " RETURNING session_id,"
                               " EXISTS (SELECT 1 FROM checkpoints k"
                               " WHERE k.session_id = w.session_id AND k.state = 2),"
                               " NOT EXISTS (SELECT 1 FROM checkpoints k"
                               " WHERE k.session_id = w.session_id AND k.state = 0)",
                               {P(now), P(now + retry_after.count()), P(int64_t{limit})}));
    for (int i = 0; i < r.size(); ++i) {
      if (r.Text(i, 1) == "t") {
        out.sessions.push_back(r.Text(i, 0));
      } else if (r.Text(i, 2) == "t") {
        out.queued.push_back(r.Text(i, 0));
      }
    }
    AL_ASSIGN_OR_RETURN(PgRows next, c.Exec("SELECT MIN(not_before_ms) FROM session_wakeups"));
    if (!next.empty() && !next.Null(0, 0)) {
      out.next_due_in_ms = std::max<int64_t>(0, next.Int(0, 0) - now);
    }
    return out;
  });
}

Result<std::vector<std::string>> PostgresStore::ListExpiredLocks(int limit) {
  return WithConn([&](PgConn& c) -> Result<std::vector<std::string>> {
    AL_ASSIGN_OR_RETURN(PgRows r,
                        c.Exec("SELECT id FROM sessions WHERE lease_token IS NOT NULL"
                               " AND lease_heartbeat_at_ms < $1"
                               " ORDER BY lease_heartbeat_at_ms LIMIT $2",
                               {P(Now() - options_.lock_ttl.count()), P(int64_t{limit})}));
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  });
}

Result<std::unique_ptr<WakeupListener>> PostgresStore::ListenForWakeups() {
  AL_ASSIGN_OR_RETURN(auto listener, PgWakeupListener::Open(url_, kWakeupChannel));
  return std::unique_ptr<WakeupListener>(std::move(listener));
}

// --- queued inputs --------------------------------------------------------------

Status PostgresStore::DropWakeupUnlessQueuedOn(PgConn& c, std::string_view session_id) {
  return c
      .Exec(
          "DELETE FROM session_wakeups WHERE session_id = $1"
          " AND NOT EXISTS (SELECT 1 FROM session_inputs WHERE session_id = $1)",
          {P(session_id)})
      .status();
}

Result<std::vector<std::string>> PostgresStore::ListQueuedSessions() {
  return WithConn([&](PgConn& c) -> Result<std::vector<std::string>> {
    AL_ASSIGN_OR_RETURN(PgRows r, c.Exec("SELECT session_id FROM session_inputs"
                                         " GROUP BY session_id"
                                         " ORDER BY MIN(created_at_ms), session_id"));
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.Text(i, 0));
    return out;
  });
}

// --- state ----------------------------------------------------------------------

}  // namespace agentloop::store

namespace agentloop {

bool IsPostgresUrl(std::string_view url) {
  return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

Result<std::unique_ptr<SessionStore>> OpenPostgresStore(const std::string& url,
                                                        PostgresStoreOptions options) {
  AL_ASSIGN_OR_RETURN(auto store, store::PostgresStore::Open(url, std::move(options)));
  return std::unique_ptr<SessionStore>(std::move(store));
}

Result<PostgresMigration> MigratePostgresStore(const std::string& url) {
  AL_ASSIGN_OR_RETURN(auto conn, store::PgConn::Connect(url));
  PostgresMigration out;
  const auto migrations = store::BuiltinPgMigrations();
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto from = store::ApplyPgMigrations(*conn, migrations, now);
  if (!from.ok()) return from.error().WithContext(store::RedactPgUrl(url));
  out.from_version = *from;
  out.to_version = migrations.back().version;
  return out;
}

}  // namespace agentloop
