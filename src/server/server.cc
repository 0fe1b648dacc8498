#include "server/server.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <openssl/crypto.h>

#include "agentloop/event_data.h"
#include "agentloop/executor.h"
#include "agentloop/json.h"
#include "agentloop/session_tree.h"

#include "base/ids.h"
#include "base/strings.h"
#include "config/trust.h"
#include "mcp/servers.h"
#include "protocol/codec.h"
#include "providers/http_client.h"
#include "server/channels.h"
#include "server/console.h"
#include "server/inbox.h"
#include "server/links.h"
#include "server/notifier.h"
#include "server/pugi.h"
#include "server/render.h"
#include "server/secrets.h"
#include "server/server_impl.h"
#include "server/slack.h"
#include "server/wakeup.h"
#include "tools/builtin.h"

namespace agentloop::server {

namespace asio = boost::asio;
using http_verb = boost::beast::http::verb;

Result<TokenGrant> ParseTokenGrant(std::string_view spec) {
  std::vector<std::string> parts;
  for (std::string_view rest = spec;;) {
    size_t c = rest.find(':');
    parts.emplace_back(rest.substr(0, c));
    if (c == std::string_view::npos) break;
    rest = rest.substr(c + 1);
  }
  if (parts.size() != 3) {
    return InvalidArgument(
        "token grant '" + std::string(spec.substr(0, 80)) +
        "' must be SHA256HEX:TENANT:SCOPES (e.g. <64 hex digits>:acme:read,write)");
  }
  TokenGrant g;
  g.sha256 = parts[0];
  if (g.sha256.size() != 64 ||
      g.sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return InvalidArgument(
        "token grant: the first field must be the token's SHA-256 as 64 lower-case hex digits "
        "(`printf %s TOKEN | sha256sum`), never the token itself");
  }
  g.tenant = parts[1];
  // A tenant names its folder below an agent's root of workspaces.
  if (g.tenant.empty() || g.tenant.size() > 64 || g.tenant == "." || g.tenant == ".." ||
      g.tenant.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-.") != std::string::npos) {
    return InvalidArgument("token grant: tenant '" + g.tenant +
                           "' must be 1-64 characters of a-z, 0-9, '_', '-', '.' (not . or ..)");
  }
  for (std::string_view rest = parts[2]; !rest.empty();) {
    size_t c = rest.find(',');
    std::string_view s = rest.substr(0, c);
    rest = c == std::string_view::npos ? std::string_view() : rest.substr(c + 1);
    if (s == "read") {
      g.scopes |= kScopeRead;
    } else if (s == "write") {
      g.scopes |= kScopeWrite;
    } else if (s == "approve") {
      g.scopes |= kScopeApprove;
    } else if (s == "admin") {
      g.scopes |= kScopeAdmin;
    } else {
      return InvalidArgument("token grant: unknown scope '" + std::string(s) +
                             "' (read, write, approve, admin)");
    }
  }
  if (g.scopes == 0) return InvalidArgument("token grant: no scope given");
  return g;
}

ServerImpl::ServerImpl(ServerOptions options, Engine& engine, asio::io_context& io)
    : ctx_(std::move(options), engine, io),
      http_(io_, options_.limits, [this](std::shared_ptr<Exchange> ex) { Handle(std::move(ex)); }),
      notifier_(io_, NotifierOptionsFor()),
      channels_(io_),
      signals_(io_),
      drain_timer_(io_),
      hub_(
          ctx_, [this](const std::string& id) { return !host_.LiveStatus(id).empty(); },
          [this] {
            if (ctx_.shutting_down) MaybeFinishShutdown();
          }),
      host_(
          ctx_, hub_,
          [this](const std::string& sid, const std::string& agent, const std::string& turn_id,
                 const TurnResult& r) { Notify(sid, agent, turn_id, r, 0); },
          [this] {
            if (ctx_.shutting_down) MaybeFinishShutdown();
          }) {
  for (const AgentSpec& a : options_.agents) {
    if (a.webhook.url.empty()) continue;
    Result<std::string> key = LinkKey(a.webhook.secret);
    if (key.ok()) link_keys_[a.name] = std::move(*key);
  }
  for (const AgentSpec& a : options_.agents) {
    for (const NotifyChannel& c : a.channels) {
      if (c.kind == "slack" && !c.slack.signing_secret.empty()) {
        slack_signers_.push_back({c.slack.signing_secret, a.name});
      }
      if (c.kind == "slack" && !c.slack.api_base_url.empty()) {
        slack_api_bases_.push_back(c.slack.api_base_url);
      }
    }
  }
}

ServerImpl::~ServerImpl() {
  host_.StopSharedStore();
  hub_.StopTail();
  notifier_.Stop();
  channels_.Stop();
  // Run returned only after every turn ended: nothing of theirs is still
  // to come when the executor drains.
  host_.Shutdown();
  ctx_.pool.join();
}

Status ServerImpl::Listen() {
  AL_ASSIGN_OR_RETURN(auto endpoint, ParseListenAddress(options_.listen));
  Status revoked = LoadRevokedCookies();
  if (!revoked.ok()) return revoked.WithContext("reading the revoked console sign-ins");
  if (options_.tokens.empty() && !options_.no_auth) {
    return InvalidArgument(
        "no token to authenticate callers with: configure server.tokens (`agentloop serve` "
        "generates one when none is configured), or serve without authentication (no_auth)");
  }
  if (options_.no_auth && !options_.tokens.empty()) {
    return InvalidArgument("serving without authentication excludes server.tokens");
  }
  if (options_.no_auth && !endpoint.address().is_loopback()) {
    return InvalidArgument("refusing to listen on " + options_.listen +
                           " without authentication: listen on loopback (127.0.0.1), or "
                           "authenticate callers with tokens");
  }
  cookie_key_ = options_.cookie_secret;
  if (cookie_key_.empty()) {
    AL_ASSIGN_OR_RETURN(cookie_key_, RandomSecret());
  }
  // An agent notified only through [[notify]] channels signs its links
  // with a key of the server's own (shared by servers sharing a store).
  for (const AgentSpec& a : options_.agents) {
    if (a.channels.empty() || link_keys_.contains(a.name)) continue;
    AL_ASSIGN_OR_RETURN(link_keys_[a.name], LinkKey("agent-links:" + a.name + ":" + cookie_key_));
  }
  AL_RETURN_IF_ERROR(http_.Listen(endpoint));
  public_url_ = options_.public_url;
  if (public_url_.empty()) {
    std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
    if (host.empty()) host = "127.0.0.1";
    public_url_ = "http://" + host + ":" + std::to_string(http_.port());
  }
  while (!public_url_.empty() && public_url_.back() == '/') public_url_.pop_back();
  AllowHosts();
  return Status::Ok();
}

// The Host values this server answers to, in lower case: its listen
// address (unless unspecified, 0.0.0.0 or [::]), the loopback names with
// its port, and public_url's authority; a default port may be left out.
bool ServerImpl::AdmitOrAnswerBusy(const std::shared_ptr<Exchange>& ex, const std::string& id,
                                   const std::string& tenant, std::function<void()> again) {
  switch (host_.Admit(id, tenant, ex, std::move(again))) {
    case SessionHost::Admission::kLater:
      return false;
    case SessionHost::Admission::kBusy:
      ex->Send(Problem(409, "session_busy", "session " + id + " is running a turn"));
      return false;
    case SessionHost::Admission::kStart:
      break;
  }
  return true;
}

void ServerImpl::AllowHosts() {
  const std::string port = std::to_string(http_.port());
  auto add = [this](const std::string& host, const std::string& p, std::string_view fallback) {
    if (host.empty()) return;
    hosts_.insert(ToLower(host) + ":" + p);
    if (p == fallback) hosts_.insert(ToLower(host));
  };
  std::string listen_host = options_.listen.substr(0, options_.listen.rfind(':'));
  if (listen_host != "0.0.0.0" && listen_host != "[::]") add(listen_host, port, "80");
  for (const char* loopback : {"localhost", "127.0.0.1", "[::1]"}) add(loopback, port, "80");
  const std::string_view url = options_.public_url;
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return;
  const std::string_view scheme = url.substr(0, scheme_end);
  std::string_view authority = url.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  const std::string_view fallback = scheme == "https" ? "443" : "80";
  const size_t colon = authority.rfind(':');
  const bool has_port =
      colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos;
  if (has_port) {
    add(std::string(authority.substr(0, colon)), std::string(authority.substr(colon + 1)),
        fallback);
  } else {
    add(std::string(authority), std::string(fallback), fallback);
  }
}

Status ServerImpl::Run() {
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.async_wait([this](boost::system::error_code ec, int) {
    if (!ec) BeginShutdown();
  });
  ContinueDecidedBatches();
  if (host_.StartSharedStore()) hub_.StartTail();
  StartOutbox();
  RefreshRevokedCookies();
  // The loop runs until this server's shutdown has finished: not less
  // (a stop left queued by an earlier server on the same io_context only
  // restarts it), and not more (the engine's own work on it may outlive
  // the server; the guard keeps it from ending early for lack of work).
  auto guard = asio::make_work_guard(io_);
  while (!finished_->load()) {
    io_.restart();
    io_.run();
  }
  return ctx_.drained ? Status::Ok() : Unavailable("running turns were cancelled at shutdown");
}

void ServerImpl::Shutdown() {
  asio::post(io_, [this] { BeginShutdown(); });
}

// A batch decided while no server ran it (its resolver could not take the
// session, or stopped first) continues now, for the sessions of this
// server's agents; a command-line session is left to its user's `resume`.
// Inputs queued before a restart (or for an instance that stopped) run
// too; a session whose batch is decided takes them after that turn.
void ServerImpl::ContinueDecidedBatches() {
  using Lists = std::pair<std::vector<std::string>, std::vector<std::string>>;
  Blocking(
      [this]() -> Result<Lists> {
        AL_ASSIGN_OR_RETURN(auto decided, engine_.store().ListDecided());
        AL_ASSIGN_OR_RETURN(auto queued, engine_.store().ListQueuedSessions());
        return Lists{std::move(decided), std::move(queued)};
      },
      [this](Result<Lists> ids) {
        if (!ids.ok()) return;
        for (const auto& id : ids->first) host_.ContinueDecided(id);
        for (const auto& id : ids->second) {
          if (std::find(ids->first.begin(), ids->first.end(), id) == ids->first.end()) {
            host_.RunQueued(id);
          }
        }
      });
}

void ServerImpl::Handle(std::shared_ptr<Exchange> ex) {
  const Request& req = ex->request();
  std::string request_id = NewId("req");
  // Probes reveal nothing and must work without a token or a known Host
  // (an orchestrator's probe names the address it dialled); a link's
  // token is its own authority (it names one item and one action, signed).
  const bool probe = req.path == "/v1/health" || req.path == "/v1/ready";
  if (ctx_.shutting_down && !probe) {
    return ex->Send(Problem(503, "shutting_down", "the server is shutting down", request_id));
  }
  // A page that rebinds its own name to this address reaches the server
  // under that name: only the names of the server are answered.
  if (!probe && !hosts_.contains(ToLower(req.Header("Host")))) {
    return ex->Send(Problem(421, "misdirected_request",
                            "the Host '" + std::string(req.Header("Host")) +
                                "' is not a name of this server (set server.public_url to the "
                                "address its clients use)",
                            request_id));
  }
  // The console's page and assets (console.h) hold nothing secret.
  if (auto asset = console::Asset(req)) return ex->Send(std::move(*asset));
  // Slack's interactions are signed by Slack (SlackInteraction checks it).
  const bool link = StartsWith(req.path, "/v1/links/") || req.path == "/v1/slack/interactions";
  std::optional<Principal> who = probe || link ? Principal{"", 0} : Authenticate(req);
  if (!who) {
    Response r =
        Problem(401, "unauthorized",
                "missing or unknown bearer token (Authorization: Bearer TOKEN)", request_id);
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return ex->Send(std::move(r));
  }
  const bool mutating = req.method != http_verb::get && req.method != http_verb::head;
  // A link's POST needs no Origin check: a page elsewhere cannot know the
  // token, and the server may be reached under its public name. A browser
  // sends Origin on every state-changing fetch: a console cookie on a
  // request without one is not the console's.
  if (mutating && !link &&
      (!OriginAllowed(req) || (who->console_cookie && req.Header("Origin").empty()))) {
    return ex->Send(Problem(
        403, "origin_not_allowed",
        "the Origin '" + std::string(req.Header("Origin")) + "' may not change anything here",
        request_id));
  }
  std::vector<std::string> p = SplitPath(req.path);
  if (p.empty() || p[0] != "v1") return Route(ex, *who, p, CompatRoutes());
  p.erase(p.begin());
  if (mutating && req.method == http_verb::post && !req.Header("Idempotency-Key").empty()) {
    return Idempotent(ex, *who,
                      [this, ex, who = *who, p = std::move(p)] { Route(ex, who, p, Routes()); });
  }
  Route(ex, *who, p, Routes());
}

void ServerImpl::Route(const std::shared_ptr<Exchange>& ex, const Principal& who,
                       const std::vector<std::string>& p, const std::vector<RouteSpec>& table) {
  const Request& req = ex->request();
  bool path_known = false;
  for (const RouteSpec& r : table) {
    std::vector<std::string> shape = SplitPath(r.pattern);
    if (shape.size() != p.size()) continue;
    Params params;
    bool match = true;
    for (size_t i = 0; i < shape.size() && match; ++i) {
      if (shape[i].front() == '{') {
        params.push_back(p[i]);
      } else {
        match = shape[i] == p[i];
      }
    }
    if (!match) continue;
    path_known = true;
    if (r.method != req.method) continue;
    if (r.scope != 0 && !who.Has(r.scope)) {
      return ex->Send(Problem(403, "forbidden", "the token lacks the scope this route needs"));
    }
    return (this->*r.fn)(ex, who, params);
  }
  if (path_known) {
    return ex->Send(Problem(
        405, "method_not_allowed",
        std::string(boost::beast::http::to_string(req.method)) + " is not allowed on " + req.path));
  }
  ex->Send(Problem(404, "not_found", "no route for " + req.path));
}

std::optional<Principal> ServerImpl::Authenticate(const Request& req) const {
  if (options_.no_auth) return Principal{"default", kAllScopes};
  std::string_view auth = req.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.empty()) {
    std::optional<console::CookieSignIn> c =
        console::VerifyCookie(req, options_.tokens, cookie_key_, ConsoleNowMs());
    if (!c || revoked_cookies_.contains(c->id)) return std::nullopt;
    return Principal{c->grant->tenant, c->grant->scopes, true};
  }
  if (auth.size() <= kBearer.size() || strncasecmp(auth.data(), kBearer.data(), 7) != 0) {
    return std::nullopt;
  }
  std::string hash = Sha256Hex(auth.substr(kBearer.size()));
  for (const auto& t : options_.tokens) {
    // Comparing hashes: the time taken says nothing about the token.
    if (t.sha256.size() == hash.size() &&
        CRYPTO_memcmp(t.sha256.data(), hash.data(), hash.size()) == 0) {
      return Principal{t.tenant, t.scopes};
    }
  }
  return std::nullopt;
}

