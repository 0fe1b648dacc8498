#include "permissions/webhook.h"

#include <atomic>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::permissions {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = ApprovalDecision::Kind;
using std::chrono::milliseconds;

constexpr char kSecret[] = "s3cret";

ApprovalRequest Request() {
  ApprovalRequest r;
  r.session_id = "sess_1";
  r.turn_id = "turn_1";
  r.pending_id = "pend_1";
  r.call = ToolCall{"call_1", "bash", Json{{"command", "make deploy"}}};
  r.spec.name = "bash";
  r.reason = "matched rule 'bash(make deploy*)' (ask, from config.toml)";
  return r;
}

// A receiver as a webhook consumer would write it: check the signature
// header against the raw body, then parse.
struct Receiver {
  std::vector<std::string> bodies;
  std::vector<std::string> signatures;
  int accepted = 0;
  int rejected = 0;

  Status Handle(const std::string& url, const HttpHeaders& headers, const std::string& body) {
    EXPECT_EQ(url, "http://127.0.0.1:9/hook");
    std::string sig;
    bool json = false;
    for (const auto& [k, v] : headers) {
      if (k == kSignatureHeader) sig = v;
      if (k == "Content-Type" && v == "application/json") json = true;
    }
    EXPECT_TRUE(json);
    bodies.push_back(body);
    signatures.push_back(sig);
    if (!VerifySignature(kSecret, body, sig)) {
      ++rejected;
      return PermissionDenied("bad signature");
    }
    ++accepted;
    return Status::Ok();
  }
};

struct Harness {
  Receiver receiver;
  std::vector<milliseconds> delays;
  std::vector<WebhookDelivery> reported;
  std::function<Status(int attempt)> fail;  // per attempt (1-based); null: no failure
  std::atomic<int> attempts{0};

  WebhookOptions Options() {
    WebhookOptions o;
    o.url = "http://127.0.0.1:9/hook";
    o.secret = kSecret;
    o.post = [this](const std::string& url, const HttpHeaders& h, const std::string& body) {
      int n = ++attempts;
      if (fail) {
        Status s = fail(n);
        if (!s.ok()) return s;
      }
      return receiver.Handle(url, h, body);
    };
    o.initial_backoff = milliseconds(100);
    o.max_backoff = milliseconds(300);
    o.delay = [this](milliseconds d, std::stop_token) {
      delays.push_back(d);
      return true;
    };
    o.clock = [] {
      return std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
    };
    o.on_delivery = [this](const WebhookDelivery& d) { reported.push_back(d); };
    return o;
  }
};

