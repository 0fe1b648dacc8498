// The streamable HTTP transport (MCP 2025-11-25, also what 2025-03-26 and
// 2025-06-18 servers speak): every message is one POST to the endpoint.
//
// A POST carries `Accept: application/json, text/event-stream`,
// `Content-Type: application/json`, `Authorization: Bearer ...` when a
// token is configured, and, once the handshake has set them, the
// `Mcp-Session-Id` the server assigned in its answer to `initialize` and
// `MCP-Protocol-Version` (the version the server answered with). A request
// is answered with one JSON message (or batch) or with a server-sent-events
// stream whose events are messages (progress, the server's own requests, and
// the response); notifications and responses are answered 202 without a
// body. A request whose POST fails (transport error, an HTTP status other
// than 2xx, a reply that ends without its response) fails the call waiting
// for it through on_request_failed: 404 to a request that carried a session
// id is SessionExpired, and the client opens a new session. Sending
// `initialize` forgets the old session.
//
// After `notifications/initialized` the transport opens the GET event
// stream the server may use for messages outside any request
// (`notifications/tools/list_changed`); a server that answers it with
// anything but an event stream (405) has none. A stream that ends is opened
// again after the server's `retry:` (1 second when it sent none). The
// replay of missed events (`Last-Event-ID`) is not asked for.
//
// A sent `notifications/cancelled` also aborts the POST of the request it
// names. Close() ends the session with a DELETE (bounded by
// `close_timeout`; a 405 is fine) and aborts every transfer.
//
// Thread-safety: Send may be called from any thread, also from the
// handlers; the handlers run on the HTTP client's event thread and never
// after Close() has returned.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "mcp/jsonrpc.h"
#include "providers/http_client.h"

namespace agentloop::mcp {

struct HttpTransportOptions {
  std::string name;  // the configured server name, for messages
  std::string url;   // http:// or https://
  // Sent as `Authorization: Bearer <token>` when not empty (never logged).
  std::string bearer_token;
  std::chrono::milliseconds connect_timeout{10000};
  // The DELETE that ends the session.
  std::chrono::milliseconds close_timeout{2000};
  // Longest accepted JSON reply or event (a longer one fails the request).
  size_t max_message_bytes = 16 * 1024 * 1024;
  // Open the GET event stream after the handshake.
  bool event_stream = true;
  // The client to send with; null: one of the transport's own.
  std::shared_ptr<HttpClient> http;
};

class StreamableHttpTransport final : public Transport {
 public:
  explicit StreamableHttpTransport(HttpTransportOptions options);
  ~StreamableHttpTransport() override;
  Status Start(Handlers handlers) override;
  Status Send(const std::string& message) override;
  void Close() override;

  // The session the server assigned (empty before the handshake).
  std::string session_id() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
  // Owned here, not by the core: the core may be released on the client's
  // event thread, where the client must not be destroyed.
  std::shared_ptr<HttpClient> http_;
};

}  // namespace agentloop::mcp
