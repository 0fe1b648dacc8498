#include "permissions/approvers.h"

#include <sstream>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "permissions/test_specs.h"
#include "protocol/testing/json.h"

namespace agentloop::permissions {
namespace {

using ::testing::HasSubstr;
using Kind = ApprovalDecision::Kind;

using ::agentloop::testing::J;

ApprovalRequest BashRequest(std::string command) {
  ApprovalRequest r;
  r.session_id = "sess_1";
  r.turn_id = "turn_1";
  r.pending_id = "pend_1";
  r.call = ToolCall{"call_1", "bash", Json{{"command", std::move(command)}}};
  r.spec = TestSpec("bash");
  r.spec.input_schema = J(R"j({"type":"object","required":["command"],
                              "properties":{"command":{"type":"string"},
                                            "timeout_ms":{"type":"integer"}}})j");
  r.reason = "no rule matched: default ask for mutating tool 'bash'";
  return r;
}

ApprovalRequest Question() {
  ApprovalRequest r;
  r.kind = PendingKind::kQuestion;
  r.call = ToolCall{"call_q", "ask_user",
                    J(R"j({"question":"Which database?","options":["sqlite","postgres"]})j")};
  r.spec.name = "ask_user";
  r.reason = "Which database?";
  return r;
}

struct Console {
  explicit Console(std::string script) : in(std::move(script)) {}
  std::istringstream in;
  std::ostringstream out;
  std::shared_ptr<SessionApprovals> approvals = std::make_shared<SessionApprovals>("/ws");
  ConsoleApprover Approver() { return ConsoleApprover(in, out, /*is_terminal=*/false, approvals); }
};

ConsoleApprover::Options Opts(size_t max_value_chars, int max_invalid_answers) {
  ConsoleApprover::Options o;
  o.max_value_chars = max_value_chars;
  o.max_invalid_answers = max_invalid_answers;
  return o;
}

TEST(ConsoleApproverTest, AllowOnce) {
  Console c("y\n");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("make test"), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  EXPECT_FALSE(d.remember_for_session);
  EXPECT_FALSE(d.edited_input.has_value());
  EXPECT_EQ(d.by, "console");
  EXPECT_EQ(c.approvals->size(), 0u);
  EXPECT_THAT(c.out.str(), HasSubstr("Permission needed: bash"));
  EXPECT_THAT(c.out.str(), HasSubstr("  command: make test"));
  EXPECT_THAT(c.out.str(), HasSubstr("reason: no rule matched"));
}

TEST(ConsoleApproverTest, AllowForSessionRecordsExactAccess) {
  Console c("what?\na\n");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("make test"), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  EXPECT_TRUE(d.remember_for_session);
  EXPECT_THAT(c.out.str(), HasSubstr("Please answer y, a, n or e."));
  EXPECT_TRUE(c.approvals->Contains(TestSpec("bash"), J(R"j({"command":"make test"})j")));
  EXPECT_FALSE(c.approvals->Contains(TestSpec("bash"), J(R"j({"command":"make install"})j")));
}

TEST(ConsoleApproverTest, DenyWithReason) {
  Console c("n\nnot on a Friday\n");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("make deploy"), {});
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_EQ(d.reason, "not on a Friday");
}

TEST(ConsoleApproverTest, DenyWithoutReasonGetsADefault) {
  Console c("n\n\n");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("make deploy"), {});
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_EQ(d.reason, "denied at the console");
}

TEST(ConsoleApproverTest, EditArgumentsBadThenGoodJson) {
  Console c(
      "e\n"
      "{not json\n"
      "[1,2]\n"
      "{\"command\": 5}\n"
      "{\"command\": \"make test -j2\"}\n");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("make test"), {});
  ASSERT_EQ(d.kind, Kind::kAllow);
  ASSERT_TRUE(d.edited_input.has_value());
  EXPECT_EQ((*d.edited_input)["command"], "make test -j2");
  const std::string out = c.out.str();
  EXPECT_THAT(out, HasSubstr("invalid JSON"));
  EXPECT_THAT(out, HasSubstr("expected a JSON object"));
  EXPECT_THAT(out, HasSubstr("invalid arguments: command"));
}

