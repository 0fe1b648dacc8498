#include "acp/updates.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/events.h"

#include "base/testing/files.h"

namespace agentloop::acp {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteFile;

template <typename D>
Event Ev(D data) {
  return MakeEvent(std::move(data), "ses_1", "turn_1");
}

Message Assistant(std::string text, std::vector<ContentBlock> calls) {
  Message m = Message::Assistant(std::move(text));
  for (ContentBlock& b : calls) m.content.push_back(std::move(b));
  return m;
}

ContentBlock Use(std::string id, std::string name, Json input) {
  ContentBlock b;
  b.type = BlockType::kToolUse;
  b.id = std::move(id);
  b.name = std::move(name);
  b.input = std::move(input);
  return b;
}

ContentBlock ResultBlock(std::string id, std::string text, bool is_error, Json meta = nullptr) {
  ContentBlock b;
  b.type = BlockType::kToolResult;
  b.tool_use_id = std::move(id);
  b.text = std::move(text);
  b.is_error = is_error;
  b.meta = std::move(meta);
  return b;
}

Message Results(std::vector<ContentBlock> blocks) {
  Message m;
  m.role = Role::kUser;
  m.content = std::move(blocks);
  return m;
}

TEST(AcpUpdates, ToolKinds) {
  EXPECT_EQ(ToolKindFor("read"), "read");
  EXPECT_EQ(ToolKindFor("ls"), "read");
  EXPECT_EQ(ToolKindFor("edit"), "edit");
  EXPECT_EQ(ToolKindFor("write"), "edit");
  EXPECT_EQ(ToolKindFor("bash"), "execute");
  EXPECT_EQ(ToolKindFor("grep"), "search");
  EXPECT_EQ(ToolKindFor("glob"), "search");
  EXPECT_EQ(ToolKindFor("todo"), "think");
  EXPECT_EQ(ToolKindFor("mcp__fs__read_file"), "other");
}

TEST(AcpUpdates, EditAndWriteCarryTheirDiff) {
  TempDir tmp;
  const fs::path ws = tmp.path() / "ws";
  fs::create_directories(ws);
  WriteFile(ws / "a.txt", "old text\n");
  WriteFile(tmp.path() / "outside.txt", "secret\n");

  ToolPresentation edit = PresentToolCall(
      "edit", Json{{"file_path", "a.txt"}, {"old_string", "old"}, {"new_string", "new"}}, ws);
  EXPECT_EQ(edit.kind, "edit");
  EXPECT_EQ(edit.title, "Edit a.txt");
  EXPECT_EQ(edit.locations, Json::array({Json{{"path", (ws / "a.txt").string()}}}));
  ASSERT_TRUE(edit.diff);
  EXPECT_EQ(*edit.diff, (Json{{"type", "diff"},
                              {"path", (ws / "a.txt").string()},
                              {"oldText", "old"},
                              {"newText", "new"}}));

  ToolPresentation over =
      PresentToolCall("write", Json{{"file_path", "a.txt"}, {"content", "fresh\n"}}, ws);
  ASSERT_TRUE(over.diff);
  EXPECT_EQ((*over.diff)["oldText"], "old text\n");
  EXPECT_EQ((*over.diff)["newText"], "fresh\n");

  ToolPresentation created =
      PresentToolCall("write", Json{{"file_path", "new.txt"}, {"content", "x"}}, ws);
  ASSERT_TRUE(created.diff);
  EXPECT_TRUE((*created.diff)["oldText"].is_null());

  // A file outside the workspace is never read to show a diff.
  ToolPresentation outside =
      PresentToolCall("write", Json{{"file_path", "../outside.txt"}, {"content", "x"}}, ws);
  ASSERT_TRUE(outside.diff);
  EXPECT_TRUE((*outside.diff)["oldText"].is_null());

  ToolPresentation bash = PresentToolCall("bash", Json{{"command", "make test\nmore"}}, ws);
  EXPECT_EQ(bash.kind, "execute");
  EXPECT_EQ(bash.title, "Run make test…");
  EXPECT_FALSE(bash.diff);
}

TEST(AcpUpdates, StopReasons) {
  auto stop = [](StopReason s, std::string reason = "", bool truncated = false,
                 bool cancel = false) {
    TurnResult r;
    r.stop = s;
    r.reason = std::move(reason);
    r.truncated = truncated;
    std::optional<std::string_view> v = AcpStopReason(r, cancel);
    return v ? std::string(*v) : std::string("(error)");
  };
  EXPECT_EQ(stop(StopReason::kCompleted), "end_turn");
  EXPECT_EQ(stop(StopReason::kCompleted, "", true), "max_tokens");
  EXPECT_EQ(stop(StopReason::kBudgetExhausted, "token budget exhausted (9 >= 8)"), "max_tokens");
  EXPECT_EQ(stop(StopReason::kBudgetExhausted, "tool call budget exhausted (8 >= 8)"),
            "max_turn_requests");
  EXPECT_EQ(stop(StopReason::kMaxTurns, "max turns reached (25)"), "max_turn_requests");
  EXPECT_EQ(stop(StopReason::kRefused), "refusal");
  EXPECT_EQ(stop(StopReason::kAborted), "cancelled");
  EXPECT_EQ(stop(StopReason::kDenied), "end_turn");
  EXPECT_EQ(stop(StopReason::kToolRefused), "end_turn");
  EXPECT_EQ(stop(StopReason::kFailed), "(error)");
  // A turn the client cancelled answers `cancelled`, whatever ended it.
  EXPECT_EQ(stop(StopReason::kFailed, "", false, true), "cancelled");
  EXPECT_EQ(stop(StopReason::kCompleted, "", false, true), "cancelled");
}

TEST(AcpUpdates, PlanFromTodoDetails) {
  Json details = Json::parse(R"({"tasks": [
      {"id": 1, "subject": "read", "status": "completed"},
      {"id": 2, "subject": "fix", "activeForm": "Fixing", "status": "in_progress"},
      {"id": 3, "subject": "gone", "status": "deleted"},
      {"id": 4, "subject": "test", "status": "pending"}], "nextId": 5})");
  std::optional<Json> plan = PlanUpdate(details);
  ASSERT_TRUE(plan);
  EXPECT_EQ(*plan, Json::parse(R"({"sessionUpdate": "plan", "entries": [
      {"content": "read", "priority": "medium", "status": "completed"},
      {"content": "Fixing", "priority": "medium", "status": "in_progress"},
      {"content": "test", "priority": "medium", "status": "pending"}]})"));
  EXPECT_FALSE(PlanUpdate(Json{{"diff", "x"}}));
}

