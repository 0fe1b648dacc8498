// The session lifecycle: opening (create or load, lock, pinned settings),
// running and resolving turns, closing. What a session is built from (the
// tool registry, the permission policy, the hooks, the system prompt) comes
// from the specification through engine/wiring.h; the provider and the
// approver are picked here.
//
// Persistence: StoreSink is the turn's event sink. It buffers the events the
// store keeps and commits them at the step boundaries the durability
// contract names (IsCommitBoundary): before a model call (step_begin),
// before a tool runs (tool_call_begin), when a batch pauses (pending: with
// its checkpoint and pending index, in one transaction) and when the turn
// ends. A failed commit fails the turn before its next step.
#include "agentloop/engine.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>

#include "agentloop/budget_ledger.h"
#include "agentloop/event_data.h"
#include "agentloop/runner.h"

#include "base/ids.h"
#include "base/strings.h"
#include "engine/pinned_settings.h"
#include "engine/subagents.h"
#include "engine/wiring.h"
#include "learning/paths.h"
#include "learning/reflector_hook.h"
#include "permissions/approvers.h"
#include "permissions/policy.h"
#include "permissions/webhook.h"
#include "protocol/codec.h"
#include "protocol/session_settings.h"
#include "providers/factory.h"
#include "providers/http_client.h"
#include "providers/model_limits.h"
#include "todo/snapshot.h"
#include "todo/todo_loop_hook.h"
#include "tools/builtin.h"

namespace agentloop {

std::string HowToConfigureProvider() {
  return "No model provider is configured. Choose one of:\n"
         "  export OPENAI_API_KEY=sk-...        (OpenAI; --provider openai, the default)\n"
         "  export ANTHROPIC_API_KEY=sk-ant-... and pass --provider anthropic\n"
         "  --base-url http://127.0.0.1:8080/v1  (a local OpenAI-compatible server: llama.cpp, "
         "vLLM, Ollama)\n"
         "  --provider script --script FILE      (replay a scripted conversation, offline)\n"
         "or set them in ~/.config/agentloop/config.toml:\n"
         "  [provider]\n"
         "  kind = \"anthropic\"\n"
         "  model = \"claude-sonnet-4-5\"\n";
}

namespace {

constexpr std::string_view kTodoStateKey = "todo_loop";
constexpr std::string_view kReflectorStateKey = "reflector";
// The accesses approved "for this session" (SessionApprovals keys).
constexpr std::string_view kApprovalsStateKey = "session_approvals";
// How long a closing session waits for a reflection in flight (the
// reflector's own timeout is 30 s).
constexpr std::chrono::seconds kReflectionDrain{35};
constexpr std::chrono::seconds kLockRecheck{1};

std::string DefaultModel(ProviderKind provider) {
  switch (provider) {
    case ProviderKind::kAnthropic:
      return "claude-sonnet-4-5";
    case ProviderKind::kOpenAIResponses:
      return "gpt-5";
    case ProviderKind::kScript:
      return "script";
    case ProviderKind::kOpenAI:
      break;
  }
  return "gpt-4.1";
}

// Buffers persisted events and commits them at step boundaries; forwards
// every event to the front end's observer after the store has it. Commits go
// through the session's lock, which fences them (SessionLock): once the lock
// is lost the next commit fails (IsLeaseLost), and the turn, whose sink failed,
// ends `failed` without running another tool.
class StoreSink final : public EventSink {
 public:
  StoreSink(SessionLock& lock, std::string session_id, EventSink* observer)
      : lock_(lock), session_id_(std::move(session_id)), observer_(observer) {}

  // The queued input this turn runs: taken from the queue with the first
  // commit (SessionLock::AppendTakingInput).
  void TakeInputWithFirstCommit(std::string input_id) { take_input_ = std::move(input_id); }
  // The decided batch this turn continues: claimed with the first commit
  // (SessionLock::AppendClaimingDecided), so a first commit that fails
  // leaves the batch decided for the next try.
  void ClaimBatchWithFirstCommit() { claim_batch_ = true; }
  // Writes the session's state the turn leaves (through the lock) just
  // before the commit of its `turn_end`. A failure fails that commit: the
  // end is not stored without its state (the sink fails, Flush returns the
  // error, and the turn's result is `failed` with it as the reason).
  void SaveStateBeforeEnd(std::function<Status()> save) { save_state_ = std::move(save); }
  // Takes the queued input now if no commit took it (the turn ended before
  // its first commit, or failed to commit). Best effort: a store error
  // leaves it queued.
  void TakeInputIfUntaken() {
    if (take_input_.empty()) return;
    (void)lock_.AppendTakingInput({}, take_input_);
    take_input_.clear();
  }

  Status OnEvent(const Event& event) override {
    if (ShouldPersist(event.type)) {
      buffer_.push_back(event);
      if (event.type == EventType::kPending) {
        // The pause is one commit: its events through the turn's end, its
        // checkpoint and the index of its pending ids. Only once that has
        // committed does anyone hear of it, so a decision sent the instant
        // the `pending` event arrives finds every item it names, and its
        // `decision` event is numbered after the paused turn's end.
        Result<PendingData> pause = PendingData::FromJson(event.data);
        if (!pause.ok()) return pause.error().WithContext("the pending event of the pause");
        pause_ = std::move(pause->checkpoint);
      }
      if (event.type == EventType::kTurnEnd && save_state_ && state_error_.ok()) {
        Status saved = save_state_();
        if (!saved.ok()) state_error_ = std::move(saved);
      }
      if (!state_error_.ok()) return state_error_;
      // While a pause waits for its turn's end, nothing else commits.
      if (IsCommitBoundary(event.type) && (!pause_ || event.type == EventType::kTurnEnd)) {
        Status s = Flush();
        if (!s.ok()) return s;
      }
    }
    if (observer_ == nullptr) return Status::Ok();
    // The front end sees every event in seq order: at once, except those
    // of a pause not yet stored, which it sees once the pause has
    // committed. A display failure (e.g. a closed pipe) never fails the
    // turn.
    if (pause_) {
      held_.push_back(event);
      return Status::Ok();
    }
    for (const Event& e : held_) (void)observer_->OnEvent(e);
    held_.clear();
    (void)observer_->OnEvent(event);
    return Status::Ok();
  }

  // Commits the buffered events (with the pause's checkpoint while it is
  // not stored yet).
  Status Flush() {
    if (!state_error_.ok()) return state_error_;
    if (buffer_.empty() && !pause_) return Status::Ok();
    if (claim_batch_) {
      // The continued turn's beginning and the claim of its batch: one
      // commit.
      Status claimed = lock_.AppendClaimingDecided(buffer_);
      if (!claimed.ok()) return claimed.WithContext("saving session " + session_id_);
      claim_batch_ = false;
      buffer_.clear();
      if (take_input_.empty() && !pause_) return Status::Ok();
    }
    if (!take_input_.empty()) {
      // The turn's beginning and the taking of its input: one commit (a
      // pause is never the first commit of a queued input's turn).
      Status taken = lock_.AppendTakingInput(buffer_, take_input_);
      if (!taken.ok()) return taken.WithContext("saving session " + session_id_);
      take_input_.clear();
      buffer_.clear();
      if (!pause_) return Status::Ok();
    }
    Status s = pause_ ? lock_.SaveCheckpoint(*pause_, buffer_) : lock_.Append(buffer_);
    if (!s.ok()) {
      return s.WithContext(pause_ ? "saving the paused batch of session " + session_id_
                                  : "saving session " + session_id_);
    }
    buffer_.clear();
    if (pause_) {
      pause_.reset();
      pause_saved_ = true;
    }
    return Status::Ok();
  }

  // The turn's pause (its checkpoint) is stored.
  bool pause_saved() const { return pause_saved_; }

 private:
  SessionLock& lock_;
  std::string session_id_;
  EventSink* observer_;
  std::vector<Event> buffer_;
  // The checkpoint of a `pending` event in the buffer, not stored yet.
  std::optional<Checkpoint> pause_;
  // Events of that pause the observer has not seen yet.
  std::vector<Event> held_;
  std::string take_input_;
  bool claim_batch_ = false;
  bool pause_saved_ = false;
  std::function<Status()> save_state_;
  Status state_error_;  // of save_state_: the end is not committed
};

// Remembers "allow for this session" answers in the session's cache, and
// keeps the cache with the session (`saved` is called after each change).
class RememberingApprover final : public Approver {
 public:
  RememberingApprover(Approver& inner, std::shared_ptr<permissions::SessionApprovals> approvals,
                      std::function<void()> saved)
      : inner_(inner), approvals_(std::move(approvals)), saved_(std::move(saved)) {}
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override {
    ApprovalDecision d = inner_.Decide(request, stop);
    if (d.kind == ApprovalDecision::Kind::kAllow && d.remember_for_session &&
        request.kind == PendingKind::kApproval) {
      approvals_->Remember(request.spec, d.edited_input ? *d.edited_input : request.call.input);
      if (saved_) saved_();
    }
    return d;
  }

 private:
  Approver& inner_;
  std::shared_ptr<permissions::SessionApprovals> approvals_;
  std::function<void()> saved_;
};

// Puts a subagent's asks to the person at the terminal of its caller's turn
// (the caller's console approver), saying which subagent asks.
class SubagentAsker final : public Approver {
 public:
  SubagentAsker(Approver& console, std::string path) : console_(console), path_(std::move(path)) {}
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override {
    ApprovalRequest named = request;
    named.reason =
        "subagent " + path_ + " asks" + (request.reason.empty() ? "" : ": ") + request.reason;
    return console_.Decide(named, std::move(stop));
  }
  // The console approver asked (a child's child asks the same person).
  Approver& console() const { return console_; }

 private:
  Approver& console_;
  std::string path_;
};

// Tells an approver that notifies someone (the webhook) of a pause only once
// the pause is stored: each ask is deferred at once and kept, and Deliver
// hands them to the inner approver after the pause's commit, so a receiver
// that decides from inside its handler finds the item.
class AfterPauseApprover final : public Approver {
 public:
  explicit AfterPauseApprover(Approver& inner) : inner_(inner) {}
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override {
    if (stop.stop_requested()) return ApprovalDecision::Deny("cancelled", "webhook");
    std::lock_guard<std::mutex> lock(mu_);
    held_.push_back(request);
    return ApprovalDecision::Defer("webhook");
  }
  // Notifies the inner approver of every ask kept (its answers are not
  // needed: the pause is stored).
  void Deliver(std::stop_token stop) {
    std::vector<ApprovalRequest> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (const ApprovalRequest& r : held) (void)inner_.Decide(r, stop);
  }

 private:
  Approver& inner_;
  std::mutex mu_;
  std::vector<ApprovalRequest> held_;  // Guarded by mu_.
};

// The scripted provider replays its script from the start. A session that
// is reopened (resume, approve in another process) continues where the
// stored history left off: skip one response per model-written assistant
// message already in the history.
class ResumingScriptProvider final : public ModelProvider {
 public:
  ResumingScriptProvider(std::shared_ptr<ModelProvider> inner, int skip)
      : inner_(std::move(inner)), skip_(skip) {}
  std::string_view name() const override { return inner_->name(); }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink& sink,
                                 std::stop_token stop) override {
    StreamSink quiet;
    for (; skip_ > 0; --skip_) (void)inner_->Complete(request, quiet, stop);
    return inner_->Complete(request, sink, stop);
  }

 private:
  std::shared_ptr<ModelProvider> inner_;
  int skip_;
};

// What a turn is to be: its input and, for a turn that continues (a decided
// batch, a retry), the turn it continues.
struct TurnPlan {
  TurnInput input;
  std::optional<Checkpoint> resumed_from;
  // The queued input the turn runs: taken with the turn's first commit.
  std::string queued_input_id;
};

// Everything a running turn uses, set up before it starts and kept until it
// has finished (whichever driver runs it). Not movable: the Turn and the
// runner point into it.
struct ActiveTurn {
  ActiveTurn(SessionLock& lock, const std::string& session_id, EventSink* observer)
      : sink(lock, session_id, observer) {}
  ActiveTurn(const ActiveTurn&) = delete;
  ActiveTurn& operator=(const ActiveTurn&) = delete;

