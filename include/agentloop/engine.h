// Engine and Session: the composition root that wires the turn state machine
// to a session store, a provider, the built-in tools, permission rules,
// approvers and hooks. The CLI and (later) the HTTP server are thin drivers
// over these two classes; neither contains loop logic.
//
// Engine: process-wide, owns the session store and the shared HTTP client.
// Session: one conversation, opened (created or loaded) by Engine; holds the
// session lock while it is open, so a second process that opens the same
// session gets kBusy "session ... is busy".
//
// Operations in, outcomes out: a session takes operations (Op: a user
// input, a continuation, a retry, a compaction, a queued input) through one
// entry point, Session::Submit, which runs each as a turn on the same
// asynchronous turn runner and answers with its TurnResult; RunBlocking is
// the same on the caller's thread (the CLI, ACP). A decision about a
// pending item (op::Decide) goes to Engine::Submit, since the item's
// session may be held elsewhere, and answers with a ResolveReport. The
// engine decides what an operation means (what a continuation continues,
// whether anything may run); a front end only picks the operation.
//
// Durability: every event the store must keep is committed before the next
// step starts (the store's Append is the turn's event sink); a paused turn's
// checkpoint is stored before its turn's outcome is reported; a decision
// (op::Decide) continues a paused turn from any process.
//
// Thread-safety: Engine methods may be called from several threads; a
// Session is used by one thread at a time.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <variant>
#include <vector>

#include "agentloop/budget_ledger.h"
#include "agentloop/events.h"
#include "agentloop/executor.h"
#include "agentloop/hook.h"
#include "agentloop/mcp.h"
#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/status.h"
#include "agentloop/store.h"
#include "agentloop/tool.h"
#include "agentloop/turn.h"
#include "agentloop/types.h"

namespace boost::asio {
class io_context;
}

