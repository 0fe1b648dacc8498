#include "agentloop/status.h"

namespace agentloop {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kAlreadyExists:
      return "already_exists";
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kFailedPrecondition:
      return "failed_precondition";
    case Code::kResourceExhausted:
      return "resource_exhausted";
    case Code::kDeadlineExceeded:
      return "deadline_exceeded";
    case Code::kCancelled:
      return "cancelled";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kDataLoss:
      return "data_loss";
    case Code::kInternal:
      return "internal";
    case Code::kPromptTooLong:
      return "prompt_too_long";
    case Code::kBusy:
      return "busy";
    case Code::kLeaseLost:
      return "lease_lost";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(CodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

bool IsRetryable(const Status& status) {
  switch (status.code()) {
    case Code::kUnavailable:
    case Code::kDeadlineExceeded:
    case Code::kResourceExhausted:
      return true;
    case Code::kOk:
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kAlreadyExists:
    case Code::kPermissionDenied:
    case Code::kFailedPrecondition:
    case Code::kCancelled:
    case Code::kDataLoss:
    case Code::kInternal:
    case Code::kPromptTooLong:
    case Code::kBusy:
    case Code::kLeaseLost:
      return false;
  }
  return false;
}

}  // namespace agentloop
