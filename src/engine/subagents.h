// Subagents (docs/subagents.md): agent definitions, and the tool that runs
// one as a child session of the calling session.
//
// Definitions come from three places, in this order (an earlier one keeps
// its name; a later one of the same name is skipped with a warning):
//   <config dir>/agents/<agent>/subagents/<child>/agent.md   the server agent's children
//   <config dir>/agents/<name>.md                              the user's
//   <workspace>/.agentloop/agents/<name>.md                    the workspace's (untrusted)
// Each is Markdown with front matter (learning/frontmatter.h); the body is
// the child's system prompt. Keys: name, description (required), tools (a
// list: the allow-list; `agent` or `agent__<name>` lets the child spawn),
// model, command, max_turns, max_tool_calls, max_tokens, max_wall_time_ms,
// parallel (true: may run beside other parallel-safe calls when the child
// is read-only), ask and deny (permission rules added to the parent's). A
// definition can only narrow: it has no allow rules, its budget is capped by
// what the caller has left, and a read-only caller's child is read-only.
// An unknown key or a bad value is a problem that keeps the definition out.
//
// Thread-safety: LoadSubagents reads files and returns values; the tool is
// thread-safe (its state is the host's).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/budget_ledger.h"
#include "agentloop/engine.h"
#include "agentloop/status.h"
#include "agentloop/tool.h"
#include "agentloop/turn.h"

namespace agentloop::engine {

inline constexpr std::string_view kAgentToolPrefix = "agent__";
inline constexpr std::string_view kSubagentFileName = "agent.md";

enum class SubagentSource { kAgentFolder, kUser, kWorkspace };
std::string_view SubagentSourceName(SubagentSource s);  // "agent" | "user" | "workspace"

struct SubagentDefinition {
  std::string name;
  std::string description;
  std::string system_prompt;  // the body
  std::filesystem::path file;
  SubagentSource source = SubagentSource::kUser;
  std::optional<std::vector<std::string>> tools;
  std::string model;  // empty: the parent's
  std::optional<CommandKind> command;
  std::optional<int> max_turns;
  std::optional<int> max_tool_calls;
  std::optional<int64_t> max_tokens;
  std::optional<std::chrono::milliseconds> max_wall_time;
  bool parallel = false;
  std::vector<std::string> ask, deny;

  // The definition lets its child start other subagents (its tools name
  // `agent` or `agent__<name>`), and which.
  bool MaySpawn(std::string_view child) const;
};

// Parses one definition file. `name` is the folder's or the file's stem; a
// `name` key must equal it. Errors: kInvalidArgument naming the file and
// the key.
Result<SubagentDefinition> ParseSubagentFile(const std::filesystem::path& file,
                                             std::string_view name, SubagentSource source);

struct SubagentCatalog {
  std::vector<SubagentDefinition> definitions;  // by name
  // Definitions that were skipped, and why (file: problem).
  std::vector<std::string> warnings;

  const SubagentDefinition* Find(std::string_view name) const;
};

// Every definition visible to sessions of `workspace` (and of the server
// agent `home_agent`, when not empty). Missing directories are empty.
SubagentCatalog LoadSubagents(const std::filesystem::path& config_dir, std::string_view home_agent,
                              const std::filesystem::path& workspace);

// The stop reason the parent sees: the child's, except that a refused tool
// reads as "denied".
std::string_view SubagentStopName(StopReason stop);

// What the tool asks of the session that offers it.
struct SubagentRequest {
  const SubagentDefinition* definition = nullptr;
  std::string tool_use_id;
  std::string prompt;                    // the task, with the context after it
  std::shared_ptr<BudgetLedger> ledger;  // the child's reserved node
  std::string path;                      // the child's path of agents
  // Called with the new child session's id once it exists, before its turn
  // starts; never for a child that is continued. May be null.
  std::function<void(const std::string& session_id)> on_started;
};
struct SubagentRun {
  std::string session_id;
  TurnResult result;
  // The run continued a child that had paused durably under this call
  // (the child was started by an earlier run of the same call), and what
  // the child had spent by then (already charged to the caller, whose
  // batch paused with it).
  bool continued = false;
  TurnCounters spent_before;
};
class SubagentHost {
 public:
  virtual ~SubagentHost() = default;
  // Creates the child session (then calls request.on_started) and runs its
  // turn to its end, or, when this call (`tool_use_id` of the caller's
  // current turn) started a child that paused durably and whose batch is
  // decided now, continues that child. The turn may end paused again
  // (TurnResult::pending). Errors: the child could not be opened or started
  // (then nothing of it ran).
  virtual Result<SubagentRun> RunSubagent(const SubagentRequest& request, std::stop_token stop) = 0;
};

// `agent__<name>` with {task, context?}. Every call gets a tool result (never
// a non-OK Status for the child's own outcome): the child's final text, its
// usage and stop reason; the child's spending is charged to the caller
// (ToolOutput::charged). The call reports (ToolContext::report)
// subagent_started as soon as its child session exists, before the child
// does anything (not again when it continues a paused child), and
// subagent_completed when the child has stopped (also when it was never
// started).
class SubagentTool final : public Tool {
 public:
  // `host` must outlive the tool. `read_only_child`: the child can change
  // nothing (a read-only command, or only read-only tools allowed).
  SubagentTool(SubagentDefinition definition, SubagentHost* host, bool read_only_child);
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  SubagentDefinition def_;
  SubagentHost* host_;
  ToolSpec spec_;
};

// The tool allow-list of a child: its definition's (nullopt: every tool of
// the caller but the agent tools) within its caller's (nullopt: a root
// session, every tool). `agent` in the definition stands for the agent
// tools the caller has. A definition only ever removes tools.
std::optional<std::vector<std::string>> ChildTools(
    const std::optional<std::vector<std::string>>& caller,
    const std::optional<std::vector<std::string>>& definition);

// Whether a child with this definition can change nothing under a parent
// running `parent_command`.
bool SubagentIsReadOnly(const SubagentDefinition& def, CommandKind parent_command);

// Whether the definition's body is its child's system prompt: always, but
// for a definition of the workspace (`.agentloop/agents`) that the person
// has not trusted (SessionOptions::Subagents::workspace_trusted), which is
// untrusted like the workspace's system prompt file.
bool SubagentBodyIsSystemPrompt(const SubagentDefinition& def, bool workspace_trusted);

// The first message of a child of `def`: `task`, after the definition's body
// as data when that body is not the child's system prompt.
std::string SubagentTask(const SubagentDefinition& def, bool workspace_trusted,
                         std::string_view task);

// The warning a session gives once when the untrusted workspace defines
// subagents (their bodies used as data); empty when none is untrusted.
std::string UntrustedSubagentsWarning(const SubagentCatalog& catalog, bool workspace_trusted);

}  // namespace agentloop::engine
