// Console, durable, fail-closed and callback approvers.
#include "permissions/approvers.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "agentloop/tool.h"

#include "base/diff.h"
#include "base/strings.h"

namespace agentloop::permissions {
namespace {

constexpr std::string_view kBold = "\x1b[1m";
constexpr std::string_view kReset = "\x1b[0m";

std::string Cut(std::string_view s, size_t max_chars) {
  if (s.size() <= max_chars) return std::string(s);
  std::string_view head = TruncateUtf8(s, max_chars);
  return std::string(head) + "… (" + std::to_string(s.size() - head.size()) + " more bytes)";
}

std::string Indent(std::string_view s, std::string_view pad) {
  std::string out;
  for (char c : s) {
    out.push_back(c);
    if (c == '\n') out.append(pad);
  }
  return out;
}

// The edited arguments of `text` if they are an object the tool accepts;
// otherwise says why on `out`.
std::optional<Json> CheckEdited(const std::string& text, const ToolSpec& spec, std::ostream& out) {
  Result<Json> parsed = ParseJson(text);
  if (!parsed.ok()) {
    out << "invalid JSON: " << parsed.error().message() << "\n";
  } else if (!parsed->is_object()) {
    out << "invalid arguments: expected a JSON object\n";
  } else if (Status s = ValidateAgainstSchema(*parsed, spec.input_schema); !s.ok()) {
    out << "invalid arguments: " << s.message() << "\n";
  } else {
    return std::move(*parsed);
  }
  return std::nullopt;
}

ApprovalDecision Stopped(const std::stop_token& stop) {
  if (stop.stop_requested()) return ApprovalDecision::Deny("cancelled before an answer", "console");
  return ApprovalDecision::Deny(std::string(kConsoleInputClosed), "console");
}

// The denial for a read that gave no line.
ApprovalDecision Unread(const ConsoleRead& r, const std::stop_token& stop) {
  if (r.kind == ConsoleRead::Kind::kCancelled && !stop.stop_requested()) {
    return ApprovalDecision::Deny(std::string(kConsoleCancelled), "console");
  }
  return Stopped(stop);
}

}  // namespace

std::string FormatReplacement(const Json& args, bool color, size_t max_lines) {
  if (!args.is_object()) return "";
  auto old_it = args.find("old_string");
  auto new_it = args.find("new_string");
  if (old_it == args.end() || new_it == args.end() || !old_it->is_string() ||
      !new_it->is_string()) {
    return "";
  }
  Json rest = args;
  rest.erase("old_string");
  rest.erase("new_string");
  std::string out = rest.empty() ? "" : FormatArguments(rest);
  UnifiedDiffOptions o;
  o.context = 1 << 20;  // every line of old_string: it is what must match
  std::string diff =
      UnifiedDiff(old_it->get_ref<const std::string&>(), new_it->get_ref<const std::string&>(),
                  "old_string", "new_string", o);
  out += "  replaces:\n";
  size_t shown = 0, total = 0;
  for (std::string_view line : Split(diff, '\n')) {
    if (line.empty() || line.starts_with("--- ") || line.starts_with("+++ ") ||
        line.starts_with("@@ ") || line.starts_with("\\ ")) {
      continue;
    }
    if (++total > max_lines) continue;
    ++shown;
    std::string text = SanitizeUtf8(line);
    const char* code = line[0] == '+' ? "\x1b[32m" : line[0] == '-' ? "\x1b[31m" : "";
    out += "    ";
    out += color && *code ? std::string(code) + text + std::string(kReset) : text;
    out += "\n";
  }
  if (total > shown) out += "    ... " + std::to_string(total - shown) + " more lines\n";
  return out;
}

std::string FormatArguments(const Json& args, size_t max_chars) {
  std::string out;
  if (!args.is_object()) return "  " + Cut(DumpJson(args), max_chars) + "\n";
  if (args.empty()) return "  (no arguments)\n";
  for (auto it = args.begin(); it != args.end(); ++it) {
    std::string value;
    if (it->is_string()) {
      std::string s = SanitizeUtf8(it->get_ref<const std::string&>());
      value = Indent(Cut(s, max_chars), "    ");
    } else {
      value = Cut(DumpJson(*it), max_chars);
    }
    out += "  " + it.key() + ": " + value + "\n";
  }
  return out;
}

std::vector<std::string> QuestionOptions(const Json& input) {
  std::vector<std::string> options;
  if (input.is_object() && input.contains("options") && input["options"].is_array()) {
    for (const auto& o : input["options"])
      options.push_back(o.is_string() ? o.get<std::string>() : DumpJson(o));
  }
  return options;
}

std::string PickOption(std::string answer, const std::vector<std::string>& options) {
  if (options.empty() || answer.empty() || answer.size() > 4) return answer;
  if (std::find(options.begin(), options.end(), answer) != options.end()) return answer;
  if (!std::all_of(answer.begin(), answer.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return answer;
  }
  size_t n = std::stoul(answer);
  return n >= 1 && n <= options.size() ? options[n - 1] : answer;
}

ConsoleApprover::ConsoleApprover(std::istream& in, std::ostream& out, bool is_terminal,
                                 std::shared_ptr<SessionApprovals> approvals)
    : ConsoleApprover(in, out, is_terminal, std::move(approvals), Options{}) {}

ConsoleApprover::ConsoleApprover(std::istream& in, std::ostream& out, bool is_terminal,
                                 std::shared_ptr<SessionApprovals> approvals, Options options)
    : in_(in),
      out_(out),
      is_terminal_(is_terminal),
      approvals_(std::move(approvals)),
      options_(options) {}

ConsoleRead ConsoleApprover::ReadLine(std::string_view prompt, const std::stop_token& stop) {
  using Kind = ConsoleRead::Kind;
  if (stop.stop_requested()) return {Kind::kEnd, ""};
  if (options_.read_line) {
    out_.flush();
    ConsoleRead r = options_.read_line(out_, prompt, stop);
    if (stop.stop_requested()) return {Kind::kEnd, ""};
    return r;
  }
  out_ << prompt;
  out_.flush();
  std::string line;
  if (!std::getline(in_, line)) return {Kind::kEnd, ""};
  if (stop.stop_requested()) return {Kind::kEnd, ""};
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!is_terminal_) out_ << line << "\n";
  return {Kind::kLine, std::move(line)};
}

ApprovalDecision ConsoleApprover::Decide(const ApprovalRequest& request, std::stop_token stop) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop.stop_requested()) return Stopped(stop);
  if (request.kind == PendingKind::kQuestion) return DecideQuestion(request, stop);
  return DecideApproval(request, stop);
}

