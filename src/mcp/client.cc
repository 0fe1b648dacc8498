#include "mcp/client.h"

#include <algorithm>

namespace agentloop::mcp {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

Status FromRpcError(const std::string& who, const std::string& method, const RpcError& e) {
  return FailedPrecondition(who + " answered " + method + " with error " + std::to_string(e.code) +
                            ": " + e.message);
}

std::string StringField(const Json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_string()) return {};
  return o[key].get<std::string>();
}

}  // namespace

const std::vector<std::string>& SupportedProtocolVersions() {
  static const auto* v =
      new std::vector<std::string>{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
  return *v;
}

McpClient::McpClient(std::string name, std::unique_ptr<Transport> transport)
    : name_(std::move(name)), rpc_("MCP server '" + name_ + "'", std::move(transport)) {}

McpClient::~McpClient() { Shutdown(); }

void McpClient::Shutdown() {
  // Closing first fails a list in flight at once, so the join is short.
  refresher_.request_stop();
  cv_.notify_all();
  rpc_.Close();
  if (refresher_.joinable()) refresher_.join();
}

std::string McpClient::protocol_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return protocol_version_;
}
Json McpClient::server_info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return server_info_;
}
std::string McpClient::instructions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return instructions_;
}
std::vector<ServerTool> McpClient::tools() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tools_;
}
uint64_t McpClient::list_generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

bool McpClient::WaitForListGeneration(uint64_t generation,
                                      std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return generation_ >= generation; });
}

Status McpClient::Connect(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  AL_RETURN_IF_ERROR(
      rpc_.Start([this](const std::string& m, const Json& p) { OnNotification(m, p); }));
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    AL_RETURN_IF_ERROR(Handshake(Left(deadline)));
    ++sessions_;
  }
  AL_ASSIGN_OR_RETURN(std::vector<ServerTool> tools, ListTools(Left(deadline)));
  (void)tools;
  refresher_ = std::jthread([this](std::stop_token stop) { RefreshLoop(stop); });
  return Status::Ok();
}

Status McpClient::Handshake(std::chrono::milliseconds timeout) {
  const std::string who = "MCP server '" + name_ + "'";
  Json params = {{"protocolVersion", kLatestProtocolVersion},
                 {"capabilities", Json::object()},
                 {"clientInfo", {{"name", "agentloop"}, {"version", "0.1.0"}}}};
  CallOptions opts;
  opts.timeout = timeout;
  opts.max_timeout = timeout;
  opts.cancellable = false;  // initialize is never cancelled
  AL_ASSIGN_OR_RETURN(RpcReply reply, rpc_.Call("initialize", std::move(params), opts));
  if (reply.error) return FromRpcError(who, "initialize", *reply.error);
  const Json& r = reply.result;
  std::string version = StringField(r, "protocolVersion");
  const auto& supported = SupportedProtocolVersions();
  if (std::find(supported.begin(), supported.end(), version) == supported.end()) {
    std::string list;
    for (const auto& v : supported) list += (list.empty() ? "" : ", ") + v;
    return FailedPrecondition(who + " speaks MCP protocol version '" + version +
                              "', which this client does not (it speaks " + list + ")");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    protocol_version_ = version;
    server_info_ = r.value("serverInfo", Json::object());
    instructions_ = StringField(r, "instructions");
  }
  return rpc_.Notify("notifications/initialized", nullptr);
}

Result<RpcReply> McpClient::Request(const std::string& method, const Json& params,
                                    const CallOptions& options) {
  uint64_t session = 0;
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    session = sessions_;
  }
  Result<RpcReply> r = rpc_.Call(method, params, options);
  if (r.ok() || !IsSessionExpired(r.error())) return r;
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    // Another call may have opened the new session already.
    if (sessions_ == session) {
      auto timeout =
          options.timeout.count() > 0 ? options.timeout : std::chrono::milliseconds(10000);
      Status s = Handshake(timeout);
      if (!s.ok()) {
        return s.WithContext("MCP server '" + name_ + "' forgot the session (" +
                             r.error().message() + ") and a new one could not be opened");
      }
      ++sessions_;
    }
  }
  return rpc_.Call(method, params, options);
}

