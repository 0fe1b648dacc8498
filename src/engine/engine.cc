// The composition root: picks and wires the store, provider, tools, rules,
// approvers and hooks around the turn state machine.
//
// Persistence: StoreSink is the turn's event sink. It buffers the events the
// store keeps and commits them at the step boundaries the durability
// contract names: before a model call (step_begin), before a tool runs
// (tool_call_begin), when a batch pauses (pending) and when the turn ends.
// A failed commit fails the turn before its next step.
#include "agentloop/engine.h"

#include <unistd.h>

#include <mutex>

#include "agentloop/runner.h"

#include "base/ids.h"
#include "base/strings.h"
#include "config/config.h"
#include "engine/ask_user.h"
#include "engine/pinned_settings.h"
#include "engine/system_prompt.h"
#include "learning/learning_tools.h"
#include "learning/memory_store.h"
#include "learning/paths.h"
#include "learning/proposals.h"
#include "learning/reflector_hook.h"
#include "learning/skills.h"
#include "learning/usage.h"
#include "permissions/approvers.h"
#include "permissions/policy.h"
#include "permissions/webhook.h"
#include "protocol/codec.h"
#include "protocol/session_settings.h"
#include "providers/factory.h"
#include "providers/http_client.h"
#include "todo/todo_loop_hook.h"
#include "todo/todo_tool.h"
#include "tools/builtin.h"
#include "tools/paths.h"

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
// How long a closing session waits for a reflection in flight (the
// reflector's own timeout is 30 s).
constexpr std::chrono::seconds kReflectionDrain{35};
constexpr size_t kMemoryIndexChars = 2000;
constexpr std::chrono::seconds kLockRecheck{1};

std::string DefaultModel(const std::string& provider) {
  if (provider == "anthropic") return "claude-sonnet-4-5";
  if (provider == "openai-responses") return "gpt-5";
  if (provider == "script") return "script";
  return "gpt-4.1";
}

// Buffers persisted events and commits them at step boundaries; forwards
// every event to the front end's observer after the store has it.
class StoreSink final : public EventSink {
 public:
  StoreSink(SessionStore& store, std::string session_id, EventSink* observer)
      : store_(store), session_id_(std::move(session_id)), observer_(observer) {}

  Status OnEvent(const Event& event) override {
    if (ShouldPersist(event.type)) {
      buffer_.push_back(event);
      if (IsBoundary(event.type)) AL_RETURN_IF_ERROR(Flush());
    }
    // The front end sees every event at once, in seq order; a display
    // failure (e.g. a closed pipe) never fails the turn.
    if (observer_ != nullptr) (void)observer_->OnEvent(event);
    return Status::Ok();
  }

  Status Flush() {
    if (buffer_.empty()) return Status::Ok();
    Status s = store_.Append(session_id_, buffer_);
    if (!s.ok()) return s.WithContext("saving session " + session_id_);
    buffer_.clear();
    return Status::Ok();
  }

 private:
  static bool IsBoundary(EventType t) {
    switch (t) {
      case EventType::kStepBegin:
      case EventType::kToolCallBegin:
      case EventType::kPending:
      case EventType::kTurnEnd:
        return true;
      // A decision is committed with the tool_call_begin (or pending) that
      // follows it: one commit instead of two per step.
      case EventType::kDecision:
      case EventType::kTurnBegin:
      case EventType::kStepEnd:
      case EventType::kTextDelta:
      case EventType::kThinkingDelta:
      case EventType::kMessage:
      case EventType::kToolCallEnd:
      case EventType::kBudgetCheck:
      case EventType::kCompaction:
      case EventType::kHookError:
      case EventType::kNotice:
      case EventType::kContinuation:
      case EventType::kSettings:
        return false;
    }
    return true;
  }

  SessionStore& store_;
  std::string session_id_;
  EventSink* observer_;
  std::vector<Event> buffer_;
};

// Remembers "allow for this session" answers in the session's cache.
class RememberingApprover final : public Approver {
 public:
  RememberingApprover(Approver& inner, std::shared_ptr<permissions::SessionApprovals> approvals)
      : inner_(inner), approvals_(std::move(approvals)) {}
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override {
    ApprovalDecision d = inner_.Decide(request, stop);
    if (d.kind == ApprovalDecision::Kind::kAllow && d.remember_for_session &&
        request.kind == PendingKind::kApproval) {
      approvals_->Remember(request.spec, d.edited_input ? *d.edited_input : request.call.input);
    }
    return d;
  }

