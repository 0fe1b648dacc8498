#include "mcp/http_transport.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "providers/sse_parser.h"

namespace agentloop::mcp {
namespace {

constexpr size_t kErrorBodyBytes = 300;
constexpr std::chrono::milliseconds kNotificationTimeout{30000};
constexpr long kDefaultRetryMs = 1000;
constexpr long kMaxRetryMs = 30000;

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && strncasecmp(s.data(), prefix.data(), prefix.size()) == 0;
}

std::string BodyExcerpt(std::string_view text) {
  std::string out(text.substr(0, kErrorBodyBytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::optional<int64_t> IntId(const Json& msg) {
  if (!msg.is_object() || !msg.contains("id")) return std::nullopt;
  const Json& id = msg["id"];
  if (id.is_number_integer()) return id.get<int64_t>();
  if (id.is_number_unsigned()) return static_cast<int64_t>(id.get<uint64_t>());
  return std::nullopt;
}

}  // namespace

struct StreamableHttpTransport::Core : std::enable_shared_from_this<Core> {
  explicit Core(HttpTransportOptions options) : o(std::move(options)) {}

  HttpTransportOptions o;
  // The transport object owns the client: a callback on the client's event
  // thread may hold the last reference to the core, and the client must
  // not be destroyed on its own thread.
  std::weak_ptr<HttpClient> http;
  Handlers handlers;

  // Held while a handler runs; Close() takes it to end delivery for good.
  std::mutex deliver_mu;
  bool delivery_over = false;  // Guarded by deliver_mu.

  mutable std::mutex mu;
  std::string session_id;  // Guarded by mu.
  std::string version;     // Guarded by mu.
  int64_t init_id = -1;    // Guarded by mu: the id of the last `initialize` sent.
  bool closed = false;     // Guarded by mu.
  // The POSTs of requests still waiting for their response, by request id.
  std::map<int64_t, std::shared_ptr<HttpTransfer>> requests;  // Guarded by mu.
  std::shared_ptr<HttpTransfer> events;                       // Guarded by mu.
  bool events_open = false;                                   // Guarded by mu.
  long retry_ms = kDefaultRetryMs;                            // Guarded by mu.
  std::stop_source stop;

  std::string who() const { return "MCP server '" + o.name + "'"; }

  HttpHeaders Headers(bool with_session) const {
    HttpHeaders h;
    if (!o.bearer_token.empty()) h.emplace_back("Authorization", "Bearer " + o.bearer_token);
    if (with_session) {
      std::lock_guard<std::mutex> lock(mu);
      if (!session_id.empty()) h.emplace_back("Mcp-Session-Id", session_id);
      if (!version.empty()) h.emplace_back("MCP-Protocol-Version", version);
    }
    return h;
  }

  // Hands one message to the connection. False: it was not a message (the
  // connection has ended itself) or delivery is over.
  bool Deliver(std::string_view text) {
    std::lock_guard<std::mutex> lock(deliver_mu);
    if (delivery_over) return false;
    if (handlers.on_message(text)) return true;
    delivery_over = true;
    AbortAll();
    if (handlers.on_closed) {
      handlers.on_closed(Unavailable(who() + " sent something that is not a JSON-RPC message"));
    }
    return false;
  }

  void Fail(int64_t id, const Status& why) {
    std::lock_guard<std::mutex> lock(deliver_mu);
    if (delivery_over || !handlers.on_request_failed) return;
    handlers.on_request_failed(id, why);
  }

  // Marks the transport closed and aborts its transfers.
  void AbortAll() {
    std::vector<std::shared_ptr<HttpTransfer>> all;
    {
      std::lock_guard<std::mutex> lock(mu);
      closed = true;
      for (auto& [id, t] : requests) all.push_back(t);
      requests.clear();
      if (events) all.push_back(std::move(events));
      events = nullptr;
    }
    stop.request_stop();
    for (auto& t : all) t->Cancel();
  }

  // The answer to `initialize` names the version the server speaks; later
  // requests carry it.
  void NoteInitializeReply(std::string_view text) {
    Json msg = Json::parse(text.begin(), text.end(), nullptr, false);
    std::lock_guard<std::mutex> lock(mu);
    if (IntId(msg) != init_id || !msg.contains("result") || !msg["result"].is_object()) return;
    const Json& r = msg["result"];
    if (r.contains("protocolVersion") && r["protocolVersion"].is_string()) {
      version = r["protocolVersion"].get<std::string>();
    }
  }

  void OpenEvents(long backoff_ms);
};

namespace {

using Core = StreamableHttpTransport::Core;

// The reply to one POST: JSON, an event stream, or 202.
class PostReply final : public HttpStreamHandler, public SseHandler {
 public:
  PostReply(std::shared_ptr<Core> core, std::optional<int64_t> id, bool initialize,
            bool sent_session)
      : core_(std::move(core)),
        id_(id),
        initialize_(initialize),
        sent_session_(sent_session),
        parser_(core_->o.max_message_bytes) {}

  Status OnHead(long status, const HttpHeaders& headers) override {
    status_ = status;
    if (status < 200 || status > 299) return Status::Ok();
    sse_ = StartsWithNoCase(FindHeader(headers, "content-type"), "text/event-stream");
    if (initialize_) {
      std::string_view sid = FindHeader(headers, "mcp-session-id");
      std::lock_guard<std::mutex> lock(core_->mu);
      core_->session_id = std::string(sid);
    }
    return Status::Ok();
  }

  Status OnBody(std::string_view bytes) override {
    if (status_ < 200 || status_ > 299) {
      if (body_.size() < kErrorBodyBytes) body_.append(bytes.substr(0, kErrorBodyBytes));
      return Status::Ok();
    }
    if (sse_) return parser_.Feed(bytes, *this);
    body_.append(bytes);
    if (body_.size() > core_->o.max_message_bytes) {
      return ResourceExhausted(core_->who() + " sent a reply over " +
                               std::to_string(core_->o.max_message_bytes) + " bytes");
    }
    return Status::Ok();
  }

  Status OnEvent(const SseEvent& event) override {
    if (event.data.empty()) return Status::Ok();
    if (initialize_) core_->NoteInitializeReply(event.data);
    if (!core_->Deliver(event.data)) return Cancelled("the connection has ended");
    return Status::Ok();
  }

  // The transfer has ended with `s`.
  void Done(const Status& s) {
    const bool success = status_ >= 200 && status_ <= 299;
    if (s.ok() && success && !sse_ && body_.find_first_not_of(" \t\r\n") != std::string::npos) {
      if (initialize_) core_->NoteInitializeReply(body_);
      (void)core_->Deliver(body_);
    }
    if (!id_) return;
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      auto it = core_->requests.find(*id_);
      if (it != core_->requests.end()) core_->requests.erase(it);
      finished_ = true;
    }
    // Ignored by the connection when the response has arrived.
    Status why;
    const std::string who = core_->who();
    if (!s.ok()) {
      why = s.code() == Code::kCancelled
                ? s
                : Unavailable(who + ": the request failed: " + std::string(s.message()));
    } else if (status_ == 404 && sent_session_) {
      why = SessionExpired(who + " answered 404: it no longer knows the session");
    } else if (!success) {
      std::string hint;
      if (status_ == 401 || status_ == 403) {
        hint = core_->o.bearer_token.empty()
                   ? " (no bearer token is configured: bearer_token_env_var)"
                   : " (the bearer token was refused)";
      }
      std::string body = BodyExcerpt(body_);
      why = Unavailable(who + " answered HTTP " + std::to_string(status_) + hint +
                        (body.empty() ? "" : ": " + body));
    } else {
      why = Unavailable(who + " ended its reply without a response to request " +
                        std::to_string(*id_));
    }
    core_->Fail(*id_, why);
  }

  bool finished() const { return finished_; }  // under core_->mu

 private:
  std::shared_ptr<Core> core_;
  std::optional<int64_t> id_;
  bool initialize_;
  bool sent_session_;
  long status_ = 0;
  bool sse_ = false;
  bool finished_ = false;  // Guarded by core_->mu.
  std::string body_;
  SseParser parser_;
};

// The GET stream of messages outside any request.
class EventsReply final : public HttpStreamHandler, public SseHandler {
 public:
  explicit EventsReply(std::shared_ptr<Core> core)
      : core_(std::move(core)), parser_(core_->o.max_message_bytes) {}

  Status OnHead(long status, const HttpHeaders& headers) override {
    streaming_ =
        status == 200 && StartsWithNoCase(FindHeader(headers, "content-type"), "text/event-stream");
    return Status::Ok();
  }
  Status OnBody(std::string_view bytes) override {
    if (!streaming_) return Status::Ok();
    Status s = parser_.Feed(bytes, *this);
    if (parser_.retry_ms() >= 0) {
      std::lock_guard<std::mutex> lock(core_->mu);
      core_->retry_ms = std::clamp(parser_.retry_ms(), 0L, kMaxRetryMs);
    }
    return s;
  }
  Status OnEvent(const SseEvent& event) override {
    if (event.data.empty()) return Status::Ok();
    events_ = true;
    if (!core_->Deliver(event.data)) return Cancelled("the connection has ended");
    return Status::Ok();
  }
  bool streaming() const { return streaming_; }
  bool delivered() const { return events_; }

 private:
  std::shared_ptr<Core> core_;
  bool streaming_ = false;
  bool events_ = false;
  SseParser parser_;
};

}  // namespace

void StreamableHttpTransport::Core::OpenEvents(long backoff_ms) {
  std::shared_ptr<HttpClient> client = http.lock();
  if (!client || !o.event_stream) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (closed || events_open) return;
    events_open = true;
  }
  HttpRequest req;
  req.method = "GET";
  req.url = o.url;
  req.headers = Headers(true);
  req.headers.emplace_back("Accept", "text/event-stream");
  req.connect_timeout = o.connect_timeout;
  req.idle_timeout = std::chrono::milliseconds(0);  // a quiet stream is fine
  auto reply = std::make_shared<EventsReply>(this->shared_from_this());
  auto self = shared_from_this();
  auto transfer = client->Start(std::move(req), reply, [self, reply, backoff_ms](Status s) {
    long delay = 0;
    {
      std::lock_guard<std::mutex> lock(self->mu);
      self->events = nullptr;
      self->events_open = false;
      if (self->closed) return;
      // A server without the stream (405, or any other answer) is not asked
      // again; a stream that ended or broke is opened again, backing off
      // while it keeps failing without an event.
      if (!reply->streaming() && s.ok()) return;
      delay = reply->delivered() ? self->retry_ms : backoff_ms;
    }
    std::shared_ptr<HttpClient> c = self->http.lock();
    if (!c) return;
    long next = std::min(kMaxRetryMs, std::max(kDefaultRetryMs, delay) * 2);
    c->Wait(std::chrono::milliseconds(delay), self->stop.get_token(), [self, next](bool fired) {
      if (fired) self->OpenEvents(next);
    });
  });
  std::lock_guard<std::mutex> lock(mu);
  if (events_open && !closed) events = std::move(transfer);
}

StreamableHttpTransport::StreamableHttpTransport(HttpTransportOptions options)
    : core_(std::make_shared<Core>(std::move(options))) {}

StreamableHttpTransport::~StreamableHttpTransport() { Close(); }

std::string StreamableHttpTransport::session_id() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->session_id;
}

