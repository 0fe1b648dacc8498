#include "commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>

#include <sys/wait.h>

#include "agentloop/session_tree.h"

#include "base/strings.h"
#include "config/config.h"
#include "engine/change_preview.h"
#include "engine/wiring.h"
#include "interrupt.h"
#include "key_prompt.h"
#include "learning/listing.h"
#include "learning/memory_store.h"
#include "learning/paths.h"
#include "learning/proposals.h"
#include "learning/skills.h"
#include "permissions/approvers.h"
#include "permissions/policy.h"
#include "permissions/rules.h"
#include "protocol/codec.h"
#include "protocol/session_settings.h"
#include "tools/builtin.h"
#include "tools/change_preview.h"

#ifndef AL_VERSION
#define AL_VERSION "0.0.0"
#endif

namespace agentloop::cli {

std::string FormatTime(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

namespace {

std::string Join(const std::vector<std::string>& v, size_t from) {
  std::string out;
  for (size_t i = from; i < v.size(); ++i) {
    if (i > from) out += ' ';
    out += v[i];
  }
  return out;
}

// The --output flag as given (for errors before the configuration is read,
// and the commands that read none).
OutputFormat FlagOutput(const CliArgs& args) {
  OutputFormat f = OutputFormat::kText;
  for (const ConfigFlag& c : args.config_flags) {
    if (c.key == "output") f = c.value == "text" ? OutputFormat::kText : OutputFormat::kJson;
  }
  return f;
}

int UsageError(const CommandEnv& e, const Status& s) {
  if (FlagOutput(e.args) != OutputFormat::kText) e.out << DumpJson(ErrorJson(s)) << "\n";
  e.err << "agentloop: " << s.message() << "\n";
  if (e.args.subcommand != Subcommand::kNone) {
    e.err << "(see `agentloop " << SubcommandName(e.args.subcommand) << " --help`)\n";
  }
  return kExitUsage;
}

// Reports an error of a command that has no turn printer.
int Fail(const CommandEnv& e, OutputFormat format, const Status& s) {
  if (format != OutputFormat::kText) e.out << DumpJson(ErrorJson(s)) << "\n";
  e.err << "agentloop: " << s.message() << "\n";
  return ExitCodeFor(s);
}

void PrintWarnings(const CommandEnv& e, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) e.err << "agentloop: warning: " << w << "\n";
}

// Loads the settings; on error prints it and sets *exit_code.
std::optional<CliSettings> Settings(const CommandEnv& e, int* exit_code) {
  Result<CliSettings> s = LoadSettings(e.args, e.ctx);
  if (!s.ok()) {
    *exit_code = UsageError(e, s.error());
    return std::nullopt;
  }
  PrintWarnings(e, s->loaded.warnings);
  return std::move(*s);
}

int NoProvider(const CommandEnv& e, OutputFormat format) {
  if (format != OutputFormat::kText) {
    e.out << DumpJson(ErrorJson(InvalidArgument(HowToConfigureProvider()))) << "\n";
  }
  e.err << HowToConfigureProvider();
  if (!HowToConfigureProvider().empty() && HowToConfigureProvider().back() != '\n') e.err << "\n";
  return kExitUsage;
}

std::string ModelFor(const CliSettings& s, const Session* session) {
  if (session != nullptr && !session->options().model.empty()) return session->options().model;
  return s.session.model;
}

// What the command line (and only the command line: a configuration file or
// the environment never changes a stored session) asks to change in a stored
// session's pinned settings. With a person at the terminal (standard input
// and error are terminals; a tool's command has neither), a larger budget
// and an allow rule (`--yolo` among them) are that person's decision about
// their own session: applied and recorded as theirs, where another process
// is refused.
SettingsOverrides FlagOverrides(const CliSettings& s, const CliArgs& args) {
  const Config& c = s.loaded.config;
  SettingsOverrides o;
  auto flag = [](const ConfigOrigin& origin) { return origin.kind == ConfigOrigin::Kind::kFlag; };
  // A value given by a flag becomes an override of `out`, with its flag as
  // the source named under `field`.
  auto take = [&](const ConfigOrigin& origin, const char* field, const auto& value, auto& out) {
    if (!flag(origin)) return;
    out = value;
    o.sources[field] = origin.source;
  };
  if (args.workspace) {
    o.workspace = s.workspace;
    o.sources["workspace"] = "-C";
  }
  take(c.provider.kind.origin, "provider", s.session.provider, o.provider);
  take(c.provider.model.origin, "model", s.session.model, o.model);
  take(c.provider.base_url.origin, "base_url", s.session.base_url, o.base_url);
  take(c.provider.api_key_env.origin, "api_key_env", s.session.api_key_env, o.api_key_env);
  take(c.provider.script.origin, "script", s.session.script_path, o.script_path);
  take(c.provider.context_window.origin, "context_window", s.session.context_window,
       o.context_window);
  take(c.provider.max_output_tokens.origin, "max_output_tokens", s.session.max_output_tokens,
       o.max_output_tokens);
  take(c.command.origin, "command", s.session.command, o.command);
  const CommandBudgetConfig& b = c.budget[static_cast<size_t>(s.session.command)];
  take(b.max_tool_calls.origin, "max_tool_calls", s.session.max_tool_calls, o.max_tool_calls);
  take(b.max_tokens.origin, "max_tokens", s.session.max_tokens, o.max_tokens);
  take(b.max_turns.origin, "max_turns", s.session.max_turns, o.max_turns);
  if (s.session.max_wall_time) {
    take(b.max_wall_time_ms.origin, "max_wall_time_ms", s.session.max_wall_time, o.max_wall_time);
  }
  const bool person = s.session.interactive;
  const std::string by_person = " (the person at the terminal)";
  if (person) {
    o.person_budgets = true;
    for (const char* field : {"max_tool_calls", "max_tokens", "max_turns", "max_wall_time_ms"}) {
      if (auto it = o.sources.find(field); it != o.sources.end()) it->second += by_person;
    }
  }
  auto rules = [&](const std::vector<Sourced<std::string>>& in, std::vector<SourcedRule>& out) {
    for (const Sourced<std::string>& r : in) {
      if (flag(r.origin)) out.push_back({r.value, r.origin.source});
    }
  };
  if (person) {
    for (const Sourced<std::string>& r : c.permissions.allow) {
      if (flag(r.origin)) o.person_allow.push_back({r.value, r.origin.source + by_person});
    }
  } else {
    rules(c.permissions.allow, o.allow);
  }
  rules(c.permissions.ask, o.ask);
  rules(c.permissions.deny, o.deny);
  const ConfigOrigin& by_default = c.permissions.default_decision.origin;
  take(by_default, "default_mutating", s.session.default_mutating, o.default_mutating);
  take(by_default, "default_read_only", s.session.default_read_only, o.default_read_only);
  take(c.tools.sandbox.origin, "sandbox", s.session.sandbox, o.sandbox);
  take(c.tools.network.origin, "sandbox_network", s.session.sandbox_network, o.sandbox_network);
  take(c.tools.bash_timeout_ms.origin, "bash_timeout_ms", s.session.bash_timeout_ms,
       o.bash_timeout_ms);
  take(c.todo_loop.enabled.origin, "todo_loop", s.session.todo_loop, o.todo_loop);
  take(c.reflector.enabled.origin, "reflector", s.session.reflector, o.reflector);
  if (flag(c.system_prompt_file.origin)) {
    o.system_prompt = s.session.system_prompt;
    o.system_prompt_source = s.session.system_prompt_source;
    o.sources["system_prompt"] = c.system_prompt_file.origin.source;
  }
  take(c.approver.kind.origin, "approver", s.session.approver, o.approver);
  take(c.approver.webhook_url.origin, "webhook_url", s.session.webhook_url, o.webhook_url);
  take(c.approver.secret_env.origin, "secret_env", s.session.webhook_secret_env,
       o.webhook_secret_env);
  return o;
}

// Everything a turn-running command needs around RunBlocking / Engine::Submit.
struct TurnDriver {
  TurnDriver(const CommandEnv& e, const CliSettings& s, Engine& engine)
      : printer(s.output, e.out, e.err, TurnStyle(e, s)),
        approvals(std::make_shared<permissions::SessionApprovals>(s.workspace)),
        console(e.in, e.err, e.ctx.stdin_tty, approvals,
                ConsoleOptions(e.ctx, &engine, &s.session, StyleFor(e.args, e.ctx).color)) {
    callbacks.observer = &printer;
    callbacks.stream = &printer;
    if (s.session.interactive) callbacks.console_approver = &console;
  }
  TurnPrinter printer;
  std::shared_ptr<permissions::SessionApprovals> approvals;
  permissions::ConsoleApprover console;
  SessionCallbacks callbacks;
};

// A paused session shown like the end of a paused turn.
TurnResult PausedResult(const Checkpoint& cp) {
  TurnResult r;
  bool question = !cp.outstanding.empty();
  for (const PendingItem& p : cp.outstanding)
    question = question && p.kind == PendingKind::kQuestion;
  r.stop = question ? StopReason::kPendingQuestion : StopReason::kPendingApproval;
  r.reason = "the session is paused: " + std::to_string(cp.outstanding.size()) +
             " item(s) wait for an answer";
  r.pending = cp.outstanding;
  r.counters = cp.counters;
  r.checkpoint = cp;
  return r;
}

int RunTurn(const CommandEnv& e, const CliSettings& s, Engine& engine, Session& session,
            const std::string& prompt) {
  TurnDriver driver(e, s, engine);
  for (const std::string& w : session.load_warnings()) e.err << "agentloop: warning: " << w << "\n";
  if (std::optional<Checkpoint> cp = session.open_checkpoint()) {
    if (!prompt.empty()) {
      e.err << "agentloop: session " << session.id()
            << " is paused; answer the pending items before sending a new prompt\n";
    }
    return driver.printer.Finish(session.id(), PausedResult(*cp), ModelFor(s, &session));
  }
  driver.printer.BeginTurn();
  std::stop_token stop = Interrupts::Arm();
  Result<TurnResult> result = RunBlocking(session, op::UserInput{prompt}, driver.callbacks, stop);
  Interrupts::Disarm();
  if (!result.ok()) return driver.printer.FinishWithError(result.error());
  return driver.printer.Finish(session.id(), *result, ModelFor(s, &session));
}

Result<std::string> ReadPrompt(const CommandEnv& e, const std::vector<std::string>& p,
                               size_t from) {
  std::string prompt = Join(p, from);
  if (prompt == "-") {
    prompt.assign(std::istreambuf_iterator<char>(e.in), std::istreambuf_iterator<char>());
  }
  if (prompt.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidArgument("the prompt is empty");
  }
  return prompt;
}

// ---------------------------------------------------------------- run ----

int CmdRun(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  Result<std::string> prompt = ReadPrompt(e, e.args.positionals, 0);
  if (!prompt.ok()) return UsageError(e, prompt.error());
  // A new session's provider is known now (a stored one's comes from the
  // store): its connection opens while the store and the session are set up.
  const bool fresh = !e.args.session && !e.args.continue_latest && s->provider_configured;
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *s, /*preconnect=*/fresh);
  if (!engine.ok()) return Fail(e, s->output, engine.error());
  if (e.args.session) FillFromStoredSession(**engine, *e.args.session, *s, e.args);
  if (e.args.continue_latest) {
    Result<std::string> newest = NewestToContinue((*engine)->store(), s->workspace);
    if (!newest.ok()) return Fail(e, s->output, newest.error());
    FillFromStoredSession(**engine, *newest, *s, e.args);
    s->session.session_id = *newest;
    s->session.continue_latest = false;
  }
  if (!s->provider_configured) return NoProvider(e, s->output);
  Result<std::unique_ptr<Session>> session = (*engine)->OpenSession(s->session);
  if (!session.ok()) return Fail(e, s->output, session.error());
  return RunTurn(e, *s, **engine, **session, *prompt);
}

// ------------------------------------------------------------- resume ----

// What `sessions list` and the resume picker tell of a session, from the
// newest turn boundary of its log (one indexed query, not a load).
struct ListedSession {
  SessionInfo info;
  // "running" (its newest turn began and has not ended: running, or its
  // process stopped mid-turn), "awaiting_approval", "awaiting_answer",
  // "failed", or "idle"; "" for a session with no turn.
  std::string status;
};

Result<ListedSession> DescribeListedSession(SessionStore& store, SessionInfo info) {
  ListedSession out{std::move(info), ""};
  AL_ASSIGN_OR_RETURN(std::vector<StoredEvent> boundary,
                      store.QueryEvents(out.info.id, NewestTurnBoundary()));
  if (boundary.empty()) return out;
  Result<Json> j = ParseJson(boundary[0].json);
  Result<Event> e = j.ok() ? Event::FromJson(*j) : Result<Event>(j.error());
  if (e.ok() && e->type == EventType::kTurnBegin) {
    out.status = "running";
    return out;
  }
  const auto* end = e.ok() ? e->As<TurnEndData>() : nullptr;
  const StopReason stop = end != nullptr ? end->stop : StopReason::kCompleted;
  if (stop == StopReason::kPendingApproval) {
    out.status = "awaiting_approval";
  } else if (stop == StopReason::kPendingQuestion) {
    out.status = "awaiting_answer";
  } else if (stop == StopReason::kFailed) {
    out.status = "failed";
  } else {
    out.status = "idle";
  }
  return out;
}

// The sessions worth listing, newest first, at most `limit` (<= 0: all): a
// session with no turn (a bare `chat`, or one left by `/clear`) and a
// subagent's child (listed under its parent by `sessions show --tree`) are
// left out unless `everything`.
Result<std::vector<ListedSession>> ListTopSessions(SessionStore& store,
                                                   std::optional<std::filesystem::path> workspace,
                                                   int limit, bool everything) {
  SessionListOptions opts;
  opts.limit = 0;
  opts.workspace = std::move(workspace);
  AL_ASSIGN_OR_RETURN(std::vector<SessionInfo> infos, store.ListSessions(opts));
  std::vector<ListedSession> out;
  for (SessionInfo& info : infos) {
    if (limit > 0 && out.size() >= static_cast<size_t>(limit)) break;
    if (!everything && !info.parent_id.empty()) continue;
    AL_ASSIGN_OR_RETURN(ListedSession listed, DescribeListedSession(store, std::move(info)));
    if (!everything && listed.status.empty()) continue;
    out.push_back(std::move(listed));
  }
  return out;
}

// `resume` without an id on a terminal: the newest sessions of the
// workspace (of every workspace with --all), numbered, and the person picks
// one (Enter: the newest). nullopt when there is none or nothing was picked.
Result<std::optional<std::string>> PickSession(const CommandEnv& e, SessionStore& store,
                                               const CliSettings& s) {
  AL_ASSIGN_OR_RETURN(
      std::vector<ListedSession> listed,
      ListTopSessions(store, e.args.all ? std::nullopt : std::optional(s.workspace), 10, false));
  std::vector<SessionInfo> list;
  for (ListedSession& l : listed) list.push_back(std::move(l.info));
  if (list.empty()) {
    e.err << (e.args.all ? std::string("no sessions to resume\n")
                         : "no sessions in " + s.workspace.string() +
                               " to resume (--all offers every workspace's)\n");
    return std::optional<std::string>();
  }
  e.err << "recent sessions" << (e.args.all ? "" : " of " + s.workspace.string()) << ":\n";
  for (size_t i = 0; i < list.size(); ++i) {
    const SessionInfo& info = list[i];
    std::string title = info.title.empty() ? "(untitled)" : info.title;
    if (title.size() > 60) title = std::string(TruncateUtf8(title, 60)) + "…";
    e.err << (i < 9 ? "   " : "  ") << (i + 1) << ") " << FormatTime(info.updated_at_ms) << "  "
          << info.id.substr(0, 8) << "  " << title
          << (e.args.all ? "  (" + info.workspace.string() + ")" : "") << "\n";
  }
  while (true) {
    e.err << "resume which? [1-" << list.size() << ", Enter: 1, q: none] " << std::flush;
    std::string line;
    if (!std::getline(e.in, line)) {
      e.err << "\n";
      return std::optional<std::string>();
    }
    std::string_view answer = Trim(line);
    if (answer.empty()) return std::optional<std::string>(list[0].id);
    if (answer == "q" || answer == "Q") return std::optional<std::string>();
    char* end = nullptr;
    const std::string text(answer);
    long n = std::strtol(text.c_str(), &end, 10);
    if (end != nullptr && *end == '\0' && n >= 1 && static_cast<size_t>(n) <= list.size()) {
      return std::optional<std::string>(list[static_cast<size_t>(n) - 1].id);
    }
    e.err << "type a number from 1 to " << list.size() << "\n";
  }
}

int CmdResume(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  if (e.args.positionals.empty() && !e.ctx.stdin_tty) {
    return UsageError(e, InvalidArgument("resume needs a session ID when stdin is not a terminal "
                                         "(`agentloop sessions list` shows them; `agentloop -c` "
                                         "continues the newest)"));
  }
  std::optional<std::string> prompt;
  if (e.args.positionals.size() > 1) {
    Result<std::string> p = ReadPrompt(e, e.args.positionals, 1);
    if (!p.ok()) return UsageError(e, p.error());
    prompt = *p;
  }
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *s);
  if (!engine.ok()) return Fail(e, s->output, engine.error());
  std::string id;
  if (!e.args.positionals.empty()) {
    id = e.args.positionals[0];
  } else {
    Result<std::optional<std::string>> picked = PickSession(e, (*engine)->store(), *s);
    if (!picked.ok()) return Fail(e, s->output, picked.error());
    if (!*picked) return kExitOk;
    id = **picked;
  }
  FillFromStoredSession(**engine, id, *s, e.args);
  s->session.session_id = id;
  if (!s->provider_configured) return NoProvider(e, s->output);
  Result<std::unique_ptr<Session>> session = (*engine)->OpenSession(s->session);
  if (!session.ok()) return Fail(e, s->output, session.error());
  if (prompt) return RunTurn(e, *s, **engine, **session, *prompt);