  StoreSink sink;
  permissions::DurableApprover durable;
  std::unique_ptr<Approver> webhook;
  std::optional<AfterPauseApprover> after_pause;  // wraps `webhook`
  std::optional<RememberingApprover> remembering;
  std::unique_ptr<Turn> turn;
  RunnerDeps deps;
};

// Sessions open in this process. When the last one closes, the free heap
// the allocator keeps is given back to the system: after a burst of turns a
// server's memory would otherwise stay at the burst's peak (glibc returns
// little of a fragmented heap by itself).
std::atomic<size_t> g_open_sessions{0};

class OpenSessionMark {
 public:
  OpenSessionMark() { g_open_sessions.fetch_add(1, std::memory_order_relaxed); }
  ~OpenSessionMark() {
    if (g_open_sessions.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }
  OpenSessionMark(const OpenSessionMark&) = delete;
  OpenSessionMark& operator=(const OpenSessionMark&) = delete;
};

}  // namespace

// ---------------------------------------------------------------------------

class EngineImpl;

class SessionImpl final : public Session, public engine::SubagentHost {
 public:
  SessionImpl(EngineImpl& engine, SessionOptions options, SessionInfo info,
              std::unique_ptr<SessionLock> lock, SessionSnapshot snapshot, bool pinned,
              std::vector<engine::SettingChange> changes)
      : engine_(engine),
        options_(std::move(options)),
        pinned_(pinned),
        unsaved_changes_(std::move(changes)),
        last_turn_end_(std::move(snapshot.last_turn_end)),
        info_(std::move(info)),
        lock_(std::move(lock)),
        lock_checked_at_(std::chrono::steady_clock::now()),
        transcript_(std::move(snapshot.messages)),
        next_seq_(snapshot.last_seq + 1),
        open_checkpoint_(std::move(snapshot.open_checkpoint)),
        batch_decided_(snapshot.decided_checkpoint.has_value()) {
    for (const auto& w : snapshot.warnings) {
      warnings_.push_back(w.seq > 0 ? "event " + std::to_string(w.seq) + ": " + w.message
                                    : w.message);
    }
    // The provider's last count of the stored view, so the first turn of
    // this process does not start its estimate over (one pass at load).
    if (snapshot.context_mark && snapshot.context_mark->messages <= transcript_.size()) {
      int64_t chars = 0;
      auto msgs = transcript_.messages();
      for (size_t i = 0; i < snapshot.context_mark->messages; ++i) {
        chars += Transcript::MessageChars(msgs[i]);
      }
      context_measure_ = ContextMeasure{
          .tokens = snapshot.context_mark->tokens, .history_chars = chars, .fixed_chars = -1};
    }
    if (snapshot.recovered) {
      warnings_.push_back(
          "the previous run stopped while tools were running; the unfinished calls were "
          "answered as not run");
    }
  }

  ~SessionImpl() override {
    if (reflector_) {
      // A one-shot run waits (bounded) for a reflection in flight, then keeps
      // an undelivered nudge with the session for its next run.
      reflector_->WaitForIdle(kReflectionDrain);
      // Nobody is left to tell of a failure here: the nudge is then lost
      // (the reflector's state of the last turn's end is stored).
      (void)SaveReflectorState();
    }
    for (auto& h : hooks_) {
      try {
        h->OnShutdown();
      } catch (...) {  // a hook never fails the engine, not even at shutdown
      }
    }
  }

  Status Init();

  const std::string& id() const override { return info_.id; }
  const SessionInfo& info() const override { return info_; }
  std::span<const Message> history() const override { return transcript_.messages(); }
  const std::vector<std::string>& load_warnings() const override { return warnings_; }
  std::optional<Checkpoint> open_checkpoint() const override { return open_checkpoint_; }

  Result<TurnResult> Run(const std::string& prompt, const SessionCallbacks& callbacks,
                         std::stop_token stop) override {
    AL_ASSIGN_OR_RETURN(TurnPlan plan, PlanRun(prompt));
    return RunTurnWith(std::move(plan), callbacks, stop);
  }

  Result<TurnResult> Compact(const std::string& focus, const SessionCallbacks& callbacks,
                             std::stop_token stop) override {
    AL_RETURN_IF_ERROR(RefreshPause());
    if (open_checkpoint_ || batch_decided_) {
      return FailedPrecondition("session " + info_.id +
                                " has a paused batch; it cannot be compacted until the batch "
                                "is resolved and continued");
    }
    return RunTurnWith(TurnPlan{TurnInput::Compact(focus), std::nullopt, ""}, callbacks, stop);
  }

  std::vector<McpServerState> mcp_servers() const override {
    std::vector<McpServerState> out;
    for (const mcp::ServerStatus& s : mcp_servers_) out.push_back(mcp::CurrentState(s));
    return out;
  }

  ContextUsage context() const override {
    if (last_context_) return *last_context_;
    ModelLimits limits =
        ResolveModelLimits(options_.model, options_.context_window, options_.max_output_tokens);
    ContextUsage c;
    c.tokens = (static_cast<int64_t>(system_prompt_.size()) + transcript_.chars() + 3) / 4;
    if (context_measure_ && transcript_.chars() >= context_measure_->history_chars) {
      c.tokens = context_measure_->tokens +
                 (transcript_.chars() - context_measure_->history_chars + 3) / 4;
    }
    c.window = limits.context_window;
    return c;
  }

  // A retry continues a decided batch, or the newest turn when its history
  // ends with what the model is to answer (the prompt or committed tool
  // results) and it failed, or ran out of a budget that has been raised
  // since (the person widened it: SettingsOverrides::person_budgets).
  bool retryable() const override {
    if (open_checkpoint_) return false;
    if (batch_decided_) return true;
    if (!last_turn_end_ || transcript_.empty() || transcript_.back().role != Role::kUser) {
      return false;
    }
    if (last_turn_end_->stop == StopReason::kFailed) return true;
    return last_turn_end_->stop == StopReason::kBudgetExhausted &&
           BudgetRaisedOver(*last_turn_end_);
  }

  // The budgets now leave room for what `end`'s turn spent: every count
  // below its limit. (A turn out of wall time is not continued: its
  // elapsed time is not a count the turn carries.)
  bool BudgetRaisedOver(const LastTurnEnd& end) const {
    const Budget b = EffectiveBudget();
    if (end.reason.starts_with("wall time budget")) return false;
    return end.counters.tool_calls < b.max_tool_calls && end.counters.tokens < b.max_tokens &&
           end.counters.model_calls < b.max_turns;
  }

  Result<TurnResult> Retry(const SessionCallbacks& callbacks, std::stop_token stop) override {
    AL_ASSIGN_OR_RETURN(TurnPlan plan, PlanRetry());
    return RunTurnWith(std::move(plan), callbacks, stop);
  }

  std::optional<ResumeKind> resumable() const override {
    if (open_checkpoint_) return std::nullopt;
    if (batch_decided_) return ResumeKind::kDecidedBatch;
    if (retryable()) return ResumeKind::kRetry;
    if (last_turn_end_ && last_turn_end_->stop == StopReason::kFailed &&
        last_turn_end_->reason.starts_with(kCutTurnReason)) {
      return ResumeKind::kInterrupted;
    }
    return std::nullopt;
  }

  Result<TurnResult> Resume(const SessionCallbacks& callbacks, std::stop_token stop) override {
    AL_ASSIGN_OR_RETURN(TurnPlan plan, PlanResume());
    return RunTurnWith(std::move(plan), callbacks, stop);
  }

  // The same preparations and checks as Run/Retry, in a step of the
  // executor (they read and write the store); the turn is then driven by
  // RunTurnAsync.
  void StartRun(const std::string& prompt, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                std::stop_token stop) override {
    executor.Post(info_.id,
                  [this, prompt, &executor, callbacks = std::move(callbacks), stop]() mutable {
                    StartTurnWith(PlanRun(prompt), executor, std::move(callbacks), stop);
                  });
  }
  void StartRetry(TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                  std::stop_token stop) override {
    executor.Post(info_.id, [this, &executor, callbacks = std::move(callbacks), stop]() mutable {
      StartTurnWith(PlanRetry(), executor, std::move(callbacks), stop);
    });
  }
  void StartContinue(TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                     std::stop_token stop) override {
    executor.Post(info_.id, [this, &executor, callbacks = std::move(callbacks), stop]() mutable {
      StartTurnWith(PlanContinue(), executor, std::move(callbacks), stop);
    });
  }
  void StartResume(TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                   std::stop_token stop) override {
    executor.Post(info_.id, [this, &executor, callbacks = std::move(callbacks), stop]() mutable {
      StartTurnWith(PlanResume(), executor, std::move(callbacks), stop);
    });
  }
  void StartQueued(const QueuedInput& input, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                   std::stop_token stop) override {
    executor.Post(
        info_.id, [this, input, &executor, callbacks = std::move(callbacks), stop]() mutable {
          Result<TurnPlan> plan = input.continue_turn ? PlanResume() : PlanRun(input.input);
          if (plan.ok()) plan->queued_input_id = input.id;
          if (!plan.ok() && lock_) {
            // Answered with the error: taken, so it is not run again.
            (void)lock_->AppendTakingInput({}, input.id);
          }
          StartTurnWith(std::move(plan), executor, std::move(callbacks), stop);
        });
  }

  const SessionOptions& options() const override { return options_; }
  // This object holds the session's lock: it may run turns.
  bool holds_lock() const { return lock_ != nullptr; }

  // Records a person's decision about `rec` (an item of this session) and,
  // when that completes the batch and this object holds the session's lock,
  // continues the turn (a resolver opens a session it cannot lock only to
  // record a decision). See Engine::Resolve.
  Result<ResolveReport> Resolve(const PendingRecord& rec, const Resolution& resolution,
                                const SessionCallbacks& callbacks, std::stop_token stop);

  // Claims the session's decided batch and continues its turn; nullopt when
  // there is none (another process claimed it, or nothing is decided).
  Result<std::optional<TurnResult>> ContinueDecided(const SessionCallbacks& callbacks,
                                                    std::stop_token stop);

  // The turn Run would run on `prompt`. Errors: a paused batch is open or
  // decided but not continued (kFailedPrecondition naming it).
  Result<TurnPlan> PlanRun(const std::string& prompt);
  // The turn Retry would run (claiming a decided batch). Errors: nothing to
  // retry (kFailedPrecondition).
  Result<TurnPlan> PlanRetry();
  // The turn StartContinue runs: the decided batch, claimed. Errors:
  // kFailedPrecondition when the batch still waits or none is decided.
  Result<TurnPlan> PlanContinue();
  // The turn Resume runs (see ResumeKind). Errors: kFailedPrecondition
  // when nothing is resumable.
  Result<TurnPlan> PlanResume();
  // Claims the decided batch: the turn that continues it; nullopt when
  // there is none.
  Result<std::optional<TurnPlan>> PlanDecided();

  // Runs a turn on this thread: a new user input, or the continuation of a
  // paused batch or a failed turn.
  Result<TurnResult> RunTurnWith(TurnPlan plan, const SessionCallbacks& callbacks,
                                 std::stop_token stop);
  // Runs a turn with RunTurnAsync; `plan` is what PlanRun/PlanRetry made
  // (an error goes to `callbacks.done`). Called in a Post of `executor`.
  void StartTurnWith(Result<TurnPlan> plan, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                     std::stop_token stop);
  // What both drivers do before and after a turn: the lock check, the
  // provider's Warm, saving changed settings, the event sink, the turn's
  // configuration and approver, Turn::Start (PrepareTurn); committing the
  // rest of the events, the todo and reflector state, the checkpoint of a
  // pause and the totals (FinishTurn, with the driver's result).
  Result<std::unique_ptr<ActiveTurn>> PrepareTurn(TurnPlan plan, EventSink* observer,
                                                  StreamSink* stream, Approver* console_approver);
  Result<TurnResult> FinishTurn(ActiveTurn& active, Result<TurnResult> driven);

  Status SetModel(const std::string& model) override {
    if (Trim(model).empty()) return InvalidArgument("model name is empty");
    const std::string before = options_.model;
    options_.model = model;
    AL_RETURN_IF_ERROR(RebuildProvider());
    if (pinned_ && before != model) {
      unsaved_changes_.push_back({"model", Json(before), Json(model), "/model"});
    }
    return Status::Ok();
  }

  std::string TodoLoopCommand(const std::string& args) override {
    if (!todo_loop_) return "todo-loop: off for this session (--no-todo-loop)";
    std::string out =
        todo_loop_->TodoLoopCommand(info_.id, args, transcript_.messages(), options_.workspace);
    if (Status saved = SaveTodoState(); !saved.ok()) {
      out += "\ntodo-loop: the change holds for this process only: " + saved.ToString();
    }
    return out;
  }

  Json todo_loop_status() const override {
    if (!todo_loop_) return nullptr;
    return todo_loop_->Status(info_.id).ToJson();
  }

  Budget budget() const override { return EffectiveBudget(); }
  TurnCounters totals() const override {
    TurnCounters t = settled_totals_;
    AddCounters(t, latest_turn_counters_);
    return t;
  }

