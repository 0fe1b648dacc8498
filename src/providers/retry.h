// Failure classification and the retry loop shared by the HTTP providers.
//
// Classification of HTTP statuses is here and only here (transport errors
// are classified by the HTTP client, http_client.h); statuses map to Status
// codes; whether a code is retried is decided by IsRetryable()
// (status.h). 408/409/429/500/502/503/504/529 and connection failures are
// retryable; other 4xx are not; 400/413 answers that say the prompt is too
// long become kPromptTooLong (the engine compacts and retries).
//
// Thread-safety: pure functions; RetryPolicy is a value (its wait function
// must be thread-safe when the policy is shared).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "agentloop/event_data.h"
#include "agentloop/status.h"

#include "providers/http_client.h"

namespace agentloop {

// Maps a non-2xx HTTP answer to a Status. The message names the status and
// the provider's error message (from a JSON error body when there is one),
// with secrets redacted and length bounded; a 401 starts with
// "authentication failed: ".
Status ClassifyHttpStatus(long status, std::string_view body);

// Whether an error body / message says the prompt exceeded the context
// window (SEMANTICS 4.6).
bool LooksLikePromptTooLong(std::string_view code, std::string_view message);

// The server's requested delay: `retry-after-ms` (ms) wins over
// `retry-after` (seconds). HTTP-date forms are ignored.
std::optional<std::chrono::milliseconds> ParseRetryAfter(const HttpHeaders& headers);

// A failed attempt: its Status plus the server's requested delay, if any.
struct AttemptError {
  Status status;
  std::optional<std::chrono::milliseconds> retry_after;
};

struct RetryPolicy {
  std::chrono::milliseconds base{500};
  std::chrono::milliseconds cap{30000};
  // At most this many consecutive failed attempts; then the last error is
  // returned.
  int max_attempts = 6;
  // Waits `delay` unless `stop` fires first; returns false when cancelled.
  // Default: a condition-variable wait interruptible by the stop token.
  // Tests inject a function that records the delay and returns at once.
  std::function<bool(std::chrono::milliseconds, const std::stop_token&)> wait;

  // Backoff before retry number `attempt` (1-based), with jitter in
  // [delay/2, delay]; a server retry-after (bounded by 2*cap) replaces it.
  std::chrono::milliseconds Delay(int attempt,
                                  std::optional<std::chrono::milliseconds> retry_after) const;
};

// Waits `delay` or until `stop` fires (false when cancelled).
bool InterruptibleWait(std::chrono::milliseconds delay, const std::stop_token& stop);

// What follows failed attempt number `attempt` (1-based) that ended with
// `error`: either a retry (`retry` set: the next attempt, its delay and the
// reason, for a `retry` event) or the final error (`final`: the error,
// with "(after N attempts)" when retries ran out). The one retry decision,
// for the blocking loop below and for callers that wait on their own timer.
struct RetryStep {
  std::optional<RetryData> retry;
  Status final;
};
RetryStep NextRetry(const RetryPolicy& policy, int attempt, const AttemptError& error);

// Runs `attempt` until it succeeds, fails with a non-retryable Status, or
// `policy.max_attempts` consecutive attempts failed. Before each wait,
// `on_retry` (may be null) hears of the retry. kCancelled when `stop` fires
// during a wait.
template <typename T>
Result<T> RunWithRetry(const RetryPolicy& policy, const std::stop_token& stop,
                       const std::function<Result<T>(AttemptError*)>& attempt,
                       const std::function<void(const RetryData&)>& on_retry = nullptr) {
  for (int n = 1;; ++n) {
    if (stop.stop_requested()) return Cancelled("model call cancelled");
    AttemptError err;
    Result<T> r = attempt(&err);
    if (r.ok()) return r;
    if (stop.stop_requested()) return Cancelled("model call cancelled");
    err.status = r.error();
    RetryStep next = NextRetry(policy, n, err);
    if (!next.retry) return next.final;
    if (on_retry) on_retry(*next.retry);
    std::chrono::milliseconds d(next.retry->delay_ms);
    bool waited = policy.wait ? policy.wait(d, stop) : InterruptibleWait(d, stop);
    if (!waited) return Cancelled("model call cancelled");
  }
}

}  // namespace agentloop

namespace agentloop {
// Maps an error reported inside a started stream (Anthropic `error` event,
// a Chat Completions error chunk, Responses `response.failed`/`error`) to a
// Status. Overloaded/server/unknown errors are kUnavailable (the whole
// request is retried); invalid requests, auth and prompt-too-long are not.
Status ClassifyStreamError(std::string_view type_or_code, std::string_view message);
}  // namespace agentloop