namespace agentloop {

enum class ApproverMode {
  kAuto,     // console when `interactive`, else durable
  kConsole,  // ask on the terminal (needs SessionCallbacks::console_approver)
  kDurable,  // record the pending approval and pause the turn
  kWebhook,  // POST a signed notification, then pause durably
  kNone,     // no approver: every `ask` is denied (fail closed)
};

// A permission rule as users write it ("bash(git status*)", "*"), with where
// it came from for messages.
struct SourcedRule {
  std::string rule;
  std::string source;  // "--allow", "~/.config/agentloop/config.toml:12", ...
  bool operator==(const SourcedRule&) const = default;
};

// What a process that opens a STORED session asks to change in the settings
// pinned to it (see SessionOptions, "Pinned settings"). Unset fields keep the
// pinned value. Narrowing changes (more ask/deny rules, smaller budgets, a
// stricter default or sandbox, a read-only command, switches turned off, no
// approver) and explicit provider changes (provider, model, base URL, API
// key variable, script) are applied and recorded, and so are the person's
// own widenings (person_allow, person_budgets); a change that widens (an
// allow rule, a larger budget, a looser default or sandbox, another
// workspace, ...) makes OpenSession fail with kInvalidArgument naming each.
struct SettingsOverrides {
  std::optional<std::filesystem::path> workspace;
  std::optional<ProviderKind> provider;
  std::optional<std::string> model, base_url, api_key_env, script_path;
  std::optional<int64_t> context_window, max_output_tokens;
  std::optional<CommandKind> command;
  std::optional<int> max_tool_calls;
  std::optional<int64_t> max_tokens;
  std::optional<int> max_turns;
  std::optional<std::chrono::milliseconds> max_wall_time;
  std::vector<SourcedRule> allow, ask, deny;
  // Allow rules the person at an interactive session adds there (the CLI's
  // chat `/permissions allow RULE`): their own decision, so unlike `allow`
  // they may widen the pinned rules (recorded in the `settings` event). A
  // front end fills it only from what a person typed, never from a file, an
  // agent definition or the environment.
  std::vector<SourcedRule> person_allow;
  // The budgets above (max_tool_calls, max_tokens, max_turns,
  // max_wall_time) were set by the person at the session's own terminal
  // (the CLI's flags when a person is at the terminal, chat's /budget and
  // its budget question): their decision, so a budget larger than the
  // pinned one is applied and recorded in the `settings` event with its
  // source, instead of refused. A front end sets it only for what a person
  // typed at their terminal, never for a file, an agent's API client or
  // another process.
  bool person_budgets = false;
  std::optional<Decision> default_mutating, default_read_only;
  std::optional<SandboxMode> sandbox;
  std::optional<bool> sandbox_network;
  std::optional<int> bash_timeout_ms;
  std::optional<bool> todo_loop, reflector;
  std::optional<std::string> system_prompt, system_prompt_source;
  std::optional<ApproverMode> approver;
  std::optional<std::string> webhook_url, webhook_secret_env;
  // Where the values come from, by field name ("model" -> "--model"), for
  // messages and the `settings` event.
  std::map<std::string, std::string> sources;
};

struct SessionOptions;

// Builds the model provider of a session from its options (the model may
// change later: /model rebuilds it). Errors end the opening of the session.
using ProviderFactory =
    std::function<Result<std::shared_ptr<ModelProvider>>(const SessionOptions& options)>;

// What an embedder adds to a session: the same extension points the
// built-in features use. These live in this process only; they are not
// stored with the session (an object cannot be). The NAMES of the extra
// tools and hooks, and whether a provider factory was used, are pinned
// with a new session: opening a stored session fails (kFailedPrecondition,
// naming what is missing) unless the caller passes extensions of the same
// names again, so a session never continues without a tool its history
// uses or a hook that guarded it. More extensions than were pinned are
// accepted (and pinned when the session's settings next change). The
// approver is not pinned: without it the pinned `approver` mode decides
// (by default a durable pause), which never lets more run than it would.
struct SessionExtensions {
  // Offered to the model with the built-in tools, judged by the same
  // permission rules (ToolSpec::mutates picks the default decision) and run
  // by the same runner. A name equal to a built-in tool's is refused.
  std::vector<std::shared_ptr<Tool>> tools;
  // Run after the built-in hooks (todo loop, usage, reflector), in order.
  std::vector<std::shared_ptr<Hook>> hooks;
  // Replaces the provider `provider` names (the kind, model and base URL
  // are still pinned and shown; the factory reads them as it likes).
  ProviderFactory provider_factory;
  // Decides every `ask` in place of the approver `approver` names; it may
  // answer kDefer to pause the turn durably.
  std::shared_ptr<Approver> approver;
  // Where the session's read, write and edit calls take and put a file's
  // text, after their usual checks (ToolContext::files; an ACP client's
  // fs/* methods). Not pinned: without it they use the file system.
  std::shared_ptr<FileTextAccess> files;

  bool empty() const {
    return tools.empty() && hooks.empty() && !provider_factory && !approver && !files;
  }
};

// Pinned settings: everything below that shapes a turn (workspace, provider,
// base URL, model, API key variable, script, command, budgets, rules,
// defaults, approver, sandbox, bash timeout, todo loop, reflector, system
// prompt with its source) is stored with a new session (never api_key or
// webhook_secret themselves: only the variables they come from). Opening a
// stored session that has pinned settings uses them, not these fields:
// only `session_id`, `continue_latest`, `interactive`, the secrets (when the
// pinned variable is not set), `overrides` and `extensions` are read. A session stored
// without pinned settings (created by an older agentloop) is opened with
// these fields, as given.
struct SessionOptions {
  std::filesystem::path workspace;  // absolute; default: current directory
  std::string session_id;           // open this session (id or unique prefix); empty: new
  bool continue_latest = false;     // open the newest session of `workspace`

  // Provider.
  ProviderKind provider = ProviderKind::kOpenAI;
  std::string model;
  std::string base_url;
  std::string api_key;      // empty: from env, the variable `api_key_env` names
  std::string api_key_env;  // empty: the provider's (OPENAI_API_KEY / ANTHROPIC_API_KEY)
  std::string script_path;
  bool use_max_tokens_field = false;
  // Whether the model takes images (tool results' images are sent, or
  // described as text); unset: the built-in table's answer for `model`
  // (docs/providers.md, "Images").
  std::optional<bool> images;
  // The model's context window and largest output-token cap; unset: the
  // built-in table's numbers for `model` (docs/config.md).
  std::optional<int64_t> context_window;
  std::optional<int64_t> max_output_tokens;

