// What the CLI prints while a turn runs and when it ends, in the three
// output formats, and the exit codes (docs/cli.md):
//
//   text         assistant words streamed to stdout; tool activity, notices,
//                a spinner (terminal only) and the final summary on stderr
//   stream-json  one Event::ToJson() object per line on stdout
//   json         one object on stdout when the turn ends (TurnResultJson)
//
// Exit codes: 0 completed, 1 failed, 2 usage/configuration error,
// 3 budget_exhausted or max_turns, 4 denied, tool_refused or refused, 5 paused on a
// pending approval or question, 130 interrupted.
//
// Thread-safety: a TurnPrinter is driven by the thread that runs the turn
// (events and deltas arrive on it); its spinner thread only draws.
#pragma once

#include <chrono>
#include <condition_variable>
#include <iosfwd>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "agentloop/events.h"
#include "agentloop/provider.h"
#include "agentloop/status.h"
#include "agentloop/turn.h"
#include "agentloop/types.h"

#include "config/config.h"

namespace agentloop::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBudget = 3;
inline constexpr int kExitDenied = 4;
inline constexpr int kExitPending = 5;
inline constexpr int kExitInterrupted = 130;

int ExitCodeFor(StopReason stop);
// Errors before or outside a turn: kInvalidArgument and kNotFound are usage
// or configuration errors (2), kCancelled is an interruption (130),
// everything else (kBusy, kDataLoss, ...) is 1.
int ExitCodeFor(const Status& status);

// How the terminal may be decorated.
struct Style {
  bool color = false;          // ANSI colours (stderr a terminal and NO_COLOR unset)
  bool spinner = false;        // stderr is a terminal
  bool quiet = false;          // --quiet: no progress, no summary
  bool show_thinking = false;  // --show-thinking: stream thinking (else one folded line)
  // A pause is asked right after the turn (chat): the end of a paused turn
  // says so instead of listing the commands that answer it.
  bool asks_pending = false;
  // The environment variable that holds the model API key, for the hint
  // after an authentication failure; empty: no hint.
  std::string api_key_env;
};

// The todo loop's state from the last `continuation` event of a turn.
struct TodoLoopInfo {
  int rounds = 0;
  int max_rounds = 0;
  int strikes = 0;
  int max_strikes = 0;
  std::string reason;
  bool continued = false;  // the loop started another round
  int open = 0;            // open tasks at the decision
};

// The `--output json` object (see docs/cli.md for the fields).
Json TurnResultJson(const std::string& session_id, const TurnResult& result,
                    const std::optional<TodoLoopInfo>& todo_loop,
                    std::optional<std::chrono::milliseconds> duration, const std::string& model);

// One pending item as JSON: {id, kind, tool, arguments, reason, tool_use_id}.
Json PendingItemJson(const PendingItem& item);

// Human instructions for answering paused items, e.g.
//   waiting for approval: bash {"command":"make"} (matched rule ...)
//     agentloop approve 7f3a... [--args JSON]
//     agentloop deny 7f3a... [--reason TEXT]
std::string PendingInstructions(const std::vector<PendingItem>& items);

// A one-line description of a tool call for the activity log, e.g.
// "bash  make test", "read  src/main.py", "grep  TODO in src".
std::string DescribeToolCall(const std::string& tool, const Json& input, size_t max_chars = 100);

// "1,234"
std::string GroupDigits(int64_t n);

// "1 tool call", "3 tool calls", "12,000 tokens": n (digits grouped) and the
// noun, with an "s" unless n is 1.
std::string Counted(int64_t n, std::string_view noun);

// A todo list (a todo result's details.tasks) as a checklist for a
// terminal: "todo:" then one line per task, ☐ pending, ◐ in progress (with
// its activeForm), ☑ completed; empty for no tasks.
std::string RenderChecklist(const Json& tasks, bool color);

// A unified diff for a terminal: each line indented by `indent`, removed
// lines red, added lines green, hunk headers cyan (with `color`); at most
// `max_lines` lines, then a line saying how many were left out.
std::string RenderDiff(std::string_view diff, bool color, std::string_view indent = "    ",
                       size_t max_lines = 60);