bool ServerImpl::OriginAllowed(const Request& req) const {
  std::string_view origin = req.Header("Origin");
  if (origin.empty()) return true;  // not a browser's cross-site request
  std::string_view host = req.Header("Host");
  if (!host.empty() &&
      (origin == "http://" + std::string(host) || origin == "https://" + std::string(host))) {
    return true;
  }
  return std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(), origin) !=
         options_.allowed_origins.end();
}

// A POST with an Idempotency-Key: claims the key in the store, then runs
// `run` and records its answer; a repeat gets that answer (or 409 while
// the first is still running, 422 when the key came with another request).
void ServerImpl::Idempotent(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            std::function<void()> run) {
  const Request& req = ex->request();
  std::string key(req.Header("Idempotency-Key"));
  if (key.size() > 255) {
    return ex->Send(Problem(400, "invalid_request", "Idempotency-Key is longer than 255 bytes"));
  }
  std::string fingerprint = Sha256Hex(req.target + "\n" + req.body);
  Blocking(
      [this, tenant = who.tenant, key, fingerprint]() {
        return ctx_.state.ClaimIdempotencyKey(tenant, key, fingerprint, options_.idempotency_ttl,
                                              kInFlightTtl);
      },
      [this, ex, tenant = who.tenant, key, run = std::move(run)](Result<IdempotencyClaim> c) {
        using K = IdempotencyClaim::Kind;
        if (!c.ok()) return ex->Send(FromStatus(c.error()));
        switch (c->kind) {
          case K::kReused:
            return ex->Send(Problem(422, "idempotency_key_reused",
                                    "this Idempotency-Key was used with another request"));
          case K::kInFlight:
            return ex->Send(
                Problem(409, "idempotency_in_flight",
                        "a request with this Idempotency-Key is still being processed"));
          case K::kDone: {
            Result<Response> r = ResponseFromJson(c->response);
            if (!r.ok()) return ex->Send(FromStatus(r.error()));
            r->headers.emplace_back("Idempotent-Replayed", "true");
            return ex->Send(std::move(*r));
          }
          case K::kClaimed:
            break;
        }
        // The answer is recorded before it is sent, so a repeat that
        // follows it finds it.
        ex->InterceptResponse([this, tenant, key](const Response& r, std::function<void()> send) {
          // A server error may go away on a retry: do not pin it.
          std::string json = r.status >= 500 ? std::string() : ResponseToJson(r);
          asio::post(ctx_.pool, [this, tenant, key, json, send = std::move(send)] {
            Status s = json.empty() ? ctx_.state.ReleaseIdempotencyKey(tenant, key)
                                    : ctx_.state.FinishIdempotencyKey(tenant, key, json);
            if (!s.ok()) {
              // Unrecorded: the key stays in flight until kInFlightTtl (a
              // repeat meanwhile is answered 409), and the answer still goes.
              std::fprintf(stderr, "agentloop serve: idempotency key of tenant %s: %s\n",
                           tenant.c_str(), s.ToString().c_str());
            }
            send();
          });
        });
        run();
      });
}

