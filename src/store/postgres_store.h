// The PostgreSQL SessionStore: the store several `agentloop serve` instances
// (and command-line runs) share. Schema and invariants: docs/storage.md,
// "PostgreSQL"; migrations in pg_migrations/NNNN_name.sql.
//
// Calls are blocking (libpq's synchronous API): the server makes them on its
// blocking pool, never on its I/O thread. A pool of at most
// options.pool_size connections serves the calls; each call runs on one
// connection, in one transaction when it writes. Decisions other instances
// race on take row locks (SELECT ... FOR UPDATE on the session or
// checkpoint row), so they see and change a consistent state; a transaction
// that fails with a serialization failure or a deadlock is run again.
//
// Held session locks are leases (owner pid and host, epoch, heartbeat); one
// background thread per store renews every lease it holds.
//
// Group commit: the writes (StoreBackend::Run of kWrite, kDecision and
// kLeaseWrite) are queued, and the callers themselves commit them (no thread
// of its own): a caller that finds a writer's place free becomes a writer,
// takes what is ready, up to options.group_commit_max writes, and runs it on
// one pooled connection as ONE transaction, each write in a savepoint of its
// own, then answers every caller of the batch once COMMIT has returned (the
// WAL flush that makes it durable, with synchronous_commit on): a caller is
// told its write is committed only by the commit that covers it. At most
// max(1, pool_size - 2) writers of turn steps run at once, each on its own
// connection (the others serve reads and the lease heartbeat), and decisions
// (kDecision) have a lane and a writer of their own besides: a decision never
// waits for a writer busy with turn steps, and every writer takes queued
// decisions before steps. A write that fails rolls back to its savepoint and
// fails alone; one chosen as a deadlock's victim runs again alone after the
// batch. When the batch as a whole fails before its COMMIT took effect (the
// connection was lost mid-batch, or COMMIT was refused), every write that had
// not failed by itself runs again in a transaction of its own; when the
// connection was lost during COMMIT (its outcome unknown), each caller gets
// that error, as a lone transaction's caller would (a lock holder's write
// then runs again with StoreTxn::again(), see TxnKind::kLeaseWrite).
//
// The store's rules are StoreCore's (store_core.h); this file is the
// PostgreSQL backend: its transactions (Run) and statements (PgTxn).
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

#include "store/pg_conn.h"
#include "store/store_core.h"
#include "store/store_util.h"

namespace agentloop::store {

struct PgMigration {
  int version;
  std::string_view name;
  std::string_view sql;
};

// The PostgreSQL migrations of this build, ascending and gap-free from 1.
std::span<const PgMigration> BuiltinPgMigrations();

// The schema version of the database (0: none applied).
Result<int> PgSchemaVersion(PgConn& conn);

// Applies the migrations of `migrations` newer than the database's version,
// in one transaction under an advisory lock (instances starting together do
// not both apply one). Returns the version before. Errors:
// kFailedPrecondition when the database's version is newer than the newest
// of `migrations`.
Result<int> ApplyPgMigrations(PgConn& conn, std::span<const PgMigration> migrations,
                              int64_t now_ms);

// What fences the writes of a lease's holder (see SessionLock).
using PgFence = LockFence;

class PostgresStore final : private StoreBackend, public StoreCore {
 public:
  static Result<std::unique_ptr<PostgresStore>> Open(const std::string& url,
                                                     PostgresStoreOptions options);
  ~PostgresStore() override;

  Result<std::vector<SessionInfo>> ListSessions(const SessionListOptions& options) override;
  Result<std::vector<std::string>> ListDecided() override;

  Result<std::vector<std::string>> ListQueuedSessions() override;

  Result<WakeupClaim> ClaimWakeups(int limit, std::chrono::milliseconds retry_after) override;
  Result<std::vector<std::string>> ListExpiredLocks(int limit) override;
  Result<std::unique_ptr<WakeupListener>> ListenForWakeups() override;

  const PostgresStoreOptions& options() const { return options_; }

  // What group commit has done so far (tests, benchmarks).
  struct GroupCommitStats {
    uint64_t batches = 0;  // transactions of more than one write, committed or failed
    uint64_t writes = 0;   // writes answered (alone or in a batch)
    size_t largest = 0;    // most writes in one batch
    uint64_t reruns = 0;   // writes run again alone after their batch failed
  };
  GroupCommitStats group_commit_stats();
  // Test seams: `hook` runs in a writer before each batch (a lone write
  // too), outside every lock of the store, with the batch's number of
  // decisions and of other writes (a test holds a batch there while others
  // queue); WaitForQueuedWrites waits until at least `n` writes wait in the
  // queue, or `timeout` passed (then false).
  void SetBeforeBatchForTest(std::function<void(size_t, size_t)> hook);
  bool WaitForQueuedWrites(size_t n, std::chrono::milliseconds timeout);

 private:
  friend class PgTxn;  // the statements of a transaction (StoreTxn)
  PostgresStore(std::string url, PostgresStoreOptions options);

  // StoreBackend: a read on a pooled connection (kRead: each statement its
  // own snapshot; kSnapshot: one REPEATABLE READ transaction); a write in
  // InTxn (kLeaseWrite riding out an outage in RideOutOutage).
  Status Run(TxnKind kind, const std::function<Status(StoreTxn&)>& work) override;
  std::chrono::milliseconds wakeup_grace() const override { return options_.wakeup_grace; }

