// Webhook signing (OpenSSL HMAC) and delivery with retries.
#include "permissions/webhook.h"

#include <condition_variable>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "agentloop/tool.h"
#include "agentloop/types.h"

#include "base/strings.h"

namespace agentloop::permissions {
namespace {

constexpr std::string_view kPrefix = "sha256=";

Result<std::vector<unsigned char>> Hmac(std::string_view secret, std::string_view body) {
  if (secret.empty()) return InvalidArgument("webhook secret is empty");
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const unsigned char* data = body.empty() ? reinterpret_cast<const unsigned char*>("")
                                           : reinterpret_cast<const unsigned char*>(body.data());
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), data, body.size(), out,
           &len) == nullptr) {
    return Internal("HMAC-SHA256 failed");
  }
  return std::vector<unsigned char>(out, out + len);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool DefaultDelay(std::chrono::milliseconds d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(m);
  cv.wait_for(lock, stop, d, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace

Result<std::string> SignPayload(std::string_view secret, std::string_view body) {
  AL_ASSIGN_OR_RETURN(std::vector<unsigned char> mac, Hmac(secret, body));
  return std::string(kPrefix) +
         HexEncode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

bool VerifySignature(std::string_view secret, std::string_view body, std::string_view header) {
  if (header.size() < kPrefix.size()) return false;
  for (size_t i = 0; i < kPrefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kPrefix[i]) return false;
  }
  std::string_view hex = header.substr(kPrefix.size());
  if (hex.size() != 64) return false;
  unsigned char given[32];
  for (size_t i = 0; i < 32; ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    given[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  Result<std::vector<unsigned char>> mac = Hmac(secret, body);
  if (!mac.ok() || mac->size() != 32) return false;
  return CRYPTO_memcmp(given, mac->data(), 32) == 0;
}

Result<std::unique_ptr<WebhookApprover>> WebhookApprover::Create(WebhookOptions options) {
  if (options.url.empty()) return InvalidArgument("webhook approver: missing url");
  if (options.secret.empty()) {
    return InvalidArgument("webhook approver: missing secret (notifications are always signed)");
  }
  if (!options.post) return InvalidArgument("webhook approver: missing HTTP post function");
  if (options.max_attempts < 1) return InvalidArgument("webhook approver: max_attempts < 1");
  if (!options.delay) options.delay = DefaultDelay;
  if (!options.clock) options.clock = [] { return std::chrono::system_clock::now(); };
  return std::unique_ptr<WebhookApprover>(new WebhookApprover(std::move(options)));
}

WebhookApprover::WebhookApprover(WebhookOptions options) : options_(std::move(options)) {}

Json WebhookApprover::BuildPayload(const ApprovalRequest& request,
                                   std::chrono::system_clock::time_point requested_at) {
  Json p = Json::object();
  p["pending_id"] = request.pending_id;
  p["session_id"] = request.session_id;
  p["turn_id"] = request.turn_id;
  p["tool_use_id"] = request.call.id;
  p["kind"] = std::string(PendingKindName(request.kind));
  p["tool"] = request.call.name.empty() ? request.spec.name : request.call.name;
  p["arguments"] = request.call.input.is_null() ? Json::object() : request.call.input;
  p["reason"] = request.reason;
  p["requested_at"] =
      std::chrono::duration_cast<std::chrono::seconds>(requested_at.time_since_epoch()).count();
  return p;
}

ApprovalDecision WebhookApprover::Decide(const ApprovalRequest& request, std::stop_token stop) {
  if (stop.stop_requested()) return ApprovalDecision::Deny("cancelled", "webhook");
  WebhookDelivery d;
  d.pending_id = request.pending_id;
  d.url = options_.url;
  d.body = DumpJson(BuildPayload(request, options_.clock()));
  Result<std::string> sig = SignPayload(options_.secret, d.body);
  if (!sig.ok()) {
    d.status = sig.error();
    Record(std::move(d));
    return ApprovalDecision::Defer("webhook");
  }
  HttpHeaders headers = {{"Content-Type", "application/json"},
                         {std::string(kSignatureHeader), *sig}};
  std::chrono::milliseconds backoff = options_.initial_backoff;
  while (true) {
    ++d.attempts;
    Status s;
    try {
      s = options_.post(options_.url, headers, d.body);
    } catch (const std::exception& e) {
      s = Internal(std::string("webhook post threw: ") + e.what());
    } catch (...) {
      s = Internal("webhook post threw");
    }
    d.status = s;
    if (s.ok() || !IsRetryable(s) || d.attempts >= options_.max_attempts) break;
    if (!options_.delay(backoff, stop) || stop.stop_requested()) {
      d.status = Cancelled("cancelled while retrying delivery (last error: " + s.ToString() + ")");
      Record(std::move(d));
      return ApprovalDecision::Deny("cancelled", "webhook");
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  Record(std::move(d));
  return ApprovalDecision::Defer("webhook");
}

void WebhookApprover::Record(WebhookDelivery d) {
  if (options_.on_delivery) {
    try {
      options_.on_delivery(d);
    } catch (...) {
      // A reporting callback must not break the turn; the log still has it.
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  log_.push_back(std::move(d));
  while (log_.size() > options_.max_log) log_.pop_front();
}

std::vector<WebhookDelivery> WebhookApprover::deliveries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {log_.begin(), log_.end()};
}

}  // namespace agentloop::permissions