  ToolContext MakeToolContext() const {
    ToolContext ctx;
    ctx.workspace = options_.workspace;
    ctx.session_id = info_.id;
    ctx.ledger = ledger_;
    ctx.scrubbed_env = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTLOOP_WEBHOOK_SECRET"};
    ctx.scrubbed_env.insert(ctx.scrubbed_env.end(), options_.env_remove.begin(),
                            options_.env_remove.end());
    // Skills may ship extra files the model reads with `read` (only folders
    // whose real location stays where it belongs).
    ctx.extra_read_roots = extra_read_roots_;
    ctx.files = options_.extensions.files;
    if (rules_policy_) {
      ctx.path_rule = [policy = rules_policy_, registry = &registry_](std::string_view tool,
                                                                      const std::string& abs) {
        const Tool* t = registry->Find(tool);
        if (t == nullptr) return PathRule::kNone;
        switch (policy->PathRestriction(t->spec(), abs)) {
          case Decision::kDeny:
            return PathRule::kDeny;
          case Decision::kAsk:
            return PathRule::kAsk;
          case Decision::kAllow:
            break;
        }
        return PathRule::kNone;
      };
    }
    return ctx;
  }
  // Commits the changes of the pinned settings not yet stored, with their
  // `settings` event (in `turn_id`), before anything runs under them.
  Status SaveSettingsChanges(const std::string& turn_id);

  // Opens a child session for `request` and runs its turn (SubagentHost).
  Result<engine::SubagentRun> RunSubagent(const engine::SubagentRequest& request,
                                          std::stop_token stop) override;
  // The node of the parent's ledger this child session's turns run under
  // (set by the parent before it runs the child); null: the session's turns
  // keep a ledger of their own.
  void set_ledger_node(std::shared_ptr<BudgetLedger> node) { ledger_node_ = std::move(node); }
  // The turn that ended last (the paused one, for a paused session).
  std::string paused_turn_id() const { return last_turn_end_ ? last_turn_end_->turn_id : ""; }

 private:
  Budget EffectiveBudget() const { return engine::EffectiveBudget(options_); }
  // A pause this object knows of may have been decided since by resolvers
  // in other processes (they record decisions without the lock): reads the
  // batch's state again. An open batch leaves the store's open state only
  // by being decided (claiming it takes the lock, which this object holds
  // when it can run a turn), so a vanished one is decided.
  Status RefreshPause() {
    if (!open_checkpoint_) return Status::Ok();
    AL_ASSIGN_OR_RETURN(open_checkpoint_, engine_store().OpenCheckpoint(info_.id));
    if (!open_checkpoint_) batch_decided_ = true;
    return Status::Ok();
  }

  Status RebuildProvider();
  // Offers the agent definitions this session may start as agent__<name>
  // tools (a root session: all; a child: those its definition lists), and
  // applies a child's tool allow-list.
  void AddSubagentTools(const engine::WiringContext& ctx);
  // Only the holder of the session writes its state (through its lock): a
  // resolver that opened it without the lock must not overwrite what the
  // holder keeps. Without the lock these write nothing.
  Status SaveTodoState() {
    if (!todo_loop_ || !lock_) return Status::Ok();
    return lock_->SetState(kTodoStateKey, todo_loop_->ExportState(info_.id))
        .WithContext("saving the todo state of session " + info_.id);
  }
  SessionStore& engine_store();

  void RememberDecided(const std::vector<BatchDecision>& decisions);
  // The session's approvals changed ("allow for this session"): they are
  // written with the state the turn leaves (SaveTurnState), through the
  // lock, by the holder, which is who remembers them (a live decision in
  // its turn, or a decided batch it claims).
  void SaveApprovals() { approvals_changed_ = true; }

  Status SaveReflectorState() {
    if (!reflector_ || !lock_) return Status::Ok();
    return lock_->SetState(kReflectorStateKey, reflector_->ExportState(info_.id))
        .WithContext("saving the reflector state of session " + info_.id);
  }

  // What a turn leaves besides its events: the todo loop's and the
  // reflector's state and changed approvals, written just before the
  // commit of its end (StoreSink::SaveStateBeforeEnd).
  Status SaveTurnState() {
    AL_RETURN_IF_ERROR(SaveTodoState());
    AL_RETURN_IF_ERROR(SaveReflectorState());
    if (approvals_changed_ && lock_) {
      AL_RETURN_IF_ERROR(lock_->SetState(kApprovalsStateKey, Json(approvals_->Keys()))
                             .WithContext("saving the approvals of session " + info_.id));
      approvals_changed_ = false;
    }
    return Status::Ok();
  }

  // First: destroyed after everything else the session holds.
  OpenSessionMark open_mark_;
  EngineImpl& engine_;
  SessionOptions options_;
  // The session has pinned settings (options_ are them, with the overrides
  // applied); false for a session stored without them.
  bool pinned_ = false;
  // The model whose unknown limits a turn already announced.
  std::string warned_limits_for_;
  // The context as the last turn left it (context()).
  std::optional<ContextUsage> last_context_;
  // The provider's last measurement of the context (TurnConfig::context_measure).
  std::optional<ContextMeasure> context_measure_;
  std::vector<engine::SettingChange> unsaved_changes_;
  std::optional<LastTurnEnd> last_turn_end_;
  SessionInfo info_;
  std::unique_ptr<SessionLock> lock_;
  // When the lock was last known to be ours (acquired or refreshed).
  std::chrono::steady_clock::time_point lock_checked_at_;
  Transcript transcript_;
  uint64_t next_seq_;
  std::optional<Checkpoint> open_checkpoint_;
  // The paused batch is decided and waits for ContinueDecided, which claims
  // it from the store.
  bool batch_decided_ = false;
  std::vector<std::string> warnings_;
  std::shared_ptr<ModelProvider> provider_;
  ToolRegistry registry_;
  std::shared_ptr<ReadLedger> ledger_ = std::make_shared<ReadLedger>();
  std::shared_ptr<BudgetLedger> ledger_node_;
  std::shared_ptr<permissions::SessionApprovals> approvals_;
  // approvals_ changed since they were last written (SaveApprovals).
  std::atomic<bool> approvals_changed_{false};
  std::shared_ptr<const PermissionPolicy> policy_;
  std::vector<std::shared_ptr<Hook>> hooks_;
  std::shared_ptr<todo::TodoLoopHook> todo_loop_;
  std::shared_ptr<learning::ReflectorHook> reflector_;
  std::vector<std::filesystem::path> extra_read_roots_;
  // Set by Init; each holds its server's client (whose health is live).
  std::vector<mcp::ServerStatus> mcp_servers_;
  std::shared_ptr<const permissions::RulesPolicy> rules_policy_;
  std::string system_prompt_;
  static void AddCounters(TurnCounters& into, const TurnCounters& c) {
    into.tool_calls += c.tool_calls;
    into.tokens += c.tokens;
    into.model_calls += c.model_calls;
    into.usage += c.usage;
  }
  // totals(): the turns before the latest one run here, plus the latest
  // turn's counters. A resumed turn reports the counters of the whole turn
  // (those it started from included), so they replace what was counted for
  // it rather than add to it.
  TurnCounters settled_totals_;
  std::string latest_turn_id_;
  TurnCounters latest_turn_counters_;
  std::mutex notes_mu_;
  Turn* current_turn_ = nullptr;  // Guarded by notes_mu_; set while a turn runs.
  // While a turn asks a person at a terminal (its approver is the console
  // approver of SessionCallbacks): that approver, and the turn's observer.
  // A subagent's child asks the same person and reports its events to the
  // same observer. Guarded by notes_mu_.
  Approver* live_console_ = nullptr;
  EventSink* live_observer_ = nullptr;
};

namespace {

// A stored session opens only with the extensions it was created with (by
// name): its history may use their tools, its hooks may have guarded it.
Status CheckExtensions(const std::string& session_id, const Json& stored,
                       const SessionExtensions& given) {
  Result<PinnedExtensions> pinned = PinnedExtensionsFromJson(stored);
  if (!pinned.ok()) return DataLoss("session " + session_id + ": " + pinned.error().message());
  std::vector<std::string> missing;
  for (const std::string& name : pinned->tools) {
    bool found = false;
    for (const auto& t : given.tools) found = found || (t && t->spec().name == name);
    if (!found) missing.push_back("tool '" + name + "'");
  }
  for (const std::string& name : pinned->hooks) {
    bool found = false;
    for (const auto& h : given.hooks) found = found || (h && h->name() == name);
    if (!found) missing.push_back("hook '" + name + "'");
  }
  if (pinned->provider_factory && !given.provider_factory) missing.push_back("a provider factory");
  if (missing.empty()) return Status::Ok();
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  return FailedPrecondition("session " + session_id +
                            " was created with extensions this process does not give: " + list +
                            " (pass them in SessionOptions::extensions to open it)");
}

// The provider a session's options describe, environment defaults applied.
ProviderConfig ProviderConfigFor(const SessionOptions& o, const EnvMap& env) {
  ProviderConfig pc;
  pc.kind = std::string(ProviderKindName(o.provider));
  pc.model = o.model;
  pc.base_url = o.base_url;
  pc.api_key = o.api_key;
  pc.script_path = o.script_path;
  pc.use_max_tokens_field = o.use_max_tokens_field;
  pc.images = o.images;
  return WithEnvDefaults(pc, env);
}

// A remote provider needs an API key, unless a base URL was given (a local
// server may want none).
bool Configured(const ProviderConfig& pc, const SessionOptions& o) {
  return !pc.api_key.empty() || !o.base_url.empty();
}

}  // namespace

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(EngineOptions options) : options_(std::move(options)) {}

