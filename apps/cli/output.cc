#include "output.h"

#include <cstdio>
#include <ostream>
#include <string>

#include "agentloop/event_data.h"

#include "base/strings.h"
#include "permissions/approvers.h"
#include "pricing.h"
#include "protocol/codec.h"
#include "todo/task_list.h"

namespace agentloop::cli {
namespace {

constexpr std::string_view kRed = "31";
constexpr std::string_view kGreen = "32";
constexpr std::string_view kYellow = "33";
constexpr std::string_view kCyan = "36";
constexpr std::string_view kDim = "2";
constexpr std::string_view kBold = "1";

// Cuts `s` to at most `max` bytes on a UTF-8 boundary, adding "…".
std::string Cut(std::string s, size_t max) {
  if (s.size() <= max) return s;
  s.resize(TruncateUtf8(s, max).size());
  return s + "…";
}

// First line, whitespace runs collapsed.
std::string OneLine(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string StringArg(const Json& input, const char* key) {
  if (!input.is_object()) return "";
  auto it = input.find(key);
  if (it == input.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::string FormatSeconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace

int ExitCodeFor(StopReason stop) {
  switch (stop) {
    case StopReason::kCompleted:
      return kExitOk;
    case StopReason::kFailed:
      return kExitFailed;
    case StopReason::kBudgetExhausted:
    case StopReason::kMaxTurns:
      return kExitBudget;
    case StopReason::kDenied:
    case StopReason::kToolRefused:
    case StopReason::kRefused:
      return kExitDenied;
    case StopReason::kPendingApproval:
    case StopReason::kPendingQuestion:
      return kExitPending;
    case StopReason::kAborted:
      return kExitInterrupted;
  }
  return kExitFailed;
}

std::string Counted(int64_t n, std::string_view noun) {
  return GroupDigits(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk:
      return kExitOk;
    case Code::kInvalidArgument:
    case Code::kNotFound:
      return kExitUsage;
    case Code::kCancelled:
      return kExitInterrupted;
    default:
      return kExitFailed;
  }
}

std::string GroupDigits(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

Json PendingItemJson(const PendingItem& item) {
  return Json{{"id", item.id},
              {"kind", std::string(PendingKindName(item.kind))},
              {"tool", item.tool},
              {"arguments", item.arguments.is_null() ? Json::object() : item.arguments},
              {"reason", item.reason},
              {"tool_use_id", item.tool_use_id},
              {"path", item.path}};
}

Json TurnResultJson(const std::string& session_id, const TurnResult& result,
                    const std::optional<TodoLoopInfo>& todo_loop,
                    std::optional<std::chrono::milliseconds> duration, const std::string& model) {
  Json j = Json::object();
  j["session_id"] = session_id;
  j["status"] = std::string(StopReasonName(result.stop));
  j["reason"] = result.reason;
  j["final_text"] = result.final_text;
  j["truncated"] = result.truncated;
  j["tool_calls"] = result.counters.tool_calls;
  j["tokens"] = result.counters.tokens;
  j["turns"] = result.counters.model_calls;
  j["usage"] = ToJson(result.counters.usage);
  Json pending = Json::array();
  for (const PendingItem& p : result.pending) pending.push_back(PendingItemJson(p));
  j["pending"] = std::move(pending);
  if (todo_loop) {
    j["todo_loop"] = Json{{"rounds", todo_loop->rounds},   {"max_rounds", todo_loop->max_rounds},
                          {"strikes", todo_loop->strikes}, {"max_strikes", todo_loop->max_strikes},
                          {"reason", todo_loop->reason},   {"continued", todo_loop->continued},
                          {"open", todo_loop->open}};
  }
  if (duration) j["duration_ms"] = duration->count();
  if (!model.empty()) {
    j["model"] = model;
    if (std::optional<double> cost = EstimateCostUsd(model, result.counters.usage)) {
      j["cost_usd"] = *cost;
    }
  }
  j["exit_code"] = ExitCodeFor(result.stop);
  return j;
}

std::string PendingInstructions(const std::vector<PendingItem>& items) {
  std::string out;
  for (const PendingItem& p : items) {
    // A subagent's item says which agent asks.
    const std::string who = p.path.empty() ? "" : " (" + p.path + ")";
    if (p.kind == PendingKind::kSubagent) {
      out += "waiting for subagent session " + p.child_session_id + ": " + p.reason + "\n";
      out += "  agentloop pending   (lists its items)\n";
      continue;
    }
    if (p.kind == PendingKind::kQuestion) {
      out += "waiting for an answer" + who + ": " + p.reason + "\n";
      if (!permissions::QuestionOptions(p.arguments).empty()) {
        out += "  agentloop answer " + p.id + " N   (option N, or any text)\n";
      } else {
        out += "  agentloop answer " + p.id + " \"YOUR ANSWER\"\n";
      }
    } else {
      out += "waiting for approval" + who + ": " + DescribeToolCall(p.tool, p.arguments);
      if (!p.reason.empty()) out += "  (" + p.reason + ")";
      out += "\n";
      out += "  agentloop approve " + p.id + "   [--args JSON]\n";
      out += "  agentloop deny " + p.id + "      [--reason TEXT]\n";
    }
  }
  return out;
}

std::string DescribeToolCall(const std::string& tool, const Json& input, size_t max_chars) {
  std::string detail;
  if (std::string c = StringArg(input, "command"); !c.empty()) {
    detail = c;
  } else if (std::string p = StringArg(input, "file_path"); !p.empty()) {
    detail = p;
  } else if (std::string pat = StringArg(input, "pattern"); !pat.empty()) {
    detail = pat;
    if (std::string path = StringArg(input, "path"); !path.empty()) detail += " in " + path;
  } else if (std::string path = StringArg(input, "path"); !path.empty()) {
    detail = path;
  } else if (std::string q = StringArg(input, "question"); !q.empty()) {
    detail = q;
  } else if (std::string a = StringArg(input, "action"); !a.empty()) {
    detail = a;
    if (std::string s = StringArg(input, "subject"); !s.empty()) detail += " " + s;
  } else if (input.is_object() && !input.empty()) {
    detail = DumpJson(input);
  }
  detail = Cut(OneLine(detail), max_chars);
  return detail.empty() ? tool : tool + "  " + detail;
}

std::string RenderDiff(std::string_view diff, bool color, std::string_view indent,
                       size_t max_lines) {
  std::string out;
  size_t shown = 0, total = 0;
  for (std::string_view line : Split(diff, '\n')) {
    if (line.empty()) continue;
    ++total;
    if (shown >= max_lines) continue;
    ++shown;
    std::string_view code;
    if (line.starts_with("+++") || line.starts_with("---")) {
      code = kBold;
    } else if (line.starts_with("@@")) {
      code = kCyan;
    } else if (line.starts_with("+")) {
      code = kGreen;
    } else if (line.starts_with("-")) {
      code = kRed;
    }
    out += indent;
    if (color && !code.empty()) {
      out += "\033[" + std::string(code) + "m" + std::string(line) + "\033[0m";
    } else {
      out += line;
    }
    out += "\n";
  }
  if (total > shown) {
    out += std::string(indent) + "... " + std::to_string(total - shown) + " more diff " +
           (total - shown == 1 ? "line" : "lines") + "\n";
  }
  return out;
}

std::string RenderConversation(std::span<const Message> messages, const std::string& session_id,
                               bool color, size_t max_messages, size_t max_lines) {
  auto paint = [&](std::string_view c, const std::string& s) {
    return color ? "\033[" + std::string(c) + "m" + s + "\033[0m" : s;
  };
  std::string out;
  const size_t from = messages.size() > max_messages ? messages.size() - max_messages : 0;
  if (from > 0) {
    out += paint(kDim, "… " + std::to_string(from) + " earlier message" + (from == 1 ? "" : "s") +
                           " (agentloop sessions show " + session_id + ")") +
           "\n";
  }
  for (size_t i = from; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (!m.tag.empty()) {
      // A summary or notice the engine added: one line says it is there.
      std::string first;
      for (const ContentBlock& b : m.content) {
        if (b.type == BlockType::kText && !b.text.empty()) {
          first = OneLine(todo::SanitizeTerminalText(b.text));
          break;
        }
      }
      out += paint(kDim, "[" + m.tag + "] " + Cut(first, 100)) + "\n";
      continue;
    }
    for (const ContentBlock& b : m.content) {
      switch (b.type) {
        case BlockType::kText: {
          if (Trim(b.text).empty()) break;
          // Model-written text: each line's control sequences are neutralised.
          std::vector<std::string_view> lines = Split(Trim(b.text), '\n');
          const bool user = m.role == Role::kUser;
          out += user ? paint(kBold, "› ") : std::string("  ");
          for (size_t l = 0; l < lines.size() && l < max_lines; ++l) {
            if (l > 0) out += "  ";
            const std::string line = todo::SanitizeTerminalText(lines[l]);
            out += user ? paint(kBold, line) : line;
            out += "\n";
          }
          if (lines.size() > max_lines) {
            out += paint(kDim, "  … " + Counted(static_cast<int64_t>(lines.size() - max_lines),
                                                "more line")) +
                   "\n";
          }
          break;
        }
        case BlockType::kToolUse:
          out += paint(kCyan, "  → ") + DescribeToolCall(b.name, b.input) + "\n";
          break;
        case BlockType::kToolResult:
          if (b.is_error) {
            std::string first = OneLine(todo::SanitizeTerminalText(b.text));
            out += "    " + paint(kRed, "✗") + " " + paint(kDim, Cut(first, 120)) + "\n";
          }
          break;
        default:
          break;
      }
    }
  }
  return out;
}

std::string RenderChecklist(const Json& tasks, bool color) {
  std::string out;
  auto paint = [&](std::string_view code, const std::string& s) {
    return color ? "\033[" + std::string(code) + "m" + s + "\033[0m" : s;
  };
  for (const Json& t : tasks) {
    if (!t.is_object()) continue;
    std::string status = t.value("status", std::string());
    // Model-written text: control sequences are neutralised before printing.
    std::string subject = OneLine(todo::SanitizeTerminalText(t.value("subject", std::string())));
    if (status == "deleted") continue;
    if (status == "completed") {
      out += "  " + paint(kGreen, "☑") + " " + paint(kDim, subject) + "\n";
    } else if (status == "in_progress") {
      std::string active =
          OneLine(todo::SanitizeTerminalText(t.value("activeForm", std::string())));
      out += "  " + paint(kYellow, "◐") + " " + paint(kBold, subject) +
             (active.empty() ? "" : paint(kDim, "  " + active)) + "\n";
    } else {
      out += "  ☐ " + subject + "\n";
    }
  }
  return out.empty() ? "" : "todo:\n" + out;
}

Json ErrorJson(const Status& status) {
  return Json{
      {"error", {{"code", std::string(CodeName(status.code()))}, {"message", status.message()}}},
      {"exit_code", ExitCodeFor(status)}};
}

TurnPrinter::TurnPrinter(OutputFormat format, std::ostream& out, std::ostream& err, Style style)
    : format_(format), out_(out), err_(err), style_(style) {
  started_ = std::chrono::steady_clock::now();
}

TurnPrinter::~TurnPrinter() {
  {
    std::lock_guard lock(spin_mu_);
    spin_shutdown_ = true;
  }
  spin_cv_.notify_all();
  if (spin_thread_.joinable()) spin_thread_.join();
}

std::string TurnPrinter::Paint(std::string_view text, std::string_view code) const {
  if (!style_.color) return std::string(text);
  return "\033[" + std::string(code) + "m" + std::string(text) + "\033[0m";
}

void TurnPrinter::BeginTurn() {
  started_ = std::chrono::steady_clock::now();
  streamed_text_ = false;
  at_line_start_ = true;
  todo_loop_.reset();
  changes_ = Json::array();
  unstarted_.clear();
  root_session_.clear();
}

void TurnPrinter::OnChildEvent(const Event& event) {
  if (format_ != OutputFormat::kText || style_.quiet) return;
  constexpr std::string_view kPad = "    ";
  if (event.As<StepBeginData>() != nullptr) {
    StartSpinner("subagent working");
  } else if (event.As<StepEndData>() != nullptr) {
    StopSpinner();  // before the child's prompts, if it asks
  } else if (const auto* begin = event.As<ToolCallBeginData>()) {
    StopSpinner();
    EnsureNewlineOnStdout();
    err_ << kPad << Paint("→ ", kCyan) << DescribeToolCall(begin->tool, begin->input) << "\n"
         << std::flush;
    StartSpinner("subagent running " + begin->tool);
  } else if (const auto* end = event.As<ToolCallEndData>()) {
    StopSpinner();
    std::string summary = OneLine(end->summary);
    if (end->is_error || !summary.empty()) {
      err_ << kPad << "  " << (end->is_error ? Paint("✗", kRed) : Paint("✓", kGreen)) << " "
           << Paint(Cut(summary, 160), kDim) << "\n";
    }
    if (!end->diff.empty()) err_ << RenderDiff(end->diff, style_.color, "        ");
    err_ << std::flush;
  } else if (const auto* decision = event.As<DecisionData>()) {
    if (decision->decision == Decision::kDeny) {
      StopSpinner();
      err_ << kPad << Paint("✗ denied ", kRed) << decision->tool << ": " << decision->reason << "\n"
           << std::flush;
    }
  }
}

void TurnPrinter::StartSpinner(std::string label) {
  if (!style_.spinner || style_.quiet || format_ != OutputFormat::kText) return;
  {
    std::lock_guard lock(spin_mu_);
    if (!spin_active_ || spin_label_ != label) spin_started_ = std::chrono::steady_clock::now();
    spin_label_ = std::move(label);
    spin_active_ = true;
  }
  if (!spin_thread_.joinable()) spin_thread_ = std::thread([this] { SpinnerLoop(); });
  spin_cv_.notify_all();
}

void TurnPrinter::StopSpinner() {
  if (!spin_thread_.joinable()) return;
  std::lock_guard lock(spin_mu_);
  spin_active_ = false;
  if (spin_drawn_) {
    err_ << "\r\033[K" << std::flush;
    spin_drawn_ = false;
  }
}

void TurnPrinter::SpinnerLoop() {
  static constexpr const char* kFrames[] = {"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"};
  size_t frame = 0;
  std::unique_lock lock(spin_mu_);
  while (!spin_shutdown_) {
    if (!spin_active_) {
      spin_cv_.wait(lock, [&] { return spin_shutdown_ || spin_active_; });
      continue;
    }
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - spin_started_);
    err_ << "\r\033[K" << Paint(kFrames[frame++ % 10], kCyan) << " " << spin_label_ << " "
         << Paint(FormatSeconds(elapsed), kDim) << std::flush;
    spin_drawn_ = true;
    spin_cv_.wait_for(lock, std::chrono::milliseconds(80),
                      [&] { return spin_shutdown_ || !spin_active_; });
  }
}

void TurnPrinter::EnsureNewlineOnStdout() {
  if (!at_line_start_) {
    out_ << "\n" << std::flush;
    at_line_start_ = true;
  }
}

void TurnPrinter::EndThinking() {
  if (!in_thinking_) return;
  in_thinking_ = false;
  if (style_.show_thinking) {
    err_ << "\n" << std::flush;
  } else {
    err_ << Paint("✻ thought for " + std::to_string(thinking_words_) + " word" +
                      (thinking_words_ == 1 ? "" : "s") + " (--show-thinking shows it)",
                  kDim)
         << "\n"
         << std::flush;
  }
  thinking_words_ = 0;
  thinking_at_space_ = true;
}

void TurnPrinter::OnTextDelta(std::string_view text) {
  if (format_ != OutputFormat::kText || text.empty()) return;
  StopSpinner();
  if (!style_.quiet) EndThinking();
  out_ << text << std::flush;
  streamed_text_ = true;
  at_line_start_ = text.back() == '\n';
}

void TurnPrinter::OnThinkingDelta(std::string_view text) {
  if (format_ != OutputFormat::kText || style_.quiet || text.empty()) return;
  if (!in_thinking_) {
    StopSpinner();
    EnsureNewlineOnStdout();
    in_thinking_ = true;
  }
  for (char c : text) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && thinking_at_space_) ++thinking_words_;
    thinking_at_space_ = space;
  }
  if (style_.show_thinking) {
    err_ << Paint(text, kDim) << std::flush;
  } else {
    StartSpinner("thinking");
  }
}

Status TurnPrinter::OnEvent(const Event& event) {
  // A subagent's child reports to the same printer while its caller's call
  // runs: its tool calls are shown under that call, nothing else of it.
  if (root_session_.empty() && event.type == EventType::kTurnBegin) {
    root_session_ = event.session_id;
  }
  if (!root_session_.empty() && event.session_id != root_session_) {
    OnChildEvent(event);
    return Status::Ok();
  }
  const ContinuationData* continuation = event.As<ContinuationData>();
  if (continuation && continuation->by == "todo-loop" && continuation->details.is_object()) {
    const Json& d = continuation->details;
    TodoLoopInfo info;
    info.rounds = d.value("round", 0);
    info.max_rounds = d.value("max_rounds", 0);
    info.strikes = d.value("strikes", 0);
    info.max_strikes = d.value("max_strikes", 0);
    info.reason = continuation->reason;
    info.continued = continuation->continue_turn;
    info.open = d.value("open", 0);
    todo_loop_ = info;
  }
  if (format_ == OutputFormat::kStreamJson) {
    out_ << DumpJson(event.ToJson()) << "\n" << std::flush;
    return Status::Ok();
  }
  if (const auto* end = event.As<ToolCallEndData>();
      format_ == OutputFormat::kJson && end != nullptr && !end->diff.empty()) {
    changes_.push_back(Json{{"id", end->id}, {"tool", end->tool}, {"diff", end->diff}});
  }
  if (format_ != OutputFormat::kText) return Status::Ok();
  if (style_.quiet) {
    // stdout gets the same line breaks as without -q: the ones that keep
    // the assistant's text apart from the lines printed on stderr.
    switch (event.type) {
      case EventType::kToolCallBegin:
      case EventType::kNotice:
      case EventType::kHookError:
      case EventType::kRetry:
        EnsureNewlineOnStdout();
        break;
      case EventType::kDecision:
        if (event.As<DecisionData>()->decision == Decision::kDeny) EnsureNewlineOnStdout();
        break;
      case EventType::kContinuation:
        if (continuation && continuation->continue_turn) EnsureNewlineOnStdout();
        break;
      default:
        break;
    }
    return Status::Ok();
  }

  if (event.type != EventType::kThinkingDelta && event.type != EventType::kTextDelta &&
      event.type != EventType::kStepBegin) {
    EndThinking();
  }
  std::visit([this](const auto& d) { Print(d); }, event.data);
  return Status::Ok();
}

void TurnPrinter::Print(const StepBeginData&) { StartSpinner("working"); }

void TurnPrinter::Print(const StepEndData&) { StopSpinner(); }

void TurnPrinter::Print(const ToolCallBeginData& d) {
  StopSpinner();
  EnsureNewlineOnStdout();
  std::string what = DescribeToolCall(d.tool, d.input);
  err_ << Paint("→ ", kCyan) << what << "\n" << std::flush;
  calls_[d.id] = DescribeToolCall(d.tool, d.input, 60);
  unstarted_.erase(d.id);
  last_line_call_ = d.id;
  StartSpinner("running " + d.tool);
}

void TurnPrinter::Print(const ToolCallEndData& d) {
  StopSpinner();
  std::string summary = OneLine(d.summary);
  std::string note;
  if (d.cancelled) {
    note = "cancelled";
  } else if (d.exit_code) {
    note = "exit code " + std::to_string(*d.exit_code);
  }
  // A result that does not follow its own call's line (calls of a
  // parallel lane print their lines first) names the call.
  std::string owner;
  if (d.id != last_line_call_) {
    if (auto it = calls_.find(d.id); it != calls_.end()) owner = it->second + ": ";
  }
  last_line_call_.clear();
  if (d.is_error || !summary.empty() || !note.empty()) {
    err_ << "  " << (d.is_error ? Paint("✗", kRed) : Paint("✓", kGreen)) << " " << owner;
    if (!note.empty())
      err_ << Paint(note, d.is_error ? kRed : kDim) << (summary.empty() ? "" : " · ");
    err_ << Paint(Cut(summary, 160), kDim) << "\n" << std::flush;
  }
  if (!d.diff.empty()) err_ << RenderDiff(d.diff, style_.color) << std::flush;
}

void TurnPrinter::Print(const DecisionData& d) {
  if (d.decision != Decision::kDeny) return;
  unstarted_.erase(d.tool_use_id);  // said here
  StopSpinner();
  EnsureNewlineOnStdout();
  err_ << Paint("✗ denied ", kRed) << d.tool << ": " << d.reason << "\n" << std::flush;
}

void TurnPrinter::Print(const NoticeData& d) {
  StopSpinner();
  EnsureNewlineOnStdout();
  err_ << Paint("• ", d.level == "warning" ? kYellow : kDim) << d.text << "\n" << std::flush;
}

void TurnPrinter::Print(const ContinuationData& d) {
  // Only a continuation is news; a stop is reported by the loop's notice.
  if (!d.continue_turn) return;
  StopSpinner();
  EnsureNewlineOnStdout();
  if (d.by == "todo-loop" && todo_loop_) {
    err_ << Paint("↻ todo loop: round " + std::to_string(todo_loop_->rounds) + "/" +
                      std::to_string(todo_loop_->max_rounds),
                  kCyan);
    if (todo_loop_->open > 0) err_ << " (" << todo_loop_->open << " open)";
  } else {
    err_ << Paint("↻ " + d.by + ": " + (d.reason.empty() ? "another round" : d.reason), kCyan);
  }
  err_ << "\n" << std::flush;
}

void TurnPrinter::Print(const MessageData& d) {
  // A todo call's result carries the whole list (details.tasks): draw it
  // as a checklist when it differs from the one drawn last.
  for (const ContentBlock& block : d.message.content) {
    if (block.type == BlockType::kToolUse) {
      unstarted_[block.id] = DescribeToolCall(block.name, block.input);
      continue;
    }
    if (block.type != BlockType::kToolResult) continue;
    // A call answered without running (its arguments refused, a batch
    // cancelled) is shown like any other result.
    if (auto it = unstarted_.find(block.tool_use_id); it != unstarted_.end()) {
      StopSpinner();
      EnsureNewlineOnStdout();
      err_ << Paint("→ ", kCyan) << it->second << "\n  "
           << (block.is_error ? Paint("✗", kRed) : Paint("✓", kGreen)) << " "
           << Paint(Cut(OneLine(block.text), 160), kDim) << "\n"
           << std::flush;
      unstarted_.erase(it);
      last_line_call_.clear();
    }
    if (!block.meta.is_object()) continue;
    auto details = block.meta.find("details");
    if (details == block.meta.end() || !details->is_object() || !details->contains("tasks") ||
        !details->contains("nextId") || !(*details)["tasks"].is_array()) {
      continue;
    }
    std::string list = RenderChecklist((*details)["tasks"], style_.color);
    if (list == last_checklist_) continue;
    last_checklist_ = list;
    StopSpinner();
    EnsureNewlineOnStdout();
    err_ << list << std::flush;
  }
}

void TurnPrinter::Print(const RetryData& d) {
  StopSpinner();
  EnsureNewlineOnStdout();
  char delay[32];
  std::snprintf(delay, sizeof delay, "%.1f s", static_cast<double>(d.delay_ms) / 1000.0);
  err_ << Paint("↻ retrying in " + std::string(delay) + " (attempt " + std::to_string(d.attempt) +
                    "/" + std::to_string(d.max_attempts) + "): ",
                kYellow)
       << Cut(OneLine(d.reason), 200) << "\n"
       << std::flush;
  StartSpinner("waiting to retry");
}

void TurnPrinter::Print(const CompactionData&) {
  StopSpinner();
  err_ << Paint("… history compacted", kDim) << "\n" << std::flush;
}

void TurnPrinter::Print(const HookErrorData& d) {
  StopSpinner();
  EnsureNewlineOnStdout();
  err_ << Paint("! hook " + d.hook + " failed: ", kYellow) << d.error << "\n" << std::flush;
}

int TurnPrinter::Finish(const std::string& session_id, const TurnResult& result,
                        const std::string& model) {
  StopSpinner();
  if (format_ == OutputFormat::kText && !style_.quiet) EndThinking();
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started_);
  const int code = ExitCodeFor(result.stop);
  const bool paused =
      result.stop == StopReason::kPendingApproval || result.stop == StopReason::kPendingQuestion;
  switch (format_) {
    case OutputFormat::kJson: {
      Json j = TurnResultJson(session_id, result, todo_loop_, elapsed, model);
      j["changes"] = std::move(changes_);
      changes_ = Json::array();
      out_ << DumpJson(j) << "\n" << std::flush;
    }
      if (paused && !style_.quiet) err_ << PendingInstructions(result.pending) << std::flush;
      return code;
    case OutputFormat::kStreamJson:
      if (paused && !style_.quiet) err_ << PendingInstructions(result.pending) << std::flush;
      return code;
    case OutputFormat::kText:
      break;
  }
  if (!streamed_text_ && result.stop == StopReason::kCompleted && !result.final_text.empty()) {
    out_ << result.final_text;
    at_line_start_ = result.final_text.back() == '\n';
  }
  EnsureNewlineOnStdout();
  if (paused) {
    err_ << Paint("⏸ paused", kYellow) << " (session " << session_id << ")"
         << (style_.asks_pending ? "; asked below\n" : "\n" + PendingInstructions(result.pending))
         << std::flush;
  } else if (const size_t auth = result.reason.find("authentication failed: HTTP 401");
             result.stop == StopReason::kFailed && auth != std::string::npos) {
    // The model API refused the key: said as what it is, with the variable
    // that holds the key, rather than as the status code it maps to.
    err_ << Paint("■ authentication error", kRed) << ": the model API refused the API key"
         << (style_.api_key_env.empty() ? "" : " in " + style_.api_key_env) << " ("
         << result.reason.substr(auth + std::string_view("authentication failed: ").size())
         << ")\n";
    if (!style_.api_key_env.empty()) {
      err_ << "check " << style_.api_key_env
           << " (set, current, and for this provider and base URL)\n";
    }
    err_ << std::flush;
  } else if (result.stop != StopReason::kCompleted) {
    std::string name(StopReasonName(result.stop));
    if (result.reason.rfind(name + ":", 0) == 0) {
      err_ << Paint("■ " + name, kRed) << result.reason.substr(name.size());
    } else {
      err_ << Paint("■ " + name, kRed);
      // "■ aborted", not "■ aborted: aborted".
      if (!result.reason.empty() && result.reason != name) err_ << ": " << result.reason;
    }
    err_ << "\n" << std::flush;
  }
  if (style_.quiet) return code;
  if (result.truncated) {
    err_ << Paint("(the answer was cut off by the output-token limit)", kYellow) << "\n";
  }
  std::string line = std::string(StopReasonName(result.stop)) + " · " +
                     Counted(result.counters.tool_calls, "tool call") + " · " +
                     Counted(result.counters.tokens, "token") + " · " + FormatSeconds(elapsed);
  if (std::optional<double> cost = EstimateCostUsd(model, result.counters.usage)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " · $%.4f", *cost);
    line += buf;
  }
  line += " · session " + session_id;
  err_ << Paint(line, kDim) << "\n" << std::flush;
  return code;
}

int TurnPrinter::FinishWithError(const Status& status) {
  StopSpinner();
  if (format_ == OutputFormat::kText) EnsureNewlineOnStdout();
  if (format_ != OutputFormat::kText) {
    out_ << DumpJson(ErrorJson(status)) << "\n" << std::flush;
  }
  err_ << "agentloop: " << status.message() << "\n" << std::flush;
  return ExitCodeFor(status);
}

}  // namespace agentloop::cli
