// The SQLite SessionStore (the embedded default). Schema and invariants:
// docs/storage.md.
//
// One connection per store, guarded by a mutex; cross-process exclusion is
// done with BEGIN IMMEDIATE transactions (the database write lock) and the
// session_locks table.
//
// Group commit: the writes of running turns and decisions (Append,
// SaveCheckpoint, SetState, UpdateSettings, AppendTakingInput, Resolve,
// ClaimDecided, AcquireLock, the release of a lock) are queued, and one
// writer at a time (the first caller that finds no writer active; no thread
// of its own) drains what is ready, up to options.group_commit_max, into ONE
// BEGIN IMMEDIATE ... COMMIT, each write in a savepoint of its own, and
// answers every caller of the batch once the COMMIT (and with kFull its
// fsync) has returned: a caller is told its write is committed only when it
// is durable, as before, but many sessions share one fsync. Decisions have a
// lane of their own, drained first, so they never wait behind queued turn
// steps. A write that fails rolls back to its savepoint and fails alone; when
// the batch as a whole fails (the COMMIT, or an error that ended the whole
// transaction), every write that had not failed by itself runs again in a
// transaction of its own, so each caller gets its own write's answer. Locks held through
// SqliteSessionLock refresh their heartbeat when options.lock_heartbeat is set: ONE background
// thread per store refreshes every lock the store holds (started with the first lock), so a server
// holding many sessions does not hold a thread per session.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agentloop/store.h"

#include "store/sqlite_db.h"
#include "store/store_util.h"

namespace agentloop::store {

class SqliteStore final : public SessionStore {
 public:
  // Opens the database and applies the builtin migrations.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::filesystem::path& path,
                                                   SqliteStoreOptions options);
  ~SqliteStore() override;

  Result<SessionInfo> CreateSession(const NewSessionParams& params) override;
  Result<std::vector<SessionInfo>> ListSessions(const SessionListOptions& options) override;
  Result<SessionInfo> GetSession(std::string_view session_id) override;
  Result<std::string> FindSession(std::string_view id_or_prefix) override;
  Result<SessionInfo> NewestInWorkspace(const std::filesystem::path& workspace) override;
  Status RemoveSession(std::string_view session_id) override;
  Status RelabelSession(std::string_view session_id, std::optional<std::string> title,
                        std::optional<Json> metadata) override;

  Status Append(std::string_view session_id, std::span<const Event> events) override;
  Result<std::vector<StoredEvent>> Events(std::string_view session_id, uint64_t after_seq) override;
  Result<std::vector<StoredEvent>> QueryEvents(std::string_view session_id,
                                               const EventQuery& query) override;
  Result<SessionSnapshot> Load(std::string_view session_id, const LoadOptions& options) override;

  Result<std::unique_ptr<SessionLock>> AcquireLock(std::string_view session_id,
                                                   int64_t owner_pid) override;
  Result<LockedSession> CreateLockedSession(const NewSessionParams& params,
                                            int64_t owner_pid) override;

  Status SaveCheckpoint(const Checkpoint& checkpoint, std::span<const Event> events = {}) override;
  Result<std::optional<Checkpoint>> OpenCheckpoint(std::string_view session_id) override;
  Result<std::vector<PendingRecord>> ListPending(
      std::optional<std::string_view> session_id) override;
  Result<std::optional<PendingRecord>> GetPending(std::string_view pending_id) override;
  Result<std::optional<PendingLookup>> LookupPending(std::string_view pending_id) override;
  Result<std::vector<std::string>> ListDecided() override;
  Result<ResolveOutcome> Resolve(std::string_view pending_id, const ResolveFn& fn,
                                 std::span<const Event> events = {}) override;
  Result<std::optional<Checkpoint>> ClaimDecided(std::string_view session_id) override;

  Status SetState(std::string_view session_id, std::string_view key, const Json& value) override;
  Result<std::optional<Json>> GetSettings(std::string_view session_id) override;
  Status UpdateSettings(std::string_view session_id, const Json& settings,
                        std::span<const Event> events) override;
  Result<std::optional<Json>> GetState(std::string_view session_id, std::string_view key) override;
  Result<IdempotencyClaim> ClaimIdempotencyKey(std::string_view tenant, std::string_view key,
                                               std::string_view fingerprint,
                                               std::chrono::milliseconds ttl,
                                               std::chrono::milliseconds in_flight_ttl) override;
  Status FinishIdempotencyKey(std::string_view tenant, std::string_view key,
                              std::string_view response) override;
  Status ReleaseIdempotencyKey(std::string_view tenant, std::string_view key) override;
  Result<bool> AddNotification(const OutboxNotification& n,
                               std::chrono::milliseconds lease) override;
  Result<std::vector<OutboxNotification>> ClaimNotifications(
      int limit, std::chrono::milliseconds lease, std::chrono::milliseconds max_age) override;
  Status FinishNotification(std::string_view id) override;
  Status RevokeCredential(std::string_view tenant, std::string_view id,
                          int64_t expires_at_ms) override;
  Result<std::vector<std::string>> ListRevokedCredentials() override;