  // Command and budgets (unset: the command's defaults).
  CommandKind command = CommandKind::kCode;
  std::optional<int> max_tool_calls;
  std::optional<int64_t> max_tokens;
  std::optional<int> max_turns;
  std::optional<std::chrono::milliseconds> max_wall_time;

  // System prompt: replaces the built-in one when set (AGENTS.md, memory and
  // skill indexes are still appended). `system_prompt_source` says where the
  // text came from (the file's path); empty with no system_prompt: built-in.
  std::optional<std::string> system_prompt;
  std::string system_prompt_source;

  // Permission rules, with where they came from for messages.
  using RuleSource = SourcedRule;
  std::vector<RuleSource> allow, ask, deny;
  std::optional<Decision> default_mutating;   // unset: ask
  std::optional<Decision> default_read_only;  // unset: allow

  ApproverMode approver = ApproverMode::kAuto;
  bool interactive = false;  // a person is at a terminal
  std::string webhook_url;
  std::string webhook_secret;      // empty: from env, the variable `webhook_secret_env` names
  std::string webhook_secret_env;  // the variable that holds the webhook secret

  // Tools (docs/tools.md). The bash sandbox, whether sandboxed commands may
  // use the network, and what happens when bubblewrap cannot run here. In a
  // read-only command bash runs only in a read-only sandbox without network,
  // whatever these say, and is not offered when bubblewrap cannot run.
  SandboxMode sandbox = SandboxMode::kOff;
  bool sandbox_network = false;
  SandboxFallback sandbox_fallback = SandboxFallback::kRefuse;
  int bash_timeout_ms = 120000;
  // bash's environment is this process's without the names that look like
  // secrets (KEY, SECRET, TOKEN, ...) and those in `env_remove` (e.g. the
  // variables holding the API key and the webhook secret), keeping the names
  // in `env_pass` and adding `env_set`.
  std::vector<std::string> env_remove;
  std::vector<std::string> env_pass;
  std::map<std::string, std::string> env_set;

  // Todo continuation (SEMANTICS 2).
  bool todo_loop = true;
  int todo_max_rounds = 12;
  int todo_max_strikes = 2;
  bool todo_inject_state = true;
  int todo_max_injected_tasks = 6;

  // Learning loop (SEMANTICS 3).
  bool reflector = true;

  // Labels of a new session, stored with its row (SessionInfo): the tenant
  // and agent of a server's session, the client's metadata (null or a JSON
  // object), and a title (empty: the first message's).
  std::string tenant;
  std::string agent;
  Json metadata;
  std::string title;

  // Changes asked of a stored session's pinned settings.
  SettingsOverrides overrides;

  // Subagents (docs/subagents.md): agent definitions offered as
  // `agent__<name>` tools, each running as a child session.
  struct Subagents {
    bool enabled = true;
    SubagentCaps caps;
    // Set for a child session (pinned with it): the session that started
    // it, its path of agents ("root/reviewer"), its depth (1 for a child of
    // the root) and its definition's tool allow-list (nullopt: every tool
    // but the agent tools). Empty path: a root session.
    std::string parent_id;
    std::string path;
    int depth = 0;
    std::optional<std::vector<std::string>> tools;
    // The call of the parent that started the child: its turn and tool_use
    // id (a call that runs again after a durable pause continues this child).
    std::string parent_turn_id;
    std::string tool_use_id;
    // The server agent whose `subagents/` folder holds the tree's
    // definitions (a root session: its own `agent`).
    std::string home_agent;
    // The person trusted the workspace (`agentloop trust`, unchanged since):
    // a definition in `<workspace>/.agentloop/agents` is used as written.
    // Otherwise, like a repository's system prompt file, its body is not
    // the child's system prompt: the child gets it as data before its task.
    // Read on every open (not pinned); a child inherits it.
    bool workspace_trusted = false;
  } subagents;

  // MCP servers whose tools the session offers (docs/mcp.md). Started when
  // the session opens to run turns; like `extensions`, read on every open
  // (not pinned).
  std::vector<McpServerSpec> mcp_servers;

