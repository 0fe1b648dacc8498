// Signed approval links: a capability to decide one pending item, carried by
// an agent's webhook notification to whoever must decide (docs/server.md,
// "Notifications").
//
// A link's token is `<claim>.<mac>`: the claim is the base64url (unpadded)
// JSON {"a": agent, "p": pending id, "d": action, "e": expiry in Unix
// seconds}, the mac the lower-case hex HMAC-SHA256 of the claim's text under
// the agent's link key. The token names its agent, so the key is known
// before any store call; it is checked in constant time. A token is good
// for one decision: the item it names is decided once (the store records the
// first decision; a second use finds it decided).
//
// The link key is derived from the agent's webhook secret: whoever holds
// that secret can mint links, as whoever receives the notifications holds
// the links themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

#include "server/http_server.h"

namespace agentloop::server {

struct LinkClaim {
  std::string agent;
  std::string pending_id;
  std::string action;  // "approve", "deny" or "answer"
  int64_t expires_at = 0;
};

// The key links of an agent are signed with. Errors: kInvalidArgument for an
// empty secret.
Result<std::string> LinkKey(std::string_view webhook_secret);

// A token for `claim` signed with `key`.
Result<std::string> MintLinkToken(std::string_view key, const LinkClaim& claim);

// Why a token is refused.
enum class LinkRefusal {
  kMalformed,  // not a token this server writes
  kForged,     // the mac does not match (or the agent has no key)
  kExpired,    // signed, but past its expiry
};

struct LinkCheck {
  std::optional<LinkClaim> claim;  // set when the token is good
  LinkRefusal refusal = LinkRefusal::kMalformed;
};

// Checks `token` at `now` (Unix seconds). `key_for` gives the link key of an
// agent, or nullopt for an agent without one.
LinkCheck CheckLinkToken(
    std::string_view token, int64_t now,
    const std::function<std::optional<std::string>(const std::string&)>& key_for);

// What a link's page shows. Every string is plain text: LinkPage escapes it.
struct LinkView {
  unsigned status = 200;
  std::string heading;
  std::string message;
  // The item, when it is shown.
  std::string agent, session_id, tool, reason, arguments;
  // Set: the page carries the form that decides (approve, deny with an
  // optional reason, or answer with the question's options and free text).
  std::string action;
  std::vector<std::string> options;
};

// An HTML page for a link: no script, nothing loaded from elsewhere, never
// cached, never framed, and no Referer carrying the token onward.
Response LinkPage(const LinkView& view);

}  // namespace agentloop::server
