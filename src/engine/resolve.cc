// Deciding a pending item: recording the decision with its event, and
// continuing the decided batch; the decision outcomes front ends report.
#include "engine/engine_impl.h"

namespace agentloop {

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

}  // namespace agentloop