  Status Init() {
    std::filesystem::path dir = options_.data_dir;
    if (dir.empty()) {
      AL_ASSIGN_OR_RETURN(dir, DefaultDataDir(options_.env));
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return Unavailable("cannot create data directory " + dir.string() + ": " + ec.message());
    data_dir_ = dir;
    if (options_.preconnect_for) {
      const ProviderConfig pc = ProviderConfigFor(*options_.preconnect_for, options_.env);
      if (IsRemoteProvider(options_.preconnect_for->provider) &&
          !options_.preconnect_for->extensions.provider_factory &&
          Configured(pc, *options_.preconnect_for) && !pc.base_url.empty()) {
        http()->Preconnect(pc.base_url, pc.connect_timeout);
      }
    }
    if (options_.store) {
      store_ = options_.store;
      return Status::Ok();
    }
    if (!options_.store_url.empty()) {
      if (!IsPostgresUrl(options_.store_url)) {
        return InvalidArgument(
            "store.url must be a postgresql:// (or postgres://) URL; leave it empty for the "
            "SQLite database in the data directory");
      }
      PostgresStoreOptions pg_options;
      pg_options.lock_ttl = options_.store_lease_ttl;
      if (options_.store_connections > 0) pg_options.pool_size = options_.store_connections;
      pg_options.pool_timeout = options_.store_pool_timeout;
      AL_ASSIGN_OR_RETURN(auto pg, OpenPostgresStore(options_.store_url, std::move(pg_options)));
      store_ = std::move(pg);
      return Status::Ok();
    }
    SqliteStoreOptions store_options;
    store_options.sync = options_.store_sync;
    AL_ASSIGN_OR_RETURN(auto store, OpenSqliteStore(dir / kSessionsDbName, store_options));
    store_ = std::move(store);
    return Status::Ok();
  }

  SessionStore& store() override { return *store_; }
  const EngineOptions& options() const { return options_; }
  // The clock of the events' `ts`.
  int64_t NowMs() const { return options_.now_ms ? options_.now_ms() : SystemNowMs(); }
  const std::filesystem::path& data_dir() const { return data_dir_; }

  std::shared_ptr<HttpClient> http() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!http_) {
      HttpClientOptions o;
      o.io_context = options_.io_context;
      http_ = HttpClient::Create(std::move(o));
    }
    return http_;
  }

  // The workspace made canonical. Errors: kInvalidArgument when it is not an
  // accessible directory.
  static Result<std::filesystem::path> CanonicalWorkspace(std::filesystem::path ws) {
    std::error_code ec;
    if (ws.empty()) ws = std::filesystem::current_path(ec);
    auto canon = std::filesystem::canonical(ws, ec);
    if (ec) {
      return InvalidArgument("workspace " + ws.string() +
                             " is not an accessible directory: " + ec.message());
    }
    if (!std::filesystem::is_directory(canon)) {
      return InvalidArgument("workspace " + canon.string() + " is not a directory");
    }
    return canon;
  }

  // A stored session's options: its pinned settings with the caller's
  // overrides applied, plus what is per process (secrets, terminal).
  // nullopt: nothing is pinned (a session stored by an older agentloop).
  Result<std::optional<engine::AppliedSettings>> PinnedOptions(const std::string& session_id,
                                                               const SessionOptions& caller) {
    AL_ASSIGN_OR_RETURN(std::optional<Json> stored, store_->GetSettings(session_id));
    if (!stored) return std::optional<engine::AppliedSettings>();
    Result<SessionOptions> pinned = PinnedSettingsFromJson(*stored);
    if (!pinned.ok()) {
      return DataLoss("session " + session_id + ": " + pinned.error().message());
    }
    SettingsOverrides overrides = caller.overrides;
    if (overrides.workspace) {
      AL_ASSIGN_OR_RETURN(overrides.workspace, CanonicalWorkspace(*overrides.workspace));
    }
    AL_ASSIGN_OR_RETURN(engine::AppliedSettings applied,
                        engine::ApplyOverrides(*pinned, overrides));
    SessionOptions& o = applied.options;
    o.session_id = caller.session_id;
    o.continue_latest = caller.continue_latest;
    o.interactive = caller.interactive;
    // The secrets come from the variables the settings name (looked up when
    // the provider or approver is built); the caller's are the fallback.
    o.api_key = caller.api_key;
    o.webhook_secret = caller.webhook_secret;
    o.extensions = caller.extensions;
    o.mcp_servers = caller.mcp_servers;
    AL_RETURN_IF_ERROR(CheckExtensions(session_id, *stored, caller.extensions));
    auto ws = CanonicalWorkspace(o.workspace);
    if (!ws.ok()) {
      return FailedPrecondition("session " + session_id + " runs in " + o.workspace.string() +
                                ", which is no longer an accessible directory");
    }
    o.workspace = *ws;
    return std::optional<engine::AppliedSettings>(std::move(applied));
  }

  // How OpenImpl treats a stored session another process holds.
  enum class LockMode {
    kRequire,  // kBusy
    kIfFree,   // open it without the lock (and without crash repair): it cannot run turns
  };

  Result<std::unique_ptr<SessionImpl>> OpenImpl(SessionOptions options,
                                                LockMode lock_mode = LockMode::kRequire) {
    AL_ASSIGN_OR_RETURN(options.workspace, CanonicalWorkspace(options.workspace));
    if (options.model.empty()) options.model = DefaultModel(options.provider);

    std::string session_id;
    if (!options.session_id.empty()) {
      AL_ASSIGN_OR_RETURN(session_id, store_->FindSession(options.session_id));
    } else if (options.continue_latest) {
      AL_ASSIGN_OR_RETURN(SessionInfo newest, store_->NewestInWorkspace(options.workspace));
      session_id = newest.id;
    }
    SessionInfo info;
    std::unique_ptr<SessionLock> lock;
    SessionSnapshot snap;
    bool pinned = false;
    std::vector<engine::SettingChange> changes;
    const auto pid = static_cast<int64_t>(getpid());
    if (session_id.empty()) {
      NewSessionParams p;
      p.workspace = options.workspace;
      p.provider = std::string(ProviderKindName(options.provider));
      p.model = options.model;
      p.command = options.command;
      p.tenant = options.tenant;
      p.agent = options.agent;
      p.metadata = options.metadata;
      p.first_message = options.title;
      p.parent_id = options.subagents.parent_id;
      if (options.system_prompt && options.system_prompt_source.empty()) {
        options.system_prompt_source = "(given)";
      }
      p.settings = PinnedSettingsToJson(options);
      pinned = true;
      // Created and locked in one commit.
      AL_ASSIGN_OR_RETURN(auto created, store_->CreateLockedSession(p, pid));
      info = std::move(created.info);
      lock = std::move(created.lock);
      // Created just now and locked by this process: no history yet, so its
      // snapshot is its row (what Load would read back; a store test holds
      // the two equal), without a read of the event log.
      snap.info = info;
    } else {
      AL_ASSIGN_OR_RETURN(info, store_->GetSession(session_id));
      // The pinned settings are checked before the lock is taken: a refused
      // override leaves the session as it was.
      AL_ASSIGN_OR_RETURN(std::optional<engine::AppliedSettings> applied,
                          PinnedOptions(info.id, options));
      if (applied) {
        options = std::move(applied->options);
        changes = std::move(applied->changes);
        pinned = true;
      }
      Result<std::unique_ptr<SessionLock>> locked = store_->AcquireLock(info.id, pid);
      if (locked.ok()) {
        lock = std::move(*locked);
      } else if (lock_mode != LockMode::kIfFree || locked.error().code() != Code::kBusy) {
        return locked.error();
      }
      LoadOptions load;
      load.repair = lock != nullptr;  // the holder's tool calls may be running
      AL_ASSIGN_OR_RETURN(snap, store_->Load(info.id, load));
      // Taken over: a turn its previous holder left unfinished ends first,
      // whatever runs next.
      if (lock) AL_RETURN_IF_ERROR(EndCutTurn(*lock, snap, NowMs()));
      info = snap.info;
    }
    auto session = std::make_unique<SessionImpl>(*this, std::move(options), info, std::move(lock),
                                                 std::move(snap), pinned, std::move(changes));
    AL_RETURN_IF_ERROR(session->Init());
    return session;
  }

  // A new child session (SessionImpl::RunSubagent).
  Result<std::unique_ptr<SessionImpl>> OpenChild(SessionOptions options) {
    return OpenImpl(std::move(options));
  }

  Result<std::unique_ptr<Session>> OpenSession(const SessionOptions& options) override {
    AL_ASSIGN_OR_RETURN(auto s, OpenImpl(options));
    return std::unique_ptr<Session>(std::move(s));
  }

  Result<std::optional<PendingRecord>> FindPending(const std::string& pending_id) override {
    AL_ASSIGN_OR_RETURN(std::optional<PendingRecord> exact, store_->GetPending(pending_id));
    if (exact || IsWholePendingId(pending_id)) return exact;
    if (pending_id.size() < 4) {
      return InvalidArgument("pending id prefix '" + pending_id +
                             "' is too short (at least 4 characters)");
    }
    AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> open, store_->ListPending(std::nullopt));
    std::optional<PendingRecord> found;
    for (PendingRecord& r : open) {
      if (!r.item.id.starts_with(pending_id)) continue;
      if (found) return InvalidArgument("pending id prefix '" + pending_id + "' is ambiguous");
      found = std::move(r);
    }
    return found;
  }

  // One inbox for a tree of subagents: a session's list holds its own
  // items and, in place of each call that waits on a subagent, that
  // subagent's items (recursively); the list of every session leaves out
  // the waiting calls (their children's items are listed on their own).
  // Each item carries its root session and the path of agents that asks.
  Result<std::vector<PendingRecord>> ListPending(std::optional<std::string> session_id) override {
    std::vector<PendingRecord> out;
    if (session_id) {
      AL_ASSIGN_OR_RETURN(std::string full, store_->FindSession(*session_id));
      AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> own,
                          store_->ListPending(std::string_view(full)));
      AL_ASSIGN_OR_RETURN(std::string root, RootOf(full));
      for (const PendingRecord& r : own) AL_RETURN_IF_ERROR(ExpandPending(r, root, out, 0));
      return out;
    }
    AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> all, store_->ListPending(std::nullopt));
    std::map<std::string, std::pair<std::string, std::string>> seen;  // id -> root, path
    for (PendingRecord& r : all) {
      if (r.item.kind == PendingKind::kSubagent) continue;
      auto it = seen.find(r.session_id);
      if (it == seen.end()) {
        AL_ASSIGN_OR_RETURN(std::string root, RootOf(r.session_id));
        AL_ASSIGN_OR_RETURN(std::string path, PathOf(r.session_id));
        it = seen.emplace(r.session_id, std::make_pair(root, path)).first;
      }
      r.root_session_id = it->second.first;
      if (r.item.path.empty()) r.item.path = it->second.second;
      out.push_back(std::move(r));
    }
    return out;
  }

  // The items a person decides for `items` of `session_id`'s paused batch:
  // a call waiting on a subagent stands for that subagent's items.
  Result<std::vector<PendingItem>> PendingOfTree(const std::string& session_id,
                                                 const std::vector<PendingItem>& items) {
    bool any = false;
    for (const PendingItem& p : items) any = any || p.kind == PendingKind::kSubagent;
    if (!any) return items;
    std::vector<PendingRecord> out;
    for (const PendingItem& p : items) {
      PendingRecord r;
      r.session_id = session_id;
      r.item = p;
      AL_RETURN_IF_ERROR(ExpandPending(r, "", out, 0));
    }
    std::vector<PendingItem> flat;
    for (PendingRecord& r : out) flat.push_back(std::move(r.item));
    return flat;
  }

  // The child session that the call `tool_use_id` of `parent_id`'s turn
  // `turn_id` started, if any.
  Result<std::optional<std::string>> FindChild(const std::string& parent_id,
                                               const std::string& turn_id,
                                               const std::string& tool_use_id) {
    if (turn_id.empty() || tool_use_id.empty()) return std::optional<std::string>();
    SessionListOptions lo;
    lo.parent_id = parent_id;
    lo.limit = 0;
    AL_ASSIGN_OR_RETURN(std::vector<SessionInfo> children, store_->ListSessions(lo));
    for (const SessionInfo& c : children) {
      AL_ASSIGN_OR_RETURN(std::optional<Json> settings, store_->GetSettings(c.id));
      if (!settings || !settings->contains("subagent")) continue;
      const Json& sa = (*settings)["subagent"];
      if (sa.value("parent_turn_id", std::string()) == turn_id &&
          sa.value("tool_use_id", std::string()) == tool_use_id) {
        return std::optional<std::string>(c.id);
      }
    }
    return std::optional<std::string>();
  }

  // `child`'s paused batch is decided: decides the item of its caller's
  // batch that waits on it, and so on up while each batch is then decided.
  // Returns the root session when its batch is decided by this (its turn
  // is to continue); nullopt when a caller still waits on other items or
  // has not stored its pause yet (it then wakes itself, see FinishTurn).
  Result<std::optional<std::string>> WakeCallers(const SessionInfo& child) {
    SessionInfo cur = child;
    while (!cur.parent_id.empty()) {
      AL_ASSIGN_OR_RETURN(std::optional<Checkpoint> cp, store_->OpenCheckpoint(cur.parent_id));
      if (!cp) return std::optional<std::string>();
      const PendingItem* waiting = nullptr;
      for (const PendingItem& p : cp->outstanding) {
        if (p.kind == PendingKind::kSubagent && p.child_session_id == cur.id) waiting = &p;
      }
      if (waiting == nullptr) return std::optional<std::string>();
      AL_ASSIGN_OR_RETURN(std::string path, PathOf(cur.id));
      Event logged = MakeEvent(
          DecisionData{.tool_use_id = waiting->tool_use_id,
                       .tool = waiting->tool,
                       .decision = Decision::kAllow,
                       .reason = "the items of subagent " + path + " are decided: it continues",
                       .rule = "",
                       .by = "subagent",
                       .edited = false,
                       .pending_id = waiting->id},
          cur.parent_id, cp->turn_id);
      logged.ts = NowMs();
      auto record = [](Checkpoint& c, const PendingItem& stored) -> Result<ResolveAction> {
        c.decisions.push_back(BatchDecision{stored, ApprovalDecision::Allow("subagent")});
        return ResolveAction::kResolved;
      };
      AL_ASSIGN_OR_RETURN(ResolveOutcome outcome,
                          store_->Resolve(waiting->id, record, {&logged, 1}));
      if (outcome.already_resolved || !outcome.closed) return std::optional<std::string>();
      AL_ASSIGN_OR_RETURN(cur, store_->GetSession(cur.parent_id));
    }
    if (cur.id == child.id) return std::optional<std::string>();
    return std::optional<std::string>(cur.id);
  }

  Result<ResolveReport> Resolve(const std::string& pending_id, const Resolution& resolution,
                                const SessionOptions& options, const SessionCallbacks& callbacks,
                                std::stop_token stop) override;
  // Resolve without the outcome's classification.
  Result<ResolveReport> RecordAndContinue(const std::string& pending_id,
                                          const Resolution& resolution,
                                          const SessionOptions& options,
                                          const SessionCallbacks& callbacks, std::stop_token stop);

  // Records `decision` about `rec` with its decision event in one store
  // transaction; `check`, when set, vets it there against the stored
  // checkpoint (its error rolls the decision back).
  Result<ResolveOutcome> RecordDecision(const PendingRecord& rec, const Resolution& resolution,
                                        const ApprovalDecision& decision,
                                        const std::function<Status(const Checkpoint&)>& check);

  // `options` for opening the stored session `info`: in its workspace,
  // under its own command (a session stored without pinned settings
  // continues so, whatever the caller's flags say), with its model unless
  // the caller names one.
  static SessionOptions OptionsForStored(const SessionInfo& info, SessionOptions options) {
    options.session_id = info.id;
    options.workspace = info.workspace;
    if (auto kind = ParseCommandKind(info.command)) options.command = *kind;
    if (options.model.empty()) options.model = info.model;
    return options;
  }

  Result<PolicyVerdict> Evaluate(const SessionOptions& options, const ToolCall& call) override {
    AL_ASSIGN_OR_RETURN(std::string id, store_->FindSession(options.session_id));
    AL_ASSIGN_OR_RETURN(SessionInfo info, store_->GetSession(id));
    SessionOptions opts = OptionsForStored(info, options);
    AL_ASSIGN_OR_RETURN(std::optional<engine::AppliedSettings> applied, PinnedOptions(id, opts));
    if (applied) opts = std::move(applied->options);
    AL_ASSIGN_OR_RETURN(opts.workspace, CanonicalWorkspace(opts.workspace));
    engine::WiringContext ctx = engine::MakeWiringContext(options_.env, data_dir());
    ctx.hidden_paths = options_.sandbox_hidden;
    if (options_.tenant_user_scopes) ctx.user_scope_tenant = info.tenant;
    ctx.start_mcp_servers = false;
    AL_ASSIGN_OR_RETURN(engine::WiredTools tools, engine::WireTools(opts, ctx));
    const Tool* tool = tools.registry.Find(call.name);
    if (tool == nullptr) {
      return InvalidArgument("session " + id + " has no tool '" + call.name + "'");
    }
    AL_ASSIGN_OR_RETURN(engine::WiredPolicy policy, engine::WirePolicy(opts, tools.registry, ctx));
    return policy.rules->Evaluate(tool->spec(), call);
  }

 private:
  // The root of `session_id`'s tree of subagents (itself for a root).
  Result<std::string> RootOf(std::string session_id) {
    for (int hops = 0; hops < kMaxTreeHops; ++hops) {
      AL_ASSIGN_OR_RETURN(SessionInfo info, store_->GetSession(session_id));
      if (info.parent_id.empty()) return info.id;
      session_id = info.parent_id;
    }
    return DataLoss("session " + session_id + ": its chain of parent sessions does not end");
  }
  // The path of agents pinned to a child session ("root/reviewer"); empty
  // for a root session.
  Result<std::string> PathOf(const std::string& session_id) {
    AL_ASSIGN_OR_RETURN(std::optional<Json> settings, store_->GetSettings(session_id));
    if (!settings || !settings->contains("subagent")) return std::string();
    return (*settings)["subagent"].value("path", std::string());
  }
  // Appends `r`, or for a call waiting on a subagent that subagent's items.
  Status ExpandPending(const PendingRecord& r, const std::string& root,
                       std::vector<PendingRecord>& out, int depth) {
    if (r.item.kind != PendingKind::kSubagent) {
      PendingRecord c = r;
      c.root_session_id = root;
      if (c.item.path.empty()) {
        AL_ASSIGN_OR_RETURN(c.item.path, PathOf(c.session_id));
      }
      out.push_back(std::move(c));
      return Status::Ok();
    }
    if (depth >= kMaxTreeHops) return Status::Ok();
    AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> children,
                        store_->ListPending(std::string_view(r.item.child_session_id)));
    for (const PendingRecord& c : children) {
      AL_RETURN_IF_ERROR(ExpandPending(c, root, out, depth + 1));
    }
    return Status::Ok();
  }
  // Bounds walks of the tree (the depth cap keeps real trees far below).
  static constexpr int kMaxTreeHops = 64;

 public:
  Result<std::shared_ptr<ModelProvider>> Provider(const SessionOptions& options) override {
    AL_ASSIGN_OR_RETURN(std::unique_ptr<ModelProvider> made,
                        MakeModelProvider(options, "agent " + options.agent));
    return std::shared_ptr<ModelProvider>(std::move(made));
  }

  // The provider `o` describes, its API key from the variable it names when
  // set, on the engine's HTTP client. `who` names the owner in errors.
  Result<std::unique_ptr<ModelProvider>> MakeModelProvider(const SessionOptions& o,
                                                           const std::string& who) {
    SessionOptions with_key = o;
    if (!o.api_key_env.empty()) {
      auto it = options_.env.find(o.api_key_env);
      if (it != options_.env.end() && !it->second.empty()) {
        with_key.api_key = it->second;
      } else if (with_key.api_key.empty()) {
        return InvalidArgument("the API key of " + who + " comes from $" + o.api_key_env +
                               ", which is not set");
      }
    }
    const ProviderConfig pc = ProviderConfigFor(with_key, options_.env);
    const bool remote = IsRemoteProvider(o.provider);
    if (remote && !Configured(pc, with_key)) {
      const std::string kind(ProviderKindName(o.provider));
      const std::string var =
          o.provider == ProviderKind::kAnthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
      return InvalidArgument("provider " + kind + " has no API key: " + var +
                             " is not set. Set it (export " + var +
                             "=...), name the variable that holds the key with "
                             "provider.api_key_env, or give --base-url for a server that needs "
                             "none.");
    }
    return MakeProvider(pc, remote ? http() : nullptr);
  }

 private:
  EngineOptions options_;
  std::filesystem::path data_dir_;
  std::shared_ptr<SessionStore> store_;
  std::mutex mu_;
  std::shared_ptr<HttpClient> http_;  // Guarded by mu_.
};

