// Status and Result<T>: how every fallible agentloop function reports failure.
//
// A Status is either OK or a (code, message) pair. Result<T> holds either a T or
// a non-OK Status and copies the API of C++23 std::expected<T, Status>
// (has_value(), value(), error(), operator*), so moving to C++23 is a rename.
// Both are [[nodiscard]]: ignoring an error is a compile warning.
//
// Thread-safety: plain values; distinct objects may be used from any thread.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace agentloop {

// A small canonical set (abseil/gRPC style). Add a code only when a caller
// branches on it; put detail in the message.
enum class Code {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kFailedPrecondition,
  kResourceExhausted,  // rate limits (429), quotas
  kDeadlineExceeded,   // timeouts
  kCancelled,          // the caller's stop token fired
  kUnavailable,        // transient transport or server failure (retryable)
  kDataLoss,           // corrupt or torn persisted data
  kInternal,           // engine bug or unexpected library failure
  kPromptTooLong,      // the provider rejected the request as over its context window
  kBusy,               // another process or turn owns the resource (session lock)
  kLeaseLost,          // this holder's session lease was taken over: it may not write any more
};

// Stable lower-case name of a code, e.g. "invalid_argument".
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: bad thing" or "ok".
  std::string ToString() const;

  // Returns a copy with `context + ": "` prepended to the message.
  Status WithContext(std::string_view context) const;

  bool operator==(const Status&) const = default;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status PromptTooLong(std::string m) { return {Code::kPromptTooLong, std::move(m)}; }
inline Status Busy(std::string m) { return {Code::kBusy, std::move(m)}; }

// Whether an operation that failed with `status` may succeed if tried again
// unchanged. The only place that decides retryability (STYLE 6.6): an
// exhaustive switch with no default, so a new code fails the build until it
// is classified.
bool IsRetryable(const Status& status);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK Status");
  }

  bool has_value() const { return v_.index() == 0; }
  bool ok() const { return has_value(); }
  explicit operator bool() const { return has_value(); }

  // REQUIRES: has_value().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !has_value().
  const Status& error() const { return std::get<1>(v_); }
  // OK when a value is held, else the error.
  Status status() const { return has_value() ? Status() : error(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace agentloop

#define AL_CONCAT_INNER_(a, b) a##b
#define AL_CONCAT_(a, b) AL_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define AL_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::agentloop::Status al_status_ = (expr); \
    if (!al_status_.ok()) return al_status_; \
  } while (0)

// AL_ASSIGN_OR_RETURN(auto x, FunctionReturningResult());
#define AL_ASSIGN_OR_RETURN(lhs, expr) \
  AL_ASSIGN_OR_RETURN_IMPL_(AL_CONCAT_(al_r_, __LINE__), lhs, expr)
#define AL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.has_value()) return tmp.error();       \
  lhs = std::move(tmp).value()
