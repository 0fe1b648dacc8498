// Internal declarations of the engine: the Session implementation
// (SessionImpl), the Engine implementation (EngineImpl) and what their
// files share. Only src/engine includes it.
#pragma once

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
#include "engine/store_sink.h"
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

// What a turn is to be: its input and, for a turn that continues (a decided
// batch, a retry), the turn it continues.
struct TurnPlan {
  TurnInput input;
  std::optional<Checkpoint> resumed_from;
  // The queued input the turn runs: taken with the turn's first commit.
  std::string queued_input_id;
};

// What a running turn holds (session_turns.cc).
struct ActiveTurn;

// Sessions open in this process. When the last one closes, the free heap
// the allocator keeps is given back to the system: after a burst of turns a
// server's memory would otherwise stay at the burst's peak (glibc returns
// little of a fragmented heap by itself).
class OpenSessionMark {
 public:
  OpenSessionMark();
  ~OpenSessionMark();
  OpenSessionMark(const OpenSessionMark&) = delete;
  OpenSessionMark& operator=(const OpenSessionMark&) = delete;
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

class EngineImpl;

class SessionImpl final : public Session, public engine::SubagentHost {
 public:
  SessionImpl(EngineImpl& engine, SessionOptions options, SessionInfo info,
              std::unique_ptr<SessionLock> lock, SessionSnapshot snapshot, bool pinned,
              std::vector<engine::SettingChange> changes);

  ~SessionImpl() override;

  Status Init();

  const std::string& id() const override { return info_.id; }
  const SessionInfo& info() const override { return info_; }
  std::span<const Message> history() const override { return transcript_.messages(); }
  const std::vector<std::string>& load_warnings() const override { return warnings_; }
  std::optional<Checkpoint> open_checkpoint() const override { return open_checkpoint_; }

  Result<TurnResult> Run(const std::string& prompt, const SessionCallbacks& callbacks,
                         std::stop_token stop) override;

  Result<TurnResult> Compact(const std::string& focus, const SessionCallbacks& callbacks,
                             std::stop_token stop) override;

  std::vector<McpServerState> mcp_servers() const override;

  ContextUsage context() const override;

  // A retry continues a decided batch, or the newest turn when its history
  // ends with what the model is to answer (the prompt or committed tool
  // results) and it failed, or ran out of a budget that has been raised
  // since (the person widened it: SettingsOverrides::person_budgets).
  bool retryable() const override;

  // The budgets now leave room for what `end`'s turn spent: every count
  // below its limit. (A turn out of wall time is not continued: its
  // elapsed time is not a count the turn carries.)
  bool BudgetRaisedOver(const LastTurnEnd& end) const;

  Result<TurnResult> Retry(const SessionCallbacks& callbacks, std::stop_token stop) override;

  std::optional<ResumeKind> resumable() const override;

  Result<TurnResult> Resume(const SessionCallbacks& callbacks, std::stop_token stop) override;

  // The same preparations and checks as Run/Retry, in a step of the
  // executor (they read and write the store); the turn is then driven by
  // RunTurnAsync.
  void StartRun(const std::string& prompt, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                std::stop_token stop) override;
  void StartRetry(TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                  std::stop_token stop) override;
  void StartContinue(TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                     std::stop_token stop) override;
  void StartResume(TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                   std::stop_token stop) override;
  void StartQueued(const QueuedInput& input, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                   std::stop_token stop) override;

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

  Status SetModel(const std::string& model) override;

  std::string TodoLoopCommand(const std::string& args) override;

  Json todo_loop_status() const override;

  Budget budget() const override { return EffectiveBudget(); }
  TurnCounters totals() const override;

  ToolContext MakeToolContext() const;
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
  Status RefreshPause();

  Status RebuildProvider();
  // Offers the agent definitions this session may start as agent__<name>
  // tools (a root session: all; a child: those its definition lists), and
  // applies a child's tool allow-list.
  void AddSubagentTools(const engine::WiringContext& ctx);
  // Only the holder of the session writes its state (through its lock): a
  // resolver that opened it without the lock must not overwrite what the
  // holder keeps. Without the lock these write nothing.
  Status SaveTodoState();
  SessionStore& engine_store();

  void RememberDecided(const std::vector<BatchDecision>& decisions);
  // The session's approvals changed ("allow for this session"): they are
  // written with the state the turn leaves (SaveTurnState), through the
  // lock, by the holder, which is who remembers them (a live decision in
  // its turn, or a decided batch it claims).
  void SaveApprovals() { approvals_changed_ = true; }

