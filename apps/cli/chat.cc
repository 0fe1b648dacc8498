// `agentloop chat`: the interactive mode. Line editing and history through
// libedit's readline interface on a terminal, plain lines otherwise (so a
// script can pipe a conversation in). Multi-line input: a trailing backslash
// continues the line; a line `"""` opens a block that the next `"""` closes.
// Slash commands go through one table (kSlashCommands).
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <set>
#include <string>

#include <editline/readline.h>

#include "base/strings.h"
#include "commands.h"
#include "engine/wiring.h"
#include "interrupt.h"
#include "permissions/approvers.h"
#include "pricing.h"
#include "undo.h"

namespace agentloop::cli {
namespace {

// ------------------------------------------------------- line reading ----

enum class ReadStatus { kLine, kEof, kInterrupted };

struct ReadResult {
  ReadStatus status = ReadStatus::kEof;
  std::string line;
};

class LineReader {
 public:
  virtual ~LineReader() = default;
  virtual ReadResult Read(const std::string& prompt) = 0;
  virtual void Remember(const std::string& entry) { (void)entry; }
};

// Reads a character for libedit; a Ctrl-C at the prompt ends the read so
// the chat can clear the line.
int InterruptibleGetc(FILE* stream) {
  (void)stream;
  unsigned char c = 0;
  while (true) {
    ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n == 1) return c;
    if (n < 0 && errno == EINTR) {
      if (Interrupts::Count() > 0) return EOF;
      continue;
    }
    return EOF;
  }
}

class EditLineReader final : public LineReader {
 public:
  explicit EditLineReader(std::string history_file) : history_file_(std::move(history_file)) {
    // libedit decodes the prompt and the input with the locale's character
    // set (in the "C" locale a non-ASCII prompt crashes it).
    setlocale(LC_CTYPE, "");
    utf8_ = std::string_view(nl_langinfo(CODESET)) == "UTF-8";
    rl_readline_name = "agentloop";
    rl_catch_signals = 0;
    rl_getc_function = InterruptibleGetc;
    using_history();
    stifle_history(1000);
    if (!history_file_.empty()) read_history(history_file_.c_str());
  }

  ReadResult Read(const std::string& prompt) override {
    std::string shown = prompt;
    if (!utf8_) shown = prompt.rfind("›", 0) == 0 ? "> " : "... ";
    char* raw = readline(shown.c_str());
    if (raw == nullptr) {
      if (Interrupts::Count() > 0) return {ReadStatus::kInterrupted, ""};
      return {ReadStatus::kEof, ""};
    }
    std::string line(raw);
    free(raw);  // NOLINT: allocated by readline
    Interrupts::Clear();
    return {ReadStatus::kLine, std::move(line)};
  }

  void Remember(const std::string& entry) override {
    if (entry.empty()) return;
    add_history(entry.c_str());
    if (!history_file_.empty()) write_history(history_file_.c_str());
  }

 private:
  std::string history_file_;
  bool utf8_ = false;
};

class StreamLineReader final : public LineReader {
 public:
  explicit StreamLineReader(std::istream& in) : in_(in) {}
  ReadResult Read(const std::string& prompt) override {
    (void)prompt;
    std::string line;
    if (!std::getline(in_, line)) return {ReadStatus::kEof, ""};
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return {ReadStatus::kLine, std::move(line)};
  }