Result<std::vector<ServerTool>> McpClient::ListTools(std::chrono::milliseconds timeout) {
  const std::string who = "MCP server '" + name_ + "'";
  const auto deadline = Clock::now() + timeout;
  std::vector<ServerTool> out;
  std::string cursor;
  // A server that hands out cursors forever is cut off by the deadline; a
  // repeated cursor ends the list at once.
  std::vector<std::string> seen;
  while (true) {
    Json params = Json::object();
    if (!cursor.empty()) params["cursor"] = cursor;
    CallOptions opts;
    opts.timeout = Left(deadline);
    opts.max_timeout = opts.timeout;
    AL_ASSIGN_OR_RETURN(RpcReply reply, Request("tools/list", params, opts));
    if (reply.error) return FromRpcError(who, "tools/list", *reply.error);
    const Json& r = reply.result;
    if (!r.contains("tools") || !r["tools"].is_array()) {
      return FailedPrecondition(who + " answered tools/list without a 'tools' array");
    }
    for (const Json& t : r["tools"]) {
      ServerTool tool;
      tool.name = StringField(t, "name");
      if (tool.name.empty()) return FailedPrecondition(who + " listed a tool without a name");
      tool.title = StringField(t, "title");
      tool.description = StringField(t, "description");
      tool.input_schema = t.value("inputSchema", Json::object());
      if (!tool.input_schema.is_object()) {
        return FailedPrecondition(who + ": tool '" + tool.name +
                                  "' has an inputSchema that is "
                                  "not an object");
      }
      tool.output_schema = t.value("outputSchema", Json());
      tool.annotations = t.value("annotations", Json::object());
      if (!tool.annotations.is_object()) tool.annotations = Json::object();
      out.push_back(std::move(tool));
    }
    cursor = StringField(r, "nextCursor");
    if (cursor.empty()) break;
    if (std::find(seen.begin(), seen.end(), cursor) != seen.end()) {
      return FailedPrecondition(who + " repeated the tools/list cursor '" + cursor + "'");
    }
    seen.push_back(cursor);
  }
  std::lock_guard<std::mutex> lock(mu_);
  tools_ = out;
  ++generation_;
  cv_.notify_all();
  return out;
}

Result<RpcReply> McpClient::CallTool(const std::string& tool, const Json& arguments,
                                     const CallOptions& options) {
  Json params = {{"name", tool}, {"arguments", arguments.is_object() ? arguments : Json::object()}};
  return Request("tools/call", params, options);
}

Status McpClient::Ping(std::chrono::milliseconds timeout) {
  CallOptions opts;
  opts.timeout = timeout;
  opts.max_timeout = timeout;
  AL_ASSIGN_OR_RETURN(RpcReply reply, Request("ping", Json::object(), opts));
  if (reply.error) return FromRpcError("MCP server '" + name_ + "'", "ping", *reply.error);
  return Status::Ok();
}

void McpClient::OnNotification(const std::string& method, const Json&) {
  if (method == "notifications/tools/list_changed") {
    // Listing is a request: it cannot wait for its answer on the
    // transport's thread, which delivers that answer.
    std::lock_guard<std::mutex> lock(mu_);
    list_stale_ = true;
    cv_.notify_all();
  }
}

void McpClient::RefreshLoop(std::stop_token stop) {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, stop, [this] { return list_stale_; });
      if (stop.stop_requested()) return;
      list_stale_ = false;
    }
    if (!rpc_.closed_status().ok()) return;
    (void)ListTools(std::chrono::milliseconds(10000));
  }
}

}  // namespace agentloop::mcp
