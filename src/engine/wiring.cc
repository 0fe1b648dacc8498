#include "engine/wiring.h"

#include "config/config.h"
#include "engine/ask_user.h"
#include "engine/system_prompt.h"
#include "env/process.h"
#include "learning/learning_tools.h"
#include "learning/memory_store.h"
#include "learning/proposals.h"
#include "learning/skills.h"
#include "learning/usage.h"
#include "tools/builtin.h"

namespace agentloop::engine {
namespace {

constexpr size_t kMemoryIndexChars = 2000;

}  // namespace

WiringContext MakeWiringContext(const EnvMap& env, std::filesystem::path data_dir) {
  WiringContext ctx;
  ctx.env = env;
  if (data_dir.empty()) {
    if (auto dir = DefaultDataDir(env); dir.ok()) data_dir = *dir;
  }
  ctx.data_dir = std::move(data_dir);
  if (auto dir = UserConfigDir(env); dir.ok()) ctx.config_dir = *dir;
  return ctx;
}

Result<WiredTools> WireTools(const SessionOptions& spec, const WiringContext& ctx) {
  WiredTools out;
  BuiltinToolOptions tool_opts;
  tool_opts.sandbox = spec.sandbox;
  tool_opts.network = spec.sandbox_network;
  tool_opts.sandbox_fallback = spec.sandbox_fallback;
  tool_opts.bash_in_read_only = IsReadOnly(spec.command);
  tool_opts.env_pass = spec.env_pass;
  tool_opts.env_set = spec.env_set;
  tool_opts.bash_default_timeout_ms = spec.bash_timeout_ms;
  // What a sandboxed command never sees: the user's configuration and the
  // data directory (the store, the trust record, a server's secrets).
  for (const auto* dir : {&ctx.config_dir, &ctx.data_dir}) {
    if (!dir->empty()) tool_opts.hidden_paths.push_back(dir->string());
  }
  for (const auto& p : ctx.hidden_paths) tool_opts.hidden_paths.push_back(p.string());
  RegisterBuiltinTools(out.registry, tool_opts);
  out.todo = std::make_shared<todo::TodoTool>();
  out.registry.Add(out.todo);
  out.registry.Add(MakeAskUserTool());
  // Learning: memory and skill tools (usage counts and the reflector are
  // hooks).
  learning::LearningDirs dirs =
      learning::MakeLearningDirs(ctx.data_dir, ctx.config_dir, spec.workspace);
  if (ctx.user_scope_tenant) {
    AL_RETURN_IF_ERROR(learning::UseTenantUserScope(dirs, ctx.data_dir, *ctx.user_scope_tenant));
  }
  std::vector<std::string> dropped_dirs;
  learning::ConfineWorkspaceDirs(dirs, spec.workspace, &dropped_dirs);
  for (auto& d : dropped_dirs) out.warnings.push_back("learning: " + d);
  for (auto& t : learning::MakeLearningTools(dirs)) out.registry.Add(t);
  out.learning_dirs = dirs;
  std::vector<std::string> dropped;
  out.extra_read_roots =
      learning::SafeExtraReadRoots(dirs, spec.workspace, ctx.config_dir, ctx.data_dir, &dropped);
  for (auto& d : dropped) out.warnings.push_back("skills: " + d);

  // Extra tools come last and never replace one of the engine's: a tool
  // named "bash" from an embedder would otherwise run under bash's rules.
  for (size_t i = 0; i < spec.extensions.tools.size(); ++i) {
    const std::shared_ptr<Tool>& t = spec.extensions.tools[i];
    if (!t) {
      return InvalidArgument("extensions.tools[" + std::to_string(i) + "] is null");
    }
    const std::string& name = t->spec().name;
    if (name.empty()) {
      return InvalidArgument("extensions.tools[" + std::to_string(i) + "] has no name");
    }
    if (out.registry.Find(name) != nullptr) {
      return InvalidArgument("extensions.tools[" + std::to_string(i) + "]: a tool named '" + name +
                             "' is already offered; choose another name");
    }
    out.registry.Add(t);
  }

  if (ctx.start_mcp_servers && !spec.mcp_servers.empty()) {
    mcp::LaunchContext launch;
    launch.workspace = spec.workspace;
    // bash's environment: the same scrubbing, the same passes and values.
    std::vector<std::string> base;
    for (const auto& [name, value] : ctx.env) base.push_back(name + "=" + value);
    EnvPolicy policy;
    policy.remove = spec.env_remove;
    policy.pass = spec.env_pass;
    policy.set = spec.env_set;
    launch.base_env = ChildEnvironment(base, policy);
    launch.sandbox = IsReadOnly(spec.command) && spec.sandbox != SandboxMode::kOff
                         ? SandboxMode::kReadOnly
                         : spec.sandbox;
    launch.network = spec.sandbox_network;
    launch.sandbox_fallback = spec.sandbox_fallback;
    launch.hidden_paths = tool_opts.hidden_paths;
    launch.token_env = ctx.env;
    AL_ASSIGN_OR_RETURN(mcp::StartedServers started, mcp::StartServers(spec.mcp_servers, launch));
    for (auto& w : started.warnings) out.warnings.push_back(std::move(w));
    for (auto& t : started.tools) {
      if (out.registry.Find(t->spec().name) != nullptr) {
        out.warnings.push_back("mcp: tool " + t->spec().name +
                               " is left out: a tool of that name is already offered");
        continue;
      }
      out.registry.Add(t);
    }
    out.mcp_servers = std::move(started.servers);
  }
  return out;
}

Result<WiredPolicy> WirePolicy(const SessionOptions& spec, const ToolRegistry& registry,
                               const WiringContext& ctx) {
  WiredPolicy out;
  std::vector<permissions::RuleSource> sources;
  auto add = [&](const std::vector<SourcedRule>& rules, Decision d) {
    for (const SourcedRule& r : rules) {
      permissions::RuleSource src;
      src.source = r.source;
      if (d == Decision::kAllow) src.allow.push_back(r.rule);
      if (d == Decision::kAsk) src.ask.push_back(r.rule);
      if (d == Decision::kDeny) src.deny.push_back(r.rule);
      sources.push_back(std::move(src));
    }
  };
  add(spec.deny, Decision::kDeny);
  add(spec.ask, Decision::kAsk);
  add(spec.allow, Decision::kAllow);
  permissions::ParseOptions parse_opts;
  parse_opts.tools = registry.SpecList();
  AL_ASSIGN_OR_RETURN(permissions::RuleSet rules, permissions::ParseRules(sources, parse_opts));
  for (const auto& w : rules.warnings) out.warnings.push_back("permissions: " + w);
  permissions::PolicyOptions popts;
  popts.workspace = spec.workspace;
  popts.home = EnvValue(ctx.env, "HOME");
  if (spec.default_mutating) popts.default_mutating = *spec.default_mutating;
  if (spec.default_read_only) popts.default_read_only = *spec.default_read_only;
  popts.read_only_command = IsReadOnly(spec.command);
  // The user's configuration and the data directory (sessions, memory, the
  // trusted workspaces) are the engine's own: writes there are always asked.
  if (!ctx.config_dir.empty()) popts.protected_roots.push_back(ctx.config_dir);
  if (!ctx.data_dir.empty()) popts.protected_roots.push_back(ctx.data_dir);
  out.rules = std::make_shared<permissions::RulesPolicy>(std::move(rules), popts);
  return out;
}

Result<WiredHooks> WireHooks(const SessionOptions& spec, const WiredTools& tools,
                             std::shared_ptr<ModelProvider> provider, const WiringContext& ctx,
                             HookSinks sinks) {
  WiredHooks out;
  out.all.push_back(std::make_shared<todo::TodoReplayHook>(tools.todo));
  if (spec.todo_loop) {
    todo::TodoLoopOptions topts;
    topts.config.max_rounds = spec.todo_max_rounds;
    topts.config.max_strikes = spec.todo_max_strikes;
    topts.config.inject_state = spec.todo_inject_state;
    topts.config.max_injected_tasks = spec.todo_max_injected_tasks;
    if (!ctx.config_dir.empty()) topts.kill_switch_global = ctx.config_dir / "todo-loop-off";
    topts.notify = std::move(sinks.notify);
    out.todo_loop = std::make_shared<todo::TodoLoopHook>(std::move(topts));
    out.all.push_back(out.todo_loop);
  }
  out.all.push_back(
      std::make_shared<learning::UsageHook>(std::make_shared<learning::UsageTracker>()));
  if (spec.reflector) {
    learning::ReflectorOptions ropts;
    ropts.provider = std::move(provider);
    ropts.model = spec.model;
    ropts.proposals = std::make_shared<learning::ProposalStore>(tools.learning_dirs.proposals);
    out.reflector = std::make_shared<learning::ReflectorHook>(std::move(ropts));
    out.all.push_back(out.reflector);
  }
  for (size_t i = 0; i < spec.extensions.hooks.size(); ++i) {
    if (!spec.extensions.hooks[i]) {
      return InvalidArgument("extensions.hooks[" + std::to_string(i) + "] is null");
    }
    out.all.push_back(spec.extensions.hooks[i]);
  }
  return out;
}

std::string WireSystemPrompt(const SessionOptions& spec, const learning::LearningDirs& dirs,
                             const std::vector<mcp::ServerStatus>& mcp) {
  SystemPromptParts parts;
  parts.base_override = spec.system_prompt;
  parts.workspace = spec.workspace;
  parts.command = spec.command;
  parts.extra_sections.push_back(
      learning::MemoryStore(dirs.user_memory, dirs.workspace_memory).Index(kMemoryIndexChars));
  parts.extra_sections.push_back(
      learning::SkillStore(dirs.user_skills, dirs.workspace_skills).Index());
  std::string servers;
  for (const mcp::ServerStatus& s : mcp) {
    if (s.state != "ready" || s.instructions.empty()) continue;
    std::string text = s.instructions;
    if (text.size() > kMcpInstructionsChars) {
      // Cut at a UTF-8 boundary.
      size_t cut = kMcpInstructionsChars;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
      text = text.substr(0, cut) + " [cut]";
    }
    servers += "\n\nInstructions of MCP server '" + s.name + "' (its tools are mcp__" + s.name +
               "__*; the server's own words, not the user's):\n" + text;
  }
  if (!servers.empty()) parts.extra_sections.push_back("# MCP servers" + servers);
  return BuildSystemPrompt(parts);
}

}  // namespace agentloop::engine
