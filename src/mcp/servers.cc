#include "mcp/servers.h"

#include <algorithm>
#include <future>
#include <set>

#include "env/process.h"
#include "mcp/http_transport.h"
#include "mcp/stdio_transport.h"
#include "mcp/tool.h"
#include "tools/tools.h"

namespace agentloop::mcp {
namespace {

constexpr std::chrono::milliseconds kMaxToolTime{600000};

bool Listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string TransportName(const McpServerSpec& spec) {
  return spec.command.empty() ? "http" : "stdio";
}

}  // namespace

Result<std::unique_ptr<Transport>> MakeTransport(const McpServerSpec& spec,
                                                 const LaunchContext& ctx) {
  if (spec.command.empty()) {
    HttpTransportOptions h;
    h.name = spec.name;
    h.url = spec.url;
    h.http = ctx.http;
    if (!spec.bearer_token_env_var.empty()) {
      h.bearer_token = EnvValue(ctx.token_env, spec.bearer_token_env_var);
      if (h.bearer_token.empty()) {
        return FailedPrecondition("MCP server '" + spec.name + "': the variable " +
                                  spec.bearer_token_env_var +
                                  " (bearer_token_env_var) is not set or empty");
      }
    }
    return std::unique_ptr<Transport>(std::make_unique<StreamableHttpTransport>(std::move(h)));
  }
  StdioOptions o;
  o.name = spec.name;
  o.argv.push_back(spec.command);
  o.argv.insert(o.argv.end(), spec.args.begin(), spec.args.end());
  o.cwd = ctx.workspace.string();
  EnvPolicy policy;
  policy.set = spec.env;
  o.env = ChildEnvironment(ctx.base_env, policy);
  if (ctx.sandbox != SandboxMode::kOff) {
    std::string why = tools::SandboxUnavailableReason();
    if (!why.empty()) {
      if (ctx.sandbox_fallback == SandboxFallback::kRefuse) {
        return FailedPrecondition("MCP server '" + spec.name + "' is not started: the sandbox '" +
                                  std::string(SandboxModeName(ctx.sandbox)) +
                                  "' is configured and " + why);
      }
    } else {
      std::string bwrap = FindExecutable("bwrap");
      // Inside the sandbox bubblewrap looks the program up itself; give it
      // the path the server's PATH finds.
      std::string program = FindExecutableIn(spec.command, o.env);
      if (program.empty()) program = spec.command;
      std::vector<std::string> inner = {program};
      inner.insert(inner.end(), spec.args.begin(), spec.args.end());
      o.argv =
          tools::SandboxedArgv(bwrap, ctx.sandbox, ctx.network, o.cwd, inner, ctx.hidden_paths);
      // Not --die-with-parent: its "parent" is the thread that spawned
      // bubblewrap (PR_SET_PDEATHSIG), and servers are started on threads
      // that end once the handshake is over. A server outlives nothing it
      // should: it exits when its stdin closes (Close, or this process
      // ending), and the PID namespace takes its children with it.
      o.argv.erase(std::remove(o.argv.begin(), o.argv.end(), "--die-with-parent"), o.argv.end());
    }
  }
  if (ctx.on_stderr) {
    o.on_stderr = [cb = ctx.on_stderr, name = spec.name](const std::string& line) {
      cb(name, line);
    };
  }
  return std::unique_ptr<Transport>(std::make_unique<StdioTransport>(std::move(o)));
}

McpServerState CurrentState(const ServerStatus& status) {
  McpServerState s;
  s.name = status.name;
  s.transport = status.transport;
  s.state = status.state;
  s.error = status.error;
  s.protocol_version = status.protocol_version;
  if (status.server_info.is_object()) {
    const Json& i = status.server_info;
    if (i.contains("name") && i["name"].is_string()) s.server_name = i["name"].get<std::string>();
    if (i.contains("version") && i["version"].is_string()) {
      s.server_version = i["version"].get<std::string>();
    }
  }
  s.tools = status.tools;
  if (status.client && s.state == "ready") {
    Status health = status.client->health();
    if (!health.ok()) {
      s.state = "disconnected";
      s.error = health.message();
    }
  }
  return s;
}

McpServerState StoppedState(const McpServerSpec& spec) {
  McpServerState s;
  s.name = spec.name;
  s.transport = TransportName(spec);
  s.state = spec.enabled ? "stopped" : "disabled";
  return s;
}

Json McpServerStateToJson(const McpServerState& s) {
  Json j = {{"name", s.name}, {"transport", s.transport}, {"state", s.state}};
  if (!s.error.empty()) j["error"] = s.error;
  if (!s.protocol_version.empty()) j["protocol_version"] = s.protocol_version;
  if (!s.server_name.empty() || !s.server_version.empty()) {
    j["server"] = {{"name", s.server_name}, {"version", s.server_version}};
  }
  j["tools"] = s.tools;
  return j;
}

Result<StartedServers> StartServers(const std::vector<McpServerSpec>& specs,
                                    const LaunchContext& ctx) {
  StartedServers out;
  struct Attempt {
    const McpServerSpec* spec;
    std::shared_ptr<McpClient> client;
    std::future<Status> started;
  };
  std::vector<Attempt> attempts;
  for (const McpServerSpec& spec : specs) {
    if (!spec.enabled) {
      attempts.push_back({&spec, nullptr, {}});
      continue;
    }
    auto transport = MakeTransport(spec, ctx);
    if (!transport.ok()) {
      attempts.push_back({&spec, nullptr, {}});
      std::promise<Status> failed;
      failed.set_value(transport.error());
      attempts.back().started = failed.get_future();
      continue;
    }
    auto client = std::make_shared<McpClient>(spec.name, std::move(*transport));
    auto timeout = std::chrono::milliseconds(spec.startup_timeout_ms);
    attempts.push_back({&spec, client, std::async(std::launch::async, [client, timeout] {
                          return client->Connect(timeout);
                        })});
  }
  std::set<std::string> names;
  for (Attempt& a : attempts) {
    const McpServerSpec& spec = *a.spec;
    ServerStatus st;
    st.name = spec.name;
    st.transport = TransportName(spec);
    if (!spec.enabled) {
      st.state = "disabled";
      out.servers.push_back(std::move(st));
      continue;
    }
    Status s = a.started.get();
    if (!s.ok()) {
      st.state = "failed";
      st.error = s.message();
      if (a.client) a.client->Shutdown();
      if (spec.required) {
        return FailedPrecondition("the required MCP server '" + spec.name +
                                  "' did not start: " + s.message());
      }
      out.warnings.push_back("mcp: server '" + spec.name + "' failed to start: " + s.message());
      out.servers.push_back(std::move(st));
      continue;
    }
    st.state = "ready";
    st.protocol_version = a.client->protocol_version();
    st.server_info = a.client->server_info();
    st.instructions = a.client->instructions();
    st.client = a.client;
    McpToolOptions topts;
    topts.server = spec.name;
    topts.trusted = spec.trusted;
    topts.timeout = std::chrono::milliseconds(spec.tool_timeout_ms);
    topts.max_timeout = std::max(topts.timeout, kMaxToolTime);
    topts.output_cap_chars = ctx.output_cap_chars;
    for (const ServerTool& t : a.client->tools()) {
      if (!spec.enabled_tools.empty() && !Listed(spec.enabled_tools, t.name)) continue;
      if (Listed(spec.disabled_tools, t.name)) continue;
      auto tool = std::make_shared<McpTool>(a.client, t, topts);
      const std::string& qualified = tool->spec().name;
      if (!names.insert(qualified).second) {
        out.warnings.push_back("mcp: server '" + spec.name + "': tool '" + t.name +
                               "' is left out: its name " + qualified +
                               " is already taken by another MCP tool");
        continue;
      }
      st.tools.push_back(qualified);
      out.tools.push_back(std::move(tool));
    }
    out.clients.push_back(a.client);
    out.servers.push_back(std::move(st));
  }
  return out;
}

}  // namespace agentloop::mcp
