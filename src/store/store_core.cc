// StoreCore: the store's rules written once for every backend.
#include "store/store_core.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <system_error>
#include <utility>

#include "agentloop/event_data.h"

#include "base/ids.h"
#include "protocol/codec.h"
#include "store/replay.h"

namespace agentloop::store {
namespace {

using TxnKind = StoreBackend::TxnKind;

// What became of the item an index row names (LookupPending).
Result<PendingLookup> LookupOfIndexRow(const IndexRow& row) {
  PendingLookup out;
  PendingRecord& r = out.record;
  r.session_id = row.session_id;
  r.checkpoint_id = row.checkpoint_id;
  r.created_at_ms = row.created_at_ms;
  r.turn_id = row.turn_id;
  AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(row.checkpoint_json, r.checkpoint_id));
  for (const BatchDecision& d : cp.decisions) {
    if (d.item.id != row.pending_id) continue;
    out.state = PendingLookup::State::kDecided;
    r.item = d.item;
    out.decision = d.decision;
    return out;
  }
  // Neither decided nor in the checkpoint: the index and the checkpoint
  // disagree (kDataLoss), whatever state the row is in.
  AL_ASSIGN_OR_RETURN(r.item, IndexedItem(cp, row.pending_id, r.checkpoint_id));
  const bool outstanding = !row.resolved && row.state == CheckpointState::kOpen;
  out.state = outstanding ? PendingLookup::State::kOutstanding : PendingLookup::State::kCancelled;
  return out;
}

}  // namespace

// --- the pending index ----------------------------------------------------------

Result<std::optional<PendingRecord>> StoreCore::GetPending(std::string_view pending_id) {
  AL_ASSIGN_OR_RETURN(std::optional<PendingLookup> found, LookupPending(pending_id));
  if (!found || found->state != PendingLookup::State::kOutstanding) {
    return std::optional<PendingRecord>();
  }
  return std::optional<PendingRecord>(std::move(found->record));
}

Result<std::optional<PendingLookup>> StoreCore::LookupPending(std::string_view pending_id) {
  return LookupPendingIn(std::nullopt, pending_id);
}

Result<std::optional<PendingLookup>> StoreCore::LookupPendingIn(TenantFilter tenant,
                                                                std::string_view pending_id) {
  std::optional<PendingLookup> found;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    found.reset();
    IndexFilter filter;
    filter.pending_id = pending_id;
    filter.tenant = tenant;
    AL_ASSIGN_OR_RETURN(std::vector<IndexRow> rows, t.IndexRows(filter));
    if (rows.empty()) return Status::Ok();
    AL_ASSIGN_OR_RETURN(found, LookupOfIndexRow(rows.front()));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return found;
}

Result<std::vector<PendingRecord>> StoreCore::ListPending(
    std::optional<std::string_view> session_id) {
  std::vector<PendingRecord> out;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    out.clear();
    IndexFilter filter;
    filter.session_id = session_id;
    AL_ASSIGN_OR_RETURN(std::vector<IndexRow> rows, t.IndexRows(filter));
    // A batch's items share one checkpoint: parsed once.
    std::map<std::string, Checkpoint> parsed;
    for (IndexRow& row : rows) {
      PendingRecord r;
      r.session_id = std::move(row.session_id);
      r.checkpoint_id = std::move(row.checkpoint_id);
      r.created_at_ms = row.created_at_ms;
      r.turn_id = std::move(row.turn_id);
      auto it = parsed.find(r.checkpoint_id);
      if (it == parsed.end()) {
        AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(row.checkpoint_json, r.checkpoint_id));
        it = parsed.emplace(r.checkpoint_id, std::move(cp)).first;
      }
      AL_ASSIGN_OR_RETURN(r.item, IndexedItem(it->second, row.pending_id, r.checkpoint_id));
      out.push_back(std::move(r));
    }
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return out;
}

// --- decisions --------------------------------------------------------------------

Result<ResolveOutcome> StoreCore::Resolve(std::string_view pending_id, const ResolveFn& fn,
                                          std::span<const Event> events) {
  return ResolveIn(std::nullopt, pending_id, fn, events);
}