SessionStore& SessionImpl::engine_store() { return engine_.store(); }

Status SessionImpl::RebuildProvider() {
  if (options_.extensions.provider_factory) {
    AL_ASSIGN_OR_RETURN(std::shared_ptr<ModelProvider> made,
                        options_.extensions.provider_factory(options_));
    if (!made) return InvalidArgument("the provider factory of the session returned no provider");
    provider_ = std::move(made);
    return Status::Ok();
  }
  AL_ASSIGN_OR_RETURN(std::unique_ptr<ModelProvider> made,
                      engine_.MakeModelProvider(options_, "session " + info_.id));
  provider_ = std::move(made);
  if (!IsRemoteProvider(options_.provider)) {
    int answered = 0;
    for (const auto& m : transcript_.messages()) {
      if (m.role == Role::kAssistant && m.tag.empty()) ++answered;
    }
    if (answered > 0) {
      provider_ = std::make_shared<ResumingScriptProvider>(provider_, answered);
    }
  }
  return Status::Ok();
}

Status SessionImpl::Init() {
  AL_RETURN_IF_ERROR(RebuildProvider());
  engine::WiringContext ctx = engine::MakeWiringContext(engine_.options().env, engine_.data_dir());
  ctx.hidden_paths = engine_.options().sandbox_hidden;
  // The tenant of the stored row, not of the caller's options: a reopened
  // session keeps the scope it was created in.
  if (engine_.options().tenant_user_scopes) ctx.user_scope_tenant = info_.tenant;
  // Only a session that can run turns (it holds the lock) starts servers.
  ctx.start_mcp_servers = lock_ != nullptr;

  AL_ASSIGN_OR_RETURN(engine::WiredTools tools, engine::WireTools(options_, ctx));
  for (auto& w : tools.warnings) warnings_.push_back(std::move(w));
  tools.todo->ReplayFromHistory(info_.id, transcript_.messages());
  extra_read_roots_ = tools.extra_read_roots;
  registry_ = std::move(tools.registry);
  mcp_servers_ = tools.mcp_servers;
  if (options_.subagents.enabled) AddSubagentTools(ctx);
  // A reopened session (resume, approve in another process) remembers the
  // files the model already looked at.
  ReplayReadLedger(transcript_.messages(), MakeToolContext(), *ledger_);

  AL_ASSIGN_OR_RETURN(engine::WiredPolicy policy, engine::WirePolicy(options_, registry_, ctx));
  for (auto& w : policy.warnings) warnings_.push_back(std::move(w));
  rules_policy_ = policy.rules;
  approvals_ = std::make_shared<permissions::SessionApprovals>(options_.workspace);
  policy_ = std::make_shared<permissions::CachedPolicy>(policy.rules, approvals_);
  if (auto saved = engine_.store().GetState(info_.id, kApprovalsStateKey);
      saved.ok() && saved->has_value() && (*saved)->is_array()) {
    std::vector<std::string> keys;
    for (const Json& k : **saved) {
      if (k.is_string()) keys.push_back(k.get<std::string>());
    }
    approvals_->Restore(keys);
  }

  engine::HookSinks sinks;
  sinks.notify = [this](const std::string&, const std::string& level, const std::string& text) {
    // "No list" is the common case, not news: keep the stream quiet.
    if (text == "todo-loop: stopped: no list") return;
    std::lock_guard<std::mutex> lock(notes_mu_);
    if (current_turn_ != nullptr) current_turn_->PostNotice(level, text);
  };
  AL_ASSIGN_OR_RETURN(engine::WiredHooks hooks,
                      engine::WireHooks(options_, tools, provider_, ctx, std::move(sinks)));
  hooks_ = std::move(hooks.all);
  todo_loop_ = std::move(hooks.todo_loop);
  reflector_ = std::move(hooks.reflector);
  if (todo_loop_) {
    auto state = engine_.store().GetState(info_.id, kTodoStateKey);
    if (state.ok() && state->has_value()) (void)todo_loop_->ImportState(info_.id, **state);
  }
  if (reflector_) {
    auto state = engine_.store().GetState(info_.id, kReflectorStateKey);
    if (state.ok() && state->has_value()) (void)reflector_->ImportState(info_.id, **state);
  }

  system_prompt_ = engine::WireSystemPrompt(options_, tools.learning_dirs, mcp_servers_);
  return Status::Ok();
}

void SessionImpl::AddSubagentTools(const engine::WiringContext& ctx) {
  const auto& sa = options_.subagents;
  const bool child = !sa.path.empty();
  engine::SubagentCatalog catalog = engine::LoadSubagents(
      ctx.config_dir, child ? sa.home_agent : info_.agent, options_.workspace);
  for (std::string& w : catalog.warnings) warnings_.push_back(std::move(w));
  if (!child) {
    std::string w = engine::UntrustedSubagentsWarning(catalog, sa.workspace_trusted);
    if (!w.empty()) warnings_.push_back(std::move(w));
  }
  auto offered = [&](const std::string& name) {
    if (!child) return true;
    if (!sa.tools) return false;
    for (const std::string& t : *sa.tools) {
      if (t == "agent" || t == std::string(engine::kAgentToolPrefix) + name) return true;
    }
    return false;
  };
  if (sa.tools) {
    // A child's allow-list; the agent tools it lists are added below.
    registry_.Retain([&](const ToolSpec& spec) {
      return std::find(sa.tools->begin(), sa.tools->end(), spec.name) != sa.tools->end();
    });
  }
  for (engine::SubagentDefinition& def : catalog.definitions) {
    if (!offered(def.name)) continue;
    engine::SubagentDefinition effective = def;
    effective.tools = engine::ChildTools(sa.tools, def.tools);
    const bool read_only = engine::SubagentIsReadOnly(effective, options_.command);
    registry_.Add(std::make_shared<engine::SubagentTool>(std::move(def), this, read_only));
  }
}

