// SqliteStore: sessions, the event log, locks, checkpoints and state in one
// SQLite file. Every mutation is one transaction; every multi-step decision
// that other processes may race on (lock takeover, resolve, crash repair)
// runs under BEGIN IMMEDIATE so it sees and changes a consistent state.
#include "store/sqlite_store.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <ctime>
#include <map>
#include <system_error>
#include <thread>

#include <sys/stat.h>

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

class SqliteSessionLock final : public SessionLock {
 public:
  SqliteSessionLock(SqliteStore* store, std::string session_id, std::string token)
      : store_(store), session_id_(std::move(session_id)), token_(std::move(token)) {
    if (store_->options().lock_heartbeat) store_->StartHeartbeat(session_id_, token_);
  }
  ~SqliteSessionLock() override {
    if (store_->options().lock_heartbeat) store_->StopHeartbeat(session_id_, token_);
    store_->ReleaseLock(session_id_, token_);
  }
  const std::string& session_id() const override { return session_id_; }
  Status Refresh() override { return store_->RefreshLock(session_id_, token_); }
  // Unfenced: the lock is one machine's, and its holder's death is seen by
  // its pid (see SessionLock).
  Status Append(std::span<const Event> events) override {
    return store_->Append(session_id_, events);
  }
  Status SaveCheckpoint(const Checkpoint& checkpoint, std::span<const Event> events) override {
    if (checkpoint.session_id != session_id_) {
      return InvalidArgument("checkpoint of session " + checkpoint.session_id +
                             " saved through the lock of session " + session_id_);
    }
    return store_->SaveCheckpoint(checkpoint, events);
  }
  Status SetState(std::string_view key, const Json& value) override {
    return store_->SetState(session_id_, key, value);
  }
  Status UpdateSettings(const Json& settings, std::span<const Event> events) override {
    return store_->UpdateSettings(session_id_, settings, events);
  }
  Result<std::optional<Checkpoint>> ClaimDecided() override {
    return store_->ClaimDecided(session_id_);
  }
  Status AppendTakingInput(std::span<const Event> events, std::string_view input_id) override {
    return store_->AppendTakingInput(session_id_, events, input_id);
  }

 private:
  SqliteStore* store_;
  std::string session_id_;
  std::string token_;
};

}  // namespace

std::string FormatUtc(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool ProcessAlive(int64_t pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) == 0) return true;
  return errno != ESRCH;  // EPERM: it exists, owned by someone else
}

SqliteStore::SqliteStore(std::unique_ptr<Db> db, SqliteStoreOptions options)
    : db_(std::move(db)), options_(std::move(options)), host_(HostName()) {}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard lk(beat_mu_);
    stopping_ = true;
  }
  beat_cv_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
}

void SqliteStore::StartHeartbeat(const std::string& session_id, const std::string& token) {
  std::lock_guard lk(beat_mu_);
  if (stopping_) return;
  if (!beat_thread_.joinable()) {
    try {
      beat_thread_ = std::thread([this] { HeartbeatLoop(); });
    } catch (const std::system_error&) {
      // No thread to be had (process limit): the lock is still held, and
      // is refreshed by Refresh() (the engine does before each turn) but
      // not in between.
      return;
    }
  }
  beating_.emplace(session_id, token);
}

void SqliteStore::StopHeartbeat(const std::string& session_id, const std::string& token) {
  std::lock_guard lk(beat_mu_);
  auto [first, last] = beating_.equal_range(session_id);
  for (auto it = first; it != last; ++it) {
    if (it->second == token) {
      beating_.erase(it);
      break;
    }
  }
}

void SqliteStore::HeartbeatLoop() {
  const auto interval = std::max(options_.lock_ttl / 3, std::chrono::milliseconds(10));
  std::unique_lock lk(beat_mu_);
  while (!beat_cv_.wait_for(lk, interval, [this] { return stopping_; })) {
    std::vector<std::pair<std::string, std::string>> held(beating_.begin(), beating_.end());
    lk.unlock();
    // A lock released meanwhile is not refreshed back: the UPDATE only
    // touches a row that still carries this token.
    (void)RefreshLocks(held);
    lk.lock();
  }
}

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

// --- sessions ---------------------------------------------------------------

SessionInfo SqliteStore::NewSessionInfo(const NewSessionParams& params) const {
  SessionInfo s;
  s.id = params.id.empty() ? NewUuid() : params.id;
  s.workspace = NormalizeWorkspace(params.workspace);
  s.provider = params.provider;
  s.model = params.model;
  s.command = std::string(CommandKindName(params.command));
  s.title = MakeTitle(params.first_message);
  s.created_at_ms = s.updated_at_ms = Now();
  s.tenant = params.tenant;
  s.agent = params.agent;
  s.metadata = params.metadata;
  s.parent_id = params.parent_id;
  return s;
}