  // Process-local extensions (see SessionExtensions): read on every open,
  // also of a stored session.
  SessionExtensions extensions;
};

struct EngineOptions {
  // The process environment, passed explicitly (API keys, AGENTLOOP_HOME,
  // XDG dirs, HOME). Tests pass their own.
  EnvMap env;
  // Data directory (sessions.db, memory, proposals). Empty: DefaultDataDir(env).
  std::filesystem::path data_dir;
  // Paths every sandbox of this engine's sessions hides (bash, MCP servers
  // over stdio; docs/tools.md, "Sandbox"), besides the data directory and
  // the user's configuration directory, which are always hidden: a
  // server's configuration directory, its agents' workspace roots (a
  // session's own workspace inside one stays visible, its neighbours do
  // not).
  std::vector<std::filesystem::path> sandbox_hidden;
  // Each session's user scope of memories and skills is its tenant's
  // (SessionInfo::tenant): <data_dir>/tenants/<tenant>/memory and
  // .../skills, read and written by that tenant's sessions only; a session
  // without a tenant has no user scope. A server with several tenants sets
  // it (docs/learning.md, "Tenants"); off (the CLI, a server with one
  // tenant), every session shares the user's <data_dir>/memory and
  // <config_dir>/skills.
  bool tenant_user_scopes = false;
  // Use this store instead of opening <data_dir>/sessions.db.
  std::shared_ptr<SessionStore> store;
  // Durability of the commits of the store opened at <data_dir>/sessions.db
  // (config key store.sync; see StoreSync). Ignored when `store` is set.
  StoreSync store_sync = StoreSync::kFull;
  // A "postgresql://" URL (config key store.url, AGENTLOOP_STORE_URL): the
  // sessions live in that shared PostgreSQL database instead of
  // <data_dir>/sessions.db. Ignored when `store` is set.
  std::string store_url;
  // The PostgreSQL store's lease TTL (PostgresStoreOptions::lock_ttl;
  // config key store.lease_ttl_ms).
  std::chrono::milliseconds store_lease_ttl{30000};
  // Connections the PostgreSQL store opens at most
  // (PostgresStoreOptions::pool_size); 0: its default.
  int store_connections = 0;
  // How long a PostgreSQL store call waits for a free pooled connection
  // (PostgresStoreOptions::pool_timeout; config key store.pool_timeout_ms);
  // 0: the lease TTL.
  std::chrono::milliseconds store_pool_timeout{0};
  // The bound on the side request that writes a compaction summary, retries
  // included (config key compaction.summary_timeout_ms): past it, or when
  // the request fails, the turn uses the truncating summary and says so in
  // a notice.
  std::chrono::milliseconds summary_timeout{60000};
  // The session the caller is about to open, when it already knows it: Create
  // starts opening the connection to its model's server (DNS, TCP, TLS) before
  // it opens the store, and the session's first request finds it ready. Only
  // the provider fields are read; a script provider, or a remote one with no
  // API key and no base URL, is not contacted.
  std::optional<SessionOptions> preconnect_for;
  // Wall clock of the events' `ts`, Unix epoch milliseconds (tests inject
  // one). Null: SystemNowMs.
  std::function<int64_t()> now_ms;
  // Run the engine's HTTP client (model streams, preconnects, webhooks) on
  // this io_context, which the caller runs on ONE thread (a server's I/O
  // thread), instead of on a thread of the client's own. Destroying the
  // Engine aborts the client's transfers on that io_context; it must outlive
  // the Engine and run until those have ended. Blocking calls that use the
  // client (RunBlocking, Engine::Submit of a decision; they wait for it)
  // must not be made on that thread; Session::Submit never blocks it. Null: the client
  // runs its own event thread (the CLI).
  boost::asio::io_context* io_context = nullptr;
};

// TurnExecutor (where turns started with Session::Submit run) and
// ThreadPoolExecutor, an implementation of it: agentloop/executor.h.

// The front end of a turn started with Session::Submit.
// Threads: durable events reach `observer` from the executor's Post threads
// (one at a time, in seq order, after the store has them); text and
// thinking deltas reach `observer` and `stream` on the thread the model
// streams on (the HTTP client's event thread: the caller's I/O thread with
// EngineOptions::io_context), never at the same time as another event of
// the turn. Neither may block.
struct AsyncTurnCallbacks {
  EventSink* observer = nullptr;  // every event, after the store has it
  StreamSink* stream = nullptr;   // text and thinking deltas
  // Called exactly once, on an executor Post thread: with the turn's result
  // (also when it was cancelled), or with the error that kept it from
  // starting (each operation's errors: see op::).
  std::function<void(Result<TurnResult>)> done;
};

// Hooks for the front end while a turn runs. All optional.
struct SessionCallbacks {
  EventSink* observer = nullptr;         // every event (after the store has it)
  StreamSink* stream = nullptr;          // text and thinking deltas
  Approver* console_approver = nullptr;  // live approver for ApproverMode::kConsole/kAuto
};

// The message that continues a turn a dead process left unfinished when
// its history leaves the model nothing to answer (op::Continue; the history
// already says, through the crash-recovery results, what was cut).
inline constexpr std::string_view kContinueInterruptedPrompt =
    "The previous turn was interrupted before it finished (the agentloop process stopped). "
    "Continue the task from where it stopped.";

// The start of the reason of the `turn_end` (stop `failed`) that ends a cut
// turn: one that began and never ended because the process running it
// stopped (EndCutTurn).
inline constexpr std::string_view kCutTurnReason =
    "the process running this turn stopped before the turn ended";

// Ends the cut turn of a session that the caller has just taken over
// (holding `lock`, `snapshot` loaded after the lock was taken, with crash
// repair): when its newest turn began and never ended, appends that turn's
// `turn_end` (stop `failed`, reason starting with kCutTurnReason, the
// counters its turn_begin carried) through `lock` and updates `snapshot`
// (last_seq, last_turn_end, unfinished_turn). Nothing when every turn
// ended. The one place a takeover ends a cut turn: Engine::OpenSession
// (every front end's open: a new input, a continuation, a queued input, a
// decision, `agentloop resume`) and the server's takeover of an expired
// lease. Errors: the store's (kLeaseLost when the lock was lost).
Status EndCutTurn(SessionLock& lock, SessionSnapshot& snapshot, int64_t now_ms);

// How a person resolves a pending item.
struct Resolution {
  enum class Kind { kApprove, kDeny, kAnswer };
  Kind kind = Kind::kApprove;
  std::optional<Json> edited_arguments;  // kApprove: run with these instead
  std::string reason;                    // kDeny
  std::string answer;                    // kAnswer
  // kApprove: also allow this exact access again without asking, for the
  // rest of the session (kept with the session: it survives a reopen).
  bool remember_for_session = false;
  std::string by = "cli";  // who resolved (for the event log)
  // Only an item of this tenant's sessions (a server's caller): the store
  // finds and decides the item through the tenant's view
  // (SessionStore::ForTenant), so another tenant's item is already_resolved,
  // as an unknown id. nullopt: any tenant's (the command line).
  std::optional<std::string> tenant;
  // false: only record the decision; a completed batch is left decided for
  // the caller to continue (op::Continue{.decided_batch_only = true}), never
  // run inside Engine::Submit.
  bool continue_turn = true;
};

// The operations a session takes (Session::Submit, RunBlocking). Each runs
// one turn and answers with its TurnResult, also for stops that are not
// errors (budget, pause, denial, cancellation). An operation that cannot
// run answers an error and runs nothing: kFailedPrecondition saying why (a
// pause waits for decisions, nothing is to continue), or an engine fault
// before the turn could start.
namespace op {

// A new turn on `prompt`. Errors: kFailedPrecondition while a paused batch
// is open (naming the pending ids) or decided but not yet continued.
struct UserInput {
  std::string prompt;
};

// Continues the session's newest turn: the one operation behind `agentloop
// resume ID` without a prompt and the server's {"continue": true}. It
// continues, whichever applies first: a paused batch whose every item is
// decided (its turn continues); the newest turn when it failed (a cut turn
// among them: it was ended `failed` when the session was taken over) or
// ran out of a budget of tool calls, tokens or model calls raised since,
// and its history ends with what the model is to answer (the same turn is
// retried, its counters carried); a cut turn whose history leaves the
// model nothing to answer (a new turn on kContinueInterruptedPrompt).
// Errors: kFailedPrecondition when a pause still waits for decisions or
// nothing is to continue (the message says which).
//
// `decided_batch_only`: a decided batch and nothing else, for a driver that
// was told a batch is decided (a decision it recorded, a wake-up it
// claimed), which another process may have continued meanwhile:
// kFailedPrecondition when none waits.
struct Continue {
  bool decided_batch_only = false;
};

// Continues the decided batch, or retries the failed newest turn (or one
// out of a budget raised since) from its last committed step: the same
// turn id and counters, no new message. Errors: kFailedPrecondition when
// there is nothing to retry, or the decided batch is a subagent's (it
// continues with its caller's turn).
struct Retry {};

// Compacts the view of the history sent to the model, by hand (`/compact
// [focus]`, `agentloop compact ID --focus TEXT`): a turn with input
// "compact" that asks the model for a summary of all but the last messages
// and the latest request (docs/protocol.md, "Context budget"). The store
// keeps every message. Errors: kFailedPrecondition while a paused batch
// waits or is decided but not continued.
struct Compact {
  std::string focus;
};

// The session's queued input `input` (SessionStore::NextQueuedInput: left
// in the queue), run as UserInput (or Continue, for a queued
// continuation). It is taken from the queue in the transaction that
// commits the turn's beginning (SessionLock::AppendTakingInput): an input
// whose process stops before that stays queued for the next holder. An
// input that cannot run (the operation's error) is taken from the queue
// all the same, so it is answered once.
struct Queued {
  QueuedInput input;
};

// A decision about the pending item `pending_id`: Engine::Submit, not an
// operation of an open session (see there why).
struct Decide {
  std::string pending_id;
  Resolution resolution;
};

}  // namespace op

// The operations of an open session.
using Op = std::variant<op::UserInput, op::Continue, op::Retry, op::Compact, op::Queued>;

// "user_input", "continue", "retry", "compact", "queued" (for messages).
std::string_view OpName(const Op& op);

class Session;

// Runs `op` on the caller's thread and returns its outcome (see op::): the
// blocking adapter of Session::Submit, for a front end with a thread to
// spare (the CLI, ACP). The same checks, preparation and finish as Submit;
// the turn's steps, tool calls and model call run on this thread, and a
// person at a terminal may be asked (`callbacks.console_approver`, with
// ApproverMode::kConsole or kAuto).
Result<TurnResult> RunBlocking(Session& session, Op op, const SessionCallbacks& callbacks,
                               std::stop_token stop);

class Session {
 public:
  virtual ~Session() = default;
  virtual const std::string& id() const = 0;
  virtual const SessionInfo& info() const = 0;
  // The history as loaded plus what turns added.
  virtual std::span<const Message> history() const = 0;
  // Warnings from loading (crash recovery, corrupt rows).
  virtual const std::vector<std::string>& load_warnings() const = 0;
  // Notices produced by hooks outside turns (e.g. the todo loop's warnings).
  virtual std::optional<Checkpoint> open_checkpoint() const = 0;