 private:
  std::istream& in_;
};

// Reads one message: continuation lines and """ blocks joined with '\n'.
ReadResult ReadMessage(LineReader& reader, std::ostream& err) {
  ReadResult first = reader.Read("› ");
  if (first.status != ReadStatus::kLine) return first;
  std::string text;
  if (first.line == "\"\"\"") {
    while (true) {
      ReadResult r = reader.Read("… ");
      if (r.status == ReadStatus::kInterrupted) return r;
      if (r.status == ReadStatus::kEof || r.line == "\"\"\"") break;
      if (!text.empty()) text += '\n';
      text += r.line;
    }
    reader.Remember(text);
    return {ReadStatus::kLine, text};
  }
  std::string line = first.line;
  while (!line.empty() && line.back() == '\\') {
    line.pop_back();
    text += line + "\n";
    ReadResult r = reader.Read("… ");
    if (r.status == ReadStatus::kInterrupted) return r;
    if (r.status == ReadStatus::kEof) {
      line.clear();
      break;
    }
    line = r.line;
  }
  text += line;
  (void)err;
  reader.Remember(text);
  return {ReadStatus::kLine, text};
}

// -------------------------------------------------------------- state ----

// The chat asks a paused turn's items itself, right after the turn.
Style ChatStyle(const CommandEnv& e, const CliSettings& settings) {
  Style st = TurnStyle(e, settings);
  st.asks_pending = true;
  return st;
}

struct ChatState {
  const CommandEnv& env;
  CliSettings settings;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Session> session;
  TurnPrinter printer;
  std::shared_ptr<permissions::SessionApprovals> approvals;
  permissions::ConsoleApprover console;
  bool exit = false;
  // Where the chat reads the person's lines (the budget question reads its
  // answer there too).
  LineReader* reader = nullptr;
  // The session's budgets when the chat first opened it: the step by which
  // the budget question raises one.
  std::optional<Budget> first_budget;
  // Changes /undo reverted (tool_use ids), and what the model is told with
  // the next message about them.
  std::set<std::string> undone;
  std::vector<std::string> notes;

  ChatState(const CommandEnv& e, CliSettings s, std::unique_ptr<Engine> eng)
      : env(e),
        settings(std::move(s)),
        engine(std::move(eng)),
        printer(settings.output, e.out, e.err, ChatStyle(e, settings)),
        approvals(std::make_shared<permissions::SessionApprovals>(settings.workspace)),
        console(
            e.in, e.err, e.ctx.stdin_tty, approvals,
            ConsoleOptions(e.ctx, engine.get(), &settings.session, StyleFor(e.args, e.ctx).color)) {
  }

  std::string Model() const {
    if (!settings.session.model.empty()) return settings.session.model;
    return session ? session->info().model : std::string();
  }

