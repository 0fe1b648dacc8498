// The integration binary: the real Engine (store, tools, rules, hooks)
// against the fake model server over real HTTP on 127.0.0.1, in each wire
// format. Assertions cover the outcome on disk, the event stream and the
// request bodies the server received.
#include <fstream>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/engine.h"

#include "base/ids.h"
#include "base/testing/files.h"
#include "fake_model_server.h"
#include "permissions/webhook.h"

namespace agentloop {
namespace {

namespace fs = std::filesystem;
using testing::FakeModelServer;
using ::testing::HasSubstr;

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class Events : public EventSink {
 public:
  std::vector<Event> all;
  Status OnEvent(const Event& e) override {
    all.push_back(e);
    return Status::Ok();
  }
  size_t Count(EventType t) const {
    size_t n = 0;
    for (const auto& e : all) n += e.type == t ? 1 : 0;
    return n;
  }
};

// The fix-a-bug script: read the file, fix it with edit, run the check, answer.
Json FixBugScript() {
  return Json::parse(R"({"responses": [
    {"thinking": "look first", "thinking_signature": "sig-1",
     "tool_calls": [{"id": "c1", "name": "read", "input": {"file_path": "calc.py"}}],
     "usage": {"input_tokens": 100, "output_tokens": 20}},
    {"tool_calls": [{"id": "c2", "name": "edit", "input": {"file_path": "calc.py",
       "old_string": "return a - b", "new_string": "return a + b"}}],
     "usage": {"input_tokens": 150, "output_tokens": 20}},
    {"tool_calls": [{"id": "c3", "name": "bash", "input": {"command": "grep -c 'a + b' calc.py"}}],
     "usage": {"input_tokens": 200, "output_tokens": 20}},
    {"text": "Fixed: add() now adds.", "usage": {"input_tokens": 250, "output_tokens": 10}}
  ]})");
}

struct FormatCase {
  const char* provider;
  const char* path;
  bool base_has_v1;  // the OpenAI formats take a base URL ending in /v1-like prefix
};

class ProviderFormatTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(ProviderFormatTest, FixABugOverRealHttp) {
  const FormatCase& fc = GetParam();
  TempDir tmp;
  fs::path ws = tmp.path() / "ws";
  WriteFile(ws / "calc.py", "def add(a, b):\n    return a - b\n");
  auto server = FakeModelServer::Start(FixBugScript());
  ASSERT_TRUE(server.ok()) << server.error().ToString();

  EngineOptions eo;
  eo.env = {{"HOME", (tmp.path() / "home").string()}};
  eo.data_dir = tmp.path() / "data";
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();

