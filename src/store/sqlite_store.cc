// SqliteStore: the SQLite backend of the store core (store_core.h):
// sessions, the event log, locks, checkpoints and state in one SQLite file.
// Every write runs in the group commit's BEGIN IMMEDIATE transaction, so a
// multi-step decision other processes may race on (lock takeover, resolve,
// crash repair) sees and changes a consistent state.
#include "store/sqlite_store.h"

#include <algorithm>

#include "agentloop/event_data.h"

#include "base/ids.h"
#include "protocol/codec.h"
#include "store/migrations.h"
#include "store/replay.h"
#include "store/store_util.h"

namespace agentloop::store {
namespace {

// A session's last activity and last seq are read from its newest event (an
// index seek on events_by_session), not rewritten in its row on every
// commit: that rewrote the sessions page and both of its index pages, three
// of the ~8 pages a commit wrote. The row's updated_at_ms is the ORDER key
// of `sessions list` and `run --continue` (indexed, so a LIMIT 1 is one
// seek); Append moves it only when another session sorts first (see
// BumpIfNotNewestLocked), which keeps that order the order of last activity.
constexpr char kSessionColumns[] =
    "id, workspace, provider, model, command, title, created_at_ms,"
    " MAX(updated_at_ms, COALESCE((SELECT e.created_at_ms FROM events e"
    " WHERE e.session_id = sessions.id ORDER BY e.seq DESC LIMIT 1), 0)),"
    " MAX(last_seq, COALESCE((SELECT MAX(e.seq) FROM events e"
    " WHERE e.session_id = sessions.id), 0)), tenant, agent, metadata, parent_id";

// Restricts a statement over `pending_index p JOIN checkpoints c` to the
// rows of the tenant bound to ?2 (the tenant is a column of the session).
constexpr char kOfTenant[] =
    " AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id AND s.tenant = ?2)";

SessionInfo ReadSession(const Stmt& st) {
  SessionInfo s;
  s.id = st.Text(0);
  s.workspace = st.Text(1);
  s.provider = st.Text(2);
  s.model = st.Text(3);
  s.command = st.Text(4);
  s.title = st.Text(5);
  s.created_at_ms = st.Int(6);
  s.updated_at_ms = st.Int(7);
  s.last_seq = static_cast<uint64_t>(st.Int(8));
  s.tenant = st.Text(9);
  s.agent = st.Text(10);
  s.parent_id = st.Text(12);
  // Written by this store from a JSON object; anything else reads as null.
  if (std::string meta = st.Text(11); !meta.empty()) {
    s.metadata = Json::parse(meta, nullptr, /*allow_exceptions=*/false);
    if (s.metadata.is_discarded()) s.metadata = nullptr;
  }
  return s;
}

// The first column of every row `st` steps through, as text.
Result<std::vector<std::string>> FirstColumn(Stmt& st) {
  std::vector<std::string> out;
  for (;;) {
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.Text(0));
  }
  return out;
}

}  // namespace

SqliteStore::SqliteStore(std::unique_ptr<Db> db, SqliteStoreOptions options)
    : StoreCore(static_cast<StoreBackend&>(*this)),
      db_(std::move(db)),
      options_(std::move(options)),
      host_(HostName()) {}

SqliteStore::~SqliteStore() { StopHeartbeatThread(); }

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::filesystem::path& path,
                                                       SqliteStoreOptions options) {
  AL_ASSIGN_OR_RETURN(std::unique_ptr<Db> db,
                      Db::Open(path, static_cast<int>(options.busy_timeout.count()), options.sync));
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db), std::move(options)));
  AL_RETURN_IF_ERROR(
      ApplyMigrations(*store->db_, BuiltinMigrations(), store->Now()).WithContext(path.string()));
  return store;
}

int64_t SqliteStore::Now() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// --- group commit -------------------------------------------------------------

Status SqliteStore::Write(Lane lane, const std::function<Status()>& work) {
  QueuedWrite w{&work, Status::Ok(), false};
  std::unique_lock ql(q_mu_);
  (lane == Lane::kDecision ? decision_lane_ : step_lane_).push_back(&w);
  q_cv_.notify_all();  // a writer in its window, WaitForQueuedWrites
  while (!w.done && writing_) q_cv_.wait(ql);
  if (w.done) return w.result;
  // No writer is active: this caller is it until its own write is answered.
  writing_ = true;
  const size_t max = static_cast<size_t>(std::max(1, options_.group_commit_max));
  while (!w.done) {
    if (options_.group_commit_window.count() > 0) {
      q_cv_.wait_for(ql, options_.group_commit_window,
                     [&] { return decision_lane_.size() + step_lane_.size() >= max; });
    }
    // Decisions first: they never wait behind the queued steps of turns.
    std::vector<QueuedWrite*> batch;
    size_t decisions = 0;
    for (auto* lane_q : {&decision_lane_, &step_lane_}) {
      while (batch.size() < max && !lane_q->empty()) {
        batch.push_back(lane_q->front());
        lane_q->pop_front();
      }
      if (lane_q == &decision_lane_) decisions = batch.size();
    }
    std::function<void(size_t, size_t)> hook = before_batch_;
    ql.unlock();
    if (hook) hook(decisions, batch.size() - decisions);
    {
      std::lock_guard lk(mu_);
      CommitBatchLocked(batch);
    }
    ql.lock();
    ++stats_.batches;
    stats_.writes += batch.size();
    stats_.largest = std::max(stats_.largest, batch.size());
    for (QueuedWrite* q : batch) q->done = true;
    q_cv_.notify_all();
  }
  writing_ = false;
  // A caller still queued becomes the next writer.
  q_cv_.notify_all();
  return w.result;
}