std::string ServerImpl::ResponseToJson(const Response& r) {
  Json headers = Json::array();
  for (const auto& [k, v] : r.headers) headers.push_back(Json::array({k, v}));
  return DumpJson(
      {{"status", r.status}, {"type", r.content_type}, {"body", r.body}, {"headers", headers}});
}

Result<Response> ServerImpl::ResponseFromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  Response r;
  if (j.is_object() && j["status"].is_number_unsigned() && j["type"].is_string() &&
      j["body"].is_string() && j["headers"].is_array()) {
    r.status = j["status"].get<unsigned>();
    r.content_type = j["type"].get<std::string>();
    r.body = j["body"].get<std::string>();
    for (const auto& h : j["headers"]) {
      if (!h.is_array() || h.size() != 2 || !h[0].is_string() || !h[1].is_string()) {
        return DataLoss("a stored idempotent answer is corrupt");
      }
      r.headers.emplace_back(h[0].get<std::string>(), h[1].get<std::string>());
    }
    return r;
  }
  return DataLoss("a stored idempotent answer is corrupt");
}

void ServerImpl::Health(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
  ex->Send(JsonResponse(200, {{"status", "ok"}}));
}

void ServerImpl::Ready(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
  if (ctx_.shutting_down) return ex->Send(Problem(503, "shutting_down", "shutting down"));
  ex->Send(JsonResponse(200, {{"status", "ready"}}));
}