Result<ResolveOutcome> StoreCore::ResolveIn(TenantFilter tenant, std::string_view pending_id,
                                            const ResolveFn& fn, std::span<const Event> events) {
  ResolveOutcome result;
  // Its own lane: a decision never waits behind the queued steps of turns.
  const Status ran = backend_.Run(TxnKind::kDecision, [&](StoreTxn& t) -> Status {
    result = ResolveOutcome{};
    AL_ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> row,
                        t.ClaimIndexedItem(pending_id, tenant));
    if (!row) {
      result.already_resolved = true;  // nothing was written
      return Status::Ok();
    }
    AL_ASSIGN_OR_RETURN(Checkpoint stored, ParseCheckpoint(row->json, row->id));
    // On any error the transaction rolls back: the item stays pending.
    AL_ASSIGN_OR_RETURN(result,
                        ApplyResolution(std::move(row->id), std::move(stored), pending_id, fn));
    const int64_t now = backend_.Now();
    const std::string& session_id = result.checkpoint.session_id;
    AL_RETURN_IF_ERROR(t.UpdateCheckpoint(result.checkpoint_id, result.checkpoint, now));
    if (!events.empty()) {
      AL_ASSIGN_OR_RETURN(uint64_t last_seq, t.LastSeq(session_id));
      AL_RETURN_IF_ERROR(
          t.Append(session_id, NumberAfter(events, session_id, last_seq, now), now, nullptr));
    }
    if (!result.closed) {
      // Items the callback removed from `outstanding` are settled too.
      return t.SettleIndexRowsExcept(result.checkpoint_id, result.checkpoint.outstanding);
    }
    AL_RETURN_IF_ERROR(t.SetCheckpointState(result.checkpoint_id, CheckpointState::kDecided, now));
    // The session has work: a wake-up, due after the grace in which the
    // deciding process continues the turn itself.
    return t.LeaveWakeup(session_id, now + backend_.wakeup_grace().count(), now,
                         /*earliest=*/false);
  });
  if (!ran.ok()) return ran;
  return result;
}

Result<std::optional<Checkpoint>> StoreCore::ClaimDecided(std::string_view session_id) {
  return ClaimDecidedFenced(session_id, nullptr);
}

Result<std::optional<Checkpoint>> StoreCore::ClaimDecidedFenced(std::string_view session_id,
                                                                const LockFence* fence) {
  std::optional<Checkpoint> claimed;
  // The decision's lane: the claim is how a decided batch's turn resumes.
  const Status ran = backend_.Run(TxnKind::kDecision, [&](StoreTxn& t) -> Status {
    claimed.reset();
    if (fence != nullptr) AL_RETURN_IF_ERROR(t.CheckFence(session_id, *fence));
    // Whoever claims, the session's wake-up is answered (and a stale one
    // whose batch is gone is dropped), unless inputs wait after the turn.
    AL_RETURN_IF_ERROR(t.DropWakeupUnlessQueued(session_id));
    AL_ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> row, t.TakeDecidedCheckpoint(session_id));
    if (!row) return Status::Ok();
    AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(row->json, row->id));
    AL_RETURN_IF_ERROR(t.SetCheckpointState(row->id, CheckpointState::kClosed, backend_.Now()));
    claimed = std::move(cp);
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return claimed;
}

Result<std::optional<Checkpoint>> StoreCore::DecidedBatchFenced(std::string_view session_id,
                                                                const LockFence* fence) {
  std::optional<Checkpoint> found;
  // The decision's lane, as the claim: TakeDecidedCheckpoint reads the row
  // as a claim would (PostgreSQL: FOR UPDATE), writing nothing.
  const Status ran = backend_.Run(TxnKind::kDecision, [&](StoreTxn& t) -> Status {
    found.reset();
    if (fence != nullptr) AL_RETURN_IF_ERROR(t.CheckFence(session_id, *fence));
    AL_ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> row, t.TakeDecidedCheckpoint(session_id));
    if (!row) return Status::Ok();
    AL_ASSIGN_OR_RETURN(found, ParseCheckpoint(row->json, row->id));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return found;
}

Status StoreCore::AppendClaimingDecided(std::string_view session_id, std::span<const Event> events,
                                        const LockFence* fence) {
  const int64_t now = backend_.Now();
  return backend_.Run(TxnKind::kLeaseWrite, [&](StoreTxn& t) -> Status {
    // The session's lock first (as Append takes it), then the batch.
    if (fence != nullptr) AL_RETURN_IF_ERROR(t.CheckFence(session_id, *fence));
    AL_ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> row, t.TakeDecidedCheckpoint(session_id));
    if (!row) {
      // An earlier attempt that committed (its reply lost) claimed it with
      // the events: Append finds them stored.
      if (!t.again() || events.empty()) {
        return FailedPrecondition("session " + std::string(session_id) +
                                  " has no decided batch to continue any more");
      }
    } else {
      AL_RETURN_IF_ERROR(t.DropWakeupUnlessQueued(session_id));
      AL_RETURN_IF_ERROR(t.SetCheckpointState(row->id, CheckpointState::kClosed, now));
    }
    if (events.empty()) return Status::Ok();
    return t.Append(session_id, events, now, fence);
  });
}

// --- sessions -------------------------------------------------------------------------