Result<engine::SubagentRun> SessionImpl::RunSubagent(const engine::SubagentRequest& req,
                                                     std::stop_token stop) {
  const engine::SubagentDefinition& def = *req.definition;
  std::string turn_id;
  // A person at the terminal of this turn: the child asks them (a prompt
  // naming the subagent) instead of pausing, and its events go to the
  // turn's observer, which shows its tool calls under this call (not for a
  // child that may run beside others: the observer is driven by one thread).
  std::shared_ptr<Approver> asker;
  SessionCallbacks shown;
  {
    std::lock_guard<std::mutex> lock(notes_mu_);
    if (current_turn_ != nullptr) turn_id = current_turn_->config().turn_id;
    if (live_console_ != nullptr) {
      asker = std::make_shared<SubagentAsker>(*live_console_, req.path);
      if (!def.parallel) shown.observer = live_observer_;
    }
  }
  // The call runs again after a durable pause: it continues its child.
  AL_ASSIGN_OR_RETURN(std::optional<std::string> started,
                      engine_.FindChild(info_.id, turn_id, req.tool_use_id));
  if (started) {
    SessionOptions reopen = options_;
    reopen.session_id = *started;
    reopen.continue_latest = false;
    reopen.interactive = false;
    reopen.overrides = SettingsOverrides{};
    reopen.mcp_servers.clear();
    if (asker) reopen.extensions.approver = asker;
    AL_ASSIGN_OR_RETURN(std::unique_ptr<SessionImpl> session, engine_.OpenChild(std::move(reopen)));
    session->set_ledger_node(req.ledger);
    AL_ASSIGN_OR_RETURN(std::optional<TurnPlan> plan, session->PlanDecided());
    if (!plan) {
      return FailedPrecondition("subagent session " + *started +
                                " has no decided batch to continue");
    }
    engine::SubagentRun run;
    run.session_id = session->id();
    run.continued = true;
    if (plan->resumed_from) run.spent_before = plan->resumed_from->counters;
    AL_ASSIGN_OR_RETURN(run.result, session->RunTurnWith(std::move(*plan), shown, stop));
    return run;
  }
  SessionOptions child = options_;
  child.session_id.clear();
  child.continue_latest = false;
  child.interactive = false;
  child.overrides = SettingsOverrides{};
  child.metadata = nullptr;
  child.title = req.prompt.substr(0, req.prompt.find('\n'));
  const bool trusted = options_.subagents.workspace_trusted;
  if (engine::SubagentBodyIsSystemPrompt(def, trusted)) {
    child.system_prompt = def.system_prompt;
    child.system_prompt_source = def.file.string();
  }
  if (!def.model.empty()) child.model = def.model;
  // Plan mode passes on: a read-only caller's child is read-only too.
  child.command =
      IsReadOnly(options_.command) ? options_.command : def.command.value_or(options_.command);
  // Never more model calls per turn than the caller's turn may make.
  const int max_turns = std::min(def.max_turns.value_or(DefaultBudget(child.command).max_turns),
                                 EffectiveBudget().max_turns);
  const Budget b = req.ledger->AsBudget(max_turns, std::chrono::steady_clock::now());
  child.max_tool_calls = b.max_tool_calls;
  child.max_tokens = b.max_tokens;
  child.max_turns = b.max_turns;
  child.max_wall_time = b.max_wall_time;
  // The definition only adds ask and deny rules: the caller's rules narrowed.
  for (const std::string& r : def.ask) child.ask.push_back({r, def.file.string()});
  for (const std::string& r : def.deny) child.deny.push_back({r, def.file.string()});
  // A child's pinned approver never asks on a terminal: an ask pauses it
  // durably, unless a person is at the terminal of this turn now (`asker`,
  // not pinned: a process that continues the child later pauses it).
  if (child.approver == ApproverMode::kConsole || child.approver == ApproverMode::kAuto) {
    child.approver = ApproverMode::kDurable;
  }
  if (asker) child.extensions.approver = asker;
  child.reflector = false;
  child.mcp_servers.clear();
  // A tree belongs to one tenant and is listed under its root's agent.
  child.tenant = info_.tenant;
  child.agent = info_.agent;
  child.subagents.parent_id = info_.id;
  child.subagents.path = req.path;
  child.subagents.depth = options_.subagents.depth + 1;
  // A definition only narrows: its tools within the caller's.
  child.subagents.tools = engine::ChildTools(options_.subagents.tools, def.tools);
  child.subagents.parent_turn_id = turn_id;
  child.subagents.tool_use_id = req.tool_use_id;
  // The stored agent: a served session is reopened by id, without `agent`.
  child.subagents.home_agent =
      options_.subagents.path.empty() ? info_.agent : options_.subagents.home_agent;
  AL_ASSIGN_OR_RETURN(std::unique_ptr<SessionImpl> session, engine_.OpenChild(std::move(child)));
  session->set_ledger_node(req.ledger);
  engine::SubagentRun run;
  run.session_id = session->id();
  if (req.on_started) req.on_started(run.session_id);
  AL_ASSIGN_OR_RETURN(run.result,
                      session->Run(engine::SubagentTask(def, trusted, req.prompt), shown, stop));
  return run;
}

Status SessionImpl::SaveSettingsChanges(const std::string& turn_id) {
  if (!pinned_ || unsaved_changes_.empty()) return Status::Ok();
  const Json settings = PinnedSettingsToJson(options_);
  Event e = MakeEvent(engine::SettingsEventData(unsaved_changes_, settings), info_.id, turn_id);
  e.seq = next_seq_;
  e.ts = engine_.NowMs();
  Status s = lock_ ? lock_->UpdateSettings(settings, {&e, 1})
                   : engine_.store().UpdateSettings(info_.id, settings, {&e, 1});
  if (!s.ok()) return s.WithContext("saving the changed settings of session " + info_.id);
  ++next_seq_;
  unsaved_changes_.clear();
  return Status::Ok();
}

Result<TurnPlan> SessionImpl::PlanRun(const std::string& prompt) {
  AL_RETURN_IF_ERROR(RefreshPause());
  if (open_checkpoint_) {
    std::string ids;
    for (const auto& p : open_checkpoint_->outstanding) ids += (ids.empty() ? "" : ", ") + p.id;
    return FailedPrecondition("session " + info_.id + " is paused waiting for: " + ids +
                              "; resolve with `agentloop approve|deny|answer ID` first");
  }
  if (batch_decided_) {
    return FailedPrecondition("session " + info_.id +
                              " has a paused batch that is decided but not yet continued; "
                              "continue it first with `agentloop resume " +
                              info_.id + "`");
  }
  return TurnPlan{TurnInput::User(prompt), std::nullopt, ""};
}

Result<TurnPlan> SessionImpl::PlanContinue() {
  AL_RETURN_IF_ERROR(RefreshPause());
  if (open_checkpoint_) {
    return FailedPrecondition("session " + info_.id + " still waits for decisions");
  }
  AL_ASSIGN_OR_RETURN(std::optional<TurnPlan> plan, PlanDecided());
  if (plan) return std::move(*plan);
  return FailedPrecondition("session " + info_.id +
                            " has no decided batch to continue (another process continued it)");
}

Result<TurnPlan> SessionImpl::PlanResume() {
  AL_RETURN_IF_ERROR(RefreshPause());
  if (open_checkpoint_) {
    std::string ids;
    for (const auto& p : open_checkpoint_->outstanding) ids += (ids.empty() ? "" : ", ") + p.id;
    return FailedPrecondition("session " + info_.id + " is paused waiting for: " + ids +
                              "; decide them first");
  }
  const std::optional<ResumeKind> kind = resumable();
  if (!kind) {
    return FailedPrecondition("session " + info_.id +
                              " has no interrupted or failed turn to continue");
  }
  if (*kind == ResumeKind::kInterrupted) {
    return TurnPlan{TurnInput::User(std::string(kContinueInterruptedPrompt)), std::nullopt, ""};
  }
  return PlanRetry();
}

Result<TurnPlan> SessionImpl::PlanRetry() {
  AL_RETURN_IF_ERROR(RefreshPause());
  if (!open_checkpoint_ && batch_decided_ && !info_.parent_id.empty()) {
    // Its caller's call waits on it: that call, run again when the
    // caller's turn continues, continues this batch.
    return FailedPrecondition("session " + info_.id + " is a subagent of session " +
                              info_.parent_id +
                              "; its decided batch continues with its caller's turn (`agentloop "
                              "resume` the root session)");
  }
  if (!open_checkpoint_ && batch_decided_) {
    AL_ASSIGN_OR_RETURN(std::optional<TurnPlan> plan, PlanDecided());
    if (plan) return std::move(*plan);
    return FailedPrecondition("the decided batch of session " + info_.id +
                              " was continued by another process");
  }
  if (!retryable()) {
    return FailedPrecondition("session " + info_.id +
                              " has no failed turn to retry (the newest turn did not fail, or "
                              "its history does not end with a prompt or tool results)");
  }
  // The same turn continues: its id and counters (budgets count across
  // the attempts), under the session's command.
  Checkpoint from;
  from.session_id = info_.id;
  from.turn_id = last_turn_end_->turn_id;
  from.counters = last_turn_end_->counters;
  from.command = options_.command;
  return TurnPlan{TurnInput::Retry(), std::move(from), ""};
}

// Approvals of the batch given "for this session" allow the same access
// again from now on (a decided batch reaches the turn without the approver).
void SessionImpl::RememberDecided(const std::vector<BatchDecision>& decisions) {
  bool changed = false;
  for (const BatchDecision& d : decisions) {
    if (d.item.kind != PendingKind::kApproval ||
        d.decision.kind != ApprovalDecision::Kind::kAllow || !d.decision.remember_for_session) {
      continue;
    }
    const Tool* tool = registry_.Find(d.item.tool);
    if (tool == nullptr) continue;
    approvals_->Remember(tool->spec(),
                         d.decision.edited_input ? *d.decision.edited_input : d.item.arguments);
    changed = true;
  }
  if (changed) SaveApprovals();
}

Result<std::optional<TurnPlan>> SessionImpl::PlanDecided() {
  if (!lock_) return Busy("session " + info_.id + " is held by another process");
  // Read here, claimed with the continued turn's first commit.
  AL_ASSIGN_OR_RETURN(std::optional<Checkpoint> cp, lock_->DecidedBatch());
  batch_decided_ = false;
  if (!cp) return std::optional<TurnPlan>();
  // Resolvers appended their decision events since this object loaded the
  // session; nothing else can have (the lock is ours).
  AL_ASSIGN_OR_RETURN(SessionInfo now, engine_.store().GetSession(info_.id));
  next_seq_ = std::max(next_seq_, now.last_seq + 1);
  RememberDecided(cp->decisions);
  Checkpoint from = *cp;
  return std::optional<TurnPlan>(TurnPlan{TurnInput::Decided(std::move(*cp)), std::move(from), ""});
}