TEST(SignatureTest, SignAndVerify) {
  auto sig = SignPayload("key", "The quick brown fox jumps over the lazy dog");
  ASSERT_TRUE(sig.ok());
  // RFC 4231-style known answer (HMAC-SHA256 of the pangram under "key").
  EXPECT_EQ(*sig, "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
  EXPECT_TRUE(VerifySignature("key", "The quick brown fox jumps over the lazy dog", *sig));
  std::string upper = "sha256=F7BC83F430538424B13298E6AA6FB143EF4D59A14946175997479DBC2D1A3CD8";
  EXPECT_TRUE(VerifySignature("key", "The quick brown fox jumps over the lazy dog", upper));
  EXPECT_FALSE(VerifySignature("key", "The quick brown fox jumps over the lazy cat", *sig));
  EXPECT_FALSE(VerifySignature("other", "The quick brown fox jumps over the lazy dog", *sig));
  EXPECT_FALSE(VerifySignature("key", "x", "sha256=abc"));
  EXPECT_FALSE(VerifySignature("key", "x", "sha1=" + std::string(64, '0')));
  EXPECT_FALSE(VerifySignature("key", "x", "sha256=" + std::string(64, 'g')));
  EXPECT_FALSE(VerifySignature("", "x", *sig));
  EXPECT_FALSE(SignPayload("", "x").ok());
}

TEST(WebhookApproverTest, CreateValidatesOptions) {
  Harness h;
  WebhookOptions o = h.Options();
  o.secret.clear();
  EXPECT_FALSE(WebhookApprover::Create(o).ok());
  o = h.Options();
  o.url.clear();
  EXPECT_FALSE(WebhookApprover::Create(o).ok());
  o = h.Options();
  o.post = nullptr;
  EXPECT_FALSE(WebhookApprover::Create(o).ok());
  o = h.Options();
  o.max_attempts = 0;
  EXPECT_FALSE(WebhookApprover::Create(o).ok());
}

TEST(WebhookApproverTest, PostsSignedPayloadAndDefers) {
  Harness h;
  auto a = WebhookApprover::Create(h.Options());
  ASSERT_TRUE(a.ok());
  ApprovalDecision d = (*a)->Decide(Request(), {});
  EXPECT_EQ(d.kind, Kind::kDefer);
  EXPECT_EQ(d.by, "webhook");
  ASSERT_EQ(h.receiver.accepted, 1);
  Json payload = *ParseJson(h.receiver.bodies[0]);
  EXPECT_EQ(payload["pending_id"], "pend_1");
  EXPECT_EQ(payload["session_id"], "sess_1");
  EXPECT_EQ(payload["turn_id"], "turn_1");
  EXPECT_EQ(payload["tool_use_id"], "call_1");
  EXPECT_EQ(payload["kind"], "approval");
  EXPECT_EQ(payload["tool"], "bash");
  EXPECT_EQ(payload["arguments"]["command"], "make deploy");
  EXPECT_THAT(payload["reason"].get<std::string>(), HasSubstr("bash(make deploy*)"));
  EXPECT_EQ(payload["requested_at"], 1700000000);
  ASSERT_EQ((*a)->deliveries().size(), 1u);
  EXPECT_TRUE((*a)->deliveries()[0].status.ok());
  EXPECT_EQ((*a)->deliveries()[0].attempts, 1);
}

TEST(WebhookApproverTest, ReceiverRejectsTamperedBody) {
  Harness h;
  auto a = WebhookApprover::Create(h.Options());
  ASSERT_TRUE(a.ok());
  (void)(*a)->Decide(Request(), {});
  ASSERT_EQ(h.receiver.bodies.size(), 1u);
  std::string tampered = h.receiver.bodies[0];
  size_t at = tampered.find("make deploy");
  ASSERT_NE(at, std::string::npos);
  tampered.replace(at, 11, "rm -rf /   ");
  Status s = h.receiver.Handle("http://127.0.0.1:9/hook",
                               {{"Content-Type", "application/json"},
                                {std::string(kSignatureHeader), h.receiver.signatures[0]}},
                               tampered);
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_EQ(h.receiver.rejected, 1);
}

TEST(WebhookApproverTest, QuestionPayload) {
  ApprovalRequest q;
  q.kind = PendingKind::kQuestion;
  q.pending_id = "pend_q";
  q.call = ToolCall{"call_q", "ask_user", Json{{"question", "Which?"}, {"options", {"a", "b"}}}};
  q.reason = "Which?";
  Json p = WebhookApprover::BuildPayload(q, std::chrono::system_clock::time_point{});
  EXPECT_EQ(p["kind"], "question");
  EXPECT_EQ(p["tool"], "ask_user");
  EXPECT_EQ(p["arguments"]["options"][1], "b");
  EXPECT_EQ(p["requested_at"], 0);
}

TEST(WebhookApproverTest, RetriesWithBackoffThenSucceeds) {
  Harness h;
  h.fail = [](int attempt) {
    return attempt <= 3 ? Unavailable("connection refused") : Status::Ok();
  };
  auto a = WebhookApprover::Create(h.Options());
  ASSERT_TRUE(a.ok());
  ApprovalDecision d = (*a)->Decide(Request(), {});
  EXPECT_EQ(d.kind, Kind::kDefer);
  EXPECT_EQ(h.attempts, 4);
  EXPECT_THAT(h.delays, ElementsAre(milliseconds(100), milliseconds(200), milliseconds(300)));
  EXPECT_EQ(h.receiver.accepted, 1);
  ASSERT_EQ(h.reported.size(), 1u);
  EXPECT_TRUE(h.reported[0].status.ok());
  EXPECT_EQ(h.reported[0].attempts, 4);
}

TEST(WebhookApproverTest, DeliveryFailureIsReportedAndStillDefers) {
  Harness h;
  h.fail = [](int) { return Unavailable("503 from receiver"); };
  WebhookOptions o = h.Options();
  o.max_attempts = 3;
  auto a = WebhookApprover::Create(o);
  ASSERT_TRUE(a.ok());
  ApprovalDecision d = (*a)->Decide(Request(), {});
  EXPECT_EQ(d.kind, Kind::kDefer);  // the checkpoint holds the item: nothing is lost
  EXPECT_EQ(h.attempts, 3);
  EXPECT_EQ(h.delays.size(), 2u);
  ASSERT_EQ(h.reported.size(), 1u);
  EXPECT_EQ(h.reported[0].status.code(), Code::kUnavailable);
  EXPECT_EQ(h.reported[0].pending_id, "pend_1");
  std::vector<WebhookDelivery> log = (*a)->deliveries();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_FALSE(log[0].status.ok());
  EXPECT_EQ(log[0].attempts, 3);
  EXPECT_TRUE(VerifySignature(kSecret, log[0].body, *SignPayload(kSecret, log[0].body)));
}

TEST(WebhookApproverTest, NonRetryableFailureIsNotRetried) {
  Harness h;
  h.fail = [](int) { return NotFound("404"); };
  auto a = WebhookApprover::Create(h.Options());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->Decide(Request(), {}).kind, Kind::kDefer);
  EXPECT_EQ(h.attempts, 1);
  EXPECT_TRUE(h.delays.empty());
  EXPECT_EQ((*a)->deliveries()[0].status.code(), Code::kNotFound);
}