void ServerImpl::Agents(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
  Json items = Json::array();
  for (const auto& a : options_.agents) items.push_back(AgentJson(a));
  ex->Send(JsonResponse(200, {{"items", items}}));
}

void ServerImpl::Agent(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p) {
  const AgentSpec* a = FindAgent(p[0]);
  if (a == nullptr) return ex->Send(Problem(404, "not_found", "no agent '" + p[0] + "'"));
  ex->Send(JsonResponse(200, AgentJson(*a)));
}

void ServerImpl::OpenApi(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
  Response r;
  r.body = std::string(OpenApiSpec());
  ex->Send(std::move(r));
}

// Prometheus text format.
void ServerImpl::Metrics(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
  Blocking(
      [this]() { return engine_.store().ListPending(std::nullopt); },
      [this, ex](Result<std::vector<PendingRecord>> pending) {
        std::set<std::string> paused;
        if (pending.ok()) {
          for (const auto& p : *pending) paused.insert(p.session_id);
        }
        const size_t running = host_.Running().size();
        std::string m;
        auto line = [&m](std::string_view name, std::string_view help, std::string_view type) {
          m.append("# HELP ").append(name).append(" ").append(help).append("\n");
          m.append("# TYPE ").append(name).append(" ").append(type).append("\n");
        };
        line("agentloop_sessions", "sessions by status (running: a turn runs here)", "gauge");
        m += "agentloop_sessions{status=\"running\"} " + std::to_string(running) + "\n";
        m += "agentloop_sessions{status=\"paused\"} " + std::to_string(paused.size()) + "\n";
        line("agentloop_turns_started_total", "turns started", "counter");
        m += "agentloop_turns_started_total " + std::to_string(ctx_.metrics.turns_started) + "\n";
        line("agentloop_turns_finished_total", "turns finished, by stop reason", "counter");
        for (const auto& [stop, n] : ctx_.metrics.turns_finished) {
          m += "agentloop_turns_finished_total{stop=\"" + stop + "\"} " + std::to_string(n) + "\n";
        }
        line("agentloop_sse_clients", "open event streams", "gauge");
        m += "agentloop_sse_clients " + std::to_string(hub_.clients()) + "\n";
        line("agentloop_stream_overflows_total",
             "event streams closed with stream.desync (reader too slow)", "counter");
        m += "agentloop_stream_overflows_total " + std::to_string(ctx_.metrics.overflows) + "\n";
        line("agentloop_webhook_deliveries_total",
             "agent notifications, by outcome (after retries)", "counter");
        for (const auto& [outcome, n] : ctx_.metrics.webhooks) {
          m += "agentloop_webhook_deliveries_total{outcome=\"" + outcome + "\"} " +
               std::to_string(n) + "\n";
        }
        ctx_.metrics.model.Write(m, "agentloop_model_call_seconds",
                                 "model calls: step_begin to step_end");
        ctx_.metrics.tool.Write(m, "agentloop_tool_call_seconds",
                                "tool calls: tool_call_begin to tool_call_end");
        Response r;
        r.content_type = "text/plain; version=0.0.4";
        r.body = std::move(m);
        ex->Send(std::move(r));
      });
}

