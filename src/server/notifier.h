// Notifier: delivers an agent's webhook notifications (approval.requested,
// question.asked, turn.completed) from the server, off the I/O thread.
//
// Each delivery is a POST of a JSON body signed as the webhook approver
// signs (permissions/webhook.h: X-Agentloop-Signature, HMAC-SHA256 of the
// exact body under the agent's secret), with X-Agentloop-Event naming the
// event and X-Agentloop-Delivery the notification's delivery id (the same for
// every attempt, and for a later delivery of the same notification, e.g. by
// a restarted server: receivers drop repeats by it). A retryable failure (IsRetryable:
// a transport error, 5xx, 429) is tried again after an exponential backoff
// kept on an io_context timer, so no thread waits; other failures and the
// last attempt end the delivery, which `on_done` reports. The notifier keeps
// deliveries in memory only; the server records each notification in the
// store's outbox first and finishes it there when `on_done` reports it
// delivered (ServerStateStore::AddNotification).
//
// Threads: the io_context's thread only; the POST is asynchronous (no thread
// waits for a slow receiver).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "agentloop/status.h"

#include "permissions/webhook.h"

namespace agentloop::server {

struct Notification {
  std::string url;
  std::string secret;
  std::string event;  // "approval.requested", ...
  std::string body;   // JSON
  // X-Agentloop-Delivery; empty: a fresh id.
  std::string delivery_id;
  // Set: each attempt calls it instead of POSTing (another channel: email,
  // Slack); `url` then only names the channel in logs. It calls `done` on
  // the io thread, as NotifierOptions::post does.
  std::function<void(std::function<void(Status)> done)> deliver;
};

struct NotifierOptions {
  // Starts a POST (io thread) and calls `done` on the io thread: OK for a 2xx
  // answer, kUnavailable (retried) for a transport failure, 429 or 5xx, and
  // another error (not retried) for other answers.
  using AsyncPost =
      std::function<void(const std::string& url, const permissions::HttpHeaders& headers,
                         const std::string& body, std::function<void(Status)> done)>;
  AsyncPost post;
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  // Told how each delivery ended (io thread): OK, or the last failure.
  std::function<void(const Notification&, const Status&, int attempts)> on_done;
};

class Notifier {
 public:
  Notifier(boost::asio::io_context& io, NotifierOptions options);
  // Starts delivering `n` (io thread).
  void Send(Notification n);
  // Deliveries not yet ended (io thread).
  size_t in_flight() const;
  // Abandons every delivery not yet ended (no further attempt, no on_done).
  void Stop();
  ~Notifier();

 private:
  struct Shared;
  struct Attempt;
  static void Try(const std::shared_ptr<Shared>& shared, std::shared_ptr<Attempt> a);

  std::shared_ptr<Shared> shared_;
};

}  // namespace agentloop::server
