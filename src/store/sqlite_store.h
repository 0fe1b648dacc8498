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
// transaction of its own, so each caller gets its own write's answer.
//
// The store's rules are StoreCore's (store_core.h); this file is the SQLite
// backend: its transactions (Run) and statements (SqliteTxn).
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
#include "store/store_core.h"
#include "store/store_util.h"

namespace agentloop::store {

class SqliteStore final : private StoreBackend, public StoreCore {
 public:
  // Opens the database and applies the builtin migrations.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::filesystem::path& path,
                                                   SqliteStoreOptions options);
  ~SqliteStore() override;

  Result<std::vector<SessionInfo>> ListSessions(const SessionListOptions& options) override;
  Result<std::vector<std::string>> ListDecided() override;

  Result<std::vector<std::string>> ListQueuedSessions() override;

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
  friend class SqliteTxn;  // the statements of a transaction (StoreTxn)
  SqliteStore(std::unique_ptr<Db> db, SqliteStoreOptions options);

  // StoreBackend: a read (kRead, kSnapshot) in a read transaction under
  // mu_; a write through the group commit's lanes (kDecision its own).
  Status Run(TxnKind kind, const std::function<Status(StoreTxn&)>& work) override;

  int64_t Now() const override;
  const std::string& host() const override { return host_; }
  std::chrono::milliseconds lock_ttl() const override { return options_.lock_ttl; }
  bool lock_heartbeat() const override { return options_.lock_heartbeat; }

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
  Status InsertSessionLocked(const SessionInfo& s, const Json& settings);
  // Append's work inside the caller's write transaction.
  Status AppendLocked(std::string_view session_id, std::span<const Event> events, int64_t now);
  Status InsertLockLocked(std::string_view session_id, const std::string& token, int64_t owner_pid,
                          int64_t now);
  Result<std::vector<StoredEvent>> EventsLocked(std::string_view session_id,
                                                const EventQuery& query);
  Status SetCheckpointStateLocked(const std::string& checkpoint_id, CheckpointState state,
                                  int64_t now);
  // After appending to a session: moves its updated_at_ms above the first
  // session of the list order unless it is that session.
  Status BumpIfNotNewestLocked(std::string_view session_id, int64_t now);

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
};

}  // namespace agentloop::store
