#include "server/tool_isolation.h"

#include <set>
#include <string>
#include <vector>

namespace agentloop::server {
namespace {

// The agent offers bash: no deny rule takes the whole tool away.
bool OffersBash(const SessionOptions& o) {
  for (const SourcedRule& r : o.deny) {
    if (r.rule == "bash" || r.rule == "*") return false;
  }
  return true;
}

// What of the agent runs on this machine outside a sandbox ("bash", "MCP
// server 'x'"); empty when nothing does.
std::vector<std::string> UnconfinedTools(const SessionOptions& o) {
  std::vector<std::string> out;
  const bool confined =
      o.sandbox != SandboxMode::kOff && o.sandbox_fallback == SandboxFallback::kRefuse;
  if (confined) return out;
  if (OffersBash(o)) out.emplace_back("bash");
  for (const McpServerSpec& m : o.mcp_servers) {
    // A server reached over HTTP runs elsewhere; one over stdio runs here.
    if (m.enabled && !m.command.empty()) out.push_back("MCP server '" + m.name + "'");
  }
  return out;
}

std::string JoinQuoted(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

std::set<std::string> ServedTenants(const ServerOptions& options) {
  std::set<std::string> tenants;
  if (options.no_auth) tenants.insert("default");
  for (const TokenGrant& g : options.tokens) tenants.insert(g.tenant);
  return tenants;
}

Status CheckToolIsolation(const ServerOptions& options) {
  const std::set<std::string> tenants = ServedTenants(options);
  if (tenants.size() < 2) return Status::Ok();
  std::string agents;
  for (const AgentSpec& a : options.agents) {
    std::vector<std::string> tools = UnconfinedTools(a.options);
    if (tools.empty()) continue;
    std::string what;
    for (const std::string& t : tools) what += (what.empty() ? "" : ", ") + t;
    agents += (agents.empty() ? "" : "; ") + ("agent '" + a.name + "' (" + what + ")");
  }
  if (agents.empty()) return Status::Ok();
  return InvalidArgument(
      "the server has " + std::to_string(tenants.size()) + " tenants (" + JoinQuoted(tenants) +
      ") and runs tools without a sandbox: " + agents +
      ". Such a tool can read what this server's user can: every tenant's sessions, files and "
      "the server's secrets. Set tools.sandbox = \"workspace-write\" (or \"read-only\") with "
      "tools.sandbox_fallback = \"refuse\" in each of these agents' configuration, deny the tool "
      "(permissions.deny = [\"bash\"]), or serve each tenant from a server of its own "
      "(docs/security.md)");
}

}  // namespace agentloop::server