Status SqliteStore::InsertSessionLocked(const SessionInfo& s, const Json& settings) {
  if (!settings.is_null() && !settings.is_object()) {
    return InvalidArgument("session settings must be a JSON object");
  }
  if (!s.metadata.is_null() && !s.metadata.is_object()) {
    return InvalidArgument("session metadata must be a JSON object");
  }
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

Result<SessionInfo> SqliteStore::CreateSession(const NewSessionParams& params) {
  SessionInfo s = NewSessionInfo(params);
  std::lock_guard lk(mu_);
  AL_RETURN_IF_ERROR(InsertSessionLocked(s, params.settings));
  return s;
}

Result<SqliteStore::LockedSession> SqliteStore::CreateLockedSession(const NewSessionParams& params,
                                                                    int64_t owner_pid) {
  SessionInfo s = NewSessionInfo(params);
  std::string token = NewId("lock");
  Status written = Write(Lane::kStep, [&]() -> Status {
    AL_RETURN_IF_ERROR(InsertSessionLocked(s, params.settings));
    return InsertLockLocked(s.id, token, owner_pid);
  });
  if (!written.ok()) return written;
  std::unique_ptr<SessionLock> lock(new SqliteSessionLock(this, s.id, std::move(token)));
  return LockedSession{std::move(s), std::move(lock)};
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

std::unique_ptr<TenantStore> SqliteStore::ForTenant(std::string tenant) {
  return std::make_unique<ScopedStore<SqliteStore>>(*this, std::move(tenant));
}

Result<SessionInfo> SqliteStore::GetSession(std::string_view session_id) {
  return GetSessionIn(std::nullopt, session_id);
}

Result<SessionInfo> SqliteStore::GetSessionIn(TenantFilter tenant, std::string_view session_id) {
  std::lock_guard lk(mu_);
  return GetSessionLocked(session_id, tenant);
}

Result<std::string> SqliteStore::FindSession(std::string_view id_or_prefix) {
  std::lock_guard lk(mu_);
  if (GetSessionLocked(id_or_prefix).ok()) return std::string(id_or_prefix);
  if (id_or_prefix.size() < 4) {
    return InvalidArgument("session id prefix '" + std::string(id_or_prefix) +
                           "' is too short (at least 4 characters)");
  }
  AL_ASSIGN_OR_RETURN(Stmt st,
                      db_->Prepare("SELECT id FROM sessions WHERE substr(id, 1, ?) = ? LIMIT 2"));
  st.Bind(1, static_cast<int64_t>(id_or_prefix.size())).Bind(2, id_or_prefix);
  std::vector<std::string> ids;
  for (;;) {
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ids.push_back(st.Text(0));
  }
  if (ids.empty()) return SessionNotFound(id_or_prefix);
  if (ids.size() > 1) {
    return InvalidArgument("session id prefix '" + std::string(id_or_prefix) + "' is ambiguous");
  }
  return ids[0];
}

Result<SessionInfo> SqliteStore::NewestInWorkspace(const std::filesystem::path& workspace) {
  SessionListOptions newest;
  newest.workspace = workspace;
  newest.limit = 1;
  AL_ASSIGN_OR_RETURN(auto list, ListSessions(newest));
  if (list.empty()) {
    return NotFound("no session in workspace " + NormalizeWorkspace(workspace));
  }
  return list[0];
}

Status SqliteStore::RelabelSession(std::string_view session_id, std::optional<std::string> title,
                                   std::optional<Json> metadata) {
  return RelabelSessionIn(std::nullopt, session_id, std::move(title), std::move(metadata));
}

Status SqliteStore::RelabelSessionIn(TenantFilter tenant, std::string_view session_id,
                                     std::optional<std::string> title,
                                     std::optional<Json> metadata) {
  if (metadata && !metadata->is_null() && !metadata->is_object()) {
    return InvalidArgument("session metadata must be a JSON object");
  }
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_RETURN_IF_ERROR(GetSessionLocked(session_id, tenant).status());
  if (title) {
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("UPDATE sessions SET title = ? WHERE id = ?"));
    AL_RETURN_IF_ERROR(st.Bind(1, *title).Bind(2, session_id).Run());
  }
  if (metadata) {
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("UPDATE sessions SET metadata = ? WHERE id = ?"));
    std::string text = metadata->is_null() ? std::string() : DumpJson(*metadata);
    AL_RETURN_IF_ERROR(st.Bind(1, text).Bind(2, session_id).Run());
  }
  return txn.Commit();
}

Status SqliteStore::RemoveSession(std::string_view session_id) {
  return RemoveSessionIn(std::nullopt, session_id);
}

Status SqliteStore::RemoveSessionIn(TenantFilter tenant, std::string_view session_id) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_RETURN_IF_ERROR(GetSessionLocked(session_id, tenant).status());
  AL_ASSIGN_OR_RETURN(auto holder, LiveHolderLocked(session_id));
  if (holder) {
    return Busy("session " + std::string(session_id) + " is busy (held by pid " +
                std::to_string(holder->pid) + " since " + FormatUtc(holder->acquired_at_ms) + ")");
  }
  // ON DELETE CASCADE removes events, lock, checkpoints, pending index, state.
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("DELETE FROM sessions WHERE id = ?"));
  AL_RETURN_IF_ERROR(st.Bind(1, session_id).Run());
  return txn.Commit();
}

// --- the event log ------------------------------------------------------------

Status SqliteStore::Append(std::string_view session_id, std::span<const Event> events) {
  const int64_t now = Now();
  return Write(Lane::kStep, [&] { return AppendLocked(session_id, events, now); });
}

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

Result<std::vector<StoredEvent>> SqliteStore::Events(std::string_view session_id,
                                                     uint64_t after_seq) {
  return EventsIn(std::nullopt, session_id, after_seq);
}

Result<std::vector<StoredEvent>> SqliteStore::EventsIn(TenantFilter tenant,
                                                       std::string_view session_id,
                                                       uint64_t after_seq) {
  EventQuery query;
  query.after_seq = after_seq;
  return QueryEventsIn(tenant, session_id, query);
}

Result<std::vector<StoredEvent>> SqliteStore::QueryEvents(std::string_view session_id,
                                                          const EventQuery& query) {
  return QueryEventsIn(std::nullopt, session_id, query);
}

Result<std::vector<StoredEvent>> SqliteStore::QueryEventsIn(TenantFilter tenant,
                                                            std::string_view session_id,
                                                            const EventQuery& query) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/false));
  AL_RETURN_IF_ERROR(GetSessionLocked(session_id, tenant).status());
  return EventsLocked(session_id, query);
}

Result<SessionSnapshot> SqliteStore::Load(std::string_view session_id, const LoadOptions& options) {
  return LoadIn(std::nullopt, session_id, options);
}

Result<SessionSnapshot> SqliteStore::LoadIn(TenantFilter tenant, std::string_view session_id,
                                            const LoadOptions& options) {
  // A writer appending between our read and the repair makes us read again;
  // the session lock normally prevents that, so a few attempts suffice.
  for (int attempt = 0;; ++attempt) {
    bool raced = false;
    auto snap = LoadOnce(tenant, session_id, options, &raced);
    if (!raced || attempt == 3) return snap;
  }
}

