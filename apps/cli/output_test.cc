#include "output.h"

#include <sstream>

#include <gtest/gtest.h>

#include "agentloop/events.h"

#include "commands.h"
#include "pricing.h"
#include "protocol/codec.h"

namespace agentloop::cli {
namespace {

TEST(ExitCodeTest, EveryStopReason) {
  EXPECT_EQ(ExitCodeFor(StopReason::kCompleted), 0);
  EXPECT_EQ(ExitCodeFor(StopReason::kFailed), 1);
  EXPECT_EQ(ExitCodeFor(StopReason::kBudgetExhausted), 3);
  EXPECT_EQ(ExitCodeFor(StopReason::kMaxTurns), 3);
  EXPECT_EQ(ExitCodeFor(StopReason::kDenied), 4);
  EXPECT_EQ(ExitCodeFor(StopReason::kToolRefused), 4);
  EXPECT_EQ(ExitCodeFor(StopReason::kPendingApproval), 5);
  EXPECT_EQ(ExitCodeFor(StopReason::kPendingQuestion), 5);
  EXPECT_EQ(ExitCodeFor(StopReason::kAborted), 130);
  EXPECT_EQ(ExitCodeFor(StopReason::kRefused), 4);
}

TEST(ExitCodeTest, Statuses) {
  EXPECT_EQ(ExitCodeFor(InvalidArgument("x")), 2);
  EXPECT_EQ(ExitCodeFor(NotFound("x")), 2);
  EXPECT_EQ(ExitCodeFor(Busy("x")), 1);
  EXPECT_EQ(ExitCodeFor(DataLoss("x")), 1);
  EXPECT_EQ(ExitCodeFor(Cancelled("x")), 130);
}

TurnResult Paused() {
  TurnResult r;
  r.stop = StopReason::kPendingApproval;
  r.reason = "waiting";
  r.counters.tool_calls = 2;
  r.counters.tokens = 1234;
  r.counters.model_calls = 3;
  PendingItem p;
  p.id = "pend-1";
  p.kind = PendingKind::kApproval;
  p.tool = "bash";
  p.tool_use_id = "c1";
  p.arguments = Json{{"command", "make test"}};
  p.reason = "no rule matched";
  r.pending.push_back(p);
  return r;
}

TEST(TurnResultJsonTest, HasTheDocumentedFields) {
  TodoLoopInfo todo{2, 12, 1, 2, "open tasks"};
  Json j = TurnResultJson("s1", Paused(), todo, std::chrono::milliseconds(1500), "gpt-4o");
  EXPECT_EQ(j["session_id"], "s1");
  EXPECT_EQ(j["status"], "pending_approval");
  EXPECT_EQ(j["reason"], "waiting");
  EXPECT_EQ(j["final_text"], "");
  EXPECT_EQ(j["tool_calls"], 2);
  EXPECT_EQ(j["tokens"], 1234);
  EXPECT_EQ(j["turns"], 3);
  EXPECT_EQ(j["exit_code"], 5);
  EXPECT_EQ(j["duration_ms"], 1500);
  ASSERT_EQ(j["pending"].size(), 1u);
  EXPECT_EQ(j["pending"][0]["id"], "pend-1");
  EXPECT_EQ(j["pending"][0]["kind"], "approval");
  EXPECT_EQ(j["pending"][0]["tool"], "bash");
  EXPECT_EQ(j["pending"][0]["arguments"]["command"], "make test");
  EXPECT_EQ(j["pending"][0]["reason"], "no rule matched");
  EXPECT_EQ(j["todo_loop"]["rounds"], 2);
  EXPECT_EQ(j["todo_loop"]["strikes"], 1);
  EXPECT_TRUE(j.contains("cost_usd"));
  Json unknown = TurnResultJson("s1", Paused(), std::nullopt, std::nullopt, "my-local-model");
  EXPECT_FALSE(unknown.contains("cost_usd"));
  EXPECT_FALSE(unknown.contains("todo_loop"));
}

TEST(PendingInstructionsTest, SaysHowToAnswer) {
  std::string s = PendingInstructions(Paused().pending);
  EXPECT_NE(s.find("agentloop approve pend-1"), std::string::npos);
  EXPECT_NE(s.find("agentloop deny pend-1"), std::string::npos);
  EXPECT_NE(s.find("make test"), std::string::npos);
  PendingItem q;
  q.id = "q1";
  q.kind = PendingKind::kQuestion;
  q.reason = "which colour?";
  std::string t = PendingInstructions({q});
  EXPECT_NE(t.find("agentloop answer q1"), std::string::npos);
  EXPECT_NE(t.find("which colour?"), std::string::npos);
}

TEST(DescribeToolCallTest, PicksTheTellingArgument) {
  EXPECT_EQ(DescribeToolCall("bash", Json{{"command", "make\n test"}}), "bash  make test");
  EXPECT_EQ(DescribeToolCall("read", Json{{"file_path", "a.py"}}), "read  a.py");
  EXPECT_EQ(DescribeToolCall("grep", Json{{"pattern", "TODO"}, {"path", "src"}}),
            "grep  TODO in src");
  EXPECT_EQ(DescribeToolCall("ls", Json::object()), "ls");
  std::string long_cmd(500, 'x');
  EXPECT_LE(DescribeToolCall("bash", Json{{"command", long_cmd}}, 50).size(), 60u);
}

TEST(GroupDigitsTest, Groups) {
  EXPECT_EQ(GroupDigits(0), "0");
  EXPECT_EQ(GroupDigits(999), "999");
  EXPECT_EQ(GroupDigits(1000), "1,000");
  EXPECT_EQ(GroupDigits(1234567), "1,234,567");
}

TEST(CountedTest, OneHasNoS) {
  EXPECT_EQ(Counted(1, "tool call"), "1 tool call");
  EXPECT_EQ(Counted(0, "tool call"), "0 tool calls");
  EXPECT_EQ(Counted(12000, "token"), "12,000 tokens");
}

TEST(PricingTest, LongestPrefixAndUnknown) {
  ASSERT_TRUE(FindPrice("gpt-4o-mini-2024-07-18"));
  EXPECT_DOUBLE_EQ(FindPrice("gpt-4o-mini-2024-07-18")->input, 0.15);
  EXPECT_DOUBLE_EQ(FindPrice("gpt-4o")->input, 2.50);
  EXPECT_DOUBLE_EQ(FindPrice("anthropic/claude-sonnet-4-5")->output, 15.0);
  EXPECT_FALSE(FindPrice("llama-3-local"));
  Usage u;
  u.input_tokens = 1'000'000;
  u.output_tokens = 1'000'000;
  EXPECT_DOUBLE_EQ(*EstimateCostUsd("gpt-4o", u), 12.5);
}

template <typename D>
Event Ev(D data) {
  Event e = MakeEvent(std::move(data), "s1", "t1");
  e.seq = 7;
  return e;
}

ToolCallBeginData Begin(std::string id, std::string tool, Json input = Json::object()) {
  return ToolCallBeginData{.id = std::move(id), .tool = std::move(tool), .input = std::move(input)};
}

ToolCallEndData End(std::string id, std::string tool, bool is_error, std::string summary) {
  ToolCallEndData d;
  d.id = std::move(id);
  d.tool = std::move(tool);
  d.is_error = is_error;
  d.summary = std::move(summary);
  return d;
}

ToolCallEndData WithDiff(ToolCallEndData d, std::string diff) {
  d.diff = std::move(diff);
  return d;
}

// The message event of a message written as the store writes it.
MessageData Msg(const Json& j) {
  Result<Message> m = MessageFromJson(j);
  EXPECT_TRUE(m.ok()) << DumpJson(j);
  return MessageData{m.ok() ? *m : Message()};
}

TEST(TurnPrinterTest, StreamJsonWritesOneObjectPerEvent) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kStreamJson, out, err, Style());
  p.BeginTurn();
  ASSERT_TRUE(p.OnEvent(Ev(Begin("c1", "read"))).ok());
  ASSERT_TRUE(p.OnEvent(Ev(NoticeData{"info", "hi"})).ok());
  p.OnTextDelta("ignored in stream-json");
  std::istringstream lines(out.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    Result<Json> j = ParseJson(line);
    ASSERT_TRUE(j.ok()) << line;
    EXPECT_EQ((*j)["session_id"], "s1");
    ++n;
  }
  EXPECT_EQ(n, 2);
  TurnResult r;
  EXPECT_EQ(p.Finish("s1", r, ""), 0);
}

