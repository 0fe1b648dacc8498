// ServerStateCore: the HTTP server's state (agentloop/server_state.h)
// written once for every backend.
#include <string>
#include <utility>

#include "store/store_core.h"

namespace agentloop {

ServerStateStore* ServerStateOf(SessionStore& store) {
  auto* core = dynamic_cast<store::StoreCore*>(&store);
  return core != nullptr ? &core->server_state() : nullptr;
}

namespace store {

// --- the HTTP server's state --------------------------------------------------------

Result<IdempotencyClaim> ServerStateCore::ClaimIdempotencyKey(
    std::string_view tenant, std::string_view key, std::string_view fingerprint,
    std::chrono::milliseconds ttl, std::chrono::milliseconds in_flight_ttl) {
  const int64_t now = backend_.Now();
  IdempotencyClaim claim;
  const Status ran = backend_.Run(StoreBackend::TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    claim = IdempotencyClaim{};
    AL_RETURN_IF_ERROR(t.ForgetIdempotencyKeys(now - ttl.count(), now - in_flight_ttl.count()));
    AL_ASSIGN_OR_RETURN(bool added, t.InsertIdempotencyKey(tenant, key, fingerprint, now));
    if (added) return Status::Ok();
    AL_ASSIGN_OR_RETURN(std::optional<IdempotencyRecord> r, t.IdempotencyKey(tenant, key));
    if (!r) return Unavailable("idempotency key " + std::string(key) + " changed; retry");
    if (r->fingerprint != fingerprint) {
      claim.kind = IdempotencyClaim::Kind::kReused;
    } else if (!r->response) {
      claim.kind = IdempotencyClaim::Kind::kInFlight;
    } else {
      claim.kind = IdempotencyClaim::Kind::kDone;
      claim.response = std::move(*r->response);
    }
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return claim;
}

Status ServerStateCore::FinishIdempotencyKey(std::string_view tenant, std::string_view key,
                                             std::string_view response) {
  return backend_.Run(StoreBackend::TxnKind::kWrite,
                      [&](StoreTxn& t) { return t.SetIdempotencyResponse(tenant, key, response); });
}

Status ServerStateCore::ReleaseIdempotencyKey(std::string_view tenant, std::string_view key) {
  return backend_.Run(StoreBackend::TxnKind::kWrite, [&](StoreTxn& t) {
    return t.SetIdempotencyResponse(tenant, key, std::nullopt);
  });
}

Result<bool> ServerStateCore::AddNotification(const OutboxNotification& n,
                                              std::chrono::milliseconds lease) {
  if (n.id.empty()) return InvalidArgument("a notification needs an id");
  const int64_t now = backend_.Now();
  bool added = false;
  const Status ran = backend_.Run(StoreBackend::TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_RETURN_IF_ERROR(t.LockSession(n.session_id));
    AL_ASSIGN_OR_RETURN(added, t.InsertNotification(n, now, now + lease.count()));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return added;
}

Result<std::vector<OutboxNotification>> ServerStateCore::ClaimNotifications(
    int limit, std::chrono::milliseconds lease, std::chrono::milliseconds max_age) {
  const int64_t now = backend_.Now();
  std::vector<OutboxNotification> out;
  const Status ran = backend_.Run(StoreBackend::TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_RETURN_IF_ERROR(t.ForgetNotifications(now - max_age.count()));
    AL_ASSIGN_OR_RETURN(out, t.ClaimDueNotifications(now, now + lease.count(), limit));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return out;
}

Status ServerStateCore::FinishNotification(std::string_view id) {
  // An unknown id is not an error (its session may have been removed).
  return backend_.Run(StoreBackend::TxnKind::kWrite,
                      [&](StoreTxn& t) { return t.FinishNotification(id); });
}

Status ServerStateCore::RevokeCredential(std::string_view tenant, std::string_view id,
                                         int64_t expires_at_ms) {
  if (id.empty()) return InvalidArgument("a revoked credential needs an id");
  return backend_.Run(StoreBackend::TxnKind::kWrite, [&](StoreTxn& t) {
    return t.InsertRevokedCredential(tenant, id, expires_at_ms);
  });
}

Result<std::vector<std::string>> ServerStateCore::ListRevokedCredentials() {
  const int64_t now = backend_.Now();
  std::vector<std::string> out;
  const Status ran = backend_.Run(StoreBackend::TxnKind::kWrite, [&](StoreTxn& t) -> Status {
    AL_ASSIGN_OR_RETURN(out, t.RevokedCredentials(now));
    return Status::Ok();
  });
  if (!ran.ok()) return ran;
  return out;
}

}  // namespace store
}  // namespace agentloop
