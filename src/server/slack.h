// Clicks on the Approve / Deny buttons of a Slack notification
// (docs/notifications.md): Slack POSTs them to /v1/slack/interactions,
// form-encoded, the JSON in the field `payload`, signed with the app's
// signing secret.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop::server {

// Checks Slack's request signature: `signature` (X-Slack-Signature) must be
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)) for one
// of `secrets` (compared in constant time), and `timestamp`
// (X-Slack-Request-Timestamp, Unix seconds) at most 300 s from `now_s`.
// Returns the index of the secret that signed. Errors: kPermissionDenied,
// saying which check failed (never a secret or the expected signature).
Result<size_t> VerifySlackSignature(const std::vector<std::string>& secrets,
                                    std::string_view timestamp, std::string_view signature,
                                    std::string_view body, int64_t now_s);

// The signature Slack would send (tests, and the stand-in's logic).
std::string SlackSignature(std::string_view secret, std::string_view timestamp,
                           std::string_view body);

// One button click.
struct SlackClick {
  std::string action_id;  // "approve" | "deny" | another (a link button)
  std::string value;      // the link token
  std::string user;       // who clicked: the user's name, else id
  std::string response_url;
};

// Parses a verified interaction body. Errors: kInvalidArgument for a body
// that is not form-encoded with a JSON `payload` of type block_actions.
Result<SlackClick> ParseSlackInteraction(std::string_view body);

// Whether the server may POST to `url`, a response_url of a verified
// interaction: https, or the origin of one of `api_base_urls` (a
// Slack-compatible server, a test's stand-in).
bool SlackResponseUrlAllowed(std::string_view url, const std::vector<std::string>& api_base_urls);

// The message replacing a clicked one (render.h SlackReplacement): what a
// link's page would say (`heading`, `message`) about `tool` of `agent`,
// naming `user` when the click decided ("Approved by alice").
Json SlackDecisionMessage(std::string_view heading, std::string_view message, std::string_view tool,
                          std::string_view agent, std::string_view user);

}  // namespace agentloop::server