  Status Open() {
    session.reset();
    Result<std::unique_ptr<Session>> s = engine->OpenSession(settings.session);
    if (!s.ok()) return s.error();
    session = std::move(*s);
    if (!first_budget) first_budget = session->budget();
    // Later opens (after /clear) start fresh unless told otherwise.
    settings.session.continue_latest = false;
    settings.session.session_id = session->id();
    for (const std::string& w : session->load_warnings()) {
      env.err << "agentloop: warning: " << w << "\n";
    }
    return Status::Ok();
  }
};

// ----------------------------------------------------- slash commands ----

struct SlashCommand {
  std::string_view name;
  std::string_view args;
  std::string_view help;
  std::function<void(ChatState&, const std::string&)> run;
};

void Help(ChatState& st, const std::string& args);

void Status_(ChatState& st, const std::string& args) {
  (void)args;
  Budget b = st.session->budget();
  TurnCounters t = st.session->totals();
  std::ostream& o = st.env.err;
  o << "session   " << st.session->id() << "\nmodel     " << st.Model() << " ("
    << ProviderKindName(st.settings.session.provider) << ")\ncommand   "
    << CommandKindName(st.settings.session.command)
    << "\nbudget    per turn: " << Counted(b.max_tool_calls, "tool call") << ", "
    << Counted(b.max_tokens, "token") << ", " << Counted(b.max_turns, "model call")
    << "\nused      " << Counted(t.tool_calls, "tool call") << ", " << Counted(t.tokens, "token")
    << " (in " << GroupDigits(t.usage.input_tokens) << ", out "
    << GroupDigits(t.usage.output_tokens) << ", cached " << GroupDigits(t.usage.cache_read_tokens)
    << ", cache writes " << GroupDigits(t.usage.cache_write_tokens) << "), "
    << Counted(t.model_calls, "model call") << "\n";
  if (std::optional<double> cost = EstimateCostUsd(st.Model(), t.usage)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", *cost);
    o << "cost      $" << buf << " (list prices, an estimate)\n";
  }
  Session::ContextUsage ctx = st.session->context();
  o << "context   " << GroupDigits(ctx.tokens) << " / " << GroupDigits(ctx.window) << " tokens ("
    << (ctx.window > 0 ? ctx.tokens * 100 / ctx.window : 0) << "%)\n";
  if (std::optional<Checkpoint> cp = st.session->open_checkpoint()) {
    o << PendingInstructions(cp->outstanding);
  }
}

void SessionCmd(ChatState& st, const std::string& args) {
  (void)args;
  const SessionInfo& i = st.session->info();
  st.env.err << "session   " << i.id << "\nworkspace " << i.workspace.string() << "\ntitle     "
             << i.title << "\nresume    agentloop resume " << i.id << "\n";
}

void ModelCmd(ChatState& st, const std::string& args) {
  if (args.empty()) {
    st.env.err << "model: " << st.Model() << "\n";
    return;
  }
  Status s = st.session->SetModel(args);
  if (!s.ok()) {
    st.env.err << "agentloop: " << s.message() << "\n";
    return;
  }
  st.settings.session.model = args;
  st.env.err << "model set to " << args << "\n";
}

void ClearCmd(ChatState& st, const std::string& args) {
  (void)args;
  st.settings.session.session_id.clear();
  st.approvals->Clear();
  Status s = st.Open();
  if (!s.ok()) {
    st.env.err << "agentloop: " << s.message() << "\n";
    st.exit = true;
    return;
  }
  st.env.err << "new session " << st.session->id() << "\n";
}

// The session's changes to the workspace: the diffs its write and edit
// calls reported, oldest first, from the stored history.
void DiffCmd(ChatState& st, const std::string& args) {
  (void)args;
  std::string all;
  for (const Message& m : st.session->history()) {
    for (const ContentBlock& b : m.content) {
      if (b.type != BlockType::kToolResult || !b.meta.is_object()) continue;
      auto details = b.meta.find("details");
      if (details == b.meta.end() || !details->is_object()) continue;
      auto diff = details->find("diff");
      if (diff != details->end() && diff->is_string()) all += diff->get<std::string>();
    }
  }
  if (all.empty()) {
    st.env.err << "no file changes in this session\n";
    return;
  }
  st.env.err << RenderDiff(all, StyleFor(st.env.args, st.env.ctx).color, "", 2000);
}

// Reverts the newest change to a file that a write or edit call of this
// session made and /undo has not reverted yet, from the diff its result
// recorded; refused when the file changed since. The model hears of it
// with the next message.
void UndoCmd(ChatState& st, const std::string& args) {
  (void)args;
  std::vector<FileChange> changes = FileChanges(st.session->history());
  const FileChange* target = nullptr;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    if (st.undone.count(it->tool_use_id) == 0) {
      target = &*it;
      break;
    }
  }
  if (target == nullptr) {
    st.env.err << (changes.empty() ? "nothing to undo: no write or edit of this session changed "
                                     "a file\n"
                                   : "nothing to undo: every change of this session is undone\n");
    return;
  }
  const std::string what =
      (target->tool.empty() ? std::string("change") : target->tool) + " of " + target->path;
  Result<std::string> shown = RevertChange(*target, st.session->options().workspace);
  if (!shown.ok()) {
    st.env.err << "agentloop: cannot undo the " << what << ": " << shown.error().message() << "\n";
    return;
  }
  st.undone.insert(target->tool_use_id);
  st.notes.push_back("(Note: the user reverted your " + what +
                     (target->created ? ", which removed the file" : "") +
                     " with /undo; the file is as it was before that call.)");
  st.env.err << "reverted the " << what
             << (target->created ? " (the file it created is removed)" : "") << ":\n"
             << RenderDiff(*shown, StyleFor(st.env.args, st.env.ctx).color, "  ", 60)
             << "(the model is told with your next message)\n";
}

