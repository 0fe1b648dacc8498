#include "providers/retry.h"

#include <gtest/gtest.h>

namespace agentloop {
namespace {

TEST(Classify, HttpStatuses) {
  EXPECT_EQ(ClassifyHttpStatus(429, "{}").code(), Code::kResourceExhausted);
  EXPECT_EQ(ClassifyHttpStatus(408, "").code(), Code::kDeadlineExceeded);
  for (long s : {409, 500, 502, 503, 504, 529}) {
    EXPECT_TRUE(IsRetryable(ClassifyHttpStatus(s, ""))) << s;
  }
  for (long s : {400, 401, 403, 404, 413, 422}) {
    EXPECT_FALSE(IsRetryable(ClassifyHttpStatus(s, R"({"error":{"message":"no"}})"))) << s;
  }
  EXPECT_EQ(ClassifyHttpStatus(401, "").code(), Code::kPermissionDenied);
  EXPECT_EQ(ClassifyHttpStatus(400, "").code(), Code::kInvalidArgument);
}

TEST(Classify, PromptTooLong) {
  EXPECT_EQ(ClassifyHttpStatus(400, R"({"type":"error","error":{"type":"invalid_request_error",
      "message":"prompt is too long: 210000 tokens > 200000 maximum"}})")
                .code(),
            Code::kPromptTooLong);
  EXPECT_EQ(ClassifyHttpStatus(400, R"({"error":{"code":"context_length_exceeded","message":"x"}})")
                .code(),
            Code::kPromptTooLong);
  EXPECT_EQ(ClassifyHttpStatus(413, "This model's maximum context length is 8192").code(),
            Code::kPromptTooLong);
  // Same words on a 500 are not prompt-too-long.
  EXPECT_EQ(ClassifyHttpStatus(500, "too many tokens").code(), Code::kUnavailable);
  Status s = ClassifyHttpStatus(400, R"({"error":{"message":"Input length exceeds the maximum"}})");
  EXPECT_EQ(s.code(), Code::kPromptTooLong);
  EXPECT_NE(s.message().find("HTTP 400"), std::string::npos);
}

TEST(Classify, StreamErrorsAndSecrets) {
  EXPECT_EQ(ClassifyStreamError("overloaded_error", "Overloaded").code(), Code::kUnavailable);
  EXPECT_EQ(ClassifyStreamError("invalid_request_error", "bad").code(), Code::kInvalidArgument);
  Status s = ClassifyHttpStatus(401, R"({"error":{"message":"bad key sk-abcdefghijklmnop1234"}})");
  EXPECT_EQ(s.message().find("sk-abcdefghijklmnop1234"), std::string::npos);
  EXPECT_EQ(s.message().rfind("authentication failed: HTTP 401", 0), 0u) << s.message();
}

TEST(RetryAfter, Parse) {
  EXPECT_EQ(ParseRetryAfter({{"Retry-After", "2"}}), std::chrono::milliseconds(2000));
  EXPECT_EQ(ParseRetryAfter({{"retry-after", "2"}, {"retry-after-ms", "150"}}),
            std::chrono::milliseconds(150));
  EXPECT_EQ(ParseRetryAfter({{"retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"}}), std::nullopt);
  EXPECT_EQ(ParseRetryAfter({}), std::nullopt);
}

TEST(RetryPolicy, BackoffGrowsWithJitterAndCap) {
  RetryPolicy p;
  for (int i = 0; i < 50; ++i) {
    auto d1 = p.Delay(1, std::nullopt);
    EXPECT_GE(d1.count(), 250);
    EXPECT_LE(d1.count(), 500);
    auto d3 = p.Delay(3, std::nullopt);
    EXPECT_GE(d3.count(), 1000);
    EXPECT_LE(d3.count(), 2000);
    auto d20 = p.Delay(20, std::nullopt);
    EXPECT_GE(d20.count(), 15000);
    EXPECT_LE(d20.count(), 30000);
  }
  EXPECT_EQ(p.Delay(1, std::chrono::milliseconds(1234)).count(), 1234);
}

TEST(RetryPolicy, RunWithRetryStopsAtMaxAndOnNonRetryable) {
  std::vector<int64_t> waits;
  RetryPolicy p;
  p.wait = [&](std::chrono::milliseconds d, const std::stop_token&) {
    waits.push_back(d.count());
    return true;
  };
  int calls = 0;
  Result<int> r = RunWithRetry<int>(p, {}, [&](AttemptError*) -> Result<int> {
    ++calls;
    return Unavailable("down");
  });
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(waits.size(), 5u);
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  calls = 0;
  r = RunWithRetry<int>(p, {}, [&](AttemptError*) -> Result<int> {
    ++calls;
    return InvalidArgument("bad");
  });
  EXPECT_EQ(calls, 1);
  calls = 0;
  r = RunWithRetry<int>(p, {}, [&](AttemptError* e) -> Result<int> {
    if (++calls < 3) {
      e->retry_after = std::chrono::milliseconds(7);
      return ResourceExhausted("slow down");
    }
    return 42;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(waits.back(), 7);
}

TEST(RetryPolicy, EachRetryIsReportedWithAttemptDelayAndReason) {
  std::vector<int64_t> waits;
  RetryPolicy p;
  p.max_attempts = 3;
  p.wait = [&](std::chrono::milliseconds d, const std::stop_token&) {
    waits.push_back(d.count());
    return true;
  };
  std::vector<RetryData> heard;
  Result<int> r = RunWithRetry<int>(
      p, {},
      [&](AttemptError* e) -> Result<int> {
        e->retry_after = std::chrono::milliseconds(2000);
        return ResourceExhausted("HTTP 429");
      },
      [&](const RetryData& d) { heard.push_back(d); });
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].attempt, 2);
  EXPECT_EQ(heard[1].attempt, 3);
  EXPECT_EQ(heard[0].max_attempts, 3);
  EXPECT_EQ(heard[0].delay_ms, 2000);
  EXPECT_EQ(heard[0].reason, "HTTP 429");
  EXPECT_EQ(waits, (std::vector<int64_t>{2000, 2000}));
  EXPECT_EQ(r.error().message(), "HTTP 429 (after 3 attempts)");

  // The decision alone, for callers with their own timer.
  RetryStep last = NextRetry(p, 3, AttemptError{Unavailable("down"), std::nullopt});
  EXPECT_FALSE(last.retry.has_value());
  EXPECT_EQ(last.final.message(), "down (after 3 attempts)");
  RetryStep no = NextRetry(p, 1, AttemptError{InvalidArgument("bad"), std::nullopt});
  EXPECT_FALSE(no.retry.has_value());
  EXPECT_EQ(no.final.code(), Code::kInvalidArgument);
  RetryStep yes = NextRetry(p, 1, AttemptError{Unavailable("down"), std::nullopt});
  ASSERT_TRUE(yes.retry.has_value());
  EXPECT_EQ(yes.retry->attempt, 2);
  EXPECT_GE(yes.retry->delay_ms, 250);
  EXPECT_LE(yes.retry->delay_ms, 500);
}

TEST(RetryPolicy, WaitIsInterruptible) {
  std::stop_source src;
  src.request_stop();
  EXPECT_FALSE(InterruptibleWait(std::chrono::hours(1), src.get_token()));
  RetryPolicy p;  // real wait: cancelled at once by the stop token
  Result<int> r = RunWithRetry<int>(p, src.get_token(),
                                    [&](AttemptError*) -> Result<int> { return Unavailable("x"); });
  EXPECT_EQ(r.error().code(), Code::kCancelled);
}

}  // namespace
}  // namespace agentloop