  // Runs `op` (see op::) without a thread of its own: returns at once. The
  // operation's checks and the turn's preparation (every store call among
  // them) run in executor.Post(id()), and so do the turn's steps; its tool
  // calls run in executor.PostTool(id()), the model call asynchronously
  // (see RunTurnAsync in runner.h). `callbacks.done` reports the outcome:
  // the turn's result, or the error that kept it from starting. A person's
  // approval is asked only of a durable (or webhook, or embedder's)
  // approver: there is no console here. The Session must stay alive, and
  // unused by others, until `done` is called.
  virtual void Submit(Op op, TurnExecutor& executor, AsyncTurnCallbacks callbacks,
                      std::stop_token stop) = 0;

  // What Submit(op) would do now, in words for a person ("continuing the
  // interrupted turn", "retrying the failed turn"), or the error it would
  // answer without running anything. Reads the store (a pause may have
  // been decided elsewhere since the session was opened); claims and runs
  // nothing.
  virtual Result<std::string> Preview(const Op& op) = 0;

  // The settings the session runs with: the pinned ones (overrides applied)
  // for a stored session, else the options it was opened with.
  virtual const SessionOptions& options() const = 0;

  // Changes the model for later turns (/model NAME); recorded in the pinned
  // settings with the next turn.
  virtual Status SetModel(const std::string& model) = 0;
  // Runs `/todoloop ARGS` and returns the status lines.
  virtual std::string TodoLoopCommand(const std::string& args) = 0;
  // The todo continuation's state for this session: {rounds, max_rounds,
  // strikes, max_strikes, paused, reason, disabled, anchor}; null when the
  // todo loop is off.
  virtual Json todo_loop_status() const = 0;
  // Budgets of the session's command (for /status).
  virtual Budget budget() const = 0;
  // Totals over the turns run by this object.
  virtual TurnCounters totals() const = 0;

