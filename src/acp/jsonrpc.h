// JSON-RPC 2.0 over newline-delimited JSON, as the Agent Client Protocol
// carries it on stdio (docs/acp.md): one message per line, no batches.
//
// ParseLine classifies one line as a request, a notification or a response,
// or gives the error reply the peer must get (-32700 for a line that is not
// JSON, -32600 for JSON that is not a JSON-RPC 2.0 message), with a message
// saying what was wrong. Connection writes messages (one line each, under a
// lock) and matches the responses to the requests this side sent.
//
// Thread-safety: ParseLine and the Make* builders are pure. Connection's
// methods may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop::acp {

inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

struct RpcError {
  int code = kInternalError;
  std::string message;
};

struct Incoming {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kNotification;
  Json id;  // a string or an integer (kRequest, kResponse)
  std::string method;
  Json params;  // an object, an array or null (absent)
  Json result;  // kResponse without error
  std::optional<RpcError> error;
};

// One line: the message it holds, or the error reply for it (the request's
// id when one could be read, else null). A blank line is neither (both
// unset).
struct ParsedLine {
  std::optional<Incoming> message;
  std::optional<Json> error_reply;
};
ParsedLine ParseLine(std::string_view line);

Json MakeResult(const Json& id, Json result);
Json MakeError(const Json& id, int code, std::string_view message);
Json MakeRequest(const Json& id, std::string_view method, Json params);
Json MakeNotification(std::string_view method, Json params);

// One side of a connection: sends messages through `write_line` (one
// serialised message without the newline; called under the connection's
// lock, so lines never interleave) and waits for the answers to its own
// requests.
class Connection {
 public:
  explicit Connection(std::function<void(const std::string&)> write_line);

  void Send(const Json& message);
  void Notify(std::string_view method, Json params);

  // Sends a request and waits for its response. Errors: the peer's error
  // (kUnavailable with its code and message), kCancelled when `stop` fires
  // first, kUnavailable when the connection closed first.
  Result<Json> Call(std::string_view method, Json params, std::stop_token stop);

  // Hands a response read from the peer to the waiting Call. False when no
  // request of this side has its id (the caller reports it).
  bool Deliver(const Incoming& response);

  // The peer is gone: every waiting Call, and every later one, fails.
  void Close();

 private:
  struct Waiter {
    bool done = false;
    Result<Json> answer = Json();
  };
  std::function<void(const std::string&)> write_line_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_id_ = 1;                 // Guarded by mu_.
  std::map<int64_t, Waiter*> waiters_;  // Guarded by mu_.
  bool closed_ = false;                 // Guarded by mu_.
};

}  // namespace agentloop::acp
