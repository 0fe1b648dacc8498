#include <gtest/gtest.h>

#include "agentloop/events.h"
#include "agentloop/tool.h"

#include "protocol/codec.h"

namespace agentloop {
namespace {

TEST(CodecTest, MessageRoundTripKeepsThinkingAndToolBlocks) {
  Message m;
  m.role = Role::kAssistant;
  m.content.push_back(ContentBlock::Thinking("hmm", "sig-opaque=="));
  m.content.push_back(ContentBlock::RedactedThinking("xyz"));
  m.content.push_back(ContentBlock::Text("hi"));
  auto tu = ContentBlock::ToolUse("call_1", "read", Json{{"file_path", "a.txt"}});
  tu.meta = Json{{"item_id", "fc_9"}};
  m.content.push_back(tu);
  auto bad = ContentBlock::ToolUse("call_2", "read", nullptr);
  bad.raw_input = "{not json";
  m.content.push_back(bad);
  m.tag = "x";
  auto back = MessageFromJson(ToJson(m));
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(*back, m);
}

TEST(PendingIdTest, TypedByKindAndRecognisedWhole) {
  std::string a = NewPendingId(PendingKind::kApproval);
  std::string q = NewPendingId(PendingKind::kQuestion);
  EXPECT_TRUE(a.starts_with("apr_")) << a;
  EXPECT_TRUE(q.starts_with("q_")) << q;
  EXPECT_EQ(a.size(), 4u + 16u);
  EXPECT_NE(a, NewPendingId(PendingKind::kApproval));
  EXPECT_TRUE(IsWholePendingId(a));
  EXPECT_TRUE(IsWholePendingId(q));
  EXPECT_TRUE(IsWholePendingId("3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c"));
  EXPECT_FALSE(IsWholePendingId(a.substr(0, 8)));  // a prefix
  EXPECT_FALSE(IsWholePendingId("apr_5f3a9c0d2b1e4a6G"));
  EXPECT_FALSE(IsWholePendingId("x_5f3a9c0d2b1e4a67"));
  EXPECT_FALSE(IsWholePendingId("3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9"));
  EXPECT_FALSE(IsWholePendingId(""));
}

TEST(CodecTest, RejectsMalformed) {
  EXPECT_FALSE(MessageFromJson(Json{{"role", "robot"}, {"content", Json::array()}}).ok());
  EXPECT_FALSE(MessageFromJson(Json{{"role", "user"}}).ok());
  EXPECT_FALSE(ContentBlockFromJson(Json{{"type", "tool_use"}}).ok());
  EXPECT_FALSE(ContentBlockFromJson(Json{{"type", "video"}}).ok());
}

TEST(CodecTest, CheckpointRoundTrip) {
  Checkpoint c;
  c.session_id = "s";
  c.turn_id = "t";
  c.tool_use_ids = {"a", "b"};
  c.results_so_far.push_back(ContentBlock::ToolResult("a", "ok", false));
  c.outstanding.push_back(PendingItem{"p1", PendingKind::kQuestion, "b", "ask_user",
                                      Json{{"question", "why?"}}, "why?", "", ""});
  c.counters.tool_calls = 3;
  c.command = CommandKind::kFix;
  auto back = CheckpointFromJson(ToJson(c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->outstanding, c.outstanding);
  EXPECT_EQ(back->results_so_far, c.results_so_far);
  EXPECT_EQ(back->counters, c.counters);
  EXPECT_EQ(back->command, CommandKind::kFix);
  EXPECT_TRUE(back->decisions.empty());
}

TEST(CodecTest, CheckpointKeepsDecisionsAndTheStuckWindow) {
  Checkpoint c;
  c.session_id = "s";
  c.turn_id = "t";
  c.tool_use_ids = {"a", "b"};
  ApprovalDecision allow = ApprovalDecision::Allow("http");
  allow.edited_input = Json{{"command", "ls"}};
  c.decisions.push_back(BatchDecision{PendingItem{"p1", PendingKind::kApproval, "a", "bash",
                                                  Json{{"command", "rm x"}}, "ask", "", ""},
                                      allow});
  ApprovalDecision answer = ApprovalDecision::Allow("cli");
  answer.answer = "blue";
  c.decisions.push_back(BatchDecision{
      PendingItem{"p2", PendingKind::kQuestion, "b", "ask_user", Json::object(), "?", "", ""},
      answer});
  c.recent_calls = {"bash\x1f{}", "read\x1f{}"};
  auto back = CheckpointFromJson(ToJson(c));
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  ASSERT_EQ(back->decisions.size(), 2u);
  EXPECT_EQ(back->decisions[0].item, c.decisions[0].item);
  EXPECT_EQ(back->decisions[0].decision.kind, ApprovalDecision::Kind::kAllow);
  EXPECT_EQ(back->decisions[0].decision.edited_input, Json({{"command", "ls"}}));
  EXPECT_EQ(back->decisions[0].decision.by, "http");
  EXPECT_EQ(back->decisions[1].decision.answer, "blue");
  EXPECT_EQ(back->recent_calls, c.recent_calls);

  Json bad = ToJson(c);
  bad["decisions"][0]["decision"] = "maybe";
  auto refused = CheckpointFromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("maybe"), std::string::npos);
}

TEST(EventTest, JsonRoundTrip) {
  Event e(ToolCallBeginData{"c1", "read", Json{{"file_path", "a"}}}, "s1", "t1", 42);
  EXPECT_EQ(e.type, EventType::kToolCallBegin);
  Json j = e.ToJson();
  EXPECT_EQ(j["type"], "tool_call_begin");
  EXPECT_EQ(j["seq"], 42);
  auto back = Event::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->type, EventType::kToolCallBegin);
  const auto* begin = back->As<ToolCallBeginData>();
  ASSERT_NE(begin, nullptr);
  EXPECT_EQ(begin->id, "c1");
  EXPECT_EQ(begin->input, (Json{{"file_path", "a"}}));
  EXPECT_EQ(back->As<ToolCallEndData>(), nullptr);
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_FALSE(ShouldPersist(EventType::kTextDelta));
  EXPECT_TRUE(ShouldPersist(EventType::kMessage));
}

// The data of an event read from JSON is checked with its type's struct:
// a documented field missing or of the wrong type is refused, naming it.
TEST(EventTest, FromJsonChecksTheDataOfItsType) {
  Json j = Event(NoticeData{"info", "x"}, "s1", "t1", 3).ToJson();
  j["text"] = 5;
  auto wrong = Event::FromJson(j);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("notice: field 'text'"), std::string::npos)
      << wrong.error().ToString();
  j.erase("text");
  EXPECT_FALSE(Event::FromJson(j).ok());
  // Unknown fields are ignored (additive changes within v1).
  j["text"] = "x";
  j["added_later"] = true;
  auto added = Event::FromJson(j);
  ASSERT_TRUE(added.ok()) << added.error().ToString();
  EXPECT_EQ(added->As<NoticeData>()->text, "x");
}