// A subagent's child reports to its caller's printer: its tool calls are
// shown indented under the call that started it, nothing else of it; in
// stream-json the child's events are left out (they are in its own log).
TEST(TurnPrinterTest, AChildsToolCallsAreIndentedUnderItsCaller) {
  auto child = [](auto data) {
    Event e = Ev(std::move(data));
    e.session_id = "child";
    return e;
  };
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  ASSERT_TRUE(p.OnEvent(Ev(TurnBeginData{})).ok());
  ASSERT_TRUE(p.OnEvent(Ev(Begin("c1", "agent__writer", {{"task", "write it"}}))).ok());
  ASSERT_TRUE(p.OnEvent(child(TurnBeginData{})).ok());
  ASSERT_TRUE(
      p.OnEvent(child(Begin("w1", "write", {{"file_path", "a.txt"}, {"content", "x\n"}}))).ok());
  ASSERT_TRUE(
      p.OnEvent(child(WithDiff(End("w1", "write", false, "Created a.txt"), "--- /dev/null\n+x\n")))
          .ok());
  ASSERT_TRUE(p.OnEvent(child(NoticeData{"info", "CHILD"})).ok());
  EXPECT_NE(err.str().find(
                "\n    → write  a.txt\n      ✓ Created a.txt\n        --- /dev/null\n        +x\n"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(err.str().find("CHILD"), std::string::npos) << err.str();

  std::ostringstream json_out, json_err;
  TurnPrinter stream(OutputFormat::kStreamJson, json_out, json_err, Style());
  stream.BeginTurn();
  ASSERT_TRUE(stream.OnEvent(Ev(TurnBeginData{})).ok());
  ASSERT_TRUE(stream.OnEvent(child(Begin("w1", "write"))).ok());
  EXPECT_EQ(json_out.str().find("child"), std::string::npos) << json_out.str();
}

TEST(TurnPrinterTest, TextStreamsToStdoutAndSummarisesOnStderr) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  p.OnTextDelta("Hello ");
  p.OnTextDelta("world");
  ASSERT_TRUE(p.OnEvent(Ev(Begin("c1", "bash", {{"command", "make"}}))).ok());
  TurnResult r;
  r.final_text = "Hello world";
  r.counters.tool_calls = 1;
  r.counters.tokens = 2000;
  EXPECT_EQ(p.Finish("s1", r, ""), 0);
  EXPECT_EQ(out.str(), "Hello world\n");  // newline before the tool line, no repeat
  EXPECT_NE(err.str().find("bash  make"), std::string::npos);
  EXPECT_NE(err.str().find("1 tool call"), std::string::npos);
  EXPECT_NE(err.str().find("2,000 tokens"), std::string::npos);
  EXPECT_EQ(err.str().find("\033["), std::string::npos);  // no colour without a terminal
}

TEST(TurnPrinterTest, TextPrintsFinalTextWhenNothingStreamed) {
  std::ostringstream out, err;
  Style quiet;
  quiet.quiet = true;
  TurnPrinter p(OutputFormat::kText, out, err, quiet);
  p.BeginTurn();
  TurnResult r;
  r.final_text = "done";
  EXPECT_EQ(p.Finish("s1", r, ""), 0);
  EXPECT_EQ(out.str(), "done\n");
  EXPECT_EQ(err.str(), "");
}

TEST(TurnPrinterTest, JsonPrintsOneObjectAndPendingHelp) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kJson, out, err, Style());
  p.BeginTurn();
  p.OnTextDelta("not printed");
  ContinuationData todo{
      .by = "todo-loop",
      .continue_turn = true,
      .reason = "continuing: round 1/12, 3 open",
      .entries = 1,
      .model_calls = 2,
      .details =
          Json{{"round", 1}, {"max_rounds", 12}, {"strikes", 0}, {"max_strikes", 2}, {"open", 3}}};
  ASSERT_TRUE(p.OnEvent(Ev(todo)).ok());
  // Another hook's verdict does not replace the todo loop's figures.
  ContinuationData other;
  other.by = "mine";
  other.continue_turn = true;
  other.reason = "more";
  ASSERT_TRUE(p.OnEvent(Ev(other)).ok());
  EXPECT_EQ(p.Finish("s1", Paused(), ""), 5);
  Result<Json> j = ParseJson(out.str());
  ASSERT_TRUE(j.ok()) << out.str();
  EXPECT_EQ((*j)["status"], "pending_approval");
  EXPECT_EQ((*j)["todo_loop"]["max_rounds"], 12);
  EXPECT_EQ((*j)["todo_loop"]["rounds"], 1);
  EXPECT_EQ((*j)["todo_loop"]["open"], 3);
  EXPECT_EQ((*j)["todo_loop"]["continued"], true);
  EXPECT_EQ((*j)["todo_loop"]["reason"], "continuing: round 1/12, 3 open");
  EXPECT_NE(err.str().find("agentloop approve pend-1"), std::string::npos);
}

