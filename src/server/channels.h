// Notification channels of an agent (docs/notifications.md): besides its
// signed webhook, an agent's notifications go to email (SMTP) and Slack.
//
// One notification, many channels: the server records one outbox row per
// channel that takes the event (server.cc, RecordNotifications), all with
// the same JSON body (what the webhook POSTs), under the delivery id
// `<notification id>.<channel key>`; each row is delivered and finished on
// its own, so a channel that is down delays only itself. A channel renders
// its message from that body: every value that came from a model or a tool
// is escaped for where it lands (HTML, mail headers, Slack mrkdwn).
//
// ChannelSender sends one rendered notification: email on a thread of its
// own (libcurl's blocking SMTP transfer, loaded with dlopen on first use:
// curl_loader.h), Slack with the server's asynchronous HTTP client. `done`
// is called on the io thread, kUnavailable for what is worth another attempt.
//
// Secrets (the SMTP password, the Slack bot token, the signing secret, an
// incoming webhook's URL) are held here and never written into a Status,
// a log line or a message.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "agentloop/status.h"

namespace agentloop::server {

struct EmailChannel {
  std::string smtp_url;  // smtp://host:port (STARTTLS unless tls_none) | smtps://host:port
  bool tls_none = false;
  std::string user;
  std::string password;  // secret
  std::string from;
  std::vector<std::string> to;
  std::string ca_file;  // empty: the system's trust store
  std::chrono::milliseconds timeout{60'000};
};

struct SlackChannel {
  // Bot token mode: chat.postMessage to `channel` under `api_base_url`.
  std::string bot_token;  // secret
  std::string channel;
  std::string api_base_url = "https://slack.com/api";
  // Incoming webhook mode (a secret URL).
  std::string webhook_url;
  // Verifies clicks on its buttons (POST /v1/slack/interactions); empty: the
  // message carries links, no buttons.
  std::string signing_secret;  // secret
};

struct NotifyChannel {
  // Suffix of its delivery ids ("email0"); empty for the agent's approver
  // webhook (its ids stay the notification's own).
  std::string key;
  std::string kind;  // "webhook" | "email" | "slack"
  std::set<std::string> events;
  // webhook
  std::string url;
  std::string secret;
  EmailChannel email;
  SlackChannel slack;
  // How it is named in logs (no secret): "email smtps://mail:465", ...
  std::string Describe() const;
};

// The delivery id of notification `id` on channel `key`.
std::string ChannelDeliveryId(const std::string& id, const std::string& key);
// The channel key of a delivery id ("" when it has none).
std::string ChannelKeyOf(const std::string& delivery_id);

struct Rendered {
  std::string event;        // "approval.requested", ...
  std::string body;         // the notification's JSON
  std::string delivery_id;  // for Message-ID and logs
};

class ChannelSender {
 public:
  explicit ChannelSender(boost::asio::io_context& io);
  // Stops, and waits for an SMTP transfer in progress to notice (about a
  // second).
  ~ChannelSender();
  ChannelSender(const ChannelSender&) = delete;
  ChannelSender& operator=(const ChannelSender&) = delete;

  // Sends `n` through `ch` (io thread); `done` on the io thread.
  void Send(const NotifyChannel& ch, const Rendered& n, std::function<void(Status)> done);
  // POSTs `json` to a Slack response_url (io thread); `done` on the io thread.
  void PostJson(const std::string& url, const std::string& json, std::function<void(Status)> done);
  // Ends: later callbacks are dropped.
  void Stop();
  // Stops and shuts the HTTP client down (io thread): transfers still
  // running end now, so none outlives the server.
  void AbortTransfers();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace agentloop::server