Result<SessionSnapshot> SqliteStore::LoadOnce(TenantFilter tenant, std::string_view session_id,
                                              const LoadOptions& options, bool* raced) {
  std::lock_guard lk(mu_);
  SessionSnapshot snap;
  std::vector<StoredEvent> rows;
  std::optional<Checkpoint> last_closed;
  {
    // One read transaction: the session row, events and checkpoint agree.
    AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/false));
    AL_ASSIGN_OR_RETURN(snap.info, GetSessionLocked(session_id, tenant));
    AL_ASSIGN_OR_RETURN(rows, EventsLocked(session_id, EventQuery{}));
    AL_ASSIGN_OR_RETURN(snap.open_checkpoint, CheckpointLocked(session_id, CheckpointState::kOpen));
    AL_ASSIGN_OR_RETURN(snap.decided_checkpoint,
                        CheckpointLocked(session_id, CheckpointState::kDecided));
    if (options.repair) {
      AL_ASSIGN_OR_RETURN(last_closed, CheckpointLocked(session_id, CheckpointState::kClosed));
    }
  }
  auto replayed = Replay(rows);
  if (!replayed.ok()) return replayed.error().WithContext("session " + std::string(session_id));
  ReplayResult replay = std::move(*replayed);
  snap.messages = std::move(replay.messages);
  replay.messages.clear();
  snap.last_seq = std::max(replay.last_seq, snap.info.last_seq);
  snap.last_turn_end = replay.last_turn_end;
  snap.unfinished_turn = replay.unfinished_turn;
  snap.warnings = replay.warnings;
  snap.context_mark = replay.context_mark;
  if (!options.repair) return snap;

  replay.messages = snap.messages;  // CrashRepair looks at the rebuilt history
  // A decided batch keeps its message open for the turn that continues it.
  std::optional<Message> repair = CrashRepair(
      replay, snap.open_checkpoint ? snap.open_checkpoint : snap.decided_checkpoint, last_closed);
  if (!repair) return snap;

  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_ASSIGN_OR_RETURN(SessionInfo now_info, GetSessionLocked(session_id, tenant));
  if (now_info.last_seq != snap.info.last_seq) {
    *raced = true;
    return Unavailable("session " + std::string(session_id) + " changed while loading");
  }
  AL_ASSIGN_OR_RETURN(auto holder, LiveHolderLocked(session_id));
  if (holder && !(holder->pid == getpid() && holder->host == host_)) {
    snap.warnings.push_back(
        {0, "the last tool calls have no results but the session is held by live pid " +
                std::to_string(holder->pid) + "; not repairing (they may be running)"});
    return snap;
  }
  const int64_t now = Now();
  Event e = MakeEvent(MessageData{*repair}, std::string(session_id), replay.last_message_turn_id);
  e.seq = snap.last_seq + 1;
  e.ts = now;
  AL_ASSIGN_OR_RETURN(Stmt ins, db_->Prepare("INSERT INTO events (session_id, seq, type, turn_id,"
                                             " json, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)"));
  AL_RETURN_IF_ERROR(ins.Bind(1, session_id)
                         .Bind(2, static_cast<int64_t>(e.seq))
                         .Bind(3, EventTypeName(e.type))
                         .Bind(4, e.turn_id)
                         .Bind(5, e.Dump(session_id))
                         .Bind(6, now)
                         .Run());
  AL_RETURN_IF_ERROR(BumpIfNotNewestLocked(session_id, now));
  AL_RETURN_IF_ERROR(txn.Commit());
  snap.warnings.push_back({e.seq, "crash recovery: answered " +
                                      std::to_string(repair->content.size()) +
                                      " unanswered tool call(s) with is_error results"});
  snap.messages.push_back(std::move(*repair));
  snap.last_seq = e.seq;
  snap.info.last_seq = e.seq;
  snap.info.updated_at_ms = now;
  snap.recovered = true;
  return snap;
}

// --- the session lock ---------------------------------------------------------

Result<std::optional<SqliteStore::LockHolder>> SqliteStore::LiveHolderLocked(
    std::string_view session_id) {
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT owner_pid, owner_host, acquired_at_ms,"
                                            " heartbeat_at_ms, token FROM session_locks"
                                            " WHERE session_id = ?"));
  st.Bind(1, session_id);
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<LockHolder>();
  LockHolder h{st.Int(0), st.Text(1), st.Int(2), st.Int(3)};
  // A lock this store let go of (its release failed): nobody holds it.
  auto [first, last] = unreleased_.equal_range(std::string(session_id));
  if (std::any_of(first, last, [&](const auto& held) { return held.second == st.Text(4); })) {
    return std::optional<LockHolder>();
  }
  const bool fresh = Now() - h.heartbeat_at_ms < options_.lock_ttl.count();
  // A pid is only meaningful on its own host; elsewhere the TTL decides.
  const bool alive = h.host != host_ || ProcessAlive(h.pid);
  if (fresh && alive) return std::optional<LockHolder>(std::move(h));
  return std::optional<LockHolder>();
}

Result<std::unique_ptr<SessionLock>> SqliteStore::AcquireLock(std::string_view session_id,
                                                              int64_t owner_pid) {
  std::string token = NewId("lock");
  Status written = Write(Lane::kStep, [&]() -> Status {
    AL_RETURN_IF_ERROR(GetSessionLocked(session_id).status());
    AL_ASSIGN_OR_RETURN(auto holder, LiveHolderLocked(session_id));
    if (holder) {
      return Busy("session " + std::string(session_id) + " is busy (held by pid " +
                  std::to_string(holder->pid) + " since " + FormatUtc(holder->acquired_at_ms) +
                  ")");
    }
    // Absent, or left by a dead or silent holder: take it over.
    return InsertLockLocked(session_id, token, owner_pid);
  });
  if (!written.ok()) return written;
  {
    // Committed: the row replaced any this store failed to release (not
    // before the commit: a takeover that fails leaves that row in place).
    std::lock_guard lk(mu_);
    unreleased_.erase(std::string(session_id));
  }
  return std::unique_ptr<SessionLock>(
      new SqliteSessionLock(this, std::string(session_id), std::move(token)));
}

