#include "args.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "base/strings.h"

#ifndef AL_VERSION_STRING
#define AL_VERSION_STRING AL_VERSION
#endif
// Where `cmake --install` puts the documentation (apps/cli/CMakeLists.txt).
#ifndef AL_DOC_DIR
#define AL_DOC_DIR "PREFIX/share/doc/agentloop"
#endif

namespace agentloop::cli {
namespace {

using Mask = uint32_t;
constexpr Mask Bit(Subcommand s) { return Mask{1} << static_cast<int>(s); }

// Subcommands that run (or continue) a turn and print its result.
constexpr Mask kTurn = Bit(Subcommand::kRun) | Bit(Subcommand::kChat) | Bit(Subcommand::kResume) |
                       Bit(Subcommand::kApprove) | Bit(Subcommand::kDeny) |
                       Bit(Subcommand::kAnswer) | Bit(Subcommand::kCompact);
constexpr Mask kAll = ~Mask{0};
// Flags that shape the configuration are also accepted by `config show`
// (to see their effect) and rules/command by `permissions check`.
constexpr Mask kConfigured = kTurn | Bit(Subcommand::kConfig) | Bit(Subcommand::kAgents) |
                             Bit(Subcommand::kServe) | Bit(Subcommand::kMcp) |
                             Bit(Subcommand::kAcp);
constexpr Mask kRules = kConfigured | Bit(Subcommand::kPermissions);
constexpr Mask kOutput = kTurn | Bit(Subcommand::kSessions) | Bit(Subcommand::kConfig) |
                         Bit(Subcommand::kTrust) | Bit(Subcommand::kPending) |
                         Bit(Subcommand::kPermissions) | Bit(Subcommand::kAgents) |
                         Bit(Subcommand::kMemory) | Bit(Subcommand::kSkills) |
                         Bit(Subcommand::kProposals) | Bit(Subcommand::kMcp);

enum class FlagId {
  kConfig,  // maps to `config_key`
  kWorkspace,
  kSession,
  kContinue,
  kQuiet,
  kShowThinking,
  kAllWorkspaces,
  kTree,
  kOlderThan,
  kHelp,
  kVersion,
  kArgs,
  kReason,
  kFocus,
  kNoTodoLoop,
  kYolo,
  kAgent,
  kConfigFile,
  kNoAuth,
  kRotateCookieSecret,
};

enum class ValueCheck { kNone, kText, kPositiveInt, kChoice };

struct FlagSpec {
  std::string_view name;  // without the dashes
  char short_name;        // 0: none
  FlagId id;
  std::string_view config_key;  // FlagId::kConfig only
  ValueCheck value;             // kNone: a switch
  std::string_view choices;     // kChoice: '|'-separated
  std::string_view value_name;  // for the help text
  Mask accepted_by;
  std::string_view help;
};

// The one list of flags (order = help order).
constexpr std::array kFlags = {
    FlagSpec{"provider", 0, FlagId::kConfig, "provider.kind", ValueCheck::kChoice,
             "openai|anthropic|openai-responses|script", "NAME", kConfigured,
             "model API: openai, anthropic, openai-responses or script"},
    FlagSpec{"model", 'm', FlagId::kConfig, "provider.model", ValueCheck::kText, "", "NAME",
             kConfigured, "model name, e.g. gpt-4.1 or claude-sonnet-4-5"},
    FlagSpec{"base-url", 0, FlagId::kConfig, "provider.base_url", ValueCheck::kText, "", "URL",
             kConfigured, "API endpoint (OpenAI-compatible servers, proxies)"},
    FlagSpec{"listen", 0, FlagId::kConfig, "server.listen", ValueCheck::kText, "", "HOST:PORT",
             Bit(Subcommand::kServe), "address the server listens on (default 127.0.0.1:7878)"},
    FlagSpec{"no-auth", 0, FlagId::kNoAuth, "", ValueCheck::kNone, "", "", Bit(Subcommand::kServe),
             "serve without authentication (loopback only; any local user or page may drive it)"},
    FlagSpec{"rotate-cookie-secret", 0, FlagId::kRotateCookieSecret, "", ValueCheck::kNone, "", "",
             Bit(Subcommand::kServe),
             "sign the console's cookies with a new secret (signs out all)"},
    FlagSpec{"script", 0, FlagId::kConfig, "provider.script", ValueCheck::kText, "", "FILE",
             kConfigured, "script of the scripted provider (--provider script)"},
    FlagSpec{"command", 0, FlagId::kConfig, "command", ValueCheck::kChoice,
             "code|explain|fix|plan|build", "KIND", kRules,
             "code, explain, fix, plan or build (plan/explain are read-only)"},
    FlagSpec{"max-tool-calls", 0, FlagId::kConfig, "budget.max_tool_calls",
             ValueCheck::kPositiveInt, "", "N", kConfigured, "tool-call budget of a turn"},
    FlagSpec{"max-tokens", 0, FlagId::kConfig, "budget.max_tokens", ValueCheck::kPositiveInt, "",
             "N", kConfigured, "token budget of a turn"},
    FlagSpec{"max-turns", 0, FlagId::kConfig, "budget.max_turns", ValueCheck::kPositiveInt, "", "N",
             kConfigured, "model calls allowed in a turn"},
    FlagSpec{"agent", 0, FlagId::kAgent, "", ValueCheck::kText, "", "NAME",
             Bit(Subcommand::kRun) | Bit(Subcommand::kChat),
             "run the agent NAME of <config dir>/agents (docs/agents.md)"},
    FlagSpec{"config", 0, FlagId::kConfigFile, "", ValueCheck::kText, "", "FILE", kAll,
             "user config file (default: ~/.config/agentloop/config.toml); agents/ beside it"},
    FlagSpec{"workspace", 'C', FlagId::kWorkspace, "", ValueCheck::kText, "", "DIR", kAll,
             "workspace directory (default: the current directory)"},
    FlagSpec{"session", 0, FlagId::kSession, "", ValueCheck::kText, "", "ID",
             Bit(Subcommand::kRun) | Bit(Subcommand::kChat) | Bit(Subcommand::kPending),
             "continue this session (id or unique prefix)"},
    FlagSpec{"continue", 'c', FlagId::kContinue, "", ValueCheck::kNone, "", "",
             Bit(Subcommand::kRun) | Bit(Subcommand::kChat),
             "continue the newest session of the workspace"},
    FlagSpec{"output", 0, FlagId::kConfig, "output", ValueCheck::kChoice, "text|json|stream-json",
             "FORMAT", kOutput | Bit(Subcommand::kConfig), "text, json or stream-json"},
    FlagSpec{"system-prompt-file", 0, FlagId::kConfig, "system_prompt_file", ValueCheck::kText, "",
             "FILE", kConfigured, "replace the built-in system prompt"},
    FlagSpec{"allow", 0, FlagId::kConfig, "permissions.allow", ValueCheck::kText, "", "RULE",
             kRules, "allow tool calls matching RULE (repeatable; '*' = all)"},
    FlagSpec{"ask", 0, FlagId::kConfig, "permissions.ask", ValueCheck::kText, "", "RULE", kRules,
             "ask before tool calls matching RULE (repeatable)"},
    FlagSpec{"deny", 0, FlagId::kConfig, "permissions.deny", ValueCheck::kText, "", "RULE", kRules,
             "deny tool calls matching RULE (repeatable)"},
    FlagSpec{"yolo", 0, FlagId::kYolo, "permissions.allow", ValueCheck::kNone, "", "", kRules,
             "--allow '*': run tool calls without asking (deny rules, protected paths apply)"},
    FlagSpec{"sandbox", 0, FlagId::kConfig, "tools.sandbox", ValueCheck::kChoice,
             "off|read-only|workspace-write", "MODE", kConfigured,
             "bash sandbox: off, read-only or workspace-write (bubblewrap)"},
    FlagSpec{"no-todo-loop", 0, FlagId::kNoTodoLoop, "todo_loop.enabled", ValueCheck::kNone, "", "",
             kConfigured, "do not continue automatically on open todos"},
    FlagSpec{"args", 0, FlagId::kArgs, "", ValueCheck::kText, "", "JSON", Bit(Subcommand::kApprove),
             "approve with these (edited) arguments"},
    FlagSpec{"reason", 0, FlagId::kReason, "", ValueCheck::kText, "", "TEXT",
             Bit(Subcommand::kDeny), "why the call is denied (the model sees it)"},
    FlagSpec{"focus", 0, FlagId::kFocus, "", ValueCheck::kText, "", "TEXT",
             Bit(Subcommand::kCompact), "what the summary should keep in particular"},
    FlagSpec{"all", 0, FlagId::kAllWorkspaces, "", ValueCheck::kNone, "", "",
             Bit(Subcommand::kSessions) | Bit(Subcommand::kResume),
             "sessions list/prune, resume's picker: every workspace's sessions"},
    FlagSpec{"tree", 0, FlagId::kTree, "", ValueCheck::kNone, "", "", Bit(Subcommand::kSessions),
             "sessions show: the session and its subagents' sessions, with their cost"},
    FlagSpec{"older-than", 0, FlagId::kOlderThan, "", ValueCheck::kText, "", "AGE",
             Bit(Subcommand::kSessions), "sessions prune: sessions not updated for AGE (30d, 12h)"},
    FlagSpec{"show-thinking", 0, FlagId::kShowThinking, "", ValueCheck::kNone, "", "", kTurn,
             "show the model's thinking as it streams (default: one folded line)"},
    FlagSpec{"quiet", 'q', FlagId::kQuiet, "", ValueCheck::kNone, "", "", kAll,
             "no progress or summary on stderr"},
    FlagSpec{"help", 'h', FlagId::kHelp, "", ValueCheck::kNone, "", "", kAll, "show help"},
    FlagSpec{"version", 'V', FlagId::kVersion, "", ValueCheck::kNone, "", "", kAll,
             "print the version"},
};

struct SubcommandSpec {
  Subcommand id;
  std::string_view name;
  std::string_view synopsis;
  std::string_view summary;
};

constexpr std::array kSubcommands = {
    SubcommandSpec{Subcommand::kRun, "run", "run [FLAGS] PROMPT",
                   "run one turn (PROMPT - reads stdin)"},
    SubcommandSpec{Subcommand::kChat, "chat", "chat [FLAGS] [PROMPT]",
                   "interactive session, starting with PROMPT when given"},
    SubcommandSpec{Subcommand::kSessions, "sessions",
                   "sessions list [--all]|show ID|export ID|rm ID|prune --older-than AGE",
                   "stored sessions"},
    SubcommandSpec{Subcommand::kResume, "resume", "resume [ID [PROMPT]]",
                   "continue a stored session"},
    SubcommandSpec{Subcommand::kConfig, "config", "config show",
                   "merged configuration with provenance"},
    SubcommandSpec{Subcommand::kPending, "pending", "pending [--session ID]",
                   "approvals and questions that wait"},
    SubcommandSpec{Subcommand::kApprove, "approve", "approve ID [--args JSON]",
                   "approve a pending tool call and continue the turn"},
    SubcommandSpec{Subcommand::kDeny, "deny", "deny ID [--reason TEXT]",
                   "deny a pending tool call"},
    SubcommandSpec{Subcommand::kAnswer, "answer", "answer ID TEXT",
                   "answer a pending question and continue the turn"},
    SubcommandSpec{Subcommand::kPermissions, "permissions", "permissions check TOOL JSON_ARGS",
                   "explain the permission decision for a call"},
    SubcommandSpec{Subcommand::kProposals, "proposals", "proposals list|accept ID|reject ID",
                   "review what the reflector proposed to remember"},
    SubcommandSpec{Subcommand::kMemory, "memory", "memory list",
                   "saved memories with their use counts"},
    SubcommandSpec{Subcommand::kSkills, "skills", "skills list",
                   "available skills with their use counts"},
    SubcommandSpec{Subcommand::kTrust, "trust", "trust [DIR] | trust list | trust revoke [DIR]",
                   "read a workspace's .agentloop/config.toml in full (as it is now)"},
    SubcommandSpec{Subcommand::kAgents, "agents", "agents list | agents show NAME",
                   "the agents of the config directory (docs/agents.md)"},
    SubcommandSpec{
        Subcommand::kServe, "serve",
        "serve [--listen HOST:PORT] [--config FILE] [--no-auth] [--rotate-cookie-secret]",
        "serve the agents over HTTP (docs/server.md)"},
    SubcommandSpec{Subcommand::kStore, "store", "store migrate",
                   "apply the PostgreSQL store's schema migrations (store.url)"},
    SubcommandSpec{Subcommand::kMcp, "mcp", "mcp list",
                   "start the configured MCP servers and list their state and tools"},
    SubcommandSpec{Subcommand::kAcp, "acp", "acp [FLAGS]",
                   "be an Agent Client Protocol agent on stdio, for editors (docs/acp.md)"},
    SubcommandSpec{Subcommand::kHelp, "help", "help [SUBCOMMAND]", "show help"},
    SubcommandSpec{Subcommand::kCompact, "compact", "compact ID [--focus TEXT]",
                   "summarise a session's older history to free context"},
    SubcommandSpec{Subcommand::kCompletion, "completion", "completion bash|zsh|fish|man",
                   "shell completion script, or the man page (roff)"},
};

const SubcommandSpec* FindSubcommand(std::string_view name) {
  for (const SubcommandSpec& s : kSubcommands) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const FlagSpec* FindLong(std::string_view name) {
  for (const FlagSpec& f : kFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Flags and subcommands of other coding agents (Claude Code, Codex) that
// people type from habit, with agentloop's own.
struct PeerName {
  std::string_view theirs;
  std::string_view ours;
};
constexpr std::array kPeerFlags = {
    PeerName{"output-format", "--output text|json|stream-json"},
    PeerName{"dangerously-skip-permissions", "--yolo"},
    PeerName{"dangerously-bypass-approvals-and-sandbox", "--yolo"},
    PeerName{"full-auto", "--yolo"},
    PeerName{"permission-mode", "--command plan (read-only) or --allow/--deny rules"},
    PeerName{"allowedTools", "--allow RULE"},
    PeerName{"allowed-tools", "--allow RULE"},
    PeerName{"disallowedTools", "--deny RULE"},
    PeerName{"disallowed-tools", "--deny RULE"},
    PeerName{"cd", "-C/--workspace DIR"},
};
constexpr std::array kPeerSubcommands = {
    PeerName{"exec", "agentloop run PROMPT"},
    PeerName{"e", "agentloop run PROMPT"},
    PeerName{"continue", "agentloop -c (chat) or agentloop resume"},
    PeerName{"login", "an API key in OPENAI_API_KEY or ANTHROPIC_API_KEY (docs/providers.md)"},
};

// "unknown flag '--modle' (did you mean --model?)"
std::string UnknownFlag(std::string_view body) {
  for (const PeerName& p : kPeerFlags) {
    if (p.theirs == body) {
      return "unknown flag '--" + std::string(body) + "' (agentloop's is " + std::string(p.ours) +
             ")";
    }
  }
  std::vector<std::string_view> names;
  for (const FlagSpec& f : kFlags) names.push_back(f.name);
  names.emplace_back("print");
  names.emplace_back("resume");
  std::string msg = "unknown flag '--" + std::string(body) + "'";
  if (std::string hint = ClosestMatch(body, names, 3); !hint.empty()) {
    msg += " (did you mean --" + hint + "?)";
  }
  return msg;
}

std::string UnknownSubcommand(std::string_view name) {
  for (const PeerName& p : kPeerSubcommands) {
    if (p.theirs == name) {
      return "unknown subcommand '" + std::string(name) + "' (agentloop's is `" +
             std::string(p.ours) + "`)";
    }
  }
  std::vector<std::string_view> names;
  for (const SubcommandSpec& s : kSubcommands) names.push_back(s.name);
  std::string msg = "unknown subcommand '" + std::string(name) + "'";
  if (std::string hint = ClosestMatch(name, names, 3); !hint.empty()) {
    msg += " (did you mean `agentloop " + hint + "`?)";
  } else {
    msg += " (run `agentloop --help` for the list; `agentloop chat " + std::string(name) +
           "` starts a chat with it as the prompt)";
  }
  return msg;
}

// Whether the first word of a command line that names no subcommand is a
// prompt: it has more than one word. A single word is far more often a
// mistyped subcommand than a prompt, and a chat started by a typo costs a
// model call; `agentloop chat WORD` takes it as a prompt.
bool IsBarePrompt(std::string_view word) {
  return word.find_first_of(" \t\n") != std::string_view::npos;
}

const FlagSpec* FindShort(char c) {
  for (const FlagSpec& f : kFlags) {
    if (f.short_name != 0 && f.short_name == c) return &f;
  }
  return nullptr;
}

std::string DisplayName(const FlagSpec& f) { return "--" + std::string(f.name); }

bool InChoices(std::string_view choices, std::string_view v) {
  size_t start = 0;
  while (start <= choices.size()) {
    size_t bar = choices.find('|', start);
    std::string_view c =
        choices.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    if (c == v) return true;
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return false;
}

Status CheckValue(const FlagSpec& f, const std::string& v) {
  switch (f.value) {
    case ValueCheck::kNone:
    case ValueCheck::kText:
      return Status::Ok();
    case ValueCheck::kPositiveInt: {
      int64_t n = 0;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || ptr != v.data() + v.size() || n <= 0) {
        return InvalidArgument(DisplayName(f) + " needs a positive integer, got '" + v + "'");
      }
      return Status::Ok();
    }
    case ValueCheck::kChoice: {
      if (InChoices(f.choices, v)) return Status::Ok();
      std::string choices(f.choices);
      std::replace(choices.begin(), choices.end(), '|', ' ');
      return InvalidArgument(DisplayName(f) + " must be one of: " + choices + " (got '" + v + "')");
    }
  }
  return Status::Ok();
}

struct SeenFlag {
  const FlagSpec* spec;
  std::string value;
};

Status Apply(const SeenFlag& seen, CliArgs& args) {
  const FlagSpec& f = *seen.spec;
  switch (f.id) {
    case FlagId::kConfig:
      args.config_flags.push_back({std::string(f.config_key), seen.value, DisplayName(f)});
      break;
    case FlagId::kNoTodoLoop:
      args.config_flags.push_back({std::string(f.config_key), "false", DisplayName(f)});
      break;
    case FlagId::kYolo:
      args.config_flags.push_back({std::string(f.config_key), "*", DisplayName(f)});
      args.warnings.emplace_back(
          "--yolo: every tool call runs without asking, except where deny rules, protected "
          "paths (.git, .agentloop, AGENTS.md, ...) or plan mode stop or ask");
      break;
    case FlagId::kWorkspace:
      if (seen.value.empty()) return InvalidArgument("-C/--workspace needs a directory");
      args.workspace = seen.value;
      break;
    case FlagId::kSession:
      args.session = seen.value;
      break;
    case FlagId::kAgent:
      args.agent = seen.value;
      break;
    case FlagId::kConfigFile:
      if (seen.value.empty()) return InvalidArgument("--config needs a file");
      args.config_file = seen.value;
      break;
    case FlagId::kContinue:
      args.continue_latest = true;
      break;
    case FlagId::kShowThinking:
      args.show_thinking = true;
      break;
    case FlagId::kQuiet:
      args.quiet = true;
      break;
    case FlagId::kHelp:
      args.help = true;
      break;
    case FlagId::kVersion:
      args.version = true;
      break;
    case FlagId::kArgs:
      args.edited_args = seen.value;
      break;
    case FlagId::kFocus:
      args.focus = seen.value;
      break;
    case FlagId::kReason:
      args.reason = seen.value;
      break;
    case FlagId::kTree:
      args.tree = true;
      break;
    case FlagId::kNoAuth:
      args.no_auth = true;
      break;
    case FlagId::kRotateCookieSecret:
      args.rotate_cookie_secret = true;
      break;
    case FlagId::kAllWorkspaces:
      args.all = true;
      break;
    case FlagId::kOlderThan: {
      Result<std::chrono::milliseconds> age = ParseAge(seen.value);
      if (!age.ok()) return age.error();
      args.older_than = *age;
      break;
    }
  }
  return Status::Ok();
}

Status CheckPositionals(CliArgs& args) {
  const auto& p = args.positionals;
  auto need = [&](bool ok, std::string_view what) -> Status {
    if (ok) return Status::Ok();
    return InvalidArgument("usage: agentloop " + std::string(what));
  };
  switch (args.subcommand) {
    case Subcommand::kNone:
      return Status::Ok();
    case Subcommand::kRun:
      if (p.empty()) return InvalidArgument("run needs a PROMPT (use - to read it from stdin)");
      if (args.session && args.continue_latest) {
        return InvalidArgument("--session and --continue cannot be combined");
      }
      return Status::Ok();
    case Subcommand::kChat:
      if (args.session && args.continue_latest) {
        return InvalidArgument("--session and --continue cannot be combined");
      }
      return Status::Ok();  // words given: the first prompt (RunChat)
    case Subcommand::kSessions: {
      if (p.empty()) {
        return InvalidArgument(
            "usage: agentloop sessions list|show ID|export ID|rm ID|prune --older-than AGE");
      }
      const std::string& verb = p[0];
      if (verb == "list") return need(p.size() == 1, "sessions list [--all]");
      if (verb == "prune") {
        if (!args.older_than) {
          return InvalidArgument("sessions prune needs --older-than AGE (e.g. 30d)");
        }
        return need(p.size() == 1, "sessions prune --older-than AGE [--all]");
      }
      if (verb == "show" || verb == "export" || verb == "rm") {
        return need(p.size() == 2, "sessions " + verb + " ID");
      }
      return InvalidArgument("unknown sessions command '" + verb +
                             "' (expected list, show, export, rm or prune)");
    }
    case Subcommand::kResume:
      return Status::Ok();  // without an ID: a picker on a terminal (commands.cc)
    case Subcommand::kConfig:
      return need(p.size() == 1 && p[0] == "show", "config show");
    case Subcommand::kPending:
      return need(p.empty(), "pending [--session ID]");
    case Subcommand::kApprove:
      return need(p.size() == 1, "approve ID [--args JSON]");
    case Subcommand::kDeny:
      return need(p.size() == 1, "deny ID [--reason TEXT]");
    case Subcommand::kCompact:
      return need(p.size() == 1, "compact ID [--focus TEXT]");
    case Subcommand::kAnswer:
      return need(p.size() >= 2, "answer ID TEXT");
    case Subcommand::kPermissions:
      return need(p.size() == 3 && p[0] == "check", "permissions check TOOL JSON_ARGS");
    case Subcommand::kProposals:
      if (p.size() == 1 && p[0] == "list") return Status::Ok();
      if (p.size() == 2 && (p[0] == "accept" || p[0] == "reject")) return Status::Ok();
      return InvalidArgument("usage: agentloop proposals list|accept ID|reject ID");
    case Subcommand::kMemory:
      return need(p.size() == 1 && p[0] == "list", "memory list");
    case Subcommand::kSkills:
      return need(p.size() == 1 && p[0] == "list", "skills list");
    case Subcommand::kTrust:
      if (!p.empty() && p[0] == "list") return need(p.size() == 1, "trust list");
      if (!p.empty() && p[0] == "revoke") return need(p.size() <= 2, "trust revoke [DIR]");
      return need(p.size() <= 1, "trust [DIR] | trust list | trust revoke [DIR]");
    case Subcommand::kAgents:
      if (p.size() == 1 && p[0] == "list") return Status::Ok();
      return need(p.size() == 2 && p[0] == "show", "agents list | agents show NAME");
    case Subcommand::kCompletion:
      return need(
          p.size() == 1 && (p[0] == "bash" || p[0] == "zsh" || p[0] == "fish" || p[0] == "man"),
          "completion bash|zsh|fish|man");
    case Subcommand::kServe:
      return need(p.empty(), "serve [--listen HOST:PORT]");
    case Subcommand::kStore:
      return need(p.size() == 1 && p[0] == "migrate", "store migrate");
    case Subcommand::kMcp:
      return need(p.size() == 1 && p[0] == "list", "mcp list");
    case Subcommand::kAcp:
      return need(p.empty(), "acp [FLAGS] (the editor sends the prompts)");
    case Subcommand::kHelp:
      if (p.size() > 1) return InvalidArgument("usage: agentloop help [SUBCOMMAND]");
      if (p.size() == 1 && FindSubcommand(p[0]) == nullptr) {
        return InvalidArgument("unknown subcommand '" + p[0] + "'");
      }
      return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

namespace {

std::string Words(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

// Roff-escapes a line of text (backslashes, and a leading dot or quote).
std::string Roff(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

}  // namespace

Result<std::string> CompletionScript(std::string_view shell) {
  std::vector<std::string> subs;
  for (const SubcommandSpec& s : kSubcommands) subs.emplace_back(s.name);
  std::vector<std::string> flags;
  for (const FlagSpec& f : kFlags) flags.push_back("--" + std::string(f.name));
  // The shortcuts taken before a subcommand (ParseArgs).
  flags.insert(flags.end(), {"--print", "--resume", "-p", "-r"});
  if (shell == "bash") {
    std::string out =
        "# agentloop completion for bash: eval \"$(agentloop completion bash)\"\n"
        "_agentloop() {\n"
        "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
        "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
        "    COMPREPLY=($(compgen -W \"" +
        Words(subs) +
        "\" -- \"$cur\")); return\n"
        "  fi\n"
        "  case \"$prev\" in\n";
    for (const FlagSpec& f : kFlags) {
      if (f.value == ValueCheck::kChoice) {
        std::string choices(f.choices);
        std::replace(choices.begin(), choices.end(), '|', ' ');
        out += "    --" + std::string(f.name) + ") COMPREPLY=($(compgen -W \"" + choices +
               "\" -- \"$cur\")); return;;\n";
      } else if (f.value_name == "DIR") {
        out += "    --" + std::string(f.name) +
               (f.short_name ? std::string("|-") + f.short_name : "") +
               ") COMPREPLY=($(compgen -d -- \"$cur\")); return;;\n";
      } else if (f.value_name == "FILE") {
        out +=
            "    --" + std::string(f.name) + ") COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n";
      }
    }
    out +=
        "  esac\n"
        "  COMPREPLY=($(compgen -W \"" +
        Words(flags) +
        "\" -- \"$cur\"))\n"
        "}\n"
        "complete -F _agentloop agentloop\n";
    return out;
  }
  if (shell == "zsh") {
    std::string out =
        "#compdef agentloop\n"
        "# agentloop completion for zsh: agentloop completion zsh > \"${fpath[1]}/_agentloop\"\n"
        "_agentloop() {\n"
        "  local -a subcommands\n"
        "  subcommands=(\n";
    for (const SubcommandSpec& s : kSubcommands) {
      std::string summary(s.summary);
      std::replace(summary.begin(), summary.end(), '\'', ' ');
      out += "    '" + std::string(s.name) + ":" + summary + "'\n";
    }
    out += "  )\n  _arguments \\\n";
    for (const FlagSpec& f : kFlags) {
      std::string help(f.help);
      for (char& c : help) {
        if (c == '\'' || c == '[' || c == ']' || c == ':') c = ' ';
      }
      std::string arg;
      if (f.value == ValueCheck::kChoice) {
        std::string choices(f.choices);
        std::replace(choices.begin(), choices.end(), '|', ' ');
        arg = ":" + std::string(f.value_name) + ":(" + choices + ")";
      } else if (f.value_name == "DIR") {
        arg = ":" + std::string(f.value_name) + ":_files -/";
      } else if (f.value_name == "FILE") {
        arg = ":" + std::string(f.value_name) + ":_files";
      } else if (f.value != ValueCheck::kNone) {
        arg = ":" + std::string(f.value_name) + ": ";
      }
      out += "    '--" + std::string(f.name) + "[" + help + "]" + arg + "' \\\n";
    }
    out +=
        "    '1:subcommand:->sub' '*::arg:->args'\n"
        "  [[ $state == sub ]] && _describe subcommand subcommands\n"
        "}\n"
        "compdef _agentloop agentloop\n";
    return out;
  }
  if (shell == "fish") {
    std::string out =
        "# agentloop completion for fish: agentloop completion fish | source\n"
        "complete -c agentloop -f\n";
    for (const SubcommandSpec& s : kSubcommands) {
      std::string summary(s.summary);
      std::replace(summary.begin(), summary.end(), '\'', ' ');
      out += "complete -c agentloop -n __fish_use_subcommand -a " + std::string(s.name) + " -d '" +
             summary + "'\n";
    }
    for (const FlagSpec& f : kFlags) {
      std::string help(f.help);
      std::replace(help.begin(), help.end(), '\'', ' ');
      out += "complete -c agentloop -l " + std::string(f.name);
      if (f.short_name != 0) out += std::string(" -s ") + f.short_name;
      if (f.value == ValueCheck::kChoice) {
        std::string choices(f.choices);
        std::replace(choices.begin(), choices.end(), '|', ' ');
        out += " -x -a '" + choices + "'";
      } else if (f.value_name == "DIR" || f.value_name == "FILE") {
        out += " -r -F";
      } else if (f.value != ValueCheck::kNone) {
        out += " -x";
      }
      out += " -d '" + help + "'\n";
    }
    return out;
  }
  if (shell == "man") {
    std::string out =
        ".TH AGENTLOOP 1 \"\" \"agentloop " AL_VERSION_STRING
        "\" \"User Commands\"\n"
        ".SH NAME\nagentloop \\- a coding agent in your terminal\n"
        ".SH SYNOPSIS\n.B agentloop\n\\fISUBCOMMAND\\fR [\\fIFLAGS\\fR] [\\fIARGS\\fR]\n"
        ".SH SUBCOMMANDS\n";
    for (const SubcommandSpec& s : kSubcommands) {
      out += ".TP\n.B " + Roff(s.synopsis) + "\n" + Roff(s.summary) + "\n";
    }
    out += ".SH FLAGS\n";
    for (const FlagSpec& f : kFlags) {
      std::string head = f.short_name ? std::string("\\-") + f.short_name + ", " : "";
      head += "\\-\\-" + Roff(f.name);
      if (f.value != ValueCheck::kNone) head += " \\fI" + std::string(f.value_name) + "\\fR";
      out += ".TP\n.B " + head + "\n" + Roff(f.help) + "\n";
    }
    out +=
        ".SH EXIT STATUS\n0 completed, 1 failed, 2 usage or configuration error, 3 budget "
        "exhausted or max turns, 4 denied or refused, 5 waiting for an approval or answer, "
        "130 interrupted.\n"
        ".SH SEE ALSO\n" AL_DOC_DIR "/cli.md and the other documents there.\n";
    return out;
  }
  return InvalidArgument("completion: unknown shell '" + std::string(shell) +
                         "' (bash, zsh, fish or man)");
}

Result<std::chrono::milliseconds> ParseAge(std::string_view text) {
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  std::string_view unit(ptr, static_cast<size_t>(text.data() + text.size() - ptr));
  int64_t scale = 0;
  if (unit == "d") scale = 86'400'000;
  if (unit == "h") scale = 3'600'000;
  if (unit == "m") scale = 60'000;
  if (unit == "w") scale = 7 * 86'400'000LL;
  if (ec != std::errc() || ptr == text.data() || n < 0 || scale == 0 || n > INT64_MAX / scale) {
    return InvalidArgument("--older-than needs an age like 30d, 12h, 2w or 90m, got '" +
                           std::string(text) + "'");
  }
  return std::chrono::milliseconds(n * scale);
}

std::string_view SubcommandName(Subcommand s) {
  for (const SubcommandSpec& spec : kSubcommands) {
    if (spec.id == s) return spec.name;
  }
  return "";
}

std::optional<Subcommand> ParseSubcommand(std::string_view name) {
  const SubcommandSpec* s = FindSubcommand(name);
  if (s == nullptr) return std::nullopt;
  return s->id;
}

std::optional<std::string> CliArgs::FlagValue(std::string_view key) const {
  std::optional<std::string> v;
  for (const ConfigFlag& f : config_flags) {
    if (f.key == key) v = f.value;
  }
  return v;
}

Result<CliArgs> ParseArgs(const std::vector<std::string>& argv) {
  CliArgs args;
  std::vector<SeenFlag> seen;
  bool flags_done = false;
  bool have_subcommand = false;
  bool print_shortcut = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (!flags_done && a == "--") {
      flags_done = true;
      continue;
    }
    bool is_flag = !flags_done && a.size() > 1 && a[0] == '-';
    // `-p/--print PROMPT` is `run PROMPT` and `-r/--resume ID` is `resume
    // ID`, as in Claude Code.
    if (is_flag && !have_subcommand &&
        (a == "-p" || a == "--print" || a == "-r" || a == "--resume")) {
      args.subcommand = a == "-p" || a == "--print" ? Subcommand::kRun : Subcommand::kResume;
      print_shortcut = args.subcommand == Subcommand::kRun;
      have_subcommand = true;
      continue;
    }
    if (!is_flag) {
      if (!have_subcommand) {
        const SubcommandSpec* s = FindSubcommand(a);
        if (s == nullptr) {
          // `agentloop "fix the test"` starts the chat with that prompt, as
          // `claude "..."` and `codex "..."` do.
          if (!IsBarePrompt(a)) return InvalidArgument(UnknownSubcommand(a));
          args.subcommand = Subcommand::kChat;
          have_subcommand = true;
          args.positionals.push_back(a);
          continue;
        }
        args.subcommand = s->id;
        have_subcommand = true;
      } else {
        args.positionals.push_back(a);
      }
      continue;
    }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    if (a[1] == '-') {
      std::string_view body = std::string_view(a).substr(2);
      size_t eq = body.find('=');
      if (eq != std::string_view::npos) {
        inline_value = std::string(body.substr(eq + 1));
        body = body.substr(0, eq);
      }
      spec = FindLong(body);
      if (spec == nullptr) return InvalidArgument(UnknownFlag(body));
    } else {
      spec = FindShort(a[1]);
      if (spec == nullptr) return InvalidArgument("unknown flag '" + a + "'");
      if (a.size() > 2) {
        if (spec->value == ValueCheck::kNone) return InvalidArgument("unknown flag '" + a + "'");
        inline_value = a.substr(2);
      }
    }
    SeenFlag sf{spec, ""};
    if (spec->value == ValueCheck::kNone) {
      if (inline_value) return InvalidArgument(DisplayName(*spec) + " takes no value");
    } else if (inline_value) {
      sf.value = *inline_value;
    } else {
      if (i + 1 >= argv.size()) {
        return InvalidArgument(DisplayName(*spec) + " needs a value (" +
                               std::string(spec->value_name) + ")");
      }
      sf.value = argv[++i];
    }
    AL_RETURN_IF_ERROR(CheckValue(*spec, sf.value));
    seen.push_back(std::move(sf));
  }

  // `help` and `--help` always work; --version wins over everything.
  for (const SeenFlag& sf : seen) {
    if (sf.spec->id == FlagId::kHelp || sf.spec->id == FlagId::kVersion) {
      AL_RETURN_IF_ERROR(Apply(sf, args));
    }
  }
  if (args.help || args.version) return args;
  // `echo "prompt" | agentloop -p`: the prompt comes from standard input.
  if (print_shortcut && args.positionals.empty()) args.positionals.emplace_back("-");
  // `agentloop` alone (flags allowed) is the chat, as `claude` and `codex`
  // are; `agentloop -c` continues the newest session of the workspace there.
  if (args.subcommand == Subcommand::kNone) args.subcommand = Subcommand::kChat;
  for (const SeenFlag& sf : seen) {
    if ((sf.spec->accepted_by & Bit(args.subcommand)) == 0) {
      return InvalidArgument(DisplayName(*sf.spec) + " does not apply to `agentloop " +
                             std::string(SubcommandName(args.subcommand)) + "`");
    }
    AL_RETURN_IF_ERROR(Apply(sf, args));
  }
  AL_RETURN_IF_ERROR(CheckPositionals(args));
  return args;
}

std::string UsageText(Subcommand subcommand) {
  std::string out;
  if (subcommand == Subcommand::kNone || subcommand == Subcommand::kHelp) {
    out +=
        "agentloop: a coding agent in your terminal\n\n"
        "Usage: agentloop SUBCOMMAND [FLAGS] [ARGS]\n"
        "       agentloop [FLAGS] [PROMPT]      the chat (starting with PROMPT when given)\n"
        "       agentloop -p, --print PROMPT    the same as `run PROMPT` (PROMPT - or none: "
        "stdin)\n"
        "       agentloop -r, --resume [ID]     the same as `resume ID`\n\nSubcommands:\n";
    for (const SubcommandSpec& s : kSubcommands) {
      std::string syn(s.synopsis);
      // A synopsis too long for the column gets the summary on the next line.
      out += "  " + syn +
             (syn.size() < 38 ? std::string(38 - syn.size(), ' ') : "\n" + std::string(40, ' ')) +
             std::string(s.summary) + "\n";
    }
    out += "\nFlags:\n";
  } else {
    for (const SubcommandSpec& s : kSubcommands) {
      if (s.id == subcommand) {
        out += "Usage: agentloop " + std::string(s.synopsis) + "\n  " + std::string(s.summary) +
               "\n\nFlags:\n";
      }
    }
  }
  for (const FlagSpec& f : kFlags) {
    if (subcommand != Subcommand::kNone && subcommand != Subcommand::kHelp &&
        (f.accepted_by & Bit(subcommand)) == 0) {
      continue;
    }
    std::string left = "  ";
    if (f.short_name != 0) {
      left += std::string("-") + f.short_name + ", ";
    } else {
      left += "    ";
    }
    left += "--" + std::string(f.name);
    if (f.value != ValueCheck::kNone) left += " " + std::string(f.value_name);
    out += left + std::string(left.size() < 32 ? 32 - left.size() : 1, ' ') + std::string(f.help) +
           "\n";
  }
  if (subcommand == Subcommand::kNone || subcommand == Subcommand::kHelp) {
    out +=
        "\nExit codes: 0 completed, 1 failed, 2 usage or configuration error,\n"
        "3 budget exhausted or max turns, 4 denied or refused, 5 waiting for an\n"
        "approval or answer, 130 interrupted.\n"
        "Documentation: man agentloop, and " AL_DOC_DIR
        "/cli.md\n(installed with agentloop; docs/cli.md in the source tree).\n"
        "Not installed: agentloop completion man | man -l -\n";
  }
  return out;
}

}  // namespace agentloop::cli
