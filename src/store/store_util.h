// Helpers shared by the store implementations (SQLite, PostgreSQL).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentloop/store.h"

namespace agentloop::store {

// The absolute, lexically normal form of a workspace path, without a
// trailing slash: the form stored and compared.
std::string NormalizeWorkspace(const std::filesystem::path& p);

// This machine's host name ("unknown" when it cannot be read).
std::string HostName();

Status SessionNotFound(std::string_view id);

// "2024-05-01T12:00:00Z" from Unix epoch milliseconds.
std::string FormatUtc(int64_t ms);

// Whether a process with this pid exists (kill(pid, 0) != ESRCH).
bool ProcessAlive(int64_t pid);

// A stored checkpoint. Errors: kDataLoss naming the checkpoint.
Result<Checkpoint> ParseCheckpoint(const std::string& json, const std::string& id);

// The title candidate of a message event (the first untagged user message),
// or empty.
std::string TitleFrom(const Event& e);

// The outstanding item `pending_id` of a checkpoint the pending index points
// to. kDataLoss when the index and the checkpoint disagree.
Result<PendingItem> IndexedItem(const Checkpoint& cp, std::string_view pending_id,
                                const std::string& checkpoint_id);

// One event of an Append batch (a persisted one: ShouldPersist), checked
// before it is stored in session `session_id` whose highest stored seq (or
// the batch's previous event's) is *last; advances *last. Seqs only grow:
// a reader that has seen seq N never misses a lower one committed later, so
// a seq at or below *last is refused as already stored even when that exact
// seq is a gap. Errors: kInvalidArgument (an event of another session, an
// event without ts), kAlreadyExists.
Status CheckAppendable(const Event& e, std::string_view session_id, uint64_t* last);

// The domain part of SessionStore::Resolve, the same on every store: run
// inside the resolving transaction once it holds `checkpoint` (stored as
// `checkpoint_id`), open, whose index row for `pending_id` is not resolved.
// Finds the item, runs `fn` (an exception becomes kInternal), removes the
// item from `outstanding` and says whether the batch is decided now. The
// caller stores the outcome's checkpoint and rolls back on any error.
// Errors: kDataLoss when the checkpoint does not hold the item the index
// names (see Resolve's contract); `fn`'s error.
Result<ResolveOutcome> ApplyResolution(std::string checkpoint_id, Checkpoint checkpoint,
                                       std::string_view pending_id, const ResolveFn& fn);

// The events of a decision, numbered after `last_seq` (the session's highest
// stored seq) in session `session_id` and stamped `now` where unstamped.
std::vector<Event> NumberAfter(std::span<const Event> events, const std::string& session_id,
                               uint64_t last_seq, int64_t now);

// The SQL of an EventQuery that follows "... FROM <events> WHERE
// session_id = <first placeholder>": its conditions, order and limit, with
// placeholders `prefix`N (SQLite "?", PostgreSQL "$") numbered from
// `first`. The caller binds, in order: after_seq, the turn id (has_turn),
// each type (`types` of them), the limit (has_limit). One query shape for
// both stores.
struct EventQuerySql {
  std::string where_order_limit;
  // In placeholder order: after_seq, then turn_id (if any), then the types,
  // then the limit (if any).
  bool has_turn = false;
  size_t types = 0;
  bool has_limit = false;
};
EventQuerySql BuildEventQuerySql(const EventQuery& q, int first, std::string_view prefix);

// Which tenant's rows a statement may match: one tenant's (a TenantStore's
// calls), or every tenant's (nullopt: SessionStore's own calls).
using TenantFilter = std::optional<std::string_view>;

// The TenantStore of a store S, one piece of code for both stores: each
// call is S's *In method of the same name, given the view's tenant, which
// puts it into the call's statements. REQUIRES: `store` outlives the view.
template <class S>
class ScopedStore final : public TenantStore {
 public:
  ScopedStore(S& store, std::string tenant) : store_(store), tenant_(std::move(tenant)) {}

  const std::string& tenant() const override { return tenant_; }
  Result<SessionInfo> GetSession(std::string_view session_id) override {
    return store_.GetSessionIn(tenant_, session_id);
  }
  Status RemoveSession(std::string_view session_id) override {
    return store_.RemoveSessionIn(tenant_, session_id);
  }
  Status RelabelSession(std::string_view session_id, std::optional<std::string> title,
                        std::optional<Json> metadata) override {
    return store_.RelabelSessionIn(tenant_, session_id, std::move(title), std::move(metadata));
  }
  Result<std::vector<StoredEvent>> Events(std::string_view session_id,
                                          uint64_t after_seq) override {
    return store_.EventsIn(tenant_, session_id, after_seq);
  }
  Result<std::vector<StoredEvent>> QueryEvents(std::string_view session_id,
                                               const EventQuery& query) override {
    return store_.QueryEventsIn(tenant_, session_id, query);
  }
  Result<SessionSnapshot> Load(std::string_view session_id, const LoadOptions& options) override {
    return store_.LoadIn(tenant_, session_id, options);
  }
  Result<std::optional<Json>> GetSettings(std::string_view session_id) override {
    return store_.GetSettingsIn(tenant_, session_id);
  }
  Result<std::optional<PendingRecord>> GetPending(std::string_view pending_id) override {
    AL_ASSIGN_OR_RETURN(std::optional<PendingLookup> found,
                        store_.LookupPendingIn(tenant_, pending_id));
    if (!found || found->state != PendingLookup::State::kOutstanding) {
      return std::optional<PendingRecord>();
    }
    return std::optional<PendingRecord>(std::move(found->record));
  }
  Result<std::optional<PendingLookup>> LookupPending(std::string_view pending_id) override {
    return store_.LookupPendingIn(tenant_, pending_id);
  }
  Result<ResolveOutcome> Resolve(std::string_view pending_id, const ResolveFn& fn,
                                 std::span<const Event> events) override {
    return store_.ResolveIn(tenant_, pending_id, fn, events);
  }

 private:
  S& store_;
  const std::string tenant_;
};

}  // namespace agentloop::store