Status SqliteStore::CommitAloneLocked(const std::function<Status()>& work) {
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_RETURN_IF_ERROR(work());
  return txn.Commit();
}

void SqliteStore::CommitBatchLocked(std::span<QueuedWrite* const> batch) {
  if (batch.size() == 1) {
    batch[0]->result = CommitAloneLocked(*batch[0]->work);
    return;
  }
  Result<Txn> txn = Txn::Begin(*db_, /*immediate=*/true);
  if (!txn.ok()) {
    // The database's write lock was not to be had (another process held
    // it beyond the busy timeout): every write of the batch is told.
    for (QueuedWrite* q : batch) q->result = txn.error();
    return;
  }
  // Whether each write ran and failed by itself (its savepoint rolled back).
  std::vector<bool> failed(batch.size(), false);
  bool whole_failed = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    QueuedWrite* q = batch[i];
    Status s = db_->Exec("SAVEPOINT w");
    if (s.ok()) s = (*q->work)();
    if (s.ok()) s = db_->Exec("RELEASE w");
    q->result = s;
    if (s.ok()) continue;
    failed[i] = true;
    if (sqlite3_get_autocommit(db_->raw()) != 0) {
      // The error ended the whole transaction (SQLite rolls back on some,
      // e.g. a full disk): the writes before this one were undone too.
      whole_failed = true;
      break;
    }
    if (!db_->Exec("ROLLBACK TO w").ok() || !db_->Exec("RELEASE w").ok()) {
      whole_failed = true;
      break;
    }
  }
  Status committed = whole_failed ? Status::Ok() : txn->Commit();
  if (!whole_failed && committed.ok()) return;
  if (whole_failed) {
    // Ends what is left of the transaction (a no-op once SQLite ended it).
    Txn dropped = std::move(*txn);
  }
  // The batch as a whole failed: each write that did not fail by itself
  // runs again alone (its callback too: everything it did was rolled
  // back), so one bad write never fails the others.
  uint64_t reruns = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (failed[i]) continue;
    batch[i]->result = CommitAloneLocked(*batch[i]->work);
    ++reruns;
  }
  std::lock_guard ql(q_mu_);
  stats_.reruns += reruns;
}

SqliteStore::GroupCommitStats SqliteStore::group_commit_stats() {
  std::lock_guard ql(q_mu_);
  return stats_;
}

void SqliteStore::SetBeforeBatchForTest(std::function<void(size_t, size_t)> hook) {
  std::lock_guard ql(q_mu_);
  before_batch_ = std::move(hook);
}

bool SqliteStore::WaitForQueuedWrites(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock ql(q_mu_);
  return q_cv_.wait_for(ql, timeout,
                        [&] { return decision_lane_.size() + step_lane_.size() >= n; });
}

// --- transactions (StoreBackend) ----------------------------------------------

// The statements of a transaction on the store's connection. Made by Run,
// used only inside the work it runs (mu_ held, the transaction open).
class SqliteTxn final : public StoreTxn {
 public:
  explicit SqliteTxn(SqliteStore& store) : s_(store), db_(*store.db_) {}