  Result<int64_t> EnqueueInput(std::string_view session_id, std::string_view input,
                               bool continue_turn) override;
  Result<std::vector<QueuedInput>> ListQueuedInputs(std::string_view session_id) override;
  Result<std::optional<QueuedInput>> TakeQueuedInput(std::string_view session_id,
                                                     int64_t owner_pid) override;
  Result<std::optional<QueuedInput>> NextQueuedInput(std::string_view session_id,
                                                     int64_t owner_pid) override;
  Result<std::vector<std::string>> ListQueuedSessions() override;
  // SessionLock::AppendTakingInput (unfenced, as Append).
  Status AppendTakingInput(std::string_view session_id, std::span<const Event> events,
                           std::string_view input_id);

  std::unique_ptr<TenantStore> ForTenant(std::string tenant) override;
  // The calls of the same name, matching only rows of `tenant` (nullopt:
  // any): the SessionStore calls pass nullopt, ForTenant's view its tenant.
  Result<SessionInfo> GetSessionIn(TenantFilter tenant, std::string_view session_id);
  Status RemoveSessionIn(TenantFilter tenant, std::string_view session_id);
  Status RelabelSessionIn(TenantFilter tenant, std::string_view session_id,
                          std::optional<std::string> title, std::optional<Json> metadata);
  Result<std::vector<StoredEvent>> EventsIn(TenantFilter tenant, std::string_view session_id,
                                            uint64_t after_seq);
  Result<std::vector<StoredEvent>> QueryEventsIn(TenantFilter tenant, std::string_view session_id,
                                                 const EventQuery& query);
  Result<SessionSnapshot> LoadIn(TenantFilter tenant, std::string_view session_id,
                                 const LoadOptions& options);
  Result<std::optional<Json>> GetSettingsIn(TenantFilter tenant, std::string_view session_id);
  Result<std::optional<PendingLookup>> LookupPendingIn(TenantFilter tenant,
                                                       std::string_view pending_id);
  Result<ResolveOutcome> ResolveIn(TenantFilter tenant, std::string_view pending_id,
                                   const ResolveFn& fn, std::span<const Event> events);

  // Used by SqliteSessionLock.
  Status RefreshLock(const std::string& session_id, const std::string& token);
  void ReleaseLock(const std::string& session_id, const std::string& token);
  // Adds/removes a held lock to/from the ones the heartbeat thread refreshes.
  void StartHeartbeat(const std::string& session_id, const std::string& token);
  void StopHeartbeat(const std::string& session_id, const std::string& token);
  const SqliteStoreOptions& options() const { return options_; }
  // PRAGMA synchronous in effect on the store's connection (1 NORMAL, 2 FULL).
  Result<int64_t> Synchronous();

  // What group commit has done so far (tests, benchmarks).
  struct GroupCommitStats {
    uint64_t batches = 0;  // write transactions committed or failed by the writer
    uint64_t writes = 0;   // writes answered through them
    size_t largest = 0;    // most writes in one batch
    uint64_t reruns = 0;   // writes run again alone after their batch failed
  };
  GroupCommitStats group_commit_stats();
  // Test seams: `hook` runs in the writer before each batch, outside every
  // lock of the store, with the batch's number of decisions and of other
  // writes (a test holds a batch there while others queue);
  // WaitForQueuedWrites waits until at least `n` writes wait in the queue,
  // or `timeout` passed (then false).
  void SetBeforeBatchForTest(std::function<void(size_t, size_t)> hook);
  bool WaitForQueuedWrites(size_t n, std::chrono::milliseconds timeout);

 private:
  SqliteStore(std::unique_ptr<Db> db, SqliteStoreOptions options);

  struct LockHolder {
    int64_t pid = 0;
    std::string host;
    int64_t acquired_at_ms = 0;
    int64_t heartbeat_at_ms = 0;
  };

  int64_t Now() const;