TEST(WebhookApproverTest, StopDuringRetriesDenies) {
  Harness h;
  h.fail = [](int) { return Unavailable("down"); };
  std::stop_source stop;
  WebhookOptions o = h.Options();
  o.delay = [&](milliseconds, std::stop_token) {
    stop.request_stop();
    return false;
  };
  auto a = WebhookApprover::Create(o);
  ASSERT_TRUE(a.ok());
  ApprovalDecision d = (*a)->Decide(Request(), stop.get_token());
  EXPECT_EQ(d.kind, Kind::kDeny);
  EXPECT_EQ(h.attempts, 1);
  ASSERT_EQ((*a)->deliveries().size(), 1u);
  EXPECT_EQ((*a)->deliveries()[0].status.code(), Code::kCancelled);
}

TEST(WebhookApproverTest, DefaultDelayWakesOnStop) {
  // The default delay must return promptly when stopped, not after the
  // (here one hour) backoff.
  Harness h;
  h.fail = [](int) { return Unavailable("down"); };
  WebhookOptions o = h.Options();
  o.delay = nullptr;
  o.initial_backoff = std::chrono::hours(1);
  o.max_backoff = std::chrono::hours(1);
  auto a = WebhookApprover::Create(o);
  ASSERT_TRUE(a.ok());
  std::stop_source stop;
  std::jthread stopper([&] {
    // Wait until the first attempt happened, then stop.
    while (h.attempts.load() == 0) std::this_thread::yield();
    stop.request_stop();
  });
  ApprovalDecision d = (*a)->Decide(Request(), stop.get_token());
  EXPECT_EQ(d.kind, Kind::kDeny);
}

}  // namespace
}  // namespace agentloop::permissions