  SessionOptions so;
  so.workspace = ws;
  so.provider = *ParseProviderKind(fc.provider);
  so.model = "test-model";
  so.api_key = "sk-test-secret-key-0123456789";
  so.base_url = (*server)->base_url();
  so.allow.push_back({"*", "--allow"});
  so.reflector = false;
  auto session = (*engine)->OpenSession(so);
  ASSERT_TRUE(session.ok()) << session.error().ToString();
  Events events;
  SessionCallbacks cb;
  cb.observer = &events;
  auto r = RunBlocking(**session, op::UserInput{"make the add test pass"}, cb, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  EXPECT_EQ(r->final_text, "Fixed: add() now adds.");
  EXPECT_EQ(ReadFile(ws / "calc.py"), "def add(a, b):\n    return a + b\n");
  EXPECT_EQ(r->counters.tool_calls, 3);
  EXPECT_EQ(r->counters.model_calls, 4);
  EXPECT_EQ(events.Count(EventType::kToolCallBegin), 3u);
  EXPECT_GE(events.Count(EventType::kTextDelta), 1u);

  auto reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 4u);
  for (const auto& q : reqs) {
    EXPECT_THAT(q.path, HasSubstr(fc.path));
    // The API key travels in a header, never in the body.
    EXPECT_EQ(q.body.find("sk-test-secret"), std::string::npos);
  }
  // The last request carries every earlier tool result, matched by call id,
  // and the bash output of the check.
  const std::string& last = reqs[3].body;
  EXPECT_THAT(last, HasSubstr("c1"));
  EXPECT_THAT(last, HasSubstr("c2"));
  EXPECT_THAT(last, HasSubstr("c3"));
  EXPECT_THAT(last, HasSubstr("return a - b"));  // the read result
  auto body = Json::parse(last);
  EXPECT_TRUE(body.value("stream", false));
  if (std::string(fc.provider) == "anthropic") {
    // Thinking goes back unchanged, with its signature, first in its message.
    EXPECT_THAT(last, HasSubstr("sig-1"));
  }
  // Nothing in the store leaks the key either.
  auto stored = (*engine)->store().Events((*session)->id(), 0);
  ASSERT_TRUE(stored.ok());
  for (const auto& e : *stored) EXPECT_EQ(e.json.find("sk-test-secret"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Formats, ProviderFormatTest,
                         ::testing::Values(FormatCase{"openai", "/chat/completions", true},
                                           FormatCase{"anthropic", "/v1/messages", false},
                                           FormatCase{"openai-responses", "/responses", true}),
                         [](const auto& tp) {
                           std::string n = tp.param.provider;
                           for (auto& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// EngineOptions::preconnect_for: the connection opens during Engine::Create,
// before any session exists, and the session's first request uses it.
TEST(PreconnectTest, EngineConnectsBeforeTheSessionAndTheRequestUsesIt) {
  TempDir tmp;
  fs::path ws = tmp.path() / "ws";
  fs::create_directories(ws);
  auto server = FakeModelServer::Start(Json::parse(R"({"responses": [{"text": "hi"}]})"));
  ASSERT_TRUE(server.ok());
  SessionOptions so;
  so.workspace = ws;
  so.provider = ProviderKind::kOpenAI;
  so.model = "m";
  so.api_key = "sk-test";
  so.base_url = (*server)->base_url() + "/v1";
  so.reflector = false;
  EngineOptions eo;
  eo.env = {{"HOME", (tmp.path() / "home").string()}};
  eo.data_dir = tmp.path() / "data";
  eo.preconnect_for = so;
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();
  ASSERT_TRUE((*server)->WaitForConnections(1, std::chrono::seconds(30)));
  EXPECT_TRUE((*server)->requests().empty());
  auto session = (*engine)->OpenSession(so);
  ASSERT_TRUE(session.ok()) << session.error().ToString();
  auto r = RunBlocking(**session, op::UserInput{"hello"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->final_text, "hi");
  EXPECT_EQ((*server)->requests().size(), 1u);
  EXPECT_EQ((*server)->connections_accepted(), 1u);
}

TEST(WebhookApprovalTest, SignedNotificationThenDurablePause) {
  TempDir tmp;
  fs::path ws = tmp.path() / "ws";
  fs::create_directories(ws);
  EngineOptions eo;
  eo.env = {{"HOME", (tmp.path() / "home").string()}};
  eo.data_dir = tmp.path() / "data";
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok());
  // One server plays both the model (first item) and the webhook receiver
  // (second item: a plain 200 answer). The receiver looks the item up from
  // inside its handler, as one that decides at once would: the pause is
  // stored before the webhook is told of it.
  std::mutex mu;
  std::string looked_up;
  FakeModelServer::Options fo;
  fo.on_request = [&](const agentloop::testing::RecordedHttpRequest& req) {
    if (req.path != "/hook") return;
    Json payload = Json::parse(req.body, nullptr, false);
    auto found = (*engine)->store().GetPending(payload.value("pending_id", ""));
    std::lock_guard<std::mutex> lock(mu);
    looked_up = found.ok() && found->has_value() ? "found" : "missing";
  };
  auto server = FakeModelServer::Start(Json::parse(R"({"responses": [
    {"tool_calls": [{"id": "w1", "name": "write", "input": {"file_path": "a.txt", "content": "x"}}]},
    {"http_status": 200, "body": "ok"}
  ]})"),
                                       fo);
  ASSERT_TRUE(server.ok());
  SessionOptions so;
  so.workspace = ws;
  so.provider = ProviderKind::kOpenAI;
  so.model = "m";
  so.api_key = "sk-test";
  so.base_url = (*server)->base_url();
  so.approver = ApproverMode::kWebhook;
  so.webhook_url = (*server)->base_url() + "/hook";
  so.webhook_secret = "s3cret";
  so.reflector = false;
  auto session = (*engine)->OpenSession(so);
  ASSERT_TRUE(session.ok()) << session.error().ToString();
  auto r = RunBlocking(**session, op::UserInput{"write a.txt"}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stop, StopReason::kPendingApproval);
  EXPECT_FALSE(fs::exists(ws / "a.txt"));
  auto reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 2u);
  const auto& hook = reqs[1];
  EXPECT_EQ(hook.path, "/hook");
  std::string signature;
  for (const auto& [k, v] : hook.headers) {
    std::string key = k;
    for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (key == "x-agentloop-signature") signature = v;
  }
  EXPECT_TRUE(permissions::VerifySignature("s3cret", hook.body, signature)) << signature;
  EXPECT_FALSE(permissions::VerifySignature("s3cret", hook.body + " ", signature));
  auto payload = Json::parse(hook.body);
  EXPECT_EQ(payload["tool"], "write");
  EXPECT_EQ(payload["pending_id"], r->pending.at(0).id);
  auto pending = (*engine)->ListPending(std::nullopt);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->size(), 1u);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(looked_up, "found");
}

}  // namespace
}  // namespace agentloop