// `/permissions`: the session's rules with where each came from, and the
// defaults. `/permissions allow|ask|deny RULE` adds a rule to the session
// (pinned to it, source "/permissions"): ask and deny narrow as any later
// flag may; allow is the person's own decision and may widen what the
// session was pinned with (SettingsOverrides::person_allow).
void PermissionsCmd(ChatState& st, const std::string& args) {
  std::ostream& o = st.env.err;
  if (!args.empty()) {
    size_t sp = args.find_first_of(" \t");
    const std::string verb = args.substr(0, sp);
    const std::string rule =
        sp == std::string::npos ? "" : std::string(Trim(std::string_view(args).substr(sp)));
    if ((verb != "allow" && verb != "ask" && verb != "deny") || rule.empty()) {
      o << "usage: /permissions [allow|ask|deny RULE]   e.g. /permissions allow bash(make test)\n";
      return;
    }
    SettingsOverrides& ov = st.settings.session.overrides;
    std::vector<SourcedRule>& list = verb == "allow" ? ov.person_allow
                                     : verb == "ask" ? ov.ask
                                                     : ov.deny;
    list.push_back({rule, "/permissions"});
    // The session opens again with the rule (checked and pinned there).
    if (Status s = st.Open(); !s.ok()) {
      list.pop_back();
      o << "agentloop: " << s.message() << "\n";
      if (Status again = st.Open(); !again.ok()) {
        o << "agentloop: " << again.message() << "\n";
        st.exit = true;
      }
      return;
    }
    o << verb << " " << rule << " added to session " << st.session->id() << "\n";
    return;
  }
  const SessionOptions& so = st.session->options();
  bool any = false;
  for (const auto& [word, rules] :
       {std::pair<std::string_view, const std::vector<SourcedRule>*>{"deny", &so.deny},
        {"ask", &so.ask},
        {"allow", &so.allow}}) {
    for (const SourcedRule& r : *rules) {
      o << "  " << word << std::string(6 - word.size(), ' ') << r.rule
        << (r.source.empty() ? "" : "   (" + r.source + ")") << "\n";
      any = true;
    }
  }
  if (!any) o << "  no rules\n";
  o << "  default for mutating tools: "
    << (so.default_mutating ? DecisionName(*so.default_mutating) : "ask")
    << "; for read-only tools: "
    << (so.default_read_only ? DecisionName(*so.default_read_only) : "allow") << "\n"
    << "  deny wins over ask, ask over allow; `agentloop permissions check TOOL JSON` "
       "explains one call\n"
    << "  /permissions allow|ask|deny RULE adds a rule to this session\n";
}

// The budgets /budget names, as a person types them.
struct BudgetName {
  std::string_view name;
  std::string_view field;  // SettingsOverrides' field, for sources
  std::string_view unit;   // Counted's noun
};
constexpr BudgetName kBudgetNames[] = {{"tool_calls", "max_tool_calls", "tool call"},
                                       {"tokens", "max_tokens", "token"},
                                       {"model_calls", "max_turns", "model call"}};

int64_t BudgetValue(const Budget& b, std::string_view name) {
  if (name == "tool_calls") return b.max_tool_calls;
  if (name == "tokens") return b.max_tokens;
  return b.max_turns;
}

// Sets the session's budget `name` to `value` as the person's decision
// (SettingsOverrides::person_budgets, only with a person at the terminal:
// from a pipe a larger value is refused like a flag's) and opens the
// session again with it (checked, pinned and recorded in the `settings`
// event with `source`). On a refusal the session stays as it was.
Status SetBudget(ChatState& st, std::string_view name, int64_t value, const std::string& source) {
  SettingsOverrides& ov = st.settings.session.overrides;
  const SettingsOverrides before = ov;
  const BudgetName* which = nullptr;
  for (const BudgetName& n : kBudgetNames) {
    if (n.name == name) which = &n;
  }
  if (which == nullptr) return InvalidArgument("unknown budget " + std::string(name));
  if (name == "tool_calls") {
    ov.max_tool_calls = static_cast<int>(value);
  } else if (name == "tokens") {
    ov.max_tokens = value;
  } else {
    ov.max_turns = static_cast<int>(value);
  }
  ov.person_budgets = st.settings.session.interactive;
  ov.sources[std::string(which->field)] =
      source + (st.settings.session.interactive ? " (the person at the terminal)" : "");
  if (Status s = st.Open(); !s.ok()) {
    ov = before;
    if (Status again = st.Open(); !again.ok()) {
      st.env.err << "agentloop: " << again.message() << "\n";
      st.exit = true;
    }
    return s;
  }
  return Status::Ok();
}

std::string BudgetLine(const Budget& b) {
  std::string line = Counted(b.max_tool_calls, "tool call") + ", " +
                     Counted(b.max_tokens, "token") + ", " + Counted(b.max_turns, "model call");
  if (b.max_wall_time) line += ", " + std::to_string(b.max_wall_time->count()) + " ms";
  return line;
}

