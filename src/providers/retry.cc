#include "providers/retry.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>

#include "agentloop/json.h"

#include "base/ids.h"
#include "base/strings.h"

namespace agentloop {
namespace {

constexpr size_t kMaxMessage = 600;

// Pulls (code/type, message) out of an OpenAI/Anthropic style error body.
void ExtractError(std::string_view body, std::string* code, std::string* message) {
  Result<Json> j = ParseJson(body);
  if (!j.ok() || !j->is_object()) {
    *message = std::string(Trim(body));
    return;
  }
  const Json* e = &*j;
  if (auto it = j->find("error"); it != j->end()) {
    if (it->is_object()) {
      e = &*it;
    } else if (it->is_string()) {
      *message = it->get<std::string>();
      return;
    }
  }
  auto str = [&](const char* k) -> std::string {
    auto it = e->find(k);
    return it != e->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  *code = str("code");
  if (code->empty()) *code = str("type");
  *message = str("message");
  if (message->empty()) *message = DumpJson(*e);
}

}  // namespace

bool LooksLikePromptTooLong(std::string_view code, std::string_view message) {
  if (code == "context_length_exceeded") return true;
  std::string m = ToLower(message);
  static constexpr std::string_view kMarkers[] = {
      "prompt is too long",      "too many tokens", "maximum context length",
      "context_length_exceeded", "input length",    "exceeds the maximum"};
  for (std::string_view k : kMarkers) {
    if (m.find(k) != std::string::npos) return true;
  }
  return false;
}

Status ClassifyHttpStatus(long status, std::string_view body) {
  std::string code, message;
  ExtractError(body, &code, &message);
  std::string text = "HTTP " + std::to_string(status);
  if (!code.empty()) text += " " + code;
  if (!message.empty())
    text += ": " + std::string(TruncateUtf8(SanitizeUtf8(message), kMaxMessage));
  text = RedactSecrets(text);
  if ((status == 400 || status == 413) && LooksLikePromptTooLong(code, message)) {
    return PromptTooLong(text);
  }
  switch (status) {
    case 401:
      // The key is missing, wrong or revoked: say so in words, not only as a
      // status (front ends add which variable holds the key).
      return PermissionDenied("authentication failed: " + text);
    case 403:
      return PermissionDenied(text);
    case 404:
      return NotFound(text);
    case 408:
      return DeadlineExceeded(text);
    case 429:
      return ResourceExhausted(text);
    case 409:
    case 500:
    case 502:
    case 503:
    case 504:
    case 529:
      return Unavailable(text);
    default:
      break;
  }
  if (status >= 400 && status < 500) return InvalidArgument(text);
  if (status >= 500) return Internal(text);
  return Internal("unexpected " + text);
}

std::optional<std::chrono::milliseconds> ParseRetryAfter(const HttpHeaders& headers) {
  auto parse = [](std::string_view v, double scale) -> std::optional<std::chrono::milliseconds> {
    v = Trim(v);
    if (v.empty()) return std::nullopt;
    try {
      size_t used = 0;
      double d = std::stod(std::string(v), &used);
      if (used != v.size() || !(d >= 0) || d > 1e9) return std::nullopt;
      return std::chrono::milliseconds(static_cast<int64_t>(d * scale));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  if (auto ms = parse(FindHeader(headers, "retry-after-ms"), 1.0)) return ms;
  return parse(FindHeader(headers, "retry-after"), 1000.0);
}

std::chrono::milliseconds RetryPolicy::Delay(
    int attempt, std::optional<std::chrono::milliseconds> retry_after) const {
  if (retry_after) return std::min(*retry_after, cap * 2);
  int64_t d = base.count();
  for (int i = 1; i < attempt && d < cap.count(); ++i) d *= 2;
  d = std::min<int64_t>(d, cap.count());
  int64_t half = d / 2;
  int64_t jitter =
      half > 0 ? static_cast<int64_t>(RandomU64() % static_cast<uint64_t>(half + 1)) : 0;
  return std::chrono::milliseconds(half + jitter);
}

RetryStep NextRetry(const RetryPolicy& policy, int attempt, const AttemptError& error) {
  RetryStep step;
  if (!IsRetryable(error.status)) {
    step.final = error.status;
  } else if (attempt >= policy.max_attempts) {
    step.final = attempt > 1
                     ? Status(error.status.code(), error.status.message() + " (after " +
                                                       std::to_string(attempt) + " attempts)")
                     : error.status;
  } else {
    step.retry = RetryData{.attempt = attempt + 1,
                           .max_attempts = policy.max_attempts,
                           .delay_ms = policy.Delay(attempt, error.retry_after).count(),
                           .reason = error.status.message()};
  }
  return step;
}

bool InterruptibleWait(std::chrono::milliseconds delay, const std::stop_token& stop) {
  if (delay.count() <= 0) return !stop.stop_requested();
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace agentloop

namespace agentloop {
Status ClassifyStreamError(std::string_view type_or_code, std::string_view message) {
  std::string text = "stream error";
  if (!type_or_code.empty()) text += " " + std::string(type_or_code);
  if (!message.empty())
    text += ": " + std::string(TruncateUtf8(SanitizeUtf8(message), kMaxMessage));
  text = RedactSecrets(text);
  if (LooksLikePromptTooLong(type_or_code, message)) return PromptTooLong(text);
  if (type_or_code == "invalid_request_error" || type_or_code == "invalid_request" ||
      type_or_code == "invalid_prompt") {
    return InvalidArgument(text);
  }
  if (type_or_code == "authentication_error" || type_or_code == "permission_error") {
    return PermissionDenied(text);
  }
  if (type_or_code == "rate_limit_error" || type_or_code == "rate_limit_exceeded") {
    return ResourceExhausted(text);
  }
  return Unavailable(text);
}
}  // namespace agentloop
