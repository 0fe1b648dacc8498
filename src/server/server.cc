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
#include "engine/change_preview.h"
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

namespace {

constexpr unsigned kAllScopes = kScopeRead | kScopeWrite | kScopeApprove | kScopeAdmin;

using Params = std::vector<std::string>;
// Told the outcome of a turn (its id, and the result or the error that kept
// it from running).
using TurnFinish = std::function<void(const std::string& turn_id, const Result<TurnResult>&)>;

// How a turn started by the server is answered: `reply` with 202 once its id
// is known (Exchange::Settle: when `reply` carries `stream`, the 202 is only
// what a repeat of the request gets), `stream` with its events after
// `after_seq` until it ends; `finish` with its outcome.
struct TurnStart {
  std::shared_ptr<Exchange> reply;
  std::shared_ptr<EventStream> stream;
  uint64_t after_seq = 0;
  TurnFinish finish;
  // Continue the session's interrupted or failed newest turn (what
  // `agentloop resume ID` does without a prompt) instead of the input.
  bool continue_turn = false;
  // When another process holds the session, queue the input in the store
  // (answered 202 queued) instead of failing busy.
  bool enqueue_if_busy = false;
  // Run the session's next queued input (SessionStore::NextQueuedInput):
  // nothing happens when none waits or another process holds the session.
  bool from_queue = false;
  // `stream` is the seeds' stream route's: it carries loopengine's adapter
  // events too (Subscriber::seeds).
  bool seeds = false;
};

// A Prometheus histogram of durations in seconds.
struct Histogram {
  static constexpr std::array<double, 12> kBounds = {0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                     2.5,  5,    10,  30,   60,  120};
  std::array<uint64_t, kBounds.size()> counts{};
  uint64_t count = 0;
  double sum = 0;

  void Observe(double seconds) {
    for (size_t i = 0; i < kBounds.size(); ++i) {
      if (seconds <= kBounds[i]) ++counts[i];
    }
    ++count;
    sum += seconds;
  }
  void Write(std::string& m, const std::string& name, std::string_view help) const {
    m += "# HELP " + name + " " + std::string(help) + "\n# TYPE " + name + " histogram\n";
    for (size_t i = 0; i < kBounds.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", kBounds[i]);
      m += name + "_bucket{le=\"" + le + "\"} " + std::to_string(counts[i]) + "\n";
    }
    m += name + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
    char total[64];
    std::snprintf(total, sizeof total, "%.6f", sum);
    m += name + "_sum " + total + "\n" + name + "_count " + std::to_string(count) + "\n";
  }
};

struct ServerMetrics {
  uint64_t turns_started = 0;
  std::map<std::string, uint64_t> turns_finished;  // by stop reason
  uint64_t overflows = 0;
  std::map<std::string, uint64_t> webhooks;  // deliveries by outcome
  Histogram model, tool;
};

struct Principal {
  std::string tenant;
  unsigned scopes = 0;
  bool console_cookie = false;  // signed in by the console's cookie, not a bearer token
  bool Has(unsigned scope) const { return (scopes & (scope | kScopeAdmin)) != 0; }
};

std::string Frame(std::string_view id, std::string_view event, std::string_view data) {
  std::string f;
  f.reserve(data.size() + event.size() + id.size() + 24);
  if (!id.empty()) f.append("id: ").append(id).append("\n");
  f.append("event: ").append(event).append("\ndata: ").append(data).append("\n\n");
  return f;
}

Response JsonResponse(unsigned status, const Json& body) {
  Response r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

Response FromStatus(const Status& s) {
  switch (s.code()) {
    case Code::kNotFound:
      return Problem(404, "not_found", s.message());
    case Code::kInvalidArgument:
      return Problem(400, "invalid_request", s.message());
    case Code::kBusy:
      return Problem(409, "session_busy", s.message());
    case Code::kLeaseLost:
      // Another instance took the session over: this one stopped its work.
      return Problem(409, "lease_lost", s.message());
    case Code::kFailedPrecondition:
      return Problem(409, "failed_precondition", s.message());
    case Code::kAlreadyExists:
      return Problem(409, "already_exists", s.message());
    case Code::kUnavailable: {
      // The store or a dependency is down for now (a database restarting).
      Response r = Problem(503, "unavailable", s.message());
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    case Code::kResourceExhausted: {
      // A session's queue of inputs is full until its turns take some.
      Response r = Problem(429, "queue_full", s.message());
      r.headers.emplace_back("Retry-After", "5");
      return r;
    }
    default:
      return Problem(500, "internal", s.message());
  }
}

Json PendingJson(const PendingRecord& r, std::string_view state) {
  Json j = ToJson(r.item);
  j["type"] = std::string(PendingKindName(r.item.kind));
  j["state"] = std::string(state);
  j["session_id"] = r.session_id;
  j["turn_id"] = r.turn_id;
  j["checkpoint_id"] = r.checkpoint_id;
  j["created_at_ms"] = r.created_at_ms;
  // A subagent's item is shown in its root's inbox, with the path of agents.
  if (!r.root_session_id.empty() && r.root_session_id != r.session_id) {
    j["root_session_id"] = r.root_session_id;
  }
  if (r.item.kind == PendingKind::kQuestion) {
    j["answer_url"] = "/v1/questions/" + r.item.id + "/answer";
  } else {
    j["decision_url"] = "/v1/approvals/" + r.item.id + "/decision";
  }
  return j;
}

Json TurnResultJson(const TurnResult& r) {
  Json j = {{"stop", std::string(StopReasonName(r.stop))},
            {"reason", r.reason},
            {"final_text", r.final_text},
            {"truncated", r.truncated},
            {"counters", ToJson(r.counters)}};
  Json pending = Json::array();
  for (const auto& p : r.pending) pending.push_back(p.id);
  j["pending"] = std::move(pending);
  return j;
}

// Parses a JSON object body; an empty body is {}.
Result<Json> ParseBody(const Request& req) {
  if (req.body.empty()) return Json::object();
  Json j = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the request body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("the request body must be a JSON object");
  return j;
}

// Checks that `body` has only the `known` keys.
Status OnlyKeys(const Json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [k, v] : body.items()) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string list;
      for (auto n : known) list += (list.empty() ? "" : ", ") + std::string(n);
      return InvalidArgument("unknown field '" + k + "' (known: " + list + ")");
    }
  }
  return Status::Ok();
}

// How many sessions one list request looks at, at most, to fill a page of a
// status it filters on.
constexpr int kMaxListScan = 5000;

Result<int> LimitParam(const Request& req) {
  std::string text = req.Query("limit", "50");
  if (text.empty() || text.size() > 4 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("limit must be a number from 1 to 200");
  }
  int n = std::stoi(text);
  if (n < 1 || n > 200) return InvalidArgument("limit must be a number from 1 to 200");
  return n;
}

Result<uint64_t> SeqParam(std::string_view text, std::string_view what) {
  if (text.empty()) return uint64_t{0};
  if (text.size() > 19 || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return InvalidArgument(std::string(what) + " must be an event seq (a non-negative integer)");
  }
  return static_cast<uint64_t>(std::stoull(std::string(text)));
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    size_t s = path.find('/');
    out.emplace_back(path.substr(0, s));
    path = s == std::string_view::npos ? std::string_view() : path.substr(s);
  }
  return out;
}

// A client watching one or more sessions over server-sent events.
struct Subscriber {
  std::shared_ptr<EventStream> stream;
  std::string tenant;
  bool multiplexed = false;  // frames name their session in the id
  // The seeds' stream route: loopengine's adapter events (`approval:pending`,
  // `question:pending`, `done`, `error`) go with the native ones.
  bool seeds = false;
  // Per watched session: the highest seq sent, and whether a replay from
  // the store is under way (live frames wait in `held` meanwhile).
  struct Cursor {
    uint64_t last_seq = 0;
    bool replaying = false;
    std::vector<std::pair<uint64_t, std::string>> held;  // (seq or 0, frame)
  };
  std::map<std::string, Cursor> cursors;
  // Turn streams (POST .../turns with Accept: text/event-stream) end after
  // this turn's turn_end.
  std::string close_after_turn;
  // The turn ended while a replay was under way: end once it is sent.
  bool close_after_replay = false;
  bool replaying() const {
    return std::any_of(cursors.begin(), cursors.end(),
                       [](const auto& c) { return c.second.replaying; });
  }
};

// What the server knows about a session while a turn runs on it or a
// client watches it (io thread only).
struct Live {
  std::string tenant;
  std::shared_ptr<Session> session;  // open (and locked) while a turn runs
  std::shared_ptr<std::stop_source> stop;
  std::string turn_id;
  bool starting = false;
  // Inputs this server queued for the session (store.EnqueueInput): a look
  // at the queue that began before the latest one committed looks again.
  uint64_t enqueued = 0;
  // Looking for the session's next queued input after a turn (StartNextQueued).
  bool looking = false;
  // Requests for a turn that came while the finished turn's session was
  // closing: asked again once it is closed, so a client that starts its
  // next turn as soon as it sees the last one end is not told "busy".
  std::vector<std::function<void()>> after_close;
  // A decided batch to continue as soon as the session is idle here
  // (ContinueWhenIdle): its turn, when known, and who waits for the
  // continued turn's outcome.
  bool continue_decided = false;
  std::string continue_turn_id;
  std::vector<TurnFinish> continue_finish;
  // The turn starting or running here continues a decided batch
  // (StartDecided): a decision of that batch reported again waits for it.
  bool continuing = false;
  // Durable frames observed since the last committed boundary (the store
  // has them only once the next boundary event is committed), and the text
  // of the step in flight.
  std::vector<std::pair<uint64_t, std::string>> uncommitted;
  std::string partial_text;
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  // The POST that started the turn, answered 202 once the turn's id is known.
  std::shared_ptr<Exchange> reply;
  bool closing = false;  // the finished turn's session is being closed
  // The running turn's turn_end is out: the turn is finishing (its outcome
  // and the close of its session follow).
  bool finishing = false;
  // Told when the running (or starting) turn ends.
  std::vector<TurnFinish> finish;
  std::optional<std::chrono::steady_clock::time_point> step_started;
  std::map<std::string, std::chrono::steady_clock::time_point> tools_started;
  // The session is in use: a turn starting or running, or the finished
  // turn's session still closing (no other turn may open it yet).
  bool running() const { return starting || closing || looking || session != nullptr; }
  // A turn is starting or running (what clients see as "running").
  bool turn_active() const { return starting || session != nullptr; }
};

struct TurnRecord {
  std::string session_id;
  std::string tenant;
  bool done = false;
  Json result;  // TurnResultJson, or {error}
  std::vector<std::function<void()>> waiters;
};

