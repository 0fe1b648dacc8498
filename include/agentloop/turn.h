// Turn: one user input (or one resolution of a paused batch), looped until
// the model is done, the turn pauses, is cancelled, or runs out of budget.
//
// A Turn is a state machine with no I/O of its own. The driver asks Next()
// what to do, does it (call the model, ask an approver, run tools), and feeds
// the outcome back; Next() then says what comes after. The blocking driver in
// runner.h does this for the CLI and tests; the HTTP server can drive the same
// machine from an event loop. Nothing here assumes a thread per turn.
//
//   Start ─▶ CallModel ─▶ (Decide) ─▶ RunTools ─▶ CallModel ... ─▶ Finished
//
// The Turn decides everything about a tool call in one place (budget, schema,
// plan mode, hooks, permission rules, approvals, pauses); the driver only
// executes what it is told.
//
// Invariants the Turn keeps:
//  - every tool_use of an assistant message gets exactly one tool_result in
//    the next message, in model order, also when the turn stops mid-batch
//    (except a durable pause: then the assistant message stays open and the
//    checkpoint holds the results so far);
//  - budgets are checked before every model call;
//  - a mutating call in a read-only command never reaches RunTools.
//
// Thread-safety: none; one driver thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agentloop/checkpoint.h"
#include "agentloop/events.h"
#include "agentloop/hook.h"
#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"
#include "agentloop/transcript.h"
#include "agentloop/types.h"

