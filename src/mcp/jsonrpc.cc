#include "mcp/jsonrpc.h"

#include <algorithm>
#include <vector>

namespace agentloop::mcp {
namespace {

using Clock = std::chrono::steady_clock;

// The first `n` characters of `text` for an error message.
std::string Excerpt(std::string_view text, size_t n = 200) {
  std::string out(text.substr(0, n));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (text.size() > n) out += "...";
  return out;
}

std::optional<int64_t> IdOf(const Json& id) {
  if (id.is_number_integer()) return id.get<int64_t>();
  if (id.is_number_unsigned()) return static_cast<int64_t>(id.get<uint64_t>());
  return std::nullopt;
}

}  // namespace

Status SessionExpired(std::string message) { return NotFound(std::move(message)); }
bool IsSessionExpired(const Status& s) { return s.code() == Code::kNotFound; }

RpcConnection::RpcConnection(std::string name, std::unique_ptr<Transport> transport)
    : name_(std::move(name)), transport_(std::move(transport)) {}

RpcConnection::~RpcConnection() { Close(); }

Status RpcConnection::Start(NotificationHandler on_notification) {
  on_notification_ = std::move(on_notification);
  Transport::Handlers h;
  h.on_message = [this](std::string_view text) { return OnMessage(text); };
  h.on_closed = [this](const Status& why) { OnClosed(why); };
  h.on_request_failed = [this](int64_t id, const Status& why) { OnRequestFailed(id, why); };
  Status s = transport_->Start(std::move(h));
  if (!s.ok()) OnClosed(s);
  return s;
}

void RpcConnection::Close() {
  if (transport_) transport_->Close();
  OnClosed(Unavailable(name_ + " was closed"));
}

Status RpcConnection::closed_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

void RpcConnection::OnClosed(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (is_closed_) return;
  is_closed_ = true;
  closed_ = why.ok() ? Unavailable(name_ + " closed the connection") : why;
  cv_.notify_all();
}

void RpcConnection::OnRequestFailed(int64_t id, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(id);
  if (it == calls_.end()) return;  // answered, or no longer waited for
  it->second->failure = why.ok() ? Unavailable(name_ + " sent no response") : why;
  it->second->done = true;
  calls_.erase(it);
  cv_.notify_all();
}

bool RpcConnection::OnMessage(std::string_view text) {
  Json msg = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded() || !(msg.is_object() || msg.is_array())) {
    // Only MCP messages may appear on the stream: anything else means the
    // two sides no longer agree on where messages begin.
    Status why = Unavailable(name_ + " sent something that is not a JSON-RPC message: '" +
                             Excerpt(text) + "'");
    OnClosed(why);
    return false;
  }
  if (msg.is_array()) {
    for (const Json& m : msg) HandleOne(m);
  } else {
    HandleOne(msg);
  }
  return true;
}

void RpcConnection::HandleOne(const Json& msg) {
  if (!msg.is_object()) return;
  const bool has_method = msg.contains("method") && msg["method"].is_string();
  const bool has_id = msg.contains("id") && !msg["id"].is_null();
  if (has_method && has_id) {
    // A request from the server. `ping` is answered; the client declares
    // no other capability, so anything else is "method not found".
    const std::string method = msg["method"].get<std::string>();
    Json reply = {{"jsonrpc", "2.0"}, {"id", msg["id"]}};
    if (method == "ping") {
      reply["result"] = Json::object();
    } else {
      reply["error"] = {{"code", -32601}, {"message", "method not found: " + method}};
    }
    (void)transport_->Send(reply.dump());
    return;
  }
  if (has_method) {
    const std::string method = msg["method"].get<std::string>();
    const Json params = msg.value("params", Json::object());
    if (method == "notifications/progress") {
      std::optional<int64_t> token =
          params.contains("progressToken") ? IdOf(params["progressToken"]) : std::nullopt;
      std::function<void(const Json&)> cb;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = token ? calls_.find(*token) : calls_.end();
        if (it == calls_.end()) return;  // for a call that ended: dropped
        Pending& p = *it->second;
        if (p.timeout.count() > 0) {
          p.deadline = std::min(p.hard_deadline, Clock::now() + p.timeout);
        }
        cb = p.on_progress;
        cv_.notify_all();
      }
      if (cb) cb(params);
      return;
    }
    if (on_notification_) on_notification_(method, params);
    return;
  }
  if (!has_id) return;  // a response without an id (a parse error report): nothing waits for it
  std::optional<int64_t> id = IdOf(msg["id"]);
  if (!id) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(*id);
  if (it == calls_.end()) return;  // late (after a timeout or cancel): dropped
  Pending& p = *it->second;
  if (msg.contains("error") && msg["error"].is_object()) {
    const Json& e = msg["error"];
    RpcError err;
    err.code = e.value("code", int64_t{0});
    err.message = e.contains("message") && e["message"].is_string()
                      ? e["message"].get<std::string>()
                      : std::string("(no message)");
    err.data = e.value("data", Json());
    p.reply.error = std::move(err);
  } else {
    p.reply.result = msg.value("result", Json::object());
  }
  p.done = true;
  calls_.erase(it);
  cv_.notify_all();
}

Result<RpcReply> RpcConnection::Call(const std::string& method, Json params,
                                     const CallOptions& options) {
  if (!params.is_object()) params = Json::object();
  auto pending = std::make_shared<Pending>();
  pending->on_progress = options.on_progress;
  pending->timeout = options.timeout;
  const auto start = Clock::now();
  pending->hard_deadline =
      start + std::max(options.timeout,
                       options.max_timeout.count() > 0 ? options.max_timeout : options.timeout);
  pending->deadline = start + options.timeout;
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_closed_) return closed_;
    id = next_id_++;
    calls_[id] = pending;
  }
  if (options.progress) params["_meta"]["progressToken"] = id;
  Json req = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
  Status sent = transport_->Send(req.dump());
  if (!sent.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(id);
    return sent;
  }

  std::stop_callback on_stop(options.stop, [this] {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu_);
  enum class End { kReply, kTimeout, kStop, kClosed } end = End::kReply;
  while (true) {
    if (pending->done) break;
    if (is_closed_) {
      end = End::kClosed;
      break;
    }
    if (options.stop.stop_requested()) {
      end = End::kStop;
      break;
    }
    if (options.timeout.count() > 0) {
      if (Clock::now() >= pending->deadline) {
        end = End::kTimeout;
        break;
      }
      cv_.wait_until(lock, pending->deadline);
    } else {
      cv_.wait(lock);
    }
  }
  if (end == End::kReply) {
    if (!pending->failure.ok()) return pending->failure;
    return std::move(pending->reply);
  }
  calls_.erase(id);
  if (end == End::kClosed) return closed_;
  lock.unlock();
  const std::string reason = end == End::kTimeout ? "timed out" : "cancelled by the client";
  if (options.cancellable && method != "initialize") {
    (void)Notify("notifications/cancelled", {{"requestId", id}, {"reason", reason}});
  }
  if (end == End::kStop) return Cancelled(name_ + ": " + method + " was cancelled");
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return DeadlineExceeded(name_ + ": " + method + " got no response within " +
                          std::to_string(waited.count()) + " ms");
}

Status RpcConnection::Notify(const std::string& method, Json params) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_closed_) return closed_;
  }
  Json msg = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) msg["params"] = std::move(params);
  return transport_->Send(msg.dump());
}

}  // namespace agentloop::mcp
