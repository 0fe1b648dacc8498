// An MCP client session with one server: the lifecycle (handshake, tool
// list, calls, ping, shutdown) over an RpcConnection.
//
// Era: the handshake is the legacy one (`initialize` offering
// kLatestProtocolVersion, accepting the older versions a server answers
// with, then `notifications/initialized`). The stateless era (a
// `server/discover` request first, falling back to `initialize` on an error
// that is not the modern one) is another Handshake step; everything after
// the handshake reads the negotiated version from `protocol_version()`.
//
// Session: a transport that reports the session expired (streamable HTTP's
// 404) makes the client run the handshake again and send the request once
// more; the server had not processed it.
//
// Tool list: paged `tools/list` until no `nextCursor`. A
// `notifications/tools/list_changed` makes a background worker list again;
// `tools()` is always the latest complete list.
//
// Thread-safety: all methods may be called from several threads once
// Connect has returned.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mcp/jsonrpc.h"

namespace agentloop::mcp {

inline constexpr const char* kLatestProtocolVersion = "2025-11-25";

// The versions this client speaks, newest first.
const std::vector<std::string>& SupportedProtocolVersions();

// One tool as the server lists it.
struct ServerTool {
  std::string name;
  std::string title;
  std::string description;
  Json input_schema;   // object
  Json output_schema;  // null when the tool declares none
  Json annotations;    // object (hints: readOnlyHint, destructiveHint, ...); may be empty
};

class McpClient {
 public:
  // `name` is the configured server name (for messages).
  McpClient(std::string name, std::unique_ptr<Transport> transport);
  ~McpClient();
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  // Starts the transport, runs the handshake and lists the tools, all
  // within `timeout`. Errors name the server and the step that failed.
  Status Connect(std::chrono::milliseconds timeout);

  // Lists the tools again (every page) and makes the list current.
  Result<std::vector<ServerTool>> ListTools(std::chrono::milliseconds timeout);

  // tools/call. The reply's `error` is a JSON-RPC error; `result` is the
  // CallToolResult. Progress extends the timeout (CallOptions).
  Result<RpcReply> CallTool(const std::string& tool, const Json& arguments,
                            const CallOptions& options);

  Status Ping(std::chrono::milliseconds timeout);

  // Ends the session: closes the transport (for stdio: stdin, then
  // SIGTERM, then SIGKILL). Idempotent.
  void Shutdown();

  const std::string& name() const { return name_; }
  std::string protocol_version() const;
  Json server_info() const;  // {name, version, ...} as the server sent it
  std::string instructions() const;
  std::vector<ServerTool> tools() const;
  // Counts completed lists (Connect's is 1).
  uint64_t list_generation() const;
  // Waits until list_generation() >= `generation`; false at the timeout.
  bool WaitForListGeneration(uint64_t generation, std::chrono::milliseconds timeout) const;
  // Non-OK once the connection has ended.
  Status health() const { return rpc_.closed_status(); }

 private:
  Status Handshake(std::chrono::milliseconds timeout);
  // rpc_.Call, with one new handshake and retry when the session expired.
  Result<RpcReply> Request(const std::string& method, const Json& params,
                           const CallOptions& options);
  void OnNotification(const std::string& method, const Json& params);
  void RefreshLoop(std::stop_token stop);

  const std::string name_;
  RpcConnection rpc_;
  mutable std::mutex mu_;
  mutable std::condition_variable_any cv_;
  std::string protocol_version_;   // Guarded by mu_.
  Json server_info_;               // Guarded by mu_.
  std::string instructions_;       // Guarded by mu_.
  std::vector<ServerTool> tools_;  // Guarded by mu_.
  uint64_t generation_ = 0;        // Guarded by mu_.
  bool list_stale_ = false;        // Guarded by mu_.
  // Serialises handshakes; counts completed ones.
  std::mutex session_mu_;
  uint64_t sessions_ = 0;  // Guarded by session_mu_.
  std::jthread refresher_;
};

}  // namespace agentloop::mcp
