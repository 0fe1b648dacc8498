// JSON-RPC 2.0 over an MCP transport, independent of the transport.
//
// A Transport moves whole messages (one JSON text each) in both directions;
// RpcConnection numbers requests, matches responses to them by id, routes
// notifications and answers the server's own requests (`ping`; anything
// else gets -32601). A call waits for its response, its timeout (extended by
// progress notifications up to a hard maximum), its stop token, or the end
// of the connection; a call that stops waiting sends
// `notifications/cancelled` (never for `initialize`) and forgets its id, so
// a late response or progress for it is dropped.
//
// Thread-safety: Call and Notify may be called from several threads at
// once. Handlers run on the transport's thread and must not call Call (they
// may hand work to another thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop::mcp {

// Moves JSON-RPC messages to and from one server.
class Transport {
 public:
  struct Handlers {
    // One message text from the server, in arrival order. Returns false
    // when the text is not a message: the stream can no longer be trusted,
    // and the transport ends the connection (on_closed has been called).
    std::function<bool(std::string_view message)> on_message;
    // The connection ended (the server exited, the stream broke, it wrote
    // something that is not a message). Called at most once; no message
    // follows it.
    std::function<void(const Status& why)> on_closed;
    // A request this side sent will get no response through the transport
    // (HTTP: an error status, a broken or ended reply stream); the call
    // waiting for `id` fails with `why`. Ignored for an id already answered.
    // kNotFound means the server no longer knows the session
    // (IsSessionExpired): the handshake must run again.
    std::function<void(int64_t id, const Status& why)> on_request_failed;
  };
  virtual ~Transport() = default;
  // Connects (spawns the server). Handlers may run before Start returns.
  virtual Status Start(Handlers handlers) = 0;
  // Sends one message (no embedded newline).
  virtual Status Send(const std::string& message) = 0;
  // Ends the connection gracefully and releases it; on_closed has run (or
  // will never run) when it returns. Idempotent.
  virtual void Close() = 0;
};

// The status a transport reports when the server has forgotten the session
// (streamable HTTP: 404 to a request that carried an Mcp-Session-Id).
Status SessionExpired(std::string message);
bool IsSessionExpired(const Status& s);

// The `error` member of a JSON-RPC response.
struct RpcError {
  int64_t code = 0;
  std::string message;
  Json data;
};

// A response: exactly one of `result` and `error` is meaningful.
struct RpcReply {
  Json result;
  std::optional<RpcError> error;
};

struct CallOptions {
  // Without progress, the response must arrive within `timeout`. Each
  // progress notification restarts it, but never beyond `max_timeout`
  // after the call began. Zero: no timeout.
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds max_timeout{600000};
  std::stop_token stop;
  // Ask for progress: params._meta.progressToken is the request id.
  bool progress = false;
  // Each progress notification's params (on the transport's thread).
  std::function<void(const Json& params)> on_progress;
  // Send notifications/cancelled when the call stops waiting.
  bool cancellable = true;
};

class RpcConnection {
 public:
  using NotificationHandler = std::function<void(const std::string& method, const Json& params)>;

  // `name` labels messages ("server 'github'").
  RpcConnection(std::string name, std::unique_ptr<Transport> transport);
  ~RpcConnection();
  RpcConnection(const RpcConnection&) = delete;
  RpcConnection& operator=(const RpcConnection&) = delete;

  // Starts the transport. `on_notification` gets every notification except
  // progress for a call (routed to that call) and cancellations.
  Status Start(NotificationHandler on_notification);

  // Sends a request and waits. Errors: kDeadlineExceeded (timeout),
  // kCancelled (stop token), kUnavailable (connection ended, with its
  // reason), or the transport's error (sending, or on_request_failed). A JSON-RPC error response is
  // an OK result with `error` set.
  Result<RpcReply> Call(const std::string& method, Json params, const CallOptions& options);

  Status Notify(const std::string& method, Json params);

  // Closes the transport; waiting calls fail with kUnavailable.
  void Close();

  // Non-OK once the connection has ended (why it ended).
  Status closed_status() const;

 private:
  struct Pending {
    bool done = false;
    RpcReply reply;
    Status failure = Status::Ok();  // from the transport: no reply will come
    std::function<void(const Json&)> on_progress;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point hard_deadline;
    std::chrono::milliseconds timeout{0};
  };

  bool OnMessage(std::string_view text);
  void OnClosed(const Status& why);
  void OnRequestFailed(int64_t id, const Status& why);
  void HandleOne(const Json& msg);

  const std::string name_;
  std::unique_ptr<Transport> transport_;
  NotificationHandler on_notification_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_id_ = 1;                                // Guarded by mu_.
  std::map<int64_t, std::shared_ptr<Pending>> calls_;  // Guarded by mu_.
  Status closed_ = Status::Ok();                       // Guarded by mu_.
  bool is_closed_ = false;                             // Guarded by mu_.
};

}  // namespace agentloop::mcp