SessionInfo StoreCore::NewSessionInfo(const NewSessionParams& params) const {
  SessionInfo s;
  s.id = params.id.empty() ? NewUuid() : params.id;
  s.workspace = NormalizeWorkspace(params.workspace);
  s.provider = params.provider;
  s.model = params.model;
  s.command = std::string(CommandKindName(params.command));
  s.title = MakeTitle(params.first_message);
  s.created_at_ms = s.updated_at_ms = backend_.Now();
  s.tenant = params.tenant;
  s.agent = params.agent;
  s.metadata = params.metadata;
  s.parent_id = params.parent_id;
  return s;
}

namespace {

Status CheckNewSession(const NewSessionParams& params) {
  if (!params.settings.is_null() && !params.settings.is_object()) {
    return InvalidArgument("session settings must be a JSON object");
  }
  if (!params.metadata.is_null() && !params.metadata.is_object()) {
    return InvalidArgument("session metadata must be a JSON object");
  }
  return Status::Ok();
}

Status HeldBusy(std::string_view session_id, const StoredHolder& holder) {
  return Busy("session " + std::string(session_id) + " is busy (held by pid " +
              std::to_string(holder.pid) + " since " + FormatUtc(holder.acquired_at_ms) + ")");
}

// The lock handle of every store: its writes go to the core fenced by the
// lock's token and epoch (a store that does not fence checks only that the
// session exists: StoreTxn::CheckFence).
class CoreSessionLock final : public SessionLock {
 public:
  CoreSessionLock(StoreCore* store, std::string session_id, LockFence fence, bool heartbeat)
      : store_(store),
        session_id_(std::move(session_id)),
        fence_(std::move(fence)),
        heartbeat_(heartbeat) {
    if (heartbeat_) store_->StartHeartbeat(session_id_, fence_.token);
  }
  ~CoreSessionLock() override {
    if (heartbeat_) store_->StopHeartbeat(session_id_, fence_.token);
    store_->ReleaseLock(session_id_, fence_.token);
  }
  const std::string& session_id() const override { return session_id_; }
  Status Refresh() override { return store_->RefreshLock(session_id_, fence_.token); }
  uint64_t epoch() const override { return static_cast<uint64_t>(fence_.epoch); }
  Status Append(std::span<const Event> events) override {
    return store_->AppendFenced(session_id_, events, &fence_);
  }
  Status SaveCheckpoint(const Checkpoint& checkpoint, std::span<const Event> events) override {
    if (checkpoint.session_id != session_id_) {
      return InvalidArgument("checkpoint of session " + checkpoint.session_id +
                             " saved through the lock of session " + session_id_);
    }
    return store_->SaveCheckpointFenced(checkpoint, events, &fence_);
  }
  Status SetState(std::string_view key, const Json& value) override {
    return store_->SetStateFenced(session_id_, key, value, &fence_);
  }
  Status UpdateSettings(const Json& settings, std::span<const Event> events) override {
    return store_->UpdateSettingsFenced(session_id_, settings, events, &fence_);
  }
  Result<std::optional<Checkpoint>> ClaimDecided() override {
    return store_->ClaimDecidedFenced(session_id_, &fence_);
  }
  Result<std::optional<Checkpoint>> DecidedBatch() override {
    return store_->DecidedBatchFenced(session_id_, &fence_);
  }
  Status AppendClaimingDecided(std::span<const Event> events) override {
    return store_->AppendClaimingDecided(session_id_, events, &fence_);
  }
  Status AppendTakingInput(std::span<const Event> events, std::string_view input_id) override {
    return store_->AppendTakingInput(session_id_, events, input_id, &fence_);
  }

 private:
  StoreCore* store_;
  std::string session_id_;
  LockFence fence_;
  bool heartbeat_;
};

}  // namespace

Result<SessionInfo> StoreCore::CreateSession(const NewSessionParams& params) {
  AL_RETURN_IF_ERROR(CheckNewSession(params));
  SessionInfo s = NewSessionInfo(params);
  const Status ran = backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) {
    return t.InsertSession(s, params.settings, nullptr, 0).status();
  });
  if (!ran.ok()) return ran;
  return s;
}

Result<SessionStore::LockedSession> StoreCore::CreateLockedSession(const NewSessionParams& params,
                                                                   int64_t owner_pid) {
  AL_RETURN_IF_ERROR(CheckNewSession(params));
  SessionInfo s = NewSessionInfo(params);
  LockFence fence{NewId("lock"), 0};
  // One commit: the session never exists unlocked.
  const Status ran = backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(fence.epoch, t.InsertSession(s, params.settings, &fence.token, owner_pid));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  std::unique_ptr<SessionLock> lock(
      new CoreSessionLock(this, s.id, std::move(fence), backend_.lock_heartbeat()));
  return LockedSession{std::move(s), std::move(lock)};
}

Result<SessionInfo> StoreCore::GetSession(std::string_view session_id) {
  return GetSessionIn(std::nullopt, session_id);
}