TEST(EventTest, TimestampIsPartOfTheEnvelope) {
  Event e(NoticeData{"info", "x"}, "s1", "t1", 7, 1767225600123);
  Json j = e.ToJson();
  EXPECT_EQ(DumpJson(j),
            R"({"type":"notice","session_id":"s1","turn_id":"t1","seq":7,"ts":1767225600123,)"
            R"("level":"info","text":"x"})");
  EXPECT_EQ(e.Dump("s1"), DumpJson(j));
  auto back = Event::FromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ts, 1767225600123);
  EXPECT_EQ(back->As<NoticeData>()->text, "x");
}

// Events stored before events had timestamps load with ts 0 and serialise
// exactly as they were stored.
TEST(EventTest, EventWithoutTimestampLoadsAndSerialisesUnchanged) {
  const std::string stored =
      R"({"type":"step_begin","session_id":"s1","turn_id":"t1","seq":3,"step":1,)"
      R"("max_output_tokens":4096,"messages":2})";
  auto back = Event::FromJson(Json::parse(stored));
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->ts, 0);
  EXPECT_EQ(DumpJson(back->ToJson()), stored);
  EXPECT_EQ(back->Dump("s1"), stored);
}

TEST(EventTest, MalformedTimestampIsRejected) {
  for (const char* bad : {R"("1767225600123")", "-5", "0", "1.5"}) {
    Json j = Json::parse(std::string(R"({"type":"notice","seq":1,"ts":)") + bad + "}");
    auto e = Event::FromJson(j);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.error().message().find("ts"), std::string::npos) << e.error().ToString();
  }
}