TEST(TurnPrinterTest, StopLineDoesNotRepeatTheStopName) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  TurnResult r;
  r.stop = StopReason::kDenied;
  r.reason = "denied: bash";
  EXPECT_EQ(p.Finish("s1", r, ""), 4);
  EXPECT_NE(err.str().find("■ denied: bash"), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("denied: denied"), std::string::npos) << err.str();
  EXPECT_EQ(out.str(), "");  // the synthetic stop text is not the model's answer

  std::ostringstream out2, err2;
  TurnPrinter q(OutputFormat::kText, out2, err2, Style());
  q.BeginTurn();
  r.stop = StopReason::kAborted;
  r.reason = "aborted";
  r.counters.tool_calls = 1;
  EXPECT_EQ(q.Finish("s1", r, ""), 130);
  EXPECT_EQ(err2.str().find("aborted: aborted"), std::string::npos) << err2.str();
  EXPECT_NE(err2.str().find("· 1 tool call ·"), std::string::npos) << err2.str();
}

TEST(TurnPrinterTest, ErrorsAreJsonInJsonModes) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kJson, out, err, Style());
  EXPECT_EQ(p.FinishWithError(Busy("session s1 is busy")), 1);
  Result<Json> j = ParseJson(out.str());
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["error"]["code"], "busy");
  EXPECT_NE(err.str().find("busy"), std::string::npos);
}

