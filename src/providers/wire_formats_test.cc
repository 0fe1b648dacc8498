// The three wire formats against the fake model server: streamed events,
// final responses, exact request bodies (golden files), retries and errors.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/ids.h"
#include "fake_model_server.h"
#include "providers/factory.h"
#include "providers/http_provider.h"

namespace agentloop {
namespace {

using testing::FakeModelServer;

constexpr char kKey[] = "sk-test-SECRETKEY0123456789";

struct Sink : StreamSink {
  std::string text, thinking;
  void OnTextDelta(std::string_view t) override { text += t; }
  void OnThinkingDelta(std::string_view t) override { thinking += t; }
};

struct Fixture {
  std::unique_ptr<FakeModelServer> server;
  std::unique_ptr<ModelProvider> provider;
  std::vector<int64_t> waits;
};

std::unique_ptr<Fixture> Make(const std::string& kind, const Json& script) {
  auto f = std::make_unique<Fixture>();
  auto s = FakeModelServer::Start(script);
  EXPECT_TRUE(s.ok());
  f->server = std::move(*s);
  ProviderConfig c;
  c.kind = kind;
  c.model = "test-model";
  c.api_key = kKey;
  c.base_url = f->server->base_url() + (kind == "anthropic" ? "" : "/v1");
  c.retry_wait = [w = &f->waits](std::chrono::milliseconds d, const std::stop_token&) {
    w->push_back(d.count());
    return true;
  };
  auto p = MakeProvider(WithEnvDefaults(c, {}), nullptr);
  EXPECT_TRUE(p.ok());
  f->provider = std::move(*p);
  return f;
}

// A history exercising every block kind.
std::vector<Message> RichHistory() {
  std::vector<Message> h;
  h.push_back(Message::User("Fix the bug in a.txt"));
  Message a;
  a.role = Role::kAssistant;
  ContentBlock th = ContentBlock::Thinking("I should read it", "sig-abc");
  th.meta = Json{{"item_id", "rs_9"}};
  a.content.push_back(th);
  a.content.push_back(ContentBlock::RedactedThinking("opaque=="));
  a.content.push_back(ContentBlock::Text("Reading."));
  ContentBlock call = ContentBlock::ToolUse("call_1", "read", Json{{"path", "a.txt"}});
  call.meta = Json{{"item_id", "fc_1"}};
  a.content.push_back(call);
  ContentBlock bad = ContentBlock::ToolUse("call_2", "bash", nullptr);
  bad.raw_input = "{\"cmd\": ls";
  a.content.push_back(bad);
  h.push_back(a);
  Message r;
  r.role = Role::kUser;
  r.content.push_back(ContentBlock::ToolResult("call_1", "hello", false));
  r.content.push_back(ContentBlock::ToolResult("call_2", "ERROR: invalid arguments", true));
  h.push_back(r);
  Message tool_only;
  tool_only.role = Role::kAssistant;
  tool_only.content.push_back(ContentBlock::ToolUse("call_3", "read", Json{{"path", "b"}}));
  h.push_back(tool_only);
  Message r2;
  r2.role = Role::kUser;
  r2.content.push_back(ContentBlock::ToolResult("call_3", "B", false));
  h.push_back(r2);
  Message sys;
  sys.role = Role::kSystem;
  sys.tag = "budget-nudge";
  sys.content.push_back(ContentBlock::Text("Wrap up."));
  h.push_back(sys);
  return h;
}

std::vector<ToolSpec> Tools() {
  ToolSpec t;
  t.name = "read";
  t.description = "Read a file";
  t.input_schema = Json::parse(R"({"type":"object","properties":{"path":{"type":"string"}},
                                   "required":["path"]})");
  return {t};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectGolden(const std::string& name, const std::string& body) {
  Result<Json> j = ParseJson(body);
  ASSERT_TRUE(j.ok()) << "request body is not JSON: " << body;
  std::string pretty = j->dump(2) + "\n";
  std::string path = std::string(AL_GOLDEN_DIR) + "/" + name;
  const char* update = std::getenv("AL_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << pretty;
    return;
  }
  std::string want = ReadFile(path);
  ASSERT_FALSE(want.empty()) << "missing golden " << path << " (run with AL_UPDATE_GOLDEN=1)";
  EXPECT_EQ(pretty, want) << "golden mismatch: " << path;
}

const Json kRichResponse = Json::parse(R"({
  "thinking": "Need to look", "thinking_signature": "SIG-1",
  "text": "Let me check both files.",
  "tool_calls": [{"id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
                 {"id": "toolu_2", "name": "bash", "arguments": "{not json"}],
  "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
})");

class WireFormats : public ::testing::TestWithParam<std::string> {};

TEST_P(WireFormats, StreamsAndSendsExactRequest) {
  const std::string kind = GetParam();
  Json item = kRichResponse;
  item["chunk_size"] = 7;  // chunk boundaries anywhere
  auto f = Make(kind, Json::array({item}));
  std::vector<Message> h = RichHistory();
  std::vector<ToolSpec> tools = Tools();
  ModelRequest req;
  req.system = "You are a careful agent.";
  req.history = h;
  req.tail.push_back(Message::User("[open tasks: 1]"));
  req.tools = tools;
  req.max_output_tokens = 1000;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(sink.text, "Let me check both files.");
  EXPECT_EQ(sink.thinking, "Need to look");
  ASSERT_EQ(r->content.size(), 4u);
  EXPECT_EQ(r->content[0].type, BlockType::kThinking);
  EXPECT_EQ(r->content[0].text, "Need to look");
  if (kind != "openai") {
    EXPECT_EQ(r->content[0].signature, "SIG-1");
  }
  if (kind == "openai-responses") {
    EXPECT_EQ(r->content[0].meta["item_id"], "rs_1");
  }
  EXPECT_EQ(r->content[1].text, "Let me check both files.");
  EXPECT_EQ(r->content[2].id, "toolu_1");
  EXPECT_EQ(r->content[2].name, "read");
  EXPECT_EQ(r->content[2].input, Json::parse(R"({"path":"a.txt"})"));
  if (kind == "openai-responses") {
    EXPECT_EQ(r->content[2].meta["item_id"], "fc_1");
  }
  EXPECT_TRUE(r->content[3].input.is_null());
  EXPECT_EQ(r->content[3].raw_input, "{not json");
  EXPECT_EQ(r->finish, FinishReason::kToolUse);
  ASSERT_TRUE(r->has_usage);
  EXPECT_EQ(r->usage.input_tokens, 100);
  EXPECT_EQ(r->usage.output_tokens, 20);
  EXPECT_EQ(r->usage.cache_read_tokens, 30);
  EXPECT_TRUE(r->has_cache_usage);
  EXPECT_EQ(r->model, "fake-model");

  auto reqs = f->server->requests();
  ASSERT_EQ(reqs.size(), 1u);
  if (kind == "anthropic") {
    EXPECT_EQ(reqs[0].path, "/v1/messages");
    EXPECT_EQ(FindHeader(reqs[0].headers, "x-api-key"), kKey);
    EXPECT_EQ(FindHeader(reqs[0].headers, "anthropic-version"), "2023-06-01");
  } else {
    EXPECT_EQ(reqs[0].path, kind == "openai" ? "/v1/chat/completions" : "/v1/responses");
    EXPECT_EQ(FindHeader(reqs[0].headers, "authorization"), std::string("Bearer ") + kKey);
  }
  ExpectGolden(kind + "_request.json", reqs[0].body);
}

// A server that reports only its prompt's total (no cache figures): the
// whole prompt is uncached input, and the response says no cache figures
// came, so the token budget estimates what the request added.
TEST_P(WireFormats, UsageWithoutCacheFigures) {
  auto f = Make(GetParam(), Json::parse(R"([{"text": "done",
      "usage": {"input_tokens": 4200, "output_tokens": 9}}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_TRUE(r->has_usage);
  EXPECT_FALSE(r->has_cache_usage);
  EXPECT_EQ(r->usage.input_tokens, 4200);
  EXPECT_EQ(r->usage.output_tokens, 9);
  EXPECT_EQ(r->usage.cache_read_tokens, 0);
}

TEST_P(WireFormats, TextOnlyStopAndLength) {
  auto f =
      Make(GetParam(), Json::parse(R"([{"text": "done"}, {"text": "cut", "finish": "length"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->finish, FinishReason::kStop);
  ASSERT_EQ(r->content.size(), 1u);
  EXPECT_FALSE(r->has_usage);
  r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->finish, FinishReason::kLength);
}

// A refusal (Anthropic "refusal", OpenAI "content_filter") is its own finish,
// never a plain stop.
TEST_P(WireFormats, ARefusalIsReportedAsRefused) {
  auto f =
      Make(GetParam(), Json::parse(R"([{"text": "I can't help with that", "finish": "refused"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->finish, FinishReason::kRefused);
}

// Warm() opens the connection before any request; the first request uses it.
TEST_P(WireFormats, WarmOpensTheConnectionTheFirstRequestUses) {
  auto f = Make(GetParam(), Json::parse(R"([{"text": "done"}])"));
  f->provider->Warm();
  ASSERT_TRUE(f->server->WaitForConnections(1, std::chrono::seconds(30)));
  EXPECT_TRUE(f->server->requests().empty());
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(f->server->requests().size(), 1u);
  EXPECT_EQ(f->server->connections_accepted(), 1u);
}

TEST_P(WireFormats, RetryAfter429ThenSuccess) {
  auto f = Make(GetParam(), Json::parse(R"([
      {"error": {"code": "resource_exhausted", "message": "slow down"},
       "headers": {"retry-after-ms": "1234"}},
      {"error": {"code": "unavailable"}},
      {"text": "ok"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->content[0].text, "ok");
  ASSERT_EQ(f->waits.size(), 2u);
  EXPECT_EQ(f->waits[0], 1234);
  EXPECT_EQ(f->server->requests().size(), 3u);
  // Every attempt sends the same body.
  EXPECT_EQ(f->server->requests()[0].body, f->server->requests()[2].body);
}

TEST_P(WireFormats, BadRequestIsNotRetried) {
  auto f = Make(
      GetParam(),
      Json::parse(
          R"([{"error": {"code": "invalid_argument", "message": "bad field"}}, {"text": "never"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_NE(r.error().message().find("bad field"), std::string::npos);
  EXPECT_EQ(f->server->requests().size(), 1u);
}

TEST_P(WireFormats, MidStreamErrorRetriesTheWholeRequest) {
  auto f = Make(GetParam(), Json::parse(R"([
      {"text": "partial answer", "stream_error": {"type": "overloaded_error", "message": "Overloaded"}},
      {"text": "full answer"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->content.size(), 1u);
  EXPECT_EQ(r->content[0].text, "full answer");  // nothing partial
  EXPECT_EQ(f->server->requests().size(), 2u);
}

TEST_P(WireFormats, DroppedConnectionIsRetried) {
  auto f = Make(GetParam(), Json::parse(R"([
      {"text": "some long text that will be cut", "drop_after_bytes": 40},
      {"text": "second"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->content[0].text, "second");
  EXPECT_EQ(f->server->requests().size(), 2u);
}

TEST_P(WireFormats, PromptTooLongIsClassified) {
  auto f = Make(
      GetParam(),
      Json::parse(
          R"([{"error": {"code": "prompt_too_long", "message": "prompt is too long: 300000 tokens"}}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kPromptTooLong);
  EXPECT_EQ(f->server->requests().size(), 1u);
}

TEST_P(WireFormats, TruncatedStreamIsDataLoss) {
  auto f = Make(GetParam(), Json::parse(R"([{"text": "abc", "truncate": true}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDataLoss);
  EXPECT_NE(r.error().message().find("stream ended without"), std::string::npos)
      << r.error().message();
}

TEST_P(WireFormats, MalformedEventIsDataLoss) {
  auto f =
      Make(GetParam(), Json::parse(R"([{"raw_sse": "event: message_start\ndata: {nope\n\n"}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDataLoss);
  EXPECT_NE(r.error().message().find("malformed"), std::string::npos) << r.error().message();
}

TEST_P(WireFormats, CancellationReturnsCancelled) {
  auto f = Make(GetParam(), Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  std::stop_source src;
  std::thread t([&] {
    ASSERT_TRUE(f->server->WaitForRequests(1, std::chrono::seconds(30)));
    src.request_stop();
  });
  auto r = f->provider->Complete(req, sink, src.get_token());
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kCancelled);
}

TEST_P(WireFormats, ApiKeyNeverInErrors) {
  std::string body =
      std::string(R"({"error": {"message": "Incorrect API key provided: )") + kKey + R"("}})";
  Json script = Json::array({Json{{"http_status", 401}, {"body", body}}});
  auto f = Make(GetParam(), script);
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  Sink sink;
  auto r = f->provider->Complete(req, sink, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kPermissionDenied);
  EXPECT_EQ(r.error().message().find(kKey), std::string::npos) << r.error().message();
  EXPECT_EQ(r.error().message().find("SECRETKEY"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(All, WireFormats,
                         ::testing::Values("openai", "anthropic", "openai-responses"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST(RequestBuilding, CachedFragmentsAreReused) {
  HttpProviderOptions o;
  o.model = "m";
  o.base_url = "http://127.0.0.1:1";
  HttpProvider p(NewAnthropicFormat({}), o, nullptr);
  std::vector<Message> h = RichHistory();
  for (size_t i = 0; i < h.size(); ++i) h[i].uid = i + 1;
  ModelRequest req;
  req.history = h;
  // The newest message carries Anthropic's moving cache breakpoint and is
  // never taken from the cache.
  std::string b1 = p.BuildBody(req);
  EXPECT_EQ(p.cache().misses(), h.size() - 1);
  std::string b2 = p.BuildBody(req);
  EXPECT_EQ(b1, b2);
  EXPECT_EQ(p.cache().hits(), h.size() - 1);
  h.push_back(Message::User("next"));
  h.back().uid = 100;
  req.history = h;
  std::string b3 = p.BuildBody(req);
  EXPECT_EQ(p.cache().misses(), h.size() - 1);
  EXPECT_NE(b3.find("next"), std::string::npos);
}

// One provider per wire format (request building only: the URL is unused).
std::vector<std::unique_ptr<HttpProvider>> ProvidersOfEveryFormat() {
  HttpProviderOptions o;
  o.model = "m";
  o.base_url = "http://127.0.0.1:1";
  std::vector<std::unique_ptr<HttpProvider>> out;
  out.push_back(std::make_unique<HttpProvider>(NewOpenAiChatFormat({}), o, nullptr));
  out.push_back(std::make_unique<HttpProvider>(NewAnthropicFormat({}), o, nullptr));
  out.push_back(std::make_unique<HttpProvider>(NewOpenAiResponsesFormat({}), o, nullptr));
  return out;
}

// The tool list is serialized once and reused, but a changed tool (here its
// schema only) must show up in the next body, in every format.
TEST(RequestBuilding, ToolListFollowsChangedTools) {
  for (auto& provider : ProvidersOfEveryFormat()) {
    HttpProvider& p = *provider;
    std::vector<Message> h{Message::User("hi")};
    std::vector<ToolSpec> tools(1);
    tools[0].name = "probe";
    tools[0].description = "d";
    tools[0].input_schema =
        Json{{"type", "object"}, {"properties", {{"alpha", {{"type", "string"}}}}}};
    ModelRequest req;
    req.history = h;
    req.tools = tools;
    std::string b1 = p.BuildBody(req);
    EXPECT_EQ(p.BuildBody(req), b1);
    EXPECT_NE(b1.find("alpha"), std::string::npos);
    tools[0].input_schema["properties"] = Json{{"beta", {{"type", "string"}}}};
    std::string b2 = p.BuildBody(req);
    EXPECT_EQ(b2.find("alpha"), std::string::npos) << b2;
    EXPECT_NE(b2.find("beta"), std::string::npos) << b2;
    req.tools = {};
    std::string b3 = p.BuildBody(req);
    EXPECT_EQ(b3.find("probe"), std::string::npos) << b3;
  }
}

// A request's tools_uid identifies its tools: the same non-zero uid is a
// cache hit without comparing the specs, a new uid or 0 compares them.
TEST(RequestBuilding, ToolListIdentityByUid) {
  for (auto& provider : ProvidersOfEveryFormat()) {
    HttpProvider& p = *provider;
    std::vector<Message> h{Message::User("hi")};
    std::vector<ToolSpec> tools(1);
    tools[0].name = "probe";
    tools[0].input_schema = Json{{"type", "object"}, {"properties", {{"alpha", Json::object()}}}};
    ModelRequest req;
    req.history = h;
    req.tools = tools;
    // The table of serialized lists is shared by the process: uids of
    // their own keep this test apart from others.
    const uint64_t uid = RandomU64() | 1;
    req.tools_uid = uid;
    EXPECT_NE(p.BuildBody(req).find("alpha"), std::string::npos);
    // Same uid: trusted, the specs are not looked at (the contract says
    // they cannot differ).
    tools[0].input_schema["properties"] = Json{{"beta", Json::object()}};
    EXPECT_NE(p.BuildBody(req).find("alpha"), std::string::npos);
    // Another uid, or none: rebuilt.
    req.tools_uid = RandomU64() | 1;
    std::string b = p.BuildBody(req);
    EXPECT_NE(b.find("beta"), std::string::npos) << b;
    tools[0].input_schema["properties"] = Json{{"gamma", Json::object()}};
    req.tools_uid = 0;
    b = p.BuildBody(req);
    EXPECT_NE(b.find("gamma"), std::string::npos) << b;
  }
}

// Providers of the same format (one per session) share the serialized list
// of a tools_uid: the second provider's body holds the first one's list, not
// a serialization of its own (here told apart by a changed schema, which
// the uid's contract rules out in real requests).
TEST(RequestBuilding, ProvidersShareTheSerializedListOfAUid) {
  auto first = ProvidersOfEveryFormat();
  auto second = ProvidersOfEveryFormat();
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<Message> h{Message::User("hi")};
    std::vector<ToolSpec> tools(1);
    tools[0].name = "probe";
    tools[0].input_schema = Json{{"type", "object"}, {"properties", {{"alpha", Json::object()}}}};
    ModelRequest req;
    req.history = h;
    req.tools = tools;
    req.tools_uid = RandomU64() | 1;
    EXPECT_NE(first[i]->BuildBody(req).find("alpha"), std::string::npos);
    tools[0].input_schema["properties"] = Json{{"beta", Json::object()}};
    std::string b = second[i]->BuildBody(req);
    EXPECT_NE(b.find("alpha"), std::string::npos) << b;
    EXPECT_EQ(b.find("beta"), std::string::npos) << b;
  }
}

TEST(RequestBuilding, ChatMaxTokensFieldSetting) {
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  req.max_output_tokens = 77;
  HttpProviderOptions o;
  o.base_url = "http://127.0.0.1:1";
  HttpProvider a(NewOpenAiChatFormat({}), o, nullptr);
  EXPECT_NE(a.BuildBody(req).find("\"max_completion_tokens\":77"), std::string::npos);
  HttpProvider b(NewOpenAiChatFormat({.use_max_tokens_field = true}), o, nullptr);
  EXPECT_NE(b.BuildBody(req).find("\"max_tokens\":77"), std::string::npos);
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Anthropic: breakpoints on the last tool, the system text and the newest
// message; the one on the newest message moves as the history grows, so
// there are never more than the API's four.
TEST(RequestBuilding, AnthropicCacheBreakpointsMoveWithTheNewestMessage) {
  HttpProviderOptions o;
  o.base_url = "http://127.0.0.1:1";
  HttpProvider p(NewAnthropicFormat({}), o, nullptr);
  std::vector<Message> h = RichHistory();
  for (size_t i = 0; i < h.size(); ++i) h[i].uid = i + 1;
  std::vector<ToolSpec> tools = Tools();
  ModelRequest req;
  req.system = "sys";
  req.history = h;
  req.tools = tools;
  for (int step = 0; step < 3; ++step) {
    Result<Json> body = ParseJson(p.BuildBody(req));
    ASSERT_TRUE(body.ok());
    EXPECT_EQ(Count(body->dump(), "cache_control"), 3u) << step;
    EXPECT_TRUE((*body)["tools"].back().contains("cache_control"));
    EXPECT_TRUE((*body)["system"][0].contains("cache_control"));
    EXPECT_EQ((*body)["system"][0]["text"], "sys");
    const Json& msgs = (*body)["messages"];
    EXPECT_TRUE(msgs.back()["content"].back().contains("cache_control"));
    for (size_t i = 0; i + 1 < msgs.size(); ++i) {
      EXPECT_EQ(Count(msgs[i].dump(), "cache_control"), 0u) << step << "/" << i;
    }
    h.push_back(Message::User("step " + std::to_string(step)));
    h.back().uid = 1000 + static_cast<uint64_t>(step);
    req.history = h;
  }
  // A tail message is the newest when there is one.
  req.tail.push_back(Message::User("[open tasks]"));
  Result<Json> body = ParseJson(p.BuildBody(req));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ((*body)["messages"].back()["content"].back()["text"], "[open tasks]");
  EXPECT_TRUE((*body)["messages"].back()["content"].back().contains("cache_control"));
  EXPECT_EQ(Count(body->dump(), "cache_control"), 3u);
}

TEST(RequestBuilding, OpenAiPromptCacheKeyOnlyWhenEnabled) {
  std::vector<Message> h{Message::User("hi")};
  ModelRequest req;
  req.history = h;
  req.cache_key = "sess_1";
  HttpProviderOptions o;
  o.base_url = "http://127.0.0.1:1";
  for (bool responses : {false, true}) {
    auto make = [&](bool on) {
      WireOptions w;
      w.prompt_cache_key = on;
      return std::make_unique<HttpProvider>(
          responses ? NewOpenAiResponsesFormat(w) : NewOpenAiChatFormat(w), o, nullptr);
    };
    EXPECT_NE(make(true)->BuildBody(req).find("\"prompt_cache_key\":\"sess_1\""),
              std::string::npos);
    EXPECT_EQ(make(false)->BuildBody(req).find("prompt_cache_key"), std::string::npos);
  }
  // The factory enables it for OpenAI's own API only.
  ProviderConfig c;
  c.kind = "openai";
  c.base_url = "https://api.openai.com/v1";
  c.api_key = "k";
  auto official = MakeProvider(c, nullptr);
  ASSERT_TRUE(official.ok());
  auto* hp = dynamic_cast<HttpProvider*>(official->get());
  ASSERT_NE(hp, nullptr);
  EXPECT_NE(hp->BuildBody(req).find("prompt_cache_key"), std::string::npos);
  c.base_url = "http://127.0.0.1:8080/v1";
  auto local = MakeProvider(c, nullptr);
  ASSERT_TRUE(local.ok());
  hp = dynamic_cast<HttpProvider*>(local->get());
  ASSERT_NE(hp, nullptr);
  EXPECT_EQ(hp->BuildBody(req).find("prompt_cache_key"), std::string::npos);
}

TEST(Factory, EnvDefaultsAndErrors) {
  ProviderConfig c;
  c.kind = "anthropic";
  ProviderConfig d = WithEnvDefaults(c, {{"ANTHROPIC_API_KEY", "k1"}, {"OPENAI_API_KEY", "k2"}});
  EXPECT_EQ(d.api_key, "k1");
  EXPECT_EQ(d.base_url, "https://api.anthropic.com");
  c.kind = "openai";
  d = WithEnvDefaults(c, {{"OPENAI_BASE_URL", "http://local/v1"}});
  EXPECT_EQ(d.base_url, "http://local/v1");
  c.api_key = "explicit";
  EXPECT_EQ(WithEnvDefaults(c, {{"OPENAI_API_KEY", "env"}}).api_key, "explicit");
  c.kind = "nope";
  EXPECT_EQ(MakeProvider(c, nullptr).error().code(), Code::kInvalidArgument);
  c.kind = "script";
  EXPECT_EQ(MakeProvider(c, nullptr).error().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace agentloop
