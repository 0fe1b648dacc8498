// Starting a session's MCP servers and turning their tools into agentloop
// tools.
//
// Servers start in parallel; each must spawn, hand-shake and list its tools
// within its startup_timeout_ms. One that fails is reported (state
// "failed", with the reason) and the session runs without it, unless it is
// `required`: then StartServers fails naming it.
//
// Thread-safety: StartServers is a pure function of its arguments (it
// starts processes).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agentloop/env.h"
#include "agentloop/mcp.h"
#include "agentloop/tool.h"

#include "mcp/client.h"
#include "providers/http_client.h"

namespace agentloop::mcp {

struct LaunchContext {
  std::filesystem::path workspace;  // the servers' working directory
  // The environment a server starts from: bash's (scrubbed of secrets),
  // "NAME=value" entries; each server's `env` is added to it.
  std::vector<std::string> base_env;
  // bash's sandbox: a stdio server runs inside the same sandbox when it is
  // on (kRefuse: a server is not started when bubblewrap cannot run here).
  SandboxMode sandbox = SandboxMode::kOff;
  bool network = false;
  SandboxFallback sandbox_fallback = SandboxFallback::kRefuse;
  // Paths the sandbox hides, as bash's (BashToolOptions::hidden_paths).
  std::vector<std::string> hidden_paths;
  size_t output_cap_chars = 30000;
  // Where `bearer_token_env_var` is looked up: the process's environment,
  // not `base_env` (a token is a secret, scrubbed from that one).
  EnvMap token_env;
  // The HTTP client of streamable HTTP servers; null: each such server
  // gets one of its own.
  std::shared_ptr<HttpClient> http;
  // Server stderr lines, labelled by server (may be empty: kept only as the
  // tail shown when a server fails).
  std::function<void(const std::string& server, const std::string& line)> on_stderr;
};

struct ServerStatus {
  std::string name;
  std::string state;  // "ready" | "failed" | "disabled"
  std::string error;  // failed: why
  std::string protocol_version;
  Json server_info;                // {name, version} as the server sent it
  std::vector<std::string> tools;  // the names the model sees
  std::string instructions;
  std::string transport;  // "stdio" | "http"
  // Ready: the server's client (its health says whether it still runs).
  std::shared_ptr<McpClient> client;
};

// `status` as the public McpServerState, now: a ready server whose
// connection has ended is "disconnected", with the reason.
McpServerState CurrentState(const ServerStatus& status);

// A configured server that is not running (no session has it open):
// "stopped", or "disabled" when it is not enabled; no tools.
McpServerState StoppedState(const McpServerSpec& spec);

// {name, transport, state, error?, protocol_version?, server: {name,
// version}?, tools}: the JSON of `agentloop mcp list --output json` and of
// the server API.
Json McpServerStateToJson(const McpServerState& state);

struct StartedServers {
  std::vector<std::shared_ptr<Tool>> tools;
  std::vector<ServerStatus> servers;
  std::vector<std::string> warnings;
  std::vector<std::shared_ptr<McpClient>> clients;
};

// Errors: kFailedPrecondition naming a `required` server that did not
// start, and why.
Result<StartedServers> StartServers(const std::vector<McpServerSpec>& specs,
                                    const LaunchContext& ctx);

// Builds the transport for one server: stdio for `command`, streamable
// HTTP for `url`. Errors: kFailedPrecondition naming the server (the
// sandbox cannot run, the bearer token's variable is not set).
Result<std::unique_ptr<Transport>> MakeTransport(const McpServerSpec& spec,
                                                 const LaunchContext& ctx);

}  // namespace agentloop::mcp
