// `agentloop serve`: the agents of the configuration directory behind HTTP
// (server/server.h, docs/server.md). With no agent defined, the settings of
// this invocation (configuration files, flags, the current directory as
// workspace) are served as the agent "default".
#include <iostream>

#include <boost/asio/io_context.hpp>

#include "agentloop/store.h"

#include "base/strings.h"
#include "commands.h"
#include "config/config.h"
#include "config/trust.h"
#include "engine/agents.h"
#include "engine/options_from_config.h"
#include "server/secrets.h"
#include "server/server.h"
#include "server/tool_isolation.h"
#include "settings.h"

namespace agentloop::cli {
namespace {

namespace fs = std::filesystem;

// A served session never asks a terminal: an `ask` pauses the turn for a
// decision over HTTP. A webhook approver becomes the server's notifications
// of the agent (with links that decide), sent once the pause is stored.
void ForServing(SessionOptions& o) {
  o.interactive = false;
  if (o.approver != ApproverMode::kNone) o.approver = ApproverMode::kDurable;
}

// The agent's webhook from its approver settings (approver.kind = "webhook").
Result<server::AgentSpec::Webhook> WebhookOf(const SessionOptions& o) {
  server::AgentSpec::Webhook w;
  if (o.approver != ApproverMode::kWebhook) return w;
  if (o.webhook_secret.empty()) {
    return InvalidArgument("approver.kind is webhook but its secret is empty: set the variable " +
                           (o.webhook_secret_env.empty()
                                ? std::string("that approver.secret_env names")
                                : o.webhook_secret_env) +
                           " (notifications are always signed)");
  }
  w.url = o.webhook_url;
  w.secret = o.webhook_secret;
  return w;
}

// The agent's [[notify]] channels (docs/notifications.md), with the secrets
// their variables hold. Errors: kInvalidArgument naming an unset variable.
Result<std::vector<server::NotifyChannel>> ChannelsOf(const Config& c, const EnvMap& env) {
  std::vector<server::NotifyChannel> out;
  for (size_t i = 0; i < c.notify.size(); ++i) {
    const NotifyConfig& n = c.notify[i];
    auto secret = [&](const std::string& var, const char* key) -> Result<std::string> {
      if (var.empty()) return std::string();
      std::string v = EnvValue(env, var);
      if (v.empty()) {
        return InvalidArgument(n.origin.ToString() + ": [[notify]] " + key + " names " + var +
                               ", which is not set");
      }
      return v;
    };
    server::NotifyChannel ch;
    ch.key = n.channel + std::to_string(i);
    ch.kind = n.channel;
    ch.events.insert(n.events.begin(), n.events.end());
    if (n.channel == "webhook") {
      ch.url = n.url;
      AL_ASSIGN_OR_RETURN(ch.secret, secret(n.secret_env, "secret_env"));
    } else if (n.channel == "email") {
      ch.email.smtp_url = n.smtp_url;
      ch.email.tls_none = n.tls == "none";
      ch.email.user = n.smtp_user;
      AL_ASSIGN_OR_RETURN(ch.email.password, secret(n.smtp_password_env, "smtp_password_env"));
      ch.email.from = n.from;
      ch.email.to = n.to;
      ch.email.ca_file = n.ca_file;
      ch.email.timeout = std::chrono::seconds(n.timeout_s);
    } else {
      AL_ASSIGN_OR_RETURN(ch.slack.bot_token, secret(n.bot_token_env, "bot_token_env"));
      ch.slack.channel = n.slack_channel;
      if (!n.api_base_url.empty()) ch.slack.api_base_url = n.api_base_url;
      while (!ch.slack.api_base_url.empty() && ch.slack.api_base_url.back() == '/') {
        ch.slack.api_base_url.pop_back();
      }
      ch.slack.webhook_url = n.webhook_url;
      AL_ASSIGN_OR_RETURN(ch.slack.signing_secret,
                          secret(n.signing_secret_env, "signing_secret_env"));
    }
    out.push_back(std::move(ch));
  }
  return out;
}

// The agent `a` (a root of workspaces) as tenant `tenant` sees it: its root
// is the tenant's folder of a's root, made when create_workspace allows it.
// That folder must be a real directory (a link would let one tenant's
// folder be another's).
Result<engine::AgentDefinition> TenantRoot(const engine::AgentDefinition& a,
                                           const std::string& tenant) {
  if (Status named = ValidateTenantName(tenant); !named.ok()) return named;
  engine::AgentDefinition own = a;
  own.workspace = a.workspace / tenant;
  std::error_code ec;
  fs::file_status st = fs::symlink_status(own.workspace, ec);
  if (!fs::exists(st) && a.create_workspace) {
    fs::create_directory(own.workspace, ec);
    st = fs::symlink_status(own.workspace, ec);
  }
  if (!fs::exists(st)) {
    return InvalidArgument("agent '" + a.name + "': the folder of tenant '" + tenant + "', " +
                           own.workspace.string() +
                           ", does not exist (agent.create_workspace = true creates it)");
  }
  if (fs::is_symlink(st) || !fs::is_directory(st)) {
    return FailedPrecondition("agent '" + a.name + "': " + own.workspace.string() +
                              " must be a folder, not a link or a file");
  }
  return own;
}

}  // namespace

int CmdServe(const CommandEnv& e) {
  auto fail = [&](const Status& s) {
    e.err << "agentloop: " << s.message() << "\n";
    return s.code() == Code::kInvalidArgument ? kExitUsage : kExitFailed;
  };
  Result<CliSettings> settings = LoadSettings(e.args, e.ctx);
  if (!settings.ok()) return fail(settings.error());
  for (const std::string& w : settings->loaded.warnings) {
    e.err << "agentloop: warning: " << w << "\n";
  }
  const Config& c = settings->loaded.config;

  server::ServerOptions so;
  so.listen = c.server.listen.value;
  for (const auto& t : c.server.tokens) {
    Result<server::TokenGrant> g = server::ParseTokenGrant(t.value);
    if (!g.ok()) {
      return fail(
          InvalidArgument("server.tokens (" + t.origin.ToString() + "): " + g.error().message()));
    }
    so.tokens.push_back(std::move(*g));
  }
  // Secrets live in the data directory, readable only by the user:
  // the console's cookie key, and the token used when none is configured.
  Result<fs::path> data_dir = DefaultDataDir(e.ctx.env);
  if (!data_dir.ok()) return fail(data_dir.error());
  const fs::path token_file = *data_dir / server::kServerTokenFile;
  std::string generated_token;
  if (e.args.no_auth) {
    if (!so.tokens.empty()) {
      return fail(InvalidArgument(
          "--no-auth and server.tokens exclude each other: remove one (server.tokens from " +
          c.server.tokens.front().origin.ToString() + ")"));
    }
    so.no_auth = true;
  } else if (so.tokens.empty()) {
    // No token configured: one generated and kept for the next start,
    // for the tenant "default" with every scope.
    Result<std::string> token = server::LoadOrCreateSecret(token_file);
    if (!token.ok()) return fail(token.error().WithContext("the server's token"));
    generated_token = *token;
    so.tokens.push_back(
        {Sha256Hex(generated_token), "default",
         server::kScopeRead | server::kScopeWrite | server::kScopeApprove | server::kScopeAdmin});
  }
  const fs::path cookie_file = *data_dir / server::kCookieSecretFile;
  Result<std::string> cookie_secret = e.args.rotate_cookie_secret
                                          ? server::RotateSecret(cookie_file)
                                          : server::LoadOrCreateSecret(cookie_file);
  if (!cookie_secret.ok()) {
    return fail(cookie_secret.error().WithContext("the console's cookie secret"));
  }
  so.cookie_secret = std::move(*cookie_secret);
  for (const auto& o : c.server.allowed_origins) so.allowed_origins.push_back(o.value);
  so.public_url = c.server.public_url.value;
  if (!so.public_url.empty() && so.public_url.rfind("http://", 0) != 0 &&
      so.public_url.rfind("https://", 0) != 0) {
    return fail(InvalidArgument("server.public_url (" + c.server.public_url.origin.ToString() +
                                ") must start with http:// or https://, e.g. "
                                "https://agents.example.com"));
  }
  so.link_ttl = std::chrono::seconds(c.server.link_ttl_s.value);
  so.notify_retry = std::chrono::seconds(c.server.notify_retry_s.value);
  so.worker_threads = static_cast<int>(c.server.worker_threads.value);
  so.max_queued_inputs = static_cast<int>(c.server.max_queued_inputs.value);

  Result<fs::path> config_dir = ConfigDirFor(e.args, e.ctx);
  if (!config_dir.ok()) return fail(config_dir.error());
  Result<std::vector<engine::AgentDefinition>> agents = engine::LoadAgents(*config_dir);
  if (!agents.ok()) return fail(agents.error());
  engine::MappingContext mapping = MappingContextFor(e.ctx);
  mapping.interactive = false;
  // What a served session's sandbox never shows (besides the data
  // directory): the server's configuration and every agent's workspace
  // root, so a session sees its own workspace and not its neighbours'.
  std::vector<fs::path> hidden = {*config_dir};
  for (const engine::AgentDefinition& a : *agents) {
    if (a.ok() && a.workspace_policy == engine::AgentWorkspacePolicy::kRoot) {
      hidden.push_back(a.workspace);
    }
  }
  for (const engine::AgentDefinition& a : *agents) {
    if (!a.ok()) {
      for (const std::string& p : a.problems) {
        e.err << "agentloop: agent '" << a.name << "' is not served: " << p << "\n";
      }
      continue;
    }
    Result<engine::AgentSettings> s =
        engine::AgentSessionOptions(a, BaseSources(e.args, e.ctx), mapping, "");
    if (!s.ok()) {
      e.err << "agentloop: agent '" << a.name << "' is not served: " << s.error().message() << "\n";
      continue;
    }
    server::AgentSpec spec;
    spec.name = a.name;
    spec.description = a.description;
    spec.is_default = a.is_default;
    spec.options = std::move(s->session);
    Result<server::AgentSpec::Webhook> hook = WebhookOf(spec.options);
    if (!hook.ok()) {
      e.err << "agentloop: agent '" << a.name << "' is not served: " << hook.error().message()
            << "\n";
      continue;
    }
    spec.webhook = std::move(*hook);
    Result<std::vector<server::NotifyChannel>> channels = ChannelsOf(s->loaded.config, e.ctx.env);
    if (!channels.ok()) {
      e.err << "agentloop: agent '" << a.name << "' is not served: " << channels.error().message()
            << "\n";
      continue;
    }
    spec.channels = std::move(*channels);
    ForServing(spec.options);
    if (a.workspace_policy == engine::AgentWorkspacePolicy::kRoot) {
      // Each tenant has its folder of the agent's root; a session may name
      // its subdirectory there.
      spec.for_workspace = [a, args = &e.args, ctx = &e.ctx, mapping](
                               const std::string& tenant,
                               const std::string& requested) -> Result<SessionOptions> {
        AL_ASSIGN_OR_RETURN(engine::AgentDefinition own, TenantRoot(a, tenant));
        AL_ASSIGN_OR_RETURN(
            engine::AgentSettings chosen,
            engine::AgentSessionOptions(own, BaseSources(*args, *ctx), mapping, requested));
        ForServing(chosen.session);
        return std::move(chosen.session);
      };
    }
    so.agents.push_back(std::move(spec));
  }
  if (so.agents.empty()) {
    if (!settings->provider_configured) {
      e.err << "agentloop: no agent to serve: define one in "
            << (engine::AgentsDir(*config_dir) / "NAME" / "agent.toml").string()
            << " (docs/agents.md), or configure a provider to serve this "
               "directory as the agent \"default\"\n";
      return kExitUsage;
    }
    server::AgentSpec spec;
    spec.name = "default";
    spec.description = "this invocation's settings, in " + settings->workspace.string();
    spec.options = settings->session;
    Result<server::AgentSpec::Webhook> hook = WebhookOf(spec.options);
    if (!hook.ok()) return fail(hook.error());
    spec.webhook = std::move(*hook);
    Result<std::vector<server::NotifyChannel>> channels =
        ChannelsOf(settings->loaded.config, e.ctx.env);
    if (!channels.ok()) return fail(channels.error());
    spec.channels = std::move(*channels);
    ForServing(spec.options);
    so.agents.push_back(std::move(spec));
  }
  // Several tenants: their tools must not run where they can read each other.
  if (Status isolated = server::CheckToolIsolation(so); !isolated.ok()) return fail(isolated);

  // One io_context for the server and every model stream (run by Run on
  // this thread); declared before the engine, which must not outlive it.
  boost::asio::io_context io(1);
  EngineOptions eo = engine::EngineOptionsFromConfig(settings->loaded.config, e.ctx.env);
  eo.io_context = &io;
  eo.sandbox_hidden = std::move(hidden);
  // Several tenants: what one's sessions remember (user-scope memories and
  // skills) stays that tenant's. One tenant keeps the user's own scope.
  eo.tenant_user_scopes = server::ServedTenants(so).size() > 1;
  // Every step thread and every request thread may wait on the store at
  // once, besides the lease heartbeat and the wake-up poller.
  eo.store_connections = 2 * so.worker_threads + 2;
  Result<std::unique_ptr<Engine>> engine = Engine::Create(std::move(eo));
  if (!engine.ok()) return fail(engine.error());
  Result<std::unique_ptr<server::Server>> srv = server::Server::Create(so, **engine, io);
  if (!srv.ok()) return fail(srv.error());
  std::string names;
  for (const auto& a : so.agents) names += (names.empty() ? "" : ", ") + a.name;
  std::string host = so.listen.substr(0, so.listen.rfind(':'));
  if (host.empty()) host = "127.0.0.1";
  const std::string base = "http://" + host + ":" + std::to_string((*srv)->port());
  e.err << "agentloop: serving " << names << " on " << base
        << (so.no_auth ? " (loopback only, no authentication)" : "") << "\n";
  if (so.no_auth) {
    e.err << "agentloop: warning: --no-auth: every local user and every web page this "
             "machine's browser opens may drive this server\n";
  } else if (!generated_token.empty()) {
    // Printed once per start, like Jupyter's: the console signs in with it.
    e.err << "agentloop: token in " << token_file.string() << " (tenant \"default\", every "
          << "scope); console: " << base << "/?token=" << generated_token << "\n";
  }
  if (e.args.rotate_cookie_secret) {
    e.err << "agentloop: new console cookie secret in " << cookie_file.string()
          << ": every console sign-in ended\n";
  }
  e.err.flush();
  Status run = (*srv)->Run();
  if (!run.ok()) {
    e.err << "agentloop: " << run.message() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace agentloop::cli