Json ServerImpl::AgentJson(const AgentSpec& a) {
  return {{"name", a.name},
          {"description", a.description},
          {"provider", std::string(ProviderKindName(a.options.provider))},
          {"model", a.options.model},
          {"command", std::string(CommandKindName(a.options.command))}};
}

void ServerImpl::BeginShutdown() {
  if (ctx_.shutting_down) return;
  ctx_.shutting_down = true;
  host_.StopSharedStore();
  hub_.StopTail();
  if (outbox_timer_) outbox_timer_->cancel();
  if (revocation_timer_) revocation_timer_->cancel();
  http_.StopAccepting();
  signals_.cancel();
  hub_.CloseAll(Frame("", "shutdown", "{}"));
  drain_timer_.expires_after(options_.drain_timeout);
  drain_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    host_.StopAll();
    ctx_.drained = false;
  });
  MaybeFinishShutdown();
}

void ServerImpl::MaybeFinishShutdown() {
  if (host_.AnyInUse()) return;
  drain_timer_.cancel();
  // Sessions close (locks released) on the pool; then the loop ends.
  if (!hub_.empty()) return;  // their final frames are being written
  if (stop_posted_) return;
  stop_posted_ = true;
  // Deliveries still running are abandoned (the outbox keeps them for the
  // next start); their HTTP clients end here, on the io thread, so no
  // transfer is left behind holding what it would have called.
  notifier_.Stop();
  notify_http_.reset();
  channels_.AbortTransfers();
  asio::post(ctx_.pool, [&io = io_, finished = finished_] {
    asio::post(io, [&io, finished] {
      finished->store(true);
      io.stop();
    });
  });
}