 private:
  Approver& inner_;
  std::shared_ptr<permissions::SessionApprovals> approvals_;
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

}  // namespace

// ---------------------------------------------------------------------------

class EngineImpl;

class SessionImpl final : public Session {
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
        open_checkpoint_(std::move(snapshot.open_checkpoint)) {
    for (const auto& w : snapshot.warnings) {
      warnings_.push_back(w.seq > 0 ? "event " + std::to_string(w.seq) + ": " + w.message
                                    : w.message);
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
      SaveReflectorState();
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
    if (open_checkpoint_) {
      std::string ids;
      for (const auto& p : open_checkpoint_->outstanding) ids += (ids.empty() ? "" : ", ") + p.id;
      return FailedPrecondition("session " + info_.id + " is paused waiting for: " + ids +
                                "; resolve with `agentloop approve|deny|answer ID` first");
    }
    return RunTurnWith(TurnInput::User(prompt), callbacks, stop, std::nullopt);
  }

  // A retry continues the newest turn when it failed and its history ends
  // with what the model is to answer (the prompt or committed tool results).
  bool retryable() const override {
    return !open_checkpoint_ && last_turn_end_ && last_turn_end_->stop == StopReason::kFailed &&
           !transcript_.empty() && transcript_.back().role == Role::kUser;
  }

  Result<TurnResult> Retry(const SessionCallbacks& callbacks, std::stop_token stop) override {
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
    return RunTurnWith(TurnInput::Retry(), callbacks, stop, from);
  }

  const SessionOptions& options() const override { return options_; }

  // Runs a turn: a new user input, or the resumption of a paused batch.
  Result<TurnResult> RunTurnWith(TurnInput input, const SessionCallbacks& callbacks,
                                 std::stop_token stop, std::optional<Checkpoint> resumed_from);

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
    SaveTodoState();
    return out;
  }

  Json todo_loop_status() const override {
    if (!todo_loop_) return nullptr;
    return todo_loop_->Status(info_.id).ToJson();
  }

  Budget budget() const override { return EffectiveBudget(); }
  TurnCounters totals() const override { return totals_; }

  const ToolRegistry& tools() const { return registry_; }
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
  uint64_t next_seq() const { return next_seq_; }
  // Commits the changes of the pinned settings not yet stored, with their
  // `settings` event (in `turn_id`), before anything runs under them.
  Status SaveSettingsChanges(const std::string& turn_id);
  Status AppendEvents(std::vector<Event> events);
  void AppendMessageLocal(Message m) { transcript_.Append(std::move(m)); }
  void ClearCheckpoint() { open_checkpoint_.reset(); }

 private:
  Budget EffectiveBudget() const { return engine::EffectiveBudget(options_); }
  Status RebuildProvider();
  void SaveTodoState() {
    if (!todo_loop_) return;
    (void)engine_store().SetState(info_.id, kTodoStateKey, todo_loop_->ExportState(info_.id));
  }
  SessionStore& engine_store();

  // A reopened session (resume, approve in another process) remembers the
  // files the model already looked at: every successful read, write or edit
  // in the stored history marks its file, resolved as the tools resolve it.
  void RebuildReadLedger() {
    std::map<std::string, const ContentBlock*> calls;
    ToolContext ctx = MakeToolContext();
    for (const auto& m : transcript_.messages()) {
      for (const auto& b : m.content) {
        if (b.type == BlockType::kToolUse) {
          calls[b.id] = &b;
        } else if (b.type == BlockType::kToolResult && !b.is_error) {
          auto it = calls.find(b.tool_use_id);
          if (it == calls.end()) continue;
          const ContentBlock& use = *it->second;
          if (use.name != "read" && use.name != "write" && use.name != "edit") continue;
          if (!use.input.is_object() || !use.input.contains("file_path") ||
              !use.input["file_path"].is_string()) {
            continue;
          }
          auto rp = tools::ResolvePath(ctx, use.input["file_path"].get<std::string>(),
                                       tools::Access::kRead);
          if (rp.ok() && rp->exists) ledger_->MarkRead(rp->abs);
        }
      }
    }
  }
  void SaveReflectorState() {
    if (!reflector_) return;
    (void)engine_store().SetState(info_.id, kReflectorStateKey, reflector_->ExportState(info_.id));
  }

