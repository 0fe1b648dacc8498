// ServerStateStore: what the HTTP server (`agentloop serve`) keeps in the
// session store's database besides the sessions: its notification outbox,
// its idempotency keys and the console sign-ins revoked before they expire.
//
// Only the server uses these; they are shaped by what it needs and live
// beside the SessionStore, not in it. A store opened by this library
// (OpenSqliteStore, OpenPostgresStore) keeps them in its own database, in
// the same transactions and connections as its sessions, so servers that
// share a store share this state too (docs/storage.md, "The server's
// state"). ServerStateOf reaches it from the opened store.
//
// Durability and thread-safety: as the SessionStore's (agentloop/store.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop {

class SessionStore;

// What claiming an idempotency key found.
struct IdempotencyClaim {
  enum class Kind {
    kClaimed,   // new: the caller runs the request, then Finish or Release
    kInFlight,  // the same request is still being run
    kReused,    // the key was used for a different request
    kDone,      // the same request was answered: `response`
  };
  Kind kind = Kind::kClaimed;
  std::string response;
};

// A notification of the HTTP server (a webhook POST) in the store's outbox:
// recorded when the server decides to send it, claimed by whoever delivers
// it, finished once delivered (ServerStateStore::AddNotification).
struct OutboxNotification {
  // The delivery id (X-Agentloop-Delivery): unique, the same for every
  // attempt, so a receiver can drop a repeat.
  std::string id;
  std::string session_id;
  std::string agent;
  std::string event;          // "approval.requested", ...
  std::string body;           // what is POSTed; opaque to the store
  int64_t created_at_ms = 0;  // set by AddNotification
};

class ServerStateStore {
 public:
  virtual ~ServerStateStore() = default;

  // --- the notification outbox ----------------------------------------------
  //
  // At-least-once delivery of webhooks across restarts (docs/server.md,
  // "Notifications"): a notification is recorded before its first attempt
  // and stays due until FinishNotification; whoever claims a due one
  // delivers it, and a claim that is not finished makes it due again after
  // the claim's lease (its claimer crashed, or gave up for now).

  // Records `n` (undelivered) unless a notification with its id is recorded
  // already, delivered or not: true when it was added. The caller delivers
  // it: it is due for ClaimNotifications `lease` from now. A notification
  // belongs to its session: removing the session removes it. Errors:
  // kNotFound (no such session), kInvalidArgument (an empty id).
  virtual Result<bool> AddNotification(const OutboxNotification& n,
                                       std::chrono::milliseconds lease) = 0;
  // Claims up to `limit` due undelivered notifications, oldest first: each
  // is due again `lease` later (unless finished by then). Notifications
  // recorded more than `max_age` ago are forgotten first, delivered or not.
  virtual Result<std::vector<OutboxNotification>> ClaimNotifications(
      int limit, std::chrono::milliseconds lease, std::chrono::milliseconds max_age) = 0;
  // Marks a notification delivered (or refused for good by its receiver): no
  // claim returns it again, and AddNotification of its id adds nothing. An
  // unknown id is not an error (its session may have been removed).
  virtual Status FinishNotification(std::string_view id) = 0;

  // --- revoked console sign-ins ----------------------------------------------
  //
  // A console cookie (docs/console.md) is signed, not stored: signing out
  // records its id here so that no server sharing the store accepts a copy.

  // Records that the credential `id` of `tenant` is revoked until
  // `expires_at_ms`, when it stops working anyway. Revoking it again changes
  // nothing. Errors: kInvalidArgument (an empty id).
  virtual Status RevokeCredential(std::string_view tenant, std::string_view id,
                                  int64_t expires_at_ms) = 0;
  // The ids of the revoked credentials that have not expired yet; expired
  // ones are forgotten.
  virtual Result<std::vector<std::string>> ListRevokedCredentials() = 0;

  // --- idempotency keys --------------------------------------------------------

  // Claims (tenant, key) for a request whose content hashes to
  // `fingerprint`, in one transaction. A record older than `ttl` is
  // forgotten first, and so is an unfinished one older than `in_flight_ttl`
  // (its request was abandoned, e.g. by a crash).
  virtual Result<IdempotencyClaim> ClaimIdempotencyKey(std::string_view tenant,
                                                       std::string_view key,
                                                       std::string_view fingerprint,
                                                       std::chrono::milliseconds ttl,
                                                       std::chrono::milliseconds in_flight_ttl) = 0;
  // Stores the answer of a claimed key (`response` is opaque to the store).
  virtual Status FinishIdempotencyKey(std::string_view tenant, std::string_view key,
                                      std::string_view response) = 0;
  // Forgets a claimed key (its request failed in a way a retry may fix).
  virtual Status ReleaseIdempotencyKey(std::string_view tenant, std::string_view key) = 0;
};

// The server's state kept in the database of `store`, valid as long as
// `store` is. Null when `store` is not one this library opened
// (OpenSqliteStore, OpenPostgresStore, OpenDefaultStore): a store an
// embedder wrote keeps no server state, and a server cannot run on it.
ServerStateStore* ServerStateOf(SessionStore& store);

}  // namespace agentloop