  // No prompt: continue a turn the process died in, retry one that failed,
  // show a pause (on a terminal: ask it in the chat), or (on a terminal)
  // open the chat.
  const bool to_chat = e.ctx.stdin_tty && s->output == OutputFormat::kText;
  if ((*session)->open_checkpoint() && !to_chat) return RunTurn(e, *s, **engine, **session, "");
  if ((*session)->open_checkpoint()) {
    s->session.session_id = (*session)->id();
    session->reset();  // chat opens it again (and takes the lock)
    return RunChat(e, std::move(*s));
  }
  // Opening the session ended a turn its previous process left unfinished
  // (EndCutTurn); the engine says what continues (op::Continue).
  Result<std::string> what = (*session)->Preview(op::Continue{});
  if (what.ok()) {
    if (!e.args.quiet)
      e.err << "agentloop: " << *what << " of session " << (*session)->id() << "\n";
    TurnDriver driver(e, *s, **engine);
    for (const std::string& w : (*session)->load_warnings()) {
      e.err << "agentloop: warning: " << w << "\n";
    }
    driver.printer.BeginTurn();
    std::stop_token stop = Interrupts::Arm();
    Result<TurnResult> result = RunBlocking(**session, op::Continue{}, driver.callbacks, stop);
    Interrupts::Disarm();
    if (!result.ok()) return driver.printer.FinishWithError(result.error());
    return driver.printer.Finish((*session)->id(), *result, ModelFor(*s, session->get()));
  }
  if (to_chat) {
    s->session.session_id = (*session)->id();
    session->reset();  // chat opens it again (and takes the lock)
    return RunChat(e, std::move(*s));
  }
  if (what.error().code() != Code::kFailedPrecondition) return Fail(e, s->output, what.error());
  return UsageError(e, InvalidArgument(what.error().message() + "; give a PROMPT"));
}

