// SessionStore: where sessions live between processes.
//
// A session is a row of metadata plus an append-only log of events (the
// persisted subset of the turn's event stream, see ShouldPersist). The log is
// the source of truth: Load() rebuilds the conversation by replaying the
// `message` and `compaction` events in seq order. Next to the log the store
// keeps three small tables that must be updated atomically with other
// processes:
//   - a session lock: one running turn owns a session (AcquireLock);
//   - durable pauses: the checkpoint of a paused batch and an index from each
//     outstanding pending id to it (SaveCheckpoint / ListPending / Resolve);
//     a checkpoint is open (items outstanding), then decided (every item
//     decided, the turn not yet continued), then closed (ClaimDecided);
//   - key/value state per session (todo loop, reflector nudge).
// The HTTP server's own state (its notification outbox, idempotency keys,
// revoked console sign-ins) is kept in the same database behind an
// interface of its own (ServerStateStore, agentloop/server_state.h).
//
// The embedded default is SQLite (OpenSqliteStore); the interface is written
// so that a PostgreSQL store can implement the same contract. The on-disk
// format is documented in docs/storage.md.
//
// Durability: every mutating call returns OK only after its transaction is
// committed. With StoreSync::kFull (the default) the commit is on disk and
// survives a crash or power loss; with kNormal it survives a crash or kill of
// the process, but the last commits before a power loss or OS crash may be
// rolled back (the database stays consistent either way).
//
// Thread-safety: a SessionStore may be shared by threads (calls are
// serialised internally). Several stores (processes) may open the same
// database; cross-process races are settled by database transactions.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/env.h"
#include "agentloop/events.h"
#include "agentloop/json.h"
#include "agentloop/status.h"
#include "agentloop/turn.h"
#include "agentloop/types.h"

namespace agentloop {

// The data directory: $AGENTLOOP_HOME, else $XDG_DATA_HOME/agentloop (when
// absolute), else $HOME/.local/share/agentloop. Pure: reads only `env`, does
// not create anything. Errors: kFailedPrecondition when none of the three is
// set.
Result<std::filesystem::path> DefaultDataDir(const EnvMap& env);

// File name of the SQLite database inside the data directory.
inline constexpr std::string_view kSessionsDbName = "sessions.db";

struct SessionInfo {
  std::string id;
  std::filesystem::path workspace;
  std::string provider;
  std::string model;
  std::string command;  // CommandKindName
  // The first user message, whitespace collapsed, cut to 80 characters.
  std::string title;
  int64_t created_at_ms = 0;  // Unix epoch milliseconds
  int64_t updated_at_ms = 0;  // last Append
  uint64_t last_seq = 0;      // highest stored event seq (0: no events)
  // Set by a server that created the session (empty for the command line's):
  // the tenant of the token that created it, the agent it runs, and the
  // client's metadata (a JSON object, or null).
  std::string tenant;
  std::string agent;
  Json metadata;
  // The session whose subagent tool started this one (docs/subagents.md);
  // empty for a root session.
  std::string parent_id;

  bool operator==(const SessionInfo&) const = default;
};

struct NewSessionParams {
  std::string id;  // empty: NewUuid()
  std::filesystem::path workspace;
  std::string provider;
  std::string model;
  CommandKind command = CommandKind::kCode;
  // Optional; otherwise the title is taken from the first user message
  // appended.
  std::string first_message;
  // The settings pinned to the session (an object, engine format: see
  // SessionOptions in agentloop/engine.h and docs/storage.md), stored in the
  // same commit as the session. Null: nothing is pinned. Never a secret.
  Json settings;
  // See SessionInfo. `metadata` must be null or a JSON object.
  std::string tenant;
  std::string agent;
  Json metadata;
  std::string parent_id;
};

struct SessionListOptions {
  std::optional<std::filesystem::path> workspace;  // only sessions of this workspace
  int limit = 50;                                  // <= 0: no limit
  std::optional<std::string> tenant;               // only sessions of this tenant
  std::optional<std::string> agent;                // only sessions of this agent
  std::optional<std::string> parent_id;            // only children of this session
  // Continue a listing after this session (the last one of the previous
  // page). Errors: kNotFound when that session no longer exists.
  std::string after_id;
};

// One stored event, as written (export writes `json` verbatim, one per line).
struct StoredEvent {
  uint64_t seq = 0;
  std::string type;  // EventTypeName at write time
  std::string turn_id;
  std::string json;  // the Event::ToJson() object, compact
  int64_t created_at_ms = 0;