  EngineImpl& engine_;
  SessionOptions options_;
  // The session has pinned settings (options_ are them, with the overrides
  // applied); false for a session stored without them.
  bool pinned_ = false;
  std::vector<engine::SettingChange> unsaved_changes_;
  std::optional<LastTurnEnd> last_turn_end_;
  SessionInfo info_;
  std::unique_ptr<SessionLock> lock_;
  // When the lock was last known to be ours (acquired or refreshed).
  std::chrono::steady_clock::time_point lock_checked_at_;
  Transcript transcript_;
  uint64_t next_seq_;
  std::optional<Checkpoint> open_checkpoint_;
  std::vector<std::string> warnings_;
  std::shared_ptr<ModelProvider> provider_;
  ToolRegistry registry_;
  std::shared_ptr<ReadLedger> ledger_ = std::make_shared<ReadLedger>();
  std::shared_ptr<permissions::SessionApprovals> approvals_;
  std::shared_ptr<const PermissionPolicy> policy_;
  std::vector<std::shared_ptr<Hook>> hooks_;
  std::shared_ptr<todo::TodoLoopHook> todo_loop_;
  std::shared_ptr<learning::ReflectorHook> reflector_;
  learning::LearningDirs learning_dirs_;
  std::vector<std::filesystem::path> extra_read_roots_;
  std::shared_ptr<const permissions::RulesPolicy> rules_policy_;
  std::string system_prompt_;
  TurnCounters totals_;
  std::mutex notes_mu_;
  Turn* current_turn_ = nullptr;  // Guarded by notes_mu_; set while a turn runs.
};

namespace {

// The provider a session's options describe, environment defaults applied.
ProviderConfig ProviderConfigFor(const SessionOptions& o, const EnvMap& env) {
  ProviderConfig pc;
  pc.kind = o.provider;
  pc.model = o.model;
  pc.base_url = o.base_url;
  pc.api_key = o.api_key;
  pc.script_path = o.script_path;
  pc.use_max_tokens_field = o.use_max_tokens_field;
  return WithEnvDefaults(pc, env);
}

bool IsRemote(const std::string& kind) {
  return kind == "openai" || kind == "anthropic" || kind == "openai-responses";
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
      if (IsRemote(pc.kind) && Configured(pc, *options_.preconnect_for) && !pc.base_url.empty()) {
        http()->Preconnect(pc.base_url, pc.connect_timeout);
      }
    }
    if (options_.store) {
      store_ = options_.store;
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
  const std::filesystem::path& data_dir() const { return data_dir_; }

  std::shared_ptr<HttpClient> http() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!http_) http_ = HttpClient::Create();
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
    auto ws = CanonicalWorkspace(o.workspace);
    if (!ws.ok()) {
      return FailedPrecondition("session " + session_id + " runs in " + o.workspace.string() +
                                ", which is no longer an accessible directory");
    }
    o.workspace = *ws;
    return std::optional<engine::AppliedSettings>(std::move(applied));
  }

  Result<std::unique_ptr<SessionImpl>> OpenImpl(SessionOptions options) {
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
      p.provider = options.provider;
      p.model = options.model;
      p.command = options.command;
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
      AL_ASSIGN_OR_RETURN(lock, store_->AcquireLock(info.id, pid));
      AL_ASSIGN_OR_RETURN(snap, store_->Load(info.id, LoadOptions{}));
      info = snap.info;
    }
    auto session = std::make_unique<SessionImpl>(*this, std::move(options), info, std::move(lock),
                                                 std::move(snap), pinned, std::move(changes));
    AL_RETURN_IF_ERROR(session->Init());
    return session;
  }

  Result<std::unique_ptr<Session>> OpenSession(const SessionOptions& options) override {
    AL_ASSIGN_OR_RETURN(auto s, OpenImpl(options));
    return std::unique_ptr<Session>(std::move(s));
  }

  Result<std::vector<PendingRecord>> ListPending(std::optional<std::string> session_id) override {
    if (session_id) {
      AL_ASSIGN_OR_RETURN(std::string full, store_->FindSession(*session_id));
      return store_->ListPending(std::string_view(full));
    }
    return store_->ListPending(std::nullopt);
  }

  Result<ResolveReport> Resolve(const std::string& pending_id, const Resolution& resolution,
                                const SessionOptions& options, const SessionCallbacks& callbacks,
                                std::stop_token stop) override;

 private:
  EngineOptions options_;
  std::filesystem::path data_dir_;
  std::shared_ptr<SessionStore> store_;
  std::mutex mu_;
  std::shared_ptr<HttpClient> http_;  // Guarded by mu_.
};

