#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "base/strings.h"
#include "mcp/client.h"
#include "mcp/jsonrpc.h"
#include "mcp/tool.h"
#include "protocol/image.h"

namespace agentloop::mcp {
namespace {

using namespace std::chrono_literals;

// An in-process server: records what the client sends and answers through
// `respond` (called on the sending thread, without the client's lock).
class FakeTransport final : public Transport {
 public:
  using Respond = std::function<void(const Json& msg, FakeTransport& t)>;
  explicit FakeTransport(Respond respond) : respond_(std::move(respond)) {}

  Status Start(Handlers h) override {
    handlers_ = std::move(h);
    return Status::Ok();
  }
  Status Send(const std::string& message) override {
    Json msg = Json::parse(message);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Unavailable("closed");
      sent_.push_back(msg);
      cv_.notify_all();
    }
    if (respond_) respond_(msg, *this);
    return Status::Ok();
  }
  void Close() override { ServerGone(Unavailable("closed by client")); }

  bool Deliver(const Json& msg) { return handlers_.on_message(msg.dump()); }
  bool DeliverText(const std::string& text) { return handlers_.on_message(text); }
  void Reply(const Json& id, Json result) {
    Deliver({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
  }
  void ServerGone(const Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
    }
    if (handlers_.on_closed) handlers_.on_closed(why);
  }
  std::vector<Json> sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  // Waits for a sent message with this method.
  std::optional<Json> WaitSent(const std::string& method, size_t nth = 0) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<Json> found;
    cv_.wait_for(lock, 10s, [&] {
      size_t n = 0;
      for (const Json& m : sent_) {
        if (m.value("method", "") == method && n++ == nth) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  Respond respond_;
  Handlers handlers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> sent_;
  bool closed_ = false;
};

Json ToolJson(const std::string& name, bool read_only = false) {
  Json t = {{"name", name},
            {"description", "tool " + name},
            {"inputSchema", {{"type", "object"}, {"properties", Json::object()}}}};
  if (read_only) t["annotations"] = {{"readOnlyHint", true}};
  return t;
}

// A well-behaved server: answers initialize with `version`, lists `tools`
// in pages of two, answers echo.
FakeTransport::Respond Standard(std::string version, std::vector<Json> tools) {
  return [version, tools](const Json& msg, FakeTransport& t) {
    const std::string method = msg.value("method", "");
    if (!msg.contains("id")) return;
    if (method == "initialize") {
      t.Reply(msg["id"], {{"protocolVersion", version},
                          {"capabilities", Json::object()},
                          {"serverInfo", {{"name", "fake"}, {"version", "9"}}},
                          {"instructions", "be nice"}});
    } else if (method == "tools/list") {
      size_t start = 0;
      if (msg["params"].contains("cursor"))
        start = std::stoul(msg["params"]["cursor"].get<std::string>());
      Json page = Json::array();
      for (size_t i = start; i < tools.size() && i < start + 2; ++i) page.push_back(tools[i]);
      Json res = {{"tools", page}};
      if (start + 2 < tools.size()) res["nextCursor"] = std::to_string(start + 2);
      t.Reply(msg["id"], res);
    } else if (method == "tools/call" && msg["params"]["name"] == "echo") {
      t.Reply(msg["id"],
              {{"content",
                Json::array({{{"type", "text"}, {"text", msg["params"]["arguments"].dump()}}})}});
    } else if (method == "ping") {
      t.Reply(msg["id"], Json::object());
    }
  };
}

struct Harness {
  FakeTransport* transport;
  std::shared_ptr<McpClient> client;
};

Harness Make(FakeTransport::Respond respond) {
  auto t = std::make_unique<FakeTransport>(std::move(respond));
  FakeTransport* raw = t.get();
  return {raw, std::make_shared<McpClient>("fake", std::move(t))};
}

TEST(McpClient, HandshakeOffersLatestAcceptsOlderAndListsEveryPage) {
  Harness h = Make(Standard("2025-06-18", {ToolJson("a"), ToolJson("b"), ToolJson("c")}));
  ASSERT_TRUE(h.client->Connect(5s).ok());
  auto sent = h.transport->sent();
  ASSERT_GE(sent.size(), 4u);
  EXPECT_EQ(sent[0]["method"], "initialize");
  EXPECT_EQ(sent[0]["params"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(sent[1]["method"], "notifications/initialized");
  EXPECT_FALSE(sent[1].contains("id"));
  EXPECT_EQ(sent[2]["method"], "tools/list");
  EXPECT_EQ(sent[3]["params"]["cursor"], "2");
  EXPECT_EQ(h.client->protocol_version(), "2025-06-18");
  EXPECT_EQ(h.client->instructions(), "be nice");
  EXPECT_EQ(h.client->server_info()["name"], "fake");
  ASSERT_EQ(h.client->tools().size(), 3u);
  EXPECT_EQ(h.client->tools()[2].name, "c");
  EXPECT_TRUE(h.client->Ping(5s).ok());
}

TEST(McpClient, UnknownProtocolVersionIsRefusedByName) {
  Harness h = Make(Standard("1999-01-01", {}));
  Status s = h.client->Connect(5s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'1999-01-01'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2025-11-25"), std::string::npos);
}

TEST(McpClient, InitializeErrorNamesServerAndCode) {
  Harness h = Make([](const Json& msg, FakeTransport& t) {
    if (msg.value("method", "") == "initialize") {
      t.Deliver({{"jsonrpc", "2.0"},
                 {"id", msg["id"]},
                 {"error", {{"code", -32602}, {"message", "bad version"}}}});
    }
  });
  Status s = h.client->Connect(5s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'fake'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("-32602: bad version"), std::string::npos) << s.message();
}

TEST(McpClient, StartupTimeoutFailsWithoutCancellingInitialize) {
  Harness h = Make(nullptr);  // never answers
  Status s = h.client->Connect(50ms);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.message();
  for (const Json& m : h.transport->sent()) EXPECT_NE(m["method"], "notifications/cancelled");
}

TEST(McpClient, ARepeatedCursorEndsTheListWithAnError) {
  Harness h = Make([](const Json& msg, FakeTransport& t) {
    const std::string method = msg.value("method", "");
    if (method == "initialize") {
      t.Reply(msg["id"], {{"protocolVersion", "2025-11-25"}});
    } else if (method == "tools/list") {
      t.Reply(msg["id"], {{"tools", Json::array({ToolJson("x")})}, {"nextCursor", "same"}});
    }
  });
  Status s = h.client->Connect(5s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("repeated the tools/list cursor"), std::string::npos);
}

TEST(McpClient, ListChangedListsAgain) {
  std::vector<Json> tools = {ToolJson("a")};
  auto shared = std::make_shared<std::vector<Json>>(tools);
  auto std_respond = [shared](const Json& msg, FakeTransport& t) {
    Standard("2025-11-25", *shared)(msg, t);
  };
  Harness h = Make(std_respond);
  ASSERT_TRUE(h.client->Connect(5s).ok());
  ASSERT_EQ(h.client->list_generation(), 1u);
  shared->push_back(ToolJson("b"));
  h.transport->Deliver({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  ASSERT_TRUE(h.client->WaitForListGeneration(2, 10s));
  EXPECT_EQ(h.client->tools().size(), 2u);
}

TEST(RpcConnection, TimeoutCancelsAndDropsTheLateResult) {
  auto t = std::make_unique<FakeTransport>(nullptr);
  FakeTransport* raw = t.get();
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  CallOptions o;
  o.timeout = 30ms;
  auto r = rpc.Call("tools/call", {{"name", "x"}}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
  auto cancel = raw->WaitSent("notifications/cancelled");
  ASSERT_TRUE(cancel.has_value());
  const Json call = *raw->WaitSent("tools/call");
  EXPECT_EQ((*cancel)["params"]["requestId"], call["id"]);
  // The late result and progress for it are dropped; the connection lives.
  EXPECT_TRUE(raw->Deliver({{"jsonrpc", "2.0"}, {"id", call["id"]}, {"result", Json::object()}}));
  EXPECT_TRUE(raw->Deliver({{"jsonrpc", "2.0"},
                            {"method", "notifications/progress"},
                            {"params", {{"progressToken", call["id"]}, {"progress", 1}}}}));
  EXPECT_TRUE(rpc.closed_status().ok());
}

TEST(RpcConnection, StopTokenCancels) {
  std::stop_source stop;
  auto t = std::make_unique<FakeTransport>([&stop](const Json& msg, FakeTransport&) {
    if (msg.value("method", "") == "tools/call") stop.request_stop();
  });
  FakeTransport* raw = t.get();
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  CallOptions o;
  o.timeout = 0ms;  // none: only the stop ends it
  o.stop = stop.get_token();
  auto r = rpc.Call("tools/call", Json::object(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kCancelled);
  auto cancel = raw->WaitSent("notifications/cancelled");
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ((*cancel)["params"]["reason"], "cancelled by the client");
}

TEST(RpcConnection, ProgressReachesTheCallAndCarriesItsToken) {
  std::vector<Json> seen;
  auto t = std::make_unique<FakeTransport>([](const Json& msg, FakeTransport& f) {
    if (msg.value("method", "") != "tools/call") return;
    const Json token = msg["params"]["_meta"]["progressToken"];
    f.Deliver({{"jsonrpc", "2.0"},
               {"method", "notifications/progress"},
               {"params", {{"progressToken", token}, {"progress", 5}, {"total", 10}}}});
    f.Deliver({{"jsonrpc", "2.0"},
               {"method", "notifications/progress"},
               {"params", {{"progressToken", 999}, {"progress", 7}}}});
    f.Reply(msg["id"], {{"ok", true}});
  });
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  CallOptions o;
  o.progress = true;
  o.on_progress = [&](const Json& p) { seen.push_back(p); };
  auto r = rpc.Call("tools/call", Json::object(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result["ok"], true);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["progress"], 5);
}

// A server that keeps reporting progress for a call until `stop_at` (or
// until told to stop), then answers it when `answer`.
struct ProgressFeeder {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
  void Start(FakeTransport& t, Json id, std::chrono::steady_clock::time_point stop_at,
             bool answer) {
    thread = std::thread([this, &t, id, stop_at, answer] {
      int n = 0;
      std::unique_lock<std::mutex> lock(mu);
      while (!done && std::chrono::steady_clock::now() < stop_at) {
        lock.unlock();
        t.Deliver({{"jsonrpc", "2.0"},
                   {"method", "notifications/progress"},
                   {"params", {{"progressToken", id}, {"progress", ++n}}}});
        lock.lock();
        cv.wait_for(lock, 20ms, [this] { return done; });  // the next report
      }
      if (answer && !done) {
        lock.unlock();
        t.Reply(id, {{"finished", true}});
      }
    });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      cv.notify_all();
    }
    if (thread.joinable()) thread.join();
  }
};

TEST(RpcConnection, ProgressKeepsACallAliveBeyondItsTimeout) {
  ProgressFeeder feeder;
  auto t = std::make_unique<FakeTransport>([&feeder](const Json& msg, FakeTransport& f) {
    if (msg.value("method", "") != "tools/call") return;
    feeder.Start(f, msg["id"], std::chrono::steady_clock::now() + 3s, /*answer=*/true);
  });
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  CallOptions o;
  o.progress = true;
  o.timeout = 1s;  // three times shorter than the work
  o.max_timeout = 60s;
  auto r = rpc.Call("tools/call", Json::object(), o);
  feeder.Stop();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->result["finished"], true);
}

TEST(RpcConnection, ProgressNeverExtendsBeyondTheHardMaximum) {
  ProgressFeeder feeder;
  auto t = std::make_unique<FakeTransport>([&feeder](const Json& msg, FakeTransport& f) {
    if (msg.value("method", "") != "tools/call") return;
    feeder.Start(f, msg["id"], std::chrono::steady_clock::now() + 120s, /*answer=*/false);
  });
  FakeTransport* raw = t.get();
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  CallOptions o;
  o.progress = true;
  o.timeout = 500ms;
  o.max_timeout = 1500ms;
  auto r = rpc.Call("tools/call", Json::object(), o);
  feeder.Stop();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
  EXPECT_TRUE(raw->WaitSent("notifications/cancelled").has_value());
}

TEST(RpcConnection, ErrorResponseIsAValueAndServerRequestsAreAnswered) {
  auto t = std::make_unique<FakeTransport>([](const Json& msg, FakeTransport& f) {
    if (msg.value("method", "") != "tools/call") return;
    f.Deliver({{"jsonrpc", "2.0"}, {"id", "s1"}, {"method", "ping"}});
    f.Deliver({{"jsonrpc", "2.0"}, {"id", "s2"}, {"method", "sampling/createMessage"}});
    f.Deliver({{"jsonrpc", "2.0"},
               {"id", msg["id"]},
               {"error", {{"code", -32601}, {"message", "nope"}}}});
  });
  FakeTransport* raw = t.get();
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  auto r = rpc.Call("tools/call", Json::object(), CallOptions{});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->error.has_value());
  EXPECT_EQ(r->error->code, -32601);
  EXPECT_EQ(r->error->message, "nope");
  bool pong = false, refused = false;
  for (const Json& m : raw->sent()) {
    if (m.value("id", Json()) == "s1") pong = m.contains("result");
    if (m.value("id", Json()) == "s2") refused = m["error"]["code"] == -32601;
  }
  EXPECT_TRUE(pong);
  EXPECT_TRUE(refused);
}

TEST(RpcConnection, GarbageEndsTheConnectionWithAClearError) {
  auto t = std::make_unique<FakeTransport>([](const Json& msg, FakeTransport& f) {
    if (msg.value("method", "") == "tools/call") {
      EXPECT_FALSE(f.DeliverText("Hello, world!"));
    }
  });
  RpcConnection rpc("server 'x'", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  auto r = rpc.Call("tools/call", Json::object(), CallOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_NE(r.error().message().find("not a JSON-RPC message: 'Hello, world!'"), std::string::npos)
      << r.error().message();
  EXPECT_FALSE(rpc.closed_status().ok());
}

TEST(RpcConnection, ServerGoneFailsWaitingCalls) {
  auto t = std::make_unique<FakeTransport>([](const Json& msg, FakeTransport& f) {
    if (msg.value("method", "") == "tools/call") f.ServerGone(Unavailable("it died"));
  });
  RpcConnection rpc("test", std::move(t));
  ASSERT_TRUE(rpc.Start(nullptr).ok());
  auto r = rpc.Call("tools/call", Json::object(), CallOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "it died");
  auto again = rpc.Call("ping", Json::object(), CallOptions{});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message(), "it died");
}

TEST(McpNaming, SanitisesAndBoundsNames) {
  EXPECT_EQ(QualifiedToolName("github", "create_issue"), "mcp__github__create_issue");
  EXPECT_EQ(QualifiedToolName("my server", "a.b/c"), "mcp__my_server__a_b_c");
  const std::string long_tool(80, 'x');
  const std::string a = QualifiedToolName("s", long_tool + "1");
  const std::string b = QualifiedToolName("s", long_tool + "2");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(b.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 53), b.substr(0, 53));
  for (char c : a) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  EXPECT_EQ(QualifiedToolName("s", long_tool + "1"), a);  // stable
}

TEST(McpResults, MapsEveryContentKind) {
  RpcReply reply;
  reply.result = {
      {"content", Json::array({{{"type", "text"}, {"text", "hello"}},
                               {{"type", "image"}, {"data", "AAAA"}, {"mimeType", "image/png"}},
                               {{"type", "resource_link"},
                                {"uri", "file:///a.txt"},
                                {"name", "a.txt"},
                                {"mimeType", "text/plain"}},
                               {{"type", "resource"},
                                {"resource", {{"uri", "mem://x"}, {"text", "inside"}}}}})}};
  ToolOutput out = MapCallResult(reply, nullptr, 30000);
  EXPECT_FALSE(out.is_error);
  EXPECT_NE(out.content.find("hello"), std::string::npos);
  // "AAAA" is base64, but not the bytes of a PNG: described, not passed on.
  EXPECT_NE(
      out.content.find("[image image/png, 3 bytes, not shown: the bytes are not a png image]"),
      std::string::npos)
      << out.content;
  EXPECT_TRUE(out.images.empty());
  EXPECT_NE(out.content.find("[resource link: a.txt <file:///a.txt> text/plain]"),
            std::string::npos);
  EXPECT_NE(out.content.find("[resource <mem://x>]\ninside"), std::string::npos);
}

// A 1x1 PNG (70 bytes).
constexpr char kPng[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg"
    "==";

TEST(McpResults, ImagesBecomeImageBlocksAndTextStaysText) {
  RpcReply reply;
  // Wrapped base64 (MIME style) is accepted: the line breaks are dropped.
  std::string wrapped = std::string(kPng).substr(0, 40) + "\r\n" + std::string(kPng).substr(40);
  reply.result = {
      {"content", Json::array({{{"type", "text"}, {"text", "before"}},
                               {{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}},
                               {{"type", "text"}, {"text", "after"}},
                               {{"type", "image"}, {"data", wrapped}, {"mimeType", "image/png"}},
                               {{"type", "image"}, {"data", kPng}, {"mimeType", "image/bmp"}}})}};
  ToolOutput out = MapCallResult(reply, nullptr, 30000);
  EXPECT_FALSE(out.is_error);
  ASSERT_EQ(out.images.size(), 2u);
  EXPECT_EQ(out.images[0], ContentBlock::Image("image/png", kPng));
  EXPECT_EQ(out.images[1], ContentBlock::Image("image/png", kPng));
  EXPECT_EQ(out.content,
            "before\nafter\n[image image/bmp, 70 bytes, not shown: media type 'image/bmp' is not "
            "one of image/png, image/jpeg, image/gif, image/webp]");
  // An image alone leaves the text empty (no "(no output)" beside it).
  reply.result = {
      {"content", Json::array({{{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}}})}};
  out = MapCallResult(reply, nullptr, 30000);
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(out.images.size(), 1u);
}

TEST(McpResults, AnImageOverTheSizeCapIsDescribed) {
  std::string big = "\x89PNG\r\n\x1a\n" + std::string(kMaxImageBytes, 'x');
  RpcReply reply;
  reply.result = {
      {"content",
       Json::array({{{"type", "image"}, {"data", Base64Encode(big)}, {"mimeType", "image/png"}}})}};
  ToolOutput out = MapCallResult(reply, nullptr, 30000);
  EXPECT_TRUE(out.images.empty());
  EXPECT_EQ(out.content, "[image image/png, " + std::to_string(big.size()) +
                             " bytes, not shown: " + std::to_string(big.size()) +
                             " bytes, more than the 5242880 an image may have]");
}

TEST(McpResults, ErrorsStructuredContentAndCap) {
  RpcReply err;
  err.error = RpcError{-32602, "unknown tool", nullptr};
  ToolOutput e = MapCallResult(err, nullptr, 30000);
  EXPECT_TRUE(e.is_error);
  EXPECT_EQ(e.content, "MCP error -32602: unknown tool");

  RpcReply failed;
  failed.result = {{"content", Json::array({{{"type", "text"}, {"text", "boom"}}})},
                   {"isError", true}};
  EXPECT_TRUE(MapCallResult(failed, nullptr, 30000).is_error);

  const Json schema = {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}}}}},
                       {"required", Json::array({"n"})}};
  RpcReply structured;
  structured.result = {{"structuredContent", {{"n", 3}}}};
  ToolOutput s = MapCallResult(structured, schema, 30000);
  EXPECT_FALSE(s.is_error);
  EXPECT_EQ(s.content, "{\"n\":3}");
  RpcReply wrong;
  wrong.result = {{"structuredContent", {{"n", "three"}}}};
  ToolOutput w = MapCallResult(wrong, schema, 30000);
  EXPECT_TRUE(w.is_error);
  EXPECT_NE(w.content.find("outputSchema"), std::string::npos);

  RpcReply big;
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "line " + std::to_string(i) + "\n";
  big.result = {{"content", Json::array({{{"type", "text"}, {"text", lines}}})}};
  ToolOutput b = MapCallResult(big, nullptr, 500);
  EXPECT_LE(b.content.size(), 500u);
  EXPECT_NE(b.content.find("truncated"), std::string::npos);
}

TEST(McpTool, HintsAreBelievedOnlyForTrustedServers) {
  Harness h = Make(Standard("2025-11-25", {ToolJson("echo", /*read_only=*/true)}));
  ASSERT_TRUE(h.client->Connect(5s).ok());
  const ServerTool st = h.client->tools()[0];
  McpToolOptions untrusted;
  untrusted.server = "fake";
  McpTool a(h.client, st, untrusted);
  EXPECT_EQ(a.spec().name, "mcp__fake__echo");
  EXPECT_EQ(a.spec().description, "tool echo");
  EXPECT_TRUE(a.spec().mutates);
  McpToolOptions trusted = untrusted;
  trusted.trusted = true;
  McpTool b(h.client, st, trusted);
  EXPECT_FALSE(b.spec().mutates);
}

TEST(McpTool, RunsAndReportsAServerThatIsGone) {
  Harness h = Make(Standard("2025-11-25", {ToolJson("echo")}));
  ASSERT_TRUE(h.client->Connect(5s).ok());
  McpToolOptions o;
  o.server = "fake";
  McpTool tool(h.client, h.client->tools()[0], o);
  ToolContext ctx;
  auto out = tool.Run({"c1", "mcp__fake__echo", {{"text", "hi"}}}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->is_error);
  EXPECT_EQ(out->content, "{\"text\":\"hi\"}");
  h.transport->ServerGone(Unavailable("MCP server 'fake' was killed by signal 9"));
  auto gone = tool.Run({"c2", "mcp__fake__echo", Json::object()}, ctx);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->is_error);
  EXPECT_NE(gone->content.find("signal 9"), std::string::npos) << gone->content;
}

TEST(McpTool, TheTurnsWallTimeBudgetCancelsACallThatKeepsReportingProgress) {
  // The server never answers and reports progress, which would keep the
  // call alive up to its maximum of ten minutes.
  ProgressFeeder feeder;
  auto respond = Standard("2025-11-25", {ToolJson("slow")});
  Harness h = Make([&](const Json& msg, FakeTransport& t) {
    if (msg.value("method", "") == "tools/call") {
      feeder.Start(t, msg["id"], std::chrono::steady_clock::now() + 10min, /*answer=*/false);
      return;
    }
    respond(msg, t);
  });
  ASSERT_TRUE(h.client->Connect(5s).ok());
  McpToolOptions o;
  o.server = "fake";
  o.timeout = 60s;
  o.max_timeout = 600s;
  McpTool tool(h.client, h.client->tools()[0], o);
  ToolContext ctx;
  ctx.deadline = std::chrono::steady_clock::now() + 300ms;
  auto out = tool.Run({"c1", "mcp__fake__slow", Json::object()}, ctx);
  feeder.Stop();
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->is_error);
  EXPECT_NE(out->content.find("the turn's wall-time budget ran out"), std::string::npos)
      << out->content;
  EXPECT_EQ(out->details["budget_exhausted"], true);
  // The server was told to stop the work.
  auto cancelled = h.transport->WaitSent("notifications/cancelled");
  ASSERT_TRUE(cancelled.has_value());
}

}  // namespace
}  // namespace agentloop::mcp