// ------------------------------------------------------------ compact ----

int CmdCompact(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  const std::string& id = e.args.positionals[0];
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *s);
  if (!engine.ok()) return Fail(e, s->output, engine.error());
  FillFromStoredSession(**engine, id, *s, e.args);
  s->session.session_id = id;
  if (!s->provider_configured) return NoProvider(e, s->output);
  Result<std::unique_ptr<Session>> session = (*engine)->OpenSession(s->session);
  if (!session.ok()) return Fail(e, s->output, session.error());
  TurnDriver driver(e, *s, **engine);
  driver.printer.BeginTurn();
  std::stop_token stop = Interrupts::Arm();
  Result<TurnResult> result =
      RunBlocking(**session, op::Compact{e.args.focus}, driver.callbacks, stop);
  Interrupts::Disarm();
  if (!result.ok()) return driver.printer.FinishWithError(result.error());
  return driver.printer.Finish((*session)->id(), *result, ModelFor(*s, session->get()));
}

// ------------------------------------------------ approve / deny / answer ----

int CmdResolve(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  Resolution res;
  res.by = "cli";
  switch (e.args.subcommand) {
    case Subcommand::kApprove:
      res.kind = Resolution::Kind::kApprove;
      if (e.args.edited_args) {
        Result<Json> j = ParseJson(*e.args.edited_args);
        if (!j.ok() || !j->is_object()) {
          return UsageError(e, InvalidArgument("--args must be a JSON object"));
        }
        res.edited_arguments = *j;
      }
      break;
    case Subcommand::kDeny:
      res.kind = Resolution::Kind::kDeny;
      res.reason = e.args.reason.value_or("denied by the user");
      break;
    default:
      res.kind = Resolution::Kind::kAnswer;
      res.answer = Join(e.args.positionals, 1);
      break;
  }
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *s);
  if (!engine.ok()) return Fail(e, s->output, engine.error());
  Result<std::optional<PendingRecord>> found = (*engine)->FindPending(e.args.positionals[0]);
  if (!found.ok()) return Fail(e, s->output, found.error());
  std::optional<PendingRecord> record = *found;
  if (!record && !IsWholePendingId(e.args.positionals[0])) {
    // A prefix or a malformed id that matches nothing outstanding is unknown;
    // a whole id may name an item already resolved, which Resolve reports.
    return Fail(
        e, s->output,
        NotFound("no pending item '" + e.args.positionals[0] + "' (see `agentloop pending`)"));
  }
  const std::string id = record ? record->item.id : e.args.positionals[0];
  if (record && res.kind == Resolution::Kind::kAnswer) {
    res.answer =
        permissions::PickOption(res.answer, permissions::QuestionOptions(record->item.arguments));
  }
  if (record) {
    FillFromStoredSession(**engine, record->session_id, *s, e.args);
    s->session.session_id = record->session_id;
    if (s->output == OutputFormat::kText && !e.args.quiet) {
      const char* verb = res.kind == Resolution::Kind::kDeny      ? "denying"
                         : res.kind == Resolution::Kind::kApprove ? "approving"
                                                                  : "answering";
      const Json& args = res.edited_arguments ? *res.edited_arguments : record->item.arguments;
      e.err << verb << " " << DescribeToolCall(record->item.tool, args) << "\n";
    }
  }
  TurnDriver driver(e, *s, **engine);
  driver.printer.BeginTurn();
  std::stop_token stop = Interrupts::Arm();
  Result<ResolveReport> report =
      (*engine)->Submit(op::Decide{id, res}, s->session, driver.callbacks, stop);
  Interrupts::Disarm();
  if (!report.ok()) return driver.printer.FinishWithError(report.error());
  if (report->outcome == DecisionOutcome::kInvalidEdit) {
    return driver.printer.FinishWithError(
        InvalidArgument("pending item " + id + ": " +
                        DescribeDecisionOutcome(report->outcome, 0, {}) + ": " + report->refused));
  }
  // The outcome in the words the server reports it with.
  const std::string said =
      DescribeDecisionOutcome(report->outcome, report->outstanding, report->earlier);
  if (report->already_resolved && !report->resumed) {
    return driver.printer.FinishWithError(FailedPrecondition("pending item " + id + ": " + said));
  }
  if (report->already_resolved && s->output == OutputFormat::kText && !e.args.quiet) {
    e.err << "pending item " << id << ": " << said
          << "; continuing the turn that decision completed\n";
  }
  std::string model = report->model.empty() ? s->session.model : report->model;
  if (report->resumed) return driver.printer.Finish(report->session_id, *report->resumed, model);
  if (report->continues_later) {
    if (s->output == OutputFormat::kText && !e.args.quiet) {
      e.err << "resolved " << id << "; session " << report->session_id
            << " is held by another process: its turn continues there, or with `agentloop "
               "resume "
            << report->session_id << "`\n";
    }
    TurnResult r;
    r.stop = StopReason::kCompleted;
    r.reason = "resolved; the turn continues in the process that holds the session";
    return driver.printer.Finish(report->session_id, r, model);
  }
  if (report->outstanding > 0) {
    if (s->output == OutputFormat::kText && !e.args.quiet) {
      e.err << "pending item " << id << ": " << said << "\n";
    }
    Result<std::vector<PendingRecord>> rest = (*engine)->ListPending(report->session_id);
    Checkpoint cp;
    if (rest.ok()) {
      for (const PendingRecord& r : *rest) cp.outstanding.push_back(r.item);
    }
    return driver.printer.Finish(report->session_id, PausedResult(cp), model);
  }
  // Decided, and another resolver continued the turn first.
  TurnResult r;
  r.stop = StopReason::kCompleted;
  r.reason = "resolved; another process continued the turn";
  return driver.printer.Finish(report->session_id, r, model);
}