SessionStore& SessionImpl::engine_store() { return engine_.store(); }

Status SessionImpl::RebuildProvider() {
  SessionOptions with_key = options_;
  if (!options_.api_key_env.empty()) {
    const EnvMap& env = engine_.options().env;
    auto it = env.find(options_.api_key_env);
    if (it != env.end() && !it->second.empty()) {
      with_key.api_key = it->second;
    } else if (with_key.api_key.empty()) {
      return InvalidArgument("the API key of session " + info_.id + " comes from $" +
                             options_.api_key_env + ", which is not set");
    }
  }
  const ProviderConfig pc = ProviderConfigFor(with_key, engine_.options().env);
  if (IsRemote(pc.kind) && !Configured(pc, with_key)) {
    return InvalidArgument(HowToConfigureProvider());
  }
  std::shared_ptr<HttpClient> client = pc.kind == "script" ? nullptr : engine_.http();
  AL_ASSIGN_OR_RETURN(std::unique_ptr<ModelProvider> made, MakeProvider(pc, client));
  provider_ = std::move(made);
  if (pc.kind == "script") {
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

  BuiltinToolOptions tool_opts;
  tool_opts.sandbox = options_.sandbox;
  tool_opts.network = options_.sandbox_network;
  tool_opts.sandbox_fallback = options_.sandbox_fallback;
  tool_opts.bash_in_read_only = IsReadOnly(options_.command);
  tool_opts.env_pass = options_.env_pass;
  tool_opts.env_set = options_.env_set;
  tool_opts.bash_default_timeout_ms = options_.bash_timeout_ms;
  RegisterBuiltinTools(registry_, tool_opts);
  auto todo_tool = std::make_shared<todo::TodoTool>();
  registry_.Add(todo_tool);
  registry_.Add(MakeAskUserTool());
  // Learning: memory and skill tools (usage counts and the reflector below).
  std::filesystem::path config_dir;
  if (auto dir = UserConfigDir(engine_.options().env); dir.ok()) config_dir = *dir;
  learning::LearningDirs dirs =
      learning::MakeLearningDirs(engine_.data_dir(), config_dir, options_.workspace);
  std::vector<std::string> dropped_dirs;
  learning::ConfineWorkspaceDirs(dirs, options_.workspace, &dropped_dirs);
  for (auto& d : dropped_dirs) warnings_.push_back("learning: " + d);
  for (auto& t : learning::MakeLearningTools(dirs)) registry_.Add(t);
  learning_dirs_ = dirs;
  {
    std::vector<std::string> dropped;
    extra_read_roots_ = learning::SafeExtraReadRoots(dirs, options_.workspace, config_dir,
                                                     engine_.data_dir(), &dropped);
    for (auto& d : dropped) warnings_.push_back("skills: " + d);
  }
  todo_tool->ReplayFromHistory(info_.id, transcript_.messages());
  RebuildReadLedger();
  hooks_.push_back(std::make_shared<todo::TodoReplayHook>(todo_tool));

  // Rules: config layers and flags, then the read-only command's own deny.
  std::vector<permissions::RuleSource> sources;
  auto add = [&](const std::vector<SessionOptions::RuleSource>& rules, Decision d) {
    for (const auto& r : rules) {
      permissions::RuleSource src;
      src.source = r.source;
      if (d == Decision::kAllow) src.allow.push_back(r.rule);
      if (d == Decision::kAsk) src.ask.push_back(r.rule);
      if (d == Decision::kDeny) src.deny.push_back(r.rule);
      sources.push_back(std::move(src));
    }
  };
  add(options_.deny, Decision::kDeny);
  add(options_.ask, Decision::kAsk);
  add(options_.allow, Decision::kAllow);
  permissions::ParseOptions parse_opts;
  parse_opts.tools = registry_.Specs();
  AL_ASSIGN_OR_RETURN(permissions::RuleSet rules, permissions::ParseRules(sources, parse_opts));
  for (const auto& w : rules.warnings) warnings_.push_back("permissions: " + w);
  permissions::PolicyOptions popts;
  popts.workspace = options_.workspace;
  popts.home = EnvValue(engine_.options().env, "HOME");
  if (options_.default_mutating) popts.default_mutating = *options_.default_mutating;
  if (options_.default_read_only) popts.default_read_only = *options_.default_read_only;
  popts.read_only_command = IsReadOnly(options_.command);
  // The user's configuration and the data directory (sessions, memory, the
  // trusted workspaces) are the engine's own: writes there are always asked.
  if (auto dir = UserConfigDir(engine_.options().env); dir.ok()) {
    popts.protected_roots.push_back(*dir);
  }
  if (!engine_.data_dir().empty()) popts.protected_roots.push_back(engine_.data_dir());
  auto inner = std::make_shared<permissions::RulesPolicy>(std::move(rules), popts);
  rules_policy_ = inner;
  approvals_ = std::make_shared<permissions::SessionApprovals>(options_.workspace);
  policy_ = std::make_shared<permissions::CachedPolicy>(inner, approvals_);

  if (options_.todo_loop) {
    todo::TodoLoopOptions topts;
    topts.config.max_rounds = options_.todo_max_rounds;
    topts.config.max_strikes = options_.todo_max_strikes;
    topts.config.inject_state = options_.todo_inject_state;
    topts.config.max_injected_tasks = options_.todo_max_injected_tasks;
    topts.kill_switch_global = todo::DefaultGlobalKillSwitch(engine_.options().env);
    topts.notify = [this](const std::string&, const std::string& level, const std::string& text) {
      // "No list" is the common case, not news: keep the stream quiet.
      if (text == "todo-loop: stopped: no list") return;
      std::lock_guard<std::mutex> lock(notes_mu_);
      if (current_turn_ != nullptr) current_turn_->PostNotice(level, text);
    };
    topts.on_decision = [this](const std::string&, const Json& decision) {
      std::lock_guard<std::mutex> lock(notes_mu_);
      if (current_turn_ == nullptr) return;
      Json data = decision.is_object() ? decision : Json::object();
      data["by"] = "todo-loop";
      current_turn_->PostEvent(EventType::kContinuation, std::move(data));
    };
    todo_loop_ = std::make_shared<todo::TodoLoopHook>(std::move(topts));
    auto state = engine_.store().GetState(info_.id, kTodoStateKey);
    if (state.ok() && state->has_value()) (void)todo_loop_->ImportState(info_.id, **state);
    hooks_.push_back(todo_loop_);
  }

  hooks_.push_back(
      std::make_shared<learning::UsageHook>(std::make_shared<learning::UsageTracker>()));
  if (options_.reflector) {
    learning::ReflectorOptions ropts;
    ropts.provider = provider_;
    ropts.model = options_.model;
    ropts.proposals = std::make_shared<learning::ProposalStore>(dirs.proposals);
    reflector_ = std::make_shared<learning::ReflectorHook>(std::move(ropts));
    auto state = engine_.store().GetState(info_.id, kReflectorStateKey);
    if (state.ok() && state->has_value()) (void)reflector_->ImportState(info_.id, **state);
    hooks_.push_back(reflector_);
  }

  SystemPromptParts parts;
  parts.base_override = options_.system_prompt;
  parts.workspace = options_.workspace;
  parts.command = options_.command;
  parts.extra_sections.push_back(
      learning::MemoryStore(dirs.user_memory, dirs.workspace_memory).Index(kMemoryIndexChars));
  parts.extra_sections.push_back(
      learning::SkillStore(dirs.user_skills, dirs.workspace_skills).Index());
  system_prompt_ = BuildSystemPrompt(parts);
  return Status::Ok();
}

Status SessionImpl::SaveSettingsChanges(const std::string& turn_id) {
  if (!pinned_ || unsaved_changes_.empty()) return Status::Ok();
  const Json settings = PinnedSettingsToJson(options_);
  Event e;
  e.type = EventType::kSettings;
  e.session_id = info_.id;
  e.turn_id = turn_id;
  e.seq = next_seq_;
  e.data = engine::SettingsEventData(unsaved_changes_, settings);
  Status s = engine_.store().UpdateSettings(info_.id, settings, {&e, 1});
  if (!s.ok()) return s.WithContext("saving the changed settings of session " + info_.id);
  ++next_seq_;
  unsaved_changes_.clear();
  return Status::Ok();
}

Status SessionImpl::AppendEvents(std::vector<Event> events) {
  for (auto& e : events) {
    e.session_id = info_.id;
    e.seq = next_seq_++;
  }
  return engine_.store().Append(info_.id, events);
}

Result<TurnResult> SessionImpl::RunTurnWith(TurnInput input, const SessionCallbacks& callbacks,
                                            std::stop_token stop,
                                            std::optional<Checkpoint> resumed_from) {
  // Before a turn, make sure the session lock is still ours (another process
  // takes it over only after the lock's TTL, 30 s, without a heartbeat). A lock
  // acquired or checked within the last second needs no new check: that
  // saves a durable commit (an fsync) before the first request of a run.
  if (lock_ && std::chrono::steady_clock::now() - lock_checked_at_ >= kLockRecheck) {
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
  StoreSink sink(engine_.store(), info_.id, callbacks.observer);
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
  cfg.system_prompt = system_prompt_;
  cfg.budget = EffectiveBudget();
  cfg.tools = registry_.Specs();
  cfg.policy = policy_;
  cfg.hooks = hooks_;
  cfg.sink = &sink;
  cfg.first_seq = next_seq_;
  cfg.workspace = options_.workspace;

  permissions::DurableApprover durable;
  std::unique_ptr<Approver> webhook;
  Approver* chosen = nullptr;
  switch (options_.approver) {
    case ApproverMode::kAuto:
      chosen = options_.interactive && callbacks.console_approver != nullptr
                   ? callbacks.console_approver
                   : static_cast<Approver*>(&durable);
      break;
    case ApproverMode::kConsole:
      chosen = callbacks.console_approver;
      break;
    case ApproverMode::kDurable:
      chosen = &durable;
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
      webhook = std::move(*created);
      chosen = webhook.get();
      break;
    }
    case ApproverMode::kNone:
      chosen = nullptr;
      break;
  }
  std::optional<RememberingApprover> remembering;
  if (chosen != nullptr) remembering.emplace(*chosen, approvals_);

  // Only now, with everything that can fail set up, does the input enter
  // the history.
  Turn turn(cfg, transcript_);
  AL_RETURN_IF_ERROR(turn.Start(std::move(input)));

  RunnerDeps deps;
  deps.provider = provider_.get();
  deps.tools = &registry_;
  deps.approver = remembering ? &*remembering : nullptr;
  deps.stream = callbacks.stream;
  deps.tool_context = MakeToolContext();
  struct CurrentTurn {
    SessionImpl& s;
    CurrentTurn(SessionImpl& session, Turn* t) : s(session) {
      std::lock_guard<std::mutex> lock(s.notes_mu_);
      s.current_turn_ = t;
    }
    ~CurrentTurn() {
      std::lock_guard<std::mutex> lock(s.notes_mu_);
      s.current_turn_ = nullptr;
    }
    CurrentTurn(const CurrentTurn&) = delete;
    CurrentTurn& operator=(const CurrentTurn&) = delete;
  };
  TurnResult result;
  {
    CurrentTurn current(*this, &turn);  // hooks' notices go to this turn while it runs
    result = agentloop::RunTurn(turn, deps, stop);
  }
  next_seq_ = result.next_seq;
  Status flushed = sink.Flush();
  last_turn_end_ = LastTurnEnd{
      turn.config().turn_id, 0, result.stop, result.reason, result.final_text, result.truncated,
      result.counters};

  SaveTodoState();
  SaveReflectorState();

  if (result.checkpoint) {
    Status s = engine_.store().SaveCheckpoint(*result.checkpoint);
    if (!s.ok()) return s.WithContext("saving the paused batch");
    open_checkpoint_ = result.checkpoint;
  }
  totals_.tool_calls += result.counters.tool_calls;
  totals_.tokens += result.counters.tokens;
  totals_.model_calls += result.counters.model_calls;
  totals_.usage += result.counters.usage;
  if (!flushed.ok() && result.stop != StopReason::kFailed) {
    result.stop = StopReason::kFailed;
    result.reason = flushed.ToString();
  }
  return result;
}

// ---------------------------------------------------------------------------

Result<ResolveReport> EngineImpl::Resolve(const std::string& pending_id,
                                          const Resolution& resolution,
                                          const SessionOptions& options,
                                          const SessionCallbacks& callbacks, std::stop_token stop) {
  ResolveReport report;
  // Find the session that owns the item.
  AL_ASSIGN_OR_RETURN(auto all, store_->ListPending(std::nullopt));
  const PendingRecord* rec = nullptr;
  for (const auto& r : all) {
    if (r.item.id == pending_id) rec = &r;
  }
  if (rec == nullptr) {
    report.already_resolved = true;
    return report;
  }
  report.session_id = rec->session_id;
  report.item = rec->item;
  if (resolution.kind == Resolution::Kind::kAnswer && rec->item.kind != PendingKind::kQuestion) {
    return InvalidArgument("pending item " + pending_id +
                           " is an approval, not a question: use `agentloop approve` or `deny`");
  }
  if (resolution.kind != Resolution::Kind::kAnswer && rec->item.kind == PendingKind::kQuestion &&
      resolution.kind == Resolution::Kind::kApprove) {
    return InvalidArgument("pending item " + pending_id + " is a question: use `agentloop answer " +
                           pending_id + " TEXT`");
  }

  // Open the session: takes its lock (a running turn makes this kBusy) and
  // gives the tools and the workspace the session was created with.
  SessionOptions opts = options;
  opts.session_id = rec->session_id;
  AL_ASSIGN_OR_RETURN(SessionInfo info, store_->GetSession(rec->session_id));
  opts.workspace = info.workspace;
  // The paused turn continues under its own command (budgets, policy,
  // plan mode), whatever the resolver's flags say.
  if (auto kind = ParseCommandKind(info.command)) opts.command = *kind;
  if (opts.provider.empty()) opts.provider = info.provider;
  if (opts.model.empty()) opts.model = info.model;
  AL_ASSIGN_OR_RETURN(auto session, OpenImpl(opts));
  report.model = session->options().model;

  std::vector<Event> decision_events;
  auto decision_event = [&](const PendingItem& item, std::string_view decision, bool edited) {
    Event e;
    e.type = EventType::kDecision;
    e.data = Json{{"tool_use_id", item.tool_use_id},
                  {"tool", item.tool},
                  {"decision", decision},
                  {"reason", resolution.reason},
                  {"rule", ""},
                  {"by", resolution.by},
                  {"edited", edited},
                  {"pending_id", item.id}};
    return e;
  };

  // The session lock is held (every resolver and every turn takes it), so
  // the item cannot be resolved by anyone else until we are done: run an
  // approved tool now, outside the store's write transaction (a long bash
  // call must not hold other sessions' writers up), then record the result
  // atomically.
  auto open = session->open_checkpoint();
  bool outstanding = false;
  if (open) {
    for (const auto& p : open->outstanding) outstanding = outstanding || p.id == pending_id;
  }
  if (!outstanding) {
    report.already_resolved = true;
    return report;
  }
  AL_RETURN_IF_ERROR(session->SaveSettingsChanges(rec->turn_id));
  std::optional<ContentBlock> approved_result;
  if (resolution.kind == Resolution::Kind::kApprove) {
    const PendingItem& item = rec->item;
    Tool* tool = session->tools().Find(item.tool);
    if (tool == nullptr) return FailedPrecondition("tool '" + item.tool + "' is not available");
    Json args = resolution.edited_arguments ? *resolution.edited_arguments : item.arguments;
    if (!args.is_object()) return InvalidArgument("edited arguments must be a JSON object");
    AL_RETURN_IF_ERROR(ValidateAgainstSchema(args, tool->spec().input_schema)
                           .WithContext("edited arguments for '" + item.tool + "'"));
    if (std::string r = Turn::CheckReadOnly(open->command, tool->spec()); !r.empty()) {
      return FailedPrecondition(r);
    }
    ToolContext ctx = session->MakeToolContext();
    ctx.stop = stop;
    ctx.read_only = IsReadOnly(open->command);
    // Through the runner's path: an exception from the tool becomes is_error.
    std::vector<Result<ToolOutput>> outs =
        RunToolLanes({{ToolCall{item.tool_use_id, item.tool, args}}}, session->tools(), ctx);
    Result<ToolOutput>& out = outs.at(0);
    ToolOutput o =
        out.ok() ? *out : ToolOutput::Error("not run: engine failure: " + out.error().ToString());
    ContentBlock b = ContentBlock::ToolResult(item.tool_use_id, o.content, o.is_error);
    if (!o.details.is_null()) b.meta = Json{{"details", o.details}};
    approved_result = std::move(b);
  }

  auto fn = [&](Checkpoint& cp, const PendingItem& item) -> Result<ResolveAction> {
    switch (resolution.kind) {
      case Resolution::Kind::kApprove:
        cp.results_so_far.push_back(*approved_result);
        decision_events.push_back(
            decision_event(item, "allow", resolution.edited_arguments.has_value()));
        return ResolveAction::kResolved;
      case Resolution::Kind::kAnswer:
        cp.results_so_far.push_back(
            ContentBlock::ToolResult(item.tool_use_id, resolution.answer, false));
        decision_events.push_back(decision_event(item, "allow", false));
        return ResolveAction::kResolved;
      case Resolution::Kind::kDeny: {
        std::string why =
            resolution.reason.empty() ? "denied by " + resolution.by : resolution.reason;
        cp.results_so_far.push_back(
            ContentBlock::ToolResult(item.tool_use_id, "denied: " + why, true));
        for (const auto& other : cp.outstanding) {
          if (other.id == item.id) continue;
          cp.results_so_far.push_back(ContentBlock::ToolResult(
              other.tool_use_id,
              "skipped: a sibling tool call in this turn (" + item.tool + ") was denied", true));
        }
        decision_events.push_back(decision_event(item, "deny", false));
        return ResolveAction::kCloseBatch;
      }
    }
    return Internal("unknown resolution");
  };
  AL_ASSIGN_OR_RETURN(ResolveOutcome outcome, store_->Resolve(pending_id, fn));
  if (outcome.already_resolved) {
    report.already_resolved = true;
    return report;
  }
  for (auto& e : decision_events) e.turn_id = outcome.checkpoint.turn_id;
  AL_RETURN_IF_ERROR(session->AppendEvents(decision_events));
  report.outstanding = static_cast<int>(outcome.checkpoint.outstanding.size());
  if (!outcome.closed) return report;

  // The batch is complete: results in the model's order.
  const Checkpoint& cp = outcome.checkpoint;
  std::vector<ContentBlock> ordered;
  for (const auto& id : cp.tool_use_ids) {
    for (const auto& b : cp.results_so_far) {
      if (b.tool_use_id == id) {
        ordered.push_back(b);
        break;
      }
    }
  }
  session->ClearCheckpoint();
  if (resolution.kind == Resolution::Kind::kDeny) {
    // The denial ends the turn, as a live denial would.
    Message results;
    results.role = Role::kUser;
    results.content = ordered;
    std::string text = "Stopped \xE2\x80\x94 you denied: " + report.item.tool +
                       ". Send another message to continue.";
    std::vector<Event> events;
    for (Message m : {results, EngineStopMessage(text)}) {
      session->AppendMessageLocal(m);
      Event e;
      e.type = EventType::kMessage;
      e.turn_id = cp.turn_id;
      e.data = Json{{"message", ToJson(m)}};
      events.push_back(std::move(e));
    }
    TurnResult tr;
    tr.stop = StopReason::kDenied;
    tr.reason = "denied: " + report.item.tool;
    tr.final_text = text;
    tr.counters = cp.counters;
    Event end;
    end.type = EventType::kTurnEnd;
    end.turn_id = cp.turn_id;
    end.data = Json{{"stop", "denied"},
                    {"reason", tr.reason},
                    {"final_text", text},
                    {"truncated", false},
                    {"counters", ToJson(cp.counters)},
                    {"pending", Json::array()}};
    events.push_back(end);
    AL_RETURN_IF_ERROR(session->AppendEvents(events));
    tr.next_seq = session->next_seq();
    report.resumed = tr;
    return report;
  }
  AL_ASSIGN_OR_RETURN(TurnResult tr,
                      session->RunTurnWith(TurnInput::Resume(ordered), callbacks, stop, cp));
  report.resumed = std::move(tr);
  return report;
}

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options) {
  auto engine = std::make_unique<EngineImpl>(std::move(options));
  AL_RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace agentloop
