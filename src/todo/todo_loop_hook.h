// TodoLoopHook: the todo-driven continuation loop (SEMANTICS 2.1-2.6;
// pi-todo-loop `index.ts`) on the engine's Hook points.
//
//   BeforeModelCall  puts the open-task block at the request tail (never
//                    stored), replacing a trailing continuation marker so the
//                    request never ends user -> user (inject.h).
//   AfterStep        a step that ran tools: clears strikes (a tool turn is
//                    work), never spends a round; the cleared-by-todo-only
//                    warning.
//   OnTurnEnd        a round that ended right after tools ran
//                    (tool_result_count > 0: a budget, a denial, a cancel
//                    before the next model call) takes the tool-turn branch
//                    as AfterStep does, with the turn's outcome; it never
//                    decides. A settle (no tool results): Decide(); on
//                    continue returns {continue_turn = true, entries =
//                    {marker}} — the marker (tag "todo-loop:continue") keeps
//                    the stored history alternating assistant -> marker ->
//                    assistant. Only a turn that ended kCompleted can
//                    continue. Every decision's reason and figures go into
//                    the verdict (reason, details {round, max_rounds,
//                    strikes, max_strikes, open}): the turn reports them as
//                    a `continuation` event.
//
// The list and the anchor are read from the history the hook is handed (the
// request, the step, the turn), never from the tool's memory, so the two
// agree after a restart. The anchor is the index + content hash of the newest
// human message (snapshot.h).
//
// Loop state (rounds, strikes, last signature, stale settles, anchor, paused,
// reason, last open count) is kept per session id and can be exported to and
// imported from JSON so a front end can persist it in the session store.
//
// Kill switches, checked on every call: `disabled` (--no-todo-loop), the
// global file and the per-workspace file; when any is present every hook
// method is a no-op. A filesystem error counts as "not present".
//
// Reporting: the hook cannot emit events. `notify(session_id, level, text)`
// receives the human notes (the engine turns them into `notice` events); it
// is called without the hook's lock held, on the thread that called the
// hook. Settle decisions are reported through the verdict (above);
// LastDecisionJson() returns the latest one.
//
// Thread-safety: all methods are thread-safe; sessions are independent.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "agentloop/env.h"
#include "agentloop/hook.h"
#include "agentloop/json.h"
#include "agentloop/status.h"

#include "todo/loop.h"
#include "todo/snapshot.h"

namespace agentloop::todo {

using NotifyFn = std::function<void(const std::string& session_id, const std::string& level,
                                    const std::string& text)>;

// `todo-loop-off` in the user's configuration directory
// ($XDG_CONFIG_HOME/agentloop when absolute, else $HOME/.config/agentloop),
// or empty when `env` names neither.
std::filesystem::path DefaultGlobalKillSwitch(const EnvMap& env);
inline constexpr std::string_view kDefaultLocalKillSwitch = ".agentloop/todo-loop-off";

struct TodoLoopOptions {
  LoopConfig config;  // clamped (ClampConfig) on use
  // Optional: called on every hook call instead of using `config` (so a
  // changed config file takes effect at once). Its result is clamped too.
  std::function<LoopConfig()> load_config;
  // Where the config came from, shown as the last `/todoloop status` line.
  std::string config_source = "(defaults)";
  // Empty: none (the engine sets DefaultGlobalKillSwitch of its environment).
  std::filesystem::path kill_switch_global;
  // Relative paths are resolved against the hook context's workspace.
  std::filesystem::path kill_switch_local = std::filesystem::path(kDefaultLocalKillSwitch);
  bool disabled = false;  // --no-todo-loop
  NotifyFn notify;
};

// A session's loop status (for `--output json` and `/todoloop status`).
struct LoopStatus {
  LoopState state;
  bool paused = false;
  std::string reason = "idle";
  int last_open_count = 0;
  LoopConfig config;
  bool disabled = false;  // a kill switch is present (for the session's last workspace)

  Json ToJson()
      const;  // {rounds, max_rounds, strikes, max_strikes, paused, reason, disabled, anchor}
};

class TodoLoopHook : public Hook {
 public:
  explicit TodoLoopHook(TodoLoopOptions options);

  std::string_view name() const override { return "todo-loop"; }
  std::chrono::milliseconds timeout() const override { return {}; }  // inline: never blocks
  void BeforeModelCall(const HookContext& ctx, ModelRequest& request) override;
  void AfterStep(const HookContext& ctx, const StepEndInfo& info) override;
  TurnEndVerdict OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) override;

  // `/todoloop [status|pause|resume|reset]` for `session_id`. `history` is the
  // session's stored history (for the open/tracked counts and the anchor);
  // `workspace` for the per-workspace kill switch (empty: the workspace the
  // session's last hook call used). Returns the text to show:
  //  - pause / resume / reset: "todo-loop: paused in this session",
  //    "todo-loop: resumed", "todo-loop: counters reset";
  //  - status (also "" and unknown commands): an optional warning line
  //    (`todo-loop: unknown argument "x"; use status, pause, resume or reset`
  //    or `todo-loop: ignoring extra arguments "a b"; use ...`) followed by
  //    six lines: `todo-loop <mode>`, `rounds r/R · strikes s/S`,
  //    `open o/t tracked · inject on|off`, `anchor <anchor|(none)>`,
  //    `last: <reason>`, `config <config_source>`.
  std::string TodoLoopCommand(const std::string& session_id, std::string_view args,
                              std::span<const Message> history = {},
                              const std::filesystem::path& workspace = {});

  LoopStatus Status(const std::string& session_id) const;
  // The last settle decision: {round, max_rounds, strikes, max_strikes,
  // open, reason, continue}; null when none.
  Json LastDecisionJson(const std::string& session_id) const;

  // {rounds, strikes, lastSignature, staleSettles, anchor, paused, reason,
  // lastOpenCount}.
  Json ExportState(const std::string& session_id) const;
  // Replaces the session's state. kInvalidArgument (state untouched) when
  // `state` is not an object; missing or mistyped fields take initial values.
  agentloop::Status ImportState(const std::string& session_id, const Json& state);
  void ForgetSession(const std::string& session_id);

  // Whether a kill switch is present for `workspace` (or the flag is set).
  bool IsDisabled(const std::filesystem::path& workspace) const;
  LoopConfig CurrentConfig() const;

 private:
  struct SessionLoop {
    LoopState state;
    bool paused = false;
    std::string reason = "idle";
    int last_open_count = 0;
    std::filesystem::path workspace;
    Json last_decision;     // null until the first settle
    SnapshotCursor cursor;  // makes each step's snapshot read O(new messages)
  };
  struct Note {
    std::string level;
    std::string text;
  };

  // The tool-turn branch (SEMANTICS 2.5 steps 3-5). Appends notes.
  void ToolTurn(SessionLoop& s, const TodoSnapshot& snapshot,
                const std::vector<std::string>& tool_names, const std::string& outcome,
                std::vector<Note>& notes);
  void Deliver(const std::string& session_id, const std::vector<Note>& notes) const;
  bool Paused(const std::string& session_id, const std::filesystem::path& workspace);
  // ReadSnapshot through the session's cursor (taken out of the map while
  // it reads, so the lock is not held over the search).
  TodoSnapshot ReadSessionSnapshot(const std::string& session_id, std::span<const Message> history,
                                   std::span<const Message> tail = {});

  const TodoLoopOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, SessionLoop> sessions_;  // Guarded by mu_.
};

}  // namespace agentloop::todo