namespace agentloop {

class BudgetLedger;

// The prefix of a plan-mode refusal reason.
inline constexpr std::string_view kPlanModeRefused = "PLAN_MODE_REFUSED:";
// Name of the built-in question tool (never gated by rules).
inline constexpr std::string_view kAskUserTool = "ask_user";
// Tag of assistant-role messages the engine writes itself when it stops a
// turn ("Stopped after 25 turns ...", "Stopped — you denied: ..."): they are
// not the model's words.
inline constexpr std::string_view kEngineStopTag = "engine-stop";
// The seed's wrap-up message, sent (system role, never stored) with every
// request while the context is at or over 0.7 of the model's window.
inline constexpr std::string_view kWrapUpText =
    "The conversation is approaching its context budget. Wrap up the current step concisely.";
// The fixed instruction of the side request that writes a compaction
// summary (docs/protocol.md); a focus, when given, follows it.
inline constexpr std::string_view kSummaryPrompt =
    "Summarize the conversation above so that the work can continue from your summary and the "
    "most recent messages alone; the earlier messages will no longer be visible. Do not call "
    "tools. Write plain text with these sections:\n"
    "1. Goals: what the user wants.\n"
    "2. Decisions: what was decided, and why.\n"
    "3. Files: files read, created or changed, with what matters about each.\n"
    "4. Commands: commands run and their outcomes.\n"
    "5. Open todos: what remains to be done.\n"
    "6. Last request: what the user asked last, verbatim when short.\n"
    "Be concise: at most 600 words.";
// The output-token cap of that side request.
inline constexpr int64_t kSummaryMaxTokens = 2048;
// Attempts of that side request (a transient failure is tried once more
// within TurnConfig::summary_timeout).
inline constexpr int kSummaryMaxAttempts = 2;
Message EngineStopMessage(std::string text);

struct TurnConfig {
  std::string session_id;
  std::string turn_id;  // generated when empty
  std::string model;
  std::string system_prompt;
  CommandKind command = CommandKind::kCode;
  Budget budget = DefaultBudget(CommandKind::kCode);
  // Every tool of the session. Read-only commands offer only the
  // non-mutating ones to the model.
  ToolSpecList tools;
  // Null: DefaultPermissionPolicy.
  std::shared_ptr<const PermissionPolicy> policy;
  std::vector<std::shared_ptr<Hook>> hooks;
  EventSink* sink = nullptr;  // may be null
  uint64_t first_seq = 1;     // seq of the first event this turn emits
  TurnCounters counters;      // starting counters (non-zero when resuming a paused turn)
  // The turn's node of its root turn's budget ledger (agentloop/
  // budget_ledger.h): the turn charges its tool calls and tokens to it, so
  // they reach every ancestor. Null: no ledger (the budget above alone).
  std::shared_ptr<BudgetLedger> ledger;
  // Stuck-loop guard: the same tool with the same arguments `stuck_repeats`
  // times within the last `stuck_window` calls stops the turn. 0 disables.
  int stuck_repeats = 8;
  int stuck_window = 12;
  int max_compactions = 3;  // prompt-too-long recoveries per model call
  // The model's context window and largest output-token cap (the engine
  // resolves them from the built-in table and configuration). 0: unknown;
  // then no request is clamped to the model and the context band is off.
  int64_t context_window = 0;
  int64_t max_output_tokens = 0;
  // A notice the turn emits once, right after turn_begin (e.g. that the
  // model's limits are a default). Empty: none.
  std::string start_notice;
  // Compaction summaries are written by the model in a side request (its
  // tokens are charged to the turn); false, or when the side request
  // fails: the seed's truncating summary.
  bool model_summaries = true;
  // The bound on that side request, its retries included (at most
  // kSummaryMaxAttempts attempts): past it the truncating summary is used.
  std::chrono::milliseconds summary_timeout{60000};
  // The measurement the previous turn of the session left (TurnResult), or
  // one rebuilt from the store. Ignored when the history is shorter than it
  // says (then chars / 4 of everything until the first report).
  std::optional<ContextMeasure> context_measure;
  // For the model's summary (and `agentloop compact --focus`): what the
  // summary should keep in particular. Empty: none.
  std::string compaction_focus;
  // Carried from compacted messages to the summary's meta (e.g. the todo
  // list's snapshot, so the list survives). Null: nothing carried.
  std::function<std::optional<Json>(std::span<const Message>)> carry_meta;
  std::filesystem::path workspace;
  // Time source for the wall-time budget (tests inject one).
  std::function<std::chrono::steady_clock::time_point()> clock;
  // Wall clock of the events' `ts`, Unix epoch milliseconds (tests inject
  // one). Null: SystemNowMs.
  std::function<int64_t()> now_ms;
};

struct TurnResult {
  StopReason stop = StopReason::kCompleted;
  std::string reason;      // human-readable; exact texts are in docs/protocol.md
  std::string final_text;  // the model's final answer (or synthetic text for stops)
  bool truncated = false;  // the answer was cut off by the output-token limit
  TurnCounters counters;
  std::vector<PendingItem> pending;      // for kPendingApproval / kPendingQuestion
  std::optional<Checkpoint> checkpoint;  // set when paused
  uint64_t next_seq = 0;                 // seq after the last event emitted
  // The context at the end of the turn: estimated tokens of the history
  // (docs/protocol.md, "Context budget") and the model's window (0: unknown).
  int64_t context_tokens = 0;
  int64_t context_window = 0;
  // The measurement behind context_tokens, for the next turn
  // (TurnConfig::context_measure); nullopt before any provider report.
  std::optional<ContextMeasure> context_measure;
};

namespace turn_action {
struct CallModel {
  ModelRequest request;
};
// Ask the approver about each request, in order. The driver may stop asking
// after the first kDeny (the batch is cancelled anyway); unasked requests are
// treated as skipped.
struct Decide {
  std::vector<ApprovalRequest> requests;
};
// Run the lanes in order; the calls of one lane may run concurrently. Feed the
// outputs back flattened, in the same order.
struct RunTools {
  std::vector<std::vector<ToolCall>> lanes;
  // What is left of the turn's wall-time budget as the batch starts (zero
  // when it has run out; nullopt: no wall-time budget). The driver sets
  // ToolContext::deadline to now + time_left for the batch's calls.
  std::optional<std::chrono::milliseconds> time_left;
};
struct Finished {
  TurnResult result;
};
}  // namespace turn_action

using TurnAction = std::variant<turn_action::CallModel, turn_action::Decide, turn_action::RunTools,
                                turn_action::Finished>;

// A turn's input: a person's message, a paused batch whose every item is
// decided (resume), or a retry of a failed turn.
struct TurnInput {
  Message message;
  // The batch of the open tool_use message with the decisions people made
  // (Checkpoint::decisions). The turn settles it exactly as it settles live
  // decisions: approved calls run through RunTools (tool_call_begin first,
  // hooks around them), a denial cancels the batch, and the loop goes on.
  std::optional<Checkpoint> decided;
  // Retry: no new message; the turn asks the model again from the history as
  // it stands, which must end with a user-role message (the prompt or the
  // tool results the failed attempt had committed).
  bool is_retry = false;
  // Compact by hand (`/compact [focus]`, `agentloop compact`): no message
  // and no answer; the view is summarised (docs/protocol.md, "Context
  // budget") with `focus` as the summary's focus, and the turn completes.
  bool compact = false;
  std::string focus;

