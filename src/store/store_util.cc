#include "store/store_util.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <exception>
#include <system_error>

#include "protocol/codec.h"
#include "store/replay.h"

namespace agentloop::store {

std::string NormalizeWorkspace(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::path abs = p.is_absolute() ? p : std::filesystem::absolute(p, ec);
  if (ec) abs = p;
  std::string s = abs.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

Status SessionNotFound(std::string_view id) {
  return NotFound("no session '" + std::string(id) + "'");
}

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

Result<Checkpoint> ParseCheckpoint(const std::string& json, const std::string& id) {
  auto j = ParseJson(json);
  if (!j.ok()) return DataLoss("checkpoint " + id + " is corrupt: " + j.error().message());
  auto cp = CheckpointFromJson(*j);
  if (!cp.ok()) return DataLoss("checkpoint " + id + " is corrupt: " + cp.error().message());
  return std::move(*cp);
}

// The title candidate of a message event, or empty.
std::string TitleFrom(const Event& e) {
  const MessageData* d = e.As<MessageData>();
  if (d == nullptr || d->message.role != Role::kUser || !d->message.tag.empty()) return {};
  return MakeTitle(d->message.JoinedText());
}

// The outstanding item `pending_id` of a checkpoint the pending index points
// to. kDataLoss when the index and the checkpoint disagree.
Result<PendingItem> IndexedItem(const Checkpoint& cp, std::string_view pending_id,
                                const std::string& checkpoint_id) {
  for (const PendingItem& p : cp.outstanding) {
    if (p.id == pending_id) return p;
  }
  return DataLoss("pending id " + std::string(pending_id) + " is indexed but not in checkpoint " +
                  checkpoint_id);
}

Status CheckAppendable(const Event& e, std::string_view session_id, uint64_t* last) {
  if (!e.session_id.empty() && e.session_id != session_id) {
    return InvalidArgument("event seq " + std::to_string(e.seq) + " belongs to session " +
                           e.session_id + ", not " + std::string(session_id));
  }
  if (e.ts <= 0) {
    return InvalidArgument("event seq " + std::to_string(e.seq) + " (" +
                           std::string(EventTypeName(e.type)) +
                           ") has no ts: whoever numbers an event stamps its time");
  }
  if (e.seq <= *last) {
    return AlreadyExists("session " + std::string(session_id) + ": event seq " +
                         std::to_string(e.seq) + " is already stored (the last stored seq is " +
                         std::to_string(*last) + ")");
  }
  *last = e.seq;
  return Status::Ok();
}

Result<ResolveOutcome> ApplyResolution(std::string checkpoint_id, Checkpoint checkpoint,
                                       std::string_view pending_id, const ResolveFn& fn) {
  ResolveOutcome out;
  out.checkpoint_id = std::move(checkpoint_id);
  out.checkpoint = std::move(checkpoint);
  // The index says the item waits in this open checkpoint; a checkpoint
  // without it is corrupt (kDataLoss), never "already resolved".
  AL_ASSIGN_OR_RETURN(out.item, IndexedItem(out.checkpoint, pending_id, out.checkpoint_id));
  Result<ResolveAction> action = Internal("resolver threw");
  try {
    action = fn(out.checkpoint, out.item);
  } catch (const std::exception& e) {
    action = Internal(std::string("resolver threw: ") + e.what());
  } catch (...) {
  }
  if (!action.ok()) return action.error();
  auto& outstanding = out.checkpoint.outstanding;
  std::erase_if(outstanding, [&](const PendingItem& p) { return p.id == pending_id; });
  out.closed = outstanding.empty() || *action == ResolveAction::kCloseBatch;
  return out;
}

std::vector<Event> NumberAfter(std::span<const Event> events, const std::string& session_id,
                               uint64_t last_seq, int64_t now) {
  std::vector<Event> numbered(events.begin(), events.end());
  for (Event& e : numbered) {
    e.session_id = session_id;
    e.seq = ++last_seq;
    if (e.ts == 0) e.ts = now;
  }
  return numbered;
}

EventQuerySql BuildEventQuerySql(const EventQuery& q, int first, std::string_view prefix) {
  EventQuerySql out;
  int n = first;
  auto next = [&] { return std::string(prefix) + std::to_string(n++); };
  std::string& sql = out.where_order_limit;
  sql = " AND seq > " + next();
  if (!q.turn_id.empty()) {
    out.has_turn = true;
    sql += " AND turn_id = " + next();
  }
  if (!q.types.empty()) {
    out.types = q.types.size();
    sql += " AND type IN (";
    for (size_t i = 0; i < q.types.size(); ++i) sql += (i ? ", " : "") + next();
    sql += ")";
  }
  sql += q.newest_first ? " ORDER BY seq DESC" : " ORDER BY seq";
  if (q.limit > 0) {
    out.has_limit = true;
    sql += " LIMIT " + next();
  }
  return out;
}

}  // namespace agentloop::store

namespace agentloop {

const StoredEvent* UnfinishedTurn(std::span<const StoredEvent> events) {
  const StoredEvent* begun = nullptr;
  for (const StoredEvent& e : events) {
    if (e.kind() == EventType::kTurnBegin) begun = &e;
    if (e.kind() == EventType::kTurnEnd) begun = nullptr;
  }
  return begun;
}

}  // namespace agentloop