  // The row's type: nullopt for a name this build does not know (a newer
  // writer's; readers skip it).
  std::optional<EventType> kind() const { return ParseEventType(type); }
};

// The newest turn of a session's log (its events in seq order) that began
// and never ended (a process died in it): its turn_begin event; null when
// every turn ended.
const StoredEvent* UnfinishedTurn(std::span<const StoredEvent> events);

// Which stored events SessionStore::QueryEvents returns: a query the store
// answers with an index, reading only the rows it returns (and, with
// `types` or `turn_id`, the rows it passes over), never the whole log.
struct EventQuery {
  uint64_t after_seq = 0;          // only events with seq > after_seq
  size_t limit = 0;                // at most this many (0: every match)
  bool newest_first = false;       // in descending seq order (from the log's end)
  std::string turn_id;             // only this turn's events (empty: every turn)
  std::vector<std::string> types;  // only events of these types (empty: every type)
};

// The query whose answer says whether the session's newest turn is
// unfinished: its newest turn_begin or turn_end. The newest turn is
// unfinished (UnfinishedTurn) exactly when that event is a turn_begin.
inline EventQuery NewestTurnBoundary() {
  EventQuery q;
  q.limit = 1;
  q.newest_first = true;
  q.types = {"turn_begin", "turn_end"};
  return q;
}

// The newest `turn_end` event of a session.
struct LastTurnEnd {
  std::string turn_id;
  uint64_t seq = 0;
  StopReason stop = StopReason::kCompleted;
  std::string reason;
  std::string final_text;
  bool truncated = false;
  TurnCounters counters;
};

// A problem found while loading that did not prevent it: a corrupt row of a
// kind that does not carry history, a repair, a skipped repair.
struct LoadWarning {
  uint64_t seq = 0;  // 0 when not about one row
  std::string message;
};

struct SessionSnapshot {
  SessionInfo info;
  // The history to hand to a Transcript: messages in seq order with
  // compactions applied and, when needed, the crash-recovery message.
  std::vector<Message> messages;
  // Seq of the last stored event (including a repair written by this Load).
  // The next turn starts at last_seq + 1.
  uint64_t last_seq = 0;
  std::optional<LastTurnEnd> last_turn_end;
  // The newest turn began and has no `turn_end` after its latest
  // `turn_begin`: the process running it stopped (or, for a session another
  // process holds, it is running there). Engine::OpenSession ends such a
  // turn before anything else runs (EndCutTurn in agentloop/engine.h).
  struct BegunTurn {
    std::string turn_id;
    uint64_t begin_seq = 0;  // its latest turn_begin
    TurnCounters counters;   // as that turn_begin carried them
  };
  std::optional<BegunTurn> unfinished_turn;
  std::optional<Checkpoint> open_checkpoint;
  // A paused batch whose every item is decided but whose turn has not
  // continued yet (see SessionStore::Resolve and ClaimDecided).
  std::optional<Checkpoint> decided_checkpoint;
  std::vector<LoadWarning> warnings;
  // A crash-recovery message was appended (and persisted) by this Load.
  bool recovered = false;
  // The last measurement of the context in the log: `tokens` for the view
  // made of the first `messages` of `messages` (the usage of the last
  // step_end that reported some, or the tokens_after of a later
  // compaction). The engine carries it into the session's next turn
  // (TurnConfig::context_measure). nullopt: none stored after the last
  // compaction.
  struct ContextMark {
    int64_t tokens = 0;
    size_t messages = 0;
  };
  std::optional<ContextMark> context_mark;
};

struct LoadOptions {
  // Append and persist the crash-recovery message when the history ends with
  // unanswered tool calls. The repair is skipped (with a warning) while
  // another live process holds the session lock, because its tool calls may
  // simply be running. false: report the history exactly as stored.
  bool repair = true;
};

// The status of a write refused because its lock was taken over by another
// holder: kLeaseLost (another process owns the session now; this one may not
// write to it any more). Distinct from kBusy, which refuses a lock that was
// never this caller's.
inline Status LeaseLost(std::string_view detail) { return {Code::kLeaseLost, std::string(detail)}; }
inline bool IsLeaseLost(const Status& s) { return s.code() == Code::kLeaseLost; }
// A failed turn's reason (TurnResult::reason, the failing Status's
// ToString) says the turn stopped because its lease was lost.
inline bool IsLeaseLostReason(std::string_view reason) {
  const std::string_view name = CodeName(Code::kLeaseLost);
  return reason.size() > name.size() && reason.substr(0, name.size()) == name &&
         reason[name.size()] == ':';
}

// Held while a turn runs on a session. Destroying it releases the lock.
// REQUIRES: the store that made it outlives it.
//
// The lock is also how the running turn writes: its event appends, its
// pause, its state, its settings changes and its claim of a decided batch
// go through the lock, not the store. A store that several instances share
// (PostgreSQL) fences each of these writes by the lock's epoch: inside the
// write's own transaction it checks that this lock is still the session's
// current one, so a holder whose lock expired and was taken over (its
// process paused by the kernel, its host cut off) cannot write a single row
// more; the write fails with a lease-lost status (IsLeaseLost) and the
// holder must stop the turn. The
// SQLite store, whose lock lives on one machine, passes the writes to the
// store unfenced (a holder is found dead by its pid; the seq key still
// catches two writers).
class SessionLock {
 public:
  virtual ~SessionLock() = default;
  virtual const std::string& session_id() const = 0;
  // Renews the heartbeat. Errors: kBusy when the lock expired and was taken
  // over by someone else (the holder must stop writing to the session).
  virtual Status Refresh() = 0;
  // The generation of the session's lock this object holds (each new holder
  // of a session gets a higher one); 0 for a store that does not fence.
  virtual uint64_t epoch() const { return 0; }