  static TurnInput Compact(std::string focus) {
    TurnInput in;
    in.compact = true;
    in.focus = std::move(focus);
    return in;
  }
  static TurnInput User(std::string text) {
    TurnInput in;
    in.message = Message::User(std::move(text));
    return in;
  }
  static TurnInput Retry() {
    TurnInput in;
    in.is_retry = true;
    return in;
  }
  static TurnInput Decided(Checkpoint checkpoint) {
    TurnInput in;
    in.decided = std::move(checkpoint);
    return in;
  }
};

class Turn {
 public:
  // `transcript` is the session's history; the turn appends to it.
  // REQUIRES: `transcript` outlives the Turn.
  Turn(TurnConfig config, Transcript& transcript);
  ~Turn();
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  // Appends the input and opens the turn. Errors: kInvalidArgument when a
  // decided batch is not the open tool_use message or has undecided items,
  // or a retry's history does not end with a user-role message.
  Status Start(TurnInput input);

  // What to do now. After Finished, keeps returning Finished.
  TurnAction Next(std::stop_token stop);

  // Feed-back for the last CallModel / Decide / RunTools.
  void OnModelResult(Result<ModelResponse> result);
  void OnDecisions(std::vector<ApprovalDecision> decisions);
  void OnToolResults(std::vector<Result<ToolOutput>> outputs);

  // An event a running tool call reported about itself (ToolContext::report,
  // delivered by the runner on the thread that steps the turn): emitted at
  // once with the turn's next seq, so it lands after the call's
  // tool_call_begin and before its tool_call_end. Only while the turn waits
  // for the batch's tools (after RunTools, before OnToolResults), only for a
  // call of that batch that has not ended, and only a persisted type;
  // anything else is dropped.
  void OnToolEvent(std::string_view call_id, Event event);

  // Queues a `notice` event from a hook (any thread). It is emitted on the
  // turn's thread right after the hook call returns, so notices keep their
  // place in the stream (always before turn_end).
  void PostNotice(std::string level, std::string text);

  // Stream deltas from the provider, forwarded as events.
  void EmitTextDelta(std::string_view text);
  void EmitThinkingDelta(std::string_view text);
  // A provider's retry of a failed model request (a `retry` event).
  void EmitRetry(const RetryData& retry);

  // The tools offered to the model in this turn (read-only commands filter).
  std::span<const ToolSpec> offered_tools() const;
  const TurnConfig& config() const;

  // The check the server also applies to requests it receives: a mutating
  // tool in a read-only command is refused, unless its spec says it confines
  // itself there (ToolSpec::confined_in_read_only; the runner then sets
  // ToolContext::read_only). Returns the PLAN_MODE_REFUSED reason, or empty
  // when allowed.
  static std::string CheckReadOnly(CommandKind command, const ToolSpec& spec);

  // What a person's edit of a call's arguments must pass, live or durable:
  // plan mode, a JSON object valid for the tool's schema, and no deny rule
  // (an edit may turn an asked call into a denied one; the approval does
  // not cover that). Returns why the edit is refused, or empty.
  static std::string CheckEditedArguments(CommandKind command, const PermissionPolicy& policy,
                                          const ToolSpec& spec, const ToolCall& call);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentloop
