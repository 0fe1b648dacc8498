#include "server/notifier.h"

#include <algorithm>

#include <boost/asio/steady_timer.hpp>

#include "base/ids.h"

namespace agentloop::server {

namespace asio = boost::asio;

struct Notifier::Shared {
  Shared(asio::io_context& i, NotifierOptions o) : io(i), options(std::move(o)) {}
  asio::io_context& io;
  const NotifierOptions options;
  bool stopped = false;
  size_t in_flight = 0;
};

struct Notifier::Attempt {
  Attempt(asio::io_context& io, Notification n) : notification(std::move(n)), timer(io) {
    if (notification.delivery_id.empty()) notification.delivery_id = NewId("dlv");
  }
  Notification notification;
  int attempts = 0;
  std::chrono::milliseconds backoff{0};
  asio::steady_timer timer;
};

Notifier::Notifier(asio::io_context& io, NotifierOptions options)
    : shared_(std::make_shared<Shared>(io, std::move(options))) {}

Notifier::~Notifier() { Stop(); }

void Notifier::Stop() { shared_->stopped = true; }

size_t Notifier::in_flight() const { return shared_->in_flight; }

void Notifier::Send(Notification n) {
  if (shared_->stopped) return;
  auto a = std::make_shared<Attempt>(shared_->io, std::move(n));
  a->backoff = shared_->options.initial_backoff;
  ++shared_->in_flight;
  Try(shared_, std::move(a));
}

// Callbacks hold the shared state, never the Notifier, and do nothing once
// it is stopped: a timer may fire, or a POST end, after the server is gone.
void Notifier::Try(const std::shared_ptr<Shared>& shared, std::shared_ptr<Attempt> a) {
  ++a->attempts;
  const Notification& n = a->notification;
  auto finish = [shared, a](Status s) {
    if (shared->stopped) return;
    const NotifierOptions& o = shared->options;
    if (!s.ok() && IsRetryable(s) && a->attempts < o.max_attempts) {
      a->timer.expires_after(a->backoff);
      a->backoff = std::min(a->backoff * 2, o.max_backoff);
      a->timer.async_wait([shared, a](boost::system::error_code ec) {
        if (!ec && !shared->stopped) Try(shared, a);
      });
      return;
    }
    --shared->in_flight;
    if (o.on_done) o.on_done(a->notification, s, a->attempts);
  };
  if (n.deliver) return n.deliver(std::move(finish));
  Result<std::string> signature = permissions::SignPayload(n.secret, n.body);
  if (!signature.ok()) return finish(signature.error());
  permissions::HttpHeaders headers = {{"Content-Type", "application/json"},
                                      {std::string(permissions::kSignatureHeader), *signature},
                                      {"X-Agentloop-Event", n.event},
                                      {"X-Agentloop-Delivery", n.delivery_id}};
  shared->options.post(n.url, headers, n.body, std::move(finish));
}

}  // namespace agentloop::server