// The conversation of a stored session as a person re-entering it sees it
// (chat --session, resume): the user's and the assistant's words, one line
// per tool call (and a ✗ line for a failed result), each text cut to
// `max_lines` lines. Only the newest `max_messages` messages are shown, after
// a line saying how many earlier ones were left out (and where to see them).
// Messages the engine adds (tagged: summaries, notices) show as one line.
std::string RenderConversation(std::span<const Message> messages, const std::string& session_id,
                               bool color, size_t max_messages = 20, size_t max_lines = 12);

// Formats a JSON error object {"error": {"code", "message"}} for the json
// and stream-json formats.
Json ErrorJson(const Status& status);

class TurnPrinter final : public EventSink, public StreamSink {
 public:
  // `out` and `err` must outlive the printer.
  TurnPrinter(OutputFormat format, std::ostream& out, std::ostream& err, Style style);
  ~TurnPrinter() override;
  TurnPrinter(const TurnPrinter&) = delete;
  TurnPrinter& operator=(const TurnPrinter&) = delete;

  // Resets per-turn state; call before each turn (or resolution).
  void BeginTurn();

  Status OnEvent(const Event& event) override;
  void OnTextDelta(std::string_view text) override;
  void OnThinkingDelta(std::string_view text) override;

  // Prints the end of the turn: the summary (text), the object (json), or
  // nothing more (stream-json); and, when paused, how to answer. Returns the
  // exit code. `model` prices the cost line.
  int Finish(const std::string& session_id, const TurnResult& result, const std::string& model);

  // Reports an error that ended the command (stderr; in json and
  // stream-json also an error object on stdout). Returns the exit code.
  int FinishWithError(const Status& status);

  const std::optional<TodoLoopInfo>& todo_loop() const { return todo_loop_; }

 private:
  // An event of a subagent's child session (text: its tool calls, their
  // results and denials, indented under the call that started it).
  void OnChildEvent(const Event& event);
  // The text output of one event of the turn's own session (OnEvent).
  void Print(const StepBeginData& d);
  void Print(const StepEndData& d);
  void Print(const ToolCallBeginData& d);
  void Print(const ToolCallEndData& d);
  void Print(const DecisionData& d);
  void Print(const NoticeData& d);
  void Print(const ContinuationData& d);
  void Print(const MessageData& d);
  void Print(const RetryData& d);
  void Print(const CompactionData& d);
  void Print(const HookErrorData& d);
  template <typename D>
  void Print(const D&) {}  // nothing to print (deltas arrive through OnTextDelta)
  void StartSpinner(std::string label);
  void StopSpinner();
  void SpinnerLoop();
  void EnsureNewlineOnStdout();
  // Ends a stretch of thinking: its folded line, or the newline after the
  // streamed thinking.
  void EndThinking();
  std::string Paint(std::string_view text, std::string_view code) const;

  const OutputFormat format_;
  std::ostream& out_;
  std::ostream& err_;
  const Style style_;

  std::chrono::steady_clock::time_point started_;
  // The session of the turn's first turn_begin: events of other sessions
  // after it are a subagent's child's (OnChildEvent).
  std::string root_session_;
  bool streamed_text_ = false;
  bool at_line_start_ = true;
  bool saw_delta_events_ = false;
  std::optional<TodoLoopInfo> todo_loop_;
  Json changes_ = Json::array();              // json: {id, tool, diff} of each file change
  std::map<std::string, std::string> calls_;  // tool_use id -> short description
  std::string last_line_call_;                // the call whose line was printed last, if any
  // Calls the model asked for that have not begun (tool_use id -> short
  // description): one answered without running is shown from its result.
  std::map<std::string, std::string> unstarted_;
  size_t thinking_words_ = 0;  // of the current stretch of thinking
  bool in_thinking_ = false;
  std::string last_checklist_;  // the todo checklist drawn last
  bool thinking_at_space_ = true;

  // Spinner (text format on a terminal).
  std::mutex spin_mu_;
  std::condition_variable spin_cv_;
  std::thread spin_thread_;
  bool spin_active_ = false;                            // Guarded by spin_mu_.
  bool spin_shutdown_ = false;                          // Guarded by spin_mu_.
  std::string spin_label_;                              // Guarded by spin_mu_.
  std::chrono::steady_clock::time_point spin_started_;  // Guarded by spin_mu_.
  bool spin_drawn_ = false;                             // Guarded by spin_mu_.
};

}  // namespace agentloop::cli