Status SqliteStore::InsertLockLocked(std::string_view session_id, const std::string& token,
                                     int64_t owner_pid) {
  const int64_t now = Now();
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

Status SqliteStore::RefreshLock(const std::string& session_id, const std::string& token) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("UPDATE session_locks SET heartbeat_at_ms = ?"
                                            " WHERE session_id = ? AND token = ?"));
  AL_RETURN_IF_ERROR(st.Bind(1, Now()).Bind(2, session_id).Bind(3, token).Run());
  if (db_->Changes() == 0) {
    return Busy("the lock on session " + session_id + " was lost (taken over after it expired)");
  }
  return Status::Ok();
}

Status SqliteStore::RefreshLocks(const std::vector<std::pair<std::string, std::string>>& held) {
  if (held.empty()) return Status::Ok();
  // One write transaction (and one commit) for every held lock: with many
  // locks, one slow commit per lock could leave the last ones unrefreshed
  // for longer than their TTL.
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("UPDATE session_locks SET heartbeat_at_ms = ?"
                                            " WHERE session_id = ? AND token = ?"));
  const int64_t now = Now();
  for (const auto& [id, token] : held) {
    AL_RETURN_IF_ERROR(st.Bind(1, now).Bind(2, id).Bind(3, token).Run());
    st.Reset();
  }
  return txn.Commit();
}

void SqliteStore::ReleaseLock(const std::string& session_id, const std::string& token) {
  // A failed release (the disk refused the write) leaves a row that other
  // processes see expire (dead pid or TTL); this store remembers it and
  // takes it over at once (LiveHolderLocked), else a server would refuse
  // its own session as busy, queue the inputs sent meanwhile, and nothing
  // would run them.
  Status released = Write(Lane::kStep, [&]() -> Status {
    AL_ASSIGN_OR_RETURN(
        Stmt st, db_->Prepare("DELETE FROM session_locks WHERE session_id = ? AND token = ?"));
    return st.Bind(1, session_id).Bind(2, token).Run();
  });
  if (!released.ok()) {
    std::lock_guard lk(mu_);
    unreleased_.emplace(session_id, token);
  }
}

// --- durable pauses -----------------------------------------------------------

Status SqliteStore::SetCheckpointStateLocked(const std::string& checkpoint_id,
                                             CheckpointState state) {
  AL_ASSIGN_OR_RETURN(
      Stmt done, db_->Prepare("UPDATE pending_index SET resolved = 1 WHERE checkpoint_id = ?"));
  AL_RETURN_IF_ERROR(done.Bind(1, checkpoint_id).Run());
  AL_ASSIGN_OR_RETURN(Stmt up, db_->Prepare("UPDATE checkpoints SET closed = ?, updated_at_ms = ?"
                                            " WHERE id = ?"));
  return up.Bind(1, static_cast<int64_t>(state)).Bind(2, Now()).Bind(3, checkpoint_id).Run();
}

Status SqliteStore::CloseCheckpointLocked(const std::string& checkpoint_id) {
  return SetCheckpointStateLocked(checkpoint_id, CheckpointState::kClosed);
}

Status SqliteStore::SaveCheckpoint(const Checkpoint& checkpoint, std::span<const Event> events) {
  if (checkpoint.session_id.empty()) return InvalidArgument("checkpoint without a session id");
  if (checkpoint.outstanding.empty()) {
    return InvalidArgument("checkpoint of session " + checkpoint.session_id +
                           " has no outstanding item");
  }
  const int64_t now = Now();
  return Write(Lane::kStep, [&]() -> Status {
    AL_RETURN_IF_ERROR(GetSessionLocked(checkpoint.session_id).status());
    {
      // Open or decided (a batch nobody continued): superseded by the new one.
      AL_ASSIGN_OR_RETURN(Stmt open, db_->Prepare("SELECT id FROM checkpoints"
                                                  " WHERE session_id = ? AND closed IN (0, 2)"));
      open.Bind(1, checkpoint.session_id);
      std::vector<std::string> superseded;
      for (;;) {
        AL_ASSIGN_OR_RETURN(bool row, open.Step());
        if (!row) break;
        superseded.push_back(open.Text(0));
      }
      for (const auto& id : superseded) AL_RETURN_IF_ERROR(CloseCheckpointLocked(id));
    }
    const std::string id = NewId("ckpt");
    AL_ASSIGN_OR_RETURN(Stmt ins, db_->Prepare("INSERT INTO checkpoints (id, session_id, turn_id,"
                                               " json, closed, created_at_ms, updated_at_ms)"
                                               " VALUES (?, ?, ?, ?, 0, ?, ?)"));
    AL_RETURN_IF_ERROR(ins.Bind(1, id)
                           .Bind(2, checkpoint.session_id)
                           .Bind(3, checkpoint.turn_id)
                           .Bind(4, DumpJson(ToJson(checkpoint)))
                           .Bind(5, now)
                           .Bind(6, now)
                           .Run());
    for (const PendingItem& item : checkpoint.outstanding) {
      if (item.id.empty()) return InvalidArgument("pending item without an id");
      AL_ASSIGN_OR_RETURN(Stmt idx, db_->Prepare("INSERT INTO pending_index (pending_id,"
                                                 " checkpoint_id, session_id, created_at_ms)"
                                                 " VALUES (?, ?, ?, ?)"));
      Status s = idx.Bind(1, item.id).Bind(2, id).Bind(3, checkpoint.session_id).Bind(4, now).Run();
      if (s.code() == Code::kAlreadyExists) {
        return AlreadyExists("pending id " + item.id + " already exists");
      }
      AL_RETURN_IF_ERROR(s);
    }
    if (!events.empty()) AL_RETURN_IF_ERROR(AppendLocked(checkpoint.session_id, events, now));
    return Status::Ok();
  });
}

Result<std::optional<Checkpoint>> SqliteStore::CheckpointLocked(std::string_view session_id,
                                                                CheckpointState state) {
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id, json FROM checkpoints"
                                            " WHERE session_id = ? AND closed = ?"
                                            " ORDER BY updated_at_ms DESC, rowid DESC LIMIT 1"));
  st.Bind(1, session_id).Bind(2, static_cast<int64_t>(state));
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Checkpoint>();
  AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(st.Text(1), st.Text(0)));
  return std::optional<Checkpoint>(std::move(cp));
}

