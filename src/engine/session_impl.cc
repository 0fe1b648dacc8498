// The Session implementation: opening, wiring, settings, subagents and
// the state a session keeps.
#include "engine/engine_impl.h"

namespace agentloop {

namespace {

constexpr std::string_view kTodoStateKey = "todo_loop";
constexpr std::string_view kReflectorStateKey = "reflector";
// The accesses approved "for this session" (SessionApprovals keys).
constexpr std::string_view kApprovalsStateKey = "session_approvals";
// How long a closing session waits for a reflection in flight (the
// reflector's own timeout is 30 s).
constexpr std::chrono::seconds kReflectionDrain{35};

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

// Sessions open in this process (OpenSessionMark).
std::atomic<size_t> g_open_sessions{0};

}  // namespace

OpenSessionMark::OpenSessionMark() { g_open_sessions.fetch_add(1, std::memory_order_relaxed); }
OpenSessionMark::~OpenSessionMark() {
  if (g_open_sessions.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

SessionImpl::SessionImpl(EngineImpl& engine, SessionOptions options, SessionInfo info,
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

SessionImpl::~SessionImpl() {
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

std::vector<McpServerState> SessionImpl::mcp_servers() const {
  std::vector<McpServerState> out;
  for (const mcp::ServerStatus& s : mcp_servers_) out.push_back(mcp::CurrentState(s));
  return out;
}

Session::ContextUsage SessionImpl::context() const {
  if (last_context_) return *last_context_;
  ModelLimits limits =
      ResolveModelLimits(options_.model, options_.context_window, options_.max_output_tokens);
  ContextUsage c;
  c.tokens = (static_cast<int64_t>(system_prompt_.size()) + transcript_.chars() + 3) / 4;
  if (context_measure_ && transcript_.chars() >= context_measure_->history_chars) {
    c.tokens =
        context_measure_->tokens + (transcript_.chars() - context_measure_->history_chars + 3) / 4;
  }
  c.window = limits.context_window;
  return c;
}

bool SessionImpl::retryable() const {
  if (open_checkpoint_) return false;
  if (batch_decided_) return true;
  if (!last_turn_end_ || transcript_.empty() || transcript_.back().role != Role::kUser) {
    return false;
  }
  if (last_turn_end_->stop == StopReason::kFailed) return true;
  return last_turn_end_->stop == StopReason::kBudgetExhausted && BudgetRaisedOver(*last_turn_end_);
}

bool SessionImpl::BudgetRaisedOver(const LastTurnEnd& end) const {
  const Budget b = EffectiveBudget();
  if (end.reason.starts_with("wall time budget")) return false;
  return end.counters.tool_calls < b.max_tool_calls && end.counters.tokens < b.max_tokens &&
         end.counters.model_calls < b.max_turns;
}

std::optional<ResumeKind> SessionImpl::resumable() const {
  if (open_checkpoint_) return std::nullopt;
  if (batch_decided_) return ResumeKind::kDecidedBatch;
  if (retryable()) return ResumeKind::kRetry;
  if (last_turn_end_ && last_turn_end_->stop == StopReason::kFailed &&
      last_turn_end_->reason.starts_with(kCutTurnReason)) {
    return ResumeKind::kInterrupted;
  }
  return std::nullopt;
}

Status SessionImpl::SetModel(const std::string& model) {
  if (Trim(model).empty()) return InvalidArgument("model name is empty");
  const std::string before = options_.model;
  options_.model = model;
  AL_RETURN_IF_ERROR(RebuildProvider());
  if (pinned_ && before != model) {
    unsaved_changes_.push_back({"model", Json(before), Json(model), "/model"});
  }
  return Status::Ok();
}

std::string SessionImpl::TodoLoopCommand(const std::string& args) {
  if (!todo_loop_) return "todo-loop: off for this session (--no-todo-loop)";
  std::string out =
      todo_loop_->TodoLoopCommand(info_.id, args, transcript_.messages(), options_.workspace);
  if (Status saved = SaveTodoState(); !saved.ok()) {
    out += "\ntodo-loop: the change holds for this process only: " + saved.ToString();
  }
  return out;
}

Json SessionImpl::todo_loop_status() const {
  if (!todo_loop_) return nullptr;
  return todo_loop_->Status(info_.id).ToJson();
}

TurnCounters SessionImpl::totals() const {
  TurnCounters t = settled_totals_;
  AddCounters(t, latest_turn_counters_);
  return t;
}

ToolContext SessionImpl::MakeToolContext() const {
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

Status SessionImpl::RefreshPause() {
  if (!open_checkpoint_) return Status::Ok();
  AL_ASSIGN_OR_RETURN(open_checkpoint_, engine_store().OpenCheckpoint(info_.id));
  if (!open_checkpoint_) batch_decided_ = true;
  return Status::Ok();
}

Status SessionImpl::SaveTodoState() {
  if (!todo_loop_ || !lock_) return Status::Ok();
  return lock_->SetState(kTodoStateKey, todo_loop_->ExportState(info_.id))
      .WithContext("saving the todo state of session " + info_.id);
}

Status SessionImpl::SaveReflectorState() {
  if (!reflector_ || !lock_) return Status::Ok();
  return lock_->SetState(kReflectorStateKey, reflector_->ExportState(info_.id))
      .WithContext("saving the reflector state of session " + info_.id);
}

Status SessionImpl::SaveTurnState() {
  AL_RETURN_IF_ERROR(SaveTodoState());
  AL_RETURN_IF_ERROR(SaveReflectorState());
  if (approvals_changed_ && lock_) {
    AL_RETURN_IF_ERROR(lock_->SetState(kApprovalsStateKey, Json(approvals_->Keys()))
                           .WithContext("saving the approvals of session " + info_.id));
    approvals_changed_ = false;
  }
  return Status::Ok();
}

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
  // The state the session's turns left. A read that fails fails the open:
  // a session opened without its state would write fresh state over it at
  // its next turn's end.
  auto read_state = [this](std::string_view key) -> Result<std::optional<Json>> {
    Result<std::optional<Json>> state = engine_.store().GetState(info_.id, key);
    if (!state.ok()) {
      return state.error().WithContext("reading the " + std::string(key) + " state of session " +
                                       info_.id);
    }
    return state;
  };
  AL_ASSIGN_OR_RETURN(std::optional<Json> saved_approvals, read_state(kApprovalsStateKey));
  if (saved_approvals && saved_approvals->is_array()) {
    std::vector<std::string> keys;
    for (const Json& k : *saved_approvals) {
      if (k.is_string()) keys.push_back(k.get<std::string>());
    }
    approvals_->Restore(keys);
  }

  engine::HookSinks sinks;
  // The todo loop decides what is news (a stop without a list is not, and
  // it says nothing then): every note it hands over is shown.
  sinks.notify = [this](const std::string&, const std::string& level, const std::string& text) {
    std::lock_guard<std::mutex> lock(notes_mu_);
    if (current_turn_ != nullptr) current_turn_->PostNotice(level, text);
  };
  AL_ASSIGN_OR_RETURN(engine::WiredHooks hooks,
                      engine::WireHooks(options_, tools, provider_, ctx, std::move(sinks)));
  hooks_ = std::move(hooks.all);
  todo_loop_ = std::move(hooks.todo_loop);
  reflector_ = std::move(hooks.reflector);
  // A stored state this build cannot read is a warning: the session starts
  // that state afresh.
  if (todo_loop_) {
    AL_ASSIGN_OR_RETURN(std::optional<Json> state, read_state(kTodoStateKey));
    if (state) {
      if (Status s = todo_loop_->ImportState(info_.id, *state); !s.ok()) {
        warnings_.push_back("the stored todo-loop state was not restored: " + s.message());
      }
    }
  }
  if (reflector_) {
    AL_ASSIGN_OR_RETURN(std::optional<Json> state, read_state(kReflectorStateKey));
    if (state) {
      if (Status s = reflector_->ImportState(info_.id, *state); !s.ok()) {
        warnings_.push_back("the stored reflector state was not restored: " + s.message());
      }
    }
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
  AL_ASSIGN_OR_RETURN(
      run.result, session->RunOnCaller(
                      op::UserInput{engine::SubagentTask(def, trusted, req.prompt)}, shown, stop));
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

}  // namespace agentloop
