// The agents' notifications (docs/server.md, "Notifications"): each
// recorded in the store's outbox, then delivered by the notifier (webhooks)
// or a channel (email, Slack), and swept again until delivered.
#include <cstdio>

#include "base/ids.h"
#include "base/strings.h"
#include "protocol/codec.h"
#include "server/render.h"
#include "server/server_impl.h"

namespace agentloop::server {

// The notifier posts with an HTTP client of its own on the io_context,
// made only when an agent has a webhook.
NotifierOptions ServerImpl::NotifierOptionsFor() {
  NotifierOptions o;
  bool any = false;
  for (const AgentSpec& a : options_.agents) {
    any = any || !a.webhook.url.empty() || !a.channels.empty();
  }
  if (!any) return o;
  HttpClientOptions http_options;
  http_options.io_context = &io_;
  notify_http_ = HttpClient::Create(std::move(http_options));
  // Weak: a transfer's callback holds the notifier's options, which must
  // not keep the client (and so the transfer) alive.
  o.post = [weak = std::weak_ptr<HttpClient>(notify_http_)](
               const std::string& url, const permissions::HttpHeaders& headers,
               const std::string& body, std::function<void(Status)> done) {
    std::shared_ptr<HttpClient> http = weak.lock();
    if (!http) return done(Cancelled("the server is shutting down"));
    struct StatusOnly final : HttpStreamHandler {
      long status = 0;
      Status OnHead(long s, const HttpHeaders&) override {
        status = s;
        return Status::Ok();
      }
      Status OnBody(std::string_view) override { return Status::Ok(); }
    };
    HttpRequest req;
    req.url = url;
    req.headers = headers;
    req.body = body;
    req.connect_timeout = std::chrono::milliseconds(5000);
    req.idle_timeout = std::chrono::milliseconds(10000);
    auto h = std::make_shared<StatusOnly>();
    http->Start(std::move(req), h, [h, done = std::move(done)](Status s) {
      if (!s.ok()) return done(Unavailable("webhook delivery failed: " + s.message()));
      if (h->status >= 200 && h->status < 300) return done(Status::Ok());
      std::string what = "webhook answered HTTP " + std::to_string(h->status);
      done(h->status == 429 || h->status >= 500 ? Unavailable(what) : FailedPrecondition(what));
    });
  };
  o.on_done = [this](const Notification& n, const Status& s, int attempts) {
    delivering_.erase(n.delivery_id);
    ++ctx_.metrics.webhooks[s.ok() ? "delivered" : "failed"];
    // Delivered, or refused for good: finished in the outbox. A receiver
    // still unreachable after the last attempt leaves it due: the outbox
    // sweep tries it again after notify_retry.
    const bool again = !s.ok() && IsRetryable(s);
    if (!s.ok()) {
      std::fprintf(stderr,
                   "agentloop: %s notification %s to %s not delivered after %d attempts%s: %s\n",
                   n.event.c_str(), n.delivery_id.c_str(), n.url.c_str(), attempts,
                   again ? " (tried again later)" : "", RedactSecrets(s.message()).c_str());
    }
    if (again) return;
    Blocking([this, id = n.delivery_id]() { return ctx_.state.FinishNotification(id); },
             [id = n.delivery_id](Status f) {
               if (!f.ok()) {
                 std::fprintf(stderr, "agentloop: notification %s: %s\n", id.c_str(),
                              f.ToString().c_str());
               }
             });
  };
  return o;
}

// The notification announcing a paused item. Its delivery id follows from
// the item, so the turn's end and a restarted server's sweep record it
// once between them (AddNotification adds an id once).
OutboxNotification ServerImpl::PendingNotification(const AgentSpec& agent, const std::string& key,
                                                   const std::string& sid,
                                                   const std::string& turn_id,
                                                   const PendingItem& item,
                                                   int64_t created_at_s) const {
  const int64_t expires = SystemNowMs() / 1000 + options_.link_ttl.count();
  auto link = [&](const char* action) {
    Result<std::string> token = MintLinkToken(key, LinkClaim{agent.name, item.id, action, expires});
    return token.ok() ? public_url_ + "/v1/links/" + *token : std::string();
  };
  Json b = {{"agent", agent.name},         {"session_id", sid},     {"turn_id", turn_id},
            {"created_at", created_at_s},  {"pending_id", item.id}, {"tool", item.tool},
            {"arguments", item.arguments}, {"reason", item.reason}};
  std::string event;
  if (item.kind == PendingKind::kQuestion) {
    event = "question.asked";
    b["links"] = {{"answer", link("answer")}, {"expires_at", expires}};
    b["answer_url"] = public_url_ + "/v1/questions/" + item.id + "/answer";
  } else {
    event = "approval.requested";
    b["links"] = {{"approve", link("approve")}, {"deny", link("deny")}, {"expires_at", expires}};
    b["decision_url"] = public_url_ + "/v1/approvals/" + item.id + "/decision";
    // The change a write or edit would make, as the console shows it.
    if (item.tool == "write" || item.tool == "edit") {
      Result<SessionInfo> s = engine_.store().GetSession(sid);
      Result<Json> diff = s.ok() ? ItemDiff(*s, item) : Result<Json>(s.error());
      if (diff.ok()) {
        // Bounded: the body is stored in the outbox and sent on every channel.
        constexpr size_t kMaxDiff = 64 << 10;
        if (auto d = diff->find("diff"); d != diff->end() && d->is_string() &&
                                         d->get_ref<const std::string&>().size() > kMaxDiff) {
          *d = std::string(TruncateUtf8(d->get_ref<const std::string&>(), kMaxDiff));
          (*diff)["truncated"] = true;
        }
        b["diff"] = std::move(*diff);
      }
    }
  }
  b["type"] = event;
  return OutboxNotification{"dlv_" + item.id, sid, agent.name, std::move(event), DumpJson(b), 0};
}

// Records each notification in the outbox (pool thread) and returns those
// this server should deliver: the ones it added, and, when the store
// failed, the ones it could not record (delivered from memory only).
std::vector<OutboxNotification> ServerImpl::RecordNotifications(
    std::vector<OutboxNotification> notes) {
  // One row per channel that takes the event (channels.h): the agent's
  // webhook under the notification's own id, each [[notify]] channel
  // under `<id>.<key>`.
  std::vector<OutboxNotification> all;
  for (OutboxNotification& n : notes) {
    const AgentSpec* agent = FindAgent(n.agent);
    if (agent == nullptr) continue;
    for (const NotifyChannel& c : agent->channels) {
      if (!c.events.contains(n.event)) continue;
      OutboxNotification copy = n;
      copy.id = ChannelDeliveryId(n.id, c.key);
      all.push_back(std::move(copy));
    }
    if (!agent->webhook.url.empty()) all.push_back(std::move(n));
  }
  std::vector<OutboxNotification> out;
  for (OutboxNotification& n : all) {
    Result<bool> added = ctx_.state.AddNotification(n, options_.notify_retry);
    if (!added.ok()) {
      std::fprintf(stderr, "agentloop: notification %s not recorded in the outbox: %s\n",
                   n.id.c_str(), added.error().ToString().c_str());
    }
    if (!added.ok() || *added) out.push_back(std::move(n));
  }
  return out;
}

// Starts delivering a recorded notification (io thread), unless this
// server delivers it already.
void ServerImpl::Deliver(const OutboxNotification& n) {
  const AgentSpec* agent = FindAgent(n.agent);
  // An agent that lost its webhook: the notification stays in the outbox
  // until it ages out.
  if (agent == nullptr) return;
  const std::string key = ChannelKeyOf(n.id);
  if (key.empty()) {
    if (agent->webhook.url.empty()) return;
    if (!delivering_.insert(n.id).second) return;
    return notifier_.Send(
        Notification{agent->webhook.url, agent->webhook.secret, n.event, n.body, n.id, {}});
  }
  auto c = std::find_if(agent->channels.begin(), agent->channels.end(),
                        [&](const NotifyChannel& ch) { return ch.key == key; });
  if (c == agent->channels.end()) return;
  if (!delivering_.insert(n.id).second) return;
  if (c->kind == "webhook") {
    return notifier_.Send(Notification{c->url, c->secret, n.event, n.body, n.id, {}});
  }
  // The channel lives in options_, as long as the server.
  Notification out{c->Describe(), "", n.event, n.body, n.id, {}};
  out.deliver = [this, ch = &*c, r = Rendered{n.event, n.body, n.id}](
                    std::function<void(Status)> done) { channels_.Send(*ch, r, std::move(done)); };
  notifier_.Send(std::move(out));
}

// Tells the session's agent's webhook how the turn ended: one
// approval.requested or question.asked per item it paused on, with links
// that decide it; else turn.completed. Each is recorded in the outbox
// before its first attempt.
void ServerImpl::Notify(const std::string& sid, const std::string& agent_name,
                        const std::string& turn_id, const TurnResult& r, int attempt) {
  if (link_keys_.empty()) return;
  Blocking(
      [this, sid, agent_name, turn_id, r]() -> Result<std::vector<OutboxNotification>> {
        std::string name = agent_name;
        if (name.empty()) {
          AL_ASSIGN_OR_RETURN(SessionInfo s, engine_.store().GetSession(sid));
          name = s.agent;
        }
        const AgentSpec* agent = FindAgent(name);
        auto key = link_keys_.find(name);
        if (agent == nullptr || key == link_keys_.end()) {
          return std::vector<OutboxNotification>{};
        }
        const int64_t now = SystemNowMs() / 1000;
        std::vector<OutboxNotification> all;
        for (const PendingItem& item : r.pending) {
          all.push_back(PendingNotification(*agent, key->second, sid, turn_id, item, now));
        }
        if (r.pending.empty()) {
          Json b = {{"type", "turn.completed"},
                    {"agent", agent->name},
                    {"session_id", sid},
                    {"turn_id", turn_id},
                    {"created_at", now},
                    {"stop", std::string(StopReasonName(r.stop))},
                    {"reason", r.reason},
                    {"final_text", std::string(TruncateUtf8(r.final_text, 16 << 10))},
                    {"counters", ToJson(r.counters)},
                    {"session_url", public_url_ + "/v1/sessions/" + sid}};
          all.push_back(
              OutboxNotification{NewId("dlv"), sid, agent->name, "turn.completed", DumpJson(b), 0});
        }
        return RecordNotifications(std::move(all));
      },
      [this, sid, agent_name, turn_id, r,
       attempt](Result<std::vector<OutboxNotification>> recorded) {
        if (recorded.ok()) {
          for (const OutboxNotification& n : *recorded) Deliver(n);
          return;
        }
        // Nothing was recorded (the store could not be read): try again
        // while a link of the notification would still be valid.
        const auto waited = options_.notify_retry * (attempt + 1);
        const bool again = !ctx_.shutting_down && waited < options_.link_ttl;
        std::fprintf(stderr,
                     "agentloop serve: the notifications of session %s (turn %s) are not recorded "
                     "yet: %s%s\n",
                     sid.c_str(), turn_id.c_str(), recorded.error().ToString().c_str(),
                     again ? "; trying again" : "; given up");
        if (!again) return;
        auto timer = std::make_shared<boost::asio::steady_timer>(io_, options_.notify_retry);
        timer->async_wait(
            [this, timer, sid, agent_name, turn_id, r, attempt](boost::system::error_code ec) {
              if (!ec && !ctx_.shutting_down) Notify(sid, agent_name, turn_id, r, attempt + 1);
            });
      });
}

// At start: announces the outstanding items that have no notification in
// the outbox (their turn paused, and its server stopped before recording
// it), then sweeps the outbox every notify_retry for due notifications
// (their server stopped, or their receiver was unreachable).
void ServerImpl::StartOutbox() {
  if (link_keys_.empty()) return;
  outbox_timer_.emplace(io_);
  Blocking(
      [this]() -> Result<std::vector<OutboxNotification>> {
        AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> pending,
                            engine_.store().ListPending(std::nullopt));
        const int64_t oldest =
            SystemNowMs() -
            std::chrono::duration_cast<std::chrono::milliseconds>(options_.link_ttl).count();
        std::map<std::string, std::string> agent_of;  // session -> agent
        std::vector<OutboxNotification> all;
        for (const PendingRecord& p : pending) {
          if (p.created_at_ms < oldest) continue;
          auto known = agent_of.find(p.session_id);
          if (known == agent_of.end()) {
            Result<SessionInfo> s = engine_.store().GetSession(p.session_id);
            known = agent_of.emplace(p.session_id, s.ok() ? s->agent : std::string()).first;
          }
          const AgentSpec* agent = FindAgent(known->second);
          auto key = link_keys_.find(known->second);
          if (agent == nullptr || key == link_keys_.end()) continue;
          all.push_back(PendingNotification(*agent, key->second, p.session_id, p.turn_id, p.item,
                                            p.created_at_ms / 1000));
        }
        return RecordNotifications(std::move(all));
      },
      [this](Result<std::vector<OutboxNotification>> r) {
        if (!r.ok()) {
          std::fprintf(stderr, "agentloop serve: cannot list pending items to announce: %s\n",
                       r.error().ToString().c_str());
        } else {
          for (const OutboxNotification& n : *r) Deliver(n);
        }
        SweepOutbox();
      });
}

void ServerImpl::SweepOutbox() {
  if (ctx_.shutting_down || !outbox_timer_) return;
  constexpr int kBatch = 100;
  Blocking(
      [this]() {
        return ctx_.state.ClaimNotifications(
            kBatch, options_.notify_retry,
            std::chrono::duration_cast<std::chrono::milliseconds>(options_.link_ttl));
      },
      [this](Result<std::vector<OutboxNotification>> r) {
        if (ctx_.shutting_down) return;
        bool more = false;
        if (r.ok()) {
          for (const OutboxNotification& n : *r) Deliver(n);
          more = r->size() == static_cast<size_t>(kBatch);
        } else {
          std::fprintf(stderr, "agentloop serve: notification outbox: %s\n",
                       r.error().ToString().c_str());
        }
        outbox_timer_->expires_after(more ? std::chrono::milliseconds(0) : options_.notify_retry);
        outbox_timer_->async_wait([this](boost::system::error_code ec) {
          if (!ec) SweepOutbox();
        });
      });
}

}  // namespace agentloop::server