std::vector<std::pair<http_verb, std::string_view>> ServerImpl::RouteList() {
  std::vector<std::pair<http_verb, std::string_view>> out;
  for (const auto& r : Routes()) out.emplace_back(r.method, r.pattern);
  return out;
}

const std::vector<ServerImpl::RouteSpec>& ServerImpl::Routes() {
  static const std::vector<RouteSpec> kRoutes = {
      {http_verb::get, "/health", 0, &ServerImpl::Health},
      {http_verb::get, "/ready", 0, &ServerImpl::Ready},
      {http_verb::get, "/openapi.json", kScopeRead, &ServerImpl::OpenApi},
      // Counts over every tenant's sessions: the server's operator's.
      {http_verb::get, "/metrics", kScopeAdmin, &ServerImpl::Metrics},
      {http_verb::get, "/agents", kScopeRead, &ServerImpl::Agents},
      {http_verb::get, "/agents/{name}", kScopeRead, &ServerImpl::Agent},
      {http_verb::post, "/sessions", kScopeWrite, &ServerImpl::CreateSession},
      {http_verb::get, "/sessions", kScopeRead, &ServerImpl::ListSessions},
      {http_verb::get, "/sessions/{id}", kScopeRead, &ServerImpl::GetSession},
      {http_verb::delete_, "/sessions/{id}", kScopeWrite, &ServerImpl::DeleteSession},
      {http_verb::patch, "/sessions/{id}", kScopeWrite, &ServerImpl::PatchSession},
      {http_verb::get, "/sessions/{id}/messages", kScopeRead, &ServerImpl::Messages},
      {http_verb::post, "/sessions/{id}/turns", kScopeWrite, &ServerImpl::PostTurn},
      {http_verb::post, "/sessions/{id}/compact", kScopeWrite, &ServerImpl::CompactSession},
      {http_verb::get, "/sessions/{id}/turns/{turn}", kScopeRead, &ServerImpl::GetTurn},
      {http_verb::get, "/sessions/{id}/turns/{turn}/wait", kScopeRead, &ServerImpl::WaitTurn},
      {http_verb::post, "/sessions/{id}/turns/{turn}/cancel", kScopeWrite, &ServerImpl::CancelTurn},
      {http_verb::get, "/sessions/{id}/events", kScopeRead, &ServerImpl::EventsJson},
      {http_verb::get, "/sessions/{id}/events/stream", kScopeRead, &ServerImpl::StreamOne},
      {http_verb::get, "/events/stream", kScopeRead, &ServerImpl::StreamMany},
      {http_verb::get, "/sessions/{id}/pending", kScopeRead, &ServerImpl::SessionPending},
      {http_verb::get, "/approvals", kScopeRead, &ServerImpl::Approvals},
      {http_verb::get, "/questions", kScopeRead, &ServerImpl::Questions},
      {http_verb::get, "/approvals/{id}", kScopeRead, &ServerImpl::GetApproval},
      {http_verb::get, "/questions/{id}", kScopeRead, &ServerImpl::GetQuestion},
      {http_verb::post, "/approvals/{id}/decision", kScopeApprove, &ServerImpl::DecideApproval},
      {http_verb::post, "/questions/{id}/answer", kScopeApprove, &ServerImpl::AnswerQuestion},
      {http_verb::get, "/links/{token}", 0, &ServerImpl::LinkShow},
      {http_verb::post, "/links/{token}", 0, &ServerImpl::LinkDecide},
      {http_verb::post, "/slack/interactions", 0, &ServerImpl::SlackInteraction},
      // The web console (console.h).
      {http_verb::post, "/console/session", 0, &ServerImpl::ConsoleSignIn},
      {http_verb::get, "/console/session", 0, &ServerImpl::ConsoleWhoAmI},
      {http_verb::delete_, "/console/session", 0, &ServerImpl::ConsoleSignOut},
      {http_verb::get, "/approvals/{id}/diff", kScopeRead, &ServerImpl::ApprovalDiff},
      {http_verb::get, "/sessions/{id}/mcp", kScopeRead, &ServerImpl::SessionMcp},
  };
  return kRoutes;
}