TEST(ConsoleApproverTest, EditInTheEditorGetsIndentedJsonAndChecksTheResult) {
  Console c("e\ne\ny\n");
  std::vector<std::string> shown;
  std::vector<std::string> replies = {R"({"cmd": 1})", R"({"command": "make check"})"};
  ConsoleApprover::Options o;
  o.edit_text = [&](const std::string& text) -> Result<std::string> {
    shown.push_back(text);
    std::string r = replies[shown.size() - 1];
    return r;
  };
  ConsoleApprover a(c.in, c.out, /*is_terminal=*/false, c.approvals, o);
  ApprovalDecision d = a.Decide(BashRequest("make test"), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  ASSERT_TRUE(d.edited_input.has_value());
  EXPECT_EQ(*d.edited_input, J(R"({"command":"make check"})"));
  ASSERT_EQ(shown.size(), 2u);
  EXPECT_EQ(shown[0], "{\n  \"command\": \"make test\"\n}\n");
  EXPECT_THAT(c.out.str(), HasSubstr("invalid arguments"));
}

TEST(ConsoleApproverTest, EditorFailureOrUnchangedTextIsSaidOrAllowedAsAsked) {
  Console c("e\ne\n");
  int calls = 0;
  ConsoleApprover::Options o;
  o.edit_text = [&](const std::string& text) -> Result<std::string> {
    if (++calls == 1) return FailedPrecondition("editor 'vi' exited with status 1");
    return text;
  };
  ConsoleApprover a(c.in, c.out, /*is_terminal=*/false, c.approvals, o);
  ApprovalDecision d = a.Decide(BashRequest("make test"), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  EXPECT_FALSE(d.edited_input.has_value());
  EXPECT_THAT(c.out.str(), HasSubstr("cannot edit: editor 'vi' exited with status 1"));
}

TEST(ConsoleApproverTest, AnEditIsShownAsTheLinesItRemovesAndAdds) {
  Console c("y\n");
  ConsoleApprover a = c.Approver();
  ApprovalRequest r = BashRequest("x");
  r.call = ToolCall{"call_e", "edit",
                    Json{{"file_path", "f.cc"},
                         {"old_string", "int a = 1;\nint b = 2;\n"},
                         {"new_string", "int a = 1;\nint b = 3;\n"}}};
  EXPECT_EQ(a.Decide(r, {}).kind, Kind::kAllow);
  EXPECT_THAT(c.out.str(), HasSubstr("  file_path: f.cc\n  replaces:\n     int a = 1;\n"
                                     "    -int b = 2;\n    +int b = 3;\n"));
  EXPECT_THAT(c.out.str(), ::testing::Not(HasSubstr("old_string")));
  EXPECT_EQ(FormatReplacement(Json{{"command", "ls"}}, false), "");
}

// old_string and new_string are fragments of a file: their lack of a final
// newline says nothing about the file.
TEST(ConsoleApproverTest, AReplacementHasNoNoNewlineMarker) {
  std::string shown = FormatReplacement(
      Json{{"file_path", "f.cc"}, {"old_string", "return 1;"}, {"new_string", "return 2;"}}, false);
  EXPECT_EQ(shown, "  file_path: f.cc\n  replaces:\n    -return 1;\n    +return 2;\n");
}

// A terminal's key reader that says the prompt was cancelled (Ctrl-C, Esc):
// a denial with kConsoleCancelled, for approvals and questions alike.
TEST(ConsoleApproverTest, ACancelledPromptDenies) {
  Console c("");
  ConsoleApprover::Options o;
  std::vector<std::string> prompts;
  o.read_line = [&](std::ostream& out, std::string_view prompt, const std::stop_token&) {
    out << prompt;
    prompts.emplace_back(prompt);
    return ConsoleRead{ConsoleRead::Kind::kCancelled, ""};
  };
  ConsoleApprover a(c.in, c.out, /*is_terminal=*/true, c.approvals, o);
  ApprovalDecision d = a.Decide(BashRequest("make test"), {});
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_EQ(d.reason, kConsoleCancelled);
  ApprovalRequest q = BashRequest("x");
  q.kind = PendingKind::kQuestion;
  q.call = ToolCall{"call_q", "ask_user", Json{{"question", "which?"}}};
  ApprovalDecision dq = a.Decide(q, {});
  EXPECT_EQ(dq.kind, Kind::kDeny);
  EXPECT_EQ(dq.reason, kConsoleCancelled);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_THAT(prompts[0], HasSubstr("Allow?"));
  EXPECT_EQ(prompts[1], "> ");
}

TEST(ConsoleApproverTest, WhatDescribeSaysReplacesTheArguments) {
  Console c("y\n");
  ConsoleApprover::Options o;
  o.describe = [](const ApprovalRequest& r) -> std::string {
    return r.call.name == "bash" ? "" : "  file: a.txt (new file, 1 line)\n";
  };
  ConsoleApprover a(c.in, c.out, /*is_terminal=*/false, c.approvals, o);
  ApprovalRequest w = BashRequest("x");
  w.call = ToolCall{"call_w", "write", Json{{"file_path", "a.txt"}, {"content", "hi\n"}}};
  EXPECT_EQ(a.Decide(w, {}).kind, Kind::kAllow);
  EXPECT_THAT(c.out.str(), HasSubstr("  file: a.txt (new file, 1 line)\n"));
  EXPECT_THAT(c.out.str(), ::testing::Not(HasSubstr("content: hi")));
}

TEST(ConsoleApproverTest, EditEmptyLineGoesBack) {
  Console c("e\n\ny\n");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("ls"), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  EXPECT_FALSE(d.edited_input.has_value());
}

TEST(ConsoleApproverTest, EndOfInputDenies) {
  Console c("");
  ConsoleApprover a = c.Approver();
  ApprovalDecision d = a.Decide(BashRequest("ls"), {});
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("input closed"));
}

TEST(ConsoleApproverTest, StopTokenDeniesWithoutReading) {
  Console c("y\n");
  ConsoleApprover a = c.Approver();
  std::stop_source stop;
  stop.request_stop();
  ApprovalDecision d = a.Decide(BashRequest("ls"), stop.get_token());
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("cancelled"));
  std::string rest;
  std::getline(c.in, rest);
  EXPECT_EQ(rest, "y");  // the answer was not consumed
}