// `/budget`: the session's budgets per turn. `/budget NAME N` sets one
// (tool_calls, tokens, model_calls).
void BudgetCmd(ChatState& st, const std::string& args) {
  std::ostream& o = st.env.err;
  if (args.empty()) {
    o << "budget per turn: " << BudgetLine(st.session->budget()) << "\n"
      << "  /budget tool_calls|tokens|model_calls N sets one for this session's turns\n";
    return;
  }
  size_t sp = args.find_first_of(" \t");
  const std::string name = args.substr(0, sp);
  const std::string number =
      sp == std::string::npos ? "" : std::string(Trim(std::string_view(args).substr(sp)));
  bool known = false;
  for (const BudgetName& n : kBudgetNames) known = known || n.name == name;
  int64_t value = 0;
  bool numeric = !number.empty() && number.size() <= 12 &&
                 number.find_first_not_of("0123456789") == std::string::npos;
  if (numeric) value = std::stoll(number);
  if (!known || !numeric || value <= 0) {
    o << "usage: /budget [tool_calls|tokens|model_calls N]   e.g. /budget tool_calls 40\n";
    return;
  }
  if (Status s = SetBudget(st, name, value, "/budget"); !s.ok()) {
    o << "agentloop: " << s.message() << "\n";
    return;
  }
  o << "budget per turn: " << BudgetLine(st.session->budget()) << "\n";
}

void CostCmd(ChatState& st, const std::string& args) {
  (void)args;
  const TurnCounters t = st.session->totals();
  st.env.err << GroupDigits(t.tokens) << " tokens (in " << GroupDigits(t.usage.input_tokens)
             << ", out " << GroupDigits(t.usage.output_tokens) << ", cached "
             << GroupDigits(t.usage.cache_read_tokens) << ") in " << t.model_calls
             << " model calls";
  if (std::optional<double> cost = EstimateCostUsd(st.Model(), t.usage)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", *cost);
    st.env.err << " · $" << buf << " (list prices, an estimate)\n";
  } else {
    st.env.err << " · no price known for " << st.Model() << "\n";
  }
}

void ExitCmd(ChatState& st, const std::string& args) {
  (void)args;
  st.exit = true;
}

void CompactCmd(ChatState& st, const std::string& args) {
  Result<TurnResult> r =
      RunBlocking(*st.session, op::Compact{args}, SessionCallbacks{}, std::stop_token());
  if (!r.ok()) {
    st.env.err << "agentloop: " << r.error().message() << "\n";
    return;
  }
  Session::ContextUsage ctx = st.session->context();
  st.env.err << r->reason << "; context " << GroupDigits(ctx.tokens) << " / "
             << GroupDigits(ctx.window) << " tokens\n";
}

void TodoLoopCmd(ChatState& st, const std::string& args) {
  std::string out = st.session->TodoLoopCommand(args.empty() ? "status" : args);
  st.env.err << out;
  if (!out.empty() && out.back() != '\n') st.env.err << "\n";
}

const std::vector<SlashCommand>& SlashCommands() {
  static const std::vector<SlashCommand> kSlashCommands = {
      {"help", "", "this list", Help},
      {"status", "", "budgets used, tokens, session", Status_},
      {"session", "", "the session id and how to resume it", SessionCmd},
      {"model", "[NAME]", "show or change the model for the next turns", ModelCmd},
      {"diff", "", "the session's changes to files (write and edit), as diffs", DiffCmd},
      {"undo", "", "revert the newest file change agentloop made (write, edit)", UndoCmd},
      {"cost", "", "tokens and estimated cost of this chat's turns", CostCmd},
      {"budget", "[tool_calls|tokens|model_calls N]", "the budgets per turn; set one", BudgetCmd},
      {"permissions", "[allow|ask|deny RULE]", "the session's rules; add one", PermissionsCmd},
      {"mcp", "", "the session's MCP servers: state, version, tools",
       [](ChatState& st, const std::string&) {
         st.env.err << FormatMcpServers(st.session->mcp_servers());
       }},
      {"clear", "", "start a new session", ClearCmd},
      {"todoloop", "status|pause|resume|reset", "the todo continuation loop", TodoLoopCmd},
      {"compact", "[FOCUS]", "summarise older history to free context", CompactCmd},
      {"exit", "", "leave (also /quit, Ctrl-D)", ExitCmd},
      {"quit", "", "", ExitCmd},
  };
  return kSlashCommands;
}

