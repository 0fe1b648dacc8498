#include "server/tool_isolation.h"

#include <gtest/gtest.h>

namespace agentloop::server {
namespace {

AgentSpec Agent(std::string name, SandboxMode sandbox) {
  AgentSpec a;
  a.name = std::move(name);
  a.options.sandbox = sandbox;
  return a;
}

ServerOptions TwoTenants() {
  ServerOptions o;
  o.tokens = {{"aa", "acme", kScopeRead}, {"bb", "other", kScopeRead}};
  return o;
}

TEST(ToolIsolation, BashWithoutASandboxIsRefusedForTwoTenantsNamingAgentsTenantsAndTheFix) {
  ServerOptions o = TwoTenants();
  o.agents = {Agent("writer", SandboxMode::kOff), Agent("boxed", SandboxMode::kWorkspaceWrite)};
  Status s = CheckToolIsolation(o);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("agent 'writer' (bash)"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("'boxed'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2 tenants ('acme', 'other')"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tools.sandbox = \"workspace-write\""), std::string::npos);
  EXPECT_NE(s.message().find("a server of its own"), std::string::npos);
}

TEST(ToolIsolation, OneTenantMayRunToolsUnsandboxed) {
  ServerOptions o;
  o.tokens = {{"aa", "acme", kScopeRead}, {"cc", "acme", kScopeAdmin}};
  o.agents = {Agent("writer", SandboxMode::kOff)};
  EXPECT_TRUE(CheckToolIsolation(o).ok());
  ServerOptions open;
  open.no_auth = true;
  open.agents = {Agent("writer", SandboxMode::kOff)};
  EXPECT_TRUE(CheckToolIsolation(open).ok());
}

TEST(ToolIsolation, ASandboxThatMayFallBackToNoneDoesNotCount) {
  ServerOptions o = TwoTenants();
  AgentSpec a = Agent("warned", SandboxMode::kWorkspaceWrite);
  a.options.sandbox_fallback = SandboxFallback::kWarn;
  o.agents = {a};
  EXPECT_EQ(CheckToolIsolation(o).code(), Code::kInvalidArgument);
  o.agents[0].options.sandbox_fallback = SandboxFallback::kRefuse;
  EXPECT_TRUE(CheckToolIsolation(o).ok());
  o.agents[0].options.sandbox = SandboxMode::kReadOnly;
  EXPECT_TRUE(CheckToolIsolation(o).ok());
}

TEST(ToolIsolation, AStdioMcpServerCountsAndAnHttpOneDoesNot) {
  ServerOptions o = TwoTenants();
  AgentSpec a = Agent("tools", SandboxMode::kOff);
  a.options.deny = {{"bash", "agent.toml:3"}};
  McpServerSpec remote;
  remote.name = "remote";
  remote.url = "https://mcp.example.com/mcp";
  a.options.mcp_servers = {remote};
  o.agents = {a};
  EXPECT_TRUE(CheckToolIsolation(o).ok()) << CheckToolIsolation(o).message();
  McpServerSpec local;
  local.name = "local";
  local.command = "node";
  o.agents[0].options.mcp_servers.push_back(local);
  Status s = CheckToolIsolation(o);
  ASSERT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("agent 'tools' (MCP server 'local')"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace agentloop::server