  // SessionStore::Append, SaveCheckpoint, SetState, UpdateSettings and
  // ClaimDecided on this lock's session, fenced. Errors: as the store's;
  // kLeaseLost (IsLeaseLost) when the lock was taken over.
  virtual Status Append(std::span<const Event> events) = 0;
  virtual Status SaveCheckpoint(const Checkpoint& checkpoint,
                                std::span<const Event> events = {}) = 0;
  virtual Status SetState(std::string_view key, const Json& value) = 0;
  virtual Status UpdateSettings(const Json& settings, std::span<const Event> events) = 0;
  virtual Result<std::optional<Checkpoint>> ClaimDecided() = 0;
  // The session's decided batch, read without claiming it (nullopt when
  // none): the turn that continues it claims it with its first commit
  // (AppendClaimingDecided), so a turn whose first commit fails leaves the
  // batch decided for the next try. Errors: as the store's.
  virtual Result<std::optional<Checkpoint>> DecidedBatch() = 0;
  // Append, and the claim of the session's decided batch (as ClaimDecided:
  // its checkpoint closed, the session's wake-up answered), in one
  // transaction: the first commit of the turn that continues the batch.
  // Errors: as Append; kFailedPrecondition when no batch is decided any
  // more (another claimed it; nothing is appended).
  virtual Status AppendClaimingDecided(std::span<const Event> events) = 0;
  // Append, and the removal of this session's queued input `input_id`
  // (SessionStore::NextQueuedInput), in one transaction: the turn that runs
  // a queued input takes it with its first commit. `events` may be empty
  // (an input answered with an error before its turn began). Errors: as
  // Append; kNotFound when the input is no longer queued (nothing is
  // appended).
  virtual Status AppendTakingInput(std::span<const Event> events, std::string_view input_id) = 0;
};

// An outstanding pending item with where it lives.
struct PendingRecord {
  std::string session_id;
  std::string checkpoint_id;
  std::string turn_id;
  int64_t created_at_ms = 0;
  PendingItem item;
  // The root session of `session_id`'s tree of subagents (itself for a
  // root session). Set by Engine::ListPending, which also sets item.path;
  // the store leaves it empty.
  std::string root_session_id;
};

// A pending item with what became of it (SessionStore::LookupPending).
struct PendingLookup {
  enum class State {
    kOutstanding,  // waits for a decision
    kDecided,      // decided: `decision` says how
    kCancelled,    // its batch was closed without it (a sibling was denied,
                   // or a newer pause superseded the checkpoint)
  };
  State state = State::kOutstanding;
  PendingRecord record;
  std::optional<ApprovalDecision> decision;  // kDecided
};

// What a resolver callback asks for after it has updated the checkpoint.
enum class ResolveAction {
  kResolved,    // this item is settled; the batch stays open while others are outstanding
  kCloseBatch,  // close the whole checkpoint now (a deny cancels the batch)
};

struct ResolveOutcome {
  // The pending id was unknown, already resolved, or its batch was closed:
  // nothing changed and the other fields are empty.
  bool already_resolved = false;
  // Every item of the batch is decided now (no item left, or kCloseBatch):
  // the checkpoint is `decided` and waits for ClaimDecided.
  bool closed = false;
  std::string checkpoint_id;
  Checkpoint checkpoint;  // as updated by the callback, `outstanding` without the item
  PendingItem item;       // the item that was resolved
};

// Called inside the resolving transaction with the stored checkpoint and the
// item. It may edit the checkpoint (typically append a tool_result to
// results_so_far). A non-OK result rolls everything back and the item stays
// pending. It runs while holding the database write lock: keep it short (no
// model calls; a tool run holds other writers up to the busy timeout).
using ResolveFn = std::function<Result<ResolveAction>(Checkpoint&, const PendingItem&)>;

// Waits for a store's wake-up announcements (SessionStore::ListenForWakeups).
// Used by one thread; Interrupt from any.
class WakeupListener {
 public:
  virtual ~WakeupListener() = default;
  // Returns true when a wake-up was announced, false when `timeout` passed
  // or Interrupt was called. Errors: kUnavailable when the connection is
  // lost (the next Wait connects again).
  virtual Result<bool> Wait(std::chrono::milliseconds timeout) = 0;
  // Makes a Wait in progress (or the next one) return at once.
  virtual void Interrupt() = 0;
};

// What SessionStore::ClaimWakeups found.
struct WakeupClaim {
  // Sessions whose decided batch this caller should continue now.
  std::vector<std::string> sessions;
  // Sessions with queued inputs and no paused batch, whose holder should
  // take the next input (SessionStore::TakeQueuedInput).
  std::vector<std::string> queued;
  // The next wake-up not yet due is due this many milliseconds from now.
  std::optional<int64_t> next_due_in_ms;
};

// An input queued for a session while a turn runs on it (the HTTP server's
// `on_busy: "enqueue"`): kept by the store, so that whichever process holds
// the session next runs it, also after a crash or restart
// (SessionStore::EnqueueInput).
struct QueuedInput {
  std::string id;
  std::string session_id;
  // The user's message; empty for a continuation.
  std::string input;
  // Continue the session's interrupted or failed newest turn instead of
  // starting one on `input` (what `agentloop resume ID` does without a
  // prompt).
  bool continue_turn = false;
  int64_t created_at_ms = 0;
};

// One tenant's view of a SessionStore (SessionStore::ForTenant): the calls
// that name a session or a pending item by id, as a server makes them for a
// caller. Every statement of these calls matches only rows of the view's
// tenant, in the store itself: a session or item of another tenant is
// exactly an unknown id (kNotFound, or nullopt), whatever the caller does
// next, and a call on it changes nothing. Each call's contract is the
// SessionStore call of the same name.
// REQUIRES: the store that made the view outlives it.
class TenantStore {
 public:
  virtual ~TenantStore() = default;
  virtual const std::string& tenant() const = 0;

