// The store core: the SessionStore's rules written once, over a narrow
// backend (as leveldb keeps one DBImpl over an Env).
//
// StoreCore implements what a call means (which rows a decision reads and
// changes, in which order, and each error answer) in terms of two small
// interfaces that a backend implements:
//   - StoreBackend: transactions (run again after a retryable failure, or
//     in another batch: the work must set its outputs afresh on each run),
//     the clock and this machine's name;
//   - StoreTxn: the statements one transaction needs, each a contract in the
//     store's own terms (a checkpoint, an index row, a queued input, a
//     wake-up), never a rule about when to run them.
// The SQLite backend (sqlite_store.cc) and the PostgreSQL backend
// (postgres_store.cc) know SQL dialects, schemas and connections. Where the
// two must differ (row locks, fencing of a lease's writes, wake-up
// announcements) the difference is one StoreTxn method whose comment says
// what each store does.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "agentloop/server_state.h"
#include "agentloop/store.h"

#include "store/store_util.h"

namespace agentloop::store {

// The state of a stored checkpoint (SQLite's column `closed`, PostgreSQL's
// `state`: the same numbers).
enum class CheckpointState : int {
  kOpen = 0,     // items outstanding
  kClosed = 1,   // continued, superseded or cancelled
  kDecided = 2,  // every item decided, the turn not yet continued
};

// A stored checkpoint row.
struct StoredCheckpoint {
  std::string id;
  std::string json;
};

// A row of the pending index with the checkpoint it points to.
struct IndexRow {
  std::string pending_id;
  std::string session_id;
  std::string checkpoint_id;
  int64_t created_at_ms = 0;
  std::string turn_id;
  std::string checkpoint_json;
  bool resolved = false;
  CheckpointState state = CheckpointState::kOpen;
};

// Which index rows StoreTxn::IndexRows returns.
struct IndexFilter {
  // One item's row (any state), or else...
  std::optional<std::string_view> pending_id;
  // ...the outstanding rows (unresolved, of an open checkpoint), of one
  // session or (nullopt) of every session, oldest first.
  std::optional<std::string_view> session_id;
  TenantFilter tenant;
};

// The holder of a session's lock as stored (live or not).
struct StoredHolder {
  int64_t pid = 0;
  std::string host;
  int64_t acquired_at_ms = 0;
  int64_t heartbeat_at_ms = 0;
  std::string token;  // the holder's lock token
};

// A stored idempotency key (StoreTxn::IdempotencyRecord).
struct IdempotencyRecord {
  std::string fingerprint;
  std::optional<std::string> response;  // nullopt: its request still runs
};

// What fences the writes of a lock's holder: the lock's token and epoch as
// they were when it was taken (see SessionLock).
struct LockFence {
  std::string token;
  int64_t epoch = 0;
};

// The statements of one transaction (StoreBackend::Run). Every call runs in
// that transaction and sees its earlier writes; an error leaves the
// transaction to be rolled back by the caller's work returning it.
class StoreTxn {
 public:
  virtual ~StoreTxn() = default;