void Help(ChatState& st, const std::string& args) {
  (void)args;
  auto left = [](const SlashCommand& c) {
    return "/" + std::string(c.name) + (c.args.empty() ? "" : " " + std::string(c.args));
  };
  size_t width = 0;
  for (const SlashCommand& c : SlashCommands()) width = std::max(width, left(c).size());
  for (const SlashCommand& c : SlashCommands()) {
    if (c.help.empty()) continue;
    const std::string l = left(c);
    st.env.err << "  " << l << std::string(width + 2 - l.size(), ' ') << c.help << "\n";
  }
  st.env.err << "  end a line with \\ to continue it; \"\"\" opens and closes a multi-line "
                "block\n  Ctrl-C interrupts the running turn; a second Ctrl-C exits\n";
}

void RunSlash(ChatState& st, const std::string& text) {
  std::string body = text.substr(1);
  size_t sp = body.find_first_of(" \t");
  std::string name = body.substr(0, sp);
  std::string args = sp == std::string::npos ? "" : body.substr(sp + 1);
  while (!args.empty() && (args.back() == ' ' || args.back() == '\t')) args.pop_back();
  size_t lead = args.find_first_not_of(" \t");
  args = lead == std::string::npos ? "" : args.substr(lead);
  for (const SlashCommand& c : SlashCommands()) {
    if (c.name == name) {
      c.run(st, args);
      return;
    }
  }
  st.env.err << "unknown command /" << name << " (try /help)\n";
}

SessionCallbacks TurnCallbacks(ChatState& st) {
  SessionCallbacks cb;
  cb.observer = &st.printer;
  cb.stream = &st.printer;
  if (st.settings.session.interactive) cb.console_approver = &st.console;
  return cb;
}

// The answer the console approver gives when its input ended, it was
// interrupted, or the person cancelled the prompt (Ctrl-C, Esc) before
// answering: nothing was decided.
bool Unanswered(const ApprovalDecision& d, const std::stop_token& stop) {
  return d.kind == ApprovalDecision::Kind::kDeny &&
         (stop.stop_requested() || d.reason == permissions::kConsoleInputClosed ||
          d.reason == permissions::kConsoleCancelled);
}

// Asks the person about one outstanding item with the console's prompt
// (y/a/n/e for an approval, the options for a question) and records the
// answer with Engine::Submit (op::Decide), which only records it: this chat holds the
// session and continues the turn itself. A refused edit asks again.
// Returns false when nothing was decided (no answer, or an error said).
bool AnswerItem(ChatState& st, const PendingItem& item, const ToolRegistry& tools,
                const std::stop_token& stop, bool* denied) {
  ApprovalRequest req;
  req.session_id = st.session->id();
  req.kind = item.kind;
  req.pending_id = item.id;
  req.call = ToolCall{item.tool_use_id, item.tool, item.arguments};
  if (const Tool* t = tools.Find(item.tool)) {
    req.spec = t->spec();
  } else {
    req.spec = ToolSpec{item.tool, "", Json::object(), true, false};
  }
  req.reason = item.reason;
  while (true) {
    ApprovalDecision d = st.console.Decide(req, stop);
    if (Unanswered(d, stop)) return false;
    Resolution res;
    res.by = "cli";
    res.continue_turn = false;
    if (item.kind == PendingKind::kQuestion) {
      res.kind = Resolution::Kind::kAnswer;
      res.answer = d.answer;
    } else if (d.kind == ApprovalDecision::Kind::kAllow) {
      res.kind = Resolution::Kind::kApprove;
      res.edited_arguments = d.edited_input;
      res.remember_for_session = d.remember_for_session;  // `a`
    } else {
      res.kind = Resolution::Kind::kDeny;
      res.reason = d.reason;
      *denied = true;
    }
    Result<ResolveReport> report =
        st.engine->Submit(op::Decide{item.id, res}, st.settings.session, SessionCallbacks{}, stop);
    if (!report.ok()) {
      st.env.err << "agentloop: " << report.error().message() << "\n";
      if (report.error().code() == Code::kInvalidArgument && res.edited_arguments) {
        *denied = false;
        continue;  // the edit was refused; the item still waits
      }
      return false;
    }
    if (report->already_resolved) {
      st.env.err << "pending item " << item.id << " was already resolved elsewhere\n";
    }
    return true;
  }
}