Result<SessionInfo> StoreCore::GetSessionIn(TenantFilter tenant, std::string_view session_id) {
  SessionInfo info;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(info, t.Session(session_id, tenant));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return info;
}

Result<std::string> StoreCore::FindSession(std::string_view id_or_prefix) {
  std::string found;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    if (t.Session(id_or_prefix, std::nullopt).ok()) {
      found = std::string(id_or_prefix);
      return Status::Ok();
    }
    if (id_or_prefix.size() < 4) {
      return InvalidArgument("session id prefix '" + std::string(id_or_prefix) +
                             "' is too short (at least 4 characters)");
    }
    AL_ASSIGN_OR_RETURN(std::vector<std::string> ids, t.SessionsWithPrefix(id_or_prefix, 2));
    if (ids.empty()) return SessionNotFound(id_or_prefix);
    if (ids.size() > 1) {
      return InvalidArgument("session id prefix '" + std::string(id_or_prefix) + "' is ambiguous");
    }
    found = std::move(ids[0]);
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return found;
}

Result<SessionInfo> StoreCore::NewestInWorkspace(const std::filesystem::path& workspace) {
  SessionListOptions newest;
  newest.workspace = workspace;
  newest.limit = 1;
  AL_ASSIGN_OR_RETURN(auto list, ListSessions(newest));
  if (list.empty()) return NotFound("no session in workspace " + NormalizeWorkspace(workspace));
  return list[0];
}

Status StoreCore::RelabelSession(std::string_view session_id, std::optional<std::string> title,
                                 std::optional<Json> metadata) {
  return RelabelSessionIn(std::nullopt, session_id, std::move(title), std::move(metadata));
}

Status StoreCore::RelabelSessionIn(TenantFilter tenant, std::string_view session_id,
                                   std::optional<std::string> title, std::optional<Json> metadata) {
  if (metadata && !metadata->is_null() && !metadata->is_object()) {
    return InvalidArgument("session metadata must be a JSON object");
  }
  std::optional<std::string> meta;
  if (metadata) meta = metadata->is_null() ? std::string() : DumpJson(*metadata);
  return backend_.Run(TxnKind::kWrite,
                      [&](StoreTxn& t) { return t.Relabel(session_id, tenant, title, meta); });
}

Result<std::optional<Json>> StoreCore::GetSettings(std::string_view session_id) {
  return GetSettingsIn(std::nullopt, session_id);
}

Result<std::optional<Json>> StoreCore::GetSettingsIn(TenantFilter tenant,
                                                     std::string_view session_id) {
  std::string text;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(text, t.SettingsText(session_id, tenant));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  if (text.empty()) return std::optional<Json>();
  auto j = ParseJson(text);
  if (!j.ok() || !j->is_object()) {
    return DataLoss("the pinned settings of session " + std::string(session_id) +
                    " are corrupt: " + (j.ok() ? "not a JSON object" : j.error().message()));
  }
  return std::optional<Json>(std::move(*j));
}

Result<std::optional<Json>> StoreCore::GetState(std::string_view session_id, std::string_view key) {
  std::optional<std::string> text;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(text, t.StateText(session_id, key));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  if (!text) return std::optional<Json>();
  auto j = ParseJson(*text);
  if (!j.ok()) {
    return DataLoss("state '" + std::string(key) + "' of session " + std::string(session_id) +
                    " is corrupt: " + j.error().message());
  }
  return std::optional<Json>(std::move(*j));
}

std::unique_ptr<TenantStore> StoreCore::ForTenant(std::string tenant) {
  return std::make_unique<ScopedStore<StoreCore>>(*this, std::move(tenant));
}

// --- the event log ----------------------------------------------------------------------

Result<std::vector<StoredEvent>> StoreCore::Events(std::string_view session_id,
                                                   uint64_t after_seq) {
  return EventsIn(std::nullopt, session_id, after_seq);
}

Result<std::vector<StoredEvent>> StoreCore::EventsIn(TenantFilter tenant,
                                                     std::string_view session_id,
                                                     uint64_t after_seq) {
  EventQuery query;
  query.after_seq = after_seq;
  return QueryEventsIn(tenant, session_id, query);
}

Result<std::vector<StoredEvent>> StoreCore::QueryEvents(std::string_view session_id,
                                                        const EventQuery& query) {
  return QueryEventsIn(std::nullopt, session_id, query);
}

Result<std::vector<StoredEvent>> StoreCore::QueryEventsIn(TenantFilter tenant,
                                                          std::string_view session_id,
                                                          const EventQuery& query) {
  std::vector<StoredEvent> rows;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(rows, t.Events(session_id, query, tenant));
    // No event: perhaps no session either.
    if (rows.empty()) AL_RETURN_IF_ERROR(t.Session(session_id, tenant).status());
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return rows;
}