ApprovalDecision ConsoleApprover::DecideApproval(const ApprovalRequest& request,
                                                 const std::stop_token& stop) {
  const std::string& tool = request.call.name.empty() ? request.spec.name : request.call.name;
  out_ << "\n"
       << (is_terminal_ ? kBold : "") << "Permission needed: " << tool
       << (is_terminal_ ? kReset : "") << "\n";
  if (!request.reason.empty()) out_ << "reason: " << request.reason << "\n";
  std::string described = options_.describe ? options_.describe(request) : std::string();
  if (!described.empty()) {
    out_ << described;
  } else {
    std::string replacement = FormatReplacement(request.call.input, is_terminal_);
    out_ << "arguments:\n"
         << (replacement.empty() ? FormatArguments(request.call.input, options_.max_value_chars)
                                 : replacement);
  }
  int invalid = 0;
  while (true) {
    ConsoleRead line =
        ReadLine("Allow? [y] once, [a] for this session, [n] deny, [e] edit arguments: ", stop);
    if (line.kind != ConsoleRead::Kind::kLine) return Unread(line, stop);
    std::string answer = ToLower(Trim(line.line));
    if (answer == "y" || answer == "yes") return ApprovalDecision::Allow("console");
    if (answer == "a" || answer == "always") {
      if (approvals_) approvals_->Remember(request.spec, request.call.input);
      ApprovalDecision d = ApprovalDecision::Allow("console");
      d.remember_for_session = true;
      return d;
    }
    if (answer == "n" || answer == "no") {
      ConsoleRead why = ReadLine("Reason (optional, Enter to skip): ", stop);
      if (why.kind != ConsoleRead::Kind::kLine &&
          (stop.stop_requested() || why.kind == ConsoleRead::Kind::kCancelled)) {
        return Unread(why, stop);
      }
      std::string reason(Trim(why.line));
      if (reason.empty()) reason = "denied at the console";
      return ApprovalDecision::Deny(reason, "console");
    }
    if ((answer == "e" || answer == "edit") && options_.edit_text) {
      Result<std::string> text = options_.edit_text(request.call.input.dump(2) + "\n");
      if (!text.ok()) {
        out_ << "cannot edit: " << text.error().message() << "\n";
      } else if (!Trim(*text).empty()) {
        if (std::optional<Json> edited = CheckEdited(*text, request.spec, out_)) {
          ApprovalDecision d = ApprovalDecision::Allow("console");
          if (*edited == request.call.input) return d;  // saved unchanged: allow as asked
          out_ << "edited arguments:\n" << FormatArguments(*edited, options_.max_value_chars);
          d.edited_input = std::move(*edited);
          return d;
        }
      }
      if (++invalid >= options_.max_invalid_answers) {
        return ApprovalDecision::Deny("too many invalid answers at the console", "console");
      }
      continue;
    }
    if (answer == "e" || answer == "edit") {
      out_ << "current arguments: " << DumpJson(request.call.input) << "\n";
      while (true) {
        ConsoleRead text = ReadLine("New arguments as one line of JSON (empty line: back): ", stop);
        if (text.kind != ConsoleRead::Kind::kLine) return Unread(text, stop);
        if (Trim(text.line).empty()) break;
        if (std::optional<Json> edited = CheckEdited(text.line, request.spec, out_)) {
          ApprovalDecision d = ApprovalDecision::Allow("console");
          d.edited_input = std::move(*edited);
          return d;
        }
        if (++invalid >= options_.max_invalid_answers) {
          return ApprovalDecision::Deny("too many invalid answers at the console", "console");
        }
      }
      continue;
    }
    out_ << "Please answer y, a, n or e.\n";
    if (++invalid >= options_.max_invalid_answers) {
      return ApprovalDecision::Deny("too many invalid answers at the console", "console");
    }
  }
}