class ServerImpl final : public Server {
 public:
  ServerImpl(ServerOptions options, Engine& engine, asio::io_context& io)
      : options_(std::move(options)),
        engine_(engine),
        io_(io),
        turn_inbox_(io_),
        http_(io_, options_.limits,
              [this](std::shared_ptr<Exchange> ex) { Handle(std::move(ex)); }),
        executor_(ExecutorOptions(options_)),
        blocking_(static_cast<size_t>(std::max(1, options_.worker_threads))),
        notifier_(io_, NotifierOptionsFor()),
        channels_(io_),
        signals_(io_),
        drain_timer_(io_) {
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

  ~ServerImpl() override {
    StopSharedStore();
    notifier_.Stop();
    channels_.Stop();
    // Run returned only after every turn ended: nothing of theirs is still
    // to come when the executor drains.
    executor_.Shutdown();
    compactions_.join();
    blocking_.join();
  }

  static ThreadPoolExecutorOptions ExecutorOptions(const ServerOptions& o) {
    ThreadPoolExecutorOptions e;
    e.step_threads = std::max(1, o.worker_threads);
    e.max_tool_calls = o.max_concurrent_tools;
    return e;
  }

  Status Listen() {
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
  void AllowHosts() {
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

  int port() const override { return http_.port(); }

  Status Run() override {
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    signals_.async_wait([this](boost::system::error_code ec, int) {
      if (!ec) BeginShutdown();
    });
    ContinueDecidedBatches();
    StartSharedStore();
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
    return drained_ ? Status::Ok() : Unavailable("running turns were cancelled at shutdown");
  }

  void Shutdown() override {
    asio::post(io_, [this] { BeginShutdown(); });
  }

 private:
  // --- plumbing ---------------------------------------------------------

  // Runs `work` on the worker pool and `then` with its result on the io
  // thread.
  template <typename Work, typename Then>
  void Blocking(Work work, Then then) {
    asio::post(blocking_, [this, work = std::move(work), then = std::move(then)]() mutable {
      auto result = work();
      asio::post(io_, [then = std::move(then), result = std::move(result)]() mutable {
        then(std::move(result));
      });
    });
  }

  // Runs `work` on the compaction threads and `then` with its result on the
  // io thread (as Blocking does).
  template <typename Work, typename Then>
  void OnCompactionThread(Work work, Then then) {
    asio::post(compactions_, [this, work = std::move(work), then = std::move(then)]() mutable {
      auto result = work();
      asio::post(io_, [then = std::move(then), result = std::move(result)]() mutable {
        then(std::move(result));
      });
    });
  }

  // A batch decided while no server ran it (its resolver could not take the
  // session, or stopped first) continues now, for the sessions of this
  // server's agents; a command-line session is left to its user's `resume`.
  // Inputs queued before a restart (or for an instance that stopped) run
  // too; a session whose batch is decided takes them after that turn.
  void ContinueDecidedBatches() {
    using Lists = std::pair<std::vector<std::string>, std::vector<std::string>>;
    Blocking(
        [this]() -> Result<Lists> {
          AL_ASSIGN_OR_RETURN(auto decided, engine_.store().ListDecided());
          AL_ASSIGN_OR_RETURN(auto queued, engine_.store().ListQueuedSessions());
          return Lists{std::move(decided), std::move(queued)};
        },
        [this](Result<Lists> ids) {
          if (!ids.ok()) return;
          for (const auto& id : ids->first) ContinueDecided(id);
          for (const auto& id : ids->second) {
            if (std::find(ids->first.begin(), ids->first.end(), id) == ids->first.end()) {
              RunQueued(id);
            }
          }
        });
  }

  SessionOptions OptionsToOpen(const std::string& session_id) const {
    SessionOptions o;
    o.session_id = session_id;
    return o;
  }

  // The MCP servers a session runs its turns with: its agent's, which are
  // per process and not pinned with the session's settings. A session in a
  // workspace below the agent's root gets the agent's settings for that
  // workspace (a trusted workspace's configuration may add servers), in
  // its tenant's folder. None for a session of an agent not served here.
  // Off the io thread.
  Result<std::vector<McpServerSpec>> McpServersOf(const SessionInfo& info) const {
    const AgentSpec* agent = FindAgent(info.agent);
    if (agent == nullptr) return std::vector<McpServerSpec>{};
    if (agent->for_workspace) {
      std::error_code ec;
      const std::filesystem::path root =
          std::filesystem::weakly_canonical(agent->options.workspace / info.tenant, ec);
      const std::filesystem::path rel = info.workspace.lexically_relative(root);
      if (!ec && !rel.empty() && *rel.begin() != "..") {
        AL_ASSIGN_OR_RETURN(SessionOptions chosen,
                            agent->for_workspace(info.tenant, rel == "." ? "" : rel.string()));
        return std::move(chosen.mcp_servers);
      }
    }
    return agent->options.mcp_servers;
  }

  // What a turn opens its session with: OptionsToOpen and the session's MCP
  // servers, which start with the turn and stop when it ends. Off the io
  // thread.
  Result<SessionOptions> OptionsForTurn(const std::string& session_id) const {
    SessionOptions o = OptionsToOpen(session_id);
    AL_ASSIGN_OR_RETURN(SessionInfo info, engine_.store().GetSession(session_id));
    AL_ASSIGN_OR_RETURN(o.mcp_servers, McpServersOf(info));
    return o;
  }

  // --- routing ----------------------------------------------------------

  void Handle(std::shared_ptr<Exchange> ex) {
    const Request& req = ex->request();
    std::string request_id = NewId("req");
    // Probes reveal nothing and must work without a token or a known Host
    // (an orchestrator's probe names the address it dialled); a link's
    // token is its own authority (it names one item and one action, signed).
    const bool probe = req.path == "/v1/health" || req.path == "/v1/ready";
    if (shutting_down_ && !probe) {
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

  // The routes, as data: `GET /v1/openapi.json` serves a spec that a test
  // holds equal to this table. `{x}` matches one path segment; handlers get
  // the matched segments in order.
  using RouteFn = void (ServerImpl::*)(const std::shared_ptr<Exchange>&, const Principal&,
                                       const Params&);
  struct RouteSpec {
    http_verb method;
    std::string_view pattern;  // below /v1
    unsigned scope;            // 0: none
    RouteFn fn;
  };
  // For RouteTable.
 public:
  static std::vector<std::pair<http_verb, std::string_view>> RouteList() {
    std::vector<std::pair<http_verb, std::string_view>> out;
    for (const auto& r : Routes()) out.emplace_back(r.method, r.pattern);
    return out;
  }

 private:
  static const std::vector<RouteSpec>& Routes() {
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
        {http_verb::post, "/sessions/{id}/turns/{turn}/cancel", kScopeWrite,
         &ServerImpl::CancelTurn},
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

  void Route(const std::shared_ptr<Exchange>& ex, const Principal& who,
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
      return ex->Send(Problem(405, "method_not_allowed",
                              std::string(boost::beast::http::to_string(req.method)) +
                                  " is not allowed on " + req.path));
    }
    ex->Send(Problem(404, "not_found", "no route for " + req.path));
  }

  // --- routes of the seeds' HTTP adapter (docs/server.md, "Compatibility") --

  // Matched like Routes(), below the root instead of /v1.
  static const std::vector<RouteSpec>& CompatRoutes() {
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
  void CompatPost(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    CompatMessage(ex, who, p[0], false);
  }
  void CompatPostStream(const std::shared_ptr<Exchange>& ex, const Principal& who,
                        const Params& p) {
    CompatMessage(ex, who, p[0], true);
  }
  void CompatResolveApproval(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const Params& p) {
    CompatResolve(ex, who, p[0], PendingKind::kApproval, "", true);
  }
  void CompatAnswerQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
    CompatResolve(ex, who, p[0], PendingKind::kQuestion, "", true);
  }
  void CompatApprove(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    CompatResolve(ex, who, p[0], PendingKind::kApproval, "approve", false);
  }
  void CompatDeny(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    CompatResolve(ex, who, p[0], PendingKind::kApproval, "deny", false);
  }
  void CompatAnswer(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    CompatResolve(ex, who, p[0], PendingKind::kQuestion, "", false);
  }

  // The engine's read-only tools: what plan mode may offer a model.
  static const std::set<std::string>& ReadOnlyToolNames() {
    static const std::set<std::string> kNames = [] {
      std::set<std::string> names;
      for (const auto& t : MakeBuiltinTools(BuiltinToolOptions{})) {
        if (!t->spec().mutates) names.insert(t->spec().name);
      }
      return names;
    }();
    return kNames;
  }

  // POST /api/pugi/engine: one model call with the agent's provider for a
  // client that runs its own loop (server/pugi.h).
  void PugiEngine(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    Result<Json> body = ParseBody(ex->request());
    if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
    Result<PugiCall> parsed = ParsePugiRequest(*body);
    if (!parsed.ok()) return ex->Send(Problem(400, "invalid_request", parsed.error().message()));
    const AgentSpec* agent = FindAgent(parsed->persona);
    if (agent == nullptr) {
      return ex->Send(Problem(404, "not_found", "no agent '" + parsed->persona + "'"));
    }
    // An agent that plans stays in plan mode whatever the request says.
    if (agent->options.command == CommandKind::kPlan || parsed->command == CommandKind::kPlan) {
      Status s = CheckPugiPlanTools(*parsed, ReadOnlyToolNames());
      if (!s.ok()) return ex->Send(Problem(400, "plan_mode_refused", s.message()));
    }
    SessionOptions o = agent->options;
    if (!parsed->model.empty()) o.model = parsed->model;
    struct Call {
      PugiCall call;
      std::shared_ptr<ModelProvider> provider;
      ModelRequest request;
      StreamSink sink;  // deltas are not forwarded: the answer is one JSON body
    };
    auto state = std::make_shared<Call>();
    state->call = std::move(*parsed);
    state->request.model = o.model;
    state->request.system = state->call.system;
    state->request.history = state->call.messages;
    state->request.tools = state->call.tools;
    state->request.max_output_tokens =
        state->call.max_tokens > 0 ? state->call.max_tokens : o.max_output_tokens.value_or(4096);
    auto answer = [ex, model = o.model](Result<ModelResponse> r) {
      if (!r.ok()) {
        const bool client = r.error().code() == Code::kInvalidArgument;
        return ex->Send(Problem(client ? 400 : 502, client ? "invalid_request" : "model_error",
                                RedactSecrets(r.error().message())));
      }
      ex->Send(JsonResponse(200, PugiResponse(*r, model)));
    };
    Blocking([this, o]() { return engine_.Provider(o); },
             [this, state, answer](Result<std::shared_ptr<ModelProvider>> provider) {
               if (!provider.ok()) return answer(provider.error());
               state->provider = std::move(*provider);
               if (state->provider->CompletesAsync()) {
                 return state->provider->CompleteAsync(
                     state->request, state->sink, {},
                     [state, answer](Result<ModelResponse> r) { answer(std::move(r)); });
               }
               // A provider without an asynchronous path blocks: off the io thread.
               Blocking(
                   [state]() { return state->provider->Complete(state->request, state->sink, {}); },
                   answer);
             });
  }

  // POST /agents/{name}/messages[/stream] {message, sessionId?}: a turn run to
  // its end, answered 200 {text, sessionId, events, stopReason?} or, paused,
  // 202 with the pending item and where to decide it.
  void CompatMessage(const std::shared_ptr<Exchange>& ex, const Principal& who,
                     const std::string& name, bool stream) {
    const AgentSpec* agent = FindAgent(name);
    if (agent == nullptr) return ex->Send(Problem(404, "not_found", "no agent '" + name + "'"));
    Result<Json> body = ParseBody(ex->request());
    if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
    Status keys = OnlyKeys(*body, {"message", "sessionId"});
    if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
    if (!body->contains("message") || !(*body)["message"].is_string() ||
        (*body)["message"].get<std::string>().empty()) {
      return ex->Send(Problem(400, "invalid_request", "message must be a non-empty string"));
    }
    std::string message = (*body)["message"].get<std::string>();
    std::string sid;
    if (body->contains("sessionId")) {
      if (!(*body)["sessionId"].is_string()) {
        return ex->Send(Problem(400, "invalid_request", "sessionId must be a string"));
      }
      sid = (*body)["sessionId"].get<std::string>();
    }
    SessionOptions o = agent->options;
    o.tenant = who.tenant;
    o.agent = agent->name;
    Blocking(
        [this, o, sid, agent]() mutable -> Result<SessionInfo> {
          if (!sid.empty()) return StoreFor(o.tenant)->GetSession(sid);
          // In the tenant's folder of a root of workspaces, as CreateSession.
          if (agent->for_workspace) {
            AL_ASSIGN_OR_RETURN(SessionOptions chosen, agent->for_workspace(o.tenant, ""));
            chosen.tenant = o.tenant;
            chosen.agent = o.agent;
            o = std::move(chosen);
          }
          o.mcp_servers.clear();  // started by the turn (OptionsForTurn)
          AL_ASSIGN_OR_RETURN(auto session, engine_.OpenSession(o));
          SessionInfo info = session->info();
          return info;
        },
        [this, ex, who, name, message, stream](Result<SessionInfo> r) {
          if (!r.ok() || r->tenant != who.tenant || r->agent != name) {
            if (r.ok() || r.error().code() == Code::kNotFound) {
              return ex->Send(Problem(404, "not_found", "no session of agent " + name));
            }
            return ex->Send(FromStatus(r.error()));
          }
          const std::string id = r->id;
          Live& live = live_[id];
          live.tenant = who.tenant;
          if (AskAgainAfterClose(live, ex, [this, ex, who, name, stream] {
                CompatMessage(ex, who, name, stream);
              })) {
            return;
          }
          if (live.running()) {
            return ex->Send(Problem(409, "session_busy", "session " + id + " is running a turn"));
          }
          TurnStart start;
          start.after_seq = r->last_seq;
          if (stream) {
            start.stream = ex->OpenStream();
            start.seeds = true;
            start.stream->Push(Frame("", "session", DumpJson({{"sessionId", id}})));
          } else {
            start.finish = [this, ex, id, name, after = r->last_seq](const std::string& turn_id,
                                                                     const Result<TurnResult>& t) {
              CompatAnswer(ex, id, name, turn_id, after, t);
            };
          }
          StartTurn(id, message, std::move(start));
        });
  }

  // The seeds' answer for a finished turn: 200 {text, sessionId, events,
  // stopReason?}, or 202 {pending: true, ...} when it paused.
  void CompatAnswer(const std::shared_ptr<Exchange>& ex, const std::string& sid,
                    const std::string& agent, const std::string& turn_id, uint64_t after,
                    const Result<TurnResult>& t) {
    if (!t.ok()) {
      return ex->Send(t.error().code() == Code::kFailedPrecondition
                          ? Problem(409, "session_paused", t.error().message())
                          : FromStatus(t.error()));
    }
    TurnResult result = *t;
    Blocking(
        [this, sid, after]() { return engine_.store().Events(sid, after); },
        [ex, sid, agent, turn_id, result](Result<std::vector<StoredEvent>> r) {
          Json events = Json::array();
          if (r.ok()) {
            for (const auto& e : *r) {
              if (e.turn_id != turn_id) continue;
              Json j = Json::parse(e.json, nullptr, false);
              if (!j.is_discarded()) events.push_back(std::move(j));
            }
          }
          if (!result.pending.empty()) {
            const PendingItem& item = result.pending.front();
            const bool question = item.kind == PendingKind::kQuestion;
            Json j = {
                {"pending", true},        {"type", question ? "question" : "approval"},
                {"id", item.id},          {"tool", item.tool},
                {"args", item.arguments}, {"reason", item.reason},
                {"sessionId", sid},       {"statusUrl", "/agents/" + agent + "/sessions/" + sid},
                {"events", events}};
            if (question) {
              j["answerUrl"] = "/pending-questions/" + item.id + "/answer";
            } else {
              j["approveUrl"] = "/approvals/" + item.id + "/approve";
              j["denyUrl"] = "/approvals/" + item.id + "/deny";
              j["resolveUrl"] = "/pending-approvals/" + item.id + "/resolve";
            }
            Json ids = Json::array();
            for (const auto& p : result.pending) ids.push_back(p.id);
            j["pendingIds"] = ids;
            return ex->Send(JsonResponse(202, j));
          }
          Json j = {{"text", result.final_text}, {"sessionId", sid}, {"events", events}};
          if (result.stop != StopReason::kCompleted) {
            j["stopReason"] = std::string(StopReasonName(result.stop));
          }
          ex->Send(JsonResponse(200, j));
        });
  }

  // GET /agents/{name}/sessions/{id}: the history and what waits.
  void CompatSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& name = p[0];
    const std::string& id = p[1];
    WithSession(ex, who, id, [this, ex, name, id](SessionInfo info) {
      if (info.agent != name) {
        return ex->Send(Problem(404, "not_found", "no session " + id + " of agent " + name));
      }
      struct View {
        std::vector<Message> messages;
        std::vector<PendingRecord> pending;
      };
      Blocking(
          [this, id]() -> Result<View> {
            View v;
            LoadOptions lo;
            lo.repair = false;
            AL_ASSIGN_OR_RETURN(SessionSnapshot snap, engine_.store().Load(id, lo));
            v.messages = std::move(snap.messages);
            AL_ASSIGN_OR_RETURN(v.pending, engine_.ListPending(id));
            return v;
          },
          [ex, id, name](Result<View> r) {
            if (!r.ok()) return ex->Send(FromStatus(r.error()));
            Json messages = Json::array();
            for (const auto& msg : r->messages) messages.push_back(ToJson(msg));
            Json pending = Json::array();
            for (const auto& item : r->pending) pending.push_back(PendingJson(item, "pending"));
            ex->Send(JsonResponse(200, {{"sessionId", id},
                                        {"agent", name},
                                        {"messages", messages},
                                        {"pending", pending}}));
          });
    });
  }

  // POST /pending-approvals/{id}/resolve {decision, editedArgs?},
  // /pending-questions/{id}/answer {answer} (`durable`: {alreadyResolved},
  // {resolved, outstanding}, or the continued turn's answer), and the live
  // routes /approvals/{id}/approve|deny, /questions/{id}/answer (the
  // continued turn's answer, or 202 with the next item of the batch).
  void CompatResolve(const std::shared_ptr<Exchange>& ex, const Principal& who,
                     const std::string& pid, PendingKind kind, const std::string& verb,
                     bool durable) {
    Resolution res;
    if (auto refused = ParseResolution(ex->request(), kind, verb, kSeedFields, res)) {
      return ex->Send(std::move(*refused));
    }
    TurnFinish finish = [this, ex](const std::string& turn_id, const Result<TurnResult>& t) {
      auto it = turns_.find(turn_id);
      CompatAnswerFor(ex, it != turns_.end() ? it->second.session_id : "", turn_id, t);
    };
    Resolve(
        ex, who, pid, kind, res,
        [this, ex, durable](const Decided& o) {
          using K = Decided::Kind;
          if (o.kind == K::kResumed) return;  // `finish` answers
          if (o.kind != K::kRecorded) {
            return ex->Send(JsonResponse(200, {{"alreadyResolved", true}}));
          }
          if (durable) {
            return ex->Send(
                JsonResponse(200, {{"resolved", true}, {"outstanding", o.outstanding}}));
          }
          // The live routes answer with the next item that waits.
          Blocking([this, sid = o.session_id]() { return engine_.ListPending(sid); },
                   [ex, sid = o.session_id](Result<std::vector<PendingRecord>> r) {
                     if (!r.ok() || r->empty()) {
                       return ex->Send(JsonResponse(200, {{"resolved", true}, {"outstanding", 0}}));
                     }
                     Json j = PendingJson(r->front(), "pending");
                     j["pending"] = true;
                     j["sessionId"] = sid;
                     j["outstanding"] = r->size();
                     ex->Send(JsonResponse(202, j));
                   });
        },
        std::move(finish));
  }

  // CompatAnswer for a continued turn (its events since the pause).
  void CompatAnswerFor(const std::shared_ptr<Exchange>& ex, const std::string& sid,
                       const std::string& turn_id, const Result<TurnResult>& t) {
    if (sid.empty()) return CompatAnswer(ex, sid, "", turn_id, 0, t);
    TurnResult copy;
    if (t.ok()) copy = *t;
    Status error = t.ok() ? Status::Ok() : t.error();
    WithSessionInfo(sid, [this, ex, sid, turn_id, copy, error](Result<SessionInfo> info) {
      std::string agent = info.ok() ? info->agent : "";
      Result<TurnResult> again = error.ok() ? Result<TurnResult>(copy) : Result<TurnResult>(error);
      CompatAnswer(ex, sid, agent, turn_id, 0, again);
    });
  }

  // The store as a caller of `tenant` sees it: another tenant's session or
  // pending item is an unknown id to it. Every by-id read or write made for
  // a request goes through it.
  std::unique_ptr<TenantStore> StoreFor(const std::string& tenant) {
    return engine_.store().ForTenant(tenant);
  }

  template <typename Then>
  void WithSessionInfo(const std::string& id, Then then) {
    Blocking([this, id]() { return engine_.store().GetSession(id); }, std::move(then));
  }

  // --- small routes ------------------------------------------------------

  void Health(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    ex->Send(JsonResponse(200, {{"status", "ok"}}));
  }
  void Ready(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    if (shutting_down_) return ex->Send(Problem(503, "shutting_down", "shutting down"));
    ex->Send(JsonResponse(200, {{"status", "ready"}}));
  }
  void Agents(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    Json items = Json::array();
    for (const auto& a : options_.agents) items.push_back(AgentJson(a));
    ex->Send(JsonResponse(200, {{"items", items}}));
  }
  void Agent(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p) {
    const AgentSpec* a = FindAgent(p[0]);
    if (a == nullptr) return ex->Send(Problem(404, "not_found", "no agent '" + p[0] + "'"));
    ex->Send(JsonResponse(200, AgentJson(*a)));
  }
  void OpenApi(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    Response r;
    r.body = std::string(OpenApiSpec());
    ex->Send(std::move(r));
  }
  void StreamOne(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    StreamEvents(ex, who, {p[0]}, false);
  }
  void SessionPending(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    ListPending(ex, who, p[0], std::nullopt);
  }
  // The session's MCP servers (docs/mcp.md, "Seeing the servers"). While a
  // turn runs here they are the open session's, as they are now; otherwise
  // none runs (they start with a turn and stop when it ends), and the
  // configured ones are listed "stopped" (or "disabled").
  void SessionMcp(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    WithSession(ex, who, id, [this, ex, id](SessionInfo info) {
      auto it = live_.find(id);
      if (it != live_.end() && it->second.session != nullptr) {
        Json servers = Json::array();
        for (const McpServerState& s : it->second.session->mcp_servers()) {
          servers.push_back(mcp::McpServerStateToJson(s));
        }
        return ex->Send(JsonResponse(200, {{"running", true}, {"servers", servers}}));
      }
      Blocking([this, info]() { return McpServersOf(info); },
               [ex](Result<std::vector<McpServerSpec>> specs) {
                 if (!specs.ok()) return ex->Send(FromStatus(specs.error()));
                 Json servers = Json::array();
                 for (const McpServerSpec& spec : *specs) {
                   servers.push_back(mcp::McpServerStateToJson(mcp::StoppedState(spec)));
                 }
                 ex->Send(JsonResponse(200, {{"running", false}, {"servers", servers}}));
               });
    });
  }
  void Approvals(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    ListPending(ex, who, "", PendingKind::kApproval);
  }
  void Questions(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    ListPending(ex, who, "", PendingKind::kQuestion);
  }
  void GetApproval(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    GetPending(ex, who, p[0], PendingKind::kApproval);
  }
  void GetQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    GetPending(ex, who, p[0], PendingKind::kQuestion);
  }
  void DecideApproval(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    Decide(ex, who, p[0], PendingKind::kApproval);
  }
  void AnswerQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    Decide(ex, who, p[0], PendingKind::kQuestion);
  }
  void GetTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    TurnStatus(ex, who, p[0], p[1], false);
  }
  void WaitTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    TurnStatus(ex, who, p[0], p[1], true);
  }

