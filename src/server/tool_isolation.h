// Whether a server may serve its agents' tools to all of its tenants.
//
// A tool that runs a process on the server's machine (bash, an MCP server
// over stdio) outside a sandbox can read whatever the server's user can:
// the store with every tenant's sessions, the configuration and its token
// table, the token and cookie secrets, the other tenants' workspaces. The
// HTTP layer separates tenants; only the sandbox separates their tools. So
// with more than one tenant, every served agent that offers such a tool
// must confine it: `tools.sandbox` "read-only" or "workspace-write" with
// `tools.sandbox_fallback` "refuse" (with "warn" its commands would run
// unsandboxed where bubblewrap cannot run).
//
// Thread-safety: a pure function.
#pragma once

#include <set>
#include <string>

#include "agentloop/status.h"

#include "server/server.h"

namespace agentloop::server {

// The tenants `options` serves: its tokens' tenants ("default" with
// `no_auth`). With two or more, `agentloop serve` also gives each its own
// user scope of memories and skills (EngineOptions::tenant_user_scopes).
std::set<std::string> ServedTenants(const ServerOptions& options);

// OK when `options` serves one tenant (one tenant name among its tokens, or
// `no_auth`), or when no agent runs a local process outside a sandbox.
// Errors: kInvalidArgument naming the agents, the tenants and the fix
// (enable the sandbox, or serve each tenant from its own server).
Status CheckToolIsolation(const ServerOptions& options);

}  // namespace agentloop::server
