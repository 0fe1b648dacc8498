// MCP servers a session loads tools from (docs/mcp.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace agentloop {

// One configured MCP server ([mcp_servers.NAME] in the configuration).
struct McpServerSpec {
  std::string name;  // the NAME of the table; part of every tool's name
  // stdio: the program (no shell) and its arguments.
  std::string command;
  std::vector<std::string> args;
  // Added to the server's environment (the scrubbed environment of bash).
  std::map<std::string, std::string> env;
  // Streamable HTTP: the endpoint, and the variable holding a bearer token.
  std::string url;
  std::string bearer_token_env_var;
  bool enabled = true;
  // Spawn, handshake and first tool list must end within this.
  int64_t startup_timeout_ms = 10000;
  // A tool call without progress; progress extends it up to 10 minutes.
  int64_t tool_timeout_ms = 60000;
  // Offered tools (server names): only `enabled_tools` when not empty, never
  // `disabled_tools`.
  std::vector<std::string> enabled_tools;
  std::vector<std::string> disabled_tools;
  // A session does not open when this server fails to start.
  bool required = false;
  // The server's annotations are believed: a tool it marks readOnlyHint is
  // read-only (allowed by default, offered in plan mode).
  bool trusted = false;
  // Where it was configured ("file:line"), for messages.
  std::string source;

  bool operator==(const McpServerSpec&) const = default;
};

// What a session knows of one of its MCP servers (`agentloop mcp list`,
// `/mcp` in chat).
struct McpServerState {
  std::string name;
  std::string transport;  // "stdio" | "http"
  // "ready"; "failed" (did not start); "disabled" (enabled = false);
  // "disconnected" (started, then exited or broke; its tools answer with an
  // error); "stopped" (configured, not running: the server API's answer for
  // a session no turn runs on).
  std::string state;
  std::string error;  // failed, disconnected: why
  std::string protocol_version;
  std::string server_name;         // as the server named itself in its handshake
  std::string server_version;      // likewise
  std::vector<std::string> tools;  // the names the model sees, as offered
};

}  // namespace agentloop