  Result<SessionInfo> Session(std::string_view session_id, TenantFilter tenant) override {
    return s_.GetSessionLocked(session_id, tenant);
  }
  Result<std::vector<StoredEvent>> Events(std::string_view session_id, const EventQuery& query,
                                          TenantFilter tenant) override {
    if (tenant && !s_.GetSessionLocked(session_id, tenant).ok()) {
      return std::vector<StoredEvent>();
    }
    return s_.EventsLocked(session_id, query);
  }
  Result<std::vector<std::string>> SessionsWithPrefix(std::string_view prefix,
                                                      int64_t limit) override {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_.Prepare("SELECT id FROM sessions WHERE substr(id, 1, ?) = ? LIMIT ?"));
    st.Bind(1, static_cast<int64_t>(prefix.size())).Bind(2, prefix).Bind(3, limit);
    return FirstColumn(st);
  }
  Status Relabel(std::string_view session_id, TenantFilter tenant,
                 const std::optional<std::string>& title,
                 const std::optional<std::string>& metadata) override {
    AL_RETURN_IF_ERROR(s_.GetSessionLocked(session_id, tenant).status());
    if (title) {
      AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("UPDATE sessions SET title = ? WHERE id = ?"));
      AL_RETURN_IF_ERROR(st.Bind(1, *title).Bind(2, session_id).Run());
    }
    if (metadata) {
      AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("UPDATE sessions SET metadata = ? WHERE id = ?"));
      AL_RETURN_IF_ERROR(st.Bind(1, *metadata).Bind(2, session_id).Run());
    }
    return Status::Ok();
  }
  Result<std::string> SettingsText(std::string_view session_id, TenantFilter tenant) override {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_.Prepare(std::string("SELECT settings FROM sessions WHERE id = ?1") +
                                    (tenant ? " AND tenant = ?2" : "")));
    st.Bind(1, session_id);
    if (tenant) st.Bind(2, *tenant);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return SessionNotFound(session_id);
    return st.Text(0);
  }
  Result<std::optional<std::string>> StateText(std::string_view session_id,
                                               std::string_view key) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT json FROM session_state"
                                             " WHERE session_id = ? AND key = ?"));
    st.Bind(1, session_id).Bind(2, key);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return std::optional<std::string>();
    return std::optional<std::string>(st.Text(0));
  }
  Result<uint64_t> LastSeq(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(SessionInfo info, s_.GetSessionLocked(session_id));
    return info.last_seq;
  }
  Result<std::optional<StoredHolder>> LockHolder(std::string_view session_id,
                                                 TenantFilter tenant) override {
    AL_RETURN_IF_ERROR(s_.GetSessionLocked(session_id, tenant).status());
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT owner_pid, owner_host, acquired_at_ms,"
                                             " heartbeat_at_ms, token FROM session_locks"
                                             " WHERE session_id = ?"));
    st.Bind(1, session_id);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return std::optional<StoredHolder>();
    return std::optional<StoredHolder>(
        StoredHolder{st.Int(0), st.Text(1), st.Int(2), st.Int(3), st.Text(4)});
  }
  Status CheckFence(std::string_view session_id, const LockFence&) override {
    return s_.GetSessionLocked(session_id).status();
  }
  Result<int64_t> InsertSession(const SessionInfo& s, const Json& settings,
                                const std::string* lock_token, int64_t owner_pid) override {
    AL_RETURN_IF_ERROR(s_.InsertSessionLocked(s, settings));
    if (lock_token != nullptr) {
      AL_RETURN_IF_ERROR(s_.InsertLockLocked(s.id, *lock_token, owner_pid, s.created_at_ms));
    }
    return int64_t{0};
  }
  Status DeleteSession(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("DELETE FROM sessions WHERE id = ?"));
    return st.Bind(1, session_id).Run();
  }
  Result<int64_t> TakeLock(std::string_view session_id, const std::string& token, int64_t owner_pid,
                           int64_t now) override {
    AL_RETURN_IF_ERROR(s_.InsertLockLocked(session_id, token, owner_pid, now));
    return int64_t{0};
  }
  Result<int64_t> RenewLocks(std::span<const std::pair<std::string, std::string>> held,
                             int64_t now) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("UPDATE session_locks SET heartbeat_at_ms = ?"
                                             " WHERE session_id = ? AND token = ?"));
    int64_t renewed = 0;
    for (const auto& [id, token] : held) {
      AL_RETURN_IF_ERROR(st.Bind(1, now).Bind(2, id).Bind(3, token).Run());
      renewed += db_.Changes();
      st.Reset();
    }
    return renewed;
  }
  Status ReleaseLock(std::string_view session_id, const std::string& token) override {
    AL_ASSIGN_OR_RETURN(
        Stmt st, db_.Prepare("DELETE FROM session_locks WHERE session_id = ? AND token = ?"));
    return st.Bind(1, session_id).Bind(2, token).Run();
  }
  Status LockSession(std::string_view session_id) override {
    return s_.GetSessionLocked(session_id).status();
  }
  Status Append(std::string_view session_id, std::span<const Event> events, int64_t now,
                const LockFence*) override {
    return s_.AppendLocked(session_id, events, now);
  }

  Result<std::vector<IndexRow>> IndexRows(const IndexFilter& filter) override {
    std::string sql =
        "SELECT p.pending_id, p.session_id, p.checkpoint_id, p.created_at_ms, c.turn_id, c.json,"
        " p.resolved, c.closed FROM pending_index p JOIN checkpoints c ON c.id = p.checkpoint_id";
    if (filter.pending_id) {
      sql += " WHERE p.pending_id = ?1";
    } else {
      sql += " WHERE c.closed = 0 AND p.resolved = 0";
      if (filter.session_id) sql += " AND p.session_id = ?1";
    }
    if (filter.tenant) sql += kOfTenant;
    sql += " ORDER BY p.created_at_ms, p.rowid";
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare(sql));
    if (filter.pending_id) st.Bind(1, *filter.pending_id);
    if (!filter.pending_id && filter.session_id) st.Bind(1, *filter.session_id);
    if (filter.tenant) st.Bind(2, *filter.tenant);
    std::vector<IndexRow> out;
    for (;;) {
      AL_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out.push_back(IndexRow{st.Text(0), st.Text(1), st.Text(2), st.Int(3), st.Text(4), st.Text(5),
                             st.Int(6) != 0, static_cast<CheckpointState>(st.Int(7))});
    }
    return out;
  }
  Result<std::optional<StoredCheckpoint>> ClaimIndexedItem(std::string_view pending_id,
                                                           TenantFilter tenant) override {
    // The database write lock keeps every other decider out until commit.
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare(std::string("SELECT c.id, c.json FROM pending_index p"
                                                         " JOIN checkpoints c"
                                                         " ON c.id = p.checkpoint_id"
                                                         " WHERE p.pending_id = ?1"
                                                         " AND c.closed = 0 AND p.resolved = 0") +
                                             (tenant ? kOfTenant : "")));
    st.Bind(1, pending_id);
    if (tenant) st.Bind(2, *tenant);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return std::optional<StoredCheckpoint>();
    StoredCheckpoint cp{st.Text(0), st.Text(1)};
    st.Reset();
    AL_ASSIGN_OR_RETURN(Stmt done,
                        db_.Prepare("UPDATE pending_index SET resolved = 1 WHERE pending_id = ?"));
    AL_RETURN_IF_ERROR(done.Bind(1, pending_id).Run());
    return std::optional<StoredCheckpoint>(std::move(cp));
  }
  Result<std::vector<std::string>> PausedCheckpoints(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(Stmt open, db_.Prepare("SELECT id FROM checkpoints"
                                               " WHERE session_id = ? AND closed IN (0, 2)"));
    open.Bind(1, session_id);
    return FirstColumn(open);
  }
  Status InsertCheckpoint(const std::string& id, const Checkpoint& checkpoint,
                          int64_t now) override {
    AL_ASSIGN_OR_RETURN(Stmt ins, db_.Prepare("INSERT INTO checkpoints (id, session_id, turn_id,"
                                              " json, closed, created_at_ms, updated_at_ms)"
                                              " VALUES (?, ?, ?, ?, 0, ?, ?)"));
    AL_RETURN_IF_ERROR(ins.Bind(1, id)
                           .Bind(2, checkpoint.session_id)
                           .Bind(3, checkpoint.turn_id)
                           .Bind(4, DumpJson(ToJson(checkpoint)))
                           .Bind(5, now)
                           .Bind(6, now)
                           .Run());
    AL_ASSIGN_OR_RETURN(Stmt idx, db_.Prepare("INSERT INTO pending_index (pending_id,"
                                              " checkpoint_id, session_id, created_at_ms)"
                                              " VALUES (?, ?, ?, ?)"));
    for (const PendingItem& item : checkpoint.outstanding) {
      Status s = idx.Bind(1, item.id).Bind(2, id).Bind(3, checkpoint.session_id).Bind(4, now).Run();
      if (s.code() == Code::kAlreadyExists) {
        return AlreadyExists("pending id " + item.id + " already exists");
      }
      AL_RETURN_IF_ERROR(s);
      idx.Reset();
    }
    return Status::Ok();
  }
  Result<std::optional<StoredCheckpoint>> NewestCheckpoint(std::string_view session_id,
                                                           CheckpointState state) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT id, json FROM checkpoints"
                                             " WHERE session_id = ? AND closed = ?"
                                             " ORDER BY updated_at_ms DESC, rowid DESC LIMIT 1"));
    st.Bind(1, session_id).Bind(2, static_cast<int64_t>(state));
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return std::optional<StoredCheckpoint>();
    return std::optional<StoredCheckpoint>(StoredCheckpoint{st.Text(0), st.Text(1)});
  }
  Status UpdateCheckpoint(const std::string& id, const Checkpoint& checkpoint,
                          int64_t now) override {
    AL_ASSIGN_OR_RETURN(Stmt up, db_.Prepare("UPDATE checkpoints SET json = ?, updated_at_ms = ?"
                                             " WHERE id = ?"));
    return up.Bind(1, DumpJson(ToJson(checkpoint))).Bind(2, now).Bind(3, id).Run();
  }
  Status SetCheckpointState(const std::string& id, CheckpointState state, int64_t now) override {
    return s_.SetCheckpointStateLocked(id, state, now);
  }
  Status SettleIndexRowsExcept(const std::string& id,
                               std::span<const PendingItem> outstanding) override {
    AL_ASSIGN_OR_RETURN(Stmt ids, db_.Prepare("SELECT pending_id FROM pending_index"
                                              " WHERE checkpoint_id = ? AND resolved = 0"));
    ids.Bind(1, id);
    std::vector<std::string> gone;
    for (;;) {
      AL_ASSIGN_OR_RETURN(bool r, ids.Step());
      if (!r) break;
      std::string pending_id = ids.Text(0);
      if (std::none_of(outstanding.begin(), outstanding.end(),
                       [&](const PendingItem& p) { return p.id == pending_id; })) {
        gone.push_back(std::move(pending_id));
      }
    }
    for (const auto& pending_id : gone) {
      AL_ASSIGN_OR_RETURN(
          Stmt done, db_.Prepare("UPDATE pending_index SET resolved = 1 WHERE pending_id = ?"));
      AL_RETURN_IF_ERROR(done.Bind(1, pending_id).Run());
    }
    return Status::Ok();
  }
  Result<std::optional<StoredCheckpoint>> TakeDecidedCheckpoint(
      std::string_view session_id) override {
    // The database write lock: no other taker until commit.
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT id, json FROM checkpoints"
                                             " WHERE session_id = ? AND closed = 2"
                                             " ORDER BY updated_at_ms DESC, rowid DESC LIMIT 1"));
    st.Bind(1, session_id);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return std::optional<StoredCheckpoint>();
    return std::optional<StoredCheckpoint>(StoredCheckpoint{st.Text(0), st.Text(1)});
  }

  Result<bool> HasPausedBatch(std::string_view session_id) override {
    AL_ASSIGN_OR_RETURN(Stmt paused, db_.Prepare("SELECT 1 FROM checkpoints WHERE session_id = ?"
                                                 " AND closed IN (0, 2) LIMIT 1"));
    paused.Bind(1, session_id);
    return paused.Step();
  }

  Result<int64_t> InsertQueuedInput(std::string_view session_id,
                                    const QueuedInput& input) override {
    AL_ASSIGN_OR_RETURN(SessionInfo info, s_.GetSessionLocked(session_id));
    {
      AL_ASSIGN_OR_RETURN(
          Stmt st, db_.Prepare("INSERT INTO session_inputs (id, tenant, session_id, position,"
                               " input, continue_turn, created_at_ms) SELECT ?, ?, ?,"
                               " COALESCE(MAX(position), 0) + 1, ?, ?, ? FROM session_inputs"
                               " WHERE session_id = ?"));
      AL_RETURN_IF_ERROR(st.Bind(1, input.id)
                             .Bind(2, info.tenant)
                             .Bind(3, session_id)
                             .Bind(4, input.input)
                             .Bind(5, int64_t{input.continue_turn ? 1 : 0})
                             .Bind(6, input.created_at_ms)
                             .Bind(7, session_id)
                             .Run());
    }
    AL_ASSIGN_OR_RETURN(Stmt count,
                        db_.Prepare("SELECT COUNT(*) FROM session_inputs WHERE session_id = ?"));
    count.Bind(1, session_id);
    AL_ASSIGN_OR_RETURN(bool row, count.Step());
    return row ? count.Int(0) : int64_t{1};
  }
  Result<std::vector<QueuedInput>> QueuedInputs(std::string_view session_id,
                                                int64_t limit) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT id, input, continue_turn, created_at_ms"
                                             " FROM session_inputs WHERE session_id = ?"
                                             " ORDER BY position LIMIT ?"));
    st.Bind(1, session_id).Bind(2, limit);
    std::vector<QueuedInput> out;
    for (;;) {
      AL_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out.push_back(
          QueuedInput{st.Text(0), std::string(session_id), st.Text(1), st.Int(2) != 0, st.Int(3)});
    }
    return out;
  }
  Result<bool> DeleteQueuedInput(std::string_view session_id, std::string_view input_id) override {
    AL_ASSIGN_OR_RETURN(Stmt del,
                        db_.Prepare("DELETE FROM session_inputs WHERE id = ? AND session_id = ?"));
    AL_RETURN_IF_ERROR(del.Bind(1, input_id).Bind(2, session_id).Run());
    return db_.Changes() > 0;
  }

  Status PutState(std::string_view session_id, std::string_view key, const Json& value,
                  int64_t now) override {
    AL_RETURN_IF_ERROR(s_.GetSessionLocked(session_id).status());
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("INSERT INTO session_state (session_id, key, json,"
                                             " updated_at_ms) VALUES (?, ?, ?, ?)"
                                             " ON CONFLICT (session_id, key) DO UPDATE SET"
                                             " json = excluded.json,"
                                             " updated_at_ms = excluded.updated_at_ms"));
    return st.Bind(1, session_id).Bind(2, key).Bind(3, DumpJson(value)).Bind(4, now).Run();
  }
  Status PutSettings(std::string_view session_id, const Json& settings) override {
    AL_RETURN_IF_ERROR(s_.GetSessionLocked(session_id).status());
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("UPDATE sessions SET settings = ? WHERE id = ?"));
    return st.Bind(1, DumpJson(settings)).Bind(2, session_id).Run();
  }

  Status ForgetIdempotencyKeys(int64_t before_ms, int64_t in_flight_before_ms) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("DELETE FROM idempotency_keys WHERE created_at_ms < ?"
                                             " OR (response IS NULL AND created_at_ms < ?)"));
    return st.Bind(1, before_ms).Bind(2, in_flight_before_ms).Run();
  }
  Result<bool> InsertIdempotencyKey(std::string_view tenant, std::string_view key,
                                    std::string_view fingerprint, int64_t now) override {
    AL_ASSIGN_OR_RETURN(Stmt ins, db_.Prepare("INSERT INTO idempotency_keys (tenant, key,"
                                              " fingerprint, created_at_ms) VALUES (?, ?, ?, ?)"
                                              " ON CONFLICT (tenant, key) DO NOTHING"));
    AL_RETURN_IF_ERROR(ins.Bind(1, tenant).Bind(2, key).Bind(3, fingerprint).Bind(4, now).Run());
    return db_.Changes() == 1;
  }
  Result<std::optional<IdempotencyRecord>> IdempotencyKey(std::string_view tenant,
                                                          std::string_view key) override {
    AL_ASSIGN_OR_RETURN(Stmt find, db_.Prepare("SELECT fingerprint, response IS NULL, response"
                                               " FROM idempotency_keys"
                                               " WHERE tenant = ? AND key = ?"));
    find.Bind(1, tenant).Bind(2, key);
    AL_ASSIGN_OR_RETURN(bool row, find.Step());
    if (!row) return std::optional<IdempotencyRecord>();
    IdempotencyRecord r{find.Text(0), std::nullopt};
    if (find.Int(1) == 0) r.response = find.Text(2);
    return std::optional<IdempotencyRecord>(std::move(r));
  }
  Status SetIdempotencyResponse(std::string_view tenant, std::string_view key,
                                std::optional<std::string_view> response) override {
    if (!response) {
      AL_ASSIGN_OR_RETURN(Stmt st,
                          db_.Prepare("DELETE FROM idempotency_keys WHERE tenant = ? AND key = ?"));
      return st.Bind(1, tenant).Bind(2, key).Run();
    }
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("UPDATE idempotency_keys SET response = ?"
                                             " WHERE tenant = ? AND key = ?"));
    return st.Bind(1, *response).Bind(2, tenant).Bind(3, key).Run();
  }
  Result<bool> InsertNotification(const OutboxNotification& n, int64_t now,
                                  int64_t due_at_ms) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("INSERT INTO notification_outbox (id, session_id,"
                                             " agent, event, body, created_at_ms, due_at_ms)"
                                             " VALUES (?, ?, ?, ?, ?, ?, ?)"
                                             " ON CONFLICT (id) DO NOTHING"));
    AL_RETURN_IF_ERROR(st.Bind(1, n.id)
                           .Bind(2, n.session_id)
                           .Bind(3, n.agent)
                           .Bind(4, n.event)
                           .Bind(5, n.body)
                           .Bind(6, now)
                           .Bind(7, due_at_ms)
                           .Run());
    return db_.Changes() == 1;
  }
  Status ForgetNotifications(int64_t before_ms) override {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_.Prepare("DELETE FROM notification_outbox WHERE created_at_ms < ?"));
    return st.Bind(1, before_ms).Run();
  }
  Result<std::vector<OutboxNotification>> ClaimDueNotifications(int64_t now, int64_t due_again_ms,
                                                                int64_t limit) override {
    std::vector<OutboxNotification> out;
    {
      AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT id, session_id, agent, event, body,"
                                               " created_at_ms FROM notification_outbox"
                                               " WHERE due_at_ms IS NOT NULL AND due_at_ms <= ?"
                                               " ORDER BY created_at_ms, id LIMIT ?"));
      st.Bind(1, now).Bind(2, limit);
      for (;;) {
        AL_ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) break;
        out.push_back(OutboxNotification{st.Text(0), st.Text(1), st.Text(2), st.Text(3), st.Text(4),
                                         st.Int(5)});
      }
    }
    AL_ASSIGN_OR_RETURN(Stmt up,
                        db_.Prepare("UPDATE notification_outbox SET due_at_ms = ? WHERE id = ?"));
    for (const OutboxNotification& n : out) {
      AL_RETURN_IF_ERROR(up.Bind(1, due_again_ms).Bind(2, n.id).Run());
      up.Reset();
    }
    return out;
  }
  Status FinishNotification(std::string_view id) override {
    AL_ASSIGN_OR_RETURN(
        Stmt st, db_.Prepare("UPDATE notification_outbox SET due_at_ms = NULL WHERE id = ?"));
    return st.Bind(1, id).Run();
  }
  Status InsertRevokedCredential(std::string_view tenant, std::string_view id,
                                 int64_t expires_at_ms) override {
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("INSERT INTO revoked_credentials (id, tenant,"
                                             " expires_at_ms) VALUES (?, ?, ?)"
                                             " ON CONFLICT (id) DO NOTHING"));
    return st.Bind(1, id).Bind(2, tenant).Bind(3, expires_at_ms).Run();
  }
  Result<std::vector<std::string>> RevokedCredentials(int64_t now) override {
    AL_ASSIGN_OR_RETURN(Stmt del,
                        db_.Prepare("DELETE FROM revoked_credentials WHERE expires_at_ms <= ?"));
    AL_RETURN_IF_ERROR(del.Bind(1, now).Run());
    AL_ASSIGN_OR_RETURN(Stmt st, db_.Prepare("SELECT id FROM revoked_credentials ORDER BY id"));
    return FirstColumn(st);
  }

  // One machine: nobody else to wake (see SessionStore's wake-ups).
  Status LeaveWakeup(std::string_view, int64_t, int64_t, bool) override { return Status::Ok(); }
  Status DropWakeupUnlessQueued(std::string_view) override { return Status::Ok(); }

 private:
  SqliteStore& s_;
  Db& db_;
};