Result<std::unique_ptr<ActiveTurn>> SessionImpl::PrepareTurn(TurnPlan plan, EventSink* observer,
                                                             StreamSink* stream,
                                                             Approver* console_approver) {
  const std::optional<Checkpoint>& resumed_from = plan.resumed_from;
  if (!lock_) {
    return Busy("session " + info_.id + " is held by another process; it cannot run a turn here");
  }
  // Before a turn, make sure the session lock is still ours (another process
  // takes it over only after the lock's TTL, 30 s, without a heartbeat). A lock
  // acquired or checked within the last second needs no new check: that
  // saves a durable commit (an fsync) before the first request of a run.
  if (std::chrono::steady_clock::now() - lock_checked_at_ >= kLockRecheck) {
    Status s = lock_->Refresh();
    if (!s.ok()) return s;
    lock_checked_at_ = std::chrono::steady_clock::now();
  }
  // The connection to the model's server opens while the turn and its first
  // request are prepared (a no-op when EngineOptions::preconnect_for already
  // opened it). Only here, not when the session is opened: a session opened
  // only to be shown or resolved contacts nobody.
  provider_->Warm();
  AL_RETURN_IF_ERROR(SaveSettingsChanges(resumed_from ? resumed_from->turn_id : std::string()));
  auto active = std::make_unique<ActiveTurn>(*lock_, info_.id, observer);
  if (!plan.queued_input_id.empty()) active->sink.TakeInputWithFirstCommit(plan.queued_input_id);
  if (plan.input.decided) active->sink.ClaimBatchWithFirstCommit();
  active->sink.SaveStateBeforeEnd([this] { return SaveTurnState(); });
  TurnConfig cfg;
  cfg.session_id = info_.id;
  if (resumed_from) {
    cfg.turn_id = resumed_from->turn_id;
    cfg.counters = resumed_from->counters;
    cfg.command = resumed_from->command;
  } else {
    cfg.command = options_.command;
  }
  cfg.model = options_.model;
  cfg.summary_timeout = engine_.options().summary_timeout;
  cfg.context_measure = context_measure_;
  {
    ModelLimits limits =
        ResolveModelLimits(options_.model, options_.context_window, options_.max_output_tokens);
    cfg.context_window = limits.context_window;
    cfg.max_output_tokens = limits.max_output_tokens;
    // Said once per session for a model the table does not know: not again
    // by this object, nor by another process (an approval, a resume) whose
    // log already holds the same notice.
    if (!limits.known && IsRemoteProvider(options_.provider) &&
        warned_limits_for_ != options_.model) {
      std::string notice = UnknownModelNotice(options_.model, limits);
      EventQuery notices;
      notices.types = {std::string(EventTypeName(EventType::kNotice))};
      AL_ASSIGN_OR_RETURN(std::vector<StoredEvent> said,
                          engine_.store().QueryEvents(info_.id, notices));
      const bool already = std::any_of(said.begin(), said.end(), [&](const StoredEvent& e) {
        Result<Json> j = ParseJson(e.json);
        return j.ok() && j->is_object() && j->value("text", std::string()) == notice;
      });
      if (!already) cfg.start_notice = std::move(notice);
      warned_limits_for_ = options_.model;
    }
  }
  // The todo list survives compaction on the summary's meta.
  cfg.carry_meta = [](std::span<const Message> dropped) {
    return todo::CarriedSnapshotMeta(dropped);
  };
  cfg.system_prompt = system_prompt_;
  cfg.budget = EffectiveBudget();
  if (ledger_node_) {
    // A child's turn never spends more than its node of the caller's
    // ledger holds (a child continued after a pause reserves again from
    // what its caller has left, which may be less than its pinned budget).
    const BudgetShare limit = ledger_node_->limit();
    cfg.budget.max_tool_calls = static_cast<int>(
        std::min<int64_t>(cfg.budget.max_tool_calls, cfg.counters.tool_calls + limit.tool_calls));
    cfg.budget.max_tokens = std::min(cfg.budget.max_tokens, cfg.counters.tokens + limit.tokens);
    if (limit.deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *limit.deadline - std::chrono::steady_clock::now());
      left = std::max(left, std::chrono::milliseconds(1));
      if (!cfg.budget.max_wall_time || *cfg.budget.max_wall_time > left) {
        cfg.budget.max_wall_time = left;
      }
    }
  }
  cfg.tools = registry_.SpecList();
  cfg.policy = policy_;
  cfg.hooks = hooks_;
  cfg.sink = &active->sink;
  cfg.first_seq = next_seq_;
  cfg.now_ms = [&engine = engine_] { return engine.NowMs(); };
  cfg.workspace = options_.workspace;
  cfg.ledger = ledger_node_
                   ? ledger_node_
                   : BudgetLedger::Root(cfg.budget, cfg.counters, std::chrono::steady_clock::now(),
                                        options_.subagents.caps, options_.subagents.depth);

  Approver* chosen = nullptr;
  switch (options_.approver) {
    case ApproverMode::kAuto:
      chosen = options_.interactive && console_approver != nullptr
                   ? console_approver
                   : static_cast<Approver*>(&active->durable);
      break;
    case ApproverMode::kConsole:
      chosen = console_approver;
      break;
    case ApproverMode::kDurable:
      chosen = &active->durable;
      break;
    case ApproverMode::kWebhook: {
      permissions::WebhookOptions w;
      w.url = options_.webhook_url;
      w.secret = options_.webhook_secret;
      if (!options_.webhook_secret_env.empty()) {
        auto it = engine_.options().env.find(options_.webhook_secret_env);
        if (it != engine_.options().env.end() && !it->second.empty()) w.secret = it->second;
      }
      auto http = engine_.http();
      w.post = [http](const std::string& url, const permissions::HttpHeaders& headers,
                      const std::string& body) -> Status {
        AL_ASSIGN_OR_RETURN(HttpResponse r, http->Post(url, headers, body));
        if (r.status < 200 || r.status >= 300) {
          return Unavailable("webhook answered HTTP " + std::to_string(r.status));
        }
        return Status::Ok();
      };
      auto created = permissions::WebhookApprover::Create(std::move(w));
      if (!created.ok()) return created.error().WithContext("webhook approver");
      active->webhook = std::move(*created);
      active->after_pause.emplace(*active->webhook);
      chosen = &*active->after_pause;
      break;
    }
    case ApproverMode::kNone:
      chosen = nullptr;
      break;
  }
  if (options_.extensions.approver) chosen = options_.extensions.approver.get();
  // The console this turn asks on: the driver's, or, for a subagent's child
  // asking the person at its caller's terminal, that one.
  Approver* live_console = nullptr;
  if (chosen != nullptr && chosen == console_approver) {
    live_console = chosen;
  } else if (auto* asker = dynamic_cast<SubagentAsker*>(chosen)) {
    live_console = &asker->console();
  }
  if (chosen != nullptr) {
    // A store error loses the remembering only beyond this open session.
    active->remembering.emplace(*chosen, approvals_, [this] { SaveApprovals(); });
  }

  // Only now, with everything that can fail set up, does the input enter
  // the history.
  active->turn = std::make_unique<Turn>(cfg, transcript_);
  AL_RETURN_IF_ERROR(active->turn->Start(std::move(plan.input)));

  RunnerDeps& deps = active->deps;
  deps.provider = provider_.get();
  deps.tools = &registry_;
  deps.approver = active->remembering ? &*active->remembering : nullptr;
  deps.stream = stream;
  deps.tool_context = MakeToolContext();
  deps.tool_context.budget = cfg.ledger;
  deps.tool_context.agent_path = options_.subagents.path;
  // Hooks' notices go to this turn while it runs.
  std::lock_guard<std::mutex> lock(notes_mu_);
  current_turn_ = active->turn.get();
  live_console_ = live_console;
  live_observer_ = live_console != nullptr ? observer : nullptr;
  return active;
}

Result<TurnResult> SessionImpl::FinishTurn(ActiveTurn& active, Result<TurnResult> driven) {
  {
    std::lock_guard<std::mutex> lock(notes_mu_);
    current_turn_ = nullptr;
    live_console_ = nullptr;
    live_observer_ = nullptr;
  }
  Status flushed = active.sink.Flush();
  active.sink.TakeInputIfUntaken();
  if (!driven.ok()) {
    // The Turn itself failed (RunTurnAsync caught what it threw): what was
    // emitted is committed as far as it goes; the next turn numbers its
    // events after what the store holds.
    Result<SessionInfo> now = engine_.store().GetSession(info_.id);
    if (now.ok()) next_seq_ = std::max(next_seq_, now->last_seq + 1);
    return driven.error();
  }
  TurnResult result = std::move(*driven);
  next_seq_ = result.next_seq;
  last_context_ = ContextUsage{result.context_tokens, result.context_window};
  if (result.context_measure) context_measure_ = result.context_measure;
  last_turn_end_ = LastTurnEnd{active.turn->config().turn_id,
                               0,
                               result.stop,
                               result.reason,
                               result.final_text,
                               result.truncated,
                               result.counters};

  if (result.checkpoint && !active.sink.pause_saved()) {
    // The pause's commit failed: nothing waits for a decision.
    result.checkpoint.reset();
    result.pending.clear();
    result.stop = StopReason::kFailed;
    result.reason = flushed.ok() ? "the paused batch was not stored" : flushed.ToString();
  }
  if (result.checkpoint) {
    // Stored by the sink with the `pending` event: now the webhook may
    // tell of it.
    if (active.after_pause) active.after_pause->Deliver({});
    open_checkpoint_ = result.checkpoint;
    bool woken = false;
    for (const PendingItem& p : result.checkpoint->outstanding) {
      if (p.kind != PendingKind::kSubagent) continue;
      // The child's items may have been decided between its pause and this
      // one, when nobody could wake this batch yet: wake it now.
      AL_ASSIGN_OR_RETURN(std::optional<Checkpoint> child_open,
                          engine_.store().OpenCheckpoint(p.child_session_id));
      if (child_open) continue;
      AL_ASSIGN_OR_RETURN(SessionInfo child, engine_.store().GetSession(p.child_session_id));
      AL_RETURN_IF_ERROR(engine_.WakeCallers(child).status());
      woken = true;
    }
    if (woken) AL_RETURN_IF_ERROR(RefreshPause());
    // A person decides the subagents' items, not the calls waiting on them.
    AL_ASSIGN_OR_RETURN(result.pending, engine_.PendingOfTree(info_.id, result.pending));
  }
  const std::string& finished_turn = active.turn->config().turn_id;
  if (finished_turn != latest_turn_id_) {
    AddCounters(settled_totals_, latest_turn_counters_);
    latest_turn_id_ = finished_turn;
  }
  latest_turn_counters_ = result.counters;
  if (!flushed.ok() && result.stop != StopReason::kFailed) {
    result.stop = StopReason::kFailed;
    result.reason = flushed.ToString();
  }
  return result;
}

Result<TurnResult> SessionImpl::RunTurnWith(TurnPlan plan, const SessionCallbacks& callbacks,
                                            std::stop_token stop) {
  AL_ASSIGN_OR_RETURN(std::unique_ptr<ActiveTurn> active,
                      PrepareTurn(std::move(plan), callbacks.observer, callbacks.stream,
                                  callbacks.console_approver));
  TurnResult result = agentloop::RunTurn(*active->turn, active->deps, stop);
  return FinishTurn(*active, std::move(result));
}

void SessionImpl::StartTurnWith(Result<TurnPlan> plan, TurnExecutor& executor,
                                AsyncTurnCallbacks callbacks, std::stop_token stop) {
  if (!plan.ok()) return callbacks.done(plan.error());
  const std::string queued_input_id = plan->queued_input_id;
  Result<std::unique_ptr<ActiveTurn>> prepared =
      PrepareTurn(std::move(*plan), callbacks.observer, callbacks.stream, nullptr);
  if (!prepared.ok()) {
    // A queued input whose turn cannot start is answered with the error
    // once (taken), not run again.
    if (!queued_input_id.empty() && lock_) (void)lock_->AppendTakingInput({}, queued_input_id);
    return callbacks.done(prepared.error());
  }
  // Owned by the completion until the turn has finished.
  auto active = std::shared_ptr<ActiveTurn>(std::move(*prepared));
  Turn& turn = *active->turn;
  RunnerDeps& deps = active->deps;
  RunTurnAsync(turn, deps, executor, info_.id, stop,
               [this, active, done = std::move(callbacks.done)](Result<TurnResult> r) {
                 done(FinishTurn(*active, std::move(r)));
               });
}

// ---------------------------------------------------------------------------

namespace {

// The resolution fits the item: an answer for a question, approve or deny
// for an approval.
Status CheckResolutionKind(const PendingItem& item, const Resolution& resolution) {
  const bool question = item.kind == PendingKind::kQuestion;
  if (resolution.kind == Resolution::Kind::kAnswer && !question) {
    return InvalidArgument("pending item " + item.id +
                           " is an approval, not a question: use `agentloop approve` or `deny`");
  }
  if (resolution.kind == Resolution::Kind::kApprove && question) {
    return InvalidArgument("pending item " + item.id + " is a question: use `agentloop answer " +
                           item.id + " TEXT`");
  }
  return Status::Ok();
}

ApprovalDecision DecisionOf(const Resolution& resolution) {
  ApprovalDecision decision;
  switch (resolution.kind) {
    case Resolution::Kind::kApprove:
      decision = ApprovalDecision::Allow(resolution.by);
      decision.edited_input = resolution.edited_arguments;
      decision.remember_for_session = resolution.remember_for_session;
      break;
    case Resolution::Kind::kDeny:
      decision = ApprovalDecision::Deny(resolution.reason, resolution.by);
      break;
    case Resolution::Kind::kAnswer:
      decision = ApprovalDecision::Allow(resolution.by);
      decision.answer = resolution.answer;
      break;
  }
  return decision;
}

// Why a decision needs the session opened: its tools and rules check it.
constexpr std::string_view kNeedsSession = "the decision is checked against the session's tools";

}  // namespace

Result<ResolveOutcome> EngineImpl::RecordDecision(
    const PendingRecord& rec, const Resolution& resolution, const ApprovalDecision& decision,
    const std::function<Status(const Checkpoint&)>& check) {
  const PendingItem& item = rec.item;
  Event logged = MakeEvent(
      DecisionData{.tool_use_id = item.tool_use_id,
                   .tool = item.tool,
                   .decision = decision.kind == ApprovalDecision::Kind::kAllow ? Decision::kAllow
                                                                               : Decision::kDeny,
                   .reason = resolution.reason,
                   .rule = "",
                   .by = resolution.by,
                   .edited = resolution.edited_arguments.has_value(),
                   .pending_id = item.id},
      rec.session_id, rec.turn_id);
  logged.ts = NowMs();
  auto record = [&](Checkpoint& cp, const PendingItem& stored) -> Result<ResolveAction> {
    if (check) AL_RETURN_IF_ERROR(check(cp));
    cp.decisions.push_back(BatchDecision{stored, decision});
    // A denial cancels the batch: nobody is asked about the rest.
    return decision.kind == ApprovalDecision::Kind::kDeny ? ResolveAction::kCloseBatch
                                                          : ResolveAction::kResolved;
  };
  if (resolution.tenant) {
    return store_->ForTenant(*resolution.tenant)->Resolve(item.id, record, {&logged, 1});
  }
  return store_->Resolve(item.id, record, {&logged, 1});
}

Result<ResolveReport> EngineImpl::Resolve(const std::string& pending_id,
                                          const Resolution& resolution,
                                          const SessionOptions& options,
                                          const SessionCallbacks& callbacks, std::stop_token stop) {
  Result<ResolveReport> recorded =
      RecordAndContinue(pending_id, resolution, options, callbacks, stop);
  if (!recorded.ok() && recorded.error().code() == Code::kInvalidArgument &&
      resolution.edited_arguments) {
    // Edited arguments the call refuses: an outcome, not a failure; the
    // item still waits for a decision.
    ResolveReport refused;
    refused.outcome = DecisionOutcome::kInvalidEdit;
    refused.refused = recorded.error().message();
    return refused;
  }
  AL_ASSIGN_OR_RETURN(ResolveReport report, std::move(recorded));
  if (report.already_resolved) {
    // What the item came to before this decision, and who decided it.
    AL_ASSIGN_OR_RETURN(std::optional<PendingLookup> before,
                        resolution.tenant
                            ? store_->ForTenant(*resolution.tenant)->LookupPending(pending_id)
                            : store_->LookupPending(pending_id));
    report.outcome = DecisionOutcome::kAlreadyResolved;
    if (before && before->state != PendingLookup::State::kOutstanding) {
      report.outcome = SettledOutcome(*before, resolution);
      report.earlier = before->decision;
      if (report.session_id.empty()) report.session_id = before->record.session_id;
      if (report.turn_id.empty()) report.turn_id = before->record.turn_id;
    }
  } else if (report.outstanding > 0 && !report.resumed && !report.continues_later) {
    report.outcome = DecisionOutcome::kRecorded;
  } else {
    report.outcome = DecisionOutcome::kResumed;
  }
  return report;
}

