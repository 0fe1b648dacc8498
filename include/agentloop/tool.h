// Tool: a capability the model can call, such as "read" or "bash".
//
// Tool failures come in two kinds (STYLE 6.6): a failure the model should see
// and react to (file not found, bad arguments, non-zero exit) is an OK
// Result holding ToolOutput{is_error = true}; a non-OK Status means the
// engine itself failed and ends the turn `failed`.
//
// Thread-safety: Run() may be called from several sessions and several
// parallel lanes at once; keep per-call state on the stack or in ToolContext.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentloop/event_type.h"
#include "agentloop/json.h"
#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

struct Event;  // events.h

class BudgetLedger;

struct ToolCall {
  std::string id;
  std::string name;
  Json input;  // a JSON object, already validated against the tool's schema
  // The call runs because a permission rule allowed it, not because a
  // person approved this exact call: a tool whose spec has
  // confines_rule_allowed runs it confined (bash: in the workspace-write
  // sandbox). Set only by the turn (src/core/turn.cc).
  bool confined = false;
};

struct ToolOutput {
  std::string content;  // what the model sees
  bool is_error = false;
  Json details;  // structured data for the engine and front ends, never sent to the model
  // What the call spent of the turn's budgets on the turn's behalf (a
  // subagent's tool calls, tokens and model usage): added to the turn's
  // counters when the result arrives. Not charged to the turn's
  // BudgetLedger again: the subagent charged its own node, whose spending
  // reaches every ancestor.
  TurnCounters charged;
  // Not empty: the call has not finished, it waits for a person's decision
  // in that session (a subagent's durable pause; `waiting_for` says
  // whether an approval or an answer). The turn pauses the batch with the
  // call outstanding as a pending item of kind kSubagent naming the
  // session (`content` is its reason); once the engine decides that item
  // the call runs again and continues where it waited. `charged` is what
  // was spent until the pause.
  std::string waiting_session;
  PendingKind waiting_for = PendingKind::kApproval;
  // Images the model sees with `content` (kImage blocks, already checked:
  // protocol/image.h). They become the tool result's `images`.
  std::vector<ContentBlock> images;

  static ToolOutput Ok(std::string content) {
    ToolOutput out;
    out.content = std::move(content);
    return out;
  }
  static ToolOutput Error(std::string content) {
    ToolOutput out;
    out.content = std::move(content);
    out.is_error = true;
    return out;
  }
};

