#include "protocol/image.h"

#include <gtest/gtest.h>

#include "agentloop/engine.h"

#include "base/strings.h"
#include "protocol/codec.h"
#include "protocol/session_settings.h"

namespace agentloop {
namespace {

// A 1x1 PNG (70 bytes).
constexpr char kPng[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg"
    "==";

TEST(ImageTest, AcceptsTheFourMediaTypesWithTheirSignatures) {
  EXPECT_TRUE(ValidateImage("image/png", kPng).ok());
  EXPECT_TRUE(ValidateImage("image/jpeg", Base64Encode("\xFF\xD8\xFF\xE0rest-of-jpeg")).ok());
  EXPECT_TRUE(ValidateImage("image/gif", Base64Encode("GIF89a....")).ok());
  EXPECT_TRUE(
      ValidateImage("image/webp", Base64Encode(std::string("RIFF\x10\0\0\0WEBPVP8 ....", 20)))
          .ok());
  EXPECT_EQ(*Base64DecodedSize(kPng), 70u);
}

TEST(ImageTest, RefusesOtherTypesBadBase64MismatchedBytesAndOversize) {
  Status s = ValidateImage("image/bmp", Base64Encode("BM...."));
  EXPECT_NE(s.message().find("media type 'image/bmp' is not one of"), std::string::npos)
      << s.message();
  s = ValidateImage("image/png", "iVBORw0KGgo");  // length 11
  EXPECT_NE(s.message().find("not base64: its length 11"), std::string::npos) << s.message();
  s = ValidateImage("image/png", "iVBO Rw0K");
  EXPECT_FALSE(s.ok());
  s = ValidateImage("image/png", "iVB=Rw0K");  // '=' inside
  EXPECT_NE(s.message().find("character 3 is outside its alphabet"), std::string::npos)
      << s.message();
  s = ValidateImage("image/jpeg", kPng);  // a PNG declared as JPEG
  EXPECT_NE(s.message().find("the bytes are not a jpeg image"), std::string::npos) << s.message();
  s = ValidateImage("image/png", "");
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s.message();
  // The cap counts decoded bytes: 70 passes a cap of 70, not one of 69.
  EXPECT_TRUE(ValidateImage("image/png", kPng, 70).ok());
  s = ValidateImage("image/png", kPng, 69);
  EXPECT_NE(s.message().find("70 bytes, more than the 69 an image may have"), std::string::npos)
      << s.message();
  // The default cap is 5 MiB.
  std::string big = "\x89PNG\r\n\x1a\n" + std::string(kMaxImageBytes, 'x');
  EXPECT_FALSE(ValidateImage("image/png", Base64Encode(big)).ok());
  big.resize(kMaxImageBytes);
  EXPECT_TRUE(ValidateImage("image/png", Base64Encode(big)).ok());
}

TEST(ImageTest, DescriptionNamesTypeSizeAndWhy) {
  EXPECT_EQ(
      DescribeImage(ContentBlock::Image("image/png", kPng), "the model does not accept images"),
      "[image image/png, 70 bytes, not shown: the model does not accept images]");
}

TEST(ImageTest, ImageBlocksRoundTripThroughTheCodec) {
  Message m;
  m.role = Role::kUser;
  ContentBlock r = ContentBlock::ToolResult("call_1", "a picture", false);
  r.images.push_back(ContentBlock::Image("image/png", kPng));
  m.content.push_back(r);
  m.content.push_back(ContentBlock::Image("image/png", kPng));
  Json j = ToJson(m);
  EXPECT_EQ(j["content"][0]["images"][0],
            (Json{{"type", "image"}, {"media_type", "image/png"}, {"data", kPng}}));
  EXPECT_EQ(j["content"][0]["content"], "a picture");
  Result<Message> back = MessageFromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(*back, m);
  // Without images the encoding is what it always was.
  EXPECT_FALSE(ToJson(ContentBlock::ToolResult("c", "x", false)).contains("images"));
}

TEST(ImageTest, StoredToolResultsWithoutImagesStillLoad) {
  Result<Message> old = MessageFromJson(Json::parse(
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"ok"}]})"));
  ASSERT_TRUE(old.ok()) << old.error().ToString();
  EXPECT_TRUE(old->content[0].images.empty());
  EXPECT_EQ(old->content[0].text, "ok");
}

TEST(ImageTest, DecodingRefusesBadImages) {
  Result<ContentBlock> b =
      ContentBlockFromJson(Json{{"type", "image"}, {"media_type", "image/tiff"}, {"data", kPng}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("image block: media type 'image/tiff'"), std::string::npos);
  b = ContentBlockFromJson(Json{{"type", "tool_result"},
                                {"tool_use_id", "c"},
                                {"content", ""},
                                {"images", Json::array({Json{{"type", "text"}, {"text", "x"}}})}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("images holds a block of type 'text'"), std::string::npos);
  b = ContentBlockFromJson(
      Json{{"type", "tool_result"}, {"tool_use_id", "c"}, {"content", ""}, {"images", "x"}});
  EXPECT_FALSE(b.ok());
}

// provider.images is pinned with a session: unset (the model table
// decides), true or false, and settings stored without it load as unset.
TEST(ImageTest, TheImagesSettingIsPinned) {
  for (std::optional<bool> images :
       {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    SessionOptions o;
    o.workspace = "/ws";
    o.images = images;
    Json j = PinnedSettingsToJson(o);
    Result<SessionOptions> back = PinnedSettingsFromJson(j);
    ASSERT_TRUE(back.ok()) << back.error().ToString();
    EXPECT_EQ(back->images, images);
    j["provider"].erase("images");
    back = PinnedSettingsFromJson(j);
    ASSERT_TRUE(back.ok());
    EXPECT_FALSE(back->images.has_value());
  }
  SessionOptions o;
  Json j = PinnedSettingsToJson(o);
  j["provider"]["images"] = "yes";
  Result<SessionOptions> bad = PinnedSettingsFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("'provider.images' must be true or false"),
            std::string::npos);
}

}  // namespace
}  // namespace agentloop
