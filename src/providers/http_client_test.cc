#include "providers/http_client.h"

#include <thread>

#include <gtest/gtest.h>

#include "fake_model_server.h"

namespace agentloop {
namespace {

using testing::FakeModelServer;

struct Buffer : HttpStreamHandler {
  long status = 0;
  std::string body;
  Status OnHead(long s, const HttpHeaders&) override {
    status = s;
    return Status::Ok();
  }
  Status OnBody(std::string_view b) override {
    body += b;
    return Status::Ok();
  }
};

TEST(HttpClient, PostAndConnectionReuse) {
  auto server = FakeModelServer::Start(Json::parse(
      R"([{"http_status": 200, "body": {"ok": 1}}, {"http_status": 202, "body": "second"}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  auto r1 = client->Post((*server)->base_url() + "/hook", {{"X-Sig", "abc"}}, R"({"a":1})");
  ASSERT_TRUE(r1.ok()) << r1.error().ToString();
  EXPECT_EQ(r1->status, 200);
  EXPECT_EQ(r1->body, R"({"ok":1})");
  auto r2 = client->Post((*server)->base_url() + "/hook", {}, "x");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->status, 202);
  EXPECT_EQ(r2->body, "second");
  auto reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].path, "/hook");
  EXPECT_EQ(reqs[0].body, R"({"a":1})");
  EXPECT_EQ(FindHeader(reqs[0].headers, "x-sig"), "abc");
  EXPECT_EQ((*server)->connections_accepted(), 1u);  // keep-alive reuse
}

TEST(HttpClient, ConnectionRefusedIsUnavailable) {
  int port;
  {
    auto s = FakeModelServer::Start(Json::array());
    ASSERT_TRUE(s.ok());
    port = (*s)->port();
  }
  auto client = HttpClient::Create();
  auto r = client->Post("http://127.0.0.1:" + std::to_string(port) + "/x", {}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
}

TEST(HttpClient, StopTokenCancelsAWaitingTransfer) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  std::stop_source src;
  std::thread canceller([&] {
    ASSERT_TRUE((*server)->WaitForRequests(1, std::chrono::seconds(30)));
    src.request_stop();
  });
  HttpRequest req;
  req.url = (*server)->base_url() + "/chat/completions";
  req.body = "{}";
  Buffer b;
  Status st = client->Fetch(req, b, src.get_token());
  canceller.join();
  EXPECT_EQ(st.code(), Code::kCancelled);
}

TEST(HttpClient, IdleTimeoutFailsTheAttempt) {
  auto server = FakeModelServer::Start(
      Json::parse(R"([{"text": "a b c d e f", "chunk_size": 5, "latency_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  HttpRequest req;
  req.url = (*server)->base_url() + "/chat/completions";
  req.idle_timeout = std::chrono::milliseconds(200);
  Buffer b;
  Status st = client->Fetch(req, b, {});
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded) << st.ToString();
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body.size(), 5u);
}

TEST(HttpClient, ManyConcurrentTransfersOnOneEventThread) {
  Json script = Json::array();
  for (int i = 0; i < 16; ++i)
    script.push_back(Json{{"text", "r" + std::to_string(i)}, {"latency_ms", 5}});
  auto server = FakeModelServer::Start(script);
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&] {
      HttpRequest req;
      req.url = (*server)->base_url() + "/chat/completions";
      Buffer b;
      if (client->Fetch(req, b, {}).ok() && b.status == 200 &&
          b.body.find("[DONE]") != std::string::npos) {
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);
  EXPECT_EQ(client->active_transfers(), 0u);
}

TEST(HttpClient, AsyncStartCallsDoneOnce) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "hi"}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  auto handler = std::make_shared<Buffer>();
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  Status result = Internal("unset");
  HttpRequest req;
  req.url = (*server)->base_url() + "/x";
  client->Start(req, handler, [&](Status s) {
    std::lock_guard l(m);
    ++done;
    result = s;
    cv.notify_all();
  });
  std::unique_lock l(m);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return done > 0; }));
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(handler->body, "hi");
}

}  // namespace
}  // namespace agentloop