  virtual Result<SessionInfo> GetSession(std::string_view session_id) = 0;
  virtual Status RemoveSession(std::string_view session_id) = 0;
  virtual Status RelabelSession(std::string_view session_id, std::optional<std::string> title,
                                std::optional<Json> metadata) = 0;
  virtual Result<std::vector<StoredEvent>> Events(std::string_view session_id,
                                                  uint64_t after_seq) = 0;
  virtual Result<std::vector<StoredEvent>> QueryEvents(std::string_view session_id,
                                                       const EventQuery& query) = 0;
  virtual Result<SessionSnapshot> Load(std::string_view session_id, const LoadOptions& options) = 0;
  virtual Result<std::optional<Json>> GetSettings(std::string_view session_id) = 0;
  virtual Result<std::optional<PendingRecord>> GetPending(std::string_view pending_id) = 0;
  virtual Result<std::optional<PendingLookup>> LookupPending(std::string_view pending_id) = 0;
  // Only an outstanding item of this tenant's session is resolved; any
  // other id is {already_resolved = true} and `fn` does not run.
  virtual Result<ResolveOutcome> Resolve(std::string_view pending_id, const ResolveFn& fn,
                                         std::span<const Event> events = {}) = 0;
};

class SessionStore {
 public:
  virtual ~SessionStore() = default;

  // --- sessions ---------------------------------------------------------