// Matched like Routes(), below the root instead of /v1.
const std::vector<ServerImpl::RouteSpec>& ServerImpl::CompatRoutes() {
  static const std::vector<RouteSpec> kRoutes = {
      {http_verb::post, "/agents/{name}/messages", kScopeWrite, &ServerImpl::CompatPost},
      {http_verb::post, "/agents/{name}/messages/stream", kScopeWrite,
       &ServerImpl::CompatPostStream},
      {http_verb::get, "/agents/{name}/sessions/{id}", kScopeRead, &ServerImpl::CompatSession},
      {http_verb::post, "/pending-approvals/{id}/resolve", kScopeApprove,
       &ServerImpl::CompatResolveApproval},
      {http_verb::post, "/pending-questions/{id}/answer", kScopeApprove,
       &ServerImpl::CompatAnswerQuestion},
      {http_verb::post, "/approvals/{id}/approve", kScopeApprove, &ServerImpl::CompatApprove},
      {http_verb::post, "/approvals/{id}/deny", kScopeApprove, &ServerImpl::CompatDeny},
      {http_verb::post, "/questions/{id}/answer", kScopeApprove, &ServerImpl::CompatAnswer},
      {http_verb::post, "/api/pugi/engine", kScopeWrite, &ServerImpl::PugiEngine},
  };
  return kRoutes;
}