TEST(EditInEditorTest, RunsTheCommandLineOnAFileAndReadsItBack) {
  Result<std::string> edited = EditInEditor("sed -i s/make/check/", "{\"command\": \"make\"}\n");
  ASSERT_TRUE(edited.ok()) << edited.error().ToString();
  EXPECT_EQ(*edited, "{\"command\": \"check\"}\n");
  Result<std::string> failed = EditInEditor("false", "{}");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message().find("exited with status 1"), std::string::npos);
}

TEST(TurnPrinterTest, ARetryIsALineOnStderr) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  RetryData retry{.attempt = 2, .max_attempts = 6, .delay_ms = 2000, .reason = "HTTP 429 slow"};
  ASSERT_TRUE(p.OnEvent(Ev(retry)).ok());
  EXPECT_EQ(err.str(), "↻ retrying in 2.0 s (attempt 2/6): HTTP 429 slow\n");
  EXPECT_EQ(out.str(), "");
}

TEST(TurnPrinterTest, FailedCancelledAndParallelResultsSayWhatAndWhose) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  auto begin = [&](const char* id, const char* cmd) {
    ASSERT_TRUE(p.OnEvent(Ev(Begin(id, "bash", {{"command", cmd}}))).ok());
  };
  auto end = [&](ToolCallEndData d) { ASSERT_TRUE(p.OnEvent(Ev(std::move(d))).ok()); };
  begin("c1", "make");
  ToolCallEndData failed = End("c1", "bash", true, "boom");
  failed.exit_code = 2;
  end(failed);
  EXPECT_NE(err.str().find("→ bash  make\n  ✗ exit code 2 · boom\n"), std::string::npos)
      << err.str();
  begin("c2", "sleep 9");
  begin("c3", "ls");
  ToolCallEndData cancelled = End("c2", "bash", true, "");
  cancelled.cancelled = true;
  end(cancelled);
  end(End("c3", "bash", false, "a.txt"));
  EXPECT_NE(err.str().find("  ✗ bash  sleep 9: cancelled\n"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("  ✓ bash  ls: a.txt\n"), std::string::npos) << err.str();
}