  Status SaveReflectorState();

  // What a turn leaves besides its events: the todo loop's and the
  // reflector's state and changed approvals, written just before the
  // commit of its end (StoreSink::SaveStateBeforeEnd).
  Status SaveTurnState();

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

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(EngineOptions options) : options_(std::move(options)) {}

  Status Init();

  SessionStore& store() override { return *store_; }
  const EngineOptions& options() const { return options_; }
  // The clock of the events' `ts`.
  int64_t NowMs() const { return options_.now_ms ? options_.now_ms() : SystemNowMs(); }
  const std::filesystem::path& data_dir() const { return data_dir_; }

  std::shared_ptr<HttpClient> http();

  // The workspace made canonical. Errors: kInvalidArgument when it is not an
  // accessible directory.
  static Result<std::filesystem::path> CanonicalWorkspace(std::filesystem::path ws);

  // A stored session's options: its pinned settings with the caller's
  // overrides applied, plus what is per process (secrets, terminal).
  // nullopt: nothing is pinned (a session stored by an older agentloop).
  Result<std::optional<engine::AppliedSettings>> PinnedOptions(const std::string& session_id,
                                                               const SessionOptions& caller);

  // How OpenImpl treats a stored session another process holds.
  enum class LockMode {
    kRequire,  // kBusy
    kIfFree,   // open it without the lock (and without crash repair): it cannot run turns
  };

  Result<std::unique_ptr<SessionImpl>> OpenImpl(SessionOptions options,
                                                LockMode lock_mode = LockMode::kRequire);

  // A new child session (SessionImpl::RunSubagent).
  Result<std::unique_ptr<SessionImpl>> OpenChild(SessionOptions options) {
    return OpenImpl(std::move(options));
  }

  Result<std::unique_ptr<Session>> OpenSession(const SessionOptions& options) override {
    AL_ASSIGN_OR_RETURN(auto s, OpenImpl(options));
    return std::unique_ptr<Session>(std::move(s));
  }

  Result<std::optional<PendingRecord>> FindPending(const std::string& pending_id) override;

  // One inbox for a tree of subagents: a session's list holds its own
  // items and, in place of each call that waits on a subagent, that
  // subagent's items (recursively); the list of every session leaves out
  // the waiting calls (their children's items are listed on their own).
  // Each item carries its root session and the path of agents that asks.
  Result<std::vector<PendingRecord>> ListPending(std::optional<std::string> session_id) override;

  // The items a person decides for `items` of `session_id`'s paused batch:
  // a call waiting on a subagent stands for that subagent's items.
  Result<std::vector<PendingItem>> PendingOfTree(const std::string& session_id,
                                                 const std::vector<PendingItem>& items);

  // The child session that the call `tool_use_id` of `parent_id`'s turn
  // `turn_id` started, if any.
  Result<std::optional<std::string>> FindChild(const std::string& parent_id,
                                               const std::string& turn_id,
                                               const std::string& tool_use_id);

  // `child`'s paused batch is decided: decides the item of its caller's
  // batch that waits on it, and so on up while each batch is then decided.
  // Returns the root session when its batch is decided by this (its turn
  // is to continue); nullopt when a caller still waits on other items or
  // has not stored its pause yet (it then wakes itself, see FinishTurn).
  Result<std::optional<std::string>> WakeCallers(const SessionInfo& child);

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

  Result<PolicyVerdict> Evaluate(const SessionOptions& options, const ToolCall& call) override;

 private:
  // The root of `session_id`'s tree of subagents (itself for a root).
  Result<std::string> RootOf(std::string session_id);
  // The path of agents pinned to a child session ("root/reviewer"); empty
  // for a root session.
  Result<std::string> PathOf(const std::string& session_id);
  // Appends `r`, or for a call waiting on a subagent that subagent's items.
  Status ExpandPending(const PendingRecord& r, const std::string& root,
                       std::vector<PendingRecord>& out, int depth);
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
                                                           const std::string& who);

 private:
  EngineOptions options_;
  std::filesystem::path data_dir_;
  std::shared_ptr<SessionStore> store_;
  std::mutex mu_;
  std::shared_ptr<HttpClient> http_;  // Guarded by mu_.
};

}  // namespace agentloop