Result<std::optional<Checkpoint>> SqliteStore::OpenCheckpoint(std::string_view session_id) {
  std::lock_guard lk(mu_);
  return CheckpointLocked(session_id, CheckpointState::kOpen);
}

Result<std::vector<PendingRecord>> SqliteStore::ListPending(
    std::optional<std::string_view> session_id) {
  std::string sql =
      "SELECT p.pending_id, p.session_id, p.checkpoint_id, p.created_at_ms, c.turn_id, c.json"
      " FROM pending_index p JOIN checkpoints c ON c.id = p.checkpoint_id"
      " WHERE c.closed = 0 AND p.resolved = 0";
  if (session_id) sql += " AND p.session_id = ?";
  sql += " ORDER BY p.created_at_ms, p.rowid";
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/false));
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare(sql));
  if (session_id) st.Bind(1, *session_id);
  std::map<std::string, Checkpoint> parsed;
  std::vector<PendingRecord> out;
  for (;;) {
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    PendingRecord r;
    std::string pending_id = st.Text(0);
    r.session_id = st.Text(1);
    r.checkpoint_id = st.Text(2);
    r.created_at_ms = st.Int(3);
    r.turn_id = st.Text(4);
    auto it = parsed.find(r.checkpoint_id);
    if (it == parsed.end()) {
      AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(st.Text(5), r.checkpoint_id));
      it = parsed.emplace(r.checkpoint_id, std::move(cp)).first;
    }
    AL_ASSIGN_OR_RETURN(r.item, IndexedItem(it->second, pending_id, r.checkpoint_id));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::optional<PendingRecord>> SqliteStore::GetPending(std::string_view pending_id) {
  AL_ASSIGN_OR_RETURN(std::optional<PendingLookup> found, LookupPending(pending_id));
  if (!found || found->state != PendingLookup::State::kOutstanding) {
    return std::optional<PendingRecord>();
  }
  return std::optional<PendingRecord>(std::move(found->record));
}

Result<std::optional<PendingLookup>> SqliteStore::LookupPending(std::string_view pending_id) {
  return LookupPendingIn(std::nullopt, pending_id);
}

Result<std::optional<PendingLookup>> SqliteStore::LookupPendingIn(TenantFilter tenant,
                                                                  std::string_view pending_id) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/false));
  AL_ASSIGN_OR_RETURN(Stmt st,
                      db_->Prepare(std::string("SELECT p.session_id, p.checkpoint_id,"
                                               " p.created_at_ms, c.turn_id, c.json,"
                                               " p.resolved, c.closed"
                                               " FROM pending_index p"
                                               " JOIN checkpoints c ON c.id = p.checkpoint_id"
                                               " WHERE p.pending_id = ?1") +
                                   (tenant ? kOfTenant : "")));
  st.Bind(1, pending_id);
  if (tenant) st.Bind(2, *tenant);
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<PendingLookup>();
  PendingLookup out;
  PendingRecord& r = out.record;
  r.session_id = st.Text(0);
  r.checkpoint_id = st.Text(1);
  r.created_at_ms = st.Int(2);
  r.turn_id = st.Text(3);
  AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(st.Text(4), r.checkpoint_id));
  const bool outstanding = st.Int(5) == 0 && st.Int(6) == 0;
  for (const BatchDecision& d : cp.decisions) {
    if (d.item.id != pending_id) continue;
    out.state = PendingLookup::State::kDecided;
    r.item = d.item;
    out.decision = d.decision;
    return std::optional<PendingLookup>(std::move(out));
  }
  AL_ASSIGN_OR_RETURN(r.item, IndexedItem(cp, pending_id, r.checkpoint_id));
  out.state = outstanding ? PendingLookup::State::kOutstanding : PendingLookup::State::kCancelled;
  return std::optional<PendingLookup>(std::move(out));
}

Result<std::vector<std::string>> SqliteStore::ListDecided() {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT session_id FROM checkpoints WHERE closed = 2"
                                            " ORDER BY updated_at_ms, rowid"));
  return FirstColumn(st);
}

Result<std::optional<Checkpoint>> SqliteStore::ClaimDecided(std::string_view session_id) {
  std::optional<Checkpoint> claimed;
  // The decision's lane: the claim is how a decided batch's turn resumes.
  Status written = Write(Lane::kDecision, [&]() -> Status {
    claimed.reset();
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id, json FROM checkpoints"
                                              " WHERE session_id = ? AND closed = 2"
                                              " ORDER BY updated_at_ms DESC, rowid DESC LIMIT 1"));
    st.Bind(1, session_id);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return Status::Ok();
    const std::string id = st.Text(0);
    AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(st.Text(1), id));
    st.Reset();
    AL_RETURN_IF_ERROR(CloseCheckpointLocked(id));
    claimed = std::move(cp);
    return Status::Ok();
  });
  if (!written.ok()) return written;
  return claimed;
}

Result<ResolveOutcome> SqliteStore::Resolve(std::string_view pending_id, const ResolveFn& fn,
                                            std::span<const Event> events) {
  return ResolveIn(std::nullopt, pending_id, fn, events);
}