  // Errors: kAlreadyExists for a duplicate explicit id.
  virtual Result<SessionInfo> CreateSession(const NewSessionParams& params) = 0;
  // Newest (last updated) first.
  virtual Result<std::vector<SessionInfo>> ListSessions(const SessionListOptions& options) = 0;
  // Errors: kNotFound.
  virtual Result<SessionInfo> GetSession(std::string_view session_id) = 0;
  // The full id of the session whose id is or starts with `id_or_prefix`
  // (at least 4 characters). Errors: kNotFound; kInvalidArgument when the
  // prefix is ambiguous or too short.
  virtual Result<std::string> FindSession(std::string_view id_or_prefix) = 0;
  // The most recently updated session of `workspace` (run --continue).
  // Errors: kNotFound.
  virtual Result<SessionInfo> NewestInWorkspace(const std::filesystem::path& workspace) = 0;
  // Deletes the session and every row that belongs to it (events, lock,
  // checkpoints, pending index, state). Errors: kNotFound; kBusy while a
  // live process holds its lock.
  virtual Status RemoveSession(std::string_view session_id) = 0;
  // Replaces the title and/or the metadata (null or a JSON object) of a
  // session; nullopt leaves one as it is. An empty title is taken from the
  // next user message again. Errors: kNotFound; kInvalidArgument for
  // metadata that is not null or an object.
  virtual Status RelabelSession(std::string_view session_id, std::optional<std::string> title,
                                std::optional<Json> metadata) = 0;

  // --- the event log ----------------------------------------------------

  // Persists the events with ShouldPersist(type), in one transaction: all or
  // none, durable on OK. Each event's session_id must be empty or equal to
  // `session_id` (it is stored as `session_id`). Seqs only grow: each
  // event's seq is above every seq stored before it (and above the
  // batch's previous event's), so a reader that has seen seq N never misses
  // a lower one committed later. Errors: kNotFound (no such session),
  // kAlreadyExists (a seq at or below the last stored one: another writer),
  // kInvalidArgument, kUnavailable (database busy beyond the busy timeout).
  virtual Status Append(std::string_view session_id, std::span<const Event> events) = 0;
  // Stored events with seq > after_seq, in seq order, as written (corrupt
  // rows included verbatim). Errors: kNotFound.
  virtual Result<std::vector<StoredEvent>> Events(std::string_view session_id,
                                                  uint64_t after_seq) = 0;
  // The stored events `query` selects, as Events returns them (a page of
  // the log, a turn's boundaries, the newest turn_begin or turn_end). The
  // reads of a server that grow with the log (an events page, whether the
  // newest turn is unfinished) are these queries. Errors: kNotFound.
  virtual Result<std::vector<StoredEvent>> QueryEvents(std::string_view session_id,
                                                       const EventQuery& query) = 0;
  // Rebuilds the session (see SessionSnapshot and docs/storage.md, "Load").
  // Errors: kNotFound; kDataLoss when a `message` or `compaction` row cannot
  // be parsed or applied (the history cannot be rebuilt faithfully; the
  // message names the seq). Corrupt rows of other types are warnings.
  virtual Result<SessionSnapshot> Load(std::string_view session_id, const LoadOptions& options) = 0;

  // --- the session lock -------------------------------------------------

  // Takes the session's lock for `owner_pid`. A lock held by a process that
  // no longer exists, or whose heartbeat is older than the TTL, is taken
  // over. Blocks only for the database busy timeout, never for the lock.
  // Errors: kBusy "session <id> is busy (held by pid N since T)"; kNotFound.
  virtual Result<std::unique_ptr<SessionLock>> AcquireLock(std::string_view session_id,
                                                           int64_t owner_pid) = 0;

  // A new session whose lock `owner_pid` already holds: CreateSession and
  // AcquireLock. The default makes the two calls; a store that can do both
  // in one transaction should (one durable commit fewer when a run starts,
  // and no moment where the session exists unlocked). The engine opens the
  // session from the returned info without calling Load: it must be exactly
  // what Load would return for it (a session without events).
  struct LockedSession {
    SessionInfo info;
    std::unique_ptr<SessionLock> lock;
  };
  virtual Result<LockedSession> CreateLockedSession(const NewSessionParams& params,
                                                    int64_t owner_pid) {
    AL_ASSIGN_OR_RETURN(SessionInfo info, CreateSession(params));
    AL_ASSIGN_OR_RETURN(auto lock, AcquireLock(info.id, owner_pid));
    return LockedSession{std::move(info), std::move(lock)};
  }

  // --- pinned settings ----------------------------------------------------

