// The turns of a session: what a turn is to be (its plan), the preparation
// and finish every driver shares, and the drivers themselves (on the
// caller's thread, or asynchronously on a TurnExecutor).
#include "engine/engine_impl.h"

namespace agentloop {

namespace {

constexpr std::chrono::seconds kLockRecheck{1};

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

}  // namespace

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

// ---------------------------------------------------------------------------
// Operations in: Submit, RunBlocking and Preview all go through Plan, which
// says what each operation means for the session as it stands.

std::string_view OpName(const Op& op) {
  static constexpr std::string_view kNames[] = {"user_input", "continue", "retry", "compact",
                                                "queued"};
  return kNames[op.index()];
}

Result<TurnResult> RunBlocking(Session& session, Op op, const SessionCallbacks& callbacks,
                               std::stop_token stop) {
  return session.RunOnCaller(std::move(op), callbacks, std::move(stop));
}

void SessionImpl::Submit(Op op, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                         std::stop_token stop) {
  // The checks and preparations read and write the store: a step of the
  // executor; the turn is then driven by RunTurnAsync.
  executor.Post(info_.id, [this, op = std::move(op), &executor, callbacks = std::move(callbacks),
                           stop]() mutable {
    StartTurnWith(Plan(op), executor, std::move(callbacks), stop);
  });
}

Result<TurnResult> SessionImpl::RunOnCaller(Op op, const SessionCallbacks& callbacks,
                                            std::stop_token stop) {
  AL_ASSIGN_OR_RETURN(TurnPlan plan, Plan(op));
  return RunTurnWith(std::move(plan), callbacks, stop);
}

Result<std::string> SessionImpl::Preview(const Op& op) {
  AL_ASSIGN_OR_RETURN(TurnPlan plan, Plan(op, PlanMode::kPreview));
  return std::move(plan.what);
}

Result<TurnPlan> SessionImpl::Plan(const Op& op, PlanMode mode) {
  if (const auto* input = std::get_if<op::UserInput>(&op)) return PlanRun(input->prompt);
  if (const auto* cont = std::get_if<op::Continue>(&op)) {
    return cont->decided_batch_only ? PlanContinue(mode) : PlanResume(mode);
  }
  if (std::holds_alternative<op::Retry>(op)) return PlanRetry(mode);
  if (const auto* compact = std::get_if<op::Compact>(&op)) return PlanCompact(compact->focus);
  const QueuedInput& input = std::get<op::Queued>(op).input;
  Result<TurnPlan> plan = input.continue_turn ? PlanResume(mode) : PlanRun(input.input);
  if (mode == PlanMode::kPreview) return plan;
  if (plan.ok()) {
    plan->queued_input_id = input.id;
  } else {
    TakeUnrunInput(input.id);
  }
  return plan;
}

void SessionImpl::TakeUnrunInput(const std::string& input_id) {
  if (!input_id.empty() && lock_) (void)lock_->AppendTakingInput({}, input_id);
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
  return TurnPlan{TurnInput::User(prompt), std::nullopt, "", "running a new turn"};
}

Result<TurnPlan> SessionImpl::PlanCompact(const std::string& focus) {
  AL_RETURN_IF_ERROR(RefreshPause());
  if (open_checkpoint_ || batch_decided_) {
    return FailedPrecondition("session " + info_.id +
                              " has a paused batch; it cannot be compacted until the batch "
                              "is resolved and continued");
  }
  return TurnPlan{TurnInput::Compact(focus), std::nullopt, "", "compacting the history"};
}

Result<TurnPlan> SessionImpl::PlanContinue(PlanMode mode) {
  AL_RETURN_IF_ERROR(RefreshPause());
  if (open_checkpoint_) {
    return FailedPrecondition("session " + info_.id + " still waits for decisions");
  }
  AL_ASSIGN_OR_RETURN(std::optional<TurnPlan> plan, PlanDecided(mode));
  if (plan) return std::move(*plan);
  return FailedPrecondition("session " + info_.id +
                            " has no decided batch to continue (another process continued it)");
}

Result<TurnPlan> SessionImpl::PlanResume(PlanMode mode) {
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
    return TurnPlan{TurnInput::User(std::string(kContinueInterruptedPrompt)), std::nullopt, "",
                    "continuing the interrupted turn"};
  }
  return PlanRetry(mode);
}

Result<TurnPlan> SessionImpl::PlanRetry(PlanMode mode) {
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
    AL_ASSIGN_OR_RETURN(std::optional<TurnPlan> plan, PlanDecided(mode));
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
  return TurnPlan{TurnInput::Retry(), std::move(from), "", "retrying the failed turn"};
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

Result<std::optional<TurnPlan>> SessionImpl::PlanDecided(PlanMode mode) {
  if (!lock_) return Busy("session " + info_.id + " is held by another process");
  if (mode == PlanMode::kPreview) {
    if (!batch_decided_) return std::optional<TurnPlan>();
    return std::optional<TurnPlan>(
        TurnPlan{TurnInput{}, std::nullopt, "", "continuing the decided batch"});
  }
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
  return std::optional<TurnPlan>(TurnPlan{TurnInput::Decided(std::move(*cp)), std::move(from), "",
                                          "continuing the decided batch"});
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
        Result<Event> said_event = j.ok() ? Event::FromJson(*j) : Result<Event>(j.error());
        const NoticeData* n = said_event.ok() ? said_event->As<NoticeData>() : nullptr;
        return n != nullptr && n->text == notice;
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
  const std::string queued_input_id = plan.queued_input_id;
  Result<std::unique_ptr<ActiveTurn>> prepared = PrepareTurn(
      std::move(plan), callbacks.observer, callbacks.stream, callbacks.console_approver);
  if (!prepared.ok()) {
    TakeUnrunInput(queued_input_id);
    return prepared.error();
  }
  std::unique_ptr<ActiveTurn> active = std::move(*prepared);
  active->sink.OverlapStepCommits();
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
    TakeUnrunInput(queued_input_id);
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

}  // namespace agentloop