  // The context the next request would carry: estimated tokens (as the
  // last turn measured them, else chars / 4 of the system text and history)
  // and the model's window.
  struct ContextUsage {
    int64_t tokens = 0;
    int64_t window = 0;
  };
  virtual ContextUsage context() const = 0;
  // The session's MCP servers as they are now (a server that exited since
  // the session opened is "disconnected"); empty when none is configured or
  // the session does not run turns (no servers are started then).
  virtual std::vector<McpServerState> mcp_servers() const { return {}; }

 protected:
  // RunBlocking's work: Submit's, driven on the caller's thread.
  virtual Result<TurnResult> RunOnCaller(Op op, const SessionCallbacks& callbacks,
                                         std::stop_token stop) = 0;
  friend Result<TurnResult> RunBlocking(Session& session, Op op, const SessionCallbacks& callbacks,
                                        std::stop_token stop);
};

// What a decision about a pending item came to: one vocabulary that every
// front end reports (the CLI's approve/deny/answer, the server's decision
// routes, the seeds' routes, the links).
enum class DecisionOutcome {
  kRecorded,         // recorded; other items of the batch still wait
  kResumed,          // recorded; the batch is decided and its turn continues
  kAlreadyResolved,  // decided before, the same way: nothing changed
  kConflict,         // decided before, differently: nothing changed
  kCancelled,        // its batch was closed without it: nothing changed
  kInvalidEdit,      // the edited arguments were refused: nothing recorded, it still waits
};
// "recorded", "resumed", "already_resolved", "conflict", "cancelled",
// "invalid_edit".
std::string_view DecisionOutcomeName(DecisionOutcome outcome);

// What `resolution` comes to for an item no longer outstanding (`lookup`):
// kCancelled for an item whose batch closed without it; kAlreadyResolved
// when it was decided the same way (approve/answer vs deny); else kConflict.
DecisionOutcome SettledOutcome(const PendingLookup& lookup, const Resolution& resolution);

// The sentence the front ends print for an outcome: `outstanding` items
// still wait (kRecorded); `earlier` is the decision recorded before
// (kAlreadyResolved, kConflict): who made it and how ("already resolved
// differently: denied by http:acme (too risky); nothing changed").
std::string DescribeDecisionOutcome(DecisionOutcome outcome, int outstanding,
                                    const std::optional<ApprovalDecision>& earlier);

struct ResolveReport {
  // What the decision came to (see DecisionOutcome).
  DecisionOutcome outcome = DecisionOutcome::kRecorded;
  // kInvalidEdit: why the edited arguments were refused (the tool's
  // validation, or a rule that denies the edited call).
  std::string refused;
  // kAlreadyResolved, kConflict: the decision recorded before this one.
  std::optional<ApprovalDecision> earlier;
  // Someone else decided the item first (or the id is unknown): this
  // resolution changed nothing. `resumed` may still be set: a resolver
  // that holds the session continues a batch another process completed.
  bool already_resolved = false;
  // The session whose turn continues (now: `resumed`; or later) and that
  // turn: the item's own, or, when the item was a subagent's and deciding
  // it decided its callers' batches up to the root, the root's.
  std::string session_id;
  std::string turn_id;
  PendingItem item;
  int outstanding = 0;                // items still pending in the batch
  std::string model;                  // the model the session runs with
  std::optional<TurnResult> resumed;  // set when the batch completed and the turn ran on
  // The batch is decided but another process holds the session: the turn
  // continues there, or with the next `resume` of the session.
  bool continues_later = false;
};

class Engine {
 public:
  virtual ~Engine() = default;
  static Result<std::unique_ptr<Engine>> Create(EngineOptions options);