Status SqliteStore::Run(TxnKind kind, const std::function<Status(StoreTxn&)>& work) {
  if (kind == TxnKind::kRead || kind == TxnKind::kSnapshot) {
    std::lock_guard lk(mu_);
    AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/false));
    SqliteTxn t(*this);
    return work(t);
  }
  const std::function<Status()> write = [&] {
    SqliteTxn t(*this);
    return work(t);
  };
  return Write(kind == TxnKind::kDecision ? Lane::kDecision : Lane::kStep, write);
}

// --- sessions ---------------------------------------------------------------

Status SqliteStore::InsertSessionLocked(const SessionInfo& s, const Json& settings) {
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("INSERT INTO sessions (id, workspace, provider, model,"
                                            " command, title, created_at_ms, updated_at_ms,"
                                            " settings, tenant, agent, metadata, parent_id)"
                                            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  st.Bind(1, s.id)
      .Bind(2, s.workspace.string())
      .Bind(3, s.provider)
      .Bind(4, s.model)
      .Bind(5, s.command)
      .Bind(6, s.title)
      .Bind(7, s.created_at_ms)
      .Bind(8, s.updated_at_ms)
      .Bind(9, settings.is_null() ? std::string() : DumpJson(settings))
      .Bind(10, s.tenant)
      .Bind(11, s.agent)
      .Bind(12, s.metadata.is_null() ? std::string() : DumpJson(s.metadata))
      .Bind(13, s.parent_id);
  Status run = st.Run();
  if (run.code() == Code::kAlreadyExists) {
    return AlreadyExists("session " + s.id + " already exists");
  }
  return run;
}

Result<std::vector<SessionInfo>> SqliteStore::ListSessions(const SessionListOptions& options) {
  std::string sql = std::string("SELECT ") + kSessionColumns + " FROM sessions WHERE 1";
  if (options.workspace) sql += " AND workspace = ?2";
  if (options.tenant) sql += " AND tenant = ?3";
  if (options.agent) sql += " AND agent = ?4";
  if (options.parent_id) sql += " AND parent_id = ?6";
  if (!options.after_id.empty()) {
    sql +=
        " AND (updated_at_ms, rowid) < (SELECT updated_at_ms, rowid FROM sessions"
        " WHERE id = ?5)";
  }
  sql += " ORDER BY updated_at_ms DESC, rowid DESC LIMIT ?1";
  std::lock_guard lk(mu_);
  if (!options.after_id.empty()) {
    Result<SessionInfo> after = GetSessionLocked(options.after_id);
    if (!after.ok()) {
      return NotFound("the listing cannot continue after session " + options.after_id +
                      ": it no longer exists");
    }
  }
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare(sql));
  st.Bind(1, int64_t{options.limit > 0 ? options.limit : -1});
  if (options.workspace) st.Bind(2, NormalizeWorkspace(*options.workspace));
  if (options.tenant) st.Bind(3, *options.tenant);
  if (options.agent) st.Bind(4, *options.agent);
  if (!options.after_id.empty()) st.Bind(5, options.after_id);
  if (options.parent_id) st.Bind(6, *options.parent_id);
  std::vector<SessionInfo> out;
  for (;;) {
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadSession(st));
  }
  return out;
}