Result<ResolveOutcome> SqliteStore::ResolveIn(TenantFilter tenant, std::string_view pending_id,
                                              const ResolveFn& fn, std::span<const Event> events) {
  auto resolve = [&]() -> Result<ResolveOutcome> {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_->Prepare(std::string("SELECT c.id, c.json FROM pending_index p"
                                                 " JOIN checkpoints c ON c.id = p.checkpoint_id"
                                                 " WHERE p.pending_id = ?1 AND c.closed = 0"
                                                 " AND p.resolved = 0") +
                                     (tenant ? kOfTenant : "")));
    st.Bind(1, pending_id);
    if (tenant) st.Bind(2, *tenant);
    AL_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) {
      ResolveOutcome none;
      none.already_resolved = true;
      return none;  // nothing was written
    }
    std::string checkpoint_id = st.Text(0);
    AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(st.Text(1), checkpoint_id));
    st.Reset();
    // On any error the transaction rolls back: the item stays pending.
    AL_ASSIGN_OR_RETURN(ResolveOutcome out,
                        ApplyResolution(std::move(checkpoint_id), std::move(cp), pending_id, fn));
    const auto& outstanding = out.checkpoint.outstanding;

    AL_ASSIGN_OR_RETURN(Stmt up, db_->Prepare("UPDATE checkpoints SET json = ?, updated_at_ms = ?"
                                              " WHERE id = ?"));
    AL_RETURN_IF_ERROR(up.Bind(1, DumpJson(ToJson(out.checkpoint)))
                           .Bind(2, Now())
                           .Bind(3, out.checkpoint_id)
                           .Run());
    if (!events.empty()) {
      AL_ASSIGN_OR_RETURN(SessionInfo info, GetSessionLocked(out.checkpoint.session_id));
      const int64_t now = Now();
      AL_RETURN_IF_ERROR(
          AppendLocked(info.id, NumberAfter(events, info.id, info.last_seq, now), now));
    }
    if (out.closed) {
      AL_RETURN_IF_ERROR(SetCheckpointStateLocked(out.checkpoint_id, CheckpointState::kDecided));
    } else {
      // Mark the index rows of every item no longer outstanding (this one,
      // and any the callback removed) resolved.
      AL_ASSIGN_OR_RETURN(Stmt ids, db_->Prepare("SELECT pending_id FROM pending_index"
                                                 " WHERE checkpoint_id = ? AND resolved = 0"));
      ids.Bind(1, out.checkpoint_id);
      std::vector<std::string> gone;
      for (;;) {
        AL_ASSIGN_OR_RETURN(bool r, ids.Step());
        if (!r) break;
        std::string id = ids.Text(0);
        if (std::none_of(outstanding.begin(), outstanding.end(),
                         [&](const PendingItem& p) { return p.id == id; })) {
          gone.push_back(std::move(id));
        }
      }
      for (const auto& id : gone) {
        AL_ASSIGN_OR_RETURN(Stmt done, db_->Prepare("UPDATE pending_index SET resolved = 1"
                                                    " WHERE pending_id = ?"));
        AL_RETURN_IF_ERROR(done.Bind(1, id).Run());
      }
    }
    return out;
  };
  ResolveOutcome result;
  // Its own lane: a decision never waits behind the queued steps of turns.
  Status written = Write(Lane::kDecision, [&]() -> Status {
    AL_ASSIGN_OR_RETURN(result, resolve());
    return Status::Ok();
  });
  if (!written.ok()) return written;
  return result;
}

// --- state ----------------------------------------------------------------------

Status SqliteStore::SetState(std::string_view session_id, std::string_view key, const Json& value) {
  return Write(Lane::kStep, [&]() -> Status {
    AL_RETURN_IF_ERROR(GetSessionLocked(session_id).status());
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("INSERT INTO session_state (session_id, key, json,"
                                              " updated_at_ms) VALUES (?, ?, ?, ?)"
                                              " ON CONFLICT (session_id, key) DO UPDATE SET"
                                              " json = excluded.json,"
                                              " updated_at_ms = excluded.updated_at_ms"));
    AL_RETURN_IF_ERROR(
        st.Bind(1, session_id).Bind(2, key).Bind(3, DumpJson(value)).Bind(4, Now()).Run());
    return Status::Ok();
  });
}

Result<std::optional<Json>> SqliteStore::GetState(std::string_view session_id,
                                                  std::string_view key) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT json FROM session_state"
                                            " WHERE session_id = ? AND key = ?"));
  st.Bind(1, session_id).Bind(2, key);
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Json>();
  auto j = ParseJson(st.Text(0));
  if (!j.ok()) {
    return DataLoss("state '" + std::string(key) + "' of session " + std::string(session_id) +
                    " is corrupt: " + j.error().message());
  }
  return std::optional<Json>(std::move(*j));
}

// --- idempotency keys --------------------------------------------------------

Result<IdempotencyClaim> SqliteStore::ClaimIdempotencyKey(std::string_view tenant,
                                                          std::string_view key,
                                                          std::string_view fingerprint,
                                                          std::chrono::milliseconds ttl,
                                                          std::chrono::milliseconds in_flight_ttl) {
  std::lock_guard lk(mu_);
  const int64_t now = Now();
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  {
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("DELETE FROM idempotency_keys WHERE created_at_ms < ?"
                                              " OR (response IS NULL AND created_at_ms < ?)"));
    AL_RETURN_IF_ERROR(st.Bind(1, now - ttl.count()).Bind(2, now - in_flight_ttl.count()).Run());
  }
  IdempotencyClaim claim;
  bool found = false;
  {
    AL_ASSIGN_OR_RETURN(Stmt find, db_->Prepare("SELECT fingerprint, response IS NULL, response"
                                                " FROM idempotency_keys"
                                                " WHERE tenant = ? AND key = ?"));
    find.Bind(1, tenant).Bind(2, key);
    AL_ASSIGN_OR_RETURN(found, find.Step());
    if (found) {
      if (find.Text(0) != fingerprint) {
        claim.kind = IdempotencyClaim::Kind::kReused;
      } else if (find.Int(1) != 0) {
        claim.kind = IdempotencyClaim::Kind::kInFlight;
      } else {
        claim.kind = IdempotencyClaim::Kind::kDone;
        claim.response = find.Text(2);
      }
    }
  }
  if (!found) {
    AL_ASSIGN_OR_RETURN(Stmt ins,
                        db_->Prepare("INSERT INTO idempotency_keys (tenant, key, fingerprint,"
                                     " created_at_ms) VALUES (?, ?, ?, ?)"));
    AL_RETURN_IF_ERROR(ins.Bind(1, tenant).Bind(2, key).Bind(3, fingerprint).Bind(4, now).Run());
  }
  AL_RETURN_IF_ERROR(txn.Commit());
  return claim;
}

