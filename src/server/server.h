// Server: `agentloop serve`, the engine behind HTTP (docs/server.md).
//
// One io_context, run by one thread, carries the listener, every client
// connection and every event stream; store calls and turn steps run on a
// small pool (TurnExecutor), never on the I/O thread. A session costs memory
// only while a turn runs (its Session object is open and locked) or a client
// watches it; a paused or idle session is only its rows in the store.
//
// Security (docs/security.md): a request is answered only when its `Host`
// names this server (the listen address, a loopback name with the port, or
// the authority of `public_url`); anything else gets 421 before routing
// (DNS rebinding). Each request needs `Authorization: Bearer <token>` or the
// console's cookie; the token's SHA-256 names its tenant and scopes, and a
// caller sees only its tenant's sessions and pending items. Only with
// `no_auth` (loopback only) is every caller the tenant "default" with every
// scope. A state-changing request that carries an Origin header must come
// from the server's own origin or one configured as allowed. Console cookies
// are signed with `cookie_secret`, which only the server holds. Nothing a
// client sends widens a session's settings: turns run under the settings
// pinned to the session when it was created from its agent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "agentloop/engine.h"
#include "agentloop/status.h"

#include "server/channels.h"
#include "server/http_server.h"

namespace agentloop::server {

enum Scope : unsigned {
  kScopeRead = 1,
  kScopeWrite = 2,
  kScopeApprove = 4,
  kScopeAdmin = 8,
};

struct TokenGrant {
  std::string sha256;  // lower-case hex of SHA-256(token)
  std::string tenant;
  unsigned scopes = 0;
};

// "<sha256 hex>:<tenant>:<scope>[,<scope>...]" (scopes: read, write,
// approve, admin). Errors: kInvalidArgument naming what is wrong.
Result<TokenGrant> ParseTokenGrant(std::string_view spec);

// A named agent: what a new session of it runs with.
struct AgentSpec {
  std::string name;
  std::string description;
  // `POST /v1/sessions` without an agent gets this one when the server
  // serves several (at most one is the default; a lone agent needs none).
  bool is_default = false;
  SessionOptions options;
  // Set for an agent with a root of workspaces (agent.workspace_root): the
  // options of a session of `tenant` in `workspace`, a relative path in the
  // tenant's own folder of the root (`<root>/<tenant>`; empty: that folder),
  // or kInvalidArgument saying why it is refused. Whatever `workspace`
  // holds, links included, the result stays in the tenant's folder: a
  // tenant never names another tenant's directory. Every session of such an
  // agent gets its workspace from it. Called off the I/O thread. Unset: a
  // request naming a workspace is refused.
  std::function<Result<SessionOptions>(const std::string& tenant, const std::string& workspace)>
      for_workspace;
  // Where the agent's notifications go (approval.requested, question.asked,
  // turn.completed), signed with `secret`, which also keys the agent's
  // approve/deny links (server/links.h). Empty url: none are sent.
  struct Webhook {
    std::string url;
    std::string secret;
  } webhook;
  // The agent's [[notify]] channels (channels.h, docs/notifications.md),
  // each with a distinct key. Their links are signed with a key derived from
  // `webhook.secret` when the agent has a webhook, else from the server's
  // cookie_secret.
  std::vector<NotifyChannel> channels;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:7878";
  // At least one, unless `no_auth`.
  std::vector<TokenGrant> tokens;
  // Serve without authentication: every caller is the tenant "default" with
  // every scope. Only with no token and a loopback listen address.
  bool no_auth = false;
  // The key of the console's cookies (HMAC-SHA256): a secret that only the
  // server holds, never derived from the configuration; servers that share
  // a store share it so that a sign-in works on each. Empty: a random key
  // for this process (sign-ins end when it stops).
  std::string cookie_secret;
  // Origins (scheme://host[:port]) allowed on state-changing requests
  // besides the server's own.
  std::vector<std::string> allowed_origins;
  HttpLimits limits;
  // At least one. A session names one when created; a request that names
  // none gets the only agent, or the one marked `is_default`, else 400.
  std::vector<AgentSpec> agents;
  // Threads for store calls and turn steps.
  int worker_threads = 2;
  // Concurrent tool calls across sessions (0: twice the cores).
  int max_concurrent_tools = 0;
  // Running turns get this long to end after a shutdown starts; then they
  // are cancelled.
  std::chrono::milliseconds drain_timeout{20000};
  // The server's address as the people who follow its links reach it
  // (scheme://host[:port], no trailing slash). Empty: http:// and the listen
  // address.
  std::string public_url;
  // How long an approve/deny link in a notification can be used.
  std::chrono::seconds link_ttl{3 * 24 * 3600};
  // Notifications are kept in the store's outbox until delivered: one not
  // delivered (its attempts ran out, or its server stopped) is tried again
  // this long after its last claim, by this server or, after a restart or
  // on a shared store, another. Undelivered ones older than link_ttl are
  // dropped.
  std::chrono::milliseconds notify_retry{60'000};
  // Inputs a session may have waiting (on_busy: "enqueue"); one more is
  // refused with 429 and Retry-After.
  int max_queued_inputs = 16;
  // Idempotency keys are remembered this long.
  std::chrono::milliseconds idempotency_ttl{24 * 3600 * 1000};
};

// (METHOD, path) of every route, `{name}` for a path parameter: what
// `GET /v1/openapi.json` (OpenApiSpec) must describe.
std::vector<std::pair<std::string, std::string>> RouteTable();
// The OpenAPI 3.1 description of the API (src/server/openapi.json).
std::string_view OpenApiSpec();

class Server {
 public:
  // Checks the options and binds the listen address (port() is known after).
  // Errors: kInvalidArgument (no token without no_auth, no_auth with tokens
  // or on a non-loopback address, no agent, two default agents, a bad
  // address), kUnavailable
  // (cannot bind).
  // `io` is the one io_context of the process: the engine's HTTP client runs
  // on it too (EngineOptions::io_context) and Run() runs it; `engine` and `io`
  // must outlive the server.
  static Result<std::unique_ptr<Server>> Create(ServerOptions options, Engine& engine,
                                                boost::asio::io_context& io);
  virtual ~Server() = default;

  virtual int port() const = 0;
  // Runs the I/O loop on the calling thread until Shutdown has finished.
  // Returns OK when every running turn ended within the drain timeout.
  virtual Status Run() = 0;
  // Starts a graceful shutdown (any thread, also a signal handler's thread
  // via the loop): stop accepting, /v1/ready answers 503, event streams get
  // a final `shutdown` event, running turns get the drain timeout to end,
  // then are cancelled; Run returns.
  virtual void Shutdown() = 0;
};

}  // namespace agentloop::server