  // The session `session_id` (of `tenant` when set). Errors: kNotFound.
  virtual Result<SessionInfo> Session(std::string_view session_id, TenantFilter tenant) = 0;
  // The stored events of the session that `query` selects (none for a
  // session of another tenant than `tenant`, when set).
  virtual Result<std::vector<StoredEvent>> Events(std::string_view session_id,
                                                  const EventQuery& query, TenantFilter tenant) = 0;
  // Up to `limit` ids of sessions whose id starts with `prefix`.
  virtual Result<std::vector<std::string>> SessionsWithPrefix(std::string_view prefix,
                                                              int64_t limit) = 0;
  // Replaces the title and/or the metadata (stored text: empty for null)
  // of the session (of `tenant` when set). Errors: kNotFound.
  virtual Status Relabel(std::string_view session_id, TenantFilter tenant,
                         const std::optional<std::string>& title,
                         const std::optional<std::string>& metadata) = 0;
  // The stored text of the session's pinned settings (empty: none).
  // Errors: kNotFound (also for another tenant's session).
  virtual Result<std::string> SettingsText(std::string_view session_id, TenantFilter tenant) = 0;
  // The stored text of the session's state `key`; nullopt when never set.
  virtual Result<std::optional<std::string>> StateText(std::string_view session_id,
                                                       std::string_view key) = 0;
  // The session's highest stored seq. Errors: kNotFound.
  virtual Result<uint64_t> LastSeq(std::string_view session_id) = 0;
  // Checks that `fence` is still the session's current lock, and keeps
  // any other holder from taking the lock over until this transaction
  // ends. PostgreSQL: locks the session row and compares the lease's token
  // and epoch (kLeaseLost when they differ). SQLite, whose locks live on
  // one machine: checks only that the session exists (a dead holder is
  // found by its pid and the seq key still catches two writers; see
  // SessionLock). Errors: kNotFound.
  virtual Status CheckFence(std::string_view session_id, const LockFence& fence) = 0;
  // This run of the work follows an attempt whose commit may have taken
  // effect with its reply lost (a lock holder's write riding out an outage
  // of the database, TxnKind::kLeaseWrite): a write found done is done,
  // not refused. False on every first run, and always on SQLite.
  virtual bool again() const { return false; }

  // The stored holder of the session's lock (nullopt: none), with the lock
  // kept from every other taker until this transaction ends (PostgreSQL:
  // the session row's lock; SQLite: the database write lock of a write
  // transaction). Errors: kNotFound (also for another tenant's session).
  virtual Result<std::optional<StoredHolder>> LockHolder(std::string_view session_id,
                                                         TenantFilter tenant) = 0;

  // Stores the new session `s` with its pinned `settings` (null: none);
  // with `lock_token`, already locked by it for `owner_pid` of this host.
  // Returns the lock's epoch (0 without a lock, or on a store that does
  // not fence). Errors: kAlreadyExists "session <id> already exists".
  virtual Result<int64_t> InsertSession(const SessionInfo& s, const Json& settings,
                                        const std::string* lock_token, int64_t owner_pid) = 0;
  // Deletes the session and every row that belongs to it.
  virtual Status DeleteSession(std::string_view session_id) = 0;
  // Makes `token` of `owner_pid` on this host the holder of the session's
  // lock from `now`, in place of any other; returns its epoch (each new
  // holder a higher one; 0 on a store that does not fence). Errors:
  // kNotFound.
  virtual Result<int64_t> TakeLock(std::string_view session_id, const std::string& token,
                                   int64_t owner_pid, int64_t now) = 0;
  // Renews to `now` the heartbeat of each (session id, token) lock still
  // held with its token; returns how many were.
  virtual Result<int64_t> RenewLocks(std::span<const std::pair<std::string, std::string>> held,
                                     int64_t now) = 0;
  // Releases the session's lock if `token` still holds it.
  virtual Status ReleaseLock(std::string_view session_id, const std::string& token) = 0;

  // Keeps the session from concurrent writers until this transaction ends
  // (PostgreSQL: its row lock, which orders a session's appends and
  // pauses; SQLite: the write lock, held already). Errors: kNotFound.
  virtual Status LockSession(std::string_view session_id) = 0;
  // Stores the persisted events of `events` (see SessionStore::Append),
  // stamped `now`, fenced by `fence` when set (as CheckFence).
  virtual Status Append(std::string_view session_id, std::span<const Event> events, int64_t now,
                        const LockFence* fence) = 0;

