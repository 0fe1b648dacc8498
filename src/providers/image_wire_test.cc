// Images in the three wire formats: a tool result with an image, and a user
// message with one, as each format sends them to a model that takes images
// (golden JSON) and to one that does not (a line describing each image).
#include <gtest/gtest.h>

#include "providers/factory.h"
#include "providers/http_provider.h"
#include "providers/model_limits.h"

namespace agentloop {
namespace {

// A 1x1 PNG (70 bytes).
constexpr char kPng[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg"
    "==";
constexpr char kDescribed[] =
    "[image image/png, 70 bytes, not shown: the model does not accept images]";

Message ToolResultWithImage() {
  Message m;
  m.role = Role::kUser;
  ContentBlock r = ContentBlock::ToolResult("call_1", "the picture:", false);
  r.images.push_back(ContentBlock::Image("image/png", kPng));
  m.content.push_back(r);
  m.content.push_back(ContentBlock::ToolResult("call_2", "plain", false));
  return m;
}

Message UserWithImage() {
  Message m = Message::User("what is this?");
  m.content.push_back(ContentBlock::Image("image/png", kPng));
  return m;
}

// The JSON values of a fragment ("a,b,c" of SerializeMessage).
Json Fragment(const std::string& s) {
  Result<Json> j = ParseJson("[" + s + "]");
  EXPECT_TRUE(j.ok()) << s;
  return j.ok() ? *j : Json::array();
}

const std::string kDataUrl = std::string("data:image/png;base64,") + kPng;

TEST(ImageWire, AnthropicSendsImagesInTheToolResult) {
  auto f = NewAnthropicFormat({.images = true});
  EXPECT_EQ(Fragment(f->SerializeMessage(ToolResultWithImage())), Json::parse(R"([{
    "role": "user",
    "content": [
      {"type": "tool_result", "tool_use_id": "call_1", "content": [
        {"type": "text", "text": "the picture:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": ")" + std::string(kPng) + R"("}}]},
      {"type": "tool_result", "tool_use_id": "call_2", "content": "plain"}]}])"));
  EXPECT_EQ(Fragment(f->SerializeMessage(UserWithImage())), Json::parse(R"([{
    "role": "user",
    "content": [
      {"type": "text", "text": "what is this?"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                   "data": ")" + std::string(kPng) + R"("}}]}])"));
}

TEST(ImageWire, AnthropicDescribesImagesToAModelWithoutThem) {
  auto f = NewAnthropicFormat({});
  Json j = Fragment(f->SerializeMessage(ToolResultWithImage()));
  EXPECT_EQ(j[0]["content"][0]["content"], std::string("the picture:\n") + kDescribed);
  j = Fragment(f->SerializeMessage(UserWithImage()));
  EXPECT_EQ(j[0]["content"][1], (Json{{"type", "text"}, {"text", kDescribed}}));
  EXPECT_EQ(j.dump().find(kPng), std::string::npos);
}

TEST(ImageWire, ResponsesSendsInputImagePartsInTheFunctionCallOutput) {
  auto f = NewOpenAiResponsesFormat({.images = true});
  EXPECT_EQ(Fragment(f->SerializeMessage(ToolResultWithImage())), Json::parse(R"([
    {"type": "function_call_output", "call_id": "call_1", "output": [
      {"type": "input_text", "text": "the picture:"},
      {"type": "input_image", "image_url": ")" + kDataUrl + R"(", "detail": "auto"}]},
    {"type": "function_call_output", "call_id": "call_2", "output": "plain"}])"));
  EXPECT_EQ(Fragment(f->SerializeMessage(UserWithImage())), Json::parse(R"([
    {"type": "message", "role": "user", "content": [
      {"type": "input_text", "text": "what is this?"},
      {"type": "input_image", "image_url": ")" + kDataUrl + R"(", "detail": "auto"}]}])"));
}

TEST(ImageWire, ResponsesDescribesImagesToAModelWithoutThem) {
  auto f = NewOpenAiResponsesFormat({});
  Json j = Fragment(f->SerializeMessage(ToolResultWithImage()));
  EXPECT_EQ(j[0]["output"], std::string("the picture:\n") + kDescribed);
  j = Fragment(f->SerializeMessage(UserWithImage()));
  EXPECT_EQ(j[0]["content"][1], (Json{{"type", "input_text"}, {"text", kDescribed}}));
}

TEST(ImageWire, ChatSendsToolImagesInAUserMessageAfterTheToolMessages) {
  auto f = NewOpenAiChatFormat({.images = true});
  EXPECT_EQ(Fragment(f->SerializeMessage(ToolResultWithImage())), Json::parse(R"([
    {"role": "tool", "tool_call_id": "call_1",
     "content": "the picture:\n[image 1 of tool call call_1 (image/png): in the next user message]"},
    {"role": "tool", "tool_call_id": "call_2", "content": "plain"},
    {"role": "user", "content": [
      {"type": "text", "text": "image 1 of tool call call_1 (image/png):"},
      {"type": "image_url", "image_url": {"url": ")" + kDataUrl + R"("}}]}])"));
  EXPECT_EQ(Fragment(f->SerializeMessage(UserWithImage())), Json::parse(R"([
    {"role": "user", "content": [
      {"type": "text", "text": "what is this?"},
      {"type": "image_url", "image_url": {"url": ")" + kDataUrl + R"("}}]}])"));
}

TEST(ImageWire, ChatDescribesImagesToAModelWithoutThem) {
  auto f = NewOpenAiChatFormat({});
  Json j = Fragment(f->SerializeMessage(ToolResultWithImage()));
  ASSERT_EQ(j.size(), 2u);  // no user message with attachments
  EXPECT_EQ(j[0]["content"], std::string("the picture:\n") + kDescribed);
  j = Fragment(f->SerializeMessage(UserWithImage()));
  EXPECT_EQ(j[0]["content"][1], (Json{{"type", "text"}, {"text", kDescribed}}));
}

// The factory asks the model table, and a configured value wins.
TEST(ImageWire, FactoryTakesTheCapabilityFromTheTableOrTheConfiguration) {
  EXPECT_TRUE(LookupModelLimits("gpt-4o").images);
  EXPECT_TRUE(LookupModelLimits("claude-sonnet-4-5").images);
  EXPECT_FALSE(LookupModelLimits("llama3.1").images);
  EXPECT_FALSE(LookupModelLimits("some-local-model").images);
  std::vector<Message> h{ToolResultWithImage()};
  ModelRequest req;
  req.history = h;
  auto body = [&](const std::string& model, std::optional<bool> images) {
    ProviderConfig c;
    c.kind = "anthropic";
    c.model = model;
    c.base_url = "http://127.0.0.1:1";
    c.images = images;
    auto p = MakeProvider(c, nullptr);
    EXPECT_TRUE(p.ok());
    return dynamic_cast<HttpProvider&>(**p).BuildBody(req);
  };
  EXPECT_NE(body("claude-sonnet-4-5", std::nullopt).find("\"source\""), std::string::npos);
  EXPECT_NE(body("llama3.1", std::nullopt).find(kDescribed), std::string::npos);
  EXPECT_NE(body("llama3.1", true).find("\"source\""), std::string::npos);
  EXPECT_NE(body("claude-sonnet-4-5", false).find(kDescribed), std::string::npos);
}

}  // namespace
}  // namespace agentloop
