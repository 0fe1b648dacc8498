#include "server/pugi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::server {
namespace {

using ::testing::HasSubstr;

Json PugiBody(Json tools = Json::array()) {
  return {{"personaSlug", "coder"},
          {"messages", Json::array({{{"role", "system"}, {"content", "be brief"}},
                                    {{"role", "user"}, {"content", "list files"}}})},
          {"tools", std::move(tools)}};
}

Json PugiTool(const std::string& name) {
  return {{"name", name}, {"description", "d"}, {"parameters", {{"type", "object"}}}};
}

TEST(PugiTest, ATranscriptWithToolCallsBecomesTheEnginesMessages) {
  Json body = PugiBody(Json::array({PugiTool("read")}));
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"toolCalls",
        Json::array({{{"id", "c1"}, {"name", "read"}, {"arguments", R"({"file_path":"a"})"}},
                     {{"id", "c2"}, {"name", "read"}, {"arguments", ""}}})}});
  body["messages"].push_back({{"role", "tool"}, {"content", "A"}, {"toolCallId", "c1"}});
  body["messages"].push_back({{"role", "tool"}, {"content", "error: gone"}, {"toolCallId", "c2"}});
  Result<PugiCall> call = ParsePugiRequest(body);
  ASSERT_TRUE(call.ok()) << call.error().message();
  EXPECT_EQ(call->system, "be brief");
  ASSERT_EQ(call->messages.size(), 3u);
  EXPECT_EQ(call->messages[1].content[0].input["file_path"], "a");
  EXPECT_EQ(call->messages[1].content[1].input, Json::object());
  // Both results answer one batch: one user message.
  ASSERT_EQ(call->messages[2].content.size(), 2u);
  EXPECT_EQ(call->messages[2].content[1].tool_use_id, "c2");
  EXPECT_TRUE(call->messages[2].content[1].is_error);
  EXPECT_FALSE(call->messages[2].content[0].is_error);
}

TEST(PugiTest, TheSchemasCapsAreEnforced) {
  Json many = Json::array();
  for (int i = 0; i < 65; ++i) many.push_back(PugiTool("t" + std::to_string(i)));
  EXPECT_THAT(ParsePugiRequest(PugiBody(many)).error().message(), HasSubstr("at most 64"));
  many.erase(many.begin());
  EXPECT_TRUE(ParsePugiRequest(PugiBody(many)).ok());

  Json big = PugiBody();
  big["maxTokens"] = 200'001;
  EXPECT_THAT(ParsePugiRequest(big).error().message(), HasSubstr("maxTokens"));
  big["maxTokens"] = 200'000;
  EXPECT_TRUE(ParsePugiRequest(big).ok());

  auto refused = [](Json b) { return !ParsePugiRequest(b).ok(); };
  Json j = PugiBody();
  j["personaSlug"] = std::string(129, 'a');
  EXPECT_TRUE(refused(j));
  j = PugiBody();
  j["messages"] = Json::array();
  EXPECT_TRUE(refused(j));
  j = PugiBody();
  j["temperature"] = 2.5;
  EXPECT_TRUE(refused(j));
  j = PugiBody();
  j["command"] = "deploy";
  EXPECT_TRUE(refused(j));
  j = PugiBody();
  j["model"] = "";
  EXPECT_TRUE(refused(j));
  j = PugiBody();
  j["extra"] = 1;
  EXPECT_TRUE(refused(j));
  j = PugiBody(Json::array({PugiTool("read"), PugiTool("read")}));
  EXPECT_TRUE(refused(j));
  j = PugiBody();
  j["messages"].push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"toolCalls", Json::array({{{"id", "c"}, {"name", "x"}, {"arguments", "[1]"}}})}});
  EXPECT_THAT(ParsePugiRequest(j).error().message(), HasSubstr("JSON text of an object"));
}

TEST(PugiTest, PlanModeRefusesAForgedToolList) {
  const std::set<std::string> read_only = {"glob", "grep", "ls", "read"};
  Result<PugiCall> ok =
      ParsePugiRequest(PugiBody(Json::array({PugiTool("read"), PugiTool("grep")})));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(CheckPugiPlanTools(*ok, read_only).ok());
  Result<PugiCall> forged =
      ParsePugiRequest(PugiBody(Json::array({PugiTool("read"), PugiTool("bash")})));
  ASSERT_TRUE(forged.ok());
  Status s = CheckPugiPlanTools(*forged, read_only);
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("PLAN_MODE_REFUSED"));
  EXPECT_THAT(s.message(), HasSubstr("'bash'"));
}

TEST(PugiTest, TheAnswerNamesItsStop) {
  ModelResponse text;
  ContentBlock done;
  done.type = BlockType::kText;
  done.text = "done";
  text.content.push_back(done);
  text.has_usage = true;
  text.usage.input_tokens = 10;
  text.usage.output_tokens = 2;
  Json a = PugiResponse(text, "m");
  EXPECT_EQ(a["stop"], "text");
  EXPECT_EQ(a["content"], "done");
  EXPECT_EQ(a["tokensUsed"], 12);
  EXPECT_EQ(a["model"], "m");
  EXPECT_FALSE(a.contains("toolCalls"));

  ModelResponse tools;
  ContentBlock call;
  call.type = BlockType::kToolUse;
  call.id = "c1";
  call.name = "read";
  call.input = {{"file_path", "a"}};
  tools.content.push_back(call);
  tools.finish = FinishReason::kToolUse;
  Json b = PugiResponse(tools, "m");
  EXPECT_EQ(b["stop"], "tool_use");
  EXPECT_EQ(Json::parse(b["toolCalls"][0]["arguments"].get<std::string>())["file_path"], "a");

  text.finish = FinishReason::kLength;
  EXPECT_EQ(PugiResponse(text, "m")["stop"], "length");
}

}  // namespace
}  // namespace agentloop::server