// A paused session: asks each outstanding item of its batch right here, then
// continues the turn in place (op::Retry claims the decided batch),
// again while the continued turn pauses. Returns false when the person left
// an item unanswered (end of input, Ctrl-C): it stays pending for `agentloop
// approve|deny|answer` or the next chat.
bool AnswerPaused(ChatState& st) {
  Result<engine::WiredTools> tools =
      engine::WireTools(st.session->options(), engine::MakeWiringContext(st.env.ctx.env));
  if (!tools.ok()) {
    st.env.err << "agentloop: " << tools.error().message() << "\n";
    return false;
  }
  while (st.session->open_checkpoint()) {
    Result<std::vector<PendingRecord>> pending = st.engine->ListPending(st.session->id());
    if (!pending.ok()) {
      st.env.err << "agentloop: " << pending.error().message() << "\n";
      return false;
    }
    std::stop_token stop = Interrupts::Arm();
    bool denied = false;
    for (const PendingRecord& rec : *pending) {
      if (!AnswerItem(st, rec.item, tools->registry, stop, &denied)) {
        Interrupts::Disarm();
        st.env.err << "\nleft pending; answer it here next time or with:\n"
                   << PendingInstructions({rec.item});
        return false;
      }
      if (denied) break;  // a denial decides the whole batch
    }
    st.printer.BeginTurn();
    Result<TurnResult> r = RunBlocking(*st.session, op::Retry{}, TurnCallbacks(st), stop);
    Interrupts::Disarm();
    if (!r.ok()) {
      st.printer.FinishWithError(r.error());
      return false;
    }
    st.printer.Finish(st.session->id(), *r, st.Model());
  }
  return true;
}

// A turn that ran out of its tool-call or token budget while a person is at
// the terminal: asks whether to go on with that budget raised by its size
// when the chat opened. Yes raises it (the person's decision, recorded in
// the `settings` event) and continues the same turn (op::Retry, its
// counters carried), asking again if it runs out again; anything else
// leaves the turn as it ended.
void OfferMoreBudget(ChatState& st, TurnResult r) {
  while (r.stop == StopReason::kBudgetExhausted && st.settings.session.interactive &&
         st.reader != nullptr && st.first_budget && !st.exit) {
    std::string_view name;
    if (r.reason.starts_with("tool call budget")) {
      name = "tool_calls";
    } else if (r.reason.starts_with("token budget")) {
      name = "tokens";
    } else {
      return;
    }
    const int64_t limit = BudgetValue(st.session->budget(), name);
    const int64_t step = BudgetValue(*st.first_budget, name);
    const std::string_view unit = name == "tool_calls" ? "tool call" : "token";
    ReadResult answer = st.reader->Read("budget reached (" + Counted(limit, unit) +
                                        "): continue with " + GroupDigits(step) + " more? [y/N] ");
    if (answer.status != ReadStatus::kLine) {
      st.env.err << "\n";
      return;
    }
    const std::string_view said = Trim(answer.line);
    if (said != "y" && said != "Y" && said != "yes") return;
    if (Status s = SetBudget(st, name, limit + step, "the budget question"); !s.ok()) {
      st.env.err << "agentloop: " << s.message() << "\n";
      return;
    }
    if (!st.session->Preview(op::Retry{}).ok()) {
      st.env.err << "budget per turn: " << BudgetLine(st.session->budget())
                 << "; the turn has nothing left to answer: send a message to go on\n";
      return;
    }
    st.printer.BeginTurn();
    std::stop_token stop = Interrupts::Arm();
    Result<TurnResult> next = RunBlocking(*st.session, op::Retry{}, TurnCallbacks(st), stop);
    Interrupts::Disarm();
    if (!next.ok()) {
      st.printer.FinishWithError(next.error());
      return;
    }
    st.printer.Finish(st.session->id(), *next, st.Model());
    if (st.session->open_checkpoint()) {
      AnswerPaused(st);
      return;
    }
    r = std::move(*next);
  }
}