  // A pooled connection, returned to the pool when it dies (dropped if it
  // is broken). A connection found broken makes every connection opened
  // before it stale: the idle ones are closed at once and the ones in use
  // when they come back, so after a server restart the next calls connect
  // anew instead of each finding another dead pooled connection.
  // Checkout waits at most options_.pool_timeout for a free connection,
  // then fails kUnavailable naming the pool size and the wait. Return wakes
  // the waiters whether the connection goes back idle or is closed.
  class Lease;
  friend class PgPoolTestPeer;  // pg_store_test.cc holds connections directly
  Result<std::unique_ptr<PgConn>> Checkout();
  void Return(std::unique_ptr<PgConn> conn);

  // Runs fn(conn) on a pooled connection (no transaction). With
  // `rerun_if_lost`, a call that fails because the pooled connection had
  // died (the server restarted) runs once more on a fresh one: only for
  // calls whose second run cannot differ from a first that took effect.
  template <class F>
  auto WithConn(F&& fn, bool rerun_if_lost = true) -> decltype(fn(std::declval<PgConn&>()));
  // Runs fn(conn) in a transaction: committed when fn succeeds, rolled
  // back otherwise; run again after a serialization failure or deadlock,
  // or when the connection was found broken before anything was sent.
  template <class F>
  auto InTxn(F&& fn) -> decltype(fn(std::declval<PgConn&>()));
  // Runs attempt(again) for a fenced write of a running turn, riding out
  // an outage of the database: while it fails kUnavailable (the server is
  // restarting or unreachable) it is run again, `again` true, after a
  // backoff of 50 ms doubling to 1 s, for up to one lease TTL; after that
  // the last error is returned. An attempt with `again` must treat a write
  // that its earlier attempt committed (the reply was lost) as done.
  template <class F>
  auto RideOutOutage(F&& attempt) -> decltype(attempt(false));

  // Group commit (see the file comment).
  struct QueuedWrite {
    const std::function<Status(StoreTxn&)>* work;
    bool again;  // StoreTxn::again() of this run
    Status result;
    bool done = false;
  };
  // Runs `work` in a batch of the group commit; its answer once the batch's
  // COMMIT has returned.
  Status Write(bool decision, bool again, const std::function<Status(StoreTxn&)>& work);
  // A writer's part: commits `batch` and sets each write's result.
  void CommitBatch(std::span<QueuedWrite* const> batch);
  // One write in a transaction of its own (InTxn).
  Status CommitAlone(const QueuedWrite& w);

  int64_t Now() const override;
  const std::string& host() const override { return host_; }
  std::chrono::milliseconds lock_ttl() const override { return options_.lock_ttl; }
  bool lock_heartbeat() const override { return options_.lock_heartbeat; }
  Status InsertSession(PgConn& c, const SessionInfo& s, const Json& settings,
                       const std::string* lock_token, int64_t owner_pid);
  Result<SessionInfo> GetSessionOn(PgConn& c, std::string_view session_id,
                                   TenantFilter tenant = std::nullopt);
  // Inside a transaction: locks the session row, checks `fence` (when
  // set), checks and stores the events (see Append).
  // `again`: a run after an attempt that may have committed the same
  // batch (RideOutOutage); a batch found stored is done, not refused.
  Status AppendOn(PgConn& c, std::string_view session_id, std::span<const Event> events,
                  int64_t now, const PgFence* fence = nullptr, bool again = false);
  // `row`: tenant, title, last_seq, lease_token, lease_epoch, lease_pid,
  // lease_host of the session, read FOR UPDATE. LeaseLost unless the lease
  // is `fence`.
  static Status CheckFence(const PgRows& row, std::string_view session_id, const PgFence& fence);
  // Locks the session row and checks `fence`. kNotFound, LeaseLost.
  Status CheckFenceOn(PgConn& c, std::string_view session_id, const PgFence& fence);
  Result<std::vector<StoredEvent>> EventsOn(PgConn& c, std::string_view session_id,
                                            const EventQuery& query,
                                            TenantFilter tenant = std::nullopt);
  Status SetCheckpointStateOn(PgConn& c, const std::string& checkpoint_id, CheckpointState state,
                              int64_t now);

  // Deletes the session's wake-up unless inputs are queued for it.
  Status DropWakeupUnlessQueuedOn(PgConn& c, std::string_view session_id);

  std::string url_;
  PostgresStoreOptions options_;
  std::string host_;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::deque<std::unique_ptr<PgConn>> idle_;  // guarded by pool_mu_
  int open_ = 0;                              // connections out or idle; guarded by pool_mu_
  uint64_t generation_ = 0;  // of connections opened since the last broken one; pool_mu_

  // The group commit's queue. Lock order: q_mu_ is never held while taking
  // pool_mu_ or running a statement.
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<QueuedWrite*> decision_lane_;            // guarded by q_mu_
  std::deque<QueuedWrite*> step_lane_;                // guarded by q_mu_
  int decision_writers_ = 0;                          // active (0 or 1); guarded by q_mu_
  int step_writers_ = 0;                              // active; guarded by q_mu_
  GroupCommitStats stats_;                            // guarded by q_mu_
  std::function<void(size_t, size_t)> before_batch_;  // guarded by q_mu_
};

}  // namespace agentloop::store