  // The index rows `filter` selects, oldest first.
  virtual Result<std::vector<IndexRow>> IndexRows(const IndexFilter& filter) = 0;
  // Claims the outstanding item `pending_id` (of `tenant` when set): the
  // open checkpoint whose unresolved index row names it, with that row
  // marked resolved, so that of racing deciders exactly one gets it; the
  // checkpoint is kept from every other decider and from a superseding
  // pause until this transaction ends (PostgreSQL: its row lock, taken
  // before the index row's; SQLite: the database write lock). nullopt when
  // no open checkpoint has the item unresolved.
  virtual Result<std::optional<StoredCheckpoint>> ClaimIndexedItem(std::string_view pending_id,
                                                                   TenantFilter tenant) = 0;
  // The ids of the session's open and decided checkpoints, kept from
  // deciders and claimers until this transaction ends.
  virtual Result<std::vector<std::string>> PausedCheckpoints(std::string_view session_id) = 0;
  // Stores `checkpoint` as the open checkpoint `id` and indexes each of
  // its outstanding items. Errors: kAlreadyExists naming a pending id that
  // is indexed already.
  virtual Status InsertCheckpoint(const std::string& id, const Checkpoint& checkpoint,
                                  int64_t now) = 0;
  // The session's newest checkpoint in `state`, if any.
  virtual Result<std::optional<StoredCheckpoint>> NewestCheckpoint(std::string_view session_id,
                                                                   CheckpointState state) = 0;
  // Replaces the stored checkpoint `id`'s JSON.
  virtual Status UpdateCheckpoint(const std::string& id, const Checkpoint& checkpoint,
                                  int64_t now) = 0;
  // Moves checkpoint `id` to `state` and marks every index row of it
  // resolved.
  virtual Status SetCheckpointState(const std::string& id, CheckpointState state, int64_t now) = 0;
  // Marks resolved the index rows of checkpoint `id` whose item is not in
  // `outstanding`.
  virtual Status SettleIndexRowsExcept(const std::string& id,
                                       std::span<const PendingItem> outstanding) = 0;
  // Takes the session's newest decided checkpoint for this transaction:
  // a concurrent taker does not get the same one (PostgreSQL: a row lock
  // taken with SKIP LOCKED; SQLite: the database write lock). nullopt when
  // there is none to take.
  virtual Result<std::optional<StoredCheckpoint>> TakeDecidedCheckpoint(
      std::string_view session_id) = 0;

  // Whether the session has a paused batch: a checkpoint open, or decided
  // and not yet continued.
  virtual Result<bool> HasPausedBatch(std::string_view session_id) = 0;

  // Queues `input` (its id, input, continue_turn and created_at_ms) behind
  // the session's queued inputs; returns its place (1: next). Enqueuers of
  // one session are ordered (PostgreSQL: the session row's lock; SQLite:
  // the write lock). Errors: kNotFound.
  virtual Result<int64_t> InsertQueuedInput(std::string_view session_id,
                                            const QueuedInput& input) = 0;
  // The session's first `limit` queued inputs (< 0: all), oldest first.
  virtual Result<std::vector<QueuedInput>> QueuedInputs(std::string_view session_id,
                                                        int64_t limit) = 0;
  // Removes the session's queued input `input_id`: false when it is not
  // queued (any more).
  virtual Result<bool> DeleteQueuedInput(std::string_view session_id,
                                         std::string_view input_id) = 0;

  // Sets the session's state `key` to `value`. Errors: kNotFound.
  virtual Status PutState(std::string_view session_id, std::string_view key, const Json& value,
                          int64_t now) = 0;
  // Replaces the session's pinned settings. Errors: kNotFound.
  virtual Status PutSettings(std::string_view session_id, const Json& settings) = 0;

