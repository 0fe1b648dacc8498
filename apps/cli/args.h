// Command-line parsing for the `agentloop` binary: a small table-driven
// parser (no dependency) that turns argv into CliArgs. The table (kFlags in
// args.cc) is the single list of flags: the parser, the per-subcommand
// checks and `--help` all read it.
//
// Grammar: agentloop [FLAGS] SUBCOMMAND [ARGS and FLAGS in any order]
//   --flag VALUE | --flag=VALUE | -C DIR | -CDIR; `--` ends the flags; a lone
//   `-` is a positional (run's "read the prompt from stdin").
// Errors are kInvalidArgument with a message meant for the user; the CLI
// prints it with a hint and exits 2.
//
// Thread-safety: pure functions over values.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::cli {

enum class Subcommand {
  kNone,  // only --help / --version
  kRun,
  kChat,
  kSessions,
  kResume,
  kConfig,
  kPending,
  kApprove,
  kDeny,
  kAnswer,
  kPermissions,
  kProposals,   // proposals list|accept ID|reject ID
  kMemory,      // memory list
  kSkills,      // skills list
  kTrust,       // trust [DIR] | trust list | trust revoke [DIR]
  kAgents,      // agents list | agents show NAME
  kHelp,        // `agentloop help [SUBCOMMAND]`
  kCompact,     // compact ID [--focus TEXT]
  kCompletion,  // completion bash|zsh|fish|man
  kServe,       // serve: the HTTP server
  kStore,       // store migrate: the session store's schema
  kMcp,         // mcp list
  kAcp,         // acp: the Agent Client Protocol agent on stdio
};

std::string_view SubcommandName(Subcommand s);
std::optional<Subcommand> ParseSubcommand(std::string_view name);

// A flag that maps to a configuration key, in command-line order (so later
// flags win and list flags accumulate in order).
struct ConfigFlag {
  std::string key;    // config key, e.g. "provider.model"
  std::string value;  // as typed
  std::string flag;   // as typed, e.g. "--model"
};

struct CliArgs {
  Subcommand subcommand = Subcommand::kNone;
  std::vector<std::string> positionals;  // after the subcommand

  // Flags that are configuration (provider, model, budgets, rules, output...).
  std::vector<ConfigFlag> config_flags;

  // Flags that are not configuration.
  std::optional<std::string> workspace;  // -C / --workspace
  std::optional<std::string> session;    // --session
  std::optional<std::string> agent;      // run/chat --agent NAME
  std::optional<std::string>
      config_file;               // --config FILE (the user file; its directory holds agents/)
  bool continue_latest = false;  // run --continue
  bool quiet = false;
  bool show_thinking = false;                           // --show-thinking
  bool all = false;                                     // sessions list|prune --all
  bool tree = false;                                    // sessions show --tree
  bool no_auth = false;                                 // serve --no-auth
  bool rotate_cookie_secret = false;                    // serve --rotate-cookie-secret
  std::optional<std::chrono::milliseconds> older_than;  // sessions prune --older-than
  bool help = false;
  bool version = false;
  std::optional<std::string> edited_args;  // approve --args JSON
  std::optional<std::string> reason;       // deny --reason TEXT
  std::string focus;                       // compact --focus TEXT
  // Lines to show on stderr before the command runs (unless --quiet).
  std::vector<std::string> warnings;

  // The value of the last config flag for `key`, if any.
  std::optional<std::string> FlagValue(std::string_view key) const;
};

// Parses argv[1..]. Errors: unknown subcommand or flag, a flag without its
// value, a flag that the subcommand does not take, a bad number of
// positionals, an invalid enum value (--output, --provider, --command).
Result<CliArgs> ParseArgs(const std::vector<std::string>& argv);

// The usage text: general (`kNone`) or for one subcommand.
std::string UsageText(Subcommand subcommand);

// `agentloop completion SHELL`: a completion script for bash, zsh or fish,
// or with "man" the man page (roff), made from the one table of subcommands
// and flags `--help` prints. kInvalidArgument for another name.
Result<std::string> CompletionScript(std::string_view shell);

// An age as `sessions prune --older-than` takes it: a count and a unit, m
// (minutes), h, d or w, e.g. "30d". kInvalidArgument otherwise.
Result<std::chrono::milliseconds> ParseAge(std::string_view text);

}  // namespace agentloop::cli