Status SqliteStore::FinishIdempotencyKey(std::string_view tenant, std::string_view key,
                                         std::string_view response) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("UPDATE idempotency_keys SET response = ?"
                                            " WHERE tenant = ? AND key = ?"));
  return st.Bind(1, response).Bind(2, tenant).Bind(3, key).Run();
}

Status SqliteStore::ReleaseIdempotencyKey(std::string_view tenant, std::string_view key) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st,
                      db_->Prepare("DELETE FROM idempotency_keys WHERE tenant = ? AND key = ?"));
  return st.Bind(1, tenant).Bind(2, key).Run();
}

// --- the notification outbox ------------------------------------------------

Result<bool> SqliteStore::AddNotification(const OutboxNotification& n,
                                          std::chrono::milliseconds lease) {
  if (n.id.empty()) return InvalidArgument("a notification needs an id");
  std::lock_guard lk(mu_);
  const int64_t now = Now();
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_RETURN_IF_ERROR(GetSessionLocked(n.session_id).status());
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("INSERT INTO notification_outbox (id, session_id,"
                                            " agent, event, body, created_at_ms, due_at_ms)"
                                            " VALUES (?, ?, ?, ?, ?, ?, ?)"
                                            " ON CONFLICT (id) DO NOTHING"));
  AL_RETURN_IF_ERROR(st.Bind(1, n.id)
                         .Bind(2, n.session_id)
                         .Bind(3, n.agent)
                         .Bind(4, n.event)
                         .Bind(5, n.body)
                         .Bind(6, now)
                         .Bind(7, now + lease.count())
                         .Run());
  const bool added = db_->Changes() == 1;
  AL_RETURN_IF_ERROR(txn.Commit());
  return added;
}

Result<std::vector<OutboxNotification>> SqliteStore::ClaimNotifications(
    int limit, std::chrono::milliseconds lease, std::chrono::milliseconds max_age) {
  std::lock_guard lk(mu_);
  const int64_t now = Now();
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_->Prepare("DELETE FROM notification_outbox WHERE created_at_ms < ?"));
    AL_RETURN_IF_ERROR(st.Bind(1, now - max_age.count()).Run());
  }
  std::vector<OutboxNotification> out;
  {
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id, session_id, agent, event, body,"
                                              " created_at_ms FROM notification_outbox"
                                              " WHERE due_at_ms IS NOT NULL AND due_at_ms <= ?"
                                              " ORDER BY created_at_ms, id LIMIT ?"));
    st.Bind(1, now).Bind(2, static_cast<int64_t>(limit));
    for (;;) {
      AL_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out.push_back(OutboxNotification{st.Text(0), st.Text(1), st.Text(2), st.Text(3), st.Text(4),
                                       st.Int(5)});
    }
  }
  for (const OutboxNotification& n : out) {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_->Prepare("UPDATE notification_outbox SET due_at_ms = ? WHERE id = ?"));
    AL_RETURN_IF_ERROR(st.Bind(1, now + lease.count()).Bind(2, n.id).Run());
  }
  AL_RETURN_IF_ERROR(txn.Commit());
  return out;
}

Status SqliteStore::FinishNotification(std::string_view id) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st,
                      db_->Prepare("UPDATE notification_outbox SET due_at_ms = NULL WHERE id = ?"));
  return st.Bind(1, id).Run();
}

// --- revoked credentials ------------------------------------------------------

Status SqliteStore::RevokeCredential(std::string_view tenant, std::string_view id,
                                     int64_t expires_at_ms) {
  if (id.empty()) return InvalidArgument("a revoked credential needs an id");
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("INSERT INTO revoked_credentials (id, tenant,"
                                            " expires_at_ms) VALUES (?, ?, ?)"
                                            " ON CONFLICT (id) DO NOTHING"));
  return st.Bind(1, id).Bind(2, tenant).Bind(3, expires_at_ms).Run();
}

Result<std::vector<std::string>> SqliteStore::ListRevokedCredentials() {
  std::lock_guard lk(mu_);
  const int64_t now = Now();
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  {
    AL_ASSIGN_OR_RETURN(Stmt st,
                        db_->Prepare("DELETE FROM revoked_credentials WHERE expires_at_ms <= ?"));
    AL_RETURN_IF_ERROR(st.Bind(1, now).Run());
  }
  std::vector<std::string> out;
  {
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id FROM revoked_credentials ORDER BY id"));
    for (;;) {
      AL_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out.push_back(st.Text(0));
    }
  }
  AL_RETURN_IF_ERROR(txn.Commit());
  return out;
}

// --- queued inputs --------------------------------------------------------------

Result<int64_t> SqliteStore::EnqueueInput(std::string_view session_id, std::string_view input,
                                          bool continue_turn) {
  if (input.empty() && !continue_turn) return InvalidArgument("a queued input must not be empty");
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/true));
  AL_ASSIGN_OR_RETURN(SessionInfo info, GetSessionLocked(session_id));
  {
    AL_ASSIGN_OR_RETURN(
        Stmt st, db_->Prepare("INSERT INTO session_inputs (id, tenant, session_id, position, input,"
                              " continue_turn, created_at_ms) SELECT ?, ?, ?,"
                              " COALESCE(MAX(position), 0) + 1, ?, ?, ? FROM session_inputs"
                              " WHERE session_id = ?"));
    AL_RETURN_IF_ERROR(st.Bind(1, NewId("input"))
                           .Bind(2, info.tenant)
                           .Bind(3, session_id)
                           .Bind(4, input)
                           .Bind(5, int64_t{continue_turn ? 1 : 0})
                           .Bind(6, Now())
                           .Bind(7, session_id)
                           .Run());
  }
  AL_ASSIGN_OR_RETURN(Stmt count,
                      db_->Prepare("SELECT COUNT(*) FROM session_inputs WHERE session_id = ?"));
  count.Bind(1, session_id);
  AL_ASSIGN_OR_RETURN(bool row, count.Step());
  const int64_t place = row ? count.Int(0) : 1;
  count.Reset();
  AL_RETURN_IF_ERROR(txn.Commit());
  return place;
}