  virtual SessionStore& store() = 0;

  // Creates or loads a session and takes its lock. A new session's settings
  // are pinned to it; a stored session with pinned settings opens with them
  // and `options.overrides` applied (see SettingsOverrides). Errors: kBusy
  // (another process runs it), kNotFound, kInvalidArgument (bad options,
  // e.g. no model or API key for the provider: the message says how to
  // configure one; an override that would widen the pinned settings),
  // kDataLoss (unreadable history or pinned settings).
  virtual Result<std::unique_ptr<Session>> OpenSession(const SessionOptions& options) = 0;

  // Decides a pending approval or question (`decide.pending_id`) from any
  // process, and answers with what the decision came to (ResolveReport,
  // DecisionOutcome). A decision is an operation of the Engine, not of an
  // open Session: it names an item, not a session; the item's session may
  // be held by another process (the decision is then recorded without its
  // lock, and its holder continues the turn); and the turn it continues may
  // be another session's (deciding a subagent's item decides its callers'
  // batches up to the root, whose turn continues).
  //
  // The decision is recorded atomically with its `decision` event. Edited
  // arguments are checked first, as a live decision's are (plan mode, the
  // tool's schema, deny rules): a refused edit is the outcome kInvalidEdit
  // and the item stays pending. A deny decides the whole batch. Nothing
  // runs until every item of the batch is decided; then, unless
  // `resolution.continue_turn` is false or another process holds the
  // session, the paused Turn continues here, on the caller's thread, with
  // the session's pinned settings (`options.overrides` applied as by
  // OpenSession; the other fields of `options` only for a session stored
  // without pinned settings): approved calls run through the Turn like any
  // other call, a denial cancels the batch, and the turn may pause again
  // (ResolveReport::resumed). Of two racing resolvers of one item exactly
  // one records its decision; the other gets kAlreadyResolved or kConflict.
  // The tools of a decided batch run at most once, whoever continues it (a
  // crash mid-run leaves their calls answered as interrupted, never re-run).
  // Errors: a resolution of the wrong kind for the item (kInvalidArgument),
  // an override that widens the pinned settings, the store's.
  virtual Result<ResolveReport> Submit(const op::Decide& decide, const SessionOptions& options,
                                       const SessionCallbacks& callbacks, std::stop_token stop) = 0;