Result<std::optional<Checkpoint>> StoreCore::OpenCheckpoint(std::string_view session_id) {
  std::optional<StoredCheckpoint> row;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(row, t.NewestCheckpoint(session_id, CheckpointState::kOpen));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  if (!row) return std::optional<Checkpoint>();
  AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(row->json, row->id));
  return std::optional<Checkpoint>(std::move(cp));
}

Result<SessionSnapshot> StoreCore::Load(std::string_view session_id, const LoadOptions& options) {
  return LoadIn(std::nullopt, session_id, options);
}

Result<SessionSnapshot> StoreCore::LoadIn(TenantFilter tenant, std::string_view session_id,
                                          const LoadOptions& options) {
  // A writer appending between our read and the repair makes us read again;
  // the session lock normally prevents that, so a few attempts suffice.
  for (int attempt = 0;; ++attempt) {
    bool raced = false;
    auto snap = LoadOnce(tenant, session_id, options, &raced);
    if (!raced || attempt == 3) return snap;
  }
}

Result<SessionSnapshot> StoreCore::LoadOnce(TenantFilter tenant, std::string_view session_id,
                                            const LoadOptions& options, bool* raced) {
  SessionSnapshot snap;
  std::vector<StoredEvent> rows;
  std::optional<StoredCheckpoint> open, decided, closed;
  // One snapshot: the session row, events and checkpoints agree.
  const Status read = backend_.Run(TxnKind::kSnapshot, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(snap.info, t.Session(session_id, tenant));
    AL_ASSIGN_OR_RETURN(rows, t.Events(session_id, EventQuery{}, tenant));
    AL_ASSIGN_OR_RETURN(open, t.NewestCheckpoint(session_id, CheckpointState::kOpen));
    AL_ASSIGN_OR_RETURN(decided, t.NewestCheckpoint(session_id, CheckpointState::kDecided));
    if (options.repair) {
      AL_ASSIGN_OR_RETURN(closed, t.NewestCheckpoint(session_id, CheckpointState::kClosed));
    }
    return Status::Ok();
  });
  if (!read.ok()) return read;
  auto parse = [](const std::optional<StoredCheckpoint>& row) -> Result<std::optional<Checkpoint>> {
    if (!row) return std::optional<Checkpoint>();
    AL_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(row->json, row->id));
    return std::optional<Checkpoint>(std::move(cp));
  };
  AL_ASSIGN_OR_RETURN(snap.open_checkpoint, parse(open));
  AL_ASSIGN_OR_RETURN(snap.decided_checkpoint, parse(decided));
  AL_ASSIGN_OR_RETURN(std::optional<Checkpoint> last_closed, parse(closed));

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

  const int64_t now = backend_.Now();
  Event e = MakeEvent(MessageData{*repair}, std::string(session_id), replay.last_message_turn_id);
  e.seq = snap.last_seq + 1;
  e.ts = now;
  std::optional<StoredHolder> other_holder;
  const Status wrote = backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    other_holder.reset();
    AL_ASSIGN_OR_RETURN(auto holder, LiveHolder(t, session_id, tenant));
    AL_ASSIGN_OR_RETURN(uint64_t last_seq, t.LastSeq(session_id));
    if (last_seq != snap.info.last_seq) {
      *raced = true;
      return Unavailable("session " + std::string(session_id) + " changed while loading");
    }
    if (holder && !(holder->pid == getpid() && holder->host == backend_.host())) {
      other_holder = holder;  // its tool calls may simply be running
      return Status::Ok();
    }
    return t.Append(session_id, std::span<const Event>(&e, 1), now, nullptr);
  });
  if (!wrote.ok()) return wrote;
  if (other_holder) {
    snap.warnings.push_back(
        {0, "the last tool calls have no results but the session is held by live pid " +
                std::to_string(other_holder->pid) + "; not repairing (they may be running)"});
    return snap;
  }
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

Status StoreCore::RemoveSession(std::string_view session_id) {
  return RemoveSessionIn(std::nullopt, session_id);
}

Status StoreCore::RemoveSessionIn(TenantFilter tenant, std::string_view session_id) {
  return backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(auto holder, LiveHolder(t, session_id, tenant));
    if (holder) return HeldBusy(session_id, *holder);
    // Every row of the session goes with it (ON DELETE CASCADE).
    return t.DeleteSession(session_id);
  });
}

// --- the writes of a turn -----------------------------------------------------------

namespace {

// A lock holder's write rides out an outage; anyone else's is answered.
StoreBackend::TxnKind WriteKind(const LockFence* fence) {
  return fence != nullptr ? TxnKind::kLeaseWrite : TxnKind::kWrite;
}

// The session's row is kept for this transaction, fenced when `fence` is.
Status LockForWrite(StoreTxn& t, std::string_view session_id, const LockFence* fence) {
  return fence != nullptr ? t.CheckFence(session_id, *fence) : t.LockSession(session_id);
}

}  // namespace

