// The subcommands of `agentloop` (docs/cli.md). Each returns the process
// exit code (output.h). main() builds the CliContext and calls RunCli.
//
// Thread-safety: one command per process; not reentrant.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "agentloop/engine.h"

#include "args.h"
#include "output.h"
#include "permissions/approvers.h"
#include "settings.h"

namespace agentloop::cli {

// Parses `argv` (without the program name) and runs the subcommand.
int RunCli(const std::vector<std::string>& argv, const CliContext& ctx, std::istream& in,
           std::ostream& out, std::ostream& err);

// Shared by the subcommands and chat.
struct CommandEnv {
  const CliArgs& args;
  const CliContext& ctx;
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

// The terminal style for `ctx` and `args` (colour only on a terminal without
// NO_COLOR; spinner only on a terminal).
Style StyleFor(const CliArgs& args, const CliContext& ctx);
// StyleFor, plus what a turn of the session of `settings` reports with (the
// API key's variable).
Style TurnStyle(const CommandEnv& e, const CliSettings& settings);

// How the console approver of `ctx` asks: on a terminal with $VISUAL or
// $EDITOR set, `e` opens the arguments in that editor. With `engine`, a
// write or edit is shown as the change it would make (DescribeChange),
// under the rules of the sessions opened with `*base` (both must outlive
// the approver).
permissions::ConsoleApprover::Options ConsoleOptions(const CliContext& ctx,
                                                     Engine* engine = nullptr,
                                                     const SessionOptions* base = nullptr,
                                                     bool color = false);

// The change a write or edit call of session `session_id` would make, for
// the person deciding (engine::PreviewCallChange, with the session's read
// rules: `base` as for OpenSession): `  file: PATH  SUMMARY`, then the
// unified diff (at most `max_lines` lines), or a note saying why there is
// none followed by the call's arguments. Empty for another tool, or when no
// preview can be made (a path outside the workspace): the arguments are
// shown as usual then.
std::string DescribeChange(Engine& engine, const SessionOptions& base,
                           const std::string& session_id, const std::string& tool, const Json& args,
                           bool color, size_t max_lines = 120);

// Runs `editor` (a shell command line, e.g. "code -w") on a temporary file
// holding `text` and returns the file's text after the editor exits; an error
// when it could not start or exited with a non-zero status.
Result<std::string> EditInEditor(const std::string& editor, const std::string& text);

// Creates the engine over the data directory of ctx.env, with the
// process-wide settings (engine::EngineOptionsFromConfig: store.sync).
// `preconnect`: the session of `settings` is the one about to be opened, so
// the engine may start connecting to its model's server right away.
Result<std::unique_ptr<Engine>> MakeEngine(const CliContext& ctx, const CliSettings& settings,
                                           bool preconnect = false);

// The session `-c`/`--continue` continues: the newest session of
// `workspace` that has a turn and is not a subagent's child (as the resume
// picker lists them; a bare chat's empty session is passed over). Errors:
// kNotFound saying there is none; the store's.
Result<std::string> NewestToContinue(SessionStore& store, const std::filesystem::path& workspace);

// Fills what the flags and files left unset (provider, model, command) from
// the stored session `session_id` (id or prefix), and sets
// settings.session.overrides to what the flags of `args` ask to change in the
// session's pinned settings. Unknown ids are left to OpenSession to report.
void FillFromStoredSession(Engine& engine, const std::string& session_id, CliSettings& settings,
                           const CliArgs& args);

// "YYYY-MM-DD HH:MM" in local time, of milliseconds since the epoch (listings).
std::string FormatTime(int64_t ms);

// `agentloop trust [DIR] | list | revoke [DIR]` (trust.cc).
int CmdTrust(const CommandEnv& e);

// `agentloop agents list | show NAME` (agents.cc).
int CmdAgents(const CommandEnv& e);
int CmdServe(const CommandEnv& e);

// `agentloop store migrate` (store.cc).
int CmdStore(const CommandEnv& e);
// `agentloop mcp list` (mcp.cc).
int CmdMcp(const CommandEnv& e);
// The listing of `mcp list` and `/mcp`: per server its state, transport,
// version and tools, or the reason it failed.
std::string FormatMcpServers(const std::vector<McpServerState>& servers);

// `agentloop acp`: the Agent Client Protocol agent on stdio (acp.cc).
int CmdAcp(const CommandEnv& e);

// The interactive mode (chat.cc).
int RunChat(const CommandEnv& env, CliSettings settings);

}  // namespace agentloop::cli