std::vector<std::pair<std::string, std::string>> RouteTable() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : ServerImpl::RouteList()) {
    out.emplace_back(std::string(boost::beast::http::to_string(r.first)),
                     "/v1" + std::string(r.second));
  }
  return out;
}

std::string_view OpenApiSpec() {
  static constexpr char kSpec[] =
#include "server_openapi.inc"
      ;
  return {kSpec, sizeof kSpec - 1};
}

Result<std::unique_ptr<Server>> Server::Create(ServerOptions options, Engine& engine,
                                               boost::asio::io_context& io) {
  if (options.agents.empty()) {
    return InvalidArgument("the server has no agent to serve (define one under agents/)");
  }
  std::string defaults;
  for (const AgentSpec& a : options.agents) {
    if (!a.is_default) continue;
    if (!defaults.empty()) {
      return InvalidArgument("agents '" + defaults + "' and '" + a.name +
                             "' are both marked default (agent.default = true): keep one");
    }
    defaults = a.name;
  }
  if (ServerStateOf(engine.store()) == nullptr) {
    return FailedPrecondition(
        "the engine's session store keeps no server state (notification outbox, idempotency "
        "keys, revoked sign-ins): serve from a store that OpenSqliteStore or OpenPostgresStore "
        "opened");
  }
  auto s = std::make_unique<ServerImpl>(std::move(options), engine, io);
  AL_RETURN_IF_ERROR(s->Listen());
  return std::unique_ptr<Server>(std::move(s));
}

}  // namespace agentloop::server