TEST(ConsoleApproverTest, LongArgumentsAreCut) {
  Console c("y\n");
  ConsoleApprover a(c.in, c.out, /*is_terminal=*/false, nullptr, Opts(50, 5));
  ApprovalDecision d = a.Decide(BashRequest("echo " + std::string(500, 'x')), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  EXPECT_THAT(c.out.str(), HasSubstr("(455 more bytes)"));
  EXPECT_THAT(c.out.str(), ::testing::Not(HasSubstr(std::string(100, 'x'))));
}

TEST(ConsoleApproverTest, QuestionAnswerByNumberAndByText) {
  {
    Console c("\n2\n");
    ConsoleApprover a = c.Approver();
    ApprovalDecision d = a.Decide(Question(), {});
    EXPECT_EQ(d.kind, Kind::kAllow);
    EXPECT_EQ(d.answer, "postgres");
    EXPECT_THAT(c.out.str(), HasSubstr("[ask_user] Which database?"));
    EXPECT_THAT(c.out.str(), HasSubstr("1) sqlite  2) postgres"));
  }
  {
    Console c("  something else  \n");
    ConsoleApprover a = c.Approver();
    ApprovalDecision d = a.Decide(Question(), {});
    EXPECT_EQ(d.answer, "something else");
  }
}

TEST(PickOptionTest, NumberPicksAnOptionOtherTextIsTheAnswer) {
  std::vector<std::string> options = QuestionOptions(J(R"j({"options":["a","3",{"k":1}]})j"));
  ASSERT_EQ(options, (std::vector<std::string>{"a", "3", R"({"k":1})"}));
  EXPECT_EQ(PickOption("1", options), "a");
  EXPECT_EQ(PickOption("3", options), "3");  // the text of an option wins over its number
  EXPECT_EQ(PickOption("2", {"x", "y"}), "y");
  EXPECT_EQ(PickOption("4", options), "4");  // out of range: the text itself
  EXPECT_EQ(PickOption("0", options), "0");
  EXPECT_EQ(PickOption("2", {}), "2");  // no options: the text itself
  EXPECT_EQ(PickOption("b", options), "b");
  EXPECT_TRUE(QuestionOptions(J(R"j({"question":"why?"})j")).empty());
}

TEST(DurableApproverTest, Defers) {
  DurableApprover a;
  ApprovalDecision d = a.Decide(BashRequest("ls"), {});
  EXPECT_EQ(d.kind, Kind::kDefer);
  EXPECT_EQ(d.by, "durable");
}

// A cancelled turn ends aborted: it must not leave a pending item behind for
// someone to approve later.
TEST(DurableApproverTest, CancelledRequestIsDeniedNotDeferred) {
  DurableApprover a;
  std::stop_source stop;
  stop.request_stop();
  ApprovalDecision d = a.Decide(BashRequest("ls"), stop.get_token());
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("cancelled"));
}

