#include "server/notifier.h"

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

namespace agentloop::server {
namespace {

namespace asio = boost::asio;

struct Posted {
  std::string url, body;
  permissions::HttpHeaders headers;
  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
};

// A receiver that answers each POST with the next status of `script` (OK
// after the script ends), from the io thread as the HTTP client would.
struct Receiver {
  Receiver(asio::io_context& context, std::vector<Status> answers)
      : io(context), script(std::move(answers)) {}
  NotifierOptions Options() {
    NotifierOptions o;
    o.post = [this](const std::string& url, const permissions::HttpHeaders& headers,
                    const std::string& body, std::function<void(Status)> done) {
      posted.push_back({url, body, headers});
      Status s = next < script.size() ? script[next++] : Status::Ok();
      asio::post(io, [done = std::move(done), s] { done(s); });
    };
    o.initial_backoff = std::chrono::milliseconds(0);
    o.on_done = [this](const Notification&, const Status& s, int attempts) {
      ended.emplace_back(s, attempts);
    };
    return o;
  }
  asio::io_context& io;
  std::vector<Status> script;
  size_t next = 0;
  std::vector<Posted> posted;
  std::vector<std::pair<Status, int>> ended;
};

TEST(NotifierTest, RetriesTransientFailuresAndSignsEveryAttempt) {
  asio::io_context io;
  Receiver rx(io, {Unavailable("connection refused"), Unavailable("HTTP 503")});
  Notifier n(io, rx.Options());
  n.Send({"http://127.0.0.1:9/hook", "s3cret", "approval.requested", R"({"a":1})", "", {}});
  EXPECT_EQ(n.in_flight(), 1u);
  io.run();
  ASSERT_EQ(rx.posted.size(), 3u);
  ASSERT_EQ(rx.ended.size(), 1u);
  EXPECT_TRUE(rx.ended[0].first.ok());
  EXPECT_EQ(rx.ended[0].second, 3);
  EXPECT_EQ(n.in_flight(), 0u);
  for (const Posted& p : rx.posted) {
    EXPECT_EQ(p.body, R"({"a":1})");
    EXPECT_TRUE(permissions::VerifySignature("s3cret", p.body,
                                             p.Header(std::string(permissions::kSignatureHeader))));
    EXPECT_EQ(p.Header("X-Agentloop-Event"), "approval.requested");
  }
  // One delivery id across its attempts.
  EXPECT_FALSE(rx.posted[0].Header("X-Agentloop-Delivery").empty());
  EXPECT_EQ(rx.posted[0].Header("X-Agentloop-Delivery"),
            rx.posted[2].Header("X-Agentloop-Delivery"));
}

// A notification that names its delivery id (one recorded in the store's
// outbox) is posted under it; on_done hands it back.
TEST(NotifierTest, AGivenDeliveryIdIsKept) {
  asio::io_context io;
  Receiver rx(io, {Unavailable("HTTP 503")});
  std::string done_id;
  NotifierOptions o = rx.Options();
  o.on_done = [&](const Notification& n, const Status&, int) { done_id = n.delivery_id; };
  Notifier n(io, o);
  n.Send({"http://127.0.0.1:9/hook", "s3cret", "turn.completed", "{}", "dlv_pnd_1", {}});
  io.run();
  ASSERT_EQ(rx.posted.size(), 2u);
  EXPECT_EQ(rx.posted[0].Header("X-Agentloop-Delivery"), "dlv_pnd_1");
  EXPECT_EQ(rx.posted[1].Header("X-Agentloop-Delivery"), "dlv_pnd_1");
  EXPECT_EQ(done_id, "dlv_pnd_1");
}

TEST(NotifierTest, APermanentRefusalOrTheLastAttemptEndsTheDelivery) {
  asio::io_context io;
  Receiver rx(io, {FailedPrecondition("webhook answered HTTP 404")});
  Notifier n(io, rx.Options());
  n.Send({"http://127.0.0.1:9/hook", "s3cret", "turn.completed", "{}", "", {}});
  io.run();
  ASSERT_EQ(rx.ended.size(), 1u);
  EXPECT_EQ(rx.ended[0].first.code(), Code::kFailedPrecondition);
  EXPECT_EQ(rx.ended[0].second, 1);

  asio::io_context io2;
  Receiver always(io2, std::vector<Status>(10, Unavailable("down")));
  NotifierOptions o = always.Options();
  o.max_attempts = 4;
  Notifier n2(io2, o);
  n2.Send({"http://127.0.0.1:9/hook", "s3cret", "turn.completed", "{}", "", {}});
  io2.run();
  EXPECT_EQ(always.posted.size(), 4u);
  ASSERT_EQ(always.ended.size(), 1u);
  EXPECT_EQ(always.ended[0].first.code(), Code::kUnavailable);
}

TEST(NotifierTest, AStoppedNotifierMakesNoFurtherAttempt) {
  asio::io_context io;
  Receiver rx(io, {Unavailable("down"), Unavailable("down")});
  auto n = std::make_unique<Notifier>(io, rx.Options());
  n->Send({"http://127.0.0.1:9/hook", "s3cret", "turn.completed", "{}", "", {}});
  n.reset();  // the first attempt's answer is still queued on io
  io.run();
  EXPECT_EQ(rx.posted.size(), 1u);
  EXPECT_TRUE(rx.ended.empty());
}

}  // namespace
}  // namespace agentloop::server
