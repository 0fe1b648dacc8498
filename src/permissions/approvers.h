// Approvers: who answers an `ask` (or an ask_user question) for the turn.
//
//  - ConsoleApprover: a person at a terminal (or any line-oriented streams).
//  - DurableApprover: nobody is here; answers kDefer so the turn pauses and
//    the engine saves a checkpoint (answered later by `agentloop approve`).
//  - FailClosedApprover: no way to ask; denies with a reason that says so.
//  - CallbackApprover: an embedder's function.
//  - WebhookApprover (webhook.h): POSTs a signed notification, then defers.
//
// Thread-safety: every approver here accepts concurrent Decide calls; the
// console serialises its prompts with a mutex.
#pragma once

#include <functional>
#include <istream>
#include <memory>
#include <mutex>
#include <ostream>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/permission.h"

#include "permissions/policy.h"

namespace agentloop::permissions {

// Renders a call's arguments for a person: one `key: value` line per
// top-level argument, strings shown as text (cut to `max_chars` with a note
// of how much was left out, multi-line strings indented), other values as
// compact JSON (cut likewise). Used by the console and `agentloop pending`.
std::string FormatArguments(const Json& args, size_t max_chars = 400);

// The options of an ask_user call's input, as shown to a person (strings as
// they are, other values as compact JSON); empty when it offers none.
std::vector<std::string> QuestionOptions(const Json& input);

// An answer as a person typed it: a number 1..n picks that option (unless
// the text is itself one of the options); anything else is the answer.
std::string PickOption(std::string answer, const std::vector<std::string>& options);

// The arguments of an edit-like call (string `old_string` and `new_string`)
// for a person: the other arguments as FormatArguments shows them, then the
// replacement as removed and added lines (coloured with `color`, at most
// `max_lines` of them). The strings are fragments, not files: a missing
// final newline is not marked. Empty when `args` is not such a call.
std::string FormatReplacement(const Json& args, bool color, size_t max_lines = 80);

// The reason of the console's denial when its input ended before an answer
// (nothing was decided by a person).
inline constexpr std::string_view kConsoleInputClosed = "no answer: console input closed";
// The reason of the console's denial when the person cancelled the prompt
// (Ctrl-C or Esc at a terminal): nothing was answered, and a durable item
// asked again stays pending.
inline constexpr std::string_view kConsoleCancelled =
    "the user cancelled the approval prompt (Ctrl-C or Esc) without answering";

// One answer line read at the console's prompt (ConsoleApprover::Options::
// read_line).
struct ConsoleRead {
  enum class Kind { kLine, kEnd, kCancelled };
  Kind kind = Kind::kEnd;  // kEnd: end of input, or the stop was requested
  std::string line;        // kLine: without its line end
};

class ConsoleApprover final : public Approver {
 public:
  struct Options {
    size_t max_value_chars = 400;  // long argument values are cut
    int max_invalid_answers = 20;  // then the call is denied
    // Opens the arguments (as indented JSON) in the person's editor and
    // returns the edited text, or an error saying why it could not; unset:
    // `e` reads one line of JSON instead.
    std::function<Result<std::string>(const std::string&)> edit_text;
    // What the call would do, shown in place of its arguments (the CLI
    // shows the change a write or edit would make to the file as a diff);
    // unset, or an empty answer: the arguments are shown.
    std::function<std::string(const ApprovalRequest&)> describe;
    // Shows `prompt` on `out` (the approver's) and reads one answer line (a
    // terminal's key reader, which can tell a cancelled prompt); it must
    // return kEnd soon after `stop` is requested. Unset: the prompt is
    // written to `out` and a line is read from `in`.
    std::function<ConsoleRead(std::ostream& out, std::string_view prompt,
                              const std::stop_token& stop)>
        read_line;
  };

  // `in`/`out` must outlive the approver. `approvals` (may be null) records
  // "allow for this session" answers. `is_terminal`: when false the answers
  // read are echoed to `out`, so a transcript of a scripted session reads
  // like the terminal did.
  ConsoleApprover(std::istream& in, std::ostream& out, bool is_terminal,
                  std::shared_ptr<SessionApprovals> approvals = nullptr);
  ConsoleApprover(std::istream& in, std::ostream& out, bool is_terminal,
                  std::shared_ptr<SessionApprovals> approvals, Options options);

  // Approvals: shows the tool, the reason and the arguments, then reads one
  // of
  //   y  allow once
  //   a  allow for this session (this exact access; recorded in `approvals`
  //      and flagged remember_for_session)
  //   n  deny; then reads an optional reason line
  //   e  edit the arguments: in the editor (Options::edit_text), else as one
  //      line of JSON; the result must be an object that satisfies the
  //      tool's schema; errors re-prompt, an empty line goes back
  // What Options::describe says of the call comes first; without it, an
  // edit-like call's old_string/new_string are shown as the lines they
  // remove and add (FormatReplacement).
  // Questions (kind kQuestion): prints the question and numbered options and
  // reads an answer line (a number picks an option); returns kAllow with
  // `answer`.
  // Blocks on `in` (or Options::read_line). End of input, or `stop`
  // requested before or after a read, gives kDeny; so does a cancelled
  // prompt, with the reason kConsoleCancelled. by = "console".
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override;

 private:
  // Shows `prompt` and reads one line; kEnd at end of input or when
  // stopped.
  ConsoleRead ReadLine(std::string_view prompt, const std::stop_token& stop);
  ApprovalDecision DecideApproval(const ApprovalRequest& request, const std::stop_token& stop);
  ApprovalDecision DecideQuestion(const ApprovalRequest& request, const std::stop_token& stop);

  std::istream& in_;
  std::ostream& out_;
  const bool is_terminal_;
  std::shared_ptr<SessionApprovals> approvals_;
  const Options options_;
  std::mutex mu_;  // one prompt at a time
};

// Defers every request (by = "durable"). Records nothing itself: the engine
// turns kDefer into a checkpoint and the `pending_approval` stop.
class DurableApprover final : public Approver {
 public:
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override;
};

// Denies every request with a reason naming the tool and how to fix it
// (by = "fail-closed").
class FailClosedApprover final : public Approver {
 public:
  // `hint` is appended to the reason, e.g. "run on a terminal or pass
  // --approver durable". Empty: a generic hint.
  explicit FailClosedApprover(std::string hint = "");
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override;

 private:
  std::string hint_;
};

// Wraps an embedder's function. A null function denies (fail closed); an
// exception thrown by the function is caught and becomes a denial that
// quotes it. An empty `by` in the returned decision is set to "embedder".
class CallbackApprover final : public Approver {
 public:
  using Fn = std::function<ApprovalDecision(const ApprovalRequest&, std::stop_token)>;
  explicit CallbackApprover(Fn fn);
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override;

 private:
  Fn fn_;
};

}  // namespace agentloop::permissions