class MapperTest : public ::testing::Test {
 protected:
  MapperTest() : ws_(tmp_.path()), mapper_(ws_, [this](Json u) { updates_.push_back(u); }) {}
  std::vector<std::string> Kinds() const {
    std::vector<std::string> out;
    for (const Json& u : updates_) out.push_back(u["sessionUpdate"].get<std::string>());
    return out;
  }
  TempDir tmp_;
  fs::path ws_;
  std::vector<Json> updates_;
  UpdateMapper mapper_;
};

TEST_F(MapperTest, ATurnsEventsBecomeUpdates) {
  mapper_.OnThinkingDelta("hmm");
  mapper_.OnTextDelta("Fixing it.");
  const Json input{{"file_path", "s.py"}, {"old_string", "a"}, {"new_string", "b"}};
  ASSERT_TRUE(
      mapper_.OnEvent(Ev(MessageData{Assistant("Fixing it.", {Use("c1", "edit", input)})})).ok());
  ASSERT_TRUE(mapper_.OnEvent(Ev(ToolCallBeginData{"c1", "edit", input})).ok());
  ToolCallEndData end;
  end.id = "c1";
  end.tool = "edit";
  ASSERT_TRUE(mapper_.OnEvent(Ev(end)).ok());
  ASSERT_TRUE(
      mapper_.OnEvent(Ev(MessageData{Results({ResultBlock("c1", "Edited s.py", false)})})).ok());
  // The streamed text is not repeated from the message.
  EXPECT_EQ(Kinds(),
            (std::vector<std::string>{"agent_thought_chunk", "agent_message_chunk", "tool_call",
                                      "tool_call_update", "tool_call_update", "tool_call_update"}));
  EXPECT_EQ(updates_[1]["content"], (Json{{"type", "text"}, {"text", "Fixing it."}}));
  const Json& call = updates_[2];
  EXPECT_EQ(call["toolCallId"], "c1");
  EXPECT_EQ(call["status"], "pending");
  EXPECT_EQ(call["kind"], "edit");
  EXPECT_EQ(call["rawInput"], input);
  EXPECT_EQ(call["content"][0]["type"], "diff");
  EXPECT_EQ(call["content"][0]["path"], (ws_ / "s.py").string());
  EXPECT_EQ(updates_[3]["status"], "in_progress");
  EXPECT_EQ(updates_[4]["status"], "completed");
  EXPECT_EQ(updates_[4]["content"][0]["newText"], "b");
  // The result's text, after the status was final.
  EXPECT_FALSE(updates_[5].contains("status"));
  EXPECT_EQ(updates_[5]["content"][1]["content"]["text"], "Edited s.py");
}