// ------------------------------------------------------------ pending ----

std::string Age(int64_t ms) {
  int64_t now = static_cast<int64_t>(std::time(nullptr)) * 1000;
  int64_t s = (now - ms) / 1000;
  if (s < 0) s = 0;
  if (s < 60) return std::to_string(s) + "s ago";
  if (s < 3600) return std::to_string(s / 60) + "m ago";
  if (s < 86400) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

int CmdPending(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *s);
  if (!engine.ok()) return Fail(e, s->output, engine.error());
  std::optional<std::string> session;
  if (e.args.session) {
    Result<std::string> full = (*engine)->store().FindSession(*e.args.session);
    if (!full.ok()) return Fail(e, s->output, full.error());
    session = *full;
  }
  Result<std::vector<PendingRecord>> items = (*engine)->ListPending(session);
  if (!items.ok()) return Fail(e, s->output, items.error());
  if (s->output != OutputFormat::kText) {
    Json arr = Json::array();
    for (const PendingRecord& r : *items) {
      Json j = PendingItemJson(r.item);
      j["session_id"] = r.session_id;
      j["root_session_id"] = r.root_session_id;
      j["turn_id"] = r.turn_id;
      j["created_at_ms"] = r.created_at_ms;
      arr.push_back(std::move(j));
    }
    e.out << DumpJson(arr) << "\n";
    return kExitOk;
  }
  if (items->empty()) {
    e.out << "nothing is pending\n";
    return kExitOk;
  }
  for (const PendingRecord& r : *items) {
    e.out << r.item.id << "  " << PendingKindName(r.item.kind) << "  " << r.item.tool;
    if (!r.item.path.empty()) {
      // A subagent's item, shown in its root session's inbox.
      e.out << "  " << r.item.path << "  session " << r.root_session_id << " (subagent "
            << r.session_id << ")";
    } else {
      e.out << "  session " << r.session_id;
    }
    e.out << "  " << Age(r.created_at_ms) << "\n";
    if (!r.item.reason.empty()) e.out << "  reason: " << r.item.reason << "\n";
    if (r.item.kind == PendingKind::kApproval) {
      // A write or edit: the change it would make to the file as it is now.
      std::string shown =
          DescribeChange(**engine, s->session, r.session_id, r.item.tool, r.item.arguments,
                         StyleFor(e.args, e.ctx).color && e.ctx.stdout_tty);
      if (shown.empty()) shown = permissions::FormatArguments(r.item.arguments);
      std::istringstream lines(shown);
      for (std::string line; std::getline(lines, line);) e.out << "    " << line << "\n";
    } else {
      std::vector<std::string> options = permissions::QuestionOptions(r.item.arguments);
      for (size_t i = 0; i < options.size(); ++i) {
        e.out << "    " << (i + 1) << ") " << options[i] << "\n";
      }
    }
    std::istringstream how(PendingInstructions({r.item}));
    std::string first;
    std::getline(how, first);  // the description line repeats the above
    for (std::string line; std::getline(how, line);) e.out << line << "\n";
  }
  return kExitOk;
}

// ----------------------------------------------------------- sessions ----

Json SessionInfoJson(const SessionInfo& i) {
  return Json{{"id", i.id},
              {"workspace", i.workspace.string()},
              {"provider", i.provider},
              {"model", i.model},
              {"command", i.command},
              {"title", i.title},
              {"created_at_ms", i.created_at_ms},
              {"updated_at_ms", i.updated_at_ms},
              {"last_seq", i.last_seq},
              {"parent_id", i.parent_id}};
}

