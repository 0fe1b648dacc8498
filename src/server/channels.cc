#include "server/channels.h"

#include <atomic>
#include <mutex>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "agentloop/events.h"

#include "providers/http_client.h"
#include "server/curl_loader.h"
#include "server/render.h"

namespace agentloop::server {

namespace asio = boost::asio;

std::string NotifyChannel::Describe() const {
  if (kind == "email") return "email " + email.smtp_url;
  if (kind == "slack") {
    return slack.webhook_url.empty() ? "slack " + slack.channel : "slack incoming webhook";
  }
  return "webhook " + url;
}

std::string ChannelDeliveryId(const std::string& id, const std::string& key) {
  return key.empty() ? id : id + "." + key;
}

std::string ChannelKeyOf(const std::string& delivery_id) {
  const size_t dot = delivery_id.rfind('.');
  return dot == std::string::npos ? std::string() : delivery_id.substr(dot + 1);
}

struct ChannelSender::Impl {
  explicit Impl(asio::io_context& i) : io(i) {}
  asio::io_context& io;
  std::atomic<bool> stopped{false};  // also read by the SMTP thread
  std::shared_ptr<HttpClient> http;
  std::once_flag pool_once;
  std::unique_ptr<asio::thread_pool> smtp;  // one thread: SMTP transfers block

  HttpClient& Http() {
    if (!http) {
      HttpClientOptions o;
      o.io_context = &io;
      http = HttpClient::Create(std::move(o));
    }
    return *http;
  }
};

ChannelSender::ChannelSender(asio::io_context& io) : impl_(std::make_shared<Impl>(io)) {}

ChannelSender::~ChannelSender() {
  Stop();
  if (impl_->smtp) impl_->smtp->join();
}

void ChannelSender::Stop() { impl_->stopped = true; }

void ChannelSender::AbortTransfers() {
  Stop();
  // Destroyed on the io thread, the client aborts its transfers at once.
  impl_->http.reset();
}

namespace {

// Collects a response's status and (bounded) body.
struct Collect final : HttpStreamHandler {
  long status = 0;
  std::string body;
  Status OnHead(long s, const HttpHeaders&) override {
    status = s;
    return Status::Ok();
  }
  Status OnBody(std::string_view b) override {
    if (body.size() < (64 << 10)) body.append(b.substr(0, (64 << 10) - body.size()));
    return Status::Ok();
  }
};

// What a Slack answer means: OK, kUnavailable (tried again: transport
// failures, 429, 5xx, and the Web API's own "try later" errors), or
// kFailedPrecondition naming Slack's error (a token or channel to fix).
Status SlackOutcome(const Status& transport, const Collect& r, bool web_api) {
  if (!transport.ok()) return Unavailable("Slack unreachable: " + transport.message());
  if (r.status == 429 || r.status >= 500) {
    return Unavailable("Slack answered HTTP " + std::to_string(r.status));
  }
  if (r.status < 200 || r.status >= 300) {
    return FailedPrecondition("Slack answered HTTP " + std::to_string(r.status) + ": " +
                              std::string(r.body.substr(0, 200)));
  }
  if (!web_api) return Status::Ok();
  Json j = Json::parse(r.body, nullptr, false);
  if (!j.is_object()) return Unavailable("Slack's answer is not JSON");
  if (j.value("ok", false)) return Status::Ok();
  const std::string error = j.value("error", std::string("unknown"));
  if (error == "ratelimited" || error == "internal_error" || error == "fatal_error" ||
      error == "service_unavailable" || error == "request_timeout") {
    return Unavailable("Slack: " + error);
  }
  return FailedPrecondition("Slack refused the message: " + error);
}

}  // namespace

void ChannelSender::Send(const NotifyChannel& ch, const Rendered& n,
                         std::function<void(Status)> done) {
  std::shared_ptr<Impl> impl = impl_;
  Result<NotificationView> view = ViewOf(n.event, n.body);
  if (!view.ok()) return done(FailedPrecondition(view.error().message()));
  if (ch.kind == "email") {
    MailTransfer m;
    m.url = ch.email.smtp_url;
    m.require_tls = !ch.email.tls_none;
    m.user = ch.email.user;
    m.password = ch.email.password;
    m.ca_file = ch.email.ca_file;
    m.from = ch.email.from;
    m.to = ch.email.to;
    m.timeout = ch.email.timeout;
    m.cancel = &impl->stopped;
    const std::string domain = ch.email.from.substr(ch.email.from.find('@') + 1);
    m.message = BuildEmail(*view, EmailEnvelope{ch.email.from, ch.email.to, SystemNowMs() / 1000,
                                                n.delivery_id + "@" + domain});
    std::call_once(impl->pool_once, [&] { impl->smtp = std::make_unique<asio::thread_pool>(1); });
    asio::post(*impl->smtp, [impl, m = std::move(m), done = std::move(done)]() mutable {
      Status s = SendMail(m);
      asio::post(impl->io, [impl, s = std::move(s), done = std::move(done)] {
        if (!impl->stopped) done(s);
      });
    });
    return;
  }
  if (ch.kind != "slack") return done(FailedPrecondition("unknown channel " + ch.kind));
  const bool web_api = ch.slack.webhook_url.empty();
  Json msg = SlackMessage(*view, !ch.slack.signing_secret.empty());
  HttpRequest req;
  req.headers = {{"Content-Type", "application/json; charset=utf-8"}};
  if (web_api) {
    msg["channel"] = ch.slack.channel;
    req.url = ch.slack.api_base_url + "/chat.postMessage";
    req.headers.emplace_back("Authorization", "Bearer " + ch.slack.bot_token);
  } else {
    req.url = ch.slack.webhook_url;
  }
  req.body = msg.dump(-1, ' ', false, Json::error_handler_t::replace);
  req.connect_timeout = std::chrono::milliseconds(5000);
  req.idle_timeout = std::chrono::milliseconds(10000);
  auto h = std::make_shared<Collect>();
  impl->Http().Start(std::move(req), h, [impl, h, web_api, done = std::move(done)](Status s) {
    if (impl->stopped) return;
    done(SlackOutcome(s, *h, web_api));
  });
}

void ChannelSender::PostJson(const std::string& url, const std::string& json,
                             std::function<void(Status)> done) {
  std::shared_ptr<Impl> impl = impl_;
  HttpRequest req;
  req.url = url;
  req.headers = {{"Content-Type", "application/json; charset=utf-8"}};
  req.body = json;
  req.connect_timeout = std::chrono::milliseconds(5000);
  req.idle_timeout = std::chrono::milliseconds(10000);
  auto h = std::make_shared<Collect>();
  impl->Http().Start(std::move(req), h, [impl, h, done = std::move(done)](Status s) {
    if (impl->stopped) return;
    done(SlackOutcome(s, *h, false));
  });
}

}  // namespace agentloop::server