Result<ResolveReport> EngineImpl::RecordAndContinue(const std::string& pending_id,
                                                    const Resolution& resolution,
                                                    const SessionOptions& options,
                                                    const SessionCallbacks& callbacks,
                                                    std::stop_token stop) {
  AL_ASSIGN_OR_RETURN(std::optional<PendingRecord> rec,
                      resolution.tenant
                          ? store_->ForTenant(*resolution.tenant)->GetPending(pending_id)
                          : store_->GetPending(pending_id));
  if (!rec) {
    ResolveReport report;
    report.already_resolved = true;
    return report;
  }
  AL_RETURN_IF_ERROR(CheckResolutionKind(rec->item, resolution));
  AL_ASSIGN_OR_RETURN(SessionInfo info, store_->GetSession(rec->session_id));
  // Open the session with the settings pinned to it. A process that holds
  // it (a turn running, a chat open) does not stop the decision from being
  // recorded: this object then only records it, and the holder or the next
  // `resume` continues the turn.
  const SessionOptions opts = OptionsForStored(info, options);

  // A denial, an answer, or an approval as asked in a command that may
  // mutate is checked by the store alone: the session is opened only when
  // the batch is decided and this resolver continues the turn. (The
  // continued turn checks each call against the session's tools and plan
  // mode again before it runs.) Edited arguments, and approvals in a
  // read-only command, are checked against the session's tools and rules.
  // A subagent's item, and a call waiting on a subagent, go through the
  // session: its decision wakes the calls waiting on it (below).
  if (!resolution.edited_arguments && info.parent_id.empty() &&
      rec->item.kind != PendingKind::kSubagent) {
    // The caller's overrides are checked first: a refused one (a widening
    // flag) leaves the item pending.
    if (auto applied = PinnedOptions(info.id, opts); !applied.ok()) return applied.error();
    const ApprovalDecision decision = DecisionOf(resolution);
    bool needs_session = false;
    auto check = [&](const Checkpoint& cp) -> Status {
      if (resolution.kind == Resolution::Kind::kApprove && IsReadOnly(cp.command)) {
        needs_session = true;
        return FailedPrecondition(std::string(kNeedsSession));
      }
      return Status::Ok();
    };
    Result<ResolveOutcome> outcome = RecordDecision(*rec, resolution, decision, check);
    if (outcome.ok()) {
      ResolveReport report;
      report.session_id = rec->session_id;
      report.turn_id = rec->turn_id;
      report.item = rec->item;
      report.model = opts.model;
      report.already_resolved = outcome->already_resolved;
      if (!outcome->already_resolved) {
        report.outstanding = static_cast<int>(outcome->checkpoint.outstanding.size());
        if (!outcome->closed) return report;
      }
      if (!resolution.continue_turn) {
        report.continues_later = !outcome->already_resolved;
        return report;
      }
      AL_ASSIGN_OR_RETURN(auto session, OpenImpl(opts, LockMode::kIfFree));
      if (!session->holds_lock()) {
        report.continues_later = !outcome->already_resolved;
        return report;
      }
      report.model = session->options().model;
      AL_ASSIGN_OR_RETURN(report.resumed, session->ContinueDecided(callbacks, stop));
      return report;
    }
    if (!needs_session) return outcome.error();
  }
  AL_ASSIGN_OR_RETURN(auto session, OpenImpl(opts, LockMode::kIfFree));
  AL_ASSIGN_OR_RETURN(ResolveReport report, session->Resolve(*rec, resolution, callbacks, stop));
  report.turn_id = rec->turn_id;
  if (info.parent_id.empty() || !report.continues_later) return report;
  // A subagent's batch is decided: the calls waiting on it are decided in
  // turn, and when that decides the root's batch the root's turn continues,
  // which runs the calls again and so continues the subagents. The child's
  // lock is released first: the continued call reopens it.
  session.reset();
  AL_ASSIGN_OR_RETURN(std::optional<std::string> root, WakeCallers(info));
  if (!root) {
    // A caller still waits on other items (or has not stored its pause
    // yet, and wakes itself when it does): the root's inbox says which.
    AL_ASSIGN_OR_RETURN(std::string top, RootOf(info.id));
    AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> rest, ListPending(top));
    report.session_id = top;
    report.outstanding = static_cast<int>(rest.size());
    report.continues_later = false;
    return report;
  }
  AL_ASSIGN_OR_RETURN(SessionInfo root_info, store_->GetSession(*root));
  report.session_id = *root;
  SessionOptions ropts = options;
  ropts.session_id = *root;
  ropts.workspace = root_info.workspace;
  if (auto kind = ParseCommandKind(root_info.command)) ropts.command = *kind;
  if (ropts.model.empty()) ropts.model = root_info.model;
  AL_ASSIGN_OR_RETURN(auto top, OpenImpl(ropts, LockMode::kIfFree));
  report.model = top->options().model;
  report.turn_id = top->paused_turn_id();
  if (!resolution.continue_turn || !top->holds_lock()) return report;
  AL_ASSIGN_OR_RETURN(report.resumed, top->ContinueDecided(callbacks, stop));
  report.continues_later = !report.resumed.has_value();
  return report;
}

Result<ResolveReport> SessionImpl::Resolve(const PendingRecord& rec, const Resolution& resolution,
                                           const SessionCallbacks& callbacks,
                                           std::stop_token stop) {
  ResolveReport report;
  report.session_id = info_.id;
  report.item = rec.item;
  report.model = options_.model;
  const PendingItem& item = rec.item;
  if (item.kind == PendingKind::kSubagent) {
    return FailedPrecondition(
        "pending item " + item.id + " waits for the subagent session " + item.child_session_id +
        "; decide that session's items instead (`agentloop pending " + info_.id + "` lists them)");
  }
  AL_RETURN_IF_ERROR(CheckResolutionKind(item, resolution));
  const ApprovalDecision decision = DecisionOf(resolution);
  if (resolution.kind == Resolution::Kind::kApprove) {
    const Tool* tool = registry_.Find(item.tool);
    if (tool == nullptr) return FailedPrecondition("tool '" + item.tool + "' is not available");
    const CommandKind command = open_checkpoint_ ? open_checkpoint_->command : options_.command;
    if (std::string refusal = Turn::CheckReadOnly(command, tool->spec()); !refusal.empty()) {
      return FailedPrecondition(refusal);
    }
    if (resolution.edited_arguments) {
      std::string why = Turn::CheckEditedArguments(
          command, *policy_, tool->spec(),
          ToolCall{item.tool_use_id, item.tool, *resolution.edited_arguments});
      if (!why.empty()) return InvalidArgument("'" + item.tool + "': " + why);
    }
  }
  AL_ASSIGN_OR_RETURN(ResolveOutcome outcome,
                      engine_.RecordDecision(rec, resolution, decision, {}));
  report.already_resolved = outcome.already_resolved;
  if (!outcome.already_resolved) {
    report.outstanding = static_cast<int>(outcome.checkpoint.outstanding.size());
    if (!outcome.closed) {
      open_checkpoint_ = outcome.checkpoint;
      return report;
    }
  }
  // A subagent's decided batch is continued by its caller's turn
  // (Engine::Resolve wakes it), never on its own.
  if (!lock_ || !resolution.continue_turn || !info_.parent_id.empty()) {
    report.continues_later = !outcome.already_resolved;
    return report;
  }
  // This object holds the session: it continues the batch, whichever
  // resolver completed it.
  open_checkpoint_.reset();
  AL_ASSIGN_OR_RETURN(report.resumed, ContinueDecided(callbacks, stop));
  return report;
}

Result<std::optional<TurnResult>> SessionImpl::ContinueDecided(const SessionCallbacks& callbacks,
                                                               std::stop_token stop) {
  AL_ASSIGN_OR_RETURN(std::optional<TurnPlan> plan, PlanDecided());
  if (!plan) return std::optional<TurnResult>();
  AL_ASSIGN_OR_RETURN(TurnResult r, RunTurnWith(std::move(*plan), callbacks, stop));
  return std::optional<TurnResult>(std::move(r));
}

std::string_view DecisionOutcomeName(DecisionOutcome outcome) {
  switch (outcome) {
    case DecisionOutcome::kRecorded:
      return "recorded";
    case DecisionOutcome::kResumed:
      return "resumed";
    case DecisionOutcome::kAlreadyResolved:
      return "already_resolved";
    case DecisionOutcome::kConflict:
      return "conflict";
    case DecisionOutcome::kCancelled:
      return "cancelled";
    case DecisionOutcome::kInvalidEdit:
      return "invalid_edit";
  }
  return "recorded";
}

DecisionOutcome SettledOutcome(const PendingLookup& lookup, const Resolution& resolution) {
  if (lookup.state == PendingLookup::State::kCancelled) return DecisionOutcome::kCancelled;
  if (!lookup.decision) return DecisionOutcome::kConflict;
  const bool denied = lookup.decision->kind == ApprovalDecision::Kind::kDeny;
  return (resolution.kind == Resolution::Kind::kDeny) == denied ? DecisionOutcome::kAlreadyResolved
                                                                : DecisionOutcome::kConflict;
}

std::string DescribeDecisionOutcome(DecisionOutcome outcome, int outstanding,
                                    const std::optional<ApprovalDecision>& earlier) {
  std::string how;
  if (earlier) {
    how = earlier->kind == ApprovalDecision::Kind::kDeny ? "denied"
          : !earlier->answer.empty()                     ? "answered"
                                                         : "approved";
    how += " by " + (earlier->by.empty() ? std::string("someone") : earlier->by);
    if (earlier->kind == ApprovalDecision::Kind::kDeny && !earlier->reason.empty()) {
      how += " (" + earlier->reason + ")";
    }
  }
  switch (outcome) {
    case DecisionOutcome::kRecorded:
      return "recorded; " + std::to_string(outstanding) + " more item(s) of its batch still wait";
    case DecisionOutcome::kResumed:
      return "recorded; its batch is decided and its turn continues";
    case DecisionOutcome::kAlreadyResolved:
      return how.empty() ? "already resolved (or unknown); nothing changed"
                         : "already resolved the same way: " + how + "; nothing changed";
    case DecisionOutcome::kConflict:
      return "already resolved differently: " + (how.empty() ? std::string("by someone") : how) +
             "; nothing changed";
    case DecisionOutcome::kCancelled:
      return "cancelled: its batch was closed without it (a sibling call was denied, or a newer "
             "pause replaced it); nothing changed";
    case DecisionOutcome::kInvalidEdit:
      return "the edited arguments were refused; the item is still pending";
  }
  return "";
}

std::string_view ResumeKindName(ResumeKind kind) {
  switch (kind) {
    case ResumeKind::kDecidedBatch:
      return "decided_batch";
    case ResumeKind::kRetry:
      return "retry";
    case ResumeKind::kInterrupted:
      return "interrupted";
  }
  return "retry";
}

Status EndCutTurn(SessionLock& lock, SessionSnapshot& snapshot, int64_t now_ms) {
  if (!snapshot.unfinished_turn) return Status::Ok();
  const SessionSnapshot::BegunTurn& cut = *snapshot.unfinished_turn;
  TurnEndData end;
  end.stop = StopReason::kFailed;
  end.reason = std::string(kCutTurnReason) +
               " (the session was taken over by another process; tool calls it left without "
               "a result were answered as not known to have completed); continue or retry it";
  end.counters = cut.counters;
  Event e = MakeEvent(end, snapshot.info.id, cut.turn_id);
  e.seq = snapshot.last_seq + 1;
  e.ts = now_ms;
  Status s = lock.Append({&e, 1});
  if (!s.ok()) return s.WithContext("ending the cut turn " + cut.turn_id);
  snapshot.last_turn_end =
      LastTurnEnd{cut.turn_id, e.seq, end.stop, end.reason, "", false, end.counters};
  snapshot.last_seq = e.seq;
  snapshot.info.last_seq = e.seq;
  snapshot.unfinished_turn.reset();
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options) {
  auto engine = std::make_unique<EngineImpl>(std::move(options));
  AL_RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace agentloop
