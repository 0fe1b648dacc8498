// What the parts of `agentloop serve` share: the caller of a request, the
// JSON answers and request parsing every route uses, the server's metrics,
// and `ServerContext`, the options, engine, I/O loop and store pool that the
// session host (session_host.h), the event hub (event_hub.h) and the routes
// (server_impl.h) work with. Everything here is used on the io thread unless
// it says otherwise.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "agentloop/engine.h"
#include "agentloop/json.h"
#include "agentloop/server_state.h"
#include "agentloop/status.h"

#include "server/http_server.h"
#include "server/server.h"

namespace agentloop::server {

inline constexpr unsigned kAllScopes = kScopeRead | kScopeWrite | kScopeApprove | kScopeAdmin;

// The path parameters a route matched, in order.
using Params = std::vector<std::string>;
// Told the outcome of a turn (its id, and the result or the error that kept
// it from running).
using TurnFinish = std::function<void(const std::string& turn_id, const Result<TurnResult>&)>;

// Who makes a request: a tenant with scopes.
struct Principal {
  std::string tenant;
  unsigned scopes = 0;
  bool console_cookie = false;  // signed in by the console's cookie, not a bearer token
  bool Has(unsigned scope) const { return (scopes & (scope | kScopeAdmin)) != 0; }
};

// A Prometheus histogram of durations in seconds.
struct Histogram {
  static constexpr std::array<double, 12> kBounds = {0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                     2.5,  5,    10,  30,   60,  120};
  std::array<uint64_t, kBounds.size()> counts{};
  uint64_t count = 0;
  double sum = 0;

  void Observe(double seconds);
  void Write(std::string& m, const std::string& name, std::string_view help) const;
};

struct ServerMetrics {
  uint64_t turns_started = 0;
  std::map<std::string, uint64_t> turns_finished;  // by stop reason
  uint64_t overflows = 0;
  std::map<std::string, uint64_t> webhooks;  // deliveries by outcome
  Histogram model, tool;
};

// One server-sent event frame (`id` empty: none).
std::string Frame(std::string_view id, std::string_view event, std::string_view data);
Response JsonResponse(unsigned status, const Json& body);
// The problem answer for a status (404, 400, 409, 429, 503, 500).
Response FromStatus(const Status& s);
// A pending item as the API shows it, in `state`.
Json PendingJson(const PendingRecord& r, std::string_view state);
Json TurnResultJson(const TurnResult& r);
// Parses a JSON object body; an empty body is {}.
Result<Json> ParseBody(const Request& req);
// Checks that `body` has only the `known` keys.
Status OnlyKeys(const Json& body, std::initializer_list<std::string_view> known);
// ?limit= (1-200, default 50).
Result<int> LimitParam(const Request& req);
// An event seq given as `what` (empty: 0).
Result<uint64_t> SeqParam(std::string_view text, std::string_view what);
std::vector<std::string> SplitPath(std::string_view path);

// What every part of the server works with. The pool runs store calls (and
// anything else that blocks) off the io thread.
class ServerContext {
 public:
  // REQUIRES: ServerStateOf(engine.store()) is not null (Server::Create
  // checks it).
  ServerContext(ServerOptions options, Engine& engine, boost::asio::io_context& io);

  ServerOptions options;
  Engine& engine;
  // The server's own state (outbox, idempotency keys, revoked sign-ins),
  // kept in the engine's store's database.
  ServerStateStore& state;
  boost::asio::io_context& io;
  boost::asio::thread_pool pool;
  ServerMetrics metrics;
  bool shutting_down = false;
  // False once a shutdown cancelled the turns that were still running.
  bool drained = true;

  // Runs `work` on the pool and `then` with its result on the io thread.
  template <typename Work, typename Then>
  void Blocking(Work work, Then then) {
    boost::asio::post(pool, [this, work = std::move(work), then = std::move(then)]() mutable {
      auto result = work();
      boost::asio::post(io, [then = std::move(then), result = std::move(result)]() mutable {
        then(std::move(result));
      });
    });
  }

  // The store as a caller of `tenant` sees it: another tenant's session or
  // pending item is an unknown id to it. Every by-id read or write made for
  // a request goes through it.
  std::unique_ptr<TenantStore> StoreFor(const std::string& tenant) const {
    return engine.store().ForTenant(tenant);
  }

  // The served agent `name`, or null.
  const AgentSpec* FindAgent(const std::string& name) const;

  // What a session is opened with to be shown or resolved (its pinned
  // settings do the rest).
  static SessionOptions OptionsToOpen(const std::string& session_id);
  // The MCP servers a session runs its turns with: its agent's, which are
  // per process and not pinned with the session's settings. A session in a
  // workspace below the agent's root gets the agent's settings for that
  // workspace (a trusted workspace's configuration may add servers), in
  // its tenant's folder. None for a session of an agent not served here.
  // Off the io thread.
  Result<std::vector<McpServerSpec>> McpServersOf(const SessionInfo& info) const;
  // What a turn opens its session with: OptionsToOpen and the session's MCP
  // servers, which start with the turn and stop when it ends. Off the io
  // thread.
  Result<SessionOptions> OptionsForTurn(const std::string& session_id) const;

  // Calls `then` with the session's info on the io thread.
  template <typename Then>
  void WithSessionInfo(const std::string& id, Then then) {
    Blocking([this, id]() { return engine.store().GetSession(id); }, std::move(then));
  }

  // Loads the session for a read, checking its tenant (another tenant's
  // session does not exist for the caller: 404 on `ex`).
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
};

}  // namespace agentloop::server