  // The settings pinned to the session (NewSessionParams::settings, as last
  // replaced by UpdateSettings); nullopt for a session stored without them.
  // Errors: kNotFound; kDataLoss when the stored text is not a JSON object.
  virtual Result<std::optional<Json>> GetSettings(std::string_view session_id) = 0;
  // Replaces the pinned settings and appends `events` (the `settings` event
  // that says what changed, with its seq) in one transaction: both or
  // neither. Errors: as Append; kInvalidArgument when `settings` is not an
  // object.
  virtual Status UpdateSettings(std::string_view session_id, const Json& settings,
                                std::span<const Event> events) = 0;

  // --- durable pauses ---------------------------------------------------

  // Stores a new open checkpoint and indexes each outstanding pending id,
  // and appends `events` (as Append: the turn's events up to and including
  // the `pending` event that announces the pause) in the same transaction:
  // whoever reads the `pending` event finds the items it names. At most one
  // checkpoint per session is open: an older open one is closed
  // (superseded). Errors: kInvalidArgument (no outstanding item, empty
  // session id), kAlreadyExists (a pending id is already indexed, an
  // event's seq is stored), kNotFound.
  virtual Status SaveCheckpoint(const Checkpoint& checkpoint,
                                std::span<const Event> events = {}) = 0;
  // The session's open checkpoint, if any.
  virtual Result<std::optional<Checkpoint>> OpenCheckpoint(std::string_view session_id) = 0;
  // Outstanding items, oldest first; all sessions when `session_id` is empty.
  virtual Result<std::vector<PendingRecord>> ListPending(
      std::optional<std::string_view> session_id) = 0;
  // One outstanding item, found through the pending index. nullopt when
  // the id is unknown or no longer outstanding.
  virtual Result<std::optional<PendingRecord>> GetPending(std::string_view pending_id) = 0;
  // Any item ever indexed, outstanding or not: what became of it. nullopt
  // when the id was never indexed (or its session was removed).
  virtual Result<std::optional<PendingLookup>> LookupPending(std::string_view pending_id) = 0;
  // Resolves one pending item atomically (one write transaction): of two
  // racing resolvers exactly one sees the item. Unknown / resolved / closed
  // id: {already_resolved = true}, nothing changes. Otherwise `fn` runs; on
  // its error the transaction rolls back and the error is returned. After
  // `fn` the item leaves `outstanding` and `events` (the decision's record)
  // are appended to the item's session, numbered after its last stored
  // event (their seq and session_id are set by the store). When no item is
  // left or fn returned kCloseBatch the checkpoint becomes *decided* and
  // all its index rows are removed: it waits for ClaimDecided.
  // Errors: kDataLoss, nothing changed and `fn` not run, when the index
  // names the item as outstanding in an open checkpoint that does not hold
  // it. Only a corrupt checkpoint (or one rewritten outside the store) can
  // disagree with its index, which both are written in one transaction:
  // answering "already resolved" would tell the person their decision was
  // recorded, or lost a race, when no decision of that item exists or ever
  // can, and the paused turn would wait forever without anyone seeing why.
  // (ListPending and LookupPending answer the same item kDataLoss.)
  virtual Result<ResolveOutcome> Resolve(std::string_view pending_id, const ResolveFn& fn,
                                         std::span<const Event> events = {}) = 0;
  // Takes the session's decided checkpoint to continue its turn: closes it
  // and returns it in one transaction, so of two claimers exactly one gets
  // it (the turn's tools run at most once). nullopt when there is none.
  virtual Result<std::optional<Checkpoint>> ClaimDecided(std::string_view session_id) = 0;
  // Sessions whose paused batch is decided but not yet continued (a
  // resolver could not take the session, or crashed before continuing),
  // oldest decision first.
  virtual Result<std::vector<std::string>> ListDecided() = 0;

  // --- wake-ups: work for the servers that share a store ------------------
  //
  // A decision that completes a batch (Resolve) leaves a wake-up for the
  // session in the same transaction, due after a short grace in which the
  // deciding process may continue the turn itself; claiming the decided
  // batch (ClaimDecided) removes it unless inputs are queued. A queued input
  // (EnqueueInput) leaves one the same way, removed with the last queued
  // input when no decided batch waits. Stores that one machine uses (SQLite)
  // keep none: these return nothing. docs/storage.md, "Wake-ups".

