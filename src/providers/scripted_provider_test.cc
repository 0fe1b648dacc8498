#include "providers/scripted_provider.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

namespace agentloop {
namespace {

struct CollectSink : StreamSink {
  std::string text, thinking;
  int text_calls = 0;
  void OnTextDelta(std::string_view t) override {
    text += t;
    ++text_calls;
  }
  void OnThinkingDelta(std::string_view t) override { thinking += t; }
};

ModelRequest Req(const std::vector<Message>& history) {
  ModelRequest r;
  r.model = "m";
  r.system = "sys";
  r.history = history;
  return r;
}

TEST(ScriptedProvider, ReplaysTextThinkingAndToolCalls) {
  Json script = Json::parse(R"({"responses": [
    {"thinking": "hmm", "thinking_signature": "sig", "text": "hello world, streamed",
     "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 2}},
    {"tool_calls": [{"name": "read", "input": {"path": "a"}},
                    {"id": "x", "name": "bash", "arguments": "{not json"}]}
  ]})");
  ScriptedProvider p(script);
  std::vector<Message> h{Message::User("hi")};
  CollectSink sink;
  auto r1 = p.Complete(Req(h), sink, {});
  ASSERT_TRUE(r1.ok()) << r1.error().ToString();
  EXPECT_EQ(sink.text, "hello world, streamed");
  EXPECT_GT(sink.text_calls, 1);
  EXPECT_EQ(sink.thinking, "hmm");
  ASSERT_EQ(r1->content.size(), 2u);
  EXPECT_EQ(r1->content[0].type, BlockType::kThinking);
  EXPECT_EQ(r1->content[0].signature, "sig");
  EXPECT_EQ(r1->finish, FinishReason::kStop);
  EXPECT_TRUE(r1->has_usage);
  EXPECT_EQ(r1->usage.input_tokens, 10);
  EXPECT_EQ(r1->usage.cache_read_tokens, 2);

  auto r2 = p.Complete(Req(h), sink, {});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->finish, FinishReason::kToolUse);
  EXPECT_FALSE(r2->has_usage);
  ASSERT_EQ(r2->content.size(), 2u);
  EXPECT_EQ(r2->content[0].id, "call_1");
  EXPECT_EQ(r2->content[0].input, Json::parse(R"({"path":"a"})"));
  EXPECT_EQ(r2->content[1].id, "x");
  EXPECT_TRUE(r2->content[1].input.is_null());
  EXPECT_EQ(r2->content[1].raw_input, "{not json");

  auto r3 = p.Complete(Req(h), sink, {});
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(r3.error().message(), "script exhausted after 2 responses");
}

TEST(ScriptedProvider, ErrorItemsAndRecording) {
  Json script = Json::parse(
      R"([{"error": {"code": "prompt_too_long", "message": "too big"}}, {"text": "ok"}])");
  ScriptedProvider p(script);
  std::vector<Message> h{Message::User("a"), Message::Assistant("b"), Message::User("c")};
  std::vector<ToolSpec> tools(2);
  tools[0].name = "read";
  tools[1].name = "bash";
  ModelRequest r = Req(h);
  r.tools = tools;
  r.max_output_tokens = 123;
  r.tail.push_back(Message::User("tail"));
  CollectSink sink;
  auto r1 = p.Complete(r, sink, {});
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code(), Code::kPromptTooLong);
  EXPECT_EQ(r1.error().message(), "too big");
  ASSERT_TRUE(p.Complete(r, sink, {}).ok());
  ASSERT_EQ(p.requests().size(), 2u);
  const RecordedRequest& rec = p.requests()[0];
  EXPECT_EQ(rec.system, "sys");
  EXPECT_EQ(rec.message_count, 4u);
  EXPECT_EQ(rec.last_message.JoinedText(), "tail");
  EXPECT_EQ(rec.max_output_tokens, 123);
  EXPECT_EQ(rec.tool_names, (std::vector<std::string>{"read", "bash"}));
  EXPECT_EQ(p.remaining(), 0u);
}

TEST(ScriptedProvider, DelayIsCancellable) {
  ScriptedProvider p(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  std::stop_source src;
  std::vector<Message> h{Message::User("a")};
  CollectSink sink;
  std::thread t([&] { src.request_stop(); });
  auto r = p.Complete(Req(h), sink, src.get_token());
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kCancelled);
  EXPECT_TRUE(sink.text.empty());
}

TEST(ScriptedProvider, InvalidScriptsAreReported) {
  EXPECT_FALSE(ScriptedProvider::FromJson(Json::parse(R"({"nope": 1})")).ok());
  auto bad = ScriptedProvider::FromJson(Json::parse(R"([{"text": 3}])"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("script item 0"), std::string::npos);
  EXPECT_FALSE(ScriptedProvider::FromJson(Json::parse(R"([{"error": {"code": "bogus"}}])")).ok());
  EXPECT_EQ(ScriptedProvider::FromFile("/nonexistent/x.json").error().code(), Code::kNotFound);
}

TEST(ScriptedProvider, FromFile) {
  std::string path = ::testing::TempDir() + "/script_test.json";
  { std::ofstream(path) << R"({"responses": [{"text": "from file", "finish": "length"}]})"; }
  auto p = ScriptedProvider::FromFile(path);
  ASSERT_TRUE(p.ok()) << p.error().ToString();
  std::vector<Message> h{Message::User("a")};
  CollectSink sink;
  auto r = (*p)->Complete(Req(h), sink, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kLength);
  EXPECT_EQ(r->content[0].text, "from file");
}

}  // namespace
}  // namespace agentloop