TEST(FailClosedApproverTest, DeniesSayingWhy) {
  FailClosedApprover a;
  ApprovalDecision d = a.Decide(BashRequest("ls"), {});
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("no approver available: tool 'bash' needs approval"));
  EXPECT_THAT(d.reason, HasSubstr("configure"));
  ApprovalDecision q = a.Decide(Question(), {});
  EXPECT_EQ(q.kind, Kind::kDeny);
  EXPECT_THAT(q.reason, HasSubstr("question"));
}

TEST(CallbackApproverTest, WrapsFunctionAndFailsClosed) {
  CallbackApprover allow([](const ApprovalRequest& r, std::stop_token) {
    ApprovalDecision d = ApprovalDecision::Allow("");
    d.edited_input = Json{{"command", r.call.input["command"].get<std::string>() + " -v"}};
    return d;
  });
  ApprovalDecision d = allow.Decide(BashRequest("ls"), {});
  EXPECT_EQ(d.kind, Kind::kAllow);
  EXPECT_EQ(d.by, "embedder");
  EXPECT_EQ((*d.edited_input)["command"], "ls -v");

  CallbackApprover empty(nullptr);
  EXPECT_EQ(empty.Decide(BashRequest("ls"), {}).kind, Kind::kDeny);

  CallbackApprover throws([](const ApprovalRequest&, std::stop_token) -> ApprovalDecision {
    throw std::runtime_error("boom");
  });
  ApprovalDecision t = throws.Decide(BashRequest("ls"), {});
  EXPECT_EQ(t.kind, Kind::kDeny);
  EXPECT_THAT(t.reason, HasSubstr("boom"));
}

TEST(FormatArgumentsTest, OneLinePerArgument) {
  std::string s = FormatArguments(J(R"j({"file_path":"a.txt","content":"l1\nl2","n":3})j"));
  EXPECT_EQ(s, "  file_path: a.txt\n  content: l1\n    l2\n  n: 3\n");
  EXPECT_EQ(FormatArguments(Json::object()), "  (no arguments)\n");
}

}  // namespace
}  // namespace agentloop::permissions