  // Claims up to `limit` due wake-ups of sessions whose batch is still
  // decided or that have queued inputs: each is due again `retry_after`
  // later (if the claimer cannot continue it, another will), unless
  // ClaimDecided (or taking the last queued input) removed it by then. A
  // wake-up is dropped only when neither is left.
  virtual Result<WakeupClaim> ClaimWakeups(int limit, std::chrono::milliseconds retry_after) {
    (void)limit;
    (void)retry_after;
    return WakeupClaim{};
  }
  // Up to `limit` sessions whose lock is still held but whose heartbeat is
  // older than the lock TTL: their holder stopped (crashed, or was cut off)
  // with a turn in flight, and a new holder should repair them.
  virtual Result<std::vector<std::string>> ListExpiredLocks(int limit) {
    (void)limit;
    return std::vector<std::string>{};
  }
  // A listener for wake-up announcements (one connection); null when the
  // store makes none.
  virtual Result<std::unique_ptr<WakeupListener>> ListenForWakeups() {
    return std::unique_ptr<WakeupListener>();
  }

  // --- queued inputs --------------------------------------------------------
  //
  // The queue of a session's inputs that wait for its running turn to end
  // (docs/server.md, "Queued inputs"). Whoever holds the session's lock
  // takes the oldest one when its turn is over and runs it; a store shared
  // by instances also leaves a wake-up for the session (announced at
  // commit) that stays while inputs wait, so that an instance claims the
  // session when its holder stopped or went idle without seeing the input.

  // Queues `input` (with `continue_turn` as in QueuedInput) behind the
  // session's queued inputs. Returns its place in the queue (1: next).
  // Errors: kNotFound (no such session), kInvalidArgument (an empty input
  // that is not a continuation).
  virtual Result<int64_t> EnqueueInput(std::string_view session_id, std::string_view input,
                                       bool continue_turn) = 0;
  // The session's queued inputs, oldest (next) first.
  virtual Result<std::vector<QueuedInput>> ListQueuedInputs(std::string_view session_id) = 0;
  // Takes (removes and returns) the session's oldest queued input, in one
  // transaction that first checks that the session's lock is held, live, by
  // `owner_pid` of this host: of two racing takers one gets each input, and
  // a process whose lock expired or was taken over gets none. nullopt when
  // nothing waits, or while the session has a paused batch (open, or
  // decided and not yet continued: its turn goes first). Errors: kLeaseLost
  // (IsLeaseLost) when the lock is not held by `owner_pid`; kNotFound.
  virtual Result<std::optional<QueuedInput>> TakeQueuedInput(std::string_view session_id,
                                                             int64_t owner_pid) = 0;
  // The session's oldest queued input, under TakeQueuedInput's checks, left
  // in the queue: the turn that runs it takes it in the transaction that
  // commits the turn's beginning (SessionLock::AppendTakingInput), so an
  // input whose process stops before that stays queued for the session's
  // next holder (op::Queued).
  virtual Result<std::optional<QueuedInput>> NextQueuedInput(std::string_view session_id,
                                                             int64_t owner_pid) = 0;
  // The sessions with queued inputs, oldest input first (a server that
  // starts runs them).
  virtual Result<std::vector<std::string>> ListQueuedSessions() = 0;

  // --- per-session key/value state --------------------------------------

  // Errors: kNotFound (no such session).
  virtual Status SetState(std::string_view session_id, std::string_view key, const Json& value) = 0;
  // nullopt when the key was never set.
  virtual Result<std::optional<Json>> GetState(std::string_view session_id,
                                               std::string_view key) = 0;

  // --- tenants --------------------------------------------------------------
  //
  // The SessionStore calls above see every tenant's rows: they are the
  // operator's (the command line, the engine running a turn it was given,
  // a server's pollers). A server answering a caller names sessions and
  // pending items through the caller's view, whose statements match only
  // that tenant's rows (TenantStore). The command line's sessions have the
  // empty tenant; ForTenant("") sees exactly them.