Result<SessionInfo> SqliteStore::GetSessionLocked(std::string_view session_id,
                                                  TenantFilter tenant) {
  AL_ASSIGN_OR_RETURN(
      Stmt st, db_->Prepare(std::string("SELECT ") + kSessionColumns +
                            " FROM sessions WHERE id = ?1" + (tenant ? " AND tenant = ?2" : "")));
  st.Bind(1, session_id);
  if (tenant) st.Bind(2, *tenant);
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return SessionNotFound(session_id);
  return ReadSession(st);
}

// --- the event log ------------------------------------------------------------

Status SqliteStore::AppendLocked(std::string_view session_id, std::span<const Event> events,
                                 int64_t now) {
  std::string old_title;
  uint64_t last = 0;
  {
    // The session's highest stored seq: one seek on the events' key.
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT title, MAX(last_seq, COALESCE((SELECT"
                                              " MAX(e.seq) FROM events e WHERE e.session_id ="
                                              " sessions.id), 0)) FROM sessions WHERE id = ?"));
    st.Bind(1, session_id);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return SessionNotFound(session_id);
    old_title = st.Text(0);
    last = static_cast<uint64_t>(st.Int(1));
  }
  AL_ASSIGN_OR_RETURN(Stmt ins, db_->Prepare("INSERT INTO events (session_id, seq, type, turn_id,"
                                             " json, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)"));
  std::string title = old_title;
  bool any = false;
  for (const Event& e : events) {
    if (!ShouldPersist(e.type)) continue;
    AL_RETURN_IF_ERROR(CheckAppendable(e, session_id, &last));
    ins.Bind(1, session_id)
        .Bind(2, static_cast<int64_t>(e.seq))
        .Bind(3, EventTypeName(e.type))
        .Bind(4, e.turn_id)
        .Bind(5, e.Dump(session_id))
        .Bind(6, now);
    Status s = ins.Run();
    if (s.code() == Code::kAlreadyExists) {
      return AlreadyExists("session " + std::string(session_id) + ": event seq " +
                           std::to_string(e.seq) + " is already stored");
    }
    AL_RETURN_IF_ERROR(s);
    ins.Reset();
    if (title.empty()) title = TitleFrom(e);
    any = true;
  }
  if (!any) return Status::Ok();
  if (title != old_title) {  // once per session: the first user message
    AL_ASSIGN_OR_RETURN(Stmt up, db_->Prepare("UPDATE sessions SET title = ? WHERE id = ?"));
    AL_RETURN_IF_ERROR(up.Bind(1, title).Bind(2, session_id).Run());
  }
  return BumpIfNotNewestLocked(session_id, now);
}

Status SqliteStore::BumpIfNotNewestLocked(std::string_view session_id, int64_t now) {
  // The first row of the list order (sessions_by_updated holds
  // (updated_at_ms, rowid): one seek). A session already first stays first
  // after this commit, and every other keeps its place below it: the order
  // stays the order of last activity without writing the row. Otherwise the
  // session moves above the first.
  AL_ASSIGN_OR_RETURN(Stmt top, db_->Prepare("SELECT id, updated_at_ms FROM sessions"
                                             " ORDER BY updated_at_ms DESC, rowid DESC LIMIT 1"));
  AL_ASSIGN_OR_RETURN(bool row, top.Step());
  if (!row || top.Text(0) == session_id) return Status::Ok();
  const int64_t above = std::max(now, top.Int(1) + 1);
  AL_ASSIGN_OR_RETURN(Stmt up, db_->Prepare("UPDATE sessions SET updated_at_ms = ? WHERE id = ?"));
  return up.Bind(1, above).Bind(2, session_id).Run();
}

Result<std::vector<StoredEvent>> SqliteStore::EventsLocked(std::string_view session_id,
                                                           const EventQuery& query) {
  const EventQuerySql q = BuildEventQuerySql(query, 2, "?");
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT seq, type, turn_id, json, created_at_ms"
                                            " FROM events WHERE session_id = ?1" +
                                            q.where_order_limit));
  st.Bind(1, session_id).Bind(2, static_cast<int64_t>(query.after_seq));
  int n = 3;
  if (q.has_turn) st.Bind(n++, query.turn_id);
  for (const std::string& type : query.types) st.Bind(n++, type);
  if (q.has_limit) st.Bind(n++, static_cast<int64_t>(query.limit));
  std::vector<StoredEvent> out;
  for (;;) {
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(
        {static_cast<uint64_t>(st.Int(0)), st.Text(1), st.Text(2), st.Text(3), st.Int(4)});
  }
  return out;
}