// `sessions show ID --tree`: the session and the sessions its subagents
// started, depth first, each with its newest turn's stop and spending.
int ShowTree(const CommandEnv& e, OutputFormat fmt, SessionStore& store, const std::string& id) {
  Result<SessionTreeNode> loaded = LoadSessionTree(store, id);
  if (!loaded.ok()) return Fail(e, fmt, loaded.error());
  const Json tree = SessionTreeJson(*loaded);
  if (fmt != OutputFormat::kText) {
    e.out << DumpJson(tree) << "\n";
    return kExitOk;
  }
  std::function<void(const Json&, const std::string&)> print = [&](const Json& n,
                                                                   const std::string& indent) {
    e.out << indent << n.value("id", std::string()) << "  " << n.value("title", std::string())
          << "  [" << n.value("status", std::string());
    if (n.contains("counters")) {
      const Json& c = n["counters"];
      e.out << " · " << Counted(c.value("tool_calls", int64_t{0}), "tool call") << " · "
            << Counted(c.value("tokens", int64_t{0}), "token");
    }
    e.out << "]\n";
    for (const Json& child : n["children"]) print(child, indent + "  ");
    if (int more = n.value("omitted_children", 0); more > 0) {
      e.out << indent << "  (" << more << " more not shown)\n";
    }
  };
  print(tree, "");
  return kExitOk;
}

// The pinned settings of `sessions show`, one line per setting.
void PrintSettings(std::ostream& out, const std::optional<Json>& settings) {
  if (!settings) {
    out << "settings  none pinned (created by an older agentloop: each process's own flags and "
           "configuration apply)\n";
    return;
  }
  Result<SessionOptions> o = PinnedSettingsFromJson(*settings);
  if (!o.ok()) {
    out << "settings  unreadable: " << o.error().message() << "\n";
    return;
  }
  auto line = [&](std::string_view key, const std::string& value) {
    out << "  " << key << std::string(key.size() < 18 ? 18 - key.size() : 1, ' ') << value << "\n";
  };
  out << "settings  (pinned to the session; flags of later commands may only narrow them)\n";
  line("workspace", o->workspace.string());
  line("provider", std::string(ProviderKindName(o->provider)) +
                       (o->base_url.empty() ? "" : " at " + o->base_url));
  line("model", o->model);
  line("api key from", o->api_key_env.empty() ? "the provider's variable" : "$" + o->api_key_env);
  if (!o->script_path.empty()) line("script", o->script_path);
  line("command", std::string(CommandKindName(o->command)));
  const Budget b = DefaultBudget(o->command);
  line("max tool calls", o->max_tool_calls ? std::to_string(*o->max_tool_calls)
                                           : std::to_string(b.max_tool_calls) + " (default)");
  line("max tokens", o->max_tokens ? std::to_string(*o->max_tokens)
                                   : std::to_string(b.max_tokens) + " (default)");
  line("max turns",
       o->max_turns ? std::to_string(*o->max_turns) : std::to_string(b.max_turns) + " (default)");
  line("max wall time ms",
       o->max_wall_time ? std::to_string(o->max_wall_time->count()) : std::string("none"));
  for (const auto& [word, rules] :
       {std::pair<std::string_view, const std::vector<SourcedRule>*>{"allow", &o->allow},
        {"ask", &o->ask},
        {"deny", &o->deny}}) {
    for (const SourcedRule& r : *rules) {
      line(word, r.rule + (r.source.empty() ? "" : "  (" + r.source + ")"));
    }
  }
  line("default mutating",
       o->default_mutating ? std::string(DecisionName(*o->default_mutating)) : "ask");
  line("default read-only",
       o->default_read_only ? std::string(DecisionName(*o->default_read_only)) : "allow");
  line("approver",
       std::string(ApproverModeName(o->approver)) +
           (o->webhook_url.empty() ? "" : " " + o->webhook_url) +
           (o->webhook_secret_env.empty() ? "" : " (secret from $" + o->webhook_secret_env + ")"));
  line("sandbox",
       std::string(SandboxModeName(o->sandbox)) + (o->sandbox_network ? " (network on)" : "") +
           (o->sandbox_fallback == SandboxFallback::kWarn ? " (unsandboxed if unavailable)" : ""));
  line("bash timeout ms", std::to_string(o->bash_timeout_ms));
  line("todo loop", o->todo_loop ? "on (max " + std::to_string(o->todo_max_rounds) + " rounds)"
                                 : std::string("off"));
  line("reflector", o->reflector ? "on" : "off");
  line("system prompt", o->system_prompt ? o->system_prompt_source : std::string("built-in"));
}

void PrintMessage(std::ostream& out, const Message& m) {
  std::string who = m.tag.empty() ? std::string(RoleName(m.role))
                                  : std::string(RoleName(m.role)) + " [" + m.tag + "]";
  for (const ContentBlock& b : m.content) {
    switch (b.type) {
      case BlockType::kText:
        if (!b.text.empty()) out << who << ": " << b.text << "\n";
        break;
      case BlockType::kToolUse:
        out << who << ": → " << DescribeToolCall(b.name, b.input) << "\n";
        break;
      case BlockType::kToolResult: {
        std::string first = b.text.substr(0, b.text.find('\n'));
        if (first.size() > 120) first = first.substr(0, 120) + "…";
        out << "  " << (b.is_error ? "✗ " : "✓ ") << first << "\n";
        break;
      }
      default:
        break;
    }
  }
}