  // --- the HTTP server's state (ServerStateCore)
  // Forgets the idempotency keys recorded before `before_ms`, and the
  // unanswered ones recorded before `in_flight_before_ms`.
  virtual Status ForgetIdempotencyKeys(int64_t before_ms, int64_t in_flight_before_ms) = 0;
  // Records (tenant, key) unless it is recorded: true when it was added.
  // Of two racing recorders one adds it, the other reads its record.
  virtual Result<bool> InsertIdempotencyKey(std::string_view tenant, std::string_view key,
                                            std::string_view fingerprint, int64_t now) = 0;
  virtual Result<std::optional<IdempotencyRecord>> IdempotencyKey(std::string_view tenant,
                                                                  std::string_view key) = 0;
  // Stores the answer of the key (nullopt: forgets the key).
  virtual Status SetIdempotencyResponse(std::string_view tenant, std::string_view key,
                                        std::optional<std::string_view> response) = 0;
  // Records `n` (its session's tenant copied) as due at `due_at_ms`
  // unless its id is recorded: true when it was added.
  virtual Result<bool> InsertNotification(const OutboxNotification& n, int64_t now,
                                          int64_t due_at_ms) = 0;
  // Forgets the notifications recorded before `before_ms`.
  virtual Status ForgetNotifications(int64_t before_ms) = 0;
  // Makes up to `limit` notifications due at `now` due again at
  // `due_again_ms` and returns them, oldest first; instances claiming
  // together take different ones (PostgreSQL: SKIP LOCKED; SQLite: the
  // write lock).
  virtual Result<std::vector<OutboxNotification>> ClaimDueNotifications(int64_t now,
                                                                        int64_t due_again_ms,
                                                                        int64_t limit) = 0;
  // Marks the notification `id` delivered (never due again).
  virtual Status FinishNotification(std::string_view id) = 0;
  // Records the revoked credential unless its id is recorded.
  virtual Status InsertRevokedCredential(std::string_view tenant, std::string_view id,
                                         int64_t expires_at_ms) = 0;
  // Forgets the revoked credentials expired at `now`; the others' ids, in
  // id order.
  virtual Result<std::vector<std::string>> RevokedCredentials(int64_t now) = 0;

  // Leaves a wake-up for the session, due at `due_at_ms`, announced to the
  // listeners when this transaction commits; an existing one is due at
  // `due_at_ms` (`earliest`: at the earlier of the two). A store that one
  // machine uses (SQLite) keeps none: OK, nothing written.
  virtual Status LeaveWakeup(std::string_view session_id, int64_t due_at_ms, int64_t now,
                             bool earliest) = 0;
  // Drops the session's wake-up unless inputs are queued for it (SQLite:
  // OK, nothing kept).
  virtual Status DropWakeupUnlessQueued(std::string_view session_id) = 0;
};

// Transactions of a backend.
class StoreBackend {
 public:
  virtual ~StoreBackend() = default;

  enum class TxnKind {
    kRead,        // reads only; each read sees committed data
    kSnapshot,    // reads only, all of them from one snapshot
    kWrite,       // a write transaction
    kDecision,    // a write of a decision (a resolution, a claim of a decided
                  // batch): never queued behind the writes of turns
    kLeaseWrite,  // a write of a lock holder's turn. PostgreSQL rides out an
                  // outage of the database: while the transaction fails
                  // kUnavailable it runs again (StoreTxn::again() true), for
                  // up to one lock TTL. SQLite: as kWrite.
  };
  // Runs `work` in one transaction of `kind`: committed when it returns
  // OK (and durable when Run returns OK), rolled back otherwise, and its
  // error returned. `work` may run more than once (a serialization
  // failure, a group commit that failed as a whole): each run must set the
  // caller's outputs afresh.
  virtual Status Run(TxnKind kind, const std::function<Status(StoreTxn&)>& work) = 0;
  // Wall clock, Unix epoch milliseconds (tests inject one).
  virtual int64_t Now() const = 0;
  // How long a decision's wake-up waits before another instance may claim
  // it (the deciding server continues the turn itself meanwhile).
  virtual std::chrono::milliseconds wakeup_grace() const { return std::chrono::seconds(1); }
  // This machine's name, as lock holders record it.
  virtual const std::string& host() const = 0;
  // A lock whose heartbeat is older than this is taken over.
  virtual std::chrono::milliseconds lock_ttl() const = 0;
  // Held locks are renewed by the store's heartbeat thread.
  virtual bool lock_heartbeat() const = 0;
};

// The server's state (ServerStateStore) over a backend: the rules of the
// outbox, the idempotency keys and the revoked credentials, written once.
class ServerStateCore final : public ServerStateStore {
 public:
  // REQUIRES: `backend` outlives this object.
  explicit ServerStateCore(StoreBackend& backend) : backend_(backend) {}