// --- the session lock ---------------------------------------------------------

Status SqliteStore::InsertLockLocked(std::string_view session_id, const std::string& token,
                                     int64_t owner_pid, int64_t now) {
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("INSERT OR REPLACE INTO session_locks (session_id,"
                                            " token, owner_pid, owner_host, acquired_at_ms,"
                                            " heartbeat_at_ms) VALUES (?, ?, ?, ?, ?, ?)"));
  return st.Bind(1, session_id)
      .Bind(2, token)
      .Bind(3, owner_pid)
      .Bind(4, host_)
      .Bind(5, now)
      .Bind(6, now)
      .Run();
}

Result<int64_t> SqliteStore::Synchronous() {
  std::lock_guard lk(mu_);
  return db_->Synchronous();
}

// --- durable pauses -----------------------------------------------------------

Status SqliteStore::SetCheckpointStateLocked(const std::string& checkpoint_id,
                                             CheckpointState state, int64_t now) {
  AL_ASSIGN_OR_RETURN(
      Stmt done, db_->Prepare("UPDATE pending_index SET resolved = 1 WHERE checkpoint_id = ?"));
  AL_RETURN_IF_ERROR(done.Bind(1, checkpoint_id).Run());
  AL_ASSIGN_OR_RETURN(Stmt up, db_->Prepare("UPDATE checkpoints SET closed = ?, updated_at_ms = ?"
                                            " WHERE id = ?"));
  return up.Bind(1, static_cast<int64_t>(state)).Bind(2, now).Bind(3, checkpoint_id).Run();
}

Result<std::vector<std::string>> SqliteStore::ListDecided() {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT session_id FROM checkpoints WHERE closed = 2"
                                            " ORDER BY updated_at_ms, rowid"));
  return FirstColumn(st);
}

// --- state ----------------------------------------------------------------------

// --- queued inputs --------------------------------------------------------------

Result<std::vector<std::string>> SqliteStore::ListQueuedSessions() {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT session_id FROM session_inputs"
                                            " GROUP BY session_id ORDER BY MIN(created_at_ms),"
                                            " session_id"));
  return FirstColumn(st);
}

// --- pinned settings ------------------------------------------------------------

}  // namespace agentloop::store

namespace agentloop {

Result<std::unique_ptr<SessionStore>> OpenSqliteStore(const std::filesystem::path& db_path,
                                                      SqliteStoreOptions options) {
  AL_ASSIGN_OR_RETURN(auto store, store::SqliteStore::Open(db_path, std::move(options)));
  return std::unique_ptr<SessionStore>(std::move(store));
}

}  // namespace agentloop