  // Prometheus text format.
  void Metrics(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    Blocking(
        [this]() { return engine_.store().ListPending(std::nullopt); },
        [this, ex](Result<std::vector<PendingRecord>> pending) {
          std::set<std::string> paused;
          if (pending.ok()) {
            for (const auto& p : *pending) paused.insert(p.session_id);
          }
          size_t running = 0;
          for (const auto& [id, live] : live_) running += live.turn_active() ? 1 : 0;
          std::string m;
          auto line = [&m](std::string_view name, std::string_view help, std::string_view type) {
            m.append("# HELP ").append(name).append(" ").append(help).append("\n");
            m.append("# TYPE ").append(name).append(" ").append(type).append("\n");
          };
          line("agentloop_sessions", "sessions by status (running: a turn runs here)", "gauge");
          m += "agentloop_sessions{status=\"running\"} " + std::to_string(running) + "\n";
          m += "agentloop_sessions{status=\"paused\"} " + std::to_string(paused.size()) + "\n";
          line("agentloop_turns_started_total", "turns started", "counter");
          m += "agentloop_turns_started_total " + std::to_string(metrics_.turns_started) + "\n";
          line("agentloop_turns_finished_total", "turns finished, by stop reason", "counter");
          for (const auto& [stop, n] : metrics_.turns_finished) {
            m +=
                "agentloop_turns_finished_total{stop=\"" + stop + "\"} " + std::to_string(n) + "\n";
          }
          line("agentloop_sse_clients", "open event streams", "gauge");
          m += "agentloop_sse_clients " + std::to_string(sse_clients_) + "\n";
          line("agentloop_stream_overflows_total",
               "event streams closed with stream.desync (reader too slow)", "counter");
          m += "agentloop_stream_overflows_total " + std::to_string(metrics_.overflows) + "\n";
          line("agentloop_webhook_deliveries_total",
               "agent notifications, by outcome (after retries)", "counter");
          for (const auto& [outcome, n] : metrics_.webhooks) {
            m += "agentloop_webhook_deliveries_total{outcome=\"" + outcome + "\"} " +
                 std::to_string(n) + "\n";
          }
          metrics_.model.Write(m, "agentloop_model_call_seconds",
                               "model calls: step_begin to step_end");
          metrics_.tool.Write(m, "agentloop_tool_call_seconds",
                              "tool calls: tool_call_begin to tool_call_end");
          Response r;
          r.content_type = "text/plain; version=0.0.4";
          r.body = std::move(m);
          ex->Send(std::move(r));
        });
  }

  // --- the web console (console.h, docs/console.md) ----------------------