TEST(TurnPrinterTest, QuietKeepsTheSameLineBreaksOnStdout) {
  for (bool quiet : {false, true}) {
    std::ostringstream out, err;
    Style st;
    st.quiet = quiet;
    TurnPrinter p(OutputFormat::kText, out, err, st);
    p.BeginTurn();
    p.OnTextDelta("Looking.");
    ASSERT_TRUE(p.OnEvent(Ev(Begin("c1", "bash", {{"command", "ls"}}))).ok());
    p.OnTextDelta("Done.");
    TurnResult r;
    r.final_text = "Done.";
    EXPECT_EQ(p.Finish("s1", r, ""), 0);
    EXPECT_EQ(out.str(), "Looking.\nDone.\n") << "quiet=" << quiet;
    EXPECT_EQ(err.str().empty(), quiet) << err.str();
  }
}

TEST(TurnPrinterTest, ThinkingIsFoldedUnlessShown) {
  for (bool show : {false, true}) {
    std::ostringstream out, err;
    Style st;
    st.show_thinking = show;
    TurnPrinter p(OutputFormat::kText, out, err, st);
    p.BeginTurn();
    p.OnThinkingDelta("Let me ");
    p.OnThinkingDelta("check the tests.");
    p.OnTextDelta("Done.");
    TurnResult r;
    r.final_text = "Done.";
    EXPECT_EQ(p.Finish("s1", r, ""), 0);
    EXPECT_EQ(out.str(), "Done.\n");
    if (show) {
      EXPECT_EQ(err.str().rfind("Let me check the tests.\n", 0), 0u) << err.str();
    } else {
      EXPECT_EQ(err.str().rfind("✻ thought for 5 words (--show-thinking shows it)\n", 0), 0u)
          << err.str();
      EXPECT_EQ(err.str().find("Let me"), std::string::npos);
    }
  }
}

