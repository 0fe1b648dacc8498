#include <set>

#include <gtest/gtest.h>

#include "agentloop/status.h"

#include "base/env_map.h"
#include "base/ids.h"
#include "base/strings.h"

namespace agentloop {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  AL_ASSIGN_OR_RETURN(int h, Half(x));
  *out = h;
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  Status s = NotFound("no such file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "not_found: no such file");
  EXPECT_EQ(s.WithContext("read").message(), "read: no such file");
}

TEST(StatusTest, ResultAndMacros) {
  int out = 0;
  EXPECT_TRUE(UseHalf(4, &out).ok());
  EXPECT_EQ(out, 2);
  Status bad = UseHalf(3, &out);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.message(), "odd");
}

TEST(StatusTest, RetryableClassification) {
  EXPECT_TRUE(IsRetryable(Unavailable("x")));
  EXPECT_TRUE(IsRetryable(ResourceExhausted("429")));
  EXPECT_TRUE(IsRetryable(DeadlineExceeded("t")));
  EXPECT_FALSE(IsRetryable(InvalidArgument("x")));
  EXPECT_FALSE(IsRetryable(Cancelled("x")));
  EXPECT_FALSE(IsRetryable(PromptTooLong("x")));
}

TEST(IdsTest, UuidShapeAndUniqueness) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string u = NewUuid();
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[14], '4');
    EXPECT_TRUE(seen.insert(u).second);
  }
  EXPECT_TRUE(StartsWith(NewId("turn"), "turn_"));
}

TEST(StringsTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo"));
  EXPECT_FALSE(IsValidUtf8("bad\xFF"));
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(TruncateUtf8("h\xC3\xA9", 2), "h");
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));  // lone surrogate
}

// The decoder's contract: shortest-form scalar values are valid; everything
// else is U+FFFD one byte at a time.
TEST(StringsTest, DecodeUtf8ValidSequences) {
  struct Case {
    std::string_view text;
    char32_t cp;
    size_t size;
  };
  for (const Case& c : {Case{"A", U'A', 1}, Case{"\xC3\xA9", 0xE9, 2},
                        Case{"\xE2\x82\xAC", 0x20AC, 3}, Case{"\xF0\x9F\x98\x80", 0x1F600, 4},
                        Case{"\xF4\x8F\xBF\xBF", 0x10FFFF, 4}, Case{"\xEF\xBF\xBD", 0xFFFD, 3}}) {
    Utf8Char d = DecodeUtf8(c.text, 0);
    EXPECT_TRUE(d.valid) << c.text;
    EXPECT_EQ(d.cp, c.cp) << c.text;
    EXPECT_EQ(d.size, c.size) << c.text;
  }
  Utf8Char nul = DecodeUtf8(std::string_view("\0", 1), 0);
  EXPECT_TRUE(nul.valid);
  EXPECT_EQ(nul.cp, 0u);
}

TEST(StringsTest, DecodeUtf8InvalidIsOneReplacementPerByte) {
  for (std::string_view bad : {
           "\x80",              // stray continuation
           "\xFF",              // never a lead byte
           "\xC3",              // truncated at the end
           "\xE2\x82",          // truncated at the end
           "\xC3(",             // continuation missing
           "\xC0\x80",          // overlong NUL
           "\xC1\xBC",          // overlong '<'
           "\xE0\x80\xBC",      // overlong '<'
           "\xF0\x80\x80\xBC",  // overlong '<'
           "\xED\xA0\x80",      // surrogate U+D800
           "\xED\xBF\xBF",      // surrogate U+DFFF
           "\xF4\x90\x80\x80",  // U+110000
           "\xF7\xBF\xBF\xBF",  // above U+10FFFF
       }) {
    Utf8Char d = DecodeUtf8(bad, 0);
    EXPECT_FALSE(d.valid) << testing::PrintToString(bad);
    EXPECT_EQ(d.cp, 0xFFFDu);
    EXPECT_EQ(d.size, 1u);
    EXPECT_FALSE(IsValidUtf8(bad));
    // Each byte becomes one U+FFFD, or stays when it is valid on its own.
    std::string clean = SanitizeUtf8(bad);
    EXPECT_TRUE(IsValidUtf8(clean));
    EXPECT_EQ(clean.find('<'), std::string::npos) << "an overlong form must not decode";
  }
  // The byte after a bad lead byte is read as a new start.
  EXPECT_EQ(SanitizeUtf8("\xC3("), "\xEF\xBF\xBD(");
  EXPECT_EQ(SanitizeUtf8("\xE2\x82\xC3\xA9"), "\xEF\xBF\xBD\xEF\xBF\xBD\xC3\xA9");
}