  static int64_t ConsoleNowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // POST /v1/console/session with a bearer token: the cookie that stands
  // for it. Without tokens configured there is nothing to sign in to.
  void ConsoleSignIn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    if (options_.tokens.empty()) {
      return ex->Send(JsonResponse(200, ConsoleWho(who, false)));
    }
    const TokenGrant* g = console::BearerGrant(ex->request(), options_.tokens);
    if (g == nullptr) {
      return ex->Send(
          Problem(400, "invalid_request", "sign in with the token in Authorization: Bearer TOKEN"));
    }
    Result<std::string> cookie = console::SignInCookie(
        *g, cookie_key_, ConsoleNowMs(), ex->request().Header("Origin").starts_with("https://"));
    if (!cookie.ok()) return ex->Send(FromStatus(cookie.error()));
    Response r = JsonResponse(200, ConsoleWho(who, true));
    r.headers.emplace_back("Set-Cookie", std::move(*cookie));
    ex->Send(std::move(r));
  }
  void ConsoleWhoAmI(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    ex->Send(JsonResponse(200, ConsoleWho(who, who.console_cookie)));
  }
  // DELETE /v1/console/session: clears the cookie in the browser and, for a
  // request signed in by it, revokes it in the store, so that a copy of it
  // stops working on every server that shares the store, restarts
  // included (the cookie itself is valid until it expires). Answered once
  // the revocation is committed.
  void ConsoleSignOut(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    Response r;
    r.status = 204;
    r.headers.emplace_back("Set-Cookie", console::SignOutCookie());
    std::optional<console::CookieSignIn> c =
        who.console_cookie
            ? console::VerifyCookie(ex->request(), options_.tokens, cookie_key_, ConsoleNowMs())
            : std::nullopt;
    if (!c) return ex->Send(std::move(r));
    revoked_cookies_.insert(c->id);
    Blocking([this, tenant = who.tenant,
              c = *c]() { return engine_.store().RevokeCredential(tenant, c.id, c.expires_at_ms); },
             [ex, r = std::move(r)](Status s) mutable {
               ex->Send(s.ok() ? std::move(r) : FromStatus(s));
             });
  }

  // Reads the revoked console sign-ins (Listen, before the server
  // accepts, so that no copy of a signed-out cookie gets in after a restart).
  Status LoadRevokedCookies() {
    if (options_.tokens.empty()) return Status::Ok();
    AL_ASSIGN_OR_RETURN(std::vector<std::string> ids, engine_.store().ListRevokedCredentials());
    revoked_cookies_.insert(ids.begin(), ids.end());
    return Status::Ok();
  }
  // Reads them again every kRevocationRefresh: another server sharing the
  // store may have revoked one. Ids are only added (a revocation lasts
  // until its cookie expires, and then the cookie is refused anyway).
  void RefreshRevokedCookies() {
    if (options_.tokens.empty() || shutting_down_) return;
    if (!revocation_timer_) revocation_timer_.emplace(io_);
    revocation_timer_->expires_after(kRevocationRefresh);
    revocation_timer_->async_wait([this](boost::system::error_code ec) {
      if (ec || shutting_down_) return;
      Blocking([this]() { return engine_.store().ListRevokedCredentials(); },
               [this](Result<std::vector<std::string>> ids) {
                 if (ids.ok()) revoked_cookies_.insert(ids->begin(), ids->end());
                 RefreshRevokedCookies();
               });
    });
  }
  static constexpr std::chrono::seconds kRevocationRefresh{10};
  std::set<std::string> revoked_cookies_;  // console sign-ins signed out (io thread)
  std::optional<asio::steady_timer> revocation_timer_;
  Json ConsoleWho(const Principal& who, bool cookie) const {
    Json scopes = Json::array();
    for (auto [bit, name] : {std::pair{kScopeRead, "read"}, std::pair{kScopeWrite, "write"},
                             std::pair{kScopeApprove, "approve"}}) {
      if (who.Has(bit)) scopes.push_back(name);
    }
    return {{"tenant", who.tenant},
            {"scopes", scopes},
            {"tokens_required", !options_.tokens.empty()},
            {"cookie", cookie}};
  }
  // The change a pending write or edit would make, shown only to the extent
  // the session may read the file (engine::PreviewPendingChange). Pool
  // thread.
  Result<Json> ItemDiff(const SessionInfo& s, const PendingItem& item) const {
    AL_ASSIGN_OR_RETURN(
        tools::ChangePreview p,
        engine::PreviewPendingChange(engine_, OptionsToOpen(s.id), s.workspace, item));
    return p.ToJson();
  }

  // GET /v1/approvals/{id}/diff: the change a pending write or edit would
  // make to the file as it is now.
  void ApprovalDiff(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    WithPending(ex, who, p[0], PendingKind::kApproval, [this, ex](PendingLookup l) {
      Blocking(
          [this, l]() -> Result<Json> {
            AL_ASSIGN_OR_RETURN(SessionInfo s, engine_.store().GetSession(l.record.session_id));
            return ItemDiff(s, l.record.item);
          },
          [ex](Result<Json> r) {
            if (!r.ok() && r.error().code() == Code::kPermissionDenied) {
              return ex->Send(Problem(403, "forbidden", r.error().message()));
            }
            ex->Send(r.ok() ? JsonResponse(200, *r) : FromStatus(r.error()));
          });
    });
  }

  // --- auth -------------------------------------------------------------

  std::optional<Principal> Authenticate(const Request& req) const {
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

  bool OriginAllowed(const Request& req) const {
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
  void Idempotent(const std::shared_ptr<Exchange>& ex, const Principal& who,
                  std::function<void()> run) {
    const Request& req = ex->request();
    std::string key(req.Header("Idempotency-Key"));
    if (key.size() > 255) {
      return ex->Send(Problem(400, "invalid_request", "Idempotency-Key is longer than 255 bytes"));
    }
    std::string fingerprint = Sha256Hex(req.target + "\n" + req.body);
    Blocking(
        [this, tenant = who.tenant, key, fingerprint]() {
          return engine_.store().ClaimIdempotencyKey(tenant, key, fingerprint,
                                                     options_.idempotency_ttl, kInFlightTtl);
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
            asio::post(blocking_, [this, tenant, key, json, send = std::move(send)] {
              Status s = json.empty() ? engine_.store().ReleaseIdempotencyKey(tenant, key)
                                      : engine_.store().FinishIdempotencyKey(tenant, key, json);
              (void)s;  // unrecorded: the key stays in flight until kInFlightTtl
              send();
            });
          });
          run();
        });
  }

  // An unfinished idempotency record older than this belongs to a request
  // that was abandoned (the server stopped while running it).
  static constexpr std::chrono::milliseconds kInFlightTtl{5 * 60 * 1000};

  static std::string ResponseToJson(const Response& r) {
    Json headers = Json::array();
    for (const auto& [k, v] : r.headers) headers.push_back(Json::array({k, v}));
    return DumpJson(
        {{"status", r.status}, {"type", r.content_type}, {"body", r.body}, {"headers", headers}});
  }
  static Result<Response> ResponseFromJson(const std::string& text) {
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

  // --- agents and sessions ----------------------------------------------

  const AgentSpec* FindAgent(const std::string& name) const {
    for (const auto& a : options_.agents) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }

  static Json AgentJson(const AgentSpec& a) {
    return {{"name", a.name},
            {"description", a.description},
            {"provider", std::string(ProviderKindName(a.options.provider))},
            {"model", a.options.model},
            {"command", std::string(CommandKindName(a.options.command))}};
  }

  Json SessionJson(const SessionInfo& s, std::string_view status) const {
    return {{"id", s.id},
            {"agent", s.agent},
            {"title", s.title},
            {"metadata", s.metadata.is_null() ? Json::object() : s.metadata},
            {"status", std::string(status)},
            {"workspace", s.workspace.string()},
            {"provider", s.provider},
            {"model", s.model},
            {"command", s.command},
            {"created_at_ms", s.created_at_ms},
            {"updated_at_ms", s.updated_at_ms},
            {"last_seq", s.last_seq},
            {"parent_id", s.parent_id},
            {"events_url", "/v1/sessions/" + s.id + "/events/stream"}};
  }

  void CreateSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    Result<Json> body = ParseBody(ex->request());
    if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
    Status keys = OnlyKeys(*body, {"agent", "title", "metadata", "workspace"});
    if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
    std::string agent_name = options_.agents.front().name;
    if (body->contains("agent")) {
      if (!(*body)["agent"].is_string()) {
        return ex->Send(Problem(400, "invalid_request", "agent must be a string"));
      }
      agent_name = (*body)["agent"].get<std::string>();
    }
    const AgentSpec* agent = FindAgent(agent_name);
    if (agent == nullptr) {
      return ex->Send(Problem(404, "not_found", "no agent '" + agent_name + "'"));
    }
    std::string workspace;
    if (body->contains("workspace")) {
      if (!(*body)["workspace"].is_string()) {
        return ex->Send(Problem(400, "invalid_request", "workspace must be a string"));
      }
      workspace = (*body)["workspace"].get<std::string>();
      if (!agent->for_workspace) {
        return ex->Send(Problem(400, "invalid_request",
                                "agent '" + agent->name +
                                    "' does not let a session choose its workspace (it needs "
                                    "workspace_root in its agent.toml)"));
      }
    }
    SessionOptions o = agent->options;
    o.tenant = who.tenant;
    o.agent = agent->name;
    if (body->contains("title")) {
      if (!(*body)["title"].is_string()) {
        return ex->Send(Problem(400, "invalid_request", "title must be a string"));
      }
      o.title = (*body)["title"].get<std::string>();
    }
    if (body->contains("metadata")) {
      const Json& md = (*body)["metadata"];
      if (std::string why = MetadataProblem(md, /*null_clears=*/false); !why.empty()) {
        return ex->Send(Problem(400, "invalid_request", why));
      }
      o.metadata = md;
    }
    Blocking(
        [this, o, workspace, agent]() mutable -> Result<SessionInfo> {
          // A session of an agent with a root of workspaces works in its
          // tenant's folder of the root, never in the root itself.
          if (agent->for_workspace) {
            AL_ASSIGN_OR_RETURN(SessionOptions chosen, agent->for_workspace(o.tenant, workspace));
            chosen.tenant = o.tenant;
            chosen.agent = o.agent;
            chosen.title = o.title;
            chosen.metadata = o.metadata;
            o = std::move(chosen);
          }
          // Creating a session starts no MCP server: its turns do
          // (OptionsForTurn).
          o.mcp_servers.clear();
          AL_ASSIGN_OR_RETURN(auto s, engine_.OpenSession(o));
          SessionInfo info = s->info();
          return info;  // closing releases the lock
        },
        [this, ex](Result<SessionInfo> r) {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          ex->Send(JsonResponse(201, SessionJson(*r, "idle")));
        });
  }

  std::string LiveStatus(const std::string& id) const {
    auto it = live_.find(id);
    return it != live_.end() && it->second.turn_active() ? "running" : "";
  }

  void ListSessions(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    const Request& req = ex->request();
    Result<int> limit = LimitParam(req);
    if (!limit.ok()) return ex->Send(Problem(400, "invalid_request", limit.error().message()));
    SessionListOptions o;
    o.tenant = who.tenant;
    o.limit = *limit;
    if (std::string a = req.Query("agent"); !a.empty()) o.agent = a;
    o.after_id = req.Query("cursor");
    std::string status = req.Query("status");
    if (!status.empty() && status != "idle" && status != "running" && status != "paused") {
      return ex->Send(Problem(400, "invalid_request", "status must be idle, running or paused"));
    }
    // A page holds up to `limit` sessions of the wanted status: the store
    // is read page by page until that many match, the list ends, or
    // kMaxListScan sessions were looked at (then the page may be short and
    // its cursor goes on from the last session looked at).
    struct Page {
      std::vector<std::pair<SessionInfo, std::string>> items;  // session, status
      std::string cursor;                                      // empty: the list ended
    };
    std::set<std::string> running;
    for (const auto& [id, live] : live_) {
      if (live.turn_active()) running.insert(id);
    }
    Blocking(
        [this, o, status, running = std::move(running)]() -> Result<Page> {
          std::set<std::string> paused;
          AL_ASSIGN_OR_RETURN(auto pending, engine_.store().ListPending(std::nullopt));
          for (const auto& p : pending) paused.insert(p.session_id);
          Page page;
          SessionListOptions q = o;
          int scanned = 0;
          for (;;) {
            AL_ASSIGN_OR_RETURN(std::vector<SessionInfo> batch, engine_.store().ListSessions(q));
            for (SessionInfo& info : batch) {
              ++scanned;
              std::string st = running.count(info.id)  ? "running"
                               : paused.count(info.id) ? "paused"
                                                       : "idle";
              page.cursor = info.id;
              if (!status.empty() && st != status) continue;
              page.items.emplace_back(std::move(info), std::move(st));
              if (static_cast<int>(page.items.size()) == o.limit) return page;
            }
            if (static_cast<int>(batch.size()) < q.limit) {
              page.cursor.clear();
              return page;
            }
            if (scanned >= kMaxListScan) return page;
            q.after_id = page.cursor;
          }
        },
        [this, ex](Result<Page> r) {
          if (!r.ok()) {
            if (r.error().code() == Code::kNotFound) {
              return ex->Send(Problem(400, "invalid_cursor", r.error().message()));
            }
            return ex->Send(FromStatus(r.error()));
          }
          Json items = Json::array();
          for (const auto& [info, st] : r->items) items.push_back(SessionJson(info, st));
          Json out = {{"items", items}, {"next_cursor", nullptr}};
          if (!r->cursor.empty()) out["next_cursor"] = r->cursor;
          ex->Send(JsonResponse(200, out));
        });
  }

  // Loads the session for a read, checking its tenant (another tenant's
  // session does not exist for the caller).
  template <typename Then>
  void WithSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& id,
                   Then then) {
    Blocking([this, id, tenant = who.tenant]() { return StoreFor(tenant)->GetSession(id); },
             [ex, who, id, then = std::move(then)](Result<SessionInfo> r) mutable {
               if (!r.ok() || r->tenant != who.tenant) {
                 if (r.ok() || r.error().code() == Code::kNotFound) {
                   return ex->Send(Problem(404, "not_found", "no session " + id));
                 }
                 return ex->Send(FromStatus(r.error()));
               }
               then(std::move(*r));
             });
  }

  void GetSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    struct Detail {
      SessionInfo info;
      std::string status;
      Json pending = Json::array();
      Json settings;
      Json last_turn;
      Json children = Json::array();
      int omitted_children = 0;
    };
    WithSession(ex, who, id, [this, ex, id, tenant = who.tenant](SessionInfo) {
      Blocking(
          [this, id, tenant]() -> Result<Detail> {
            Detail d;
            LoadOptions lo;
            lo.repair = false;
            AL_ASSIGN_OR_RETURN(SessionSnapshot snap, StoreFor(tenant)->Load(id, lo));
            d.info = snap.info;
            d.status = "idle";
            if (snap.open_checkpoint) {
              d.status = "paused";
            } else if (snap.decided_checkpoint) {
              d.status = "queued";
            } else if (snap.last_turn_end && snap.last_turn_end->stop == StopReason::kFailed) {
              d.status = "failed";
            }
            AL_ASSIGN_OR_RETURN(auto pending, engine_.ListPending(id));
            for (const auto& item : pending) d.pending.push_back(PendingJson(item, "pending"));
            AL_ASSIGN_OR_RETURN(auto settings, StoreFor(tenant)->GetSettings(id));
            d.settings = settings ? *settings : Json(nullptr);
            if (snap.last_turn_end) {
              const auto& t = *snap.last_turn_end;
              d.last_turn = {{"id", t.turn_id},
                             {"stop", std::string(StopReasonName(t.stop))},
                             {"reason", t.reason},
                             {"counters", ToJson(t.counters)}};
            }
            // The sessions its subagents started, each with its spending.
            snap.messages.clear();
            AL_ASSIGN_OR_RETURN(SessionTreeNode tree,
                                LoadSessionTree(engine_.store(), std::move(snap)));
            for (const SessionTreeNode& child : tree.children) {
              d.children.push_back(SessionTreeJson(child));
            }
            d.omitted_children = tree.omitted_children;
            return d;
          },
          [this, ex](Result<Detail> r) {
            if (!r.ok()) return ex->Send(FromStatus(r.error()));
            std::string st = LiveStatus(r->info.id);
            Json j = SessionJson(r->info, st.empty() ? r->status : st);
            j["pending"] = r->pending;
            j["settings"] = r->settings;
            j["last_turn"] = r->last_turn;
            j["children"] = r->children;
            if (r->omitted_children > 0) j["omitted_children"] = r->omitted_children;
            auto it = live_.find(r->info.id);
            if (it != live_.end() && !it->second.turn_id.empty()) {
              j["running_turn"] = it->second.turn_id;
            }
            ex->Send(JsonResponse(200, j));
          });
    });
  }

  // What is wrong with a session's `metadata` from a client (empty: nothing):
  // a JSON object of at most 16 KiB, or null where `null_clears`.
  static std::string MetadataProblem(const Json& md, bool null_clears) {
    const bool shape_ok = md.is_object() || (null_clears && md.is_null());
    if (shape_ok && md.dump().size() <= 16384) return {};
    return null_clears ? "metadata must be null or a JSON object of at most 16 KiB"
                       : "metadata must be a JSON object of at most 16 KiB";
  }

  // PATCH /v1/sessions/{id} {title?, metadata?}: relabels the session
  // (metadata null clears it); answers with the session as GET does.
  void PatchSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    Result<Json> body = ParseBody(ex->request());
    if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
    Status keys = OnlyKeys(*body, {"title", "metadata"});
    if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
    std::optional<std::string> title;
    std::optional<Json> metadata;
    if (body->contains("title")) {
      const Json& t = (*body)["title"];
      if (!t.is_string() || t.get<std::string>().size() > 200) {
        return ex->Send(
            Problem(400, "invalid_request", "title must be a string of at most 200 bytes"));
      }
      title = t.get<std::string>();
    }
    if (body->contains("metadata")) {
      const Json& md = (*body)["metadata"];
      if (std::string why = MetadataProblem(md, /*null_clears=*/true); !why.empty()) {
        return ex->Send(Problem(400, "invalid_request", why));
      }
      metadata = md;
    }
    WithSession(ex, who, p[0], [this, ex, who, p, title, metadata](SessionInfo) {
      Blocking([this, id = p[0], title, metadata,
                t = who.tenant]() { return StoreFor(t)->RelabelSession(id, title, metadata); },
               [this, ex, who, p](Status s) {
                 if (!s.ok()) return ex->Send(FromStatus(s));
                 GetSession(ex, who, p);
               });
    });
  }

  void DeleteSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    WithSession(ex, who, id, [this, ex, id, tenant = who.tenant](SessionInfo) {
      if (!LiveStatus(id).empty()) {
        return ex->Send(Problem(409, "session_busy", "session " + id + " is running a turn"));
      }
      Blocking([this, id, tenant]() { return StoreFor(tenant)->RemoveSession(id); },
               [ex](Status s) {
                 if (!s.ok()) return ex->Send(FromStatus(s));
                 Response r;
                 r.status = 204;
                 r.content_type = "application/json";
                 ex->Send(std::move(r));
               });
    });
  }

  void Messages(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    Result<int> limit = LimitParam(ex->request());
    if (!limit.ok()) return ex->Send(Problem(400, "invalid_request", limit.error().message()));
    Result<uint64_t> cursor = SeqParam(ex->request().Query("cursor"), "cursor");
    if (!cursor.ok()) return ex->Send(Problem(400, "invalid_cursor", cursor.error().message()));
    WithSession(ex, who, id, [this, ex, id, who, limit = *limit, from = *cursor](SessionInfo) {
      Blocking(
          [this, id, tenant = who.tenant]() -> Result<std::vector<Message>> {
            LoadOptions lo;
            lo.repair = false;
            AL_ASSIGN_OR_RETURN(SessionSnapshot snap, StoreFor(tenant)->Load(id, lo));
            return std::move(snap.messages);
          },
          [ex, limit, from](Result<std::vector<Message>> r) {
            if (!r.ok()) return ex->Send(FromStatus(r.error()));
            Json items = Json::array();
            size_t end = std::min(r->size(), static_cast<size_t>(from) + limit);
            for (size_t i = from; i < end; ++i) items.push_back(ToJson((*r)[i]));
            Json out = {{"items", items}, {"next_cursor", nullptr}};
            if (end < r->size()) out["next_cursor"] = std::to_string(end);
            ex->Send(JsonResponse(200, out));
          });
    });
  }

  // --- turns ------------------------------------------------------------

  void PostTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    Result<Json> body = ParseBody(ex->request());
    if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
    Status keys = OnlyKeys(*body, {"input", "on_busy", "continue"});
    if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
    bool continue_turn = false;
    if (body->contains("continue")) {
      const Json& c = (*body)["continue"];
      if (!c.is_boolean()) {
        return ex->Send(Problem(400, "invalid_request", "continue must be a boolean"));
      }
      continue_turn = c.get<bool>();
    }
    if (continue_turn) {
      if (body->contains("input")) {
        return ex->Send(
            Problem(400, "invalid_request", "give either input or continue: true, not both"));
      }
    } else if (!body->contains("input") || !(*body)["input"].is_string() ||
               (*body)["input"].get<std::string>().empty()) {
      return ex->Send(Problem(400, "invalid_request", "input must be a non-empty string"));
    }
    std::string on_busy = "reject";
    if (body->contains("on_busy")) {
      const Json& b = (*body)["on_busy"];
      if (!b.is_string() || (b != "reject" && b != "enqueue")) {
        return ex->Send(Problem(400, "invalid_request", "on_busy must be reject or enqueue"));
      }
      on_busy = b.get<std::string>();
    }
    std::string input = continue_turn ? std::string() : (*body)["input"].get<std::string>();
    const bool stream =
        ex->request().Header("Accept").find("text/event-stream") != std::string_view::npos;
    WithSession(
        ex, who, id,
        [this, ex, who, p, id, input, on_busy, continue_turn, stream](SessionInfo info) {
          Live& live = live_[id];
          live.tenant = info.tenant;
          if (AskAgainAfterClose(live, ex, [this, ex, who, p] { PostTurn(ex, who, p); })) return;
          if (live.running()) {
            if (on_busy == "enqueue") return Enqueue(ex, id, input, continue_turn);
            return ex->Send(Problem(409, "session_busy",
                                    "session " + id + " is running turn " + live.turn_id +
                                        " (send on_busy: \"enqueue\" to queue this input)"));
          }
          TurnStart start;
          start.after_seq = info.last_seq;
          start.continue_turn = continue_turn;
          start.enqueue_if_busy = on_busy == "enqueue";
          if (stream) start.stream = ex->OpenStream();
          start.reply = ex;
          StartTurn(id, input, std::move(start));
        });
  }

  static Json QueuedReply(const std::string& id, int64_t position) {
    return {{"status", "queued"},
            {"session_id", id},
            {"position", position},
            {"events_url", "/v1/sessions/" + id + "/events/stream"}};
  }

  // Queues the input in the store (docs/server.md, "Queued inputs"): the
  // holder of the session takes it when the running turn ends, this server
  // or another sharing the store.
  void Enqueue(const std::shared_ptr<Exchange>& ex, const std::string& id, const std::string& input,
               bool continue_turn) {
    Blocking(
        [this, id, input, continue_turn]() -> Result<int64_t> {
          AL_RETURN_IF_ERROR(QueueHasRoom(id));
          return engine_.store().EnqueueInput(id, input, continue_turn);
        },
        [this, ex, id](Result<int64_t> place) {
          if (!place.ok()) return ex->Send(FromStatus(place.error()));
          ex->Send(JsonResponse(202, QueuedReply(id, *place)));
          Live& live = live_[id];
          ++live.enqueued;
          // The turn ended while the input was being stored.
          if (!live.running()) StartNextQueued(id);
        });
  }

  // kResourceExhausted when the session has max_queued_inputs waiting. The
  // count is read before the input is queued: requests that race may each
  // pass (at most one per store worker beyond the cap). Off the io thread.
  Status QueueHasRoom(const std::string& id) {
    AL_ASSIGN_OR_RETURN(std::vector<QueuedInput> waiting, engine_.store().ListQueuedInputs(id));
    if (static_cast<int64_t>(waiting.size()) >= options_.max_queued_inputs) {
      return ResourceExhausted("session " + id + " has " + std::to_string(waiting.size()) +
                               " inputs queued, the most it may have (server.max_queued_inputs); "
                               "send this one after its turns took some");
    }
    return Status::Ok();
  }

  // What StartTurn's work on the pool found: the open session and what to
  // run on it, or why nothing runs.
  struct Opened {
    Result<std::unique_ptr<Session>> session = std::unique_ptr<Session>();
    std::string input;
    bool continue_turn = false;
    std::optional<int64_t> queued;  // enqueued (this place) because another holds it
    bool nothing = false;           // from_queue: no input was taken
    bool nothing_to_continue = false;
    bool decided = false;                     // from_queue: a decided batch waits (it goes first)
    std::optional<QueuedInput> queued_input;  // from_queue: the input to run
  };

  // Off the io thread: opens the session (its lock) for `start` and decides
  // what its turn runs.
  Opened OpenForTurn(const std::string& id, std::string input, bool continue_turn,
                     bool enqueue_if_busy, bool from_queue) {
    Opened out;
    out.input = std::move(input);
    out.continue_turn = continue_turn;
    SessionStore& store = engine_.store();
    if (from_queue) {
      // The common case, nothing queued, opens nothing.
      Result<std::vector<QueuedInput>> waiting = store.ListQueuedInputs(id);
      if (!waiting.ok() || waiting->empty()) {
        out.nothing = true;
        return out;
      }
    }
    Result<SessionOptions> o = OptionsForTurn(id);
    if (!o.ok()) {
      out.session = o.error();
    } else {
      out.session = engine_.OpenSession(*o);
    }
    if (!out.session.ok()) {
      if (enqueue_if_busy && out.session.error().code() == Code::kBusy) {
        // Another process runs a turn on it: its holder takes the input.
        Status room = QueueHasRoom(id);
        Result<int64_t> place =
            room.ok() ? store.EnqueueInput(id, out.input, continue_turn) : Result<int64_t>(room);
        if (place.ok()) {
          out.queued = *place;
        } else {
          out.session = place.error();
        }
      }
      // A queue another process holds the session of is its holder's.
      if (from_queue) out.nothing = true;
      return out;
    }
    if (from_queue && (*out.session)->resumable() == ResumeKind::kDecidedBatch) {
      // A decided batch goes before the queue (the turn that continues it
      // looks at the queue when it ends).
      out.session = std::unique_ptr<Session>();  // closed here, on the pool
      out.nothing = true;
      out.decided = true;
      return out;
    }
    if (from_queue) {
      // Left in the queue: the turn takes it with its first commit
      // (Session::StartQueued), so a crash before that loses nothing.
      Result<std::optional<QueuedInput>> next =
          store.NextQueuedInput(id, static_cast<int64_t>(getpid()));
      if (!next.ok() || !next->has_value()) {
        if (!next.ok()) {
          std::fprintf(stderr, "agentloop serve: session %s: its next queued input: %s\n",
                       id.c_str(), next.error().ToString().c_str());
        }
        out.session = std::unique_ptr<Session>();  // closed here, on the pool
        out.nothing = true;
        // Paused: a decision committed while the session was held here
        // found it held and left the batch to its holder (on one machine
        // nothing else wakes it); one committed after this release found
        // it free and continued it itself.
        out.decided = next.ok() && DecidedAfterRelease(id);
        return out;
      }
      out.input = (*next)->input;
      out.continue_turn = (*next)->continue_turn;
      out.queued_input = std::move(*next);
      return out;
    }
    if (out.continue_turn && !(*out.session)->resumable()) {
      // As `agentloop resume ID` without a prompt (Session::Resume).
      out.session =
          FailedPrecondition("session " + id + " has no interrupted or failed turn to continue");
      out.nothing_to_continue = true;
    }
    return out;
  }

  // Off the io thread, after this server released the session's lock: its
  // paused batch was decided meanwhile and waits for its holder.
  bool DecidedAfterRelease(const std::string& id) {
    Result<std::optional<Checkpoint>> open = engine_.store().OpenCheckpoint(id);
    if (!open.ok() || open->has_value()) return false;
    Result<std::vector<std::string>> decided = engine_.store().ListDecided();
    return decided.ok() && std::find(decided->begin(), decided->end(), id) != decided->end();
  }

  // Opens the session on the pool and starts the turn (`input` empty and
  // not start.continue_turn: continue its decided batch), answered as
  // `start` says.
  void StartTurn(const std::string& id, std::string input, TurnStart start) {
    Live& starting = live_[id];
    // A look at the queue is not a turn yet: clients see the session idle,
    // and a request for a turn waits for the look (AskAgainAfterClose).
    (start.from_queue ? starting.looking : starting.starting) = true;
    if (start.finish) starting.finish.push_back(std::move(start.finish));
    std::shared_ptr<Subscriber> sub;
    if (start.stream) {
      sub = std::make_shared<Subscriber>();
      sub->stream = std::move(start.stream);
      sub->tenant = starting.tenant;
      sub->cursors[id].last_seq = start.after_seq;
      sub->close_after_turn = "*";  // the first turn_end seen
      sub->seeds = start.seeds;
      Attach(sub, id);
    }
    starting.reply = std::move(start.reply);
    const uint64_t enqueued = starting.enqueued;
    const bool from_queue = start.from_queue;
    Blocking(
        [this, id, input = std::move(input), cont = start.continue_turn,
         enqueue = start.enqueue_if_busy, from_queue]() mutable {
          return OpenForTurn(id, std::move(input), cont, enqueue, from_queue);
        },
        [this, id, sub, enqueued, from_queue](Opened opened) mutable {
          live_[id].looking = false;
          StartOpened(id, sub, enqueued, from_queue, std::move(opened));
          if (shutting_down_) MaybeFinishShutdown();
        });
  }

  void StartOpened(const std::string& id, const std::shared_ptr<Subscriber>& sub, uint64_t enqueued,
                   bool from_queue, Opened opened) {
    Live& live = live_[id];
    // A continuation that does not start continues nothing.
    const bool continuing = std::exchange(live.continuing, false);
    if (opened.queued) {
      live.starting = false;
      Json queued = QueuedReply(id, *opened.queued);
      if (live.reply) live.reply->Settle(JsonResponse(202, queued));
      live.reply.reset();
      // A streamed request learns it in the stream's one frame.
      if (sub) sub->stream->Close(Frame("", "queued", DumpJson(queued)));
      ++live.enqueued;
      return StartNextQueued(id);
    }
    if (opened.nothing) {
      live.starting = false;
      if (opened.decided) {
        // Its queued inputs run after the continued turn.
        return ContinueWhenIdle(id, "", {});
      }
      // An input queued here meanwhile may have missed the look.
      if (from_queue && live.enqueued != enqueued) return StartNextQueued(id);
      return StartNextQueued(id, /*look=*/false);
    }
    if (!opened.session.ok()) {
      live.starting = false;
      Status s = opened.session.error();
      Response r = opened.nothing_to_continue ? Problem(409, "nothing_to_continue", s.message())
                   : s.code() == Code::kFailedPrecondition
                       ? Problem(409, "session_paused", s.message())
                       : FromStatus(s);
      if (live.reply) live.reply->Settle(r);
      live.reply.reset();
      if (sub) {
        sub->stream->Close(
            Frame("", "error", sub->seeds ? DumpJson({{"error", s.message()}}) : r.body));
      }
      Result<TurnResult> failed = s;
      for (auto& f : std::exchange(live.finish, {})) f(live.turn_id, failed);
      if (from_queue) {
        std::fprintf(stderr, "agentloop serve: session %s: its queued input: %s\n", id.c_str(),
                     s.ToString().c_str());
      }
      return StartNextQueued(id, /*look=*/from_queue);
    }
    std::shared_ptr<Session> session = std::move(*opened.session);
    live.continuing = continuing;
    live.session = session;
    live.stop = std::make_shared<std::stop_source>();
    live.starting = false;
    auto observer = std::make_shared<TurnObserver>(this, id);
    AsyncTurnCallbacks cb;
    cb.observer = observer.get();
    // `done` must not own the session: the io thread closes it
    // when the turn is over, which releases its lock.
    cb.done = [this, id, observer](Result<TurnResult> r) {
      // Through the inbox, after the turn's last event.
      turn_inbox_.Post([this, id, observer, r = std::move(r)]() mutable {
        OnTurnDone(id, *observer, std::move(r));
      });
    };
    if (opened.queued_input) {
      session->StartQueued(*opened.queued_input, executor_, std::move(cb), live.stop->get_token());
    } else if (opened.continue_turn) {
      session->StartResume(executor_, std::move(cb), live.stop->get_token());
    } else if (opened.input.empty()) {
      session->StartContinue(executor_, std::move(cb), live.stop->get_token());
    } else {
      session->StartRun(opened.input, executor_, std::move(cb), live.stop->get_token());
    }
    // Started by a look that began before the shutdown, after the running
    // turns were cancelled: cancelled as they were.
    if (shutting_down_ && !drained_) live.stop->request_stop();
    // Requests that waited for a look at the queue find this turn.
    for (auto& fn : std::exchange(live.after_close, {})) fn();
  }

  // Receives a turn's events on the executor's threads and hands them to
  // the io thread.
  struct TurnObserver final : EventSink {
    TurnObserver(ServerImpl* s, std::string id) : server(s), session_id(std::move(id)) {}
    Status OnEvent(const Event& e) override {
      std::string type(EventTypeName(e.type));
      std::string json = e.Dump(session_id);
      std::string call;
      if (e.type == EventType::kToolCallBegin || e.type == EventType::kToolCallEnd) {
        auto it = e.data.find("id");
        if (it != e.data.end() && it->is_string()) call = it->get<std::string>();
      }
      // Deltas come from the model's thread and the rest from pool threads:
      // the inbox keeps the order they were emitted in.
      server->turn_inbox_.Post([srv = server, id = session_id, type = std::move(type),
                                turn = e.turn_id, seq = ShouldPersist(e.type) ? e.seq : 0,
                                json = std::move(json), delta = DeltaText(e),
                                call = std::move(call)]() mutable {
        srv->Measure(id, type, call);
        srv->OnTurnEvent(id, turn, seq, type, std::move(json), delta);
      });
      return Status::Ok();
    }
    static std::string DeltaText(const Event& e) {
      if (e.type != EventType::kTextDelta) return {};
      auto it = e.data.find("text");
      return it != e.data.end() && it->is_string() ? it->get<std::string>() : std::string();
    }
    ServerImpl* server;
    std::string session_id;
  };

  // Model and tool latency from the events' arrival on the io thread.
  void Measure(const std::string& id, const std::string& type, const std::string& call) {
    Live& live = live_[id];
    const auto now = std::chrono::steady_clock::now();
    auto seconds = [&](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(now - t).count();
    };
    if (type == "turn_begin") {
      ++metrics_.turns_started;
    } else if (type == "step_begin") {
      live.step_started = now;
    } else if (type == "step_end" && live.step_started) {
      metrics_.model.Observe(seconds(*live.step_started));
      live.step_started.reset();
    } else if (type == "tool_call_begin") {
      live.tools_started[call] = now;
    } else if (type == "tool_call_end") {
      auto it = live.tools_started.find(call);
      if (it != live.tools_started.end()) {
        metrics_.tool.Observe(seconds(it->second));
        live.tools_started.erase(it);
      }
    }
  }

  void OnTurnEvent(const std::string& id, const std::string& turn_id, uint64_t seq,
                   const std::string& type, std::string json, const std::string& delta) {
    Live& live = live_[id];
    if (!turn_id.empty() && live.turn_id != turn_id && type == "turn_begin") {
      live.turn_id = turn_id;
      TurnRecord& t = turns_[turn_id];
      t.session_id = id;
      t.tenant = live.tenant;
      t.done = false;
      if (live.reply) {
        live.reply->Settle(JsonResponse(202, TurnAccepted(id, turn_id)));
        live.reply.reset();
      }
    }
    if (type == "turn_end" && live.session != nullptr) live.finishing = true;
    if (type == "text_delta") {
      live.partial_text += delta;
    } else if (type == "step_begin" || type == "message") {
      live.partial_text.clear();
    }
    if (seq != 0) {
      std::string frame = Frame(std::to_string(seq), type, json);
      if (std::optional<EventType> t = ParseEventType(type); t && IsCommitBoundary(*t)) {
        live.uncommitted.clear();
      } else {
        live.uncommitted.emplace_back(seq, frame);
      }
      Publish(id, seq, type, turn_id, json);
    } else {
      Publish(id, 0, type, turn_id, json);
    }
  }

  void OnTurnDone(const std::string& id, TurnObserver& observer, Result<TurnResult> r) {
    Live& live = live_[id];
    std::string turn_id = live.turn_id;
    if (r.ok() && r->checkpoint) turn_id = r->checkpoint->turn_id;
    (void)observer;
    if (live.reply) {
      if (!r.ok()) {
        live.reply->Settle(r.error().code() == Code::kFailedPrecondition
                               ? Problem(409, "session_paused", r.error().message())
                               : FromStatus(r.error()));
      } else {
        live.reply->Settle(JsonResponse(202, TurnAccepted(id, turn_id)));
      }
      live.reply.reset();
    }
    ++metrics_.turns_finished[r.ok() ? std::string(StopReasonName(r->stop)) : "error"];
    LogLeaseLost(id, r);
    if (r.ok()) Notify(id, turn_id, *r);
    for (auto& f : std::exchange(live.finish, {})) f(turn_id, r);
    live.tools_started.clear();
    live.step_started.reset();
    if (!turn_id.empty()) {
      TurnRecord& t = turns_[turn_id];
      t.session_id = id;
      t.tenant = live.tenant;
      t.done = true;
      t.result = r.ok() ? TurnResultJson(*r) : Json{{"error", r.error().message()}};
      auto waiters = std::move(t.waiters);
      for (auto& w : waiters) w();
      finished_turns_.push_back(turn_id);
      while (finished_turns_.size() > 10000) {
        turns_.erase(finished_turns_.front());
        finished_turns_.pop_front();
      }
    }
    // Closing the session releases its lock (a store call, on the pool);
    // the session counts as running until then, so the next turn cannot
    // find it still locked.
    live.continuing = false;
    live.finishing = false;
    std::shared_ptr<Session> session = std::move(live.session);
    live.stop.reset();
    live.turn_id.clear();
    live.partial_text.clear();
    live.uncommitted.clear();
    live.closing = true;
    // Streams that followed only this turn end with it.
    for (auto& sub : std::vector<std::shared_ptr<Subscriber>>(live.subscribers)) {
      if (!sub->close_after_turn.empty()) {
        if (!r.ok() && sub->seeds) {
          sub->stream->Close(Frame("", "error", DumpJson({{"error", r.error().message()}})));
        } else if (!r.ok()) {
          sub->stream->Close(Frame("", "error", FromStatus(r.error()).body));
        } else if (sub->replaying()) {
          sub->close_after_replay = true;
        } else {
          sub->stream->Close({});
        }
      }
    }
    const bool paused = r.ok() && r->checkpoint.has_value();
    Blocking(
        [this, id, session, paused]() mutable {
          session.reset();
          // A decision that came while the session was still held here
          // (from another process, which found it held) is this server's
          // to continue.
          return paused && DecidedAfterRelease(id);
        },
        [this, id](bool decided) {
          live_[id].closing = false;
          if (decided && !shutting_down_) return ContinueWhenIdle(id, "", {});
          StartNextQueued(id);
          if (shutting_down_) MaybeFinishShutdown();
        });
  }

  Json TurnAccepted(const std::string& id, const std::string& turn_id) const {
    return {{"id", turn_id},
            {"session_id", id},
            {"status", "running"},
            {"events_url", "/v1/sessions/" + id + "/events/stream"},
            {"wait_url", "/v1/sessions/" + id + "/turns/" + turn_id + "/wait"}};
  }

  // The session is idle here: runs its next queued input, if one waits and
  // this server can take the session (`look`: look in the store), else
  // forgets the session unless clients watch it; then asks again the
  // requests that waited for it to close.
  void StartNextQueued(const std::string& id, bool look = true) {
    auto it = live_.find(id);
    if (it == live_.end()) return;
    Live& live = it->second;
    if (live.running()) return;
    auto again = std::exchange(live.after_close, {});
    if (live.continue_decided && !shutting_down_) {
      // A decided batch goes first; its turn looks at the queue when it ends.
      StartDecided(id);
    } else if (look && !shutting_down_) {
      TurnStart next;
      next.from_queue = true;
      StartTurn(id, std::string(), std::move(next));
    } else if (live.subscribers.empty() && live.finish.empty() && again.empty()) {
      live_.erase(it);
    }
    for (auto& fn : again) fn();
  }

  // True when `live` has just finished a turn (its turn_end is out) and is
  // closing its session, or looks at its queue: `again` then runs once that
  // is over (or answers 503 if the server is shutting down by then), so a
  // client that starts its next turn as soon as it sees the last one end is
  // not told "busy".
  bool AskAgainAfterClose(Live& live, const std::shared_ptr<Exchange>& ex,
                          std::function<void()> again) {
    if (!(live.closing || live.looking || live.finishing) || live.starting) return false;
    if (live.session != nullptr && !live.finishing) return false;
    live.after_close.push_back([this, ex, again = std::move(again)] {
      if (shutting_down_) return ex->Send(Problem(503, "shutting_down", "shutting down"));
      again();
    });
    return true;
  }

  void TurnStatus(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& id,
                  const std::string& turn_id, bool wait) {
    int timeout_s = 30;
    if (wait) {
      std::string t = ex->request().Query("timeout_s", "30");
      if (t.empty() || t.size() > 3 || t.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(t) > 300) {
        return ex->Send(Problem(400, "invalid_request", "timeout_s must be 0-300"));
      }
      timeout_s = std::stoi(t);
    }
    auto it = turns_.find(turn_id);
    if (it != turns_.end() && it->second.session_id == id && it->second.tenant == who.tenant) {
      TurnRecord& t = it->second;
      if (t.done || !wait || timeout_s == 0) return ex->Send(JsonResponse(200, TurnJson(turn_id)));
      auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(timeout_s));
      auto answered = std::make_shared<bool>(false);
      auto answer = [this, ex, turn_id, answered, timer] {
        if (*answered) return;
        *answered = true;
        timer->cancel();
        ex->Send(JsonResponse(200, TurnJson(turn_id)));
      };
      t.waiters.push_back(answer);
      timer->async_wait([answer](boost::system::error_code ec) {
        if (!ec) answer();
      });
      return;
    }
    // Not in memory: the turn's state from the store. A turn that began
    // and never ended there was cut (its process stopped) unless another
    // process runs it now: a takeover ends it (EndCutTurn) and it reads as
    // done, `failed`; while another process holds the session it is running.
    WithSession(ex, who, id, [this, ex, id, turn_id, tenant = who.tenant](SessionInfo) {
      Blocking(
          [this, id, turn_id, tenant]() -> Result<Json> {
            auto store = StoreFor(tenant);
            EventQuery bounds;
            bounds.turn_id = turn_id;
            bounds.types = {"turn_begin", "turn_end"};
            AL_ASSIGN_OR_RETURN(auto events, store->QueryEvents(id, bounds));
            Json out;
            bool begun = false;
            bool cut = false;
            for (const auto& e : events) {
              if (e.turn_id != turn_id) continue;
              if (e.type == "turn_begin") {
                begun = true;
                cut = true;
                out = {{"id", turn_id}, {"session_id", id}, {"status", "running"}};
              }
              if (e.type != "turn_end") continue;
              Json j = Json::parse(e.json, nullptr, false);
              if (j.is_discarded()) continue;
              cut = false;
              out = {{"id", turn_id}, {"session_id", id}, {"status", "done"}, {"result", j}};
            }
            if (!begun && out.is_null()) {
              return NotFound("no turn " + turn_id + " in session " + id);
            }
            if (!cut) return out;
            // Only the session's newest turn can be unfinished.
            AL_ASSIGN_OR_RETURN(auto newest, store->QueryEvents(id, NewestTurnBoundary()));
            if (newest.empty() || newest[0].type != "turn_begin" || newest[0].turn_id != turn_id) {
              return out;
            }
            Result<bool> taken = TakeOverExpired(engine_.store(), id, SystemNowMs());
            if (!taken.ok()) {
              if (taken.error().code() == Code::kBusy) return out;  // running elsewhere
              return taken.error();
            }
            AL_ASSIGN_OR_RETURN(auto after, store->QueryEvents(id, bounds));
            for (const auto& e : after) {
              if (e.turn_id != turn_id || e.type != "turn_end") continue;
              Json j = Json::parse(e.json, nullptr, false);
              if (j.is_discarded()) continue;
              out = {{"id", turn_id}, {"session_id", id}, {"status", "done"}, {"result", j}};
            }
            return out;
          },
          [ex](Result<Json> r) {
            if (!r.ok()) return ex->Send(FromStatus(r.error()));
            ex->Send(JsonResponse(200, *r));
          });
    });
  }

  Json TurnJson(const std::string& turn_id) const {
    const TurnRecord& t = turns_.at(turn_id);
    Json j = {
        {"id", turn_id}, {"session_id", t.session_id}, {"status", t.done ? "done" : "running"}};
    if (t.done) j["result"] = t.result;
    return j;
  }

  // POST /v1/sessions/{id}/compact {focus?}: compacts the view of the
  // history the model gets (a turn asking the model for a summary; the
  // store keeps every message), as `/compact` does at a terminal. Answers
  // with that turn's outcome; its events reach the session's watchers. The
  // summary request is a blocking model call on a worker thread.
  void CompactSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    Result<Json> body = ParseBody(ex->request());
    if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
    Status keys = OnlyKeys(*body, {"focus"});
    if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
    std::string focus;
    if (body->contains("focus")) {
      const Json& f = (*body)["focus"];
      if (!f.is_string() || f.get<std::string>().size() > 2000) {
        return ex->Send(
            Problem(400, "invalid_request", "focus must be a string of at most 2000 bytes"));
      }
      focus = f.get<std::string>();
    }
    const std::string& id = p[0];
    WithSession(ex, who, id, [this, ex, who, p, id, focus](SessionInfo info) {
      Live& live = live_[id];
      live.tenant = info.tenant;
      if (AskAgainAfterClose(live, ex, [this, ex, who, p] { CompactSession(ex, who, p); })) return;
      if (live.running()) {
        return ex->Send(Problem(409, "session_busy", "session " + id + " is running a turn"));
      }
      live.starting = true;  // in use until the compaction has ended
      live.stop = std::make_shared<std::stop_source>();
      auto observer = std::make_shared<TurnObserver>(this, id);
      // On the compaction threads, not the store workers: the summary is a
      // blocking model round trip (up to compaction.summary_timeout_ms) that
      // must not hold up other sessions' store calls.
      OnCompactionThread(
          [this, id, focus, observer, stop = live.stop->get_token()]() -> Result<TurnResult> {
            AL_ASSIGN_OR_RETURN(auto session, engine_.OpenSession(OptionsToOpen(id)));
            SessionCallbacks cb;
            cb.observer = observer.get();
            return session->Compact(focus, cb, stop);
          },
          [this, ex, id, observer](Result<TurnResult> r) {
            // After the events the compaction handed over.
            turn_inbox_.Post([this, ex, id, observer, r = std::move(r)]() mutable {
              live_[id].starting = false;
              Response answer = r.ok() ? JsonResponse(200, TurnResultJson(*r))
                                : r.error().code() == Code::kFailedPrecondition
                                    ? Problem(409, "session_paused", r.error().message())
                                    : FromStatus(r.error());
              OnTurnDone(id, *observer, std::move(r));
              ex->Send(std::move(answer));
            });
          });
    });
  }

  void CancelTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    const std::string& turn_id = p[1];
    auto it = live_.find(id);
    if (it == live_.end() || it->second.tenant != who.tenant || it->second.turn_id != turn_id ||
        !it->second.stop) {
      // Another tenant's session does not exist for the caller (404); the
      // caller's own has no such turn running here (409).
      return WithSession(ex, who, id, [ex, id, turn_id](SessionInfo) {
        ex->Send(Problem(409, "turn_not_running",
                         "turn " + turn_id + " is not running in session " + id));
      });
    }
    it->second.stop->request_stop();
    ex->Send(JsonResponse(202, {{"id", turn_id}, {"session_id", id}, {"status", "cancelling"}}));
  }

  // --- events -----------------------------------------------------------

  void EventsJson(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p) {
    const std::string& id = p[0];
    Result<uint64_t> after = SeqParam(ex->request().Query("after"), "after");
    if (!after.ok()) return ex->Send(Problem(400, "invalid_request", after.error().message()));
    Result<int> limit = LimitParam(ex->request());
    if (!limit.ok()) return ex->Send(Problem(400, "invalid_request", limit.error().message()));
    WithSession(ex, who, id, [this, ex, id, who, after = *after, limit = *limit](SessionInfo) {
      // One more than the page: whether a next page exists, read with it.
      EventQuery page;
      page.after_seq = after;
      page.limit = static_cast<size_t>(limit) + 1;
      Blocking([this, id, page, t = who.tenant]() { return StoreFor(t)->QueryEvents(id, page); },
               [ex, limit](Result<std::vector<StoredEvent>> r) {
                 if (!r.ok()) return ex->Send(FromStatus(r.error()));
                 std::string items = "[";
                 size_t n = std::min(r->size(), static_cast<size_t>(limit));
                 for (size_t i = 0; i < n; ++i) {
                   if (i) items += ",";
                   items += (*r)[i].json;
                 }
                 items += "]";
                 Response resp;
                 resp.body = "{\"items\":" + items + ",\"next_after\":" +
                             (n < r->size() ? std::to_string((*r)[n - 1].seq) : "null") + "}";
                 ex->Send(std::move(resp));
               });
    });
  }

  // The cursor a stream starts after: Last-Event-ID, else ?after=.
  static Result<uint64_t> StreamCursor(const Request& req) {
    std::string_view last = req.Header("Last-Event-ID");
    if (!last.empty()) {
      size_t dot = last.rfind('.');  // multiplexed ids are "<session>.<seq>"
      return SeqParam(dot == std::string_view::npos ? last : last.substr(dot + 1), "Last-Event-ID");
    }
    return SeqParam(req.Query("after"), "after");
  }

  void StreamEvents(const std::shared_ptr<Exchange>& ex, const Principal& who,
                    std::vector<std::string> ids, bool multiplexed) {
    Result<uint64_t> after = StreamCursor(ex->request());
    if (!after.ok()) return ex->Send(Problem(400, "invalid_request", after.error().message()));
    std::map<std::string, uint64_t> cursors;
    for (const auto& id : ids) cursors[id] = *after;
    OpenSubscription(ex, who, std::move(cursors), multiplexed);
  }

  // GET /v1/events/stream?sessions=a,b[&after=a:10,b:7]
  void StreamMany(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&) {
    std::string list = ex->request().Query("sessions");
    if (list.empty()) {
      return ex->Send(Problem(400, "invalid_request", "sessions=ID[,ID...] is required"));
    }
    std::map<std::string, uint64_t> cursors;
    for (std::string_view rest = list; !rest.empty();) {
      size_t c = rest.find(',');
      std::string id(rest.substr(0, c));
      rest = c == std::string_view::npos ? std::string_view() : rest.substr(c + 1);
      if (!id.empty()) cursors[id] = 0;
    }
    if (cursors.size() > 100) {
      return ex->Send(Problem(400, "invalid_request", "at most 100 sessions per stream"));
    }
    std::string after = ex->request().Query("after");
    for (std::string_view rest = after; !rest.empty();) {
      size_t c = rest.find(',');
      std::string_view pair = rest.substr(0, c);
      rest = c == std::string_view::npos ? std::string_view() : rest.substr(c + 1);
      size_t colon = pair.find(':');
      if (colon == std::string_view::npos) {
        return ex->Send(Problem(400, "invalid_request", "after must be ID:SEQ[,ID:SEQ...]"));
      }
      Result<uint64_t> seq = SeqParam(pair.substr(colon + 1), "after");
      if (!seq.ok()) return ex->Send(Problem(400, "invalid_request", seq.error().message()));
      auto it = cursors.find(std::string(pair.substr(0, colon)));
      if (it != cursors.end()) it->second = *seq;
    }
    std::string_view last = ex->request().Header("Last-Event-ID");
    if (size_t dot = last.rfind('.'); dot != std::string_view::npos) {
      auto it = cursors.find(std::string(last.substr(0, dot)));
      Result<uint64_t> seq = SeqParam(last.substr(dot + 1), "Last-Event-ID");
      if (it != cursors.end() && seq.ok()) it->second = std::max(it->second, *seq);
    }
    OpenSubscription(ex, who, std::move(cursors), true);
  }

  void OpenSubscription(const std::shared_ptr<Exchange>& ex, const Principal& who,
                        std::map<std::string, uint64_t> cursors, bool multiplexed) {
    std::vector<std::string> ids;
    for (const auto& [id, c] : cursors) ids.push_back(id);
    // Every session must be the caller's.
    Blocking(
        [this, ids, tenant = who.tenant]() -> Result<std::vector<SessionInfo>> {
          std::vector<SessionInfo> out;
          auto store = StoreFor(tenant);
          for (const auto& id : ids) {
            AL_ASSIGN_OR_RETURN(SessionInfo s, store->GetSession(id));
            out.push_back(std::move(s));
          }
          return out;
        },
        [this, ex, who, cursors, multiplexed](Result<std::vector<SessionInfo>> r) {
          if (!r.ok() && r.error().code() != Code::kNotFound) {
            return ex->Send(FromStatus(r.error()));
          }
          bool mine = r.ok();
          if (mine) {
            for (const auto& s : *r) mine = mine && s.tenant == who.tenant;
          }
          if (!mine) return ex->Send(Problem(404, "not_found", "no such session"));
          if (shutting_down_) return ex->Send(Problem(503, "shutting_down", "shutting down"));
          auto sub = std::make_shared<Subscriber>();
          sub->tenant = who.tenant;
          sub->multiplexed = multiplexed;
          sub->stream = ex->OpenStream();
          ++sse_clients_;
          for (const auto& [id, after] : cursors) {
            sub->cursors[id].last_seq = after;
            Attach(sub, id);
            Replay(sub, id);
          }
        });
  }

  void Attach(const std::shared_ptr<Subscriber>& sub, const std::string& id) {
    Live& live = live_[id];
    if (live.tenant.empty()) live.tenant = sub->tenant;
    live.subscribers.push_back(sub);
    subscribers_.insert(sub);
    std::weak_ptr<Subscriber> weak = sub;
    sub->stream->OnClose([this, weak] {
      auto s = weak.lock();
      if (!s) return;
      subscribers_.erase(s);
      if (s->close_after_turn.empty()) --sse_clients_;
      for (const auto& [sid, c] : s->cursors) {
        auto it = live_.find(sid);
        if (it == live_.end()) continue;
        std::erase(it->second.subscribers, s);
        if (!it->second.running() && it->second.subscribers.empty()) {
          live_.erase(it);
        }
      }
      if (shutting_down_) MaybeFinishShutdown();
    });
    sub->stream->SetOverflowFrame([this, weak] {
      ++metrics_.overflows;
      auto s = weak.lock();
      Json last = Json::object();
      if (s) {
        for (const auto& [sid, c] : s->cursors) last[sid] = c.last_seq;
      }
      return Frame("", "stream.desync", DumpJson({{"last_seq", last}}));
    });
  }

  // Sends the session's stored events after the subscriber's cursor, then
  // what is observed but not yet committed, then the text in flight; live
  // frames that arrive meanwhile are held and sent after (without repeats).
  void Replay(const std::shared_ptr<Subscriber>& sub, const std::string& id) {
    Subscriber::Cursor& start = sub->cursors[id];
    if (start.replaying) return;
    start.replaying = true;
    auto uncommitted = live_[id].uncommitted;
    uint64_t after = start.last_seq;
    Blocking(
        [this, id, after]() { return engine_.store().Events(id, after); },
        [this, sub, id, uncommitted = std::move(uncommitted)](Result<std::vector<StoredEvent>> r) {
          if (sub->stream->closed()) return;
          Subscriber::Cursor& c = sub->cursors[id];
          if (!r.ok()) {
            sub->stream->Close(Frame("", "error", FromStatus(r.error()).body));
            return;
          }
          for (const auto& e : *r) {
            if (e.seq <= c.last_seq) continue;
            Send(*sub, id, e.seq, e.type, e.json);
          }
          for (const auto& [seq, frame] : uncommitted) {
            if (seq <= c.last_seq) continue;
            SendFrame(*sub, id, seq, frame);
          }
          c.replaying = false;
          auto held = std::move(c.held);
          c.held.clear();
          auto it = live_.find(id);
          if (it != live_.end() && !it->second.partial_text.empty()) {
            Json snap = {{"type", "message.snapshot"},
                         {"session_id", id},
                         {"turn_id", it->second.turn_id},
                         {"text", it->second.partial_text}};
            SendFrame(*sub, id, 0, Frame("", "message.snapshot", DumpJson(snap)));
          }
          for (auto& [seq, frame] : held) {
            if (seq == 0) continue;  // deltas: the snapshot has their text
            if (seq <= c.last_seq) continue;
            if (seq > c.last_seq + 1) return Replay(sub, id);  // still a gap
            SendFrame(*sub, id, seq, frame);
          }
          if (sub->close_after_replay && !sub->replaying()) sub->stream->Close({});
        });
  }

  void Send(Subscriber& sub, const std::string& id, uint64_t seq, std::string_view type,
            std::string_view json) {
    std::string frame_id = seq == 0          ? std::string()
                           : sub.multiplexed ? id + "." + std::to_string(seq)
                                             : std::to_string(seq);
    SendFrame(sub, id, seq, Frame(frame_id, type, json));
  }

  void SendFrame(Subscriber& sub, const std::string& id, uint64_t seq, std::string frame) {
    if (sub.multiplexed && seq != 0 && frame.rfind("id: ", 0) == 0 &&
        frame.compare(4, id.size() + 1, id + ".") != 0) {
      size_t nl = frame.find('\n');
      frame = "id: " + id + "." + std::to_string(seq) + frame.substr(nl);
    }
    if (seq != 0) sub.cursors[id].last_seq = seq;
    std::optional<std::pair<std::string, std::string>> native;
    if (sub.seeds) native = FrameEvent(frame);
    sub.stream->Push(std::move(frame));
    if (native) SendSeedEvents(sub, id, native->first, native->second);
  }

  // The event name and data of an SSE frame.
  static std::optional<std::pair<std::string, std::string>> FrameEvent(const std::string& frame) {
    size_t e = frame.rfind("event: ", 0) == 0 ? 0 : frame.find("\nevent: ");
    size_t d = frame.find("\ndata: ");
    if (e == std::string::npos || d == std::string::npos) return std::nullopt;
    e += frame[e] == '\n' ? 8 : 7;
    size_t e_end = frame.find('\n', e);
    size_t d_end = frame.find('\n', d + 7);
    return std::make_pair(frame.substr(e, e_end - e), frame.substr(d + 7, d_end - d - 7));
  }

  // loopengine's adapter events for a native event (SEMANTICS 4.11): each
  // pending item as `approval:pending` or `question:pending`, and `done
  // {text, stopReason?}` with the turn's end (the stream ends after it).
  void SendSeedEvents(Subscriber& sub, const std::string& id, const std::string& type,
                      const std::string& data) {
    if (type != "pending" && type != "turn_end") return;
    Json e = Json::parse(data, nullptr, false);
    if (!e.is_object()) return;
    if (type == "turn_end") {
      Json done = {{"text", e.value("final_text", "")}};
      const std::string stop = e.value("stop", "completed");
      if (stop != "completed") done["stopReason"] = stop;
      sub.stream->Push(Frame("", "done", DumpJson(done)));
      return;
    }
    for (const Json& item : e.value("items", Json::array())) {
      const bool question = item.value("kind", "") == "question";
      Json j = {{"id", item.value("id", "")},
                {"tool", item.value("tool", "")},
                {"args", item.value("arguments", Json::object())},
                {"reason", item.value("reason", "")},
                {"sessionId", id},
                {"requestedAt", e.value("ts", int64_t{0})}};
      if (question) {
        const Json& args = item.value("arguments", Json::object());
        j["question"] = args.is_object() ? args.value("question", "") : "";
        if (args.is_object() && args.contains("options")) j["options"] = args["options"];
        j["answerUrl"] = "/pending-questions/" + j["id"].get<std::string>() + "/answer";
      } else {
        j["resolveUrl"] = "/pending-approvals/" + j["id"].get<std::string>() + "/resolve";
      }
      sub.stream->Push(Frame("", question ? "question:pending" : "approval:pending", DumpJson(j)));
    }
  }

  void Publish(const std::string& id, uint64_t seq, const std::string& type,
               const std::string& turn_id, const std::string& json) {
    auto it = live_.find(id);
    if (it == live_.end()) return;
    for (auto& sub : std::vector<std::shared_ptr<Subscriber>>(it->second.subscribers)) {
      if (sub->stream->closed()) continue;
      Subscriber::Cursor& c = sub->cursors[id];
      if (c.replaying) {
        std::string frame = Frame(seq ? std::to_string(seq) : "", type, json);
        c.held.emplace_back(seq, std::move(frame));
        continue;
      }
      if (seq != 0) {
        if (seq <= c.last_seq) continue;
        if (seq > c.last_seq + 1) {
          // Events written outside this server's turns (a decision, a
          // settings change) came between: fetch them first.
          c.held.emplace_back(seq, Frame(std::to_string(seq), type, json));
          Replay(sub, id);
          continue;
        }
      }
      Send(*sub, id, seq, type, json);
      if (type == "turn_end" && !sub->close_after_turn.empty() &&
          (sub->close_after_turn == "*" || sub->close_after_turn == turn_id)) {
        sub->stream->Close({});
      }
    }
  }

  // --- approvals and questions -------------------------------------------

  // The session whose tenant owns a pending item: its tree's root (a
  // subagent's item is listed in its root's inbox).
  static const std::string& TreeRootOf(const PendingRecord& p) {
    return p.root_session_id.empty() ? p.session_id : p.root_session_id;
  }

  void ListPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                   const std::string& session_id, std::optional<PendingKind> kind) {
    std::string status = ex->request().Query("status", "pending");
    if (status != "pending") {
      return ex->Send(Problem(400, "invalid_request",
                              "status must be pending (decided items are in the event log)"));
    }
    struct Listed {
      std::vector<PendingRecord> items;
      std::map<std::string, std::string> tenants;
    };
    Blocking(
        [this, session_id]() -> Result<Listed> {
          Listed l;
          std::optional<std::string> only;
          if (!session_id.empty()) only = session_id;
          AL_ASSIGN_OR_RETURN(l.items, engine_.ListPending(only));
          std::vector<std::string> ids;
          if (!session_id.empty()) ids.push_back(session_id);
          for (const auto& p : l.items) ids.push_back(TreeRootOf(p));
          for (const std::string& id : ids) {
            if (l.tenants.count(id)) continue;
            AL_ASSIGN_OR_RETURN(SessionInfo s, engine_.store().GetSession(id));
            l.tenants[id] = s.tenant;
          }
          return l;
        },
        [ex, who, session_id, kind](Result<Listed> r) {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          if (!session_id.empty() && r->tenants[session_id] != who.tenant) {
            return ex->Send(Problem(404, "not_found", "no session " + session_id));
          }
          Json items = Json::array();
          for (const auto& p : r->items) {
            if (r->tenants[TreeRootOf(p)] != who.tenant) continue;
            if (kind && p.item.kind != *kind) continue;
            items.push_back(PendingJson(p, "pending"));
          }
          ex->Send(JsonResponse(200, {{"items", items}}));
        });
  }

  static std::string StateName(PendingLookup::State s) {
    switch (s) {
      case PendingLookup::State::kOutstanding:
        return "pending";
      case PendingLookup::State::kDecided:
        return "resolved";
      case PendingLookup::State::kCancelled:
        return "cancelled";
    }
    return "pending";
  }

  static Json LookupJson(const PendingLookup& l) {
    Json j = PendingJson(l.record, StateName(l.state));
    if (l.decision) {
      j["decision"] = l.decision->kind == ApprovalDecision::Kind::kDeny ? "deny" : "approve";
      if (l.record.item.kind == PendingKind::kQuestion) j["decision"] = "answer";
      j["decided_by"] = l.decision->by;
    }
    return j;
  }

  // Finds the item and checks its tenant and kind; nullopt answered 404.
  template <typename Then>
  void WithPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                   const std::string& pid, PendingKind kind, Then then) {
    struct Found {
      std::optional<PendingLookup> lookup;
      std::string tenant;
    };
    Blocking(
        [this, pid, tenant = who.tenant]() -> Result<Found> {
          Found f;
          auto store = StoreFor(tenant);
          AL_ASSIGN_OR_RETURN(f.lookup, store->LookupPending(pid));
          if (f.lookup) {
            AL_ASSIGN_OR_RETURN(SessionInfo s, store->GetSession(f.lookup->record.session_id));
            f.tenant = s.tenant;
          }
          return f;
        },
        [ex, who, pid, kind, then = std::move(then)](Result<Found> r) mutable {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          if (!r->lookup || r->tenant != who.tenant) {
            return ex->Send(
                Problem(404, "not_found", "no " + std::string(PendingKindName(kind)) + " " + pid));
          }
          if (r->lookup->record.item.kind != kind) {
            const bool question = r->lookup->record.item.kind == PendingKind::kQuestion;
            return ex->Send(Problem(
                400, "wrong_kind",
                pid + " is " + (question ? "a question: answer it with POST " : "an approval: ") +
                    (question ? "/v1/questions/" + pid + "/answer (or /pending-questions/" + pid +
                                    "/answer)"
                              : "decide it with POST /v1/approvals/" + pid +
                                    "/decision (or /pending-approvals/" + pid + "/resolve)")));
          }
          then(std::move(*r->lookup));
        });
  }

  void GetPending(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& pid,
                  PendingKind kind) {
    WithPending(ex, who, pid, kind,
                [ex](PendingLookup l) { ex->Send(JsonResponse(200, LookupJson(l))); });
  }

  // How a decision body names its fields: the /v1 routes (snake_case,
  // unknown keys refused, `scope`) or the seeds' routes (camelCase, other
  // keys ignored as the seeds do).
  struct DecisionFields {
    const char* edited_args;
    bool strict;
  };
  static constexpr DecisionFields kV1Fields{"edited_args", true};
  static constexpr DecisionFields kSeedFields{"editedArgs", false};

  // Reads a decision about an item of `kind` into `res` ({answer} for a
  // question; {decision, edited args, reason, scope} for an approval, where
  // `verb` fixes the decision when the route names it). Returns the 400 to
  // answer with when the body is wrong.
  static std::optional<Response> ParseResolution(const Request& req, PendingKind kind,
                                                 const std::string& verb, DecisionFields f,
                                                 Resolution& res) {
    auto bad = [](std::string_view code, std::string detail) {
      return std::optional<Response>(Problem(400, code, std::move(detail)));
    };
    Result<Json> body = ParseBody(req);
    if (!body.ok()) return bad("invalid_request", body.error().message());
    const Json& b = *body;
    if (kind == PendingKind::kQuestion) {
      if (f.strict) {
        if (Status keys = OnlyKeys(b, {"answer"}); !keys.ok()) {
          return bad("invalid_request", keys.message());
        }
      }
      if (!b.contains("answer") || !b["answer"].is_string()) {
        return bad("invalid_request", "answer must be a string");
      }
      res.kind = Resolution::Kind::kAnswer;
      res.answer = b["answer"].get<std::string>();
      return std::nullopt;
    }
    if (f.strict) {
      Status keys = OnlyKeys(b, {"decision", f.edited_args, "scope", "reason"});
      if (!keys.ok()) return bad("invalid_request", keys.message());
    }
    std::string decision = verb;
    if (decision.empty()) {
      const Json& d = b.value("decision", Json());
      if (d != "approve" && d != "deny") {
        return bad("invalid_request", "decision must be approve or deny");
      }
      decision = d.get<std::string>();
    }
    res.kind = decision == "approve" ? Resolution::Kind::kApprove : Resolution::Kind::kDeny;
    if (b.contains(f.edited_args)) {
      if (res.kind != Resolution::Kind::kApprove || !b[f.edited_args].is_object()) {
        return bad("invalid_edited_args",
                   std::string(f.edited_args) + " must be a JSON object, with decision approve");
      }
      res.edited_arguments = b[f.edited_args];
    }
    if (b.contains("reason")) {
      if (!b["reason"].is_string()) return bad("invalid_request", "reason must be a string");
      res.reason = b["reason"].get<std::string>();
    }
    if (f.strict && b.contains("scope")) {
      const Json& scope = b["scope"];
      if (scope != "once" && scope != "session") {
        return bad("unsupported_scope",
                   "scope must be once (this call) or session (this exact access for the rest "
                   "of the session; add an allow rule to the agent for more)");
      }
      if (scope == "session" && res.kind != Resolution::Kind::kApprove) {
        return bad("unsupported_scope", "scope session goes with decision approve");
      }
      res.remember_for_session = scope == "session";
    }
    return std::nullopt;
  }

  // POST /v1/approvals/{id}/decision and /v1/questions/{id}/answer.
  void Decide(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& pid,
              PendingKind kind) {
    Resolution res;
    if (auto refused = ParseResolution(ex->request(), kind, "", kV1Fields, res)) {
      return ex->Send(std::move(*refused));
    }
    Resolve(ex, who, pid, kind, res, [ex](const Decided& o) {
      // `status` is the outcome's name (agentloop::DecisionOutcome) and
      // `detail` the sentence the CLI prints for it.
      const std::string status(DecisionOutcomeName(o.kind));
      Json body = {{"status", status}, {"session_id", o.session_id}, {"detail", o.Detail()}};
      if (o.earlier) {
        body["decided_by"] = o.earlier->by;
        body["decision"] = o.earlier->kind == ApprovalDecision::Kind::kDeny ? "deny"
                           : o.earlier->answer.empty()                      ? "approve"
                                                                            : "answer";
      }
      switch (o.kind) {
        case Decided::Kind::kRecorded:
          body["outstanding"] = o.outstanding;
          body["pending_url"] = "/v1/sessions/" + o.session_id + "/pending";
          return ex->Send(JsonResponse(200, body));
        case Decided::Kind::kResumed:
          body["turn_id"] = o.turn_id;
          body["events_url"] = "/v1/sessions/" + o.session_id + "/events/stream";
          body["wait_url"] = "/v1/sessions/" + o.session_id + "/turns/" + o.turn_id + "/wait";
          return ex->Send(JsonResponse(200, body));
        case Decided::Kind::kCancelled:
          body["already_resolved"] = true;
          return ex->Send(JsonResponse(200, body));
        case Decided::Kind::kConflict:
        case Decided::Kind::kInvalidEdit: {
          Response r = Problem(409, "approval_already_resolved", o.Detail());
          Json j = Json::parse(r.body, nullptr, false);
          if (j.is_object()) {
            j["outcome"] = status;
            if (body.contains("decided_by")) j["decided_by"] = body["decided_by"];
            if (body.contains("decision")) j["decision"] = body["decision"];
            r.body = DumpJson(j);
          }
          return ex->Send(std::move(r));
        }
        case Decided::Kind::kAlreadyResolved:
          body["already_resolved"] = true;
          body["turn_id"] = o.turn_id;
          return ex->Send(JsonResponse(200, body));
      }
    });
  }

  // What a decision came to (agentloop::DecisionOutcome), with what the
  // answer names.
  struct Decided {
    using Kind = agentloop::DecisionOutcome;
    Kind kind = Kind::kRecorded;
    std::string session_id;
    std::string turn_id;
    int outstanding = 0;  // kRecorded
    // kAlreadyResolved, kConflict: the decision recorded before.
    std::optional<ApprovalDecision> earlier;
    // The words every front end reports it with.
    std::string Detail() const { return DescribeDecisionOutcome(kind, outstanding, earlier); }
  };

  // Records `res` about the item `pid` (checked to be the caller's and of
  // `kind`: else 404 on `ex`) and tells `answer` what happened; a refused
  // edit is 400 on `ex` with the item still pending. When the decision
  // completes the batch this server continues the turn (kResumed) and
  // `finish`, when set, gets the continued turn's outcome.
  void Resolve(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& pid,
               PendingKind kind, Resolution res, std::function<void(const Decided&)> answer,
               TurnFinish finish = {}, std::string by = {}) {
    res.continue_turn = false;
    res.by = by.empty() ? "http:" + who.tenant : std::move(by);
    res.tenant = who.tenant;
    WithPending(ex, who, pid, kind, [this, ex, who, pid, res, answer, finish](PendingLookup l) {
      if (l.state != PendingLookup::State::kOutstanding) return answer(Settled(l, res));
      const std::string sid = l.record.session_id;
      struct Outcome {
        ResolveReport report;
        std::optional<PendingLookup> after;
        uint64_t seq_before = 0;
      };
      Blocking(
          [this, pid, res, sid]() -> Result<Outcome> {
            Outcome o;
            auto store = StoreFor(*res.tenant);
            AL_ASSIGN_OR_RETURN(SessionInfo before, store->GetSession(sid));
            o.seq_before = before.last_seq;
            AL_ASSIGN_OR_RETURN(o.report, engine_.Resolve(pid, res, OptionsToOpen(sid), {}, {}));
            if (o.report.already_resolved) {
              AL_ASSIGN_OR_RETURN(o.after, store->LookupPending(pid));
            }
            return o;
          },
          [this, ex, who, res, sid, l, answer, finish](Result<Outcome> r) {
            if (!r.ok()) {
              if (r.error().code() == Code::kInvalidArgument) {
                return ex->Send(Problem(
                    400, "invalid_edited_args",
                    DescribeDecisionOutcome(agentloop::DecisionOutcome::kInvalidEdit, 0, {}) +
                        ": " + r.error().message()));
              }
              return ex->Send(FromStatus(r.error()));
            }
            if (r->report.already_resolved) return answer(Settled(r->after ? *r->after : l, res));
            // The decision's event was written by the store: watchers get it.
            PublishStored(sid, r->seq_before);
            Decided o;
            o.session_id = sid;
            o.turn_id = l.record.turn_id;
            if (!r->report.continues_later) {
              o.outstanding = r->report.outstanding;
              return answer(o);
            }
            // The batch is decided: this server continues the turn. For a
            // subagent's item that is the root's turn (the decision woke
            // the calls waiting on the subagent, up to the root).
            o.kind = Decided::Kind::kResumed;
            const std::string rsid = r->report.session_id.empty() ? sid : r->report.session_id;
            const std::string rtid =
                r->report.turn_id.empty() ? l.record.turn_id : r->report.turn_id;
            o.session_id = rsid;
            o.turn_id = rtid;
            Live& live = live_[rsid];
            live.tenant = who.tenant;
            TurnRecord& t = turns_[rtid];
            t.session_id = rsid;
            t.tenant = live.tenant;
            t.done = false;
            ContinueWhenIdle(rsid, rtid, finish);
            answer(o);
          });
    });
  }

  // A decision about an item no longer outstanding: the same decision again
  // is answered as already made; a different one conflicts; an item whose
  // batch was closed without it says so.
  static Decided Settled(const PendingLookup& l, const Resolution& res) {
    Decided o;
    o.session_id = l.record.session_id;
    o.turn_id = l.record.turn_id;
    o.kind = SettledOutcome(l, res);
    o.earlier = l.decision;
    return o;
  }

  // Publishes events the store holds after `after` for `id` (written outside
  // a turn of this server).
  void PublishStored(const std::string& id, uint64_t after) {
    auto it = live_.find(id);
    if (it == live_.end() || it->second.subscribers.empty()) return;
    Blocking([this, id, after]() { return engine_.store().Events(id, after); },
             [this, id](Result<std::vector<StoredEvent>> r) {
               if (!r.ok()) return;
               for (const auto& e : *r) Publish(id, e.seq, e.type, e.turn_id, e.json);
             });
  }

  // --- several instances on one store (server/wakeup.h) -------------------
  //
  // With a store that announces wake-ups (PostgreSQL, docs/storage.md,
  // "Several instances"), this server also continues batches decided
  // elsewhere, takes over sessions whose instance stopped mid-turn, and
  // tails the event log of the sessions its clients watch while no turn of
  // theirs runs here (a turn on another instance: its committed events, in
  // seq order; deltas stay with the running instance).

  void StartSharedStore() {
    wakeups_ = std::make_unique<WakeupPoller>(
        engine_.store(), WakeupPollerOptions{},
        [this](WakeupWork w) { asio::post(io_, [this, w = std::move(w)] { OnWakeupWork(w); }); });
    Result<bool> started = wakeups_->Start();
    if (!started.ok()) {
      std::fprintf(stderr, "agentloop serve: wake-ups: %s\n", started.error().ToString().c_str());
      return;
    }
    if (!*started) return;
    tail_timer_.emplace(io_);
    TailWatched();
  }

  void StopSharedStore() {
    if (wakeups_) wakeups_->Stop();
    if (tail_timer_) tail_timer_->cancel();
  }

  void OnWakeupWork(const WakeupWork& w) {
    if (shutting_down_) return;
    for (const auto& id : w.decided) ContinueDecided(id);
    for (const auto& id : w.queued) RunQueued(id);
    for (const auto& id : w.expired) {
      auto it = live_.find(id);
      if (it != live_.end() && it->second.running()) continue;  // running here
      Blocking([this, id]() { return TakeOverExpired(engine_.store(), id, SystemNowMs()); },
               [this, id](Result<bool> decided) {
                 if (!decided.ok()) {
                   // Another instance took it over first.
                   if (decided.error().code() != Code::kBusy && !IsLeaseLost(decided.error())) {
                     std::fprintf(stderr, "agentloop serve: taking over session %s: %s\n",
                                  id.c_str(), decided.error().ToString().c_str());
                   }
                   return;
                 }
                 std::fprintf(
                     stderr,
                     "agentloop serve: took over session %s (its instance stopped renewing "
                     "its lease)\n",
                     id.c_str());
                 // The repaired session's queued inputs run after its decided
                 // batch (the turn that ends then looks at the queue), or now.
                 if (*decided) {
                   ContinueDecided(id);
                 } else {
                   RunQueued(id);
                 }
               });
    }
  }

  // Continues the session's decided batch here if this server runs its
  // agent and nothing runs it here yet; a session another instance holds
  // stays with it (the open fails busy, quietly).
  void ContinueDecided(const std::string& id) {
    WithServedSession(id, [this, id](Live&) { ContinueWhenIdle(id, "", {}); });
  }

  // Calls `then` with the session's live state (its tenant set) on the io
  // thread if this server runs the session's agent and is not shutting
  // down; else does nothing. Work found in the store (a decided batch,
  // queued inputs) starts through it.
  template <typename Then>
  void WithServedSession(const std::string& id, Then then) {
    Blocking([this, id]() { return engine_.store().GetSession(id); },
             [this, id, then = std::move(then)](Result<SessionInfo> s) mutable {
               if (!s.ok() || shutting_down_ || FindAgent(s->agent) == nullptr) return;
               Live& live = live_[id];
               live.tenant = s->tenant;
               then(live);
             });
  }

  // Continues the session's decided batch (`turn_id`, when known, is its
  // turn) now if the session is idle here, else as soon as it is: a
  // decision can complete the batch while the turn that paused is still
  // finishing here (its `pending` event is out as soon as the pause is
  // stored), while its session closes, or while its queue is looked at.
  // `finish`, when set, is told the continued turn's outcome.
  void ContinueWhenIdle(const std::string& id, const std::string& turn_id, TurnFinish finish) {
    Live& live = live_[id];
    if (live.continuing && (turn_id.empty() || live.turn_id.empty() || live.turn_id == turn_id)) {
      // Already being continued here (the decision was seen twice: by the
      // server that recorded it and after the pausing turn's release).
      if (finish) live.finish.push_back(std::move(finish));
      return;
    }
    live.continue_decided = true;
    if (!turn_id.empty()) live.continue_turn_id = turn_id;
    if (finish) live.continue_finish.push_back(std::move(finish));
    if (!live.running()) StartNextQueued(id);
  }

  // Starts the continuation ContinueWhenIdle asked for (the session is
  // idle here).
  void StartDecided(const std::string& id) {
    Live& live = live_[id];
    live.continue_decided = false;
    for (auto& f : std::exchange(live.continue_finish, {})) live.finish.push_back(std::move(f));
    const std::string turn_id = std::exchange(live.continue_turn_id, {});
    StartTurn(id, "", TurnStart{});
    Live& started = live_[id];
    started.continuing = true;
    if (!turn_id.empty()) started.turn_id = turn_id;
  }

  // Runs the session's queued inputs here if this server runs its agent and
  // nothing runs it here yet (one at a time, each after the turn before).
  void RunQueued(const std::string& id) {
    WithServedSession(id, [this, id](Live& live) {
      if (!live.running()) StartNextQueued(id);
    });
  }

  void TailWatched() {
    tail_timer_->expires_after(std::chrono::milliseconds(250));
    tail_timer_->async_wait([this](boost::system::error_code ec) {
      if (ec || shutting_down_) return;
      for (auto& [id, live] : live_) {
        if (live.turn_active() || live.subscribers.empty() || tailing_.count(id) != 0) continue;
        std::optional<uint64_t> after;
        for (const auto& sub : live.subscribers) {
          auto c = sub->cursors.find(id);
          if (c == sub->cursors.end() || c->second.replaying) continue;
          after = std::min(after.value_or(c->second.last_seq), c->second.last_seq);
        }
        if (!after) continue;
        tailing_.insert(id);
        Blocking([this, id = id, after = *after]() { return engine_.store().Events(id, after); },
                 [this, id = id](Result<std::vector<StoredEvent>> r) {
                   tailing_.erase(id);
                   if (!r.ok()) return;
                   auto it = live_.find(id);
                   if (it == live_.end() || it->second.turn_active()) return;
                   for (const auto& e : *r) Publish(id, e.seq, e.type, e.turn_id, e.json);
                 });
      }
      TailWatched();
    });
  }

  // A turn stopped because this instance lost the session's lease: said on
  // stderr (the turn itself ends `failed` with the reason).
  static void LogLeaseLost(const std::string& id, const Result<TurnResult>& r) {
    const bool lost = r.ok() ? r->stop == StopReason::kFailed && IsLeaseLostReason(r->reason)
                             : IsLeaseLost(r.error());
    if (!lost) return;
    std::fprintf(stderr, "agentloop serve: session %s: the turn stopped: %s\n", id.c_str(),
                 r.ok() ? r->reason.c_str() : r.error().ToString().c_str());
  }

  std::unique_ptr<WakeupPoller> wakeups_;
  std::optional<asio::steady_timer> tail_timer_;
  std::set<std::string> tailing_;  // sessions with a tail read in flight

  // --- notifications and links (docs/server.md, "Notifications") ---------

  // The notifier posts with an HTTP client of its own on the io_context,
  // made only when an agent has a webhook.
  NotifierOptions NotifierOptionsFor() {
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
      ++metrics_.webhooks[s.ok() ? "delivered" : "failed"];
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
      Blocking([this, id = n.delivery_id]() { return engine_.store().FinishNotification(id); },
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
  OutboxNotification PendingNotification(const AgentSpec& agent, const std::string& key,
                                         const std::string& sid, const std::string& turn_id,
                                         const PendingItem& item, int64_t created_at_s) const {
    const int64_t expires = SystemNowMs() / 1000 + options_.link_ttl.count();
    auto link = [&](const char* action) {
      Result<std::string> token =
          MintLinkToken(key, LinkClaim{agent.name, item.id, action, expires});
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
  std::vector<OutboxNotification> RecordNotifications(std::vector<OutboxNotification> notes) {
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
      Result<bool> added = engine_.store().AddNotification(n, options_.notify_retry);
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
  void Deliver(const OutboxNotification& n) {
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
    out.deliver = [this, ch = &*c,
                   r = Rendered{n.event, n.body, n.id}](std::function<void(Status)> done) {
      channels_.Send(*ch, r, std::move(done));
    };
    notifier_.Send(std::move(out));
  }

  // Tells the session's agent's webhook how the turn ended: one
  // approval.requested or question.asked per item it paused on, with links
  // that decide it; else turn.completed. Each is recorded in the outbox
  // before its first attempt.
  void Notify(const std::string& sid, const std::string& turn_id, const TurnResult& r) {
    if (link_keys_.empty()) return;
    struct Ended {
      StopReason stop;
      std::string reason, final_text;
      TurnCounters counters;
      std::vector<PendingItem> pending;
    };
    Ended ended{r.stop, r.reason, r.final_text, r.counters, r.pending};
    Blocking(
        [this, sid, turn_id,
         ended = std::move(ended)]() -> Result<std::vector<OutboxNotification>> {
          AL_ASSIGN_OR_RETURN(SessionInfo s, engine_.store().GetSession(sid));
          const AgentSpec* agent = FindAgent(s.agent);
          auto key = link_keys_.find(s.agent);
          if (agent == nullptr || key == link_keys_.end()) {
            return std::vector<OutboxNotification>{};
          }
          const int64_t now = SystemNowMs() / 1000;
          std::vector<OutboxNotification> all;
          for (const PendingItem& item : ended.pending) {
            all.push_back(PendingNotification(*agent, key->second, sid, turn_id, item, now));
          }
          if (ended.pending.empty()) {
            Json b = {{"type", "turn.completed"},
                      {"agent", agent->name},
                      {"session_id", sid},
                      {"turn_id", turn_id},
                      {"created_at", now},
                      {"stop", std::string(StopReasonName(ended.stop))},
                      {"reason", ended.reason},
                      {"final_text", std::string(TruncateUtf8(ended.final_text, 16 << 10))},
                      {"counters", ToJson(ended.counters)},
                      {"session_url", public_url_ + "/v1/sessions/" + sid}};
            all.push_back(OutboxNotification{NewId("dlv"), sid, agent->name, "turn.completed",
                                             DumpJson(b), 0});
          }
          return RecordNotifications(std::move(all));
        },
        [this](Result<std::vector<OutboxNotification>> recorded) {
          if (!recorded.ok()) return;
          for (const OutboxNotification& n : *recorded) Deliver(n);
        });
  }

  // At start: announces the outstanding items that have no notification in
  // the outbox (their turn paused, and its server stopped before recording
  // it), then sweeps the outbox every notify_retry for due notifications
  // (their server stopped, or their receiver was unreachable).
  void StartOutbox() {
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

  void SweepOutbox() {
    if (shutting_down_ || !outbox_timer_) return;
    constexpr int kBatch = 100;
    Blocking(
        [this]() {
          return engine_.store().ClaimNotifications(
              kBatch, options_.notify_retry,
              std::chrono::duration_cast<std::chrono::milliseconds>(options_.link_ttl));
        },
        [this](Result<std::vector<OutboxNotification>> r) {
          if (shutting_down_) return;
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

  std::optional<asio::steady_timer> outbox_timer_;
  std::set<std::string> delivering_;  // delivery ids the notifier has in flight

  // Checks a link's token, finds its item, and calls `then` with the claim,
  // the item and its session; when the link is bad, `refused` gets the view
  // saying why (unset: a page answers it).
  template <typename Then>
  void WithLink(const std::shared_ptr<Exchange>& ex, const std::string& token, Then then,
                std::function<void(const LinkView&)> refused = {}) {
    if (!refused) refused = [ex](const LinkView& v) { ex->Send(LinkPage(v)); };
    LinkCheck check = CheckLinkToken(token, SystemNowMs() / 1000, [this](const std::string& agent) {
      auto it = link_keys_.find(agent);
      return it == link_keys_.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
    if (!check.claim) {
      LinkView v;
      if (check.refusal == LinkRefusal::kExpired) {
        v.status = 410;
        v.heading = "This link has expired";
        v.message = "Decide the item in the console or with `agentloop approve`.";
      } else {
        v.status = 403;
        v.heading = "This link is not valid";
        v.message = "Check that the whole link was copied.";
      }
      return refused(v);
    }
    struct Found {
      std::optional<PendingLookup> lookup;
      SessionInfo session;
    };
    std::string pid = check.claim->pending_id;
    Blocking(
        [this, pid = std::move(pid)]() -> Result<Found> {
          Found f;
          AL_ASSIGN_OR_RETURN(f.lookup, engine_.store().LookupPending(pid));
          if (f.lookup) {
            AL_ASSIGN_OR_RETURN(f.session, engine_.store().GetSession(f.lookup->record.session_id));
          }
          return f;
        },
        [claim = std::move(*check.claim), then = std::move(then),
         refused = std::move(refused)](Result<Found> r) mutable {
          LinkView v;
          if (!r.ok()) {
            v.status = 503;
            v.heading = "Try again";
            v.message = "The server could not read the item: " + r.error().message();
            return refused(v);
          }
          const bool question = claim.action == "answer";
          if (!r->lookup || r->session.agent != claim.agent ||
              (r->lookup->record.item.kind == PendingKind::kQuestion) != question) {
            v.status = 404;
            v.heading = "Nothing to decide";
            v.message = "The item this link names does not exist (any more).";
            return refused(v);
          }
          then(std::move(claim), std::move(*r->lookup), std::move(r->session));
        });
  }

  // The page for an item: its state, and the form when it still waits.
  static LinkView ItemView(const LinkClaim& claim, const PendingLookup& l, const SessionInfo& s) {
    const PendingItem& item = l.record.item;
    LinkView v;
    v.agent = s.agent;
    v.session_id = s.id;
    v.tool = item.tool;
    v.reason = item.reason;
    v.arguments = item.arguments.is_null() ? std::string() : item.arguments.dump(2);
    switch (l.state) {
      case PendingLookup::State::kOutstanding:
        if (claim.action == "answer") {
          v.heading = "Answer the agent's question";
          v.message = item.arguments.is_object() && item.arguments.contains("question") &&
                              item.arguments["question"].is_string()
                          ? item.arguments["question"].get<std::string>()
                          : item.reason;
          if (item.arguments.is_object() && item.arguments.contains("options") &&
              item.arguments["options"].is_array()) {
            for (const auto& o : item.arguments["options"]) {
              if (o.is_string()) v.options.push_back(o.get<std::string>());
            }
          }
        } else {
          v.heading = claim.action == "approve" ? "Approve this call?" : "Deny this call?";
          v.message =
              "The agent waits for this decision. Nothing happens until you press the "
              "button below.";
        }
        v.action = claim.action;
        break;
      case PendingLookup::State::kDecided: {
        v.heading = "Already decided";
        const bool denied = l.decision && l.decision->kind == ApprovalDecision::Kind::kDeny;
        v.message = std::string(item.kind == PendingKind::kQuestion ? "It was answered"
                                : denied                            ? "It was denied"
                                                                    : "It was approved") +
                    (l.decision && !l.decision->by.empty() ? " (by " + l.decision->by + ")" : "") +
                    ". This link decides nothing more.";
        break;
      }
      case PendingLookup::State::kCancelled:
        v.heading = "No longer waiting";
        v.message =
            "The call was withdrawn: another call of its batch was denied, or the turn "
            "moved on.";
        break;
    }
    return v;
  }

  // GET /v1/links/{token}: a confirmation page; only its POST decides.
  void LinkShow(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p) {
    WithLink(ex, p[0], [ex](LinkClaim claim, PendingLookup l, SessionInfo s) {
      ex->Send(LinkPage(ItemView(claim, l, s)));
    });
  }

  // POST /v1/links/{token}: decides the item as the link says (a form body
  // may carry `reason` for a deny, `answer` for a question).
  void LinkDecide(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p) {
    WithLink(ex, p[0], [this, ex](LinkClaim claim, PendingLookup l, SessionInfo s) {
      if (l.state != PendingLookup::State::kOutstanding) {
        return ex->Send(LinkPage(ItemView(claim, l, s)));
      }
      Result<std::multimap<std::string, std::string>> form = ParseUrlEncoded(ex->request().body);
      LinkView v;
      v.agent = s.agent;
      v.session_id = s.id;
      v.tool = l.record.item.tool;
      if (!form.ok()) {
        v.status = 400;
        v.heading = "The form could not be read";
        v.message = form.error().message();
        return ex->Send(LinkPage(v));
      }
      Resolution res;
      auto field = [&](const std::string& name) {
        std::string value;
        auto [b, e] = form->equal_range(name);
        for (auto it = b; it != e && value.empty(); ++it) value = it->second;
        return value;
      };
      if (claim.action == "answer") {
        res.kind = Resolution::Kind::kAnswer;
        res.answer = field("answer");
        if (res.answer.empty()) {
          v.status = 400;
          v.heading = "No answer given";
          v.message = "Go back and type an answer, or pick one of the options.";
          return ex->Send(LinkPage(v));
        }
      } else if (claim.action == "deny") {
        res.kind = Resolution::Kind::kDeny;
        res.reason = field("reason");
      } else {
        res.kind = Resolution::Kind::kApprove;
      }
      DecideLink(ex, claim, l, s, std::move(res), "link:" + claim.action,
                 [ex](const LinkView& done) { ex->Send(LinkPage(done)); });
    });
  }

  // Records the decision `res` a link (or a Slack button) carries about the
  // outstanding item `l`, by `by`, and tells `reply` what happened.
  void DecideLink(const std::shared_ptr<Exchange>& ex, const LinkClaim& claim,
                  const PendingLookup& l, const SessionInfo& s, Resolution res, std::string by,
                  std::function<void(const LinkView&)> reply) {
    const PendingKind kind = l.record.item.kind;
    Resolve(
        ex, Principal{s.tenant, kScopeApprove}, l.record.item.id, kind, std::move(res),
        [claim, l, s, reply = std::move(reply)](const Decided& o) {
          LinkView done;
          done.agent = s.agent;
          done.session_id = s.id;
          done.tool = l.record.item.tool;
          switch (o.kind) {
            case Decided::Kind::kRecorded:
            case Decided::Kind::kResumed:
              done.heading = claim.action == "approve" ? "Approved"
                             : claim.action == "deny"  ? "Denied"
                                                       : "Answered";
              done.message = o.kind == Decided::Kind::kResumed
                                 ? "The turn continues."
                                 : "Recorded. " + std::to_string(o.outstanding) +
                                       " other call(s) of this turn still wait.";
              break;
            case Decided::Kind::kAlreadyResolved:
            case Decided::Kind::kConflict:
              done.heading = "Already decided";
              done.message = "Someone decided this item first (" + o.Detail() +
                             "). This link decides nothing more.";
              break;
            case Decided::Kind::kCancelled:
              done.heading = "No longer waiting";
              done.message = "The call was withdrawn before this decision.";
              break;
            case Decided::Kind::kInvalidEdit:
              done.heading = "Not decided";
              done.message = o.Detail();
              break;
          }
          reply(done);
        },
        {}, std::move(by));
  }

  // POST /v1/slack/interactions (docs/notifications.md): a click on the
  // Approve or Deny button of a Slack notification, decided as its link
  // would be (server/slack.h checks Slack's signature first, before
  // anything of the request is read). Slack gets 200 once the decision is
  // recorded; the message is then replaced through its response_url,
  // saying who decided and how. Without a Slack channel that has a signing
  // secret the route does not exist.
  void SlackInteraction(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
    if (slack_signers_.empty()) {
      return ex->Send(Problem(404, "not_found", "no Slack channel with a signing secret"));
    }
    const Request& req = ex->request();
    std::vector<std::string> secrets;
    for (const auto& [secret, agent] : slack_signers_) secrets.push_back(secret);
    Result<size_t> signer =
        VerifySlackSignature(secrets, req.Header("X-Slack-Request-Timestamp"),
                             req.Header("X-Slack-Signature"), req.body, SystemNowMs() / 1000);
    if (!signer.ok()) return ex->Send(Problem(401, "unauthorized", signer.error().message()));
    Result<SlackClick> click = ParseSlackInteraction(req.body);
    if (!click.ok()) return ex->Send(Problem(400, "invalid_request", click.error().message()));
    // A link button (the pages) also reports its click: nothing to decide.
    if (click->action_id != "approve" && click->action_id != "deny") {
      return ex->Send(Response{200, "text/plain", "", {}});
    }
    const std::string signed_for = slack_signers_[*signer].second;
    auto reply = [this, ex, url = click->response_url, user = click->user](const LinkView& v) {
      ex->Send(Response{200, "text/plain", "", {}});
      if (url.empty() || !SlackResponseUrlAllowed(url, slack_api_bases_)) return;
      Json replacement = SlackDecisionMessage(v.heading, v.message, v.tool, v.agent, user);
      channels_.PostJson(url, DumpJson(replacement), [](Status s) {
        if (!s.ok()) {
          std::fprintf(stderr, "agentloop: Slack message not replaced: %s\n",
                       RedactSecrets(s.message()).c_str());
        }
      });
    };
    WithLink(
        ex, click->value,
        [this, ex, reply, signed_for, action = click->action_id, user = click->user](
            LinkClaim claim, PendingLookup l, SessionInfo s) {
          if (claim.agent != signed_for || claim.action != action) {
            LinkView v;
            v.heading = "This button is not valid";
            v.message = "It does not belong to this Slack app's notification.";
            return reply(v);
          }
          if (l.state != PendingLookup::State::kOutstanding) return reply(ItemView(claim, l, s));
          Resolution res;
          res.kind = action == "approve" ? Resolution::Kind::kApprove : Resolution::Kind::kDeny;
          DecideLink(ex, claim, l, s, std::move(res), "slack:" + user, reply);
        },
        reply);
  }

  // --- shutdown -----------------------------------------------------------

  void BeginShutdown() {
    if (shutting_down_) return;
    shutting_down_ = true;
    StopSharedStore();
    if (outbox_timer_) outbox_timer_->cancel();
    if (revocation_timer_) revocation_timer_->cancel();
    http_.StopAccepting();
    signals_.cancel();
    for (auto& sub :
         std::vector<std::shared_ptr<Subscriber>>(subscribers_.begin(), subscribers_.end())) {
      sub->stream->Close(Frame("", "shutdown", "{}"));
    }
    drain_timer_.expires_after(options_.drain_timeout);
    drain_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (auto& [id, live] : live_) {
        if (live.stop) live.stop->request_stop();
      }
      drained_ = false;
    });
    MaybeFinishShutdown();
  }

  void MaybeFinishShutdown() {
    for (const auto& [id, live] : live_) {
      if (live.running()) return;
    }
    drain_timer_.cancel();
    // Sessions close (locks released) on the pool; then the loop ends.
    if (!subscribers_.empty()) return;  // their final frames are being written
    if (stop_posted_) return;
    stop_posted_ = true;
    // Deliveries still running are abandoned (the outbox keeps them for the
    // next start); their HTTP clients end here, on the io thread, so no
    // transfer is left behind holding what it would have called.
    notifier_.Stop();
    notify_http_.reset();
    channels_.AbortTransfers();
    asio::post(blocking_, [&io = io_, finished = finished_] {
      asio::post(io, [&io, finished] {
        finished->store(true);
        io.stop();
      });
    });
  }

  ServerOptions options_;
  Engine& engine_;
  asio::io_context& io_;
  Inbox turn_inbox_;  // turns' events and outcomes, in order; outlives executor_
  HttpServer http_;
  ThreadPoolExecutor executor_;
  asio::thread_pool blocking_;
  // Compactions (POST /v1/sessions/{id}/compact), each a blocking model
  // call: kept off `blocking_`. More compactions than threads queue.
  asio::thread_pool compactions_{2};
  // The webhooks' HTTP client (NotifierOptionsFor; null without webhooks).
  // Declared before notifier_, whose options make it.
  std::shared_ptr<HttpClient> notify_http_;
  Notifier notifier_;
  ChannelSender channels_;  // email and Slack (channels.h)
  // Slack signing secrets with the agent each belongs to.
  std::vector<std::pair<std::string, std::string>> slack_signers_;
  std::vector<std::string> slack_api_bases_;  // Slack channels' api_base_url
  // Agents with a webhook: the key their links are signed with.
  std::map<std::string, std::string> link_keys_;
  std::string public_url_;       // set by Listen
  std::set<std::string> hosts_;  // the Host values answered (AllowHosts)
  std::string cookie_key_;       // signs console cookies (ServerOptions::cookie_secret)
  asio::signal_set signals_;
  asio::steady_timer drain_timer_;
  bool shutting_down_ = false;
  bool drained_ = true;
  bool stop_posted_ = false;
  // Set by the last handler of this server's shutdown (shared: the handler
  // may run after a Run that ended on another stop).
  std::shared_ptr<std::atomic<bool>> finished_ = std::make_shared<std::atomic<bool>>(false);

  std::unordered_map<std::string, Live> live_;
  std::set<std::shared_ptr<Subscriber>> subscribers_;
  size_t sse_clients_ = 0;
  ServerMetrics metrics_;
  std::unordered_map<std::string, TurnRecord> turns_;
  std::deque<std::string> finished_turns_;
};

}  // namespace

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
  auto s = std::make_unique<ServerImpl>(std::move(options), engine, io);
  AL_RETURN_IF_ERROR(s->Listen());
  return std::unique_ptr<Server>(std::move(s));
}

}  // namespace agentloop::server