TEST(TurnPrinterTest, AnAuthenticationFailureNamesTheKeyVariable) {
  std::ostringstream out, err;
  Style st;
  st.api_key_env = "MY_KEY";
  TurnPrinter p(OutputFormat::kText, out, err, st);
  p.BeginTurn();
  TurnResult r;
  r.stop = StopReason::kFailed;
  r.reason =
      "model call failed: permission_denied: openai: authentication failed: HTTP 401: "
      "invalid key";
  EXPECT_EQ(p.Finish("s1", r, ""), 1);
  EXPECT_NE(err.str().find("■ authentication error: the model API refused the API key in MY_KEY "
                           "(HTTP 401: invalid key)\n"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("check MY_KEY"), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("permission_denied"), std::string::npos) << err.str();
}

TEST(TurnPrinterTest, TheTodoListIsDrawnWhenItChanges) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  auto result = [](Json tasks) {
    Json block{{"type", "tool_result"},
               {"tool_use_id", "t1"},
               {"content", "ok"},
               {"meta", {{"details", {{"action", "update"}, {"tasks", tasks}, {"nextId", 3}}}}}};
    return Msg(Json{{"role", "user"}, {"content", Json::array({block})}});
  };
  Json tasks = Json::array({Json{{"id", 1}, {"subject", "write test"}, {"status", "completed"}},
                            Json{{"id", 2},
                                 {"subject", "fix bug"},
                                 {"status", "in_progress"},
                                 {"activeForm", "Fixing"}}});
  ASSERT_TRUE(p.OnEvent(Ev(result(tasks))).ok());
  ASSERT_TRUE(p.OnEvent(Ev(result(tasks))).ok());  // unchanged: not again
  EXPECT_EQ(err.str(), "todo:\n  ☑ write test\n  ◐ fix bug  Fixing\n");
  tasks[1]["status"] = "completed";
  ASSERT_TRUE(p.OnEvent(Ev(result(tasks))).ok());
  EXPECT_NE(err.str().find("  ☑ fix bug\n"), std::string::npos) << err.str();
}

TEST(RenderDiffTest, ColoursAndIndentsAndCutsLongDiffs) {
  const std::string diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n";
  EXPECT_EQ(RenderDiff(diff, false), "    --- a/f\n    +++ b/f\n    @@ -1 +1 @@\n    -x\n    +y\n");
  std::string coloured = RenderDiff(diff, true);
  EXPECT_NE(coloured.find("\033[31m-x\033[0m"), std::string::npos) << coloured;
  EXPECT_NE(coloured.find("\033[32m+y\033[0m"), std::string::npos) << coloured;
  EXPECT_EQ(RenderDiff(diff, false, "  ", 3),
            "  --- a/f\n  +++ b/f\n  @@ -1 +1 @@\n  ... 2 more diff lines\n");
}

TEST(TurnPrinterTest, AFileChangeIsShownAsADiffAndListedInJson) {
  ToolCallEndData end =
      WithDiff(End("c1", "edit", false, "Edited f"), "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n");
  end.content_bytes = 10;
  {
    std::ostringstream out, err;
    TurnPrinter p(OutputFormat::kText, out, err, Style());
    p.BeginTurn();
    ASSERT_TRUE(p.OnEvent(Ev(end)).ok());
    EXPECT_NE(err.str().find("Edited f\n    --- a/f\n"), std::string::npos) << err.str();
    EXPECT_NE(err.str().find("    +y\n"), std::string::npos) << err.str();
  }
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kJson, out, err, Style());
  p.BeginTurn();
  ASSERT_TRUE(p.OnEvent(Ev(end)).ok());
  TurnResult r;
  EXPECT_EQ(p.Finish("s1", r, ""), 0);
  Json j = *ParseJson(out.str());
  ASSERT_EQ(j["changes"].size(), 1u);
  EXPECT_EQ(j["changes"][0]["id"], "c1");
  EXPECT_EQ(j["changes"][0]["diff"], end.diff);
}