Status StoreCore::Append(std::string_view session_id, std::span<const Event> events) {
  return AppendFenced(session_id, events, nullptr);
}

Status StoreCore::AppendFenced(std::string_view session_id, std::span<const Event> events,
                               const LockFence* fence) {
  if (std::none_of(events.begin(), events.end(),
                   [](const Event& e) { return ShouldPersist(e.type); })) {
    // Nothing to store; still an error for an unknown session.
    return backend_.Run(TxnKind::kRead,
                        [&](StoreTxn& t) { return t.Session(session_id, std::nullopt).status(); });
  }
  const int64_t now = backend_.Now();
  return backend_.Run(WriteKind(fence),
                      [&](StoreTxn& t) { return t.Append(session_id, events, now, fence); });
}

Status StoreCore::SaveCheckpoint(const Checkpoint& checkpoint, std::span<const Event> events) {
  return SaveCheckpointFenced(checkpoint, events, nullptr);
}

Status StoreCore::SaveCheckpointFenced(const Checkpoint& checkpoint, std::span<const Event> events,
                                       const LockFence* fence) {
  const std::string& session_id = checkpoint.session_id;
  if (session_id.empty()) return InvalidArgument("checkpoint without a session id");
  if (checkpoint.outstanding.empty()) {
    return InvalidArgument("checkpoint of session " + session_id + " has no outstanding item");
  }
  for (const PendingItem& item : checkpoint.outstanding) {
    if (item.id.empty()) return InvalidArgument("pending item without an id");
  }
  const int64_t now = backend_.Now();
  const std::string id = NewId("ckpt");
  return backend_.Run(WriteKind(fence), [&](StoreTxn& t) -> Status {
    AL_RETURN_IF_ERROR(LockForWrite(t, session_id, fence));
    if (t.again()) {
      // An earlier attempt that committed (its reply lost) left the batch's
      // first item pending in an open checkpoint of this session, and its
      // events stored (the same transaction).
      IndexFilter first;
      first.pending_id = checkpoint.outstanding.front().id;
      AL_ASSIGN_OR_RETURN(std::vector<IndexRow> rows, t.IndexRows(first));
      if (!rows.empty() && rows[0].session_id == session_id &&
          rows[0].state == CheckpointState::kOpen) {
        return Status::Ok();
      }
    }
    // Open or decided (a batch nobody continued): superseded by the new one.
    AL_ASSIGN_OR_RETURN(std::vector<std::string> paused, t.PausedCheckpoints(session_id));
    for (const std::string& old : paused) {
      AL_RETURN_IF_ERROR(t.SetCheckpointState(old, CheckpointState::kClosed, now));
    }
    if (!paused.empty()) {
      // A superseded decided batch needs nobody any more (queued inputs
      // still do, once this pause is over).
      AL_RETURN_IF_ERROR(t.DropWakeupUnlessQueued(session_id));
    }
    AL_RETURN_IF_ERROR(t.InsertCheckpoint(id, checkpoint, now));
    if (events.empty()) return Status::Ok();
    return t.Append(session_id, events, now, fence);
  });
}

Status StoreCore::SetState(std::string_view session_id, std::string_view key, const Json& value) {
  return SetStateFenced(session_id, key, value, nullptr);
}

Status StoreCore::SetStateFenced(std::string_view session_id, std::string_view key,
                                 const Json& value, const LockFence* fence) {
  // An upsert: running it again after a lost reply writes the same value.
  const int64_t now = backend_.Now();
  return backend_.Run(WriteKind(fence), [&](StoreTxn& t) -> Status {
    if (fence != nullptr) AL_RETURN_IF_ERROR(t.CheckFence(session_id, *fence));
    return t.PutState(session_id, key, value, now);
  });
}

Status StoreCore::UpdateSettings(std::string_view session_id, const Json& settings,
                                 std::span<const Event> events) {
  return UpdateSettingsFenced(session_id, settings, events, nullptr);
}

Status StoreCore::UpdateSettingsFenced(std::string_view session_id, const Json& settings,
                                       std::span<const Event> events, const LockFence* fence) {
  if (!settings.is_object()) return InvalidArgument("session settings must be a JSON object");
  const int64_t now = backend_.Now();
  return backend_.Run(WriteKind(fence), [&](StoreTxn& t) -> Status {
    if (fence != nullptr) AL_RETURN_IF_ERROR(t.CheckFence(session_id, *fence));
    AL_RETURN_IF_ERROR(t.PutSettings(session_id, settings));
    return t.Append(session_id, events, now, fence);
  });
}

// --- leases ------------------------------------------------------------------------