ApprovalDecision ConsoleApprover::DecideQuestion(const ApprovalRequest& request,
                                                 const std::stop_token& stop) {
  const Json& in = request.call.input;
  std::string question = request.reason;
  if (in.is_object() && in.contains("question") && in["question"].is_string()) {
    question = in["question"].get<std::string>();
  }
  std::vector<std::string> options = QuestionOptions(in);
  out_ << "\n"
       << (is_terminal_ ? kBold : "") << "[ask_user] " << (is_terminal_ ? kReset : "") << question
       << "\n";
  if (!options.empty()) {
    out_ << "options:";
    for (size_t i = 0; i < options.size(); ++i) out_ << "  " << (i + 1) << ") " << options[i];
    out_ << "\n";
  }
  int invalid = 0;
  while (true) {
    ConsoleRead line = ReadLine("> ", stop);
    if (line.kind != ConsoleRead::Kind::kLine) return Unread(line, stop);
    std::string answer(Trim(line.line));
    if (answer.empty()) {
      if (++invalid >= options_.max_invalid_answers) {
        return ApprovalDecision::Deny("no answer given at the console", "console");
      }
      continue;
    }
    ApprovalDecision d = ApprovalDecision::Allow("console");
    d.answer = PickOption(std::move(answer), options);
    return d;
  }
}

ApprovalDecision DurableApprover::Decide(const ApprovalRequest&, std::stop_token stop) {
  if (stop.stop_requested()) return ApprovalDecision::Deny("cancelled", "durable");
  return ApprovalDecision::Defer("durable");
}

FailClosedApprover::FailClosedApprover(std::string hint) : hint_(std::move(hint)) {}

ApprovalDecision FailClosedApprover::Decide(const ApprovalRequest& request, std::stop_token) {
  const std::string& tool = request.call.name.empty() ? request.spec.name : request.call.name;
  std::string what = request.kind == PendingKind::kQuestion ? "the question needs an answer"
                                                            : "tool '" + tool + "' needs approval";
  std::string hint = hint_.empty()
                         ? "configure an approver (run on a terminal, use the durable or webhook "
                           "approver) or add an allow rule"
                         : hint_;
  return ApprovalDecision::Deny(
      "no approver available: " + what + " and nobody can be asked; " + hint, "fail-closed");
}

CallbackApprover::CallbackApprover(Fn fn) : fn_(std::move(fn)) {}

ApprovalDecision CallbackApprover::Decide(const ApprovalRequest& request, std::stop_token stop) {
  if (!fn_)
    return FailClosedApprover("the embedder's approver callback is empty").Decide(request, stop);
  try {
    ApprovalDecision d = fn_(request, stop);
    if (d.by.empty()) d.by = "embedder";
    return d;
  } catch (const std::exception& e) {
    return ApprovalDecision::Deny(std::string("approver callback failed: ") + e.what(), "embedder");
  } catch (...) {
    return ApprovalDecision::Deny("approver callback failed with an unknown exception", "embedder");
  }
}

}  // namespace agentloop::permissions
