// `agentloop mcp list`: starts the MCP servers a session of the current
// settings would start (the same wiring), reports each one's state, version
// and tools, and stops them again. `/mcp` in chat prints the open session's
// servers with the same printer.
#include "base/strings.h"
#include "commands.h"
#include "engine/wiring.h"
#include "mcp/servers.h"
#include "settings.h"

namespace agentloop::cli {

std::string FormatMcpServers(const std::vector<McpServerState>& servers) {
  if (servers.empty()) return "no MCP servers are configured (docs/mcp.md)\n";
  std::string out;
  for (const McpServerState& s : servers) {
    out += s.name + "  " + s.state + "  " + s.transport;
    if (!s.server_name.empty() || !s.server_version.empty()) {
      out += "  " + s.server_name + (s.server_version.empty() ? "" : " " + s.server_version);
    }
    if (!s.protocol_version.empty()) out += "  (MCP " + s.protocol_version + ")";
    if (s.state == "ready" || s.state == "disconnected") {
      out += "  " + std::to_string(s.tools.size()) + (s.tools.size() == 1 ? " tool" : " tools");
    }
    out += "\n";
    if (!s.error.empty()) out += "  " + s.error + "\n";
    for (const std::string& t : s.tools) out += "  " + t + "\n";
  }
  return out;
}

int CmdMcp(const CommandEnv& e) {
  const bool json = [&] {
    for (const ConfigFlag& c : e.args.config_flags) {
      if (c.key == "output") return c.value != "text";
    }
    return false;
  }();
  auto fail = [&](const Status& s, int code) {
    if (json) e.out << DumpJson(Json{{"error", s.message()}}) << "\n";
    e.err << "agentloop: " << s.message() << "\n";
    return code;
  };
  Result<CliSettings> settings = LoadSettings(e.args, e.ctx);
  if (!settings.ok()) return fail(settings.error(), kExitUsage);
  auto warn = [&](const std::vector<std::string>& warnings) {
    for (const std::string& w : warnings) {
      // A server that did not start is in the listing itself.
      if (w.find("failed to start") == std::string::npos) {
        e.err << "agentloop: warning: " << w << "\n";
      }
    }
  };
  warn(settings->loaded.warnings);
  engine::WiringContext wctx = engine::MakeWiringContext(e.ctx.env);
  wctx.start_mcp_servers = true;
  // A `required` server that does not start fails the wiring; list it as
  // failed rather than failing the listing.
  SessionOptions options = settings->session;
  for (McpServerSpec& s : options.mcp_servers) s.required = false;
  Result<engine::WiredTools> tools = engine::WireTools(options, wctx);
  if (!tools.ok()) return fail(tools.error(), kExitFailed);
  warn(tools->warnings);
  std::vector<McpServerState> states;
  for (const mcp::ServerStatus& s : tools->mcp_servers) states.push_back(mcp::CurrentState(s));
  if (json) {
    Json arr = Json::array();
    for (const McpServerState& s : states) arr.push_back(mcp::McpServerStateToJson(s));
    e.out << DumpJson(Json{{"servers", std::move(arr)}}) << "\n";
  } else {
    e.out << FormatMcpServers(states);
  }
  for (const McpServerState& s : states) {
    if (s.state == "failed") return kExitFailed;
  }
  return kExitOk;
}

}  // namespace agentloop::cli