TEST(StringsTest, DecodeWtf8AcceptsEncodedSurrogatesOnly) {
  Utf8Char hi = DecodeWtf8("\xED\xA0\xBD", 0);
  EXPECT_TRUE(hi.valid);
  EXPECT_EQ(hi.cp, 0xD83Du);
  EXPECT_EQ(hi.size, 3u);
  EXPECT_FALSE(DecodeWtf8("\xC0\x80", 0).valid);
  EXPECT_FALSE(DecodeWtf8("\xF4\x90\x80\x80", 0).valid);
}

TEST(StringsTest, AppendUtf8RoundTrips) {
  for (char32_t cp : {char32_t{0x41}, char32_t{0xE9}, char32_t{0x7FF}, char32_t{0x800},
                      char32_t{0xFFFD}, char32_t{0x10000}, char32_t{0x10FFFF}}) {
    std::string out;
    AppendUtf8(out, cp);
    Utf8Char d = DecodeUtf8(out, 0);
    EXPECT_TRUE(d.valid);
    EXPECT_EQ(d.cp, cp);
    EXPECT_EQ(d.size, out.size());
  }
}

TEST(EnvTest, ValuesAndXdgDirectories) {
  EnvMap env = {{"HOME", "/home/me"}, {"EMPTY", ""}};
  EXPECT_EQ(EnvValue(env, "HOME"), "/home/me");
  EXPECT_EQ(EnvValue(env, "EMPTY"), "");
  EXPECT_EQ(EnvValue(env, "UNSET"), "");
  EXPECT_EQ(XdgUserDir(env, "XDG_DATA_HOME", ".local/share"),
            std::filesystem::path("/home/me/.local/share"));
  env["XDG_DATA_HOME"] = "/data";
  EXPECT_EQ(XdgUserDir(env, "XDG_DATA_HOME", ".local/share"), std::filesystem::path("/data"));
  env["XDG_DATA_HOME"] = "relative/data";  // invalid: ignored
  EXPECT_EQ(XdgUserDir(env, "XDG_DATA_HOME", ".local/share"),
            std::filesystem::path("/home/me/.local/share"));
  EXPECT_EQ(XdgUserDir({}, "XDG_CONFIG_HOME", ".config"), std::nullopt);
}

TEST(StringsTest, RedactSecrets) {
  std::string r = RedactSecrets("key sk-abcdef1234567890 and Bearer abcdefghijklmnop123");
  EXPECT_EQ(r.find("sk-abcdef"), std::string::npos);
  EXPECT_EQ(r.find("abcdefghijklmnop"), std::string::npos);
  EXPECT_NE(r.find("[REDACTED]"), std::string::npos);
}

TEST(StringsTest, SplitTrim) {
  auto parts = Split("a,b,,c", ',');
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[2], "");
  EXPECT_EQ(Trim("  x y \n"), "x y");
}

TEST(StringsTest, ClosestMatchSuggestsOnlyCloseWords) {
  EXPECT_EQ(EditDistance("modle", "model"), 2u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  const std::vector<std::string_view> words = {"model", "provider", "output"};
  EXPECT_EQ(ClosestMatch("modle", words), "model");
  EXPECT_EQ(ClosestMatch("provdier", words), "provider");
  EXPECT_EQ(ClosestMatch("xyzzy-plugh", words), "");
  EXPECT_EQ(ClosestMatch("modle", words, 2), "");  // distance 2 is not below 2
}

TEST(StringsTest, HexEncodeIsTwoLowercaseDigitsPerByte) {
  EXPECT_EQ(HexEncode(""), "");
  EXPECT_EQ(HexEncode(std::string("\x00\x0f\xa0\xff", 4)), "000fa0ff");
  EXPECT_EQ(HexEncode("ok"), "6f6b");
}

TEST(StringsTest, Base64RoundTripsBothAlphabets) {
  // RFC 4648's test vectors.
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("\xfb\xff", true), "-_8");
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\x00\xff\x10 x", 5)}) {
    for (bool url : {false, true}) {
      Result<std::string> back = Base64Decode(Base64Encode(s, url), url);
      ASSERT_TRUE(back.ok()) << s;
      EXPECT_EQ(*back, s);
    }
  }
  EXPECT_FALSE(Base64Decode("Zm9v!", false).ok());
  EXPECT_FALSE(Base64Decode("+/8", true).ok());  // the other alphabet
  EXPECT_FALSE(Base64Decode("Zm9vY", false).ok());
}

TEST(StringsTest, HtmlEscapeLeavesNoMarkup) {
  EXPECT_EQ(HtmlEscape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  EXPECT_EQ(HtmlEscape("plain"), "plain");
}

}  // namespace
}  // namespace agentloop