int CmdSessions(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  const OutputFormat fmt = s->output;
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, *s);
  if (!engine.ok()) return Fail(e, fmt, engine.error());
  SessionStore& store = (*engine)->store();
  const std::string& verb = e.args.positionals[0];

  if (verb == "list") {
    Result<std::vector<ListedSession>> list = ListTopSessions(
        store, e.args.all ? std::nullopt : std::optional(s->workspace), 0, e.args.all);
    if (!list.ok()) return Fail(e, fmt, list.error());
    if (fmt != OutputFormat::kText) {
      Json arr = Json::array();
      for (const ListedSession& l : *list) {
        Json j = SessionInfoJson(l.info);
        j["status"] = l.status.empty() ? Json(nullptr) : Json(l.status);
        arr.push_back(std::move(j));
      }
      e.out << DumpJson(arr) << "\n";
      return kExitOk;
    }
    if (list->empty()) {
      e.out << (e.args.all ? "no sessions\n"
                           : "no sessions in " + s->workspace.string() +
                                 " (--all lists every workspace's)\n");
      return kExitOk;
    }
    size_t model_width = 5;
    for (const ListedSession& l : *list) {
      const SessionInfo& i = l.info;
      model_width = std::max(model_width, (i.model.empty() ? i.provider : i.model).size());
    }
    auto pad = [](std::string v, size_t w) {
      return v.size() < w ? v + std::string(w - v.size(), ' ') : v;
    };
    const size_t status_width = 17;  // "awaiting_approval"
    e.out << pad("ID", (*list)[0].info.id.size()) << "  " << pad("UPDATED", 16) << "  "
          << pad("STATUS", status_width) << "  " << pad("COMMAND", 7) << "  "
          << pad("MODEL", model_width) << "  " << (e.args.all ? "WORKSPACE  " : "") << "TITLE\n";
    for (const ListedSession& l : *list) {
      const SessionInfo& i = l.info;
      e.out << i.id << "  " << pad(FormatTime(i.updated_at_ms), 16) << "  "
            << pad(l.status.empty() ? "-" : l.status, status_width) << "  " << pad(i.command, 7)
            << "  " << pad(i.model.empty() ? i.provider : i.model, model_width) << "  "
            << (e.args.all ? i.workspace.string() + "  " : "")
            << (i.title.empty() ? "(untitled)" : i.title) << "\n";
    }
    return kExitOk;
  }

  if (verb == "prune") {
    SessionListOptions opts;
    opts.limit = 0;
    if (!e.args.all) opts.workspace = s->workspace;
    Result<std::vector<SessionInfo>> list = store.ListSessions(opts);
    if (!list.ok()) return Fail(e, fmt, list.error());
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const int64_t cutoff = now_ms - e.args.older_than->count();
    Json removed = Json::array();
    for (const SessionInfo& i : *list) {
      if (i.updated_at_ms >= cutoff) continue;
      if (Status st = store.RemoveSession(i.id); !st.ok()) {
        e.err << "agentloop: kept " << i.id << ": " << st.message() << "\n";
        continue;
      }
      removed.push_back(i.id);
    }
    if (fmt != OutputFormat::kText) {
      e.out << DumpJson(Json{{"removed", removed}}) << "\n";
    } else {
      e.out << "removed " << removed.size() << " session" << (removed.size() == 1 ? "" : "s")
            << "\n";
    }
    return kExitOk;
  }

  Result<std::string> id = store.FindSession(e.args.positionals[1]);
  if (!id.ok()) return Fail(e, fmt, id.error());

  if (verb == "export") {
    Result<std::vector<StoredEvent>> events = store.Events(*id, 0);
    if (!events.ok()) return Fail(e, fmt, events.error());
    for (const StoredEvent& ev : *events) e.out << ev.json << "\n";
    return kExitOk;
  }
  if (verb == "rm") {
    Status st = store.RemoveSession(*id);
    if (!st.ok()) return Fail(e, fmt, st);
    if (fmt == OutputFormat::kText) {
      e.out << "removed " << *id << "\n";
    } else {
      e.out << DumpJson(Json{{"removed", *id}}) << "\n";
    }
    return kExitOk;
  }
  if (e.args.tree) return ShowTree(e, fmt, store, *id);
  // show
  LoadOptions lo;
  lo.repair = false;
  Result<SessionSnapshot> snap = store.Load(*id, lo);
  if (!snap.ok()) return Fail(e, fmt, snap.error());
  Result<std::optional<Json>> settings = store.GetSettings(*id);
  if (!settings.ok()) return Fail(e, fmt, settings.error());
  if (fmt != OutputFormat::kText) {
    Json j = Json::object();
    j["session"] = SessionInfoJson(snap->info);
    // null: nothing pinned (a session created by an older agentloop).
    j["settings"] = settings->has_value() ? **settings : Json(nullptr);
    Json msgs = Json::array();
    for (const Message& m : snap->messages) msgs.push_back(ToJson(m));
    j["messages"] = std::move(msgs);
    if (snap->last_turn_end) {
      const LastTurnEnd& t = *snap->last_turn_end;
      j["last_turn"] = Json{{"turn_id", t.turn_id},
                            {"status", std::string(StopReasonName(t.stop))},
                            {"reason", t.reason},
                            {"final_text", t.final_text},
                            {"counters", ToJson(t.counters)}};
    }
    Json pending = Json::array();
    if (snap->open_checkpoint) {
      for (const PendingItem& p : snap->open_checkpoint->outstanding) {
        pending.push_back(PendingItemJson(p));
      }
    }
    j["pending"] = std::move(pending);
    Json warnings = Json::array();
    for (const LoadWarning& w : snap->warnings) warnings.push_back(w.message);
    j["warnings"] = std::move(warnings);
    e.out << DumpJson(j) << "\n";
    return kExitOk;
  }
  const SessionInfo& i = snap->info;
  e.out << "session   " << i.id << "\nworkspace " << i.workspace.string() << "\nprovider  "
        << i.provider << (i.model.empty() ? "" : " / " + i.model) << "\ncommand   " << i.command
        << "\ncreated   " << FormatTime(i.created_at_ms) << "\nupdated   "
        << FormatTime(i.updated_at_ms) << "\nevents    " << i.last_seq << "\n";
  if (snap->last_turn_end) {
    const LastTurnEnd& t = *snap->last_turn_end;
    e.out << "last turn " << StopReasonName(t.stop) << " · "
          << Counted(t.counters.tool_calls, "tool call") << " · "
          << Counted(t.counters.tokens, "token") << "\n";
  }
  for (const LoadWarning& w : snap->warnings) e.out << "warning   " << w.message << "\n";
  PrintSettings(e.out, *settings);
  e.out << "\n";
  for (const Message& m : snap->messages) PrintMessage(e.out, m);
  if (snap->open_checkpoint)
    e.out << "\n" << PendingInstructions(snap->open_checkpoint->outstanding);
  return kExitOk;
}

// ------------------------------------------------------------- config ----

int CmdConfig(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  if (s->output != OutputFormat::kText) {
    Json arr = Json::array();
    for (const ConfigEntry& c : DescribeConfig(s->loaded.config)) {
      arr.push_back(Json{{"key", c.key}, {"value", c.value}, {"origin", c.origin}});
    }
    Json files = Json::array();
    for (const auto& f : s->loaded.files) files.push_back(f.string());
    Json ignored = Json::array();
    for (const IgnoredSetting& i : s->loaded.ignored) {
      const std::string shown = RedactSecrets(DumpJson(i.value));
      Result<Json> value = ParseJson(shown);
      ignored.push_back(Json{{"key", i.key},
                             {"value", value.ok() ? *value : Json(shown)},
                             {"origin", i.origin.ToString()},
                             {"reason", i.reason}});
    }
    e.out << DumpJson(Json{{"entries", arr},
                           {"files", files},
                           {"workspace", s->workspace.string()},
                           {"workspace_trust", WorkspaceTrustName(s->loaded.workspace_trust)},
                           {"ignored", ignored}})
          << "\n";
    return kExitOk;
  }
  e.out << "# workspace " << s->workspace.string() << "\n";
  for (const auto& f : s->loaded.files) e.out << "# read " << f.string() << "\n";
  e.out << FormatWorkspaceTrust(s->loaded);
  e.out << FormatConfig(s->loaded.config);
  return kExitOk;
}

// -------------------------------------------------------- permissions ----