// Files this session has read, so `write` can refuse to overwrite a file the
// model has not looked at. Thread-safe.
class ReadLedger {
 public:
  void MarkRead(const std::string& canonical_path) {
    std::lock_guard<std::mutex> lock(mu_);
    read_.insert(canonical_path);
  }
  bool WasRead(const std::string& canonical_path) const {
    std::lock_guard<std::mutex> lock(mu_);
    return read_.count(canonical_path) > 0;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> read_;  // Guarded by mu_.
};

// Where `read`, `write` and `edit` take a file's text from and put it, in
// place of the file system: a front end whose person edits the files
// elsewhere (an editor's unsaved buffers, over the Agent Client Protocol's
// fs/* methods; docs/acp.md). The tools call it only after they resolved
// and checked the path as always (workspace confinement, links, rules,
// read-before-write): it changes where the text comes from and goes to,
// never which files a call may touch. `abs` is the file's absolute path.
// Thread-safe.
class FileTextAccess {
 public:
  virtual ~FileTextAccess() = default;
  // The file's text; kNotFound when there is none.
  virtual Result<std::string> ReadText(const std::string& abs, std::stop_token stop) = 0;
  // Replaces (or creates) the file's text.
  virtual Status WriteText(const std::string& abs, const std::string& text,
                           std::stop_token stop) = 0;
};

// How the permission rules restrict one file for one tool (see
// ToolContext::path_rule).
enum class PathRule { kNone, kAsk, kDeny };

// Per-call environment handed to Run(). Owned by the caller.
struct ToolContext {
  std::filesystem::path workspace;  // absolute, canonical workspace root
  // Directories outside the workspace that read-only tools may read (skills,
  // memory). Absolute and canonical.
  std::vector<std::filesystem::path> extra_read_roots;
  std::string session_id;
  std::stop_token stop;  // cancellation of the turn
  // When the turn's wall-time budget runs out (TurnConfig's budget,
  // max_wall_time); nullopt: no wall-time budget. A tool that waits or
  // runs a process stops its work at this moment (bash kills the process
  // group, an MCP call is cancelled) and says in its result that the budget
  // ran out (ToolOutput::details "budget_exhausted": true). The runner sets
  // it for each batch from turn_action::RunTools::time_left.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::shared_ptr<ReadLedger> ledger;  // may be null (then writes are not guarded)
  // Environment variable names removed from child processes (API keys),
  // besides the names that look like secrets.
  std::vector<std::string> scrubbed_env;
  // The strictest ask or deny rule of the session that covers the file or
  // directory at `abs` (absolute, symbolic links resolved) for `tool`; read
  // rules count for grep, glob and ls. kNone when no such rule applies.
  // grep, glob and ls leave out what a rule restricts inside the directory
  // they search (nobody approved reading it); read, write, edit and a grep
  // of one file refuse a target that a deny rule covers where it was really
  // opened. Null: no rule restricts paths.
  std::function<PathRule(std::string_view tool, const std::string& abs)> path_rule;
  // The call belongs to a read-only command (plan, explain). Only a tool
  // whose spec has confined_in_read_only runs then, and it must confine
  // itself or fail; it never falls back to running unconfined.
  bool read_only = false;
  // The budget ledger node of the turn that runs the call (a subagent tool
  // reserves its child's share from it); null: the turn keeps no ledger.
  std::shared_ptr<BudgetLedger> budget;
  // The turn runs a subagent: "root/reviewer" names the path of agents down
  // to it; empty for a root session.
  std::string agent_path;
  // Reports an event about this call to its turn (a subagent's
  // subagent_started as its child session starts, its subagent_completed),
  // which emits it in its event log while the call still runs: after the
  // call's tool_call_begin, before its tool_call_end, and the reports of one
  // call in the order made. Only persisted event types (others are dropped).
  // Thread-safe; call it only while Run() runs (a later report is dropped).
  // The runner sets it for each call and hands the event to the turn on the
  // thread that steps it; RunTurn runs a lone call on that thread, so there
  // it emits at once what is reported from the thread that called Run()
  // (reports from other threads of such a call wait until Run() returns).
  // Null: no turn listens (the tool runs outside a runner). The event is
  // built with MakeEvent; the turn numbers and stamps it.
  std::function<void(Event event)> report;
  // read, write and edit take and put a file's text here instead of the
  // file system (FileTextAccess); null: the file system.
  std::shared_ptr<FileTextAccess> files;
};

// How the bash tool confines the commands it runs (docs/tools.md, "Sandbox").
enum class SandboxMode {
  kOff,             // no sandbox: the command can do what this process can
  kReadOnly,        // bubblewrap: nothing is writable (a private /tmp aside)
  kWorkspaceWrite,  // bubblewrap: the workspace is writable, the rest read-only
};

// What a configured sandbox does when bubblewrap cannot run on this machine.
enum class SandboxFallback {
  kRefuse,  // commands are not run: kFailedPrecondition naming the reason
  kWarn,    // commands run unsandboxed (the front end warns once)
};

// "off" | "read-only" | "workspace-write"
inline std::string_view SandboxModeName(SandboxMode m) {
  switch (m) {
    case SandboxMode::kOff:
      return "off";
    case SandboxMode::kReadOnly:
      return "read-only";
    case SandboxMode::kWorkspaceWrite:
      return "workspace-write";
  }
  return "off";
}

inline std::optional<SandboxMode> ParseSandboxMode(std::string_view name) {
  for (SandboxMode m : {SandboxMode::kOff, SandboxMode::kReadOnly, SandboxMode::kWorkspaceWrite}) {
    if (SandboxModeName(m) == name) return m;
  }
  return std::nullopt;
}

class Tool {
 public:
  virtual ~Tool() = default;

  // Name, description, schema and flags. Stable for the tool's lifetime.
  virtual const ToolSpec& spec() const = 0;

  // The object spec() returns when it is immutable and owned by this
  // pointer, which the tool may share with other instances (the built-in
  // tools build each spec once per process); null otherwise. Registries
  // whose tools all answer it share one list of specs (ToolRegistry::
  // SpecList) instead of a copy of every schema per session.
  virtual std::shared_ptr<const ToolSpec> shared_spec() const { return nullptr; }

  // Performs the call. See the file comment for the two kinds of failure.
  // REQUIRES: call.input satisfies spec().input_schema; the call was allowed.
  virtual Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) = 0;
};

// The tools of a session, by name. Not thread-safe for mutation; build it
// before the first turn and treat it as read-only after.
class ToolRegistry {
 public:
  // Adds or replaces (by name; the later definition wins, at the earlier
  // position) a tool.
  void Add(std::shared_ptr<Tool> tool);
  Tool* Find(std::string_view name) const;
  // Keeps only the tools `keep` accepts, in their order.
  void Retain(const std::function<bool(const ToolSpec&)>& keep);
  // Specs in registration order.
  std::vector<ToolSpec> Specs() const;
  // The same as a shared list: when every tool has a shared_spec(), the
  // list is shared with every registry of the same specs in this process
  // (built once); otherwise a copy of this registry's specs.
  ToolSpecList SpecList() const;
  size_t size() const { return tools_.size(); }

 private:
  std::vector<std::shared_ptr<Tool>> tools_;
};

// Checks `input` against the subset of JSON Schema that tool schemas use:
// type (object, string, integer, number, boolean, array, null, and lists of
// types), required, properties, enum, items, minimum/maximum, minLength/
// maxLength, additionalProperties=false. Returns kInvalidArgument naming the
// first problem with its path, e.g. "file_path: expected string, got number".
Status ValidateAgainstSchema(const Json& input, const Json& schema);

}  // namespace agentloop
