#include <set>

#include <gtest/gtest.h>

#include "agentloop/status.h"

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

}  // namespace
}  // namespace agentloop