Result<std::optional<StoredHolder>> StoreCore::LiveHolder(StoreTxn& t, std::string_view session_id,
                                                          TenantFilter tenant) {
  AL_ASSIGN_OR_RETURN(std::optional<StoredHolder> h, t.LockHolder(session_id, tenant));
  if (!h) return h;
  {
    // A lock this store let go of (its release failed): nobody holds it.
    std::lock_guard lk(unreleased_mu_);
    auto [first, last] = unreleased_.equal_range(std::string(session_id));
    if (std::any_of(first, last, [&](const auto& held) { return held.second == h->token; })) {
      return std::optional<StoredHolder>();
    }
  }
  const bool fresh = backend_.Now() - h->heartbeat_at_ms < backend_.lock_ttl().count();
  const bool alive = h->host != backend_.host() || ProcessAlive(h->pid);
  if (fresh && alive) return h;
  return std::optional<StoredHolder>();
}

Result<std::unique_ptr<SessionLock>> StoreCore::AcquireLock(std::string_view session_id,
                                                            int64_t owner_pid) {
  LockFence fence{NewId("lock"), 0};
  const Status ran = backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(auto holder, LiveHolder(t, session_id));
    if (holder) return HeldBusy(session_id, *holder);
    // Free, or left by a dead or silent holder: taken over (a new epoch
    // fences every later write of the holder before).
    AL_ASSIGN_OR_RETURN(fence.epoch,
                        t.TakeLock(session_id, fence.token, owner_pid, backend_.Now()));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  {
    // Committed: the row replaced any this store failed to release (not
    // before the commit: a takeover that fails leaves that row in place).
    std::lock_guard lk(unreleased_mu_);
    unreleased_.erase(std::string(session_id));
  }
  return std::unique_ptr<SessionLock>(new CoreSessionLock(
      this, std::string(session_id), std::move(fence), backend_.lock_heartbeat()));
}

Status StoreCore::RefreshLock(const std::string& session_id, const std::string& token) {
  int64_t renewed = 0;
  const std::pair<std::string, std::string> held[] = {{session_id, token}};
  const Status ran = backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(renewed, t.RenewLocks(held, backend_.Now()));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  if (renewed == 0) {
    return Busy("the lock on session " + session_id + " was lost (taken over after it expired)");
  }
  return Status::Ok();
}

Status StoreCore::RefreshLocks(const std::vector<std::pair<std::string, std::string>>& held) {
  if (held.empty()) return Status::Ok();
  // One transaction (and one commit) for every held lock: with many
  // locks, one slow commit per lock could leave the last ones unrenewed
  // for longer than their TTL.
  return backend_.Run(TxnKind::kWrite,
                      [&](StoreTxn& t) { return t.RenewLocks(held, backend_.Now()).status(); });
}

void StoreCore::ReleaseLock(const std::string& session_id, const std::string& token) {
  // A failed release (the disk refused the write) leaves a row that other
  // processes see expire (dead pid or TTL); this store remembers it and
  // takes it over at once (LiveHolder), else a server would refuse its own
  // session as busy, queue the inputs sent meanwhile, and nothing would
  // run them.
  const Status released =
      backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) { return t.ReleaseLock(session_id, token); });
  if (!released.ok()) {
    std::lock_guard lk(unreleased_mu_);
    unreleased_.emplace(session_id, token);
  }
}

StoreCore::~StoreCore() { StopHeartbeatThread(); }

void StoreCore::StopHeartbeatThread() {
  {
    std::lock_guard lk(beat_mu_);
    stopping_ = true;
  }
  beat_cv_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
}

void StoreCore::StartHeartbeat(const std::string& session_id, const std::string& token) {
  std::lock_guard lk(beat_mu_);
  if (stopping_) return;
  if (!beat_thread_.joinable()) {
    try {
      beat_thread_ = std::thread([this] { HeartbeatLoop(); });
    } catch (const std::system_error&) {
      // No thread to be had (process limit): the lock is still held, and
      // is renewed by Refresh() (the engine does before each turn) but not
      // in between.
      return;
    }
  }
  beating_.emplace(session_id, token);
}

void StoreCore::StopHeartbeat(const std::string& session_id, const std::string& token) {
  std::lock_guard lk(beat_mu_);
  auto [first, last] = beating_.equal_range(session_id);
  for (auto it = first; it != last; ++it) {
    if (it->second == token) {
      beating_.erase(it);
      break;
    }
  }
}

void StoreCore::HeartbeatLoop() {
  const auto interval = std::max(backend_.lock_ttl() / 3, std::chrono::milliseconds(10));
  std::unique_lock lk(beat_mu_);
  while (!beat_cv_.wait_for(lk, interval, [this] { return stopping_; })) {
    std::vector<std::pair<std::string, std::string>> held(beating_.begin(), beating_.end());
    lk.unlock();
    // A lock released meanwhile is not renewed back: only a lock still
    // held with its token is.
    (void)RefreshLocks(held);
    lk.lock();
  }
}