int CmdPermissions(const CommandEnv& e) {
  int code = 0;
  std::optional<CliSettings> s = Settings(e, &code);
  if (!s) return code;
  const std::string& tool = e.args.positionals[1];
  Result<Json> args = ParseJson(e.args.positionals[2]);
  if (!args.ok() || !args->is_object()) {
    return UsageError(e, InvalidArgument("JSON_ARGS must be a JSON object, e.g. '{\"command\": "
                                         "\"git status\"}'"));
  }
  // The tools and the policy a session of these settings would have, built
  // by the same wiring as the session's.
  const engine::WiringContext wctx = engine::MakeWiringContext(e.ctx.env);
  Result<engine::WiredTools> tools = engine::WireTools(s->session, wctx);
  if (!tools.ok()) return UsageError(e, tools.error());
  std::optional<ToolSpec> spec;
  if (const Tool* t = tools->registry.Find(tool)) spec = t->spec();
  if (!spec) {
    // Tool names in rules match case-insensitively; so does the name here
    // (`permissions check Bash ...` checks bash).
    for (ToolSpec& candidate : tools->registry.Specs()) {
      if (ToLower(candidate.name) == ToLower(tool)) spec = std::move(candidate);
    }
  }
  if (!spec) {
    e.err << "agentloop: warning: '" << tool
          << "' is not a tool of agentloop; checked as a mutating tool\n";
    spec = ToolSpec{tool, "", Json::object(), true, false};
  }
  Result<engine::WiredPolicy> wired = engine::WirePolicy(s->session, tools->registry, wctx);
  if (!wired.ok()) return UsageError(e, wired.error());
  for (std::string& w : wired->warnings) {
    // The wiring names the module; the check's warnings always spoke of rules.
    if (StartsWith(w, "permissions: ")) w = w.substr(13);
  }
  PrintWarnings(e, wired->warnings);
  const permissions::RulesPolicy& policy = *wired->rules;
  if (s->output != OutputFormat::kText) {
    PolicyVerdict v = policy.Evaluate(*spec, *args);
    e.out << DumpJson(Json{{"tool", tool},
                           {"decision", std::string(DecisionName(v.decision))},
                           {"reason", v.reason},
                           {"rule", v.rule}})
          << "\n";
    return kExitOk;
  }
  e.out << permissions::ExplainDecision(policy, *spec, *args);
  return kExitOk;
}

}  // namespace

Result<std::string> NewestToContinue(SessionStore& store, const std::filesystem::path& workspace) {
  AL_ASSIGN_OR_RETURN(std::vector<ListedSession> listed,
                      ListTopSessions(store, workspace, 1, false));
  if (listed.empty()) {
    return NotFound("no session with a turn in " + workspace.string() +
                    " to continue (`agentloop chat` starts one)");
  }
  return listed[0].info.id;
}

Style TurnStyle(const CommandEnv& e, const CliSettings& settings) {
  Style st = StyleFor(e.args, e.ctx);
  st.api_key_env = settings.session.api_key_env;
  if (st.api_key_env.empty()) {
    switch (settings.session.provider) {
      case ProviderKind::kAnthropic:
        st.api_key_env = "ANTHROPIC_API_KEY";
        break;
      case ProviderKind::kOpenAI:
      case ProviderKind::kOpenAIResponses:
        st.api_key_env = "OPENAI_API_KEY";
        break;
      case ProviderKind::kScript:
        break;
    }
  }
  return st;
}

std::string DescribeChange(Engine& engine, const SessionOptions& base,
                           const std::string& session_id, const std::string& tool, const Json& args,
                           bool color, size_t max_lines) {
  if (!tools::HasChangePreview(tool)) return "";
  Result<SessionInfo> info = engine.store().GetSession(session_id);
  if (!info.ok()) return "";
  SessionOptions o = base;
  o.session_id = session_id;
  o.continue_latest = false;
  tools::ChangePreviewOptions bounded;
  bounded.max_diff_bytes = 64 << 10;
  Result<tools::ChangePreview> p =
      engine::PreviewCallChange(engine, o, info->workspace, tool, args, bounded);
  if (!p.ok()) return "";
  std::string out = "  file: " + SanitizeUtf8(p->path);
  if (std::string summary = p->Summary(); !summary.empty()) out += "  " + summary;
  out += "\n";
  if (p->note.empty()) return out + RenderDiff(p->diff, color, "    ", max_lines);
  // No diff: the note says why, and the call's own arguments follow (what
  // the model proposes, never the file's current text).
  out += "  note: " + SanitizeUtf8(p->note) + "\n";
  std::string replacement = permissions::FormatReplacement(args, color);
  return out + "arguments:\n" +
         (replacement.empty() ? permissions::FormatArguments(args) : replacement);
}

permissions::ConsoleApprover::Options ConsoleOptions(const CliContext& ctx, Engine* engine,
                                                     const SessionOptions* base, bool color) {
  permissions::ConsoleApprover::Options o;
  if (engine != nullptr && base != nullptr) {
    o.describe = [engine, base, color](const ApprovalRequest& r) {
      return DescribeChange(*engine, *base, r.session_id, r.call.name, r.call.input, color);
    };
  }
  if (!ctx.stdin_tty) return o;
  // Key by key, so that Ctrl-C and Esc cancel the prompt.
  o.read_line = [](std::ostream& out, std::string_view prompt, const std::stop_token& stop) {
    return ReadKeysLine(STDIN_FILENO, out, prompt, stop);
  };
  for (const char* name : {"VISUAL", "EDITOR"}) {
    auto it = ctx.env.find(name);
    if (it == ctx.env.end() || Trim(it->second).empty()) continue;
    o.edit_text = [editor = it->second](const std::string& text) {
      return EditInEditor(editor, text);
    };
    break;
  }
  return o;
}