  // Group commit (see the file comment).
  enum class Lane { kDecision, kStep };
  struct QueuedWrite {
    const std::function<Status()>* work;
    Status result;
    bool done = false;
  };
  // Runs `work` (which REQUIRES mu_ held and a write transaction open, and
  // makes no transaction of its own) in a batch of the group commit; its
  // answer once the batch's commit is durable. REQUIRES: mu_ not held.
  Status Write(Lane lane, const std::function<Status()>& work);
  // The writer's part: commits `batch` and sets each write's result.
  // REQUIRES: mu_ held.
  void CommitBatchLocked(std::span<QueuedWrite* const> batch);
  // One write in a transaction of its own. REQUIRES: mu_ held.
  Status CommitAloneLocked(const std::function<Status()>& work);

  // The *Locked helpers REQUIRE mu_ held.
  Result<SessionInfo> GetSessionLocked(std::string_view session_id,
                                       TenantFilter tenant = std::nullopt);
  SessionInfo NewSessionInfo(const NewSessionParams& params) const;
  Status InsertSessionLocked(const SessionInfo& s, const Json& settings);
  // Append's work inside the caller's write transaction.
  Status AppendLocked(std::string_view session_id, std::span<const Event> events, int64_t now);
  Status InsertLockLocked(std::string_view session_id, const std::string& token, int64_t owner_pid);
  Result<std::vector<StoredEvent>> EventsLocked(std::string_view session_id,
                                                const EventQuery& query);
  // The states of a checkpoint row (column `closed`).
  enum class CheckpointState : int64_t { kOpen = 0, kClosed = 1, kDecided = 2 };
  // The session's newest checkpoint in `state`.
  Result<std::optional<Checkpoint>> CheckpointLocked(std::string_view session_id,
                                                     CheckpointState state);
  Status SetCheckpointStateLocked(const std::string& checkpoint_id, CheckpointState state);
  // The holder of the session's lock when it is live (not expired, process
  // alive), else nullopt.
  Result<std::optional<LockHolder>> LiveHolderLocked(std::string_view session_id);
  // Closes the checkpoint and drops its pending index rows.
  Status CloseCheckpointLocked(const std::string& checkpoint_id);
  // After appending to a session: moves its updated_at_ms above the first
  // session of the list order unless it is that session.
  Status BumpIfNotNewestLocked(std::string_view session_id, int64_t now);
  // The session's first `limit` queued inputs (< 0: all), oldest first.
  // TakeQueuedInput (`take`) or NextQueuedInput, with mu_ held.
  Result<std::optional<QueuedInput>> NextQueuedInputLocked(std::string_view session_id,
                                                           int64_t owner_pid, bool take);
  Result<std::vector<QueuedInput>> ListQueuedInputsLocked(std::string_view session_id,
                                                          int64_t limit);
  // One Load attempt; sets *raced when another writer appended during it.
  Result<SessionSnapshot> LoadOnce(TenantFilter tenant, std::string_view session_id,
                                   const LoadOptions& options, bool* raced);

  // The heartbeat thread's loop: refreshes every lock in beating_ every
  // lock_ttl / 3 until stopping_.
  void HeartbeatLoop();
  // Refreshes the (session id, token) locks in one transaction.
  Status RefreshLocks(const std::vector<std::pair<std::string, std::string>>& held);

  std::mutex mu_;
  std::unique_ptr<Db> db_;  // Guarded by mu_.
  // Locks this store let go of whose row's DELETE failed (session id ->
  // token): the row stays, naming this live process with a heartbeat that
  // may still be fresh, and would refuse this store's own next
  // AcquireLock as busy until it expired. LiveHolderLocked reads such a
  // row as free. Guarded by mu_.
  std::multimap<std::string, std::string> unreleased_;

  // The group commit's queue. Lock order: q_mu_ is never held while taking
  // mu_ (the writer takes its batch out, then commits it).
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<QueuedWrite*> decision_lane_;            // guarded by q_mu_
  std::deque<QueuedWrite*> step_lane_;                // guarded by q_mu_
  bool writing_ = false;                              // a writer is active; guarded by q_mu_
  GroupCommitStats stats_;                            // guarded by q_mu_
  std::function<void(size_t, size_t)> before_batch_;  // guarded by q_mu_
  SqliteStoreOptions options_;
  std::string host_;

  // Lock order: beat_mu_ is never held while taking mu_ (the loop copies the
  // held locks out, then refreshes them).
  std::mutex beat_mu_;
  std::condition_variable beat_cv_;
  std::multimap<std::string, std::string> beating_;  // session id -> token; guarded by beat_mu_
  bool stopping_ = false;                            // guarded by beat_mu_
  std::thread beat_thread_;                          // started under beat_mu_
};

// "2024-05-01T12:00:00Z" from Unix epoch milliseconds.
std::string FormatUtc(int64_t ms);

// Whether a process with this pid exists (kill(pid, 0) != ESRCH).
bool ProcessAlive(int64_t pid);

}  // namespace agentloop::store