TEST_F(MapperTest, UnstreamedTextDeniedCallsAndTheTodoPlan) {
  const Json todo_in{{"action", "create"}, {"subject", "fix"}};
  ASSERT_TRUE(mapper_
                  .OnEvent(Ev(MessageData{Assistant(
                      "Plan:", {Use("w1", "write", Json{{"file_path", "x"}, {"content", "y"}}),
                                Use("t1", "todo", todo_in)})}))
                  .ok());
  Json meta{
      {"details",
       Json{{"tasks", Json::array({Json{{"id", 1}, {"subject", "fix"}, {"status", "pending"}}})},
            {"nextId", 2}}}};
  ASSERT_TRUE(mapper_
                  .OnEvent(Ev(MessageData{Results({ResultBlock("w1", "denied: no", true),
                                                   ResultBlock("t1", "Created #1", false, meta)})}))
                  .ok());
  EXPECT_EQ(Kinds(), (std::vector<std::string>{"agent_message_chunk", "tool_call", "tool_call",
                                               "tool_call_update", "tool_call_update", "plan"}));
  // A call that never ran fails, with the reason and without its diff.
  EXPECT_EQ(updates_[3]["status"], "failed");
  ASSERT_EQ(updates_[3]["content"].size(), 1u);
  EXPECT_EQ(updates_[3]["content"][0]["content"]["text"], "denied: no");
  EXPECT_EQ(updates_[5]["entries"][0]["content"], "fix");
}

TEST_F(MapperTest, PermissionToolCallAnnouncesOnce) {
  ToolCall call{"b1", "bash", Json{{"command", "ls"}}};
  Json tc = mapper_.PermissionToolCall(call);
  EXPECT_EQ(tc["toolCallId"], "b1");
  EXPECT_EQ(tc["kind"], "execute");
  EXPECT_EQ(tc["title"], "Run ls");
  (void)mapper_.PermissionToolCall(call);
  EXPECT_EQ(Kinds(), (std::vector<std::string>{"tool_call"}));
}

TEST_F(MapperTest, ReplayShowsThePersonsWordsAndEveryCall) {
  std::vector<Message> history;
  history.push_back(Message::User("fix the bug"));
  history.push_back(Assistant("Reading.", {Use("r1", "read", Json{{"file_path", "s.py"}})}));
  history.push_back(Results({ResultBlock("r1", "1: x", false)}));
  Message marker = Message::User("continue");
  marker.tag = "todo-loop:continue";
  history.push_back(marker);
  history.push_back(Message::Assistant("Done."));
  mapper_.Replay(history);
  EXPECT_EQ(Kinds(),
            (std::vector<std::string>{"user_message_chunk", "agent_message_chunk", "tool_call",
                                      "tool_call_update", "agent_message_chunk"}));
  EXPECT_EQ(updates_[0]["content"]["text"], "fix the bug");
  EXPECT_EQ(updates_[3]["status"], "completed");
}

}  // namespace
}  // namespace agentloop::acp
