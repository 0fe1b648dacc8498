// The webhook approver: tells a remote system that a call waits for a
// decision, then pauses the turn durably.
//
// Decide() builds a JSON payload
//   {"pending_id", "session_id", "turn_id", "tool_use_id", "kind",
//    "tool", "arguments", "reason", "requested_at"}
// (kind "approval" or "question"; requested_at in Unix seconds), signs the
// exact body bytes with HMAC-SHA256 under a shared secret and POSTs it with
//   Content-Type: application/json
//   X-Agentloop-Signature: sha256=<lower-case hex>
// through an injected HTTP function (the HTTP client lives in src/providers; the
// engine wires it). Retryable failures (IsRetryable) are retried with
// exponential backoff. Whatever happens the answer is kDefer: the pending
// item is in the engine's checkpoint either way, so a lost notification
// loses nothing; each delivery (success or final failure) is recorded in
// deliveries() and passed to `on_delivery`, so failures are reported.
// The receiver answers later with `agentloop approve|deny|answer`.
//
// Thread-safety: Decide() may be called concurrently; deliveries() is
// synchronised.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentloop/permission.h"
#include "agentloop/status.h"

namespace agentloop::permissions {

inline constexpr std::string_view kSignatureHeader = "X-Agentloop-Signature";

// "sha256=<64 lower-case hex digits>" = HMAC-SHA256(secret, body).
// Errors: kInvalidArgument for an empty secret, kInternal if OpenSSL fails.
Result<std::string> SignPayload(std::string_view secret, std::string_view body);

// Whether `header` is a valid signature of `body` under `secret` (hex is
// accepted in either case; compared in constant time). False for an empty
// secret or a malformed header.
bool VerifySignature(std::string_view secret, std::string_view body, std::string_view header);

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;
// POSTs `body` to `url`; OK on a 2xx answer. Must not throw.
using HttpPostFn = std::function<Status(const std::string& url, const HttpHeaders& headers,
                                        const std::string& body)>;

struct WebhookDelivery {
  std::string pending_id;
  std::string url;
  int attempts = 0;
  Status status;     // OK: delivered; else the last failure
  std::string body;  // the signed payload
};

struct WebhookOptions {
  std::string url;     // required
  std::string secret;  // required (unsigned notifications are not offered)
  HttpPostFn post;     // required
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  // Waits `d` between attempts; returns false when `stop` fired. Default: a
  // condition-variable wait that wakes on `stop`. Tests inject one that
  // records the delays and returns at once.
  std::function<bool(std::chrono::milliseconds d, std::stop_token stop)> delay;
  // Source of requested_at. Default: the system clock.
  std::function<std::chrono::system_clock::time_point()> clock;
  // Called after each delivery ends (delivered, failed for good, or cancelled).
  std::function<void(const WebhookDelivery&)> on_delivery;
  size_t max_log = 1000;  // deliveries() keeps the most recent ones
};

class WebhookApprover final : public Approver {
 public:
  // Errors (kInvalidArgument): missing url, secret or post function,
  // max_attempts < 1.
  static Result<std::unique_ptr<WebhookApprover>> Create(WebhookOptions options);

  // Delivers (with retries), then returns kDefer (by = "webhook"). If `stop`
  // fires during the retries it returns kDeny("cancelled") at once.
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override;

  // The payload for `request` (exposed for tests and `agentloop pending`).
  static Json BuildPayload(const ApprovalRequest& request,
                           std::chrono::system_clock::time_point requested_at);

  std::vector<WebhookDelivery> deliveries() const;

 private:
  explicit WebhookApprover(WebhookOptions options);
  void Record(WebhookDelivery d);

  const WebhookOptions options_;
  mutable std::mutex mu_;
  std::deque<WebhookDelivery> log_;  // Guarded by mu_.
};

}  // namespace agentloop::permissions