  // A view for `tenant`, cheap to make (per request); it shares this
  // store's connections.
  virtual std::unique_ptr<TenantStore> ForTenant(std::string tenant) = 0;
};

// How a commit reaches the disk (SQLite's synchronous pragma; the database is
// always in WAL mode). docs/storage.md, "Durability"; config key store.sync.
enum class StoreSync {
  // synchronous=FULL: the WAL is fsync'd at every commit; a commit that
  // returned OK survives a power loss or OS crash.
  kFull,
  // synchronous=NORMAL: no fsync at commit (only at checkpoints); a commit
  // survives a crash or kill of the process, but the last commits before a
  // power loss or OS crash may be rolled back. The database stays consistent.
  kNormal,
};

struct SqliteStoreOptions {
  // Durability of a commit (see StoreSync).
  StoreSync sync = StoreSync::kFull;
  // How long a statement waits for another connection's write lock.
  std::chrono::milliseconds busy_timeout{5000};
  // A lock whose heartbeat is older than this is taken over.
  std::chrono::milliseconds lock_ttl{30000};
  // Refresh held locks from a background thread every lock_ttl / 3.
  bool lock_heartbeat = true;
  // Wall clock in Unix epoch milliseconds (tests inject one). Null: system.
  std::function<int64_t()> now_ms;
  // Group commit (docs/storage.md, "Group commit"): the writes of turns and
  // decisions that are ready at the same moment share one transaction and
  // one fsync, at most this many (1: every write commits alone).
  int group_commit_max = 64;
  // How long the writer waits for more writes when fewer than
  // group_commit_max are ready (0: it commits what is ready; writes queue
  // anyway while a commit is on its way to the disk).
  std::chrono::microseconds group_commit_window{0};
};

// Opens (creating if needed) the database at `db_path` and applies pending
// schema migrations. Errors: kFailedPrecondition when the database was
// written by a newer agentloop (unknown schema version); kUnavailable /
// kInternal when SQLite cannot open it.
Result<std::unique_ptr<SessionStore>> OpenSqliteStore(const std::filesystem::path& db_path,
                                                      SqliteStoreOptions options);

// DefaultDataDir(env) / sessions.db, creating the directory (mode 0700).
Result<std::unique_ptr<SessionStore>> OpenDefaultStore(const EnvMap& env,
                                                       SqliteStoreOptions options);

// --- PostgreSQL -----------------------------------------------------------

// Whether `url` names a PostgreSQL database ("postgresql://" or
// "postgres://"; store.url, AGENTLOOP_STORE_URL).
bool IsPostgresUrl(std::string_view url);

struct PostgresStoreOptions {
  // Connections the store opens at most; a call waits for a free one, for
  // at most pool_timeout.
  int pool_size = 4;
  // How long a call waits for a free connection while all pool_size are in
  // use (a slow or stuck statement, a database that stopped answering);
  // past it the call fails kUnavailable instead of blocking its thread.
  // 0: lock_ttl (the heartbeat that keeps this process's leases needs a
  // connection too, so past one TTL without one its leases lapse anyway).
  std::chrono::milliseconds pool_timeout{0};
  // A lease whose heartbeat is older than this is taken over.
  std::chrono::milliseconds lock_ttl{30000};
  // Refresh held leases from a background thread every lock_ttl / 3.
  bool lock_heartbeat = true;
  // Apply pending migrations when opening. false: refuse (kFailedPrecondition)
  // a database whose schema is older than this build's, as well as a newer one.
  bool migrate = true;
  // Wall clock in Unix epoch milliseconds (tests inject one). Null: system.
  // Instances sharing a database must have clocks that agree to well within
  // lock_ttl (NTP): lease expiry compares their times.
  std::function<int64_t()> now_ms;
  // A wake-up left by a decision is due this long after it (ClaimWakeups):
  // the deciding server continues the turn itself meanwhile.
  std::chrono::milliseconds wakeup_grace{1000};
  // Group commit (docs/storage.md, "Group commit"): the writes of turns and
  // decisions that are ready at the same moment share one transaction and
  // one WAL flush, at most this many (1: every write commits alone). Each
  // write of a batch is a savepoint (a subtransaction): PostgreSQL keeps up
  // to 64 of a transaction's subtransactions in shared memory, so the store
  // uses at most 32.
  int group_commit_max = 16;
};

// Opens a PostgreSQL session store at `url` (a libpq connection URL) and,
// with options.migrate, applies pending schema migrations (serialised across
// instances by an advisory lock). Errors: kFailedPrecondition when the
// database's schema is newer than this build knows (written by a newer
// agentloop), or older with migrate = false; kUnavailable when the database
// cannot be reached. docs/storage.md, "PostgreSQL".
Result<std::unique_ptr<SessionStore>> OpenPostgresStore(const std::string& url,
                                                        PostgresStoreOptions options);

// What MigratePostgresStore did.
struct PostgresMigration {
  int from_version = 0;
  int to_version = 0;
};
// Applies the pending migrations of the database at `url` (agentloop store
// migrate). Errors: as OpenPostgresStore.
Result<PostgresMigration> MigratePostgresStore(const std::string& url);

}  // namespace agentloop