void RunChatTurn(ChatState& st, const std::string& prompt) {
  if (st.session->open_checkpoint()) {
    st.env.err << "the session is paused; answer first:\n";
    if (!AnswerPaused(st)) return;
  }
  std::string text;
  for (const std::string& note : st.notes) text += note + "\n";
  text += text.empty() ? prompt : "\n" + prompt;
  st.printer.BeginTurn();
  std::stop_token stop = Interrupts::Arm();
  Result<TurnResult> r = RunBlocking(*st.session, op::UserInput{text}, TurnCallbacks(st), stop);
  if (r.ok()) st.notes.clear();
  Interrupts::Disarm();
  if (!r.ok()) {
    st.printer.FinishWithError(r.error());
    return;
  }
  st.printer.Finish(st.session->id(), *r, st.Model());
  if (st.session->open_checkpoint()) {
    AnswerPaused(st);
    return;
  }
  OfferMoreBudget(st, std::move(*r));
}

std::string HistoryFile(const CliContext& ctx) {
  Result<std::filesystem::path> dir = DefaultDataDir(ctx.env);
  if (!dir.ok()) return "";
  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  return (*dir / "chat_history").string();
}

}  // namespace

int RunChat(const CommandEnv& e, CliSettings settings) {
  // A new session's connection opens while the user types the first prompt.
  const bool fresh = settings.session.session_id.empty() && !settings.session.continue_latest &&
                     settings.provider_configured;
  Result<std::unique_ptr<Engine>> engine = MakeEngine(e.ctx, settings, /*preconnect=*/fresh);
  if (!engine.ok()) {
    e.err << "agentloop: " << engine.error().message() << "\n";
    return ExitCodeFor(engine.error());
  }
  if (!settings.session.session_id.empty()) {
    FillFromStoredSession(**engine, settings.session.session_id, settings, e.args);
  } else if (settings.session.continue_latest) {
    Result<std::string> newest = NewestToContinue((*engine)->store(), settings.workspace);
    if (!newest.ok()) {
      e.err << "agentloop: " << newest.error().message() << "\n";
      return ExitCodeFor(newest.error());
    }
    FillFromStoredSession(**engine, *newest, settings, e.args);
    settings.session.session_id = *newest;
    settings.session.continue_latest = false;
  }
  if (!settings.provider_configured) {
    e.err << HowToConfigureProvider();
    return kExitUsage;
  }
  ChatState st(e, std::move(settings), std::move(*engine));
  if (Status s = st.Open(); !s.ok()) {
    e.err << "agentloop: " << s.message() << "\n";
    return ExitCodeFor(s);
  }
  std::unique_ptr<LineReader> reader;
  if (e.ctx.stdin_tty) {
    reader = std::make_unique<EditLineReader>(HistoryFile(e.ctx));
  } else {
    reader = std::make_unique<StreamLineReader>(e.in);
  }
  st.reader = reader.get();
  if (!e.args.quiet) {
    e.err << "agentloop chat · session " << st.session->id() << " · " << st.Model() << " · "
          << st.settings.workspace.string() << "\n/help for commands, /exit to leave\n";
    // A stored session: the conversation so far (its newest messages).
    if (!st.session->history().empty()) {
      e.err << "\n"
            << RenderConversation(st.session->history(), st.session->id(),
                                  StyleFor(e.args, e.ctx).color)
            << "\n";
    }
  }
  if (st.session->open_checkpoint()) AnswerPaused(st);
  // `agentloop chat PROMPT` / `agentloop PROMPT`: the first turn's prompt.
  if (!e.args.positionals.empty() && !st.exit) {
    std::string first;
    for (const std::string& w : e.args.positionals) first += (first.empty() ? "" : " ") + w;
    RunChatTurn(st, first);
  }
  while (!st.exit) {
    ReadResult r = ReadMessage(*reader, e.err);
    if (r.status == ReadStatus::kEof) break;
    if (r.status == ReadStatus::kInterrupted) {
      if (Interrupts::Count() >= 2) break;
      e.err << "^C (Ctrl-C again or /exit to leave)\n";
      continue;
    }
    std::string text = r.line;
    size_t first = text.find_first_not_of(" \t\n");
    if (first == std::string::npos) continue;
    if (text[first] == '/') {
      RunSlash(st, text.substr(first));
      continue;
    }
    RunChatTurn(st, text);
  }
  if (!e.args.quiet && e.ctx.stdin_tty) e.err << "\n";
  return kExitOk;
}

}  // namespace agentloop::cli