// --- queued inputs ----------------------------------------------------------------

Result<int64_t> StoreCore::EnqueueInput(std::string_view session_id, std::string_view input,
                                        bool continue_turn) {
  if (input.empty() && !continue_turn) return InvalidArgument("a queued input must not be empty");
  QueuedInput queued{NewId("input"), std::string(session_id), std::string(input), continue_turn,
                     backend_.Now()};
  int64_t place = 0;
  const Status ran = backend_.Run(TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(place, t.InsertQueuedInput(session_id, queued));
    // The session has work: a wake-up, due after the grace in which its
    // holder takes the input itself.
    const int64_t now = queued.created_at_ms;
    return t.LeaveWakeup(session_id, now + backend_.wakeup_grace().count(), now,
                         /*earliest=*/true);
  });
  if (!ran.ok()) return ran;
  return place;
}

Result<std::vector<QueuedInput>> StoreCore::ListQueuedInputs(std::string_view session_id) {
  std::vector<QueuedInput> out;
  const Status ran = backend_.Run(TxnKind::kRead, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(out, t.QueuedInputs(session_id, -1));
    // No input: perhaps no session either.
    if (out.empty()) AL_RETURN_IF_ERROR(t.Session(session_id, std::nullopt).status());
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return out;
}

Result<std::optional<QueuedInput>> StoreCore::TakeQueuedInput(std::string_view session_id,
                                                              int64_t owner_pid) {
  return NextInput(session_id, owner_pid, /*take=*/true);
}

Result<std::optional<QueuedInput>> StoreCore::NextQueuedInput(std::string_view session_id,
                                                              int64_t owner_pid) {
  return NextInput(session_id, owner_pid, /*take=*/false);
}

Result<std::optional<QueuedInput>> StoreCore::NextInput(std::string_view session_id,
                                                        int64_t owner_pid, bool take) {
  std::optional<QueuedInput> next;
  const auto kind = take ? TxnKind::kWrite : TxnKind::kRead;
  const Status ran = backend_.Run(kind, [&](StoreTxn& t) -> Status {
    next.reset();
    // The lock is kept from a taker until this transaction ends: a
    // takeover commits before this read (the holder differs: refused) or
    // after the input is taken.
    AL_ASSIGN_OR_RETURN(auto holder, LiveHolder(t, session_id));
    if (!holder || holder->pid != owner_pid || holder->host != backend_.host()) {
      return LeaseLost("session " + std::string(session_id) + ": pid " + std::to_string(owner_pid) +
                       " on " + backend_.host() +
                       " does not hold its lock and may not take its queued input");
    }
    // A paused batch's turn goes first.
    AL_ASSIGN_OR_RETURN(bool paused, t.HasPausedBatch(session_id));
    if (paused) return Status::Ok();
    AL_ASSIGN_OR_RETURN(std::vector<QueuedInput> first, t.QueuedInputs(session_id, 1));
    if (first.empty()) return Status::Ok();
    if (take) {
      AL_ASSIGN_OR_RETURN(bool taken, t.DeleteQueuedInput(session_id, first[0].id));
      if (!taken) return Status::Ok();
      // The last input taken with no decided batch waiting: no work left.
      AL_RETURN_IF_ERROR(t.DropWakeupUnlessQueued(session_id));
    }
    next = std::move(first[0]);
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return next;
}

Status StoreCore::AppendTakingInput(std::string_view session_id, std::span<const Event> events,
                                    std::string_view input_id, const LockFence* fence) {
  const int64_t now = backend_.Now();
  return backend_.Run(TxnKind::kLeaseWrite, [&](StoreTxn& t) -> Status {
    // The session's lock first (as Append and TakeQueuedInput take it),
    // then the input.
    if (fence != nullptr) AL_RETURN_IF_ERROR(t.CheckFence(session_id, *fence));
    AL_ASSIGN_OR_RETURN(bool taken, t.DeleteQueuedInput(session_id, input_id));
    if (!taken) {
      // An earlier attempt that committed (its reply lost) took it with
      // the events: Append finds them stored.
      if (!t.again() || events.empty()) {
        return NotFound("queued input " + std::string(input_id) + " of session " +
                        std::string(session_id) + " is no longer queued");
      }
    } else {
      // The last input taken: no work left (a decided batch never waits
      // while an input is taken).
      AL_RETURN_IF_ERROR(t.DropWakeupUnlessQueued(session_id));
    }
    if (events.empty()) return Status::Ok();
    return t.Append(session_id, events, now, fence);
  });
}

}  // namespace agentloop::store