TEST(RenderConversationTest, ShowsTheNewestMessagesAndCountsTheRest) {
  std::vector<Message> msgs;
  msgs.push_back(Message::User("old question"));
  msgs.push_back(Message::Assistant("old answer"));
  msgs.push_back(Message::User("fix the bug"));
  Message call = Message::Assistant("Reading it.");
  call.content.push_back(ContentBlock::ToolUse("t1", "read", Json{{"file_path", "stats.py"}}));
  msgs.push_back(call);
  Message result;
  result.role = Role::kUser;
  result.content.push_back(ContentBlock::ToolResult("t1", "no such file\nmore", true));
  msgs.push_back(result);
  std::string longer;
  for (int i = 0; i < 5; ++i) longer += "line " + std::to_string(i) + "\n";
  msgs.push_back(Message::Assistant(longer + "\x1b]0;title\x07"));

  std::string out = RenderConversation(msgs, "sid-1", /*color=*/false, /*max_messages=*/4,
                                       /*max_lines=*/3);
  EXPECT_NE(out.find("… 2 earlier messages (agentloop sessions show sid-1)"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("old question"), std::string::npos) << out;
  EXPECT_NE(out.find("› fix the bug\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  → read  stats.py\n"), std::string::npos) << out;
  EXPECT_NE(out.find("✗ no such file more"), std::string::npos) << out;
  EXPECT_NE(out.find("  line 2\n  … 3 more lines\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("line 3"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;  // model text cannot drive the terminal
}

TEST(TurnPrinterTest, ACallAnsweredWithoutRunningIsShownLikeAnyResult) {
  std::ostringstream out, err;
  TurnPrinter p(OutputFormat::kText, out, err, Style());
  p.BeginTurn();
  auto uses = Msg(Json{
      {"role", "assistant"},
      {"content",
       Json::array(
           {Json{{"type", "tool_use"}, {"id", "t1"}, {"name", "read"}, {"input", {{"nope", 1}}}},
            Json{{"type", "tool_use"},
                 {"id", "t2"},
                 {"name", "bash"},
                 {"input", {{"command", "rm x"}}}},
            Json{
                {"type", "tool_use"}, {"id", "t3"}, {"name", "ls"}, {"input", Json::object()}}})}});
  ASSERT_TRUE(p.OnEvent(Ev(uses)).ok());
  // t3 runs; t2 is denied (said by the decision); t1's arguments are refused.
  ASSERT_TRUE(p.OnEvent(Ev(Begin("t3", "ls"))).ok());
  ASSERT_TRUE(p.OnEvent(Ev(End("t3", "ls", false, "a b"))).ok());
  DecisionData denied;
  denied.tool_use_id = "t2";
  denied.tool = "bash";
  denied.decision = Decision::kDeny;
  denied.reason = "no";
  ASSERT_TRUE(p.OnEvent(Ev(denied)).ok());
  auto result = [](const char* id, const char* text) {
    return Json{
        {"type", "tool_result"}, {"tool_use_id", id}, {"content", text}, {"is_error", true}};
  };
  auto results = Msg(
      Json{{"role", "user"},
           {"content", Json::array({result("t1", "Invalid arguments for read: missing file_path"),
                                    result("t2", "denied: no"), result("t3", "a b")})}});
  ASSERT_TRUE(p.OnEvent(Ev(results)).ok());
  const std::string e = err.str();
  EXPECT_NE(e.find("→ read  {\"nope\":1}\n  ✗ Invalid arguments for read: missing file_path\n"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("→ bash"), std::string::npos) << e;  // the denial line says it
  EXPECT_NE(e.find("✗ denied bash: no"), std::string::npos) << e;
  EXPECT_EQ(e.find("→ ls"), e.rfind("→ ls")) << e;  // once, from its own events
}

TEST(TurnPrinterTest, APauseTheChatAsksItselfListsNoCommands) {
  TurnResult r;
  r.stop = StopReason::kPendingApproval;
  PendingItem item;
  item.id = "apr_0123456789abcdef";
  item.tool = "bash";
  item.arguments = Json{{"command", "make"}};
  r.pending = {item};
  for (bool asks : {false, true}) {
    std::ostringstream out, err;
    Style st;
    st.asks_pending = asks;
    TurnPrinter p(OutputFormat::kText, out, err, st);
    p.BeginTurn();
    EXPECT_EQ(p.Finish("s1", r, ""), 5);
    EXPECT_EQ(err.str().find("agentloop approve apr_0123456789abcdef") != std::string::npos, !asks)
        << err.str();
    EXPECT_EQ(err.str().find("⏸ paused (session s1); asked below") != std::string::npos, asks)
        << err.str();
  }
}

}  // namespace
}  // namespace agentloop::cli