  // Outstanding items, oldest first, as one inbox per tree of subagents
  // (docs/subagents.md): a session's list (`session_id`: an id or a unique
  // prefix) holds its own items and, in place of each call that waits on a
  // paused subagent, that subagent's items; the list of every session
  // (nullopt) leaves the waiting calls out. Every record names its root
  // session and its item the path of agents that asks ("root/reviewer").
  virtual Result<std::vector<PendingRecord>> ListPending(std::optional<std::string> session_id) = 0;

  // A model provider for `options` (provider, model, base URL, the API key or
  // the variable that holds it), on the engine's HTTP client: for a driver
  // that makes a model call outside a session. Errors: kInvalidArgument, as
  // OpenSession's for a provider that is not configured.
  virtual Result<std::shared_ptr<ModelProvider>> Provider(const SessionOptions& options) = 0;

  // One outstanding item by its id or a unique prefix of it (at least 4
  // characters, e.g. "apr_5f3a"); nullopt when nothing outstanding matches.
  // kInvalidArgument when the prefix is too short or matches several items.
  virtual Result<std::optional<PendingRecord>> FindPending(const std::string& pending_id) = 0;

  // What the rules of the stored session `options.session_id` (its pinned
  // settings, with `options` as for OpenSession) decide for `call`, without
  // taking the session or starting its MCP servers: for a driver that shows
  // something on the session's behalf (the server's diff of a pending write
  // shows a file only when the session may read it). Session-scoped
  // approvals are not consulted. Errors: kNotFound for an unknown session,
  // kInvalidArgument for a tool the session does not have.
  virtual Result<PolicyVerdict> Evaluate(const SessionOptions& options, const ToolCall& call) = 0;
};

// The explanation for a missing provider configuration, shown by run/chat.
std::string HowToConfigureProvider();

}  // namespace agentloop