  Result<bool> AddNotification(const OutboxNotification& n,
                               std::chrono::milliseconds lease) override;
  Result<std::vector<OutboxNotification>> ClaimNotifications(
      int limit, std::chrono::milliseconds lease, std::chrono::milliseconds max_age) override;
  Status FinishNotification(std::string_view id) override;
  Status RevokeCredential(std::string_view tenant, std::string_view id,
                          int64_t expires_at_ms) override;
  Result<std::vector<std::string>> ListRevokedCredentials() override;
  Result<IdempotencyClaim> ClaimIdempotencyKey(std::string_view tenant, std::string_view key,
                                               std::string_view fingerprint,
                                               std::chrono::milliseconds ttl,
                                               std::chrono::milliseconds in_flight_ttl) override;
  Status FinishIdempotencyKey(std::string_view tenant, std::string_view key,
                              std::string_view response) override;
  Status ReleaseIdempotencyKey(std::string_view tenant, std::string_view key) override;

 private:
  StoreBackend& backend_;
};

// The SessionStore rules over a backend. A backend store derives from it
// and implements the calls the core does not (yet) write once.
class StoreCore : public SessionStore {
 public:
  ~StoreCore() override;

  Result<SessionInfo> GetSession(std::string_view session_id) override;
  Result<std::string> FindSession(std::string_view id_or_prefix) override;
  Result<SessionInfo> NewestInWorkspace(const std::filesystem::path& workspace) override;
  Status RelabelSession(std::string_view session_id, std::optional<std::string> title,
                        std::optional<Json> metadata) override;
  Result<std::vector<StoredEvent>> Events(std::string_view session_id, uint64_t after_seq) override;
  Result<std::vector<StoredEvent>> QueryEvents(std::string_view session_id,
                                               const EventQuery& query) override;
  Result<SessionSnapshot> Load(std::string_view session_id, const LoadOptions& options) override;
  Result<std::optional<Checkpoint>> OpenCheckpoint(std::string_view session_id) override;
  Result<std::optional<Json>> GetSettings(std::string_view session_id) override;
  Result<std::optional<Json>> GetState(std::string_view session_id, std::string_view key) override;
  std::unique_ptr<TenantStore> ForTenant(std::string tenant) override;

  Result<SessionInfo> CreateSession(const NewSessionParams& params) override;
  Result<LockedSession> CreateLockedSession(const NewSessionParams& params,
                                            int64_t owner_pid) override;
  Status RemoveSession(std::string_view session_id) override;
  Status RemoveSessionIn(TenantFilter tenant, std::string_view session_id);
  Result<std::unique_ptr<SessionLock>> AcquireLock(std::string_view session_id,
                                                   int64_t owner_pid) override;

  // The lock handle's calls: renew one lock (kBusy when it was taken over),
  // release it, and add it to or remove it from the locks the heartbeat
  // thread renews (one thread per store, started with the first lock,
  // renewing every held lock each lock_ttl / 3 in one transaction).
  Status RefreshLock(const std::string& session_id, const std::string& token);
  void ReleaseLock(const std::string& session_id, const std::string& token);
  void StartHeartbeat(const std::string& session_id, const std::string& token);
  void StopHeartbeat(const std::string& session_id, const std::string& token);
  // Renews the (session id, token) locks: what the heartbeat thread does.
  Status RefreshLocks(const std::vector<std::pair<std::string, std::string>>& held);

  Result<std::optional<PendingRecord>> GetPending(std::string_view pending_id) override;
  Result<std::optional<PendingLookup>> LookupPending(std::string_view pending_id) override;
  Result<std::vector<PendingRecord>> ListPending(
      std::optional<std::string_view> session_id) override;
  Result<ResolveOutcome> Resolve(std::string_view pending_id, const ResolveFn& fn,
                                 std::span<const Event> events = {}) override;
  Result<std::optional<Checkpoint>> ClaimDecided(std::string_view session_id) override;

  Status Append(std::string_view session_id, std::span<const Event> events) override;
  Status SaveCheckpoint(const Checkpoint& checkpoint, std::span<const Event> events = {}) override;
  Status SetState(std::string_view session_id, std::string_view key, const Json& value) override;
  Status UpdateSettings(std::string_view session_id, const Json& settings,
                        std::span<const Event> events) override;
  // The same writes as a lock's holder makes them: fenced by `fence` when
  // set (a fenced write rides out an outage: TxnKind::kLeaseWrite).
  Status AppendFenced(std::string_view session_id, std::span<const Event> events,
                      const LockFence* fence);
  Status SaveCheckpointFenced(const Checkpoint& checkpoint, std::span<const Event> events,
                              const LockFence* fence);
  Status SetStateFenced(std::string_view session_id, std::string_view key, const Json& value,
                        const LockFence* fence);
  Status UpdateSettingsFenced(std::string_view session_id, const Json& settings,
                              std::span<const Event> events, const LockFence* fence);