Result<std::string> EditInEditor(const std::string& editor, const std::string& text) {
  char path[] = "/tmp/agentloop-arguments-XXXXXX.json";
  int fd = mkstemps(path, 5);
  if (fd < 0) return Internal(std::string("cannot make a temporary file: ") + strerror(errno));
  struct Unlink {
    const char* p;
    ~Unlink() { unlink(p); }
  } unlink_later{path};
  for (size_t done = 0; done < text.size();) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return Internal(std::string("cannot write ") + path + ": " + strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  // Through the shell, so that EDITOR may carry arguments; the path is "$1".
  const std::string command = editor + " \"$1\"";
  pid_t pid = fork();
  if (pid < 0) return Internal(std::string("cannot start the editor: ") + strerror(errno));
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), "sh", path, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Internal(std::string("waiting for the editor: ") + strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return FailedPrecondition("editor '" + editor + "' exited with status " +
                              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Internal(std::string("cannot read ") + path + " back");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Style StyleFor(const CliArgs& args, const CliContext& ctx) {
  Style st;
  auto no_color = ctx.env.find("NO_COLOR");
  bool color_off = no_color != ctx.env.end() && !no_color->second.empty();
  auto term = ctx.env.find("TERM");
  bool dumb = term != ctx.env.end() && term->second == "dumb";
  st.color = ctx.stderr_tty && !color_off && !dumb;
  st.spinner = ctx.stderr_tty && !dumb;
  st.quiet = args.quiet;
  st.show_thinking = args.show_thinking;
  return st;
}

Result<std::unique_ptr<Engine>> MakeEngine(const CliContext& ctx, const CliSettings& settings,
                                           bool preconnect) {
  EngineOptions eo = engine::EngineOptionsFromConfig(settings.loaded.config, ctx.env);
  if (preconnect) eo.preconnect_for = settings.session;
  return Engine::Create(std::move(eo));
}

void FillFromStoredSession(Engine& engine, const std::string& session_id, CliSettings& settings,
                           const CliArgs& args) {
  // A session with pinned settings takes from this process only what its
  // flags ask to change (chat --session/--continue included).
  settings.session.overrides = FlagOverrides(settings, args);
  Result<std::string> id = engine.store().FindSession(session_id);
  if (!id.ok()) return;
  Result<SessionInfo> info = engine.store().GetSession(*id);
  if (!info.ok()) return;
  const Config& c = settings.loaded.config;
  bool explicit_provider = !c.provider.kind.value.empty() || !c.provider.script.value.empty();
  Result<ProviderKind> stored_kind = ParseProviderKind(info->provider);
  if (!explicit_provider && stored_kind.ok()) {
    settings.session.provider = *stored_kind;
    settings.provider_configured = true;
    if (c.provider.model.value.empty()) settings.session.model = info->model;
  }
  if (c.command.origin.kind == ConfigOrigin::Kind::kDefault) {
    if (std::optional<CommandKind> k = ParseCommandKind(info->command)) {
      settings.session.command = *k;
    }
  }
}

// ------------------------------------------------- learning (issue 8) ----

// The memory, skill and proposal directories for the workspace of -C (or
// the current directory), laid out as the engine lays them out.
Result<learning::LearningDirs> LearningDirsFor(const CommandEnv& e) {
  AL_ASSIGN_OR_RETURN(std::filesystem::path data_dir, DefaultDataDir(e.ctx.env));
  std::filesystem::path config_dir;
  if (auto dir = UserConfigDir(e.ctx.env); dir.ok()) config_dir = *dir;
  std::error_code ec;
  std::filesystem::path ws = e.args.workspace ? std::filesystem::path(*e.args.workspace)
                                              : std::filesystem::current_path(ec);
  auto canon = std::filesystem::weakly_canonical(ws, ec);
  return learning::MakeLearningDirs(data_dir, config_dir, ec ? ws : canon);
}

Json UsageRowsJson(const std::vector<learning::UsageRow>& rows) {
  Json arr = Json::array();
  for (const learning::UsageRow& r : rows) {
    Json j{{"name", r.name},
           {"scope", r.scope},
           {"description", r.description},
           {"path", r.path},
           {"uses", r.uses},
           {"last_used_ms", r.last_used_ms},
           {"completed", r.completed},
           {"not_completed", r.not_completed}};
    if (!r.type.empty()) j["type"] = r.type;
    arr.push_back(std::move(j));
  }
  return arr;
}

int CmdLearning(const CommandEnv& e) {
  const OutputFormat format = FlagOutput(e.args);
  Result<learning::LearningDirs> dirs = LearningDirsFor(e);
  if (!dirs.ok()) return Fail(e, format, InvalidArgument(dirs.error().message()));
  learning::MemoryStore memory(dirs->user_memory, dirs->workspace_memory);
  learning::SkillStore skills(dirs->user_skills, dirs->workspace_skills);
  switch (e.args.subcommand) {
    case Subcommand::kMemory:
    case Subcommand::kSkills: {
      bool mem = e.args.subcommand == Subcommand::kMemory;
      std::vector<learning::UsageRow> rows =
          mem ? learning::MemoryRows(memory) : learning::SkillRows(skills);
      if (format != OutputFormat::kText) {
        e.out << DumpJson(UsageRowsJson(rows)) << "\n";
      } else {
        e.out << learning::FormatUsageRows(rows, mem ? "memory" : "skill");
      }
      return kExitOk;
    }
    default:
      break;
  }
  learning::ProposalStore proposals(dirs->proposals);
  const std::string& verb = e.args.positionals[0];
  if (verb == "list") {
    if (format != OutputFormat::kText) {
      Json arr = Json::array();
      for (const learning::ProposalRecord& p : proposals.List(std::nullopt)) {
        arr.push_back(p.ToJson());
      }
      e.out << DumpJson(arr) << "\n";
    } else {
      e.out << learning::FormatProposals(proposals.List(std::nullopt));
    }
    return kExitOk;
  }
  const std::string& id = e.args.positionals[1];
  Result<learning::ProposalRecord> r =
      verb == "accept" ? proposals.Accept(id, memory, skills) : proposals.Reject(id);
  if (!r.ok()) return Fail(e, format, r.error());
  if (format != OutputFormat::kText) {
    e.out << DumpJson(r->ToJson()) << "\n";
  } else if (verb == "accept" && !r->written.empty()) {
    e.out << "accepted " << r->id << ": " << r->kind << " written to " << r->written << "\n";
  } else {
    e.out << (verb == "accept" ? "accepted " : "rejected ") << r->id << "\n";
  }
  return kExitOk;
}

int RunCli(const std::vector<std::string>& argv, const CliContext& ctx, std::istream& in,
           std::ostream& out, std::ostream& err) {
  Result<CliArgs> parsed = ParseArgs(argv);
  if (!parsed.ok()) {
    // The arguments did not parse, but a script that asked for JSON still
    // gets its error as JSON.
    for (size_t i = 0; i < argv.size(); ++i) {
      std::string_view a = argv[i];
      std::string_view v = a.starts_with("--output=")               ? a.substr(9)
                           : a == "--output" && i + 1 < argv.size() ? std::string_view(argv[i + 1])
                                                                    : std::string_view();
      if (v == "json" || v == "stream-json") {
        out << DumpJson(ErrorJson(parsed.error())) << "\n";
        break;
      }
    }
    err << "agentloop: " << parsed.error().message() << "\n";
    return kExitUsage;
  }
  const CliArgs& args = *parsed;
  if (args.version) {
    out << "agentloop " << AL_VERSION << " (commit " << AL_GIT_COMMIT << ", " << AL_BUILD_TYPE
        << " build)\n";
    return kExitOk;
  }
  if (!args.quiet) {
    for (const std::string& w : args.warnings) err << "agentloop: warning: " << w << "\n";
  }
  if (args.help || args.subcommand == Subcommand::kHelp) {
    Subcommand which = args.subcommand;
    if (which == Subcommand::kHelp && !args.positionals.empty()) {
      which = ParseSubcommand(args.positionals[0]).value_or(Subcommand::kNone);
    }
    out << UsageText(which);
    return kExitOk;
  }
  CommandEnv e{args, ctx, in, out, err};
  switch (args.subcommand) {
    case Subcommand::kRun:
      return CmdRun(e);
    case Subcommand::kChat: {
      int code = 0;
      std::optional<CliSettings> s = Settings(e, &code);
      if (!s) return code;
      return RunChat(e, std::move(*s));
    }
    case Subcommand::kSessions:
      return CmdSessions(e);
    case Subcommand::kResume:
      return CmdResume(e);
    case Subcommand::kCompact:
      return CmdCompact(e);
    case Subcommand::kConfig:
      return CmdConfig(e);
    case Subcommand::kPending:
      return CmdPending(e);
    case Subcommand::kApprove:
    case Subcommand::kDeny:
    case Subcommand::kAnswer:
      return CmdResolve(e);
    case Subcommand::kPermissions:
      return CmdPermissions(e);
    case Subcommand::kProposals:
    case Subcommand::kMemory:
    case Subcommand::kSkills:
      return CmdLearning(e);
    case Subcommand::kTrust:
      return CmdTrust(e);
    case Subcommand::kAgents:
      return CmdAgents(e);
    case Subcommand::kCompletion: {
      Result<std::string> script = CompletionScript(args.positionals[0]);
      if (!script.ok()) return UsageError(e, script.error());
      out << *script;
      return kExitOk;
    }
    case Subcommand::kServe:
      return CmdServe(e);
    case Subcommand::kStore:
      return CmdStore(e);
    case Subcommand::kMcp:
      return CmdMcp(e);
    case Subcommand::kAcp:
      return CmdAcp(e);
    case Subcommand::kNone:
    case Subcommand::kHelp:
      break;
  }
  out << UsageText(Subcommand::kNone);
  return kExitUsage;
}

}  // namespace agentloop::cli