// Event::Dump writes what DumpJson(ToJson()) with the session id replaced
// writes, for every shape of data.
TEST(EventTest, DumpIsTheTextOfToJson) {
  Message odd;
  odd.role = Role::kUser;
  odd.content.push_back(ContentBlock::Text("caf\xc3\xa9 \n\x01 \xff"));
  CompactionData compaction;
  compaction.summary = Message::User("s");
  std::vector<Event> events = {
      Event(ToolCallBeginData{"c1", "read", Json()}, "s1", "t1", 42),
      Event(MessageData{odd}, "", "t\"2", 7),
      Event(StepEndData{}, "s1", "", 1),
      Event(NoticeData{}, "s1", "t", 3, 5),
      Event(compaction, "s1", "t", 4),
  };
  for (const Event& e : events) {
    Json j = e.ToJson();
    j["session_id"] = "sess";
    EXPECT_EQ(e.Dump("sess"), DumpJson(j)) << DumpJson(j);
  }
}

TEST(JsonTest, ParseErrorsNameOffset) {
  auto r = ParseJson("{\"a\": }");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("byte"), std::string::npos);
  EXPECT_EQ(DumpJson(Json{{"s", std::string("a\xFF")}}), "{\"s\":\"a\xEF\xBF\xBD\"}");
}

struct SchemaCase {
  const char* input;
  bool ok;
  const char* message_part;
};

TEST(SchemaTest, Table) {
  Json schema = Json::parse(R"({
    "type": "object",
    "properties": {
      "file_path": {"type": "string", "minLength": 1},
      "offset": {"type": "integer", "minimum": 1},
      "mode": {"type": "string", "enum": ["a", "b"]},
      "tags": {"type": "array", "items": {"type": "string"}}
    },
    "required": ["file_path"],
    "additionalProperties": false
  })");
  const SchemaCase cases[] = {
      {R"({"file_path":"x"})", true, ""},
      {R"({"file_path":"x","offset":3})", true, ""},
      {R"({"file_path":"x","offset":3.0})", true, ""},
      {R"({})", false, "file_path: required field is missing"},
      {R"({"file_path":5})", false, "file_path: expected string, got integer"},
      {R"({"file_path":""})", false, "file_path: shorter than 1"},
      {R"({"file_path":"x","offset":0})", false, "offset: must be >= 1"},
      {R"({"file_path":"x","offset":1.5})", false, "offset: expected integer, got number"},
      {R"({"file_path":"x","mode":"c"})", false, "mode: must be one of"},
      {R"({"file_path":"x","tags":["a",1]})", false, "tags[1]: expected string"},
      {R"({"file_path":"x","extra":1})", false, "extra: unknown field"},
      {R"([1])", false, "arguments: expected object, got array"},
  };
  for (const auto& c : cases) {
    Status s = ValidateAgainstSchema(Json::parse(c.input), schema);
    EXPECT_EQ(s.ok(), c.ok) << c.input;
    if (!c.ok) {
      EXPECT_NE(s.message().find(c.message_part), std::string::npos) << s.message();
    }
  }
}

}  // namespace
}  // namespace agentloop