  Result<int64_t> EnqueueInput(std::string_view session_id, std::string_view input,
                               bool continue_turn) override;
  Result<std::vector<QueuedInput>> ListQueuedInputs(std::string_view session_id) override;
  Result<std::optional<QueuedInput>> TakeQueuedInput(std::string_view session_id,
                                                     int64_t owner_pid) override;
  Result<std::optional<QueuedInput>> NextQueuedInput(std::string_view session_id,
                                                     int64_t owner_pid) override;
  // SessionLock::AppendTakingInput, fenced by `fence` when set.
  Status AppendTakingInput(std::string_view session_id, std::span<const Event> events,
                           std::string_view input_id, const LockFence* fence);

  // The calls of the same name, matching only rows of `tenant` (nullopt:
  // any): the SessionStore calls pass nullopt, ForTenant's view its tenant.
  Result<SessionInfo> GetSessionIn(TenantFilter tenant, std::string_view session_id);
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
  // ClaimDecided of a lock's holder: fenced by `fence` when set.
  Result<std::optional<Checkpoint>> ClaimDecidedFenced(std::string_view session_id,
                                                       const LockFence* fence);
  // SessionLock::DecidedBatch and AppendClaimingDecided, fenced by `fence`.
  Result<std::optional<Checkpoint>> DecidedBatchFenced(std::string_view session_id,
                                                       const LockFence* fence);
  Status AppendClaimingDecided(std::string_view session_id, std::span<const Event> events,
                               const LockFence* fence);

  // The server's state kept in this store's database (ServerStateOf).
  ServerStateStore& server_state() { return server_state_; }

 protected:
  // REQUIRES: `backend` outlives the core (a derived store passes itself).
  explicit StoreCore(StoreBackend& backend) : backend_(backend) {}
  // Ends the heartbeat thread. A derived store whose backend is itself
  // calls it first in its destructor: the thread runs the backend.
  void StopHeartbeatThread();

 private:
  SessionInfo NewSessionInfo(const NewSessionParams& params) const;
  // One Load attempt; sets *raced when another writer appended during it.
  Result<SessionSnapshot> LoadOnce(TenantFilter tenant, std::string_view session_id,
                                   const LoadOptions& options, bool* raced);
  void HeartbeatLoop();

  // The holder of the session's lock when it is live: its heartbeat is
  // younger than the lock TTL and, on this host, its process exists (a
  // pid means nothing on another host: there the TTL decides). Locks it
  // as StoreTxn::LockHolder does. Errors: kNotFound.
  Result<std::optional<StoredHolder>> LiveHolder(StoreTxn& t, std::string_view session_id,
                                                 TenantFilter tenant = std::nullopt);
  // TakeQueuedInput (`take`) and NextQueuedInput.
  Result<std::optional<QueuedInput>> NextInput(std::string_view session_id, int64_t owner_pid,
                                               bool take);

  StoreBackend& backend_;
  ServerStateCore server_state_{backend_};

  std::mutex beat_mu_;
  std::condition_variable beat_cv_;
  std::multimap<std::string, std::string> beating_;  // session id -> token; guarded by beat_mu_
  bool stopping_ = false;                            // guarded by beat_mu_
  std::thread beat_thread_;                          // started under beat_mu_
  // Locks this store let go of whose release failed (session id -> token):
  // the row stays, naming this live process with a heartbeat that may still
  // be fresh, and would refuse this store's own next AcquireLock as busy
  // until it expired. LiveHolder reads such a row as free; a committed
  // takeover forgets it.
  std::mutex unreleased_mu_;
  std::multimap<std::string, std::string> unreleased_;  // guarded by unreleased_mu_
};

}  // namespace agentloop::store