Result<std::vector<QueuedInput>> SqliteStore::ListQueuedInputsLocked(std::string_view session_id,
                                                                     int64_t limit) {
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id, input, continue_turn, created_at_ms"
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

Result<std::vector<QueuedInput>> SqliteStore::ListQueuedInputs(std::string_view session_id) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/false));
  AL_RETURN_IF_ERROR(GetSessionLocked(session_id).status());
  return ListQueuedInputsLocked(session_id, -1);
}

Result<std::optional<QueuedInput>> SqliteStore::TakeQueuedInput(std::string_view session_id,
                                                                int64_t owner_pid) {
  std::lock_guard lk(mu_);
  return NextQueuedInputLocked(session_id, owner_pid, /*take=*/true);
}

Result<std::optional<QueuedInput>> SqliteStore::NextQueuedInput(std::string_view session_id,
                                                                int64_t owner_pid) {
  std::lock_guard lk(mu_);
  return NextQueuedInputLocked(session_id, owner_pid, /*take=*/false);
}

Status SqliteStore::AppendTakingInput(std::string_view session_id, std::span<const Event> events,
                                      std::string_view input_id) {
  const int64_t now = Now();
  return Write(Lane::kStep, [&]() -> Status {
    AL_ASSIGN_OR_RETURN(Stmt del,
                        db_->Prepare("DELETE FROM session_inputs WHERE id = ? AND session_id = ?"));
    AL_RETURN_IF_ERROR(del.Bind(1, input_id).Bind(2, session_id).Run());
    if (db_->Changes() == 0) {
      return NotFound("queued input " + std::string(input_id) + " of session " +
                      std::string(session_id) + " is no longer queued");
    }
    if (!events.empty()) AL_RETURN_IF_ERROR(AppendLocked(session_id, events, now));
    return Status::Ok();
  });
}

Result<std::optional<QueuedInput>> SqliteStore::NextQueuedInputLocked(std::string_view session_id,
                                                                      int64_t owner_pid,
                                                                      bool take) {
  AL_ASSIGN_OR_RETURN(Txn txn, Txn::Begin(*db_, /*immediate=*/take));
  AL_RETURN_IF_ERROR(GetSessionLocked(session_id).status());
  AL_ASSIGN_OR_RETURN(auto holder, LiveHolderLocked(session_id));
  if (!holder || holder->pid != owner_pid || holder->host != host_) {
    return LeaseLost("session " + std::string(session_id) + ": pid " + std::to_string(owner_pid) +
                     " does not hold its lock and may not take its queued input");
  }
  {
    AL_ASSIGN_OR_RETURN(Stmt paused, db_->Prepare("SELECT 1 FROM checkpoints WHERE session_id = ?"
                                                  " AND closed IN (0, 2) LIMIT 1"));
    paused.Bind(1, session_id);
    AL_ASSIGN_OR_RETURN(bool row, paused.Step());
    if (row) return std::optional<QueuedInput>();
  }
  AL_ASSIGN_OR_RETURN(std::vector<QueuedInput> next, ListQueuedInputsLocked(session_id, 1));
  if (next.empty()) return std::optional<QueuedInput>();
  if (!take) return std::optional<QueuedInput>(std::move(next[0]));
  AL_ASSIGN_OR_RETURN(Stmt del, db_->Prepare("DELETE FROM session_inputs WHERE id = ?"));
  AL_RETURN_IF_ERROR(del.Bind(1, next[0].id).Run());
  AL_RETURN_IF_ERROR(txn.Commit());
  return std::optional<QueuedInput>(std::move(next[0]));
}

Result<std::vector<std::string>> SqliteStore::ListQueuedSessions() {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT session_id FROM session_inputs"
                                            " GROUP BY session_id ORDER BY MIN(created_at_ms),"
                                            " session_id"));
  return FirstColumn(st);
}

// --- pinned settings ------------------------------------------------------------

Result<std::optional<Json>> SqliteStore::GetSettings(std::string_view session_id) {
  return GetSettingsIn(std::nullopt, session_id);
}

Result<std::optional<Json>> SqliteStore::GetSettingsIn(TenantFilter tenant,
                                                       std::string_view session_id) {
  std::lock_guard lk(mu_);
  AL_ASSIGN_OR_RETURN(Stmt st,
                      db_->Prepare(std::string("SELECT settings FROM sessions WHERE id = ?1") +
                                   (tenant ? " AND tenant = ?2" : "")));
  st.Bind(1, session_id);
  if (tenant) st.Bind(2, *tenant);
  AL_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return SessionNotFound(session_id);
  std::string text = st.Text(0);
  if (text.empty()) return std::optional<Json>();
  auto j = ParseJson(text);
  if (!j.ok() || !j->is_object()) {
    return DataLoss("the pinned settings of session " + std::string(session_id) +
                    " are corrupt: " + (j.ok() ? "not a JSON object" : j.error().message()));
  }
  return std::optional<Json>(std::move(*j));
}

Status SqliteStore::UpdateSettings(std::string_view session_id, const Json& settings,
                                   std::span<const Event> events) {
  if (!settings.is_object()) return InvalidArgument("session settings must be a JSON object");
  const int64_t now = Now();
  return Write(Lane::kStep, [&]() -> Status {
    AL_RETURN_IF_ERROR(GetSessionLocked(session_id).status());
    AL_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("UPDATE sessions SET settings = ? WHERE id = ?"));
    AL_RETURN_IF_ERROR(st.Bind(1, DumpJson(settings)).Bind(2, session_id).Run());
    AL_RETURN_IF_ERROR(AppendLocked(session_id, events, now));
    return Status::Ok();
  });
}

}  // namespace agentloop::store

namespace agentloop {

Result<std::unique_ptr<SessionStore>> OpenSqliteStore(const std::filesystem::path& db_path,
                                                      SqliteStoreOptions options) {
  AL_ASSIGN_OR_RETURN(auto store, store::SqliteStore::Open(db_path, std::move(options)));
  return std::unique_ptr<SessionStore>(std::move(store));
}

}  // namespace agentloop