Status StreamableHttpTransport::Start(Handlers handlers) {
  const std::string& url = core_->o.url;
  if (!StartsWithNoCase(url, "http://") && !StartsWithNoCase(url, "https://")) {
    return InvalidArgument(core_->who() + ": url '" + url +
                           "' is not an http:// or https:// address");
  }
  http_ = core_->o.http ? std::move(core_->o.http) : HttpClient::Create();
  core_->o.http = nullptr;
  core_->http = http_;
  core_->handlers = std::move(handlers);
  return Status::Ok();
}

Status StreamableHttpTransport::Send(const std::string& message) {
  std::shared_ptr<Core> core = core_;
  std::shared_ptr<HttpClient> client = core->http.lock();
  Json msg = Json::parse(message, nullptr, false);
  if (!msg.is_object()) return InvalidArgument("an MCP message over HTTP must be a JSON object");
  const std::string method =
      msg.contains("method") && msg["method"].is_string() ? msg["method"].get<std::string>() : "";
  const std::optional<int64_t> id = IntId(msg);
  const bool request = !method.empty() && id.has_value();
  const bool initialize = request && method == "initialize";
  {
    std::lock_guard<std::mutex> lock(core->mu);
    if (core->closed || !client) return Unavailable(core->who() + " is closed");
    if (initialize) {
      // A new session: the old one's id and version are not sent with it.
      core->session_id.clear();
      core->version.clear();
      core->init_id = *id;
    }
  }
  HttpRequest req;
  req.method = "POST";
  req.url = core->o.url;
  req.headers = core->Headers(!initialize);
  const bool sent_session = FindHeader(req.headers, "mcp-session-id").size() > 0;
  req.headers.emplace_back("Content-Type", "application/json");
  req.headers.emplace_back("Accept", "application/json, text/event-stream");
  req.body = message;
  req.connect_timeout = core->o.connect_timeout;
  // A request's reply may be quiet for as long as the tool runs: the call's
  // own timeout governs it (and its cancellation aborts this POST).
  req.idle_timeout = request ? std::chrono::milliseconds(0) : kNotificationTimeout;
  auto reply =
      std::make_shared<PostReply>(core, request ? id : std::nullopt, initialize, sent_session);
  const bool initialized = method == "notifications/initialized";
  auto transfer = client->Start(std::move(req), reply, [core, reply, initialized](Status s) {
    reply->Done(s);
    if (initialized && s.ok()) core->OpenEvents(kDefaultRetryMs);
  });
  std::shared_ptr<HttpTransfer> to_cancel;
  {
    std::lock_guard<std::mutex> lock(core->mu);
    if (request && !reply->finished()) core->requests[*id] = transfer;
    if (method == "notifications/cancelled" && msg.contains("params") &&
        msg["params"].is_object()) {
      std::optional<int64_t> target;
      const Json& p = msg["params"];
      if (p.contains("requestId") && p["requestId"].is_number_integer()) {
        target = p["requestId"].get<int64_t>();
      }
      auto it = target ? core->requests.find(*target) : core->requests.end();
      if (it != core->requests.end()) {
        to_cancel = it->second;
        core->requests.erase(it);
      }
    }
  }
  if (to_cancel) to_cancel->Cancel();
  return Status::Ok();
}

void StreamableHttpTransport::Close() {
  std::shared_ptr<Core> core = core_;
  std::string sid;
  std::string version;
  {
    std::lock_guard<std::mutex> lock(core->mu);
    if (core->closed) {
      sid.clear();
    } else {
      sid = core->session_id;
      version = core->version;
    }
  }
  std::shared_ptr<HttpClient> client = core->http.lock();
  if (!sid.empty() && client) {
    // The end of the session; a server that does not let clients end it
    // answers 405, and a server that is gone cannot be told.
    HttpRequest del;
    del.method = "DELETE";
    del.url = core->o.url;
    del.headers = core->Headers(true);
    del.connect_timeout = core->o.close_timeout;
    del.idle_timeout = core->o.close_timeout;
    struct Ignore : HttpStreamHandler {
      Status OnHead(long, const HttpHeaders&) override { return Status::Ok(); }
      Status OnBody(std::string_view) override { return Status::Ok(); }
    } ignore;
    (void)client->Fetch(std::move(del), ignore, {});
  }
  {
    std::lock_guard<std::mutex> lock(core->deliver_mu);
    core->delivery_over = true;
  }
  core->AbortAll();
}

}  // namespace agentloop::mcp
