// The server over real sockets: a Server on 127.0.0.1 with an engine on a
// temporary SQLite store, agents whose model is the fake model server, and a
// small blocking HTTP client. Every wait has a timeout (the client's socket
// receive timeout); nothing sleeps.
#include "server/server.h"

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "agentloop/event_data.h"
#include "agentloop/json.h"

#include "base/testing/files.h"
#include "config/trust.h"
#include "engine/testing/engine.h"
#include "env/process.h"
#include "fake_model_server.h"
#include "permissions/webhook.h"
#include "store/sqlite_db.h"

namespace agentloop::server {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using ::testing::HasSubstr;

struct Reply {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  Json json() const { return Json::parse(body, nullptr, false); }
};

// A blocking client for one request per connection (Connection: close), or
// an event stream read frame by frame. Reads time out after 20 s; a read cut
// by a signal (a child's SIGCHLD under some sanitizer runtimes) is resumed.
class Client {
 public:
  explicit Client(int port) : port_(port) {}

  void Connect() {
    socket_ = std::make_unique<tcp::socket>(io_);
    socket_->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
    timeval tv{20, 0};
    ::setsockopt(socket_->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  void Write(const std::string& method, const std::string& path, const std::string& body,
             const std::vector<std::pair<std::string, std::string>>& headers) {
    // A Host among `headers` replaces the default.
    bool host = false;
    for (const auto& h : headers) host = host || h.first == "Host";
    std::string req = method + " " + path + " HTTP/1.1\r\n" +
                      (host ? "" : "Host: 127.0.0.1:" + std::to_string(port_) + "\r\n") +
                      "Connection: close\r\n";
    for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    if (!body.empty() || method == "POST") {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    req += "\r\n" + body;
    asio::write(*socket_, asio::buffer(req));
  }

  Reply ReadHead() {
    Reply r;
    boost::system::error_code ec;
    do {
      asio::read_until(*socket_, buf_, "\r\n\r\n", ec);
    } while (ec == asio::error::interrupted);
    if (ec) return r;
    std::istream in(&buf_);
    std::string line;
    std::getline(in, line);
    if (line.size() > 12) r.status = static_cast<unsigned>(std::stoi(line.substr(9, 3)));
    while (std::getline(in, line) && line != "\r") {
      size_t c = line.find(':');
      if (c == std::string::npos) continue;
      std::string k = line.substr(0, c);
      for (char& ch : k) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string v = line.substr(c + 1);
      while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
      if (!v.empty() && v.back() == '\r') v.pop_back();
      r.headers[k] = v;
    }
    return r;
  }

  Reply Call(const std::string& method, const std::string& path, const std::string& body = "",
             const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    Connect();
    Write(method, path, body, headers);
    Reply r = ReadHead();
    boost::system::error_code ec;
    do {
      asio::read(*socket_, buf_, ec);  // to EOF (Connection: close)
    } while (ec == asio::error::interrupted);
    r.body.assign(asio::buffers_begin(buf_.data()), asio::buffers_end(buf_.data()));
    buf_.consume(buf_.size());
    socket_.reset();
    return r;
  }

  // Opens an event stream; returns the response head.
  Reply OpenStream(const std::string& path,
                   std::vector<std::pair<std::string, std::string>> headers = {},
                   const std::string& method = "GET", const std::string& body = "") {
    Connect();
    headers.emplace_back("Accept", "text/event-stream");
    Write(method, path, body, headers);
    return ReadHead();
  }

  struct Frame {
    std::string id, event, data;
    Json json() const { return Json::parse(data, nullptr, false); }
  };
  // The next frame (comments and the retry line skipped); nullopt at EOF or
  // after the read timeout.
  std::optional<Frame> Next() {
    for (;;) {
      boost::system::error_code ec;
      do {
        asio::read_until(*socket_, buf_, "\n\n", ec);
      } while (ec == asio::error::interrupted);
      if (ec) return std::nullopt;
      std::istream in(&buf_);
      std::string line;
      Frame f;
      bool any = false;
      while (std::getline(in, line) && !line.empty()) {
        if (line.rfind("id: ", 0) == 0) f.id = line.substr(4), any = true;
        if (line.rfind("event: ", 0) == 0) f.event = line.substr(7), any = true;
        if (line.rfind("data: ", 0) == 0) f.data = line.substr(6), any = true;
      }
      if (any && !f.event.empty()) return f;
    }
  }
  void Close() { socket_.reset(); }

 private:
  int port_;
  asio::io_context io_;
  std::unique_ptr<tcp::socket> socket_;
  asio::streambuf buf_;
};

AgentSpec Agent(std::string name, SessionOptions options) {
  AgentSpec a;
  a.name = std::move(name);
  a.description = "writes code";
  a.options = std::move(options);
  return a;
}

class ServerTest : public ::testing::Test {
 protected:
  ServerTest() {
    workspace_ = tmp_.path() / "ws";
    fs::create_directories(workspace_);
  }
  ~ServerTest() override { StopServer(); }

  void StartModel(const Json& responses) {
    auto m = agentloop::testing::FakeModelServer::Start(Json{{"responses", responses}});
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    model_ = std::move(*m);
  }

  SessionOptions AgentOptions() {
    SessionOptions o;
    o.workspace = workspace_;
    o.provider = ProviderKind::kOpenAI;
    o.base_url = model_->base_url();
    o.api_key = "test-key";
    o.model = "gpt-4.1";
    o.approver = ApproverMode::kDurable;
    o.todo_loop = false;
    o.reflector = false;
    return o;
  }

  void StartServer(ServerOptions so = {}) {
    if (!engine_) {
      EngineOptions eo = agentloop::testing::IsolatedEngineOptions(tmp_.path());
      eo.io_context = &io_;
      eo.tenant_user_scopes = tenant_user_scopes_;
      auto e = Engine::Create(eo);
      ASSERT_TRUE(e.ok()) << e.error().ToString();
      engine_ = std::move(*e);
    }
    so.listen = "127.0.0.1:0";
    // The tests without tokens opt out of authentication explicitly.
    if (so.tokens.empty()) so.no_auth = true;
    if (so.agents.empty()) so.agents.push_back(Agent("coder", AgentOptions()));
    auto s = Server::Create(std::move(so), *engine_, io_);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    server_ = std::move(*s);
    port_ = server_->port();
    thread_ = std::thread([this] { run_status_ = server_->Run(); });
  }

  void StopServer() {
    if (!server_) return;
    server_->Shutdown();
    thread_.join();
    server_.reset();
  }

  Reply Call(const std::string& method, const std::string& path, const Json& body = nullptr,
             std::vector<std::pair<std::string, std::string>> headers = {}) {
    Client c(port_);
    return c.Call(method, path, body.is_null() ? "" : body.dump(), headers);
  }

  std::string NewSession(const Json& body = Json::object()) {
    Reply r = Call("POST", "/v1/sessions", body);
    EXPECT_EQ(r.status, 201u) << r.body;
    return r.json().value("id", "");
  }

  // Starts a turn and waits for its outcome; returns the turn's result.
  Json RunTurn(const std::string& sid, const std::string& input) {
    Reply r = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", input}});
    EXPECT_EQ(r.status, 202u) << r.body;
    return Wait(sid, r.json().value("id", ""));
  }

  // Defined beside the tests that use it.
  void ExpectContinuationTriedAgain(const std::string& file, const std::string& final_text,
                                    const std::string& refuse_sql);

  Json Wait(const std::string& sid, const std::string& turn_id) {
    Reply w = Call("GET", "/v1/sessions/" + sid + "/turns/" + turn_id + "/wait?timeout_s=20");
    EXPECT_EQ(w.status, 200u) << w.body;
    Json j = w.json();
    EXPECT_EQ(j.value("status", ""), "done") << w.body;
    return j.value("result", Json());
  }

  // Waits (up to 20 s) until the server counts `n` delivered notifications.
  bool WaitDelivered(int n) {
    const std::string line =
        "agentloop_webhook_deliveries_total{outcome=\"delivered\"} " + std::to_string(n) + "\n";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      last = Call("GET", "/v1/metrics").body;
      if (last.find(line) != std::string::npos) return true;
      std::this_thread::yield();
    }
    ADD_FAILURE() << "not " << n << " delivered notifications: " << last;
    return false;
  }

  // Writes the user's agent definition `name` (docs/subagents.md), offered
  // to sessions as agent__<name>: `front` is its front matter after the
  // description, `marker` its prompt.
  void DefineSubagent(const std::string& name, const std::string& front,
                      const std::string& marker) {
    fs::path agents = tmp_.path() / "home" / ".config" / "agentloop" / "agents";
    fs::create_directories(agents);
    std::ofstream(agents / (name + ".md")) << "---\ndescription: " << name << " helps the caller\n"
                                           << front << "---\nYou are " << marker << ".\n";
  }
  // Starts the server with the agent `coder` allowing `tool`; returns a new
  // session's id.
  std::string StartAllowing(const std::string& tool) {
    SessionOptions o = AgentOptions();
    o.allow.push_back({tool, "test"});
    ServerOptions so;
    so.agents.push_back(Agent("coder", o));
    StartServer(std::move(so));
    return NewSession();
  }
  // The root session's built-in prompt starts so (a child's never does).
  static constexpr const char* kRootPrompt = "You are agentloop, a careful";

  Json WriteCall(const std::string& id, const std::string& file) {
    return {{"tool_calls", Json::array({{{"id", id},
                                         {"name", "write"},
                                         {"input", {{"file_path", file}, {"content", "hi\n"}}}}})}};
  }

  agentloop::testing::TempDir tmp_;
  fs::path workspace_;
  bool tenant_user_scopes_ = false;  // EngineOptions::tenant_user_scopes
  std::unique_ptr<agentloop::testing::FakeModelServer> model_;
  boost::asio::io_context io_{1};  // the engine's HTTP client and the server share it
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  Status run_status_;
  int port_ = 0;
};

TEST_F(ServerTest, HealthReadyAgentsAndUnknownRoutes) {
  StartModel(Json::array());
  StartServer();
  EXPECT_EQ(Call("GET", "/v1/health").json()["status"], "ok");
  EXPECT_EQ(Call("GET", "/v1/ready").status, 200u);
  Reply agents = Call("GET", "/v1/agents");
  ASSERT_EQ(agents.status, 200u);
  EXPECT_EQ(agents.json()["items"][0]["name"], "coder");
  EXPECT_EQ(agents.json()["items"][0]["model"], "gpt-4.1");
  Reply missing = Call("GET", "/v1/nothing");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.headers["content-type"], "application/problem+json");
  EXPECT_EQ(missing.json()["code"], "not_found");
  EXPECT_EQ(Call("GET", "/v1/agents/nobody").status, 404u);
  Reply bad = Call("POST", "/v1/sessions", nullptr, {});
  EXPECT_EQ(bad.status, 201u);  // an empty body is {}: the first agent
  Client raw(port_);
  Reply junk = raw.Call("POST", "/v1/sessions", "{not json");
  EXPECT_EQ(junk.status, 400u);
  EXPECT_EQ(junk.json()["code"], "invalid_request");
  EXPECT_EQ(Call("POST", "/v1/sessions", {{"agent", "coder"}, {"colour", "red"}}).json()["code"],
            "invalid_request");
}

// With several agents, a session that names none gets the one marked
// default; with none marked, the request is refused naming them.
TEST_F(ServerTest, ASessionNamingNoAgentNeedsADefaultAmongSeveral) {
  StartModel(Json::array());
  ServerOptions so;
  so.agents.push_back(Agent("coder", AgentOptions()));
  so.agents.push_back(Agent("reviewer", AgentOptions()));
  StartServer(std::move(so));
  Reply refused = Call("POST", "/v1/sessions", Json::object());
  ASSERT_EQ(refused.status, 400u) << refused.body;
  EXPECT_EQ(refused.json()["code"], "invalid_request");
  EXPECT_THAT(refused.json()["detail"].get<std::string>(), HasSubstr("coder, reviewer"));
  EXPECT_EQ(Call("POST", "/v1/sessions", {{"agent", "reviewer"}}).status, 201u);
  StopServer();

  ServerOptions with_default;
  with_default.agents.push_back(Agent("coder", AgentOptions()));
  with_default.agents.push_back(Agent("reviewer", AgentOptions()));
  with_default.agents.back().is_default = true;
  StartServer(std::move(with_default));
  Reply made = Call("POST", "/v1/sessions", Json::object());
  ASSERT_EQ(made.status, 201u) << made.body;
  EXPECT_EQ(made.json()["agent"], "reviewer");
  StopServer();

  ServerOptions two;
  two.listen = "127.0.0.1:0";
  two.no_auth = true;
  two.agents.push_back(Agent("coder", AgentOptions()));
  two.agents.push_back(Agent("reviewer", AgentOptions()));
  for (AgentSpec& a : two.agents) a.is_default = true;
  auto s = Server::Create(std::move(two), *engine_, io_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("both marked default"));
}

TEST_F(ServerTest, SessionsAreCreatedListedPagedAndDeleted) {
  StartModel(Json::array());
  StartServer();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(NewSession({{"title", "t" + std::to_string(i)}, {"metadata", {{"n", i}}}}));
  }
  Reply got = Call("GET", "/v1/sessions/" + ids[1]);
  ASSERT_EQ(got.status, 200u) << got.body;
  EXPECT_EQ(got.json()["title"], "t1");
  EXPECT_EQ(got.json()["metadata"]["n"], 1);
  EXPECT_EQ(got.json()["agent"], "coder");
  EXPECT_EQ(got.json()["status"], "idle");
  EXPECT_EQ(got.json()["settings"]["provider"]["model"], "gpt-4.1");

  Reply page1 = Call("GET", "/v1/sessions?limit=2");
  ASSERT_EQ(page1.status, 200u) << page1.body;
  ASSERT_EQ(page1.json()["items"].size(), 2u);
  std::string cursor = page1.json()["next_cursor"];
  Reply page2 = Call("GET", "/v1/sessions?limit=2&cursor=" + cursor);
  ASSERT_EQ(page2.json()["items"].size(), 1u);
  EXPECT_EQ(page2.json()["items"][0]["id"], ids[0]);
  EXPECT_EQ(Call("GET", "/v1/sessions?limit=500").status, 400u);
  EXPECT_EQ(Call("GET", "/v1/sessions?status=weird").status, 400u);
  EXPECT_EQ(Call("GET", "/v1/sessions?agent=nobody").json()["items"].size(), 0u);

  EXPECT_EQ(Call("DELETE", "/v1/sessions/" + ids[0]).status, 204u);
  EXPECT_EQ(Call("GET", "/v1/sessions/" + ids[0]).status, 404u);
  EXPECT_EQ(Call("GET", "/v1/sessions?limit=2&cursor=" + ids[0]).json()["code"], "invalid_cursor");
}

// The events page is a query of at most `limit` events (and one more, to
// say whether a next page exists): pages follow each other through
// next_after without a gap, and the last one says null.
TEST_F(ServerTest, EventsArePagedThroughNextAfter) {
  StartModel(Json::array({{{"text", "hello there"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "say hello")["stop"], "completed");
  const uint64_t last = engine_->store().GetSession(sid)->last_seq;
  ASSERT_GE(last, 3u);
  std::vector<uint64_t> seen;
  std::string after = "0";
  for (int page = 0; page < 100 && after != "null"; ++page) {
    Reply r = Call("GET", "/v1/sessions/" + sid + "/events?limit=2&after=" + after);
    ASSERT_EQ(r.status, 200u) << r.body;
    const Json body = r.json();
    const Json& items = body["items"];
    ASSERT_LE(items.size(), 2u);
    for (const Json& e : items) seen.push_back(e["seq"].get<uint64_t>());
    const Json& next = body["next_after"];
    if (next.is_null()) {
      after = "null";
    } else {
      ASSERT_EQ(items.size(), 2u);
      EXPECT_EQ(next.get<uint64_t>(), seen.back());
      after = std::to_string(next.get<uint64_t>());
    }
  }
  ASSERT_EQ(seen.size(), last);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
}

// A stream that starts at the beginning of a log longer than one replay
// page (EventHub::kReplayPage, one query each) gets every stored event once,
// in order, across the pages.
TEST_F(ServerTest, AStreamReplaysALongLogPageByPageWithoutAGap) {
  StartModel(Json::array());
  StartServer();
  std::string sid = NewSession();
  const uint64_t first = engine_->store().GetSession(sid)->last_seq + 1;
  const uint64_t count = 2 * 256 + 7;
  std::vector<Event> notices;
  for (uint64_t seq = first; seq < first + count; ++seq) {
    notices.push_back(Event(NoticeData{"info", "n" + std::to_string(seq)}, sid, "turn_x", seq,
                            1767225600000 + static_cast<int64_t>(seq)));
  }
  ASSERT_TRUE(engine_->store().Append(sid, notices).ok());
  Client c(port_);
  Reply head = c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=0");
  ASSERT_EQ(head.status, 200u);
  for (uint64_t seq = 1; seq < first + count; ++seq) {
    auto f = c.Next();
    ASSERT_TRUE(f.has_value()) << "stream ended before seq " << seq;
    ASSERT_EQ(f->id, std::to_string(seq));
  }
  c.Close();
}

TEST_F(ServerTest, ATurnRunsAndItsEventsReplayGapFree) {
  StartModel(Json::array({{{"text", "hello there"}}}));
  StartServer();
  std::string sid = NewSession();
  Json result = RunTurn(sid, "say hello");
  EXPECT_EQ(result["stop"], "completed") << result.dump();
  EXPECT_EQ(result["final_text"], "hello there");

  Reply events = Call("GET", "/v1/sessions/" + sid + "/events?after=0");
  ASSERT_EQ(events.status, 200u);
  Json items = events.json()["items"];
  ASSERT_FALSE(items.empty());
  EXPECT_EQ(items.back()["type"], "turn_end");

  Client c(port_);
  Reply head = c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=0");
  ASSERT_EQ(head.status, 200u);
  EXPECT_EQ(head.headers["content-type"], "text/event-stream");
  uint64_t expect = 1;
  for (size_t i = 0; i < items.size(); ++i) {
    auto f = c.Next();
    ASSERT_TRUE(f.has_value()) << "stream ended after " << i;
    EXPECT_EQ(f->id, std::to_string(expect++));
    EXPECT_EQ(f->event, items[i]["type"]);
  }
  c.Close();

  // Resuming after seq 2 sends seq 3 first.
  Client again(port_);
  again.OpenStream("/v1/sessions/" + sid + "/events/stream", {{"Last-Event-ID", "2"}});
  auto f = again.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->id, "3");

  Reply metrics = Call("GET", "/v1/metrics");
  ASSERT_EQ(metrics.status, 200u);
  EXPECT_THAT(metrics.headers["content-type"], HasSubstr("text/plain"));
  EXPECT_THAT(metrics.body, HasSubstr("agentloop_turns_started_total 1\n"));
  EXPECT_THAT(metrics.body, HasSubstr("agentloop_turns_finished_total{stop=\"completed\"} 1\n"));
  EXPECT_THAT(metrics.body, HasSubstr("agentloop_model_call_seconds_count 1\n"));
  EXPECT_THAT(metrics.body, HasSubstr("agentloop_sessions{status=\"running\"} 0\n"));
  EXPECT_EQ(Call("GET", "/v1/openapi.json").json()["openapi"], "3.1.0");
  EXPECT_EQ(Call("PUT", "/v1/sessions/" + sid).status, 405u);

  Reply messages = Call("GET", "/v1/sessions/" + sid + "/messages");
  ASSERT_EQ(messages.status, 200u);
  ASSERT_EQ(messages.json()["items"].size(), 2u);
  EXPECT_EQ(messages.json()["items"][1]["role"], "assistant");
}

TEST_F(ServerTest, ATurnStreamedOnThePostEndsWithItsTurnEnd) {
  StartModel(Json::array({{{"text", "streamed answer"}}}));
  StartServer();
  std::string sid = NewSession();
  Client c(port_);
  Reply head =
      c.OpenStream("/v1/sessions/" + sid + "/turns", {}, "POST", Json{{"input", "go"}}.dump());
  ASSERT_EQ(head.status, 200u);
  std::string text;
  std::vector<std::string> types;
  uint64_t last = 0;
  while (auto f = c.Next()) {
    types.push_back(f->event);
    if (f->event == "text_delta") {
      EXPECT_TRUE(f->id.empty());
      text += f->json()["text"].get<std::string>();
    } else {
      uint64_t seq = std::stoull(f->id);
      EXPECT_EQ(seq, last + 1) << f->event;
      last = seq;
    }
  }
  EXPECT_EQ(text, "streamed answer");
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), "turn_begin");
  EXPECT_EQ(types.back(), "turn_end");
}

TEST_F(ServerTest, APausedTurnIsApprovedOverHttpAndContinues) {
  StartModel(Json::array({WriteCall("c1", "hello.txt"), {{"text", "wrote it"}}}));
  StartServer();
  std::string sid = NewSession();
  Json paused = RunTurn(sid, "write hello.txt");
  ASSERT_EQ(paused["stop"], "pending_approval") << paused.dump();
  EXPECT_FALSE(fs::exists(workspace_ / "hello.txt"));

  Reply pending = Call("GET", "/v1/sessions/" + sid + "/pending");
  ASSERT_EQ(pending.status, 200u);
  ASSERT_EQ(pending.json()["items"].size(), 1u);
  Json item = pending.json()["items"][0];
  EXPECT_EQ(item["type"], "approval");
  EXPECT_EQ(item["tool"], "write");
  std::string aid = item["id"];
  EXPECT_EQ(item["decision_url"], "/v1/approvals/" + aid + "/decision");
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid).json()["status"], "paused");
  EXPECT_EQ(Call("GET", "/v1/approvals").json()["items"].size(), 1u);
  EXPECT_EQ(Call("GET", "/v1/approvals/" + aid).json()["state"], "pending");
  Reply wrong = Call("GET", "/v1/questions/" + aid);
  EXPECT_EQ(wrong.status, 400u);
  EXPECT_EQ(wrong.json()["code"], "wrong_kind");
  EXPECT_THAT(wrong.json()["detail"].get<std::string>(), HasSubstr("/v1/approvals/" + aid));

  Reply decided = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  ASSERT_EQ(decided.status, 200u) << decided.body;
  EXPECT_EQ(decided.json()["status"], "resumed");
  Json done = Wait(sid, decided.json()["turn_id"]);
  EXPECT_EQ(done["stop"], "completed") << done.dump();
  EXPECT_EQ(done["final_text"], "wrote it");
  EXPECT_TRUE(fs::exists(workspace_ / "hello.txt"));

  Reply again = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  EXPECT_EQ(again.status, 200u);
  EXPECT_EQ(again.json()["status"], "already_resolved");
  Reply other = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "deny"}});
  EXPECT_EQ(other.status, 409u);
  EXPECT_EQ(other.json()["code"], "approval_already_resolved");
  EXPECT_EQ(Call("GET", "/v1/approvals/" + aid).json()["state"], "resolved");
  EXPECT_EQ(Call("POST", "/v1/approvals/apr_unknown/decision", {{"decision", "deny"}}).status,
            404u);
}

// A status filter fills its page from the whole list, not from the first
// `limit` sessions, and its cursor goes on where the page ended.
TEST_F(ServerTest, AStatusFilterPagesThroughTheWholeList) {
  StartModel(Json::array({WriteCall("c1", "a.txt"), WriteCall("c2", "b.txt")}));
  StartServer();
  std::vector<std::string> paused;
  for (int i = 0; i < 2; ++i) {
    paused.push_back(NewSession());
    ASSERT_EQ(RunTurn(paused.back(), "write")["stop"], "pending_approval");
  }
  for (int i = 0; i < 4; ++i) NewSession();  // newer, idle: listed first
  Reply first = Call("GET", "/v1/sessions?status=paused&limit=1");
  ASSERT_EQ(first.status, 200u) << first.body;
  ASSERT_EQ(first.json()["items"].size(), 1u) << first.body;
  EXPECT_EQ(first.json()["items"][0]["id"], paused[1]);
  EXPECT_EQ(first.json()["items"][0]["status"], "paused");
  std::string cursor = first.json()["next_cursor"];
  Reply second = Call("GET", "/v1/sessions?status=paused&limit=1&cursor=" + cursor);
  ASSERT_EQ(second.json()["items"].size(), 1u) << second.body;
  EXPECT_EQ(second.json()["items"][0]["id"], paused[0]);
  Reply all = Call("GET", "/v1/sessions?status=paused&limit=5");
  EXPECT_EQ(all.json()["items"].size(), 2u);
  EXPECT_TRUE(all.json()["next_cursor"].is_null()) << all.body;
  EXPECT_EQ(Call("GET", "/v1/sessions?status=idle&limit=200").json()["items"].size(), 4u);
}

// scope session allows the same access again without asking, in later
// turns too (each reopens the session), but not another path.
TEST_F(ServerTest, ASessionScopedApprovalCoversTheSameAccessLater) {
  StartModel(Json::array({WriteCall("c1", "hello.txt"),
                          {{"text", "wrote it"}},
                          WriteCall("c2", "hello.txt"),
                          {{"text", "again"}},
                          WriteCall("c3", "other.txt"),
                          {{"text", "never"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write hello.txt")["stop"], "pending_approval");
  std::string aid = Call("GET", "/v1/approvals").json()["items"][0]["id"];
  EXPECT_EQ(Call("POST", "/v1/approvals/" + aid + "/decision",
                 {{"decision", "deny"}, {"scope", "session"}})
                .json()["code"],
            "unsupported_scope");
  EXPECT_EQ(Call("POST", "/v1/approvals/" + aid + "/decision",
                 {{"decision", "approve"}, {"scope", "forever"}})
                .json()["code"],
            "unsupported_scope");
  Reply decided = Call("POST", "/v1/approvals/" + aid + "/decision",
                       {{"decision", "approve"}, {"scope", "session"}});
  ASSERT_EQ(decided.status, 200u) << decided.body;
  EXPECT_EQ(Wait(sid, decided.json()["turn_id"])["final_text"], "wrote it");

  StopServer();  // the remembered access is kept with the session
  StartServer();
  Json second = RunTurn(sid, "write hello.txt again");
  EXPECT_EQ(second["stop"], "completed") << second.dump();
  EXPECT_EQ(second["final_text"], "again");
  EXPECT_EQ(RunTurn(sid, "write other.txt")["stop"], "pending_approval");
}

// A subagent's approval reaches the root's inbox over HTTP, tagged with its
// path of agents; deciding it resumes the child and then the root's turn.
TEST_F(ServerTest, ASubagentsApprovalIsDecidedOverHttpAndTheTreeResumes) {
  DefineSubagent("writer", "tools: [read, write]\n", "WRITER-AGENT");
  const std::string root = kRootPrompt;
  StartModel(Json::array(
      {{{"match", root},
        {"tool_calls", Json::array({{{"id", "c1"},
                                     {"name", "agent__writer"},
                                     {"input", {{"task", "write notes.txt"}}}}})}},
       {{"match", "WRITER-AGENT"},
        {"tool_calls",
         Json::array({{{"id", "w1"},
                       {"name", "write"},
                       {"input", {{"file_path", "notes.txt"}, {"content", "hi\n"}}}}})}},
       {{"match", "WRITER-AGENT"}, {"text", "wrote notes.txt"}},
       {{"match", root}, {"text", "the writer is done"}}}));
  std::string sid = StartAllowing("agent__writer");
  Json paused = RunTurn(sid, "delegate the notes");
  ASSERT_EQ(paused["stop"], "pending_approval") << paused.dump();
  EXPECT_FALSE(fs::exists(workspace_ / "notes.txt"));

  // The root's inbox holds the child's own item, once, with its path.
  Reply pending = Call("GET", "/v1/sessions/" + sid + "/pending");
  ASSERT_EQ(pending.status, 200u) << pending.body;
  ASSERT_EQ(pending.json()["items"].size(), 1u) << pending.body;
  Json item = pending.json()["items"][0];
  EXPECT_EQ(item["tool"], "write");
  EXPECT_EQ(item["path"], "root/writer") << item.dump();
  EXPECT_EQ(item["root_session_id"], sid) << item.dump();
  EXPECT_NE(item["session_id"], sid);
  const std::string aid = item["id"];
  EXPECT_EQ(Call("GET", "/v1/approvals").json()["items"].size(), 1u);
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid).json()["status"], "paused");

  Reply decided = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  ASSERT_EQ(decided.status, 200u) << decided.body;
  EXPECT_EQ(decided.json()["status"], "resumed") << decided.body;
  EXPECT_EQ(decided.json()["session_id"], sid) << decided.body;
  Json done = Wait(sid, decided.json()["turn_id"]);
  EXPECT_EQ(done["stop"], "completed") << done.dump();
  EXPECT_EQ(done["final_text"], "the writer is done");
  EXPECT_TRUE(fs::exists(workspace_ / "notes.txt"));
  EXPECT_EQ(Call("GET", "/v1/approvals").json()["items"].size(), 0u);
  Json detail = Call("GET", "/v1/sessions/" + sid).json();
  EXPECT_EQ(detail["status"], "idle");
  // The session resource lists the child with how it ended and its spending.
  ASSERT_EQ(detail["children"].size(), 1u) << detail.dump();
  const Json& child = detail["children"][0];
  EXPECT_EQ(child["id"], item["session_id"]);
  EXPECT_EQ(child["parent_id"], sid);
  EXPECT_EQ(child["title"], "write notes.txt");
  EXPECT_EQ(child["status"], "completed");
  EXPECT_EQ(child["counters"]["tool_calls"], 1) << child.dump();
  EXPECT_TRUE(child["children"].empty());
  Json child_detail = Call("GET", "/v1/sessions/" + child["id"].get<std::string>()).json();
  EXPECT_TRUE(child_detail["children"].empty()) << child_detail.dump();
  Reply again = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  EXPECT_EQ(again.json()["status"], "already_resolved") << again.body;
}

// A served turn shows its child as soon as the child starts: the event
// stream, the stored log and the session resource have it while the child's
// model call is still held.
TEST_F(ServerTest, ARunningSubagentIsStreamedAndListedBeforeItEnds) {
  DefineSubagent("reviewer", "tools: [read]\n", "REVIEWER-AGENT");
  const std::string root = kRootPrompt;
  StartModel(Json::array({{{"match", root},
                           {"tool_calls", Json::array({{{"id", "c1"},
                                                        {"name", "agent__reviewer"},
                                                        {"input", {{"task", "review slowly"}}}}})}},
                          {{"match", "REVIEWER-AGENT"}, {"delay_ms", 60000}, {"text", "never"}}}));
  std::string sid = StartAllowing("agent__reviewer");
  Reply started_turn = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "delegate"}});
  ASSERT_EQ(started_turn.status, 202u) << started_turn.body;
  const std::string tid = started_turn.json()["id"];

  Client c(port_);
  c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=0");
  std::optional<Json> started;
  while (auto f = c.Next()) {
    ASSERT_NE(f->event, "subagent_completed") << "the child ended before it was reported";
    ASSERT_NE(f->event, "tool_call_end");
    if (f->event == "subagent_started") {
      started = f->json();
      break;
    }
  }
  ASSERT_TRUE(started.has_value()) << "no subagent_started on the stream";
  EXPECT_EQ((*started)["path"], "root/reviewer");
  const std::string child = (*started)["child_session_id"];
  // The child is running: its model call is held by the fake server.
  ASSERT_TRUE(model_->WaitForRequests(2, std::chrono::seconds(20)));
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid + "/turns/" + tid).json()["status"], "running");
  Json stored = Call("GET", "/v1/sessions/" + sid + "/events?after=0").json()["items"];
  int stored_started = 0;
  for (const Json& e : stored) {
    EXPECT_NE(e["type"], "subagent_completed");
    if (e["type"] == "subagent_started") {
      ++stored_started;
      EXPECT_EQ(e["child_session_id"], child);
      EXPECT_EQ(e["seq"], (*started)["seq"]);
    }
  }
  EXPECT_EQ(stored_started, 1) << stored.dump();
  Json detail = Call("GET", "/v1/sessions/" + sid).json();
  ASSERT_EQ(detail["children"].size(), 1u) << detail.dump();
  EXPECT_EQ(detail["children"][0]["id"], child);
  // Its turn has begun and not ended: running, not new.
  EXPECT_EQ(detail["children"][0]["status"], "running") << detail.dump();

  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/turns/" + tid + "/cancel").status, 202u);
  EXPECT_EQ(Wait(sid, tid)["stop"], "aborted");
}

TEST_F(ServerTest, BadEditedArgumentsLeaveTheApprovalPending) {
  StartModel(Json::array({WriteCall("c1", "a.txt"), {{"text", "ok"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write")["stop"], "pending_approval");
  std::string aid = Call("GET", "/v1/approvals").json()["items"][0]["id"];
  Reply bad = Call("POST", "/v1/approvals/" + aid + "/decision",
                   {{"decision", "approve"}, {"edited_args", {{"content", "no path"}}}});
  EXPECT_EQ(bad.status, 400u) << bad.body;
  EXPECT_EQ(bad.json()["code"], "invalid_edited_args");
  const std::string refused = DescribeDecisionOutcome(DecisionOutcome::kInvalidEdit, 0, {});
  EXPECT_THAT(bad.json()["detail"].get<std::string>(), HasSubstr(refused));
  // The seeds' resolve route says it in the same words.
  Reply seeds = Call("POST", "/pending-approvals/" + aid + "/resolve",
                     {{"decision", "approve"}, {"editedArgs", {{"content", "no path"}}}});
  EXPECT_EQ(seeds.status, 400u) << seeds.body;
  EXPECT_EQ(seeds.json()["code"], "invalid_edited_args");
  EXPECT_THAT(seeds.json()["detail"].get<std::string>(), HasSubstr(refused));
  EXPECT_EQ(Call("GET", "/v1/approvals/" + aid).json()["state"], "pending");
  EXPECT_EQ(Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "maybe"}}).status,
            400u);
  EXPECT_EQ(Call("POST", "/v1/approvals/" + aid + "/decision",
                 {{"decision", "approve"}, {"scope", "forever"}})
                .json()["code"],
            "unsupported_scope");
  Reply edited = Call("POST", "/v1/approvals/" + aid + "/decision",
                      {{"decision", "approve"},
                       {"edited_args", {{"file_path", "b.txt"}, {"content", "edited\n"}}}});
  ASSERT_EQ(edited.status, 200u) << edited.body;
  Wait(sid, edited.json()["turn_id"]);
  EXPECT_FALSE(fs::exists(workspace_ / "a.txt"));
  EXPECT_TRUE(fs::exists(workspace_ / "b.txt"));
}

TEST_F(ServerTest, ADenialCancelsTheSiblingsOfItsBatch) {
  Json two = {{"tool_calls", Json::array({{{"id", "c1"},
                                           {"name", "write"},
                                           {"input", {{"file_path", "x"}, {"content", "1"}}}},
                                          {{"id", "c2"},
                                           {"name", "write"},
                                           {"input", {{"file_path", "y"}, {"content", "2"}}}}})}};
  StartModel(Json::array({two, {{"text", "understood"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write two")["stop"], "pending_approval");
  Json items = Call("GET", "/v1/sessions/" + sid + "/pending").json()["items"];
  ASSERT_EQ(items.size(), 2u);
  Reply denied = Call("POST", "/v1/approvals/" + items[0]["id"].get<std::string>() + "/decision",
                      {{"decision", "deny"}, {"reason", "not now"}});
  ASSERT_EQ(denied.status, 200u) << denied.body;
  EXPECT_EQ(denied.json()["status"], "resumed");
  Wait(sid, denied.json()["turn_id"]);
  Reply sibling = Call("POST", "/v1/approvals/" + items[1]["id"].get<std::string>() + "/decision",
                       {{"decision", "approve"}});
  EXPECT_EQ(sibling.status, 200u);
  EXPECT_EQ(sibling.json()["status"], "cancelled");
  EXPECT_FALSE(fs::exists(workspace_ / "x"));
  EXPECT_FALSE(fs::exists(workspace_ / "y"));
}

TEST_F(ServerTest, ABusySessionRefusesOrQueuesAndATurnCanBeCancelled) {
  StartModel(Json::array({{{"text", "slow"}, {"delay_ms", 60000}}, {{"text", "queued one"}}}));
  StartServer();
  std::string sid = NewSession();
  Reply first = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "one"}});
  ASSERT_EQ(first.status, 202u) << first.body;
  std::string tid = first.json()["id"];
  ASSERT_TRUE(model_->WaitForRequests(1, std::chrono::seconds(20)));
  Reply busy = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "two"}});
  EXPECT_EQ(busy.status, 409u);
  EXPECT_EQ(busy.json()["code"], "session_busy");
  Reply queued =
      Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "two"}, {"on_busy", "enqueue"}});
  EXPECT_EQ(queued.status, 202u);
  EXPECT_EQ(queued.json()["status"], "queued");
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid).json()["status"], "running");
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid + "/turns/" + tid).json()["status"], "running");

  Reply cancel = Call("POST", "/v1/sessions/" + sid + "/turns/" + tid + "/cancel");
  EXPECT_EQ(cancel.status, 202u) << cancel.body;
  Json r = Wait(sid, tid);
  EXPECT_EQ(r["stop"], "aborted") << r.dump();
  // The queued input runs next.
  ASSERT_TRUE(model_->WaitForRequests(2, std::chrono::seconds(20)));
  Client c(port_);
  c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=0");
  bool answered = false;
  while (auto f = c.Next()) {
    if (f->event == "turn_end" && f->json()["final_text"] == "queued one") {
      answered = true;
      break;
    }
  }
  EXPECT_TRUE(answered);
  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/turns/" + tid + "/cancel").status, 409u);
}

// A session's queue of inputs is bounded: past max_queued_inputs an input
// is refused with 429 and Retry-After, and nothing more is stored.
TEST_F(ServerTest, AFullQueueRefusesTheNextInputWithRetryAfter) {
  StartModel(
      Json::array({{{"text", "slow"}, {"delay_ms", 60000}}, {{"text", "q1"}}, {{"text", "q2"}}}));
  ServerOptions so;
  so.max_queued_inputs = 2;
  StartServer(so);
  std::string sid = NewSession();
  Reply first = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "one"}});
  ASSERT_EQ(first.status, 202u) << first.body;
  std::string tid = first.json()["id"];
  ASSERT_TRUE(model_->WaitForRequests(1, std::chrono::seconds(20)));
  const Json enqueue = {{"input", std::string(1000, 'x')}, {"on_busy", "enqueue"}};
  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/turns", enqueue).status, 202u);
  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/turns", enqueue).status, 202u);
  Reply full = Call("POST", "/v1/sessions/" + sid + "/turns", enqueue);
  EXPECT_EQ(full.status, 429u) << full.body;
  EXPECT_EQ(full.json()["code"], "queue_full");
  EXPECT_FALSE(full.headers["retry-after"].empty());
  auto queued = engine_->store().ListQueuedInputs(sid);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->size(), 2u);
  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/turns/" + tid + "/cancel").status, 202u);
  Wait(sid, tid);
}

// Queued inputs are kept by the store: a server stopped while the turn
// before them ran starts them, in order, when it starts again.
TEST_F(ServerTest, QueuedInputsSurviveARestart) {
  StartModel(Json::array({{{"text", "slow"}, {"delay_ms", 60000}},
                          {{"text", "queued one"}},
                          {{"text", "queued two"}}}));
  ServerOptions so;
  so.drain_timeout = std::chrono::milliseconds(50);
  StartServer(so);
  std::string sid = NewSession();
  Reply first = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "one"}});
  ASSERT_EQ(first.status, 202u) << first.body;
  ASSERT_TRUE(model_->WaitForRequests(1, std::chrono::seconds(20)));
  for (int place : {1, 2}) {
    Reply queued = Call("POST", "/v1/sessions/" + sid + "/turns",
                        {{"input", "queued " + std::to_string(place)}, {"on_busy", "enqueue"}});
    ASSERT_EQ(queued.status, 202u) << queued.body;
    EXPECT_EQ(queued.json()["status"], "queued");
    EXPECT_EQ(queued.json()["position"], place);
    EXPECT_EQ(queued.json()["events_url"], "/v1/sessions/" + sid + "/events/stream");
  }
  // Stopped: the running turn is cancelled at the drain timeout and the
  // queue stays in the store.
  StopServer();
  auto waiting = engine_->store().ListQueuedInputs(sid);
  ASSERT_TRUE(waiting.ok()) << waiting.error().ToString();
  ASSERT_EQ(waiting->size(), 2u);
  EXPECT_EQ((*waiting)[0].input, "queued 1");

  StartServer(so);
  Client c(port_);
  c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=0");
  std::vector<std::string> ends;
  while (auto f = c.Next()) {
    if (f->event != "turn_end") continue;
    ends.push_back(f->json()["stop"].get<std::string>() + ":" + f->json().value("final_text", ""));
    if (ends.size() == 3) break;
  }
  EXPECT_EQ(ends,
            (std::vector<std::string>{"aborted:", "completed:queued one", "completed:queued two"}));
  EXPECT_EQ(model_->requests().size(), 3u);
  EXPECT_TRUE(engine_->store().ListQueuedInputs(sid)->empty());
}

// {"continue": true} continues the newest turn when it failed or was
// interrupted, as `agentloop resume ID` does, and is refused otherwise.
TEST_F(ServerTest, ContinueRetriesAFailedTurnAndIsRefusedAfterACompletedOne) {
  StartModel(Json::array({{{"error", {{"code", "invalid_argument"}, {"message", "bad request"}}}},
                          {{"text", "second try"}}}));
  StartServer();
  std::string sid = NewSession();
  Json failed = RunTurn(sid, "try");
  ASSERT_EQ(failed["stop"], "failed") << failed.dump();
  Reply both = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "x"}, {"continue", true}});
  EXPECT_EQ(both.status, 400u) << both.body;
  Reply cont = Call("POST", "/v1/sessions/" + sid + "/turns", {{"continue", true}});
  ASSERT_EQ(cont.status, 202u) << cont.body;
  Json again = Wait(sid, cont.json()["id"]);
  EXPECT_EQ(again["stop"], "completed") << again.dump();
  EXPECT_EQ(again["final_text"], "second try");
  Reply nothing = Call("POST", "/v1/sessions/" + sid + "/turns", {{"continue", true}});
  EXPECT_EQ(nothing.status, 409u) << nothing.body;
  EXPECT_EQ(nothing.json()["code"], "nothing_to_continue");
}

TEST_F(ServerTest, TokensScopeAndSeparateTenants) {
  StartModel(Json::array());
  ServerOptions so;
  so.tokens.push_back({Sha256Hex("tok-acme"), "acme", kScopeRead | kScopeWrite | kScopeApprove});
  so.tokens.push_back({Sha256Hex("tok-reader"), "acme", kScopeRead});
  so.tokens.push_back({Sha256Hex("tok-other"), "other", kScopeRead | kScopeWrite});
  so.tokens.push_back({Sha256Hex("tok-ops"), "ops", kScopeAdmin});
  StartServer(so);
  auto as = [](const std::string& tok) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer " + tok}};
  };
  Reply none = Call("GET", "/v1/sessions");
  EXPECT_EQ(none.status, 401u);
  EXPECT_EQ(none.headers["www-authenticate"], "Bearer");
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, as("wrong")).status, 401u);
  Reply made = Call("POST", "/v1/sessions", Json::object(), as("tok-acme"));
  ASSERT_EQ(made.status, 201u) << made.body;
  std::string sid = made.json()["id"];
  EXPECT_EQ(Call("POST", "/v1/sessions", Json::object(), as("tok-reader")).status, 403u);
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid, nullptr, as("tok-reader")).status, 200u);
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid, nullptr, as("tok-other")).status, 404u);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, as("tok-other")).json()["items"].size(), 0u);
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid + "/events/stream", nullptr, as("tok-other")).status,
            404u);
  EXPECT_EQ(
      Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "x"}}, as("tok-other")).status,
      404u);
  EXPECT_EQ(Call("GET", "/v1/health").status, 200u);  // probes need no token
  // The metrics count every tenant's sessions: the admin's only.
  EXPECT_EQ(Call("GET", "/v1/metrics", nullptr, as("tok-acme")).status, 403u);
  EXPECT_EQ(Call("GET", "/v1/metrics", nullptr, as("tok-other")).status, 403u);
  Reply metrics = Call("GET", "/v1/metrics", nullptr, as("tok-ops"));
  EXPECT_EQ(metrics.status, 200u);
  EXPECT_THAT(metrics.body, HasSubstr("agentloop_turns_started_total"));
}

// With several tenants (as `agentloop serve` starts the engine for them), a
// tenant's user scope is its own: a user-scope memory one tenant's session
// saved (approved) reaches that tenant's later sessions, and neither the
// prompt nor memory_search of another tenant's session.
TEST_F(ServerTest, ATenantsUserScopeMemoryReachesOnlyItsOwnSessions) {
  const Json save = {{"name", "acme-secret"},
                     {"type", "fact"},
                     {"description", "Acme deploys from the blue cluster"},
                     {"body", "acme-body-text"},
                     {"scope", "user"}};
  StartModel(Json::array(
      {{{"tool_calls", Json::array({{{"id", "m1"}, {"name", "memory_save"}, {"input", save}}})}},
       {{"text", "saved"}},
       {{"tool_calls",
         Json::array(
             {{{"id", "s1"}, {"name", "memory_search"}, {"input", {{"name", "acme-secret"}}}}})}},
       {{"text", "other done"}},
       {{"text", "acme done"}}}));
  tenant_user_scopes_ = true;
  ServerOptions so;
  so.tokens.push_back({Sha256Hex("tok-acme"), "acme", kScopeRead | kScopeWrite | kScopeApprove});
  so.tokens.push_back({Sha256Hex("tok-other"), "other", kScopeRead | kScopeWrite | kScopeApprove});
  StartServer(so);
  auto as = [](const std::string& tok) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer " + tok}};
  };
  auto session = [&](const std::string& tok) {
    Reply r = Call("POST", "/v1/sessions", Json::object(), as(tok));
    EXPECT_EQ(r.status, 201u) << r.body;
    return r.json().value("id", "");
  };
  auto turn = [&](const std::string& tok, const std::string& sid, const std::string& input) {
    Reply r = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", input}}, as(tok));
    EXPECT_EQ(r.status, 202u) << r.body;
    Reply w = Call(
        "GET", "/v1/sessions/" + sid + "/turns/" + r.json().value("id", "") + "/wait?timeout_s=20",
        nullptr, as(tok));
    EXPECT_EQ(w.status, 200u) << w.body;
    return w.json().value("result", Json());
  };

  const std::string a1 = session("tok-acme");
  Json paused = turn("tok-acme", a1, "remember the cluster");
  ASSERT_EQ(paused["stop"], "pending_approval") << paused.dump();
  Reply pending = Call("GET", "/v1/sessions/" + a1 + "/pending", nullptr, as("tok-acme"));
  ASSERT_EQ(pending.json()["items"].size(), 1u) << pending.body;
  const std::string aid = pending.json()["items"][0]["id"];
  Reply decided =
      Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}}, as("tok-acme"));
  ASSERT_EQ(decided.status, 200u) << decided.body;
  Reply w = Call(
      "GET",
      "/v1/sessions/" + a1 + "/turns/" + decided.json().value("turn_id", "") + "/wait?timeout_s=20",
      nullptr, as("tok-acme"));
  ASSERT_EQ(w.json()["result"]["final_text"], "saved") << w.body;
  const fs::path data = tmp_.path() / "data";
  EXPECT_TRUE(fs::exists(data / "tenants" / "acme" / "memory" / "acme-secret.md"));
  EXPECT_FALSE(fs::exists(data / "memory" / "acme-secret.md"));

  // The other tenant's next session: not in its prompt, not found by name.
  const std::string b1 = session("tok-other");
  EXPECT_EQ(turn("tok-other", b1, "what do you know?")["final_text"], "other done");
  ASSERT_TRUE(model_->WaitForRequests(4, std::chrono::seconds(20)));
  const auto requests = model_->requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_NE(requests[2].body.find(kRootPrompt), std::string::npos);
  EXPECT_EQ(requests[2].body.find("acme-secret"), std::string::npos)
      << requests[2].body.substr(0, 1500);
  EXPECT_EQ(requests[3].body.find("acme-body-text"), std::string::npos)
      << requests[3].body.substr(0, 1500);
  EXPECT_EQ(requests[3].body.find("Acme deploys"), std::string::npos)
      << requests[3].body.substr(0, 1500);

  // The same tenant's next session has it in its prompt.
  const std::string a2 = session("tok-acme");
  EXPECT_EQ(turn("tok-acme", a2, "and you?")["final_text"], "acme done");
  ASSERT_EQ(model_->requests().size(), 5u);
  const std::string own = model_->requests()[4].body;
  EXPECT_NE(own.find("acme-secret"), std::string::npos) << own.substr(0, 1500);
  EXPECT_NE(own.find("Acme deploys from the blue cluster"), std::string::npos)
      << own.substr(0, 1500);
}

TEST_F(ServerTest, StateChangesFromAForeignOriginAreRefused) {
  StartModel(Json::array());
  StartServer();
  Reply evil = Call("POST", "/v1/sessions", Json::object(), {{"Origin", "http://evil.example"}});
  EXPECT_EQ(evil.status, 403u);
  EXPECT_EQ(evil.json()["code"], "origin_not_allowed");
  Reply own = Call("POST", "/v1/sessions", Json::object(),
                   {{"Origin", "http://127.0.0.1:" + std::to_string(port_)}});
  EXPECT_EQ(own.status, 201u);
  // Reads are not state changes.
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Origin", "http://evil.example"}}).status, 200u);
}

TEST_F(ServerTest, IdempotencyKeysReplayTheFirstAnswer) {
  StartModel(Json::array());
  StartServer();
  Reply a = Call("POST", "/v1/sessions", {{"title", "once"}}, {{"Idempotency-Key", "k1"}});
  ASSERT_EQ(a.status, 201u);
  Reply b = Call("POST", "/v1/sessions", {{"title", "once"}}, {{"Idempotency-Key", "k1"}});
  EXPECT_EQ(b.status, 201u);
  EXPECT_EQ(b.json()["id"], a.json()["id"]);
  EXPECT_EQ(b.headers["idempotent-replayed"], "true");
  Reply c = Call("POST", "/v1/sessions", {{"title", "twice"}}, {{"Idempotency-Key", "k1"}});
  EXPECT_EQ(c.status, 422u);
  EXPECT_EQ(c.json()["code"], "idempotency_key_reused");
  EXPECT_EQ(Call("GET", "/v1/sessions").json()["items"].size(), 1u);

  // Keys live in the store: a restarted server still knows them.
  StopServer();
  StartServer();
  Reply d = Call("POST", "/v1/sessions", {{"title", "once"}}, {{"Idempotency-Key", "k1"}});
  EXPECT_EQ(d.status, 201u);
  EXPECT_EQ(d.json()["id"], a.json()["id"]);
  EXPECT_EQ(Call("GET", "/v1/sessions").json()["items"].size(), 1u);
}

// A turn answered with its event stream records, for a repeat of the same
// POST, the 202 of the turn it started: the repeat starts nothing.
TEST_F(ServerTest, AStreamedTurnsIdempotencyKeyReplaysTheTurn) {
  StartModel(Json::array({{{"text", "once only"}}}));
  StartServer();
  std::string sid = NewSession();
  const std::string body = Json{{"input", "go"}}.dump();
  std::string turn_id;
  {
    Client c(port_);
    Reply head =
        c.OpenStream("/v1/sessions/" + sid + "/turns", {{"Idempotency-Key", "t1"}}, "POST", body);
    ASSERT_EQ(head.status, 200u);
    while (auto f = c.Next()) {
      if (f->event == "turn_begin") turn_id = f->json()["turn_id"];
    }
  }
  ASSERT_FALSE(turn_id.empty());
  Client again(port_);
  Reply r = again.Call("POST", "/v1/sessions/" + sid + "/turns", body,
                       {{"Idempotency-Key", "t1"}, {"Accept", "text/event-stream"}});
  EXPECT_EQ(r.status, 202u) << r.body;
  EXPECT_EQ(r.json()["id"], turn_id);
  EXPECT_EQ(r.headers["idempotent-replayed"], "true");
  Reply messages = Call("GET", "/v1/sessions/" + sid + "/messages");
  EXPECT_EQ(messages.json()["items"].size(), 2u);
}

// POST .../compact runs the summary turn and answers with its outcome;
// the compaction is an event of the session, and the store keeps every
// message.
TEST_F(ServerTest, CompactSummarisesTheHistoryOnRequest) {
  StartModel(Json::array({{{"text", "one"}},
                          {{"text", "two"}},
                          {{"text", "three"}},
                          {{"text", "four"}},
                          {{"text", "Goals: count to four."}}}));
  StartServer();
  std::string sid = NewSession();
  for (const char* input : {"1", "2", "3", "4"}) {
    ASSERT_EQ(RunTurn(sid, input)["stop"], "completed");
  }
  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/compact", {{"focus", 7}}).status, 400u);
  Reply r = Call("POST", "/v1/sessions/" + sid + "/compact", {{"focus", "counting"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json()["stop"], "completed") << r.body;
  Json events = Call("GET", "/v1/sessions/" + sid + "/events?after=0").json()["items"];
  int compactions = 0;
  int messages = 0;
  for (const auto& e : events) {
    if (e["type"] == "compaction") {
      ++compactions;
      EXPECT_EQ(e["trigger"], "manual");
      EXPECT_EQ(e["summary_source"], "model");
    }
    if (e["type"] == "message") ++messages;
  }
  EXPECT_EQ(compactions, 1);
  EXPECT_GE(messages, 8);
  EXPECT_EQ(Call("GET", "/v1/sessions/" + sid).json()["status"], "idle");
  EXPECT_EQ(Call("POST", "/v1/sessions/nope/compact", Json::object()).status, 404u);
}

// A compaction waits for its summary off the store workers: with a single
// worker, another session's requests are answered while the model holds
// the summary back.
TEST_F(ServerTest, ACompactionInProgressDoesNotHoldTheStoreWorkers) {
  agentloop::testing::FakeModelServer::Options mo;
  mo.auto_summary = true;
  mo.summary_delay_ms = 120'000;  // until Stop
  auto m = agentloop::testing::FakeModelServer::Start(
      Json{{"responses",
            Json::array(
                {{{"text", "one"}}, {{"text", "two"}}, {{"text", "three"}}, {{"text", "four"}}})}},
      mo);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  model_ = std::move(*m);
  ServerOptions so;
  so.worker_threads = 1;
  StartServer(std::move(so));
  std::string sid = NewSession();
  std::string other = NewSession();
  for (const char* input : {"1", "2", "3", "4"}) {
    ASSERT_EQ(RunTurn(sid, input)["stop"], "completed");
  }
  Reply compacted;
  std::thread compacting([&] {
    Client c(port_);
    compacted = c.Call("POST", "/v1/sessions/" + sid + "/compact", "{}");
  });
  // The summary request reached the model: the compaction waits on it.
  EXPECT_TRUE(model_->WaitForRequests(5, std::chrono::seconds(20)));
  Reply got = Call("GET", "/v1/sessions/" + other);
  EXPECT_EQ(got.status, 200u) << got.body;
  EXPECT_EQ(got.json()["id"], other);
  EXPECT_EQ(Call("POST", "/v1/sessions/" + sid + "/compact", Json::object()).status, 409u);
  model_->Stop();  // the summary's wait ends
  compacting.join();
  EXPECT_NE(compacted.status, 0u);
}

// Signing out of the console revokes that cookie: a copy of it is refused,
// also by a restarted server; another sign-in of the same token still works.
TEST_F(ServerTest, SigningOutRevokesTheConsoleCookieAcrossARestart) {
  StartModel(Json::array());
  auto options = [] {
    ServerOptions so;
    so.tokens.push_back({Sha256Hex("tok-acme"), "acme", kScopeRead | kScopeWrite});
    so.cookie_secret = std::string(64, 'c');
    return so;
  };
  StartServer(options());
  const std::string origin = "http://127.0.0.1:" + std::to_string(port_);
  auto sign_in = [&] {
    Reply r = Call("POST", "/v1/console/session", nullptr,
                   {{"Authorization", "Bearer tok-acme"}, {"Origin", origin}});
    EXPECT_EQ(r.status, 200u) << r.body;
    std::string set = r.headers["set-cookie"];
    return set.substr(0, set.find(';'));
  };
  auto with = [](const std::string& cookie) {
    return std::vector<std::pair<std::string, std::string>>{{"Cookie", cookie}};
  };
  const std::string cookie = sign_in();
  const std::string kept = sign_in();
  ASSERT_NE(cookie, kept);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, with(cookie)).status, 200u);
  Reply out =
      Call("DELETE", "/v1/console/session", nullptr, {{"Cookie", cookie}, {"Origin", origin}});
  EXPECT_EQ(out.status, 204u) << out.body;
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, with(cookie)).status, 401u);
  EXPECT_EQ(Call("GET", "/v1/console/session", nullptr, with(cookie)).status, 401u);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, with(kept)).status, 200u);
  StopServer();

  StartServer(options());
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, with(cookie)).status, 401u);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, with(kept)).status, 200u);
  StopServer();

  // A new cookie secret ends every sign-in.
  ServerOptions rotated = options();
  rotated.cookie_secret = std::string(64, 'd');
  StartServer(std::move(rotated));
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, with(kept)).status, 401u);
}

// A cookie made from what the configuration holds (the token's SHA-256, as
// `server.tokens` stores it and `config show` prints it) is refused: the
// server signs with a secret of its own.
TEST_F(ServerTest, ACookieForgedFromTheTokensHashIsRefused) {
  StartModel(Json::array());
  ServerOptions so;
  const TokenGrant admin{Sha256Hex("tok-admin"), "acme", kScopeAdmin};
  so.tokens.push_back(admin);
  StartServer(so);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string grant_id = Sha256Hex("console:" + admin.sha256).substr(0, 16);
  for (const char* version : {"v1", "v2"}) {
    const std::string payload = std::string(version) + "." + grant_id + "." +
                                std::to_string(now + 10LL * 365 * 24 * 3600 * 1000) +
                                ".0123456789abcdef";
    Result<std::string> mac = permissions::SignPayload(admin.sha256, payload);
    ASSERT_TRUE(mac.ok());
    const std::string forged =
        "agentloop_console=" + payload + "." + mac->substr(mac->find('=') + 1);
    Reply r = Call("GET", "/v1/sessions", nullptr, {{"Cookie", forged}});
    EXPECT_EQ(r.status, 401u) << version << ": " << r.body;
  }
  // The real sign-in works.
  Reply in = Call("POST", "/v1/console/session", nullptr,
                  {{"Authorization", "Bearer tok-admin"},
                   {"Origin", "http://127.0.0.1:" + std::to_string(port_)}});
  ASSERT_EQ(in.status, 200u) << in.body;
  const std::string cookie = in.headers["set-cookie"].substr(0, in.headers["set-cookie"].find(';'));
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Cookie", cookie}}).status, 200u);
}

// DNS rebinding: a page whose name now resolves to 127.0.0.1 sends its own
// name as Host and a matching Origin. Only the server's names are answered,
// before routing; the probes answer any Host.
TEST_F(ServerTest, ARequestNamingAnotherHostIsRefusedBeforeRouting) {
  StartModel(Json::array());
  ServerOptions so;
  so.public_url = "https://Agents.Example.com/";
  StartServer(so);
  const std::string port = std::to_string(port_);
  const std::string evil = "rebind.attacker.example:" + port;
  Reply made =
      Call("POST", "/v1/sessions", Json::object(), {{"Host", evil}, {"Origin", "http://" + evil}});
  EXPECT_EQ(made.status, 421u) << made.body;
  EXPECT_EQ(made.json()["code"], "misdirected_request");
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Host", evil}}).status, 421u);
  EXPECT_EQ(Call("GET", "/", nullptr, {{"Host", evil}}).status, 421u);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Host", ""}}).status, 421u);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Host", "127.0.0.1:1"}}).status, 421u);
  EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Host", "agents.example.com:8443"}}).status,
            421u);
  EXPECT_EQ(Call("GET", "/v1/sessions").json()["items"].size(), 0u);
  for (const std::string& host :
       {"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port,
        std::string("agents.example.com"), std::string("agents.example.com:443")}) {
    EXPECT_EQ(Call("GET", "/v1/sessions", nullptr, {{"Host", host}}).status, 200u) << host;
  }
  EXPECT_EQ(Call("GET", "/v1/health", nullptr, {{"Host", "10.0.0.7:" + port}}).status, 200u);
}

TEST_F(ServerTest, PatchRelabelsASession) {
  StartModel(Json::array());
  StartServer();
  std::string sid = NewSession({{"title", "first"}, {"metadata", {{"ticket", 7}}}});
  Reply r = Call("PATCH", "/v1/sessions/" + sid, {{"title", "renamed"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json()["title"], "renamed");
  EXPECT_EQ(r.json()["metadata"]["ticket"], 7);
  r = Call("PATCH", "/v1/sessions/" + sid, {{"metadata", nullptr}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json()["metadata"], Json::object());
  EXPECT_EQ(r.json()["title"], "renamed");
  EXPECT_EQ(Call("PATCH", "/v1/sessions/" + sid, {{"metadata", Json::array()}}).status, 400u);
  EXPECT_EQ(Call("PATCH", "/v1/sessions/" + sid, {{"agent", "other"}}).status, 400u);
  EXPECT_EQ(Call("PATCH", "/v1/sessions/nope", {{"title", "x"}}).status, 404u);
}

TEST_F(ServerTest, OversizedBodiesAndHeadersAreRefused) {
  StartModel(Json::array());
  ServerOptions so;
  so.limits.max_body_bytes = 1024;
  StartServer(so);
  Reply big = Call("POST", "/v1/sessions", {{"title", std::string(4096, 'x')}});
  EXPECT_EQ(big.status, 413u);
  EXPECT_EQ(big.json()["code"], "body_too_large");
  Reply fat = Call("GET", "/v1/health", nullptr, {{"X-Filler", std::string(20000, 'y')}});
  EXPECT_EQ(fat.status, 431u);
}

// A batch decided while no server ran (here: recorded without continuing,
// as by a resolver that could not take the session) continues when the
// server starts.
TEST_F(ServerTest, ABatchDecidedWhileNoServerRanContinuesAtStart) {
  StartModel(Json::array({WriteCall("c1", "offline.txt"), {{"text", "continued at start"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write offline")["stop"], "pending_approval");
  std::string aid = Call("GET", "/v1/approvals").json()["items"][0]["id"];
  uint64_t before = Call("GET", "/v1/sessions/" + sid).json()["last_seq"];
  StopServer();
  Resolution approve;
  approve.continue_turn = false;
  SessionOptions open;
  open.session_id = sid;
  auto report = engine_->Submit(op::Decide{aid, approve}, open, {}, {});
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  ASSERT_TRUE(report->continues_later);
  EXPECT_FALSE(fs::exists(workspace_ / "offline.txt"));

  StartServer();
  Client c(port_);
  c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=" + std::to_string(before));
  std::string final_text;
  while (auto f = c.Next()) {
    if (f->event == "turn_end") {
      final_text = f->json()["final_text"];
      break;
    }
  }
  EXPECT_EQ(final_text, "continued at start");
  EXPECT_TRUE(fs::exists(workspace_ / "offline.txt"));
}

// A decided batch whose continuation finds the session held for a moment
// (here by the test; in a server, by another of its requests: a decider
// checking edited arguments, a read of a cut turn) is continued once the
// session is free, without a client asking for it.
TEST_F(ServerTest, ADecidedBatchFindingItsSessionHeldContinuesOnceItIsFree) {
  StartModel(Json::array({WriteCall("c1", "held.txt"), {{"text", "continued once free"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write held")["stop"], "pending_approval");
  std::string aid = Call("GET", "/v1/approvals").json()["items"][0]["id"];
  auto held = engine_->store().AcquireLock(sid, getpid());
  ASSERT_TRUE(held.ok()) << held.error().ToString();
  Reply decided = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  ASSERT_EQ(decided.status, 200u) << decided.body;
  ASSERT_EQ(decided.json()["status"], "resumed");
  // The continuation starts at once (the session is running here) and
  // its open finds the session held: it is running here no longer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string status = "running";
  while (status == "running" && std::chrono::steady_clock::now() < deadline) {
    status = Call("GET", "/v1/sessions/" + sid).json().value("status", "");
    if (status == "running") std::this_thread::yield();
  }
  ASSERT_NE(status, "running");
  EXPECT_FALSE(fs::exists(workspace_ / "held.txt"));
  held->reset();
  Json done = Wait(sid, decided.json()["turn_id"]);
  EXPECT_EQ(done["stop"], "completed") << done.dump();
  EXPECT_EQ(done["final_text"], "continued once free");
  EXPECT_TRUE(fs::exists(workspace_ / "held.txt"));
}

// Runs `sql` on the test server's SQLite store through a connection of
// its own (the tests' triggers make the server's writes fail).
void ExecOnStore(const fs::path& data_dir, const std::string& sql) {
  auto db = agentloop::store::Db::Open(data_dir / "sessions.db", 5000);
  ASSERT_TRUE(db.ok()) << db.error().ToString();
  Status s = (*db)->Exec(sql);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// A decision answered `resumed` whose continuation the store refuses while
// `refuse_sql` holds (triggers here, armed by one row of table `fail`; a
// failing fsync in production) is tried again: the session stops running
// here with nothing written, and once the row is gone the turn continues.
void ServerTest::ExpectContinuationTriedAgain(const std::string& file,
                                              const std::string& final_text,
                                              const std::string& refuse_sql) {
  StartModel(Json::array({WriteCall("c1", file), {{"text", final_text}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write " + file)["stop"], "pending_approval");
  std::string aid = Call("GET", "/v1/approvals").json()["items"][0]["id"];
  ExecOnStore(tmp_.path() / "data",
              "CREATE TABLE fail (x INTEGER); INSERT INTO fail VALUES (1);" + refuse_sql);
  Reply decided = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  ASSERT_EQ(decided.status, 200u) << decided.body;
  ASSERT_EQ(decided.json()["status"], "resumed");
  // The continuation starts at once and fails on the store: the session is
  // running here no longer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string status = "running";
  while (status == "running" && std::chrono::steady_clock::now() < deadline) {
    status = Call("GET", "/v1/sessions/" + sid).json().value("status", "");
    if (status == "running") std::this_thread::yield();
  }
  ASSERT_NE(status, "running");
  EXPECT_FALSE(fs::exists(workspace_ / file));
  ExecOnStore(tmp_.path() / "data", "DELETE FROM fail;");
  Json done = Wait(sid, decided.json()["turn_id"]);
  EXPECT_EQ(done["stop"], "completed") << done.dump();
  EXPECT_EQ(done["final_text"], final_text);
  EXPECT_TRUE(fs::exists(workspace_ / file));
}

// The claim of the decided batch is refused.
TEST_F(ServerTest, AContinuationWhoseClaimFailsIsTriedAgain) {
  ExpectContinuationTriedAgain("claimed.txt", "continued after all",
                               "CREATE TRIGGER refuse_claim BEFORE UPDATE OF closed ON checkpoints "
                               "WHEN NEW.closed = 1 AND EXISTS (SELECT 1 FROM fail) "
                               "BEGIN SELECT RAISE(ABORT, 'claim refused'); END;");
}

// The continued turn's first commit is refused: the batch is not lost with
// the turn that could not store it.
TEST_F(ServerTest, AContinuationWhoseFirstCommitFailsIsTriedAgain) {
  ExpectContinuationTriedAgain("begun.txt", "begun after all",
                               "CREATE TRIGGER refuse_begin BEFORE INSERT ON events "
                               "WHEN NEW.type = 'turn_begin' AND EXISTS (SELECT 1 FROM fail) "
                               "BEGIN SELECT RAISE(ABORT, 'commit refused'); END;");
}

// The continuation cannot even open the session (taking its lock is a
// write the store refuses).
TEST_F(ServerTest, AContinuationWhoseOpenFailsIsTriedAgain) {
  ExpectContinuationTriedAgain("opened.txt", "opened after all",
                               "CREATE TRIGGER refuse_open BEFORE INSERT ON session_locks "
                               "WHEN EXISTS (SELECT 1 FROM fail) "
                               "BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END;");
}

TEST_F(ServerTest, NonLoopbackWithoutTokensIsRefused) {
  StartModel(Json::array());
  EngineOptions eo;
  eo.data_dir = tmp_.path() / "data";
  auto e = Engine::Create(eo);
  ASSERT_TRUE(e.ok());
  ServerOptions so;
  so.listen = "0.0.0.0:0";
  so.no_auth = true;
  so.agents.push_back(Agent("coder", AgentOptions()));
  auto s = Server::Create(so, **e, io_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("without authentication"));
}

// No token does not mean no authentication: a server without tokens starts
// only when told to serve without authentication.
TEST_F(ServerTest, NoTokensWithoutNoAuthIsRefused) {
  StartModel(Json::array());
  EngineOptions eo;
  eo.data_dir = tmp_.path() / "data";
  auto e = Engine::Create(eo);
  ASSERT_TRUE(e.ok());
  ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.agents.push_back(Agent("coder", AgentOptions()));
  auto s = Server::Create(so, **e, io_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(s.error().message(), HasSubstr("no token"));
  so.no_auth = true;
  so.tokens.push_back({Sha256Hex("t"), "acme", kScopeRead});
  EXPECT_FALSE(Server::Create(so, **e, io_).ok());
}

TEST_F(ServerTest, AShutdownKeepsAPausedSessionForTheNextServer) {
  StartModel(Json::array({WriteCall("c1", "later.txt"), {{"text", "done later"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write later")["stop"], "pending_approval");
  Client watcher(port_);
  watcher.OpenStream("/v1/sessions/" + sid + "/events/stream");
  StopServer();
  EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
  std::optional<Client::Frame> last;
  while (auto f = watcher.Next()) last = f;
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->event, "shutdown");

  StartServer();
  std::string aid = Call("GET", "/v1/approvals").json()["items"][0]["id"];
  Reply decided = Call("POST", "/v1/approvals/" + aid + "/decision", {{"decision", "approve"}});
  ASSERT_EQ(decided.status, 200u) << decided.body;
  EXPECT_EQ(Wait(sid, decided.json()["turn_id"])["final_text"], "done later");
  EXPECT_TRUE(fs::exists(workspace_ / "later.txt"));
}

// The seeds' HTTP adapter routes: a message answered 200 with the text or
// 202 with the pending item; the durable resolve route continues the turn
// and answers with its text; a repeat is a graceful no-op.
TEST_F(ServerTest, TheSeedsRoutesPauseResolveAndContinue) {
  StartModel(Json::array(
      {{{"text", "first answer"}}, WriteCall("c1", "seed.txt"), {{"text", "seed written"}}}));
  StartServer();
  Reply first = Call("POST", "/agents/coder/messages", {{"message", "hello"}});
  ASSERT_EQ(first.status, 200u) << first.body;
  EXPECT_EQ(first.json()["text"], "first answer");
  std::string sid = first.json()["sessionId"];
  ASSERT_FALSE(first.json()["events"].empty());
  EXPECT_EQ(first.json()["events"].back()["type"], "turn_end");
  EXPECT_FALSE(first.json().contains("stopReason"));

  Reply paused = Call("POST", "/agents/coder/messages", {{"message", "write"}, {"sessionId", sid}});
  ASSERT_EQ(paused.status, 202u) << paused.body;
  Json p = paused.json();
  EXPECT_EQ(p["pending"], true);
  EXPECT_EQ(p["type"], "approval");
  EXPECT_EQ(p["tool"], "write");
  EXPECT_EQ(p["sessionId"], sid);
  std::string aid = p["id"];
  EXPECT_EQ(p["approveUrl"], "/approvals/" + aid + "/approve");
  EXPECT_EQ(p["statusUrl"], "/agents/coder/sessions/" + sid);

  Reply wrong = Call("POST", "/pending-questions/" + aid + "/answer", {{"answer", "x"}});
  EXPECT_EQ(wrong.status, 400u);
  EXPECT_THAT(wrong.json()["detail"].get<std::string>(), HasSubstr("/pending-approvals/"));
  Reply status = Call("GET", "/agents/coder/sessions/" + sid);
  ASSERT_EQ(status.status, 200u);
  EXPECT_EQ(status.json()["pending"].size(), 1u);
  EXPECT_EQ(Call("GET", "/agents/other/sessions/" + sid).status, 404u);

  Reply resolved =
      Call("POST", "/pending-approvals/" + aid + "/resolve", {{"decision", "approve"}});
  ASSERT_EQ(resolved.status, 200u) << resolved.body;
  EXPECT_EQ(resolved.json()["text"], "seed written");
  EXPECT_EQ(resolved.json()["sessionId"], sid);
  EXPECT_TRUE(fs::exists(workspace_ / "seed.txt"));
  Reply again = Call("POST", "/pending-approvals/" + aid + "/resolve", {{"decision", "approve"}});
  EXPECT_EQ(again.status, 200u);
  EXPECT_EQ(again.json()["alreadyResolved"], true);
  // In the words the /v1 routes and the CLI use.
  EXPECT_EQ(again.json()["outcome"], "already_resolved");
  EXPECT_THAT(again.json()["detail"].get<std::string>(),
              HasSubstr("already resolved the same way: approved by http:default"));
  Reply differently =
      Call("POST", "/pending-approvals/" + aid + "/resolve", {{"decision", "deny"}});
  EXPECT_EQ(differently.json()["outcome"], "conflict");
  EXPECT_THAT(differently.json()["detail"].get<std::string>(),
              HasSubstr("already resolved differently"));
  EXPECT_EQ(Call("POST", "/agents/nobody/messages", {{"message", "x"}}).status, 404u);
  EXPECT_EQ(Call("POST", "/agents/coder/messages", Json::object()).status, 400u);
}

TEST_F(ServerTest, TheSeedsStreamRouteStartsWithTheSession) {
  StartModel(Json::array({{{"text", "streamed"}}}));
  StartServer();
  Client c(port_);
  Reply head =
      c.OpenStream("/agents/coder/messages/stream", {}, "POST", Json{{"message", "go"}}.dump());
  ASSERT_EQ(head.status, 200u);
  auto f = c.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->event, "session");
  EXPECT_FALSE(f->json()["sessionId"].get<std::string>().empty());
  // loopengine's `done` comes exactly once, last, after the native turn_end.
  std::vector<std::string> types;
  Json done;
  while (auto g = c.Next()) {
    types.push_back(g->event);
    if (g->event == "done") done = g->json();
  }
  ASSERT_GE(types.size(), 2u);
  EXPECT_EQ(types[types.size() - 2], "turn_end");
  EXPECT_EQ(types.back(), "done");
  EXPECT_EQ(std::count(types.begin(), types.end(), "done"), 1);
  EXPECT_EQ(done["text"], "streamed");
  EXPECT_FALSE(done.contains("stopReason"));
}

// Receives an agent's notifications on the server's io_context (made
// before the server runs, destroyed after it stopped).
class WebhookReceiver {
 public:
  explicit WebhookReceiver(asio::io_context& io)
      : http_(io, HttpLimits{}, [this](std::shared_ptr<Exchange> ex) {
          Response r;
          r.body = "{}";
          {
            std::lock_guard<std::mutex> lock(mu_);
            got_.push_back(ex->request());
            if (answers_ > 0) {
              --answers_;
              r.status = answer_;
            }
          }
          cv_.notify_all();
          ex->Send(std::move(r));
        }) {
    EXPECT_TRUE(http_.Listen(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)).ok());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_.port()) + "/hook"; }
  // The n-th notification (0-based), waiting up to 20 s for it.
  std::optional<Request> Get(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return got_.size() > n; })) {
      return std::nullopt;
    }
    return got_[n];
  }
  // Answers the next `count` notifications with `status` (then 200 again).
  void AnswerNext(int count, unsigned status) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_ = count;
    answer_ = status;
  }
  size_t received() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Request> got_;
  int answers_ = 0;
  unsigned answer_ = 200;
  HttpServer http_;
};

// The path of a link (its URL without the scheme and authority).
std::string LinkPath(const Json& url, int port) {
  std::string prefix = "http://127.0.0.1:" + std::to_string(port);
  std::string s = url.get<std::string>();
  EXPECT_EQ(s.rfind(prefix + "/v1/links/", 0), 0u) << s;
  return s.substr(prefix.size());
}

TEST_F(ServerTest, AWebhookCarriesSignedLinksThatDecideOnceOnlyByPost) {
  StartModel(Json::array({WriteCall("c1", "<b>x</b>.txt"), {{"text", "wrote it"}}}));
  WebhookReceiver hook(io_);
  ServerOptions so;
  AgentSpec agent = Agent("coder", AgentOptions());
  agent.webhook = {hook.url(), "hook-secret"};
  so.agents.push_back(std::move(agent));
  StartServer(std::move(so));
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write it")["stop"], "pending_approval");

  std::optional<Request> n = hook.Get(0);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->Header("X-Agentloop-Event"), "approval.requested");
  EXPECT_TRUE(permissions::VerifySignature("hook-secret", n->body,
                                           n->Header(permissions::kSignatureHeader)));
  Json body = Json::parse(n->body);
  EXPECT_EQ(body["type"], "approval.requested");
  EXPECT_EQ(body["session_id"], sid);
  EXPECT_EQ(body["tool"], "write");
  std::string aid = body["pending_id"];
  std::string approve = LinkPath(body["links"]["approve"], port_);
  std::string deny = LinkPath(body["links"]["deny"], port_);

  // The page asks; it decides nothing, and shows the model's text inert.
  Reply page = Call("GET", deny);
  ASSERT_EQ(page.status, 200u) << page.body << deny;
  EXPECT_THAT(page.body, HasSubstr("Deny this call?"));
  EXPECT_THAT(page.body, HasSubstr("<form method=\"post\">"));
  EXPECT_THAT(page.body, HasSubstr("&lt;b&gt;x&lt;/b&gt;.txt"));
  EXPECT_THAT(page.body, ::testing::Not(HasSubstr("<b>x")));
  EXPECT_EQ(page.headers["cache-control"], "no-store");
  EXPECT_EQ(Call("GET", "/v1/approvals/" + aid).json()["state"], "pending");

  // A link changed by hand is refused.
  std::string forged = approve;
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(Call("POST", forged).status, 403u);
  EXPECT_EQ(Call("GET", "/v1/links/garbage").status, 403u);
  EXPECT_EQ(Call("GET", "/v1/approvals/" + aid).json()["state"], "pending");

  Reply approved = Call("POST", approve);
  ASSERT_EQ(approved.status, 200u) << approved.body;
  EXPECT_THAT(approved.body, HasSubstr("Approved"));
  Json item = Call("GET", "/v1/approvals/" + aid).json();
  EXPECT_EQ(item["state"], "resolved") << item.dump();
  // The resumed turn ends: its notification follows.
  std::optional<Request> completed = hook.Get(1);
  ASSERT_TRUE(completed.has_value());
  EXPECT_EQ(completed->Header("X-Agentloop-Event"), "turn.completed");
  Json end = Json::parse(completed->body);
  EXPECT_EQ(end["stop"], "completed");
  EXPECT_EQ(end["final_text"], "wrote it");
  EXPECT_TRUE(fs::exists(workspace_ / "<b>x</b>.txt"));

  // Used: neither link decides again.
  Reply again = Call("POST", approve);
  EXPECT_EQ(again.status, 200u);
  EXPECT_THAT(again.body, HasSubstr("Already decided"));
  Reply late_deny = Call("POST", deny);
  EXPECT_THAT(late_deny.body, HasSubstr("Already decided"));
  StopServer();
}

TEST_F(ServerTest, AnExpiredLinkIsRefusedAndAQuestionLinkAnswers) {
  StartModel(Json::array(
      {{{"tool_calls",
         Json::array(
             {{{"id", "q1"},
               {"name", "ask_user"},
               {"input", {{"question", "Which colour?"}, {"options", {"red", "blue"}}}}}})}},
       {{"text", "blue it is"}},
       WriteCall("c2", "late.txt")}));
  WebhookReceiver hook(io_);
  ServerOptions so;
  AgentSpec agent = Agent("coder", AgentOptions());
  agent.webhook = {hook.url(), "hook-secret"};
  so.agents.push_back(std::move(agent));
  StartServer(std::move(so));
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "ask me")["stop"], "pending_question");
  std::optional<Request> n = hook.Get(0);
  ASSERT_TRUE(n.has_value());
  Json body = Json::parse(n->body);
  EXPECT_EQ(body["type"], "question.asked");
  std::string answer = LinkPath(body["links"]["answer"], port_);
  Reply page = Call("GET", answer);
  EXPECT_THAT(page.body, HasSubstr("Which colour?"));
  EXPECT_THAT(page.body, HasSubstr("value=\"blue\""));
  EXPECT_EQ(Call("POST", answer, nullptr).status, 400u);  // no answer given
  Client c(port_);
  Reply posted = c.Call("POST", answer, "answer=blue&answer=");
  ASSERT_EQ(posted.status, 200u) << posted.body;
  EXPECT_THAT(posted.body, HasSubstr("Answered"));
  std::optional<Request> completed = hook.Get(1);
  ASSERT_TRUE(completed.has_value());
  EXPECT_EQ(Json::parse(completed->body)["final_text"], "blue it is");
  StopServer();

  // Links that expire at once.
  ServerOptions short_lived;
  AgentSpec again = Agent("coder", AgentOptions());
  again.webhook = {hook.url(), "hook-secret"};
  short_lived.agents.push_back(std::move(again));
  short_lived.link_ttl = std::chrono::seconds(0);
  StartServer(std::move(short_lived));
  ASSERT_EQ(RunTurn(sid, "write late.txt")["stop"], "pending_approval");
  std::optional<Request> later = hook.Get(2);
  ASSERT_TRUE(later.has_value());
  Json b = Json::parse(later->body);
  Reply expired = Call("POST", LinkPath(b["links"]["approve"], port_));
  EXPECT_EQ(expired.status, 410u);
  EXPECT_EQ(Call("GET", "/v1/approvals/" + b["pending_id"].get<std::string>()).json()["state"],
            "pending");
  StopServer();
}

// Whether the outbox row of delivery `id` is finished (delivered): -1 when
// there is none.
int OutboxFinished(const fs::path& db, const std::string& id) {
  auto d = store::Db::Open(db, 1000);
  if (!d.ok()) return -1;
  auto st = (*d)->Prepare("SELECT due_at_ms IS NULL FROM notification_outbox WHERE id = ?");
  if (!st.ok()) return -1;
  st->Bind(1, id);
  auto row = st->Step();
  return row.ok() && *row ? static_cast<int>(st->Int(0)) : -1;
}

// A notification is recorded before it is sent: a receiver that fails
// while its server stops gets it from the restarted server, under the same
// delivery id and with the same body, once; it is then finished and stays
// so across another restart.
TEST_F(ServerTest, ANotificationSurvivesARestartUnderItsDeliveryId) {
  StartModel(Json::array({WriteCall("c1", "a.txt")}));
  WebhookReceiver hook(io_);
  hook.AnswerNext(1000, 503);
  auto options = [&] {
    ServerOptions so;
    AgentSpec agent = Agent("coder", AgentOptions());
    agent.webhook = {hook.url(), "hook-secret"};
    so.agents.push_back(std::move(agent));
    so.notify_retry = std::chrono::milliseconds(100);
    return so;
  };
  StartServer(options());
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "write it")["stop"], "pending_approval");
  std::optional<Request> first = hook.Get(0);
  ASSERT_TRUE(first.has_value());
  // The server stops while it waits to try again (its backoff is 0.5 s).
  StopServer();
  const size_t before_restart = hook.received();
  hook.AnswerNext(0, 200);

  StartServer(options());
  std::optional<Request> again = hook.Get(before_restart);
  ASSERT_TRUE(again.has_value());
  const std::string id(first->Header("X-Agentloop-Delivery"));
  EXPECT_EQ(id.rfind("dlv_", 0), 0u) << id;
  EXPECT_EQ(again->Header("X-Agentloop-Delivery"), id);
  EXPECT_EQ(again->Header("X-Agentloop-Event"), "approval.requested");
  EXPECT_EQ(again->body, first->body);
  EXPECT_TRUE(permissions::VerifySignature("hook-secret", again->body,
                                           again->Header(permissions::kSignatureHeader)));
  // Delivered: finished in the outbox once the server has heard the 200
  // (its shutdown waits for the store call).
  ASSERT_TRUE(WaitDelivered(1));
  StopServer();
  EXPECT_EQ(OutboxFinished(tmp_.path() / "data" / "sessions.db", id), 1);
  EXPECT_EQ(hook.received(), before_restart + 1);
}

// A pause whose server stopped before recording its notification (here:
// an agent that had no webhook then) is announced by the next server's
// start, under the item's delivery id, and only once.
TEST_F(ServerTest, AStartAnnouncesOutstandingItemsWithoutANotification) {
  StartModel(Json::array({WriteCall("c1", "a.txt"), {{"text", "done"}}}));
  StartServer();
  std::string sid = NewSession();
  Json paused = RunTurn(sid, "write it");
  ASSERT_EQ(paused["stop"], "pending_approval");
  StopServer();

  WebhookReceiver hook(io_);
  ServerOptions so;
  AgentSpec agent = Agent("coder", AgentOptions());
  agent.webhook = {hook.url(), "hook-secret"};
  so.agents.push_back(std::move(agent));
  StartServer(std::move(so));
  std::optional<Request> n = hook.Get(0);
  ASSERT_TRUE(n.has_value());
  Json body = Json::parse(n->body);
  EXPECT_EQ(body["type"], "approval.requested");
  EXPECT_EQ(body["session_id"], sid);
  const std::string pid = body["pending_id"];
  EXPECT_EQ(n->Header("X-Agentloop-Delivery"), "dlv_" + pid);
  // The link it carries decides the item.
  Reply approved = Call("POST", LinkPath(body["links"]["approve"], port_));
  EXPECT_EQ(approved.status, 200u) << approved.body;
  std::optional<Request> completed = hook.Get(1);
  ASSERT_TRUE(completed.has_value());
  EXPECT_EQ(completed->Header("X-Agentloop-Event"), "turn.completed");
  ASSERT_TRUE(WaitDelivered(2));
  StopServer();
  EXPECT_EQ(OutboxFinished(tmp_.path() / "data" / "sessions.db", "dlv_" + pid), 1);
}

TEST_F(ServerTest, ThePugiEngineRouteMakesOneModelCallAndRechecksPlanMode) {
  StartModel(Json::array(
      {{{"text", "two files"}},
       {{"tool_calls",
         Json::array({{{"id", "c9"}, {"name", "read"}, {"input", {{"file_path", "a.txt"}}}}})}}}));
  ServerOptions so;
  so.agents.push_back(Agent("coder", AgentOptions()));
  SessionOptions planner = AgentOptions();
  planner.command = CommandKind::kPlan;
  so.agents.push_back(Agent("planner", planner));
  StartServer(std::move(so));
  auto tool = [](const std::string& name) {
    return Json{{"name", name}, {"description", "d"}, {"parameters", {{"type", "object"}}}};
  };
  Json body = {{"personaSlug", "coder"},
               {"messages", Json::array({{{"role", "user"}, {"content", "what is here?"}}})},
               {"tools", Json::array({tool("read"), tool("write")})}};
  Reply text = Call("POST", "/api/pugi/engine", body);
  ASSERT_EQ(text.status, 200u) << text.body;
  EXPECT_EQ(text.json()["stop"], "text");
  EXPECT_EQ(text.json()["content"], "two files");
  EXPECT_EQ(text.json()["model"], "fake-model");  // the model that answered
  Reply calls = Call("POST", "/api/pugi/engine", body);
  ASSERT_EQ(calls.status, 200u) << calls.body;
  EXPECT_EQ(calls.json()["stop"], "tool_use");
  EXPECT_EQ(calls.json()["toolCalls"][0]["name"], "read");

  // Forged: a mutating tool in plan mode, whether the request or the agent plans.
  Json forged = body;
  forged["command"] = "plan";
  Reply refused = Call("POST", "/api/pugi/engine", forged);
  EXPECT_EQ(refused.status, 400u);
  EXPECT_EQ(refused.json()["code"], "plan_mode_refused");
  Json sneaky = body;
  sneaky["personaSlug"] = "planner";
  sneaky["command"] = "code";
  EXPECT_EQ(Call("POST", "/api/pugi/engine", sneaky).json()["code"], "plan_mode_refused");
  Json unknown = body;
  unknown["personaSlug"] = "nobody";
  EXPECT_EQ(Call("POST", "/api/pugi/engine", unknown).status, 404u);
  Json capped = body;
  capped["maxTokens"] = 200'001;
  EXPECT_EQ(Call("POST", "/api/pugi/engine", capped).status, 400u);
  // Refused requests reached no model: the fake served exactly two.
  EXPECT_EQ(model_->requests().size(), 2u);
}

// An MCP server of the agent, run by python3 (tests/e2e/fake_mcp_server.py);
// its readOnlyHint is believed, so its echo runs without an approval.
McpServerSpec FakeMcp() {
  McpServerSpec s;
  s.name = "fake";
  s.command = FindExecutable("python3");
  s.args = {AL_FAKE_MCP_SERVER};
  s.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  s.trusted = true;
  s.startup_timeout_ms = 20000;
  return s;
}

TEST_F(ServerTest, SessionMcpShowsTheTurnsServersAndOtherwiseTheConfiguredOnes) {
  if (FindExecutable("python3").empty()) GTEST_SKIP() << "python3 is not installed";
  StartModel(Json::array(
      {{{"tool_calls",
         Json::array({{{"id", "m1"}, {"name", "mcp__fake__echo"}, {"input", {{"text", "hi"}}}}})}},
       {{"text", "slow"}, {"delay_ms", 60000}}}));
  ServerOptions so;
  so.tokens.push_back({Sha256Hex("tok-acme"), "acme", kScopeRead | kScopeWrite});
  so.tokens.push_back({Sha256Hex("tok-nothing"), "acme", kScopeWrite});
  so.tokens.push_back({Sha256Hex("tok-other"), "other", kScopeRead | kScopeWrite});
  SessionOptions o = AgentOptions();
  McpServerSpec off = FakeMcp();
  off.name = "off";
  off.enabled = false;
  o.mcp_servers = {FakeMcp(), off};
  so.agents.push_back(Agent("coder", o));
  StartServer(so);
  auto as = [](const std::string& tok) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer " + tok}};
  };
  Reply made = Call("POST", "/v1/sessions", Json::object(), as("tok-acme"));
  ASSERT_EQ(made.status, 201u) << made.body;
  const std::string sid = made.json()["id"];
  const std::string path = "/v1/sessions/" + sid + "/mcp";

  // No turn runs: the configured servers, none running.
  Reply idle = Call("GET", path, nullptr, as("tok-acme"));
  ASSERT_EQ(idle.status, 200u) << idle.body;
  EXPECT_EQ(idle.json(), Json::parse(R"({"running": false, "servers": [
      {"name": "fake", "transport": "stdio", "state": "stopped", "tools": []},
      {"name": "off", "transport": "stdio", "state": "disabled", "tools": []}]})"));
  EXPECT_EQ(Call("GET", path, nullptr, as("tok-other")).status, 404u);
  EXPECT_EQ(Call("GET", path, nullptr, as("tok-nothing")).status, 403u);
  Reply unknown = Call("GET", "/v1/sessions/ses_nosuch/mcp", nullptr, as("tok-acme"));
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(unknown.json()["code"], "not_found");

  // A turn starts the agent's servers: the model's call reaches the MCP
  // server, and while the turn waits for the model the servers are shown as
  // the open session has them.
  Reply turn = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "echo"}}, as("tok-acme"));
  ASSERT_EQ(turn.status, 202u) << turn.body;
  const std::string tid = turn.json()["id"];
  ASSERT_TRUE(model_->WaitForRequests(2, std::chrono::seconds(20)));
  EXPECT_NE(model_->requests()[1].body.find("echo: hi"), std::string::npos)
      << "the MCP tool's result did not reach the model";
  Reply live = Call("GET", path, nullptr, as("tok-acme"));
  ASSERT_EQ(live.status, 200u) << live.body;
  Json j = live.json();
  EXPECT_EQ(j["running"], true);
  ASSERT_EQ(j["servers"].size(), 2u) << j.dump();
  EXPECT_EQ(j["servers"][0]["name"], "fake");
  EXPECT_EQ(j["servers"][0]["state"], "ready");
  EXPECT_EQ(j["servers"][0]["protocol_version"], "2025-11-25");
  EXPECT_EQ(j["servers"][0]["server"]["version"], "1.2.3");
  EXPECT_EQ(j["servers"][0]["tools"][0], "mcp__fake__echo");
  EXPECT_EQ(j["servers"][1]["state"], "disabled");
  EXPECT_EQ(Call("GET", path, nullptr, as("tok-other")).status, 404u);

  // When the turn is over its servers are stopped again.
  EXPECT_EQ(
      Call("POST", "/v1/sessions/" + sid + "/turns/" + tid + "/cancel", nullptr, as("tok-acme"))
          .status,
      202u);
  Reply w = Call("GET", "/v1/sessions/" + sid + "/turns/" + tid + "/wait?timeout_s=20", nullptr,
                 as("tok-acme"));
  EXPECT_EQ(w.json()["status"], "done") << w.body;
  Reply after = Call("GET", path, nullptr, as("tok-acme"));
  EXPECT_EQ(after.json()["running"], false) << after.body;
  EXPECT_EQ(after.json()["servers"][0]["state"], "stopped");
}

TEST_F(ServerTest, SessionMcpOfAChosenWorkspaceIsTheAgentsForThatWorkspace) {
  StartModel(Json::array());
  ServerOptions so;
  SessionOptions o = AgentOptions();
  AgentSpec a = Agent("rooted", o);
  a.for_workspace = [o](const std::string& tenant,
                        const std::string& requested) -> Result<SessionOptions> {
    SessionOptions chosen = o;
    chosen.workspace = o.workspace / tenant / requested;
    fs::create_directories(chosen.workspace);
    chosen.mcp_servers.clear();
    if (!requested.empty()) {
      chosen.mcp_servers = {FakeMcp()};
      chosen.mcp_servers[0].name = "for_" + tenant + "_" + requested;
    }
    return chosen;
  };
  so.agents.push_back(a);
  StartServer(so);
  std::string root = NewSession();
  std::string sub = NewSession({{"workspace", "sub"}});
  EXPECT_EQ(Call("GET", "/v1/sessions/" + root + "/mcp").json()["servers"], Json::array());
  Reply r = Call("GET", "/v1/sessions/" + sub + "/mcp");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_EQ(r.json()["servers"].size(), 1u) << r.body;
  EXPECT_EQ(r.json()["servers"][0]["name"], "for_default_sub");
  // Every session of the agent works in its tenant's folder of the root.
  EXPECT_EQ(Call("GET", "/v1/sessions/" + root).json()["workspace"],
            fs::weakly_canonical(workspace_ / "default").string());
}

// Appends to `script` the items of one paused and approved turn: a write
// asked for approval, then the answer after it ran. `tag` is in the turn's
// input and picks the items out of the shared script, whichever session
// asks first.
void AddApprovedTurn(Json& script, const std::string& tag) {
  script.push_back({{"match", tag},
                    {"tool_calls",
                     Json::array({{{"id", "c" + tag},
                                   {"name", "write"},
                                   {"input", {{"file_path", tag + ".txt"}, {"content", "x"}}}}})}});
  script.push_back({{"match", tag}, {"text", "done " + tag}});
}

// A client that decides an approval the instant its `pending` event arrives
// finds it: the pause (event, checkpoint, pending index) is committed before
// any stream shows it, and a decision that lands while the pausing turn is
// still finishing continues the batch once it has. Sessions in parallel,
// each watched on its own v1 stream or on the multiplexed one.
TEST_F(ServerTest, AnApprovalDecidedTheInstantItsPendingEventArrivesIsFound) {
  constexpr int kSessions = 4;
  constexpr int kRounds = 30;
  Json script = Json::array();
  auto tag = [](int s, int r) { return "<s" + std::to_string(s) + "r" + std::to_string(r) + ">"; };
  for (int r = 0; r < kRounds; ++r) {
    for (int s = 0; s < kSessions; ++s) AddApprovedTurn(script, tag(s, r));
  }
  StartModel(script);
  StartServer();
  std::vector<std::string> sids;
  for (int s = 0; s < kSessions; ++s) sids.push_back(NewSession());
  std::vector<std::string> failures(kSessions);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      const std::string& sid = sids[s];
      const bool multiplexed = s % 2 == 1;
      Client stream(port_);
      Reply head = stream.OpenStream(multiplexed ? "/v1/events/stream?sessions=" + sid
                                                 : "/v1/sessions/" + sid + "/events/stream");
      if (head.status != 200) {
        failures[s] = "stream: HTTP " + std::to_string(head.status);
        return;
      }
      for (int r = 0; r < kRounds && failures[s].empty(); ++r) {
        const std::string t = tag(s, r);
        Client poster(port_);
        Reply started =
            poster.Call("POST", "/v1/sessions/" + sid + "/turns", Json{{"input", t}}.dump());
        if (started.status != 202) {
          failures[s] = t + ": turn: " + started.body;
          break;
        }
        bool decided = false;
        for (;;) {
          std::optional<Client::Frame> f = stream.Next();
          if (!f) {
            failures[s] = t + ": the stream ended or went quiet";
            break;
          }
          Json e = f->json();
          if (f->event == "pending" && !decided) {
            const std::string aid = e["items"][0]["id"];
            Client decider(port_);
            Reply d = decider.Call("POST", "/v1/approvals/" + aid + "/decision",
                                   Json{{"decision", "approve"}}.dump());
            if (d.status != 200 || d.json().value("status", "") != "resumed") {
              failures[s] = t + ": decision: HTTP " + std::to_string(d.status) + " " + d.body;
              break;
            }
            decided = true;
          } else if (f->event == "turn_end" && e.value("stop", "") != "pending_approval") {
            if (!decided || e.value("final_text", "") != "done " + t) {
              failures[s] = t + ": the turn ended " + e.dump();
            }
            break;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int s = 0; s < kSessions; ++s) EXPECT_EQ(failures[s], "") << "session " << s;
}

// The same on the seeds' stream route: the approval is resolved as soon as
// the stream shows it, and the resolve answers with the continued turn.
TEST_F(ServerTest, TheSeedsStreamsPauseIsResolvedTheInstantItIsShown) {
  constexpr int kRounds = 20;
  Json script = Json::array();
  for (int r = 0; r < kRounds; ++r) AddApprovedTurn(script, "<seed" + std::to_string(r) + ">");
  StartModel(script);
  StartServer();
  std::string sid;
  for (int r = 0; r < kRounds; ++r) {
    const std::string t = "<seed" + std::to_string(r) + ">";
    Json body = {{"message", t}};
    if (!sid.empty()) body["sessionId"] = sid;
    Client c(port_);
    Reply head = c.OpenStream("/agents/coder/messages/stream", {}, "POST", body.dump());
    ASSERT_EQ(head.status, 200u) << t;
    std::optional<Reply> resolved;
    std::string announced, last;
    while (auto f = c.Next()) {
      last = f->event;
      if (f->event == "session") sid = f->json()["sessionId"];
      if (f->event == "approval:pending") announced = f->json()["id"];
      if (f->event != "pending" || resolved) continue;
      const std::string aid = f->json()["items"][0]["id"];
      Client decider(port_);
      resolved = decider.Call("POST", "/pending-approvals/" + aid + "/resolve",
                              Json{{"decision", "approve"}}.dump());
    }
    ASSERT_TRUE(resolved.has_value()) << t << ": no pending event";
    // loopengine's adapter events: the item as approval:pending, `done` last.
    EXPECT_FALSE(announced.empty()) << t;
    EXPECT_EQ(last, "done") << t;
    ASSERT_EQ(resolved->status, 200u) << t << ": " << resolved->body;
    EXPECT_EQ(resolved->json().value("text", ""), "done " + t) << resolved->body;
  }
}

// An agent's webhook receiver that decides the approval from inside its
// handler, before it answers the notification.
TEST_F(ServerTest, AWebhookReceiverDecidesFromInsideItsHandler) {
  constexpr int kRounds = 10;
  Json script = Json::array();
  for (int r = 0; r < kRounds; ++r) AddApprovedTurn(script, "<hook" + std::to_string(r) + ">");
  StartModel(script);
  // The receiver runs on an io_context of its own: its handler blocks on a
  // call to the server.
  asio::io_context hook_io{1};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> outcomes;
  HttpServer receiver(hook_io, HttpLimits{}, [&](std::shared_ptr<Exchange> ex) {
    Json n = Json::parse(ex->request().body, nullptr, false);
    std::string outcome = n.value("type", "");
    if (outcome == "approval.requested") {
      Client decider(port_);
      Reply d = decider.Call("POST", "/v1/approvals/" + n.value("pending_id", "") + "/decision",
                             Json{{"decision", "approve"}}.dump());
      outcome += ": HTTP " + std::to_string(d.status) + " " + d.json().value("status", "");
    }
    Response r;
    r.body = "{}";
    ex->Send(std::move(r));
    std::lock_guard<std::mutex> lock(mu);
    outcomes.push_back(outcome);
    cv.notify_all();
  });
  ASSERT_TRUE(receiver.Listen(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)).ok());
  std::thread hook_thread([&] { hook_io.run(); });
  ServerOptions so;
  AgentSpec agent = Agent("coder", AgentOptions());
  agent.webhook = {"http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook", "secret"};
  so.agents.push_back(std::move(agent));
  StartServer(std::move(so));
  std::string sid = NewSession();
  for (int r = 0; r < kRounds; ++r) {
    const std::string t = "<hook" + std::to_string(r) + ">";
    Reply started = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", t}});
    ASSERT_EQ(started.status, 202u) << started.body;
    // The turn pauses; the receiver's decision resumes it; it completes.
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] {
      return outcomes.size() >= 2 * static_cast<size_t>(r + 1);
    })) << t;
    EXPECT_EQ(outcomes[2 * r], "approval.requested: HTTP 200 resumed") << t;
    EXPECT_EQ(outcomes[2 * r + 1], "turn.completed") << t;
  }
  StopServer();
  hook_io.stop();
  hook_thread.join();
}

// Leaves in the store the start of a turn that never ends, as a server
// killed while its model call was outstanding leaves it; returns its id.
std::string WriteCutTurn(SessionStore& store, const std::string& sid) {
  Result<SessionInfo> info = store.GetSession(sid);
  EXPECT_TRUE(info.ok());
  uint64_t seq = info.ok() ? info->last_seq : 0;
  const std::string turn = "turn_cut_" + std::to_string(seq);
  std::vector<Event> events;
  auto add = [&](Event e) {
    e.seq = ++seq;
    e.ts = 1;
    events.push_back(std::move(e));
  };
  add(MakeEvent(
      TurnBeginData{.input = "user", .command = CommandKind::kCode, .budget = {}, .counters = {}},
      sid, turn));
  add(MakeEvent(MessageData{Message::User("cut " + turn)}, sid, turn));
  add(MakeEvent(StepBeginData{.step = 1, .max_output_tokens = 0, .messages = 1}, sid, turn));
  EXPECT_TRUE(store.Append(sid, events).ok());
  return turn;
}

// A cut turn (its server killed mid-turn) ends `failed` before anything
// else runs, on every path: a restarted server asked for its state, a
// queued input, {"continue": true}; and its state reads 200.
TEST_F(ServerTest, ACutTurnEndsFirstOnEveryPathAndItsStateIsReadable) {
  StartModel(Json::array({{{"text", "first"}}, {{"text", "queued ran"}}, {{"text", "continued"}}}));
  StartServer();
  std::string sid = NewSession();
  ASSERT_EQ(RunTurn(sid, "one")["stop"], "completed");
  StopServer();

  // A restarted server answers the cut turn's state: ended failed.
  const std::string cut1 = WriteCutTurn(engine_->store(), sid);
  StartServer();
  for (const std::string& path : {"/turns/" + cut1, "/turns/" + cut1 + "/wait?timeout_s=1"}) {
    Reply state = Call("GET", "/v1/sessions/" + sid + path);
    ASSERT_EQ(state.status, 200u) << path << " " << state.body;
    EXPECT_EQ(state.json()["status"], "done") << state.body;
    EXPECT_EQ(state.json()["result"]["stop"], "failed") << state.body;
    EXPECT_THAT(state.json()["result"]["reason"].get<std::string>(),
                HasSubstr(std::string(kCutTurnReason)));
  }
  StopServer();

  // A queued input: the cut turn ends, then the input runs.
  const uint64_t before = engine_->store().GetSession(sid)->last_seq;
  const std::string cut2 = WriteCutTurn(engine_->store(), sid);
  ASSERT_TRUE(engine_->store().EnqueueInput(sid, "queued", false).ok());
  StartServer();
  {
    Client c(port_);
    c.OpenStream("/v1/sessions/" + sid + "/events/stream?after=" + std::to_string(before));
    std::vector<std::string> seen;
    while (auto f = c.Next()) {
      Json e = f->json();
      if (f->event == "turn_begin") seen.push_back("begin:" + e["turn_id"].get<std::string>());
      if (f->event != "turn_end") continue;
      seen.push_back("end:" + e["turn_id"].get<std::string>() + ":" + e["stop"].get<std::string>());
      if (e["stop"] == "completed") {
        EXPECT_EQ(e["final_text"], "queued ran");
        break;
      }
    }
    ASSERT_EQ(seen.size(), 4u) << ::testing::PrintToString(seen);
    EXPECT_EQ(seen[0], "begin:" + cut2);
    EXPECT_EQ(seen[1], "end:" + cut2 + ":failed");
    EXPECT_NE(seen[2], "begin:" + cut2);
  }
  EXPECT_TRUE(engine_->store().ListQueuedInputs(sid)->empty());

  // {"continue": true}: the cut turn ends, then is retried (its id).
  // The queued turn's session closes after its end (bounded wait).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Call("GET", "/v1/sessions/" + sid).json()["status"] != "idle") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the session never went idle";
    std::this_thread::yield();
  }
  const std::string cut3 = WriteCutTurn(engine_->store(), sid);
  Reply cont = Call("POST", "/v1/sessions/" + sid + "/turns", {{"continue", true}});
  ASSERT_EQ(cont.status, 202u) << cont.body;
  EXPECT_EQ(cont.json()["id"], cut3);
  Json done = Wait(sid, cut3);
  EXPECT_EQ(done["stop"], "completed") << done.dump();
  EXPECT_EQ(done["final_text"], "continued");
  auto events = engine_->store().Events(sid, 0);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> of_cut3;
  for (const auto& e : *events) {
    if (e.turn_id != cut3 || (e.type != "turn_begin" && e.type != "turn_end")) continue;
    Json j = Json::parse(e.json);
    of_cut3.push_back(
        e.type + ":" +
        (e.type == "turn_end" ? j["stop"].get<std::string>() : j["input"].get<std::string>()));
  }
  EXPECT_EQ(of_cut3, (std::vector<std::string>{"turn_begin:user", "turn_end:failed",
                                               "turn_begin:retry", "turn_end:completed"}));
}

// A watcher is sent a durable event only once the commit that stores it has
// happened: a step whose commit fails (a trigger refuses its assistant
// message) sends none of its events with an id, and every `id: N` a
// watcher sees is the stored log's event N, across the failed turn and the
// next one, whose events are sent once they commit.
TEST_F(ServerTest, AWatcherIsSentOnlyCommittedEvents) {
  StartModel(Json::array({{{"text", "lost answer"}}, {{"text", "kept answer"}}}));
  StartServer();
  std::string sid = NewSession();
  {
    auto db = agentloop::store::Db::Open(tmp_.path() / "data" / "sessions.db", 5000);
    ASSERT_TRUE(db.ok()) << db.error().ToString();
    ASSERT_TRUE(
        (*db)
            ->Exec("CREATE TABLE fail_commit (x INTEGER);"
                   "INSERT INTO fail_commit VALUES (1);"
                   "CREATE TRIGGER refuse_lost BEFORE INSERT ON events "
                   "WHEN NEW.json LIKE '%lost answer%' AND EXISTS (SELECT 1 FROM fail_commit) "
                   "BEGIN SELECT RAISE(ABORT, 'commit refused'); END;")
            .ok());
  }
  Client w(port_);
  ASSERT_EQ(w.OpenStream("/v1/sessions/" + sid + "/events/stream?after=0").status, 200u);

  Json failed = RunTurn(sid, "first");
  EXPECT_EQ(failed["stop"], "failed") << failed.dump();
  {
    auto db = agentloop::store::Db::Open(tmp_.path() / "data" / "sessions.db", 5000);
    ASSERT_TRUE(db.ok()) << db.error().ToString();
    ASSERT_TRUE((*db)->Exec("DELETE FROM fail_commit;").ok());
  }
  Json kept = RunTurn(sid, "second");
  EXPECT_EQ(kept["final_text"], "kept answer") << kept.dump();

  std::vector<Client::Frame> durable;
  while (auto f = w.Next()) {
    if (f->id.empty()) continue;
    durable.push_back(*f);
    if (f->event == "turn_end" && f->json().value("final_text", "") == "kept answer") break;
  }
  auto stored = engine_->store().Events(sid, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_FALSE(durable.empty());
  ASSERT_EQ(durable.size(), stored->size()) << "the watcher did not see the whole log";
  for (size_t i = 0; i < durable.size(); ++i) {
    EXPECT_EQ(durable[i].id, std::to_string((*stored)[i].seq));
    EXPECT_EQ(durable[i].event, (*stored)[i].type) << "seq " << (*stored)[i].seq;
    EXPECT_THAT(durable[i].data, ::testing::Not(HasSubstr("lost answer")))
        << "an event that was never stored was sent as seq " << durable[i].id;
  }
}

// A turn is answered 202 once its first commit has stored it: a turn none
// of whose commits succeeds (a trigger refuses its input) is answered 503,
// and the log has nothing of it.
TEST_F(ServerTest, ATurnNeverStoredIsNotAccepted) {
  StartModel(Json::array({{{"text", "never seen"}}}));
  StartServer();
  std::string sid = NewSession();
  {
    auto db = agentloop::store::Db::Open(tmp_.path() / "data" / "sessions.db", 5000);
    ASSERT_TRUE(db.ok()) << db.error().ToString();
    ASSERT_TRUE((*db)
                    ->Exec("CREATE TRIGGER refuse_doomed BEFORE INSERT ON events "
                           "WHEN NEW.json LIKE '%doomed input%' "
                           "BEGIN SELECT RAISE(ABORT, 'commit refused'); END;")
                    .ok());
  }
  Reply r = Call("POST", "/v1/sessions/" + sid + "/turns", {{"input", "doomed input"}});
  EXPECT_EQ(r.status, 503u) << r.body;
  EXPECT_EQ(r.json().value("code", ""), "turn_not_stored") << r.body;
  auto stored = engine_->store().Events(sid, 0);
  ASSERT_TRUE(stored.ok());
  for (const auto& e : *stored) EXPECT_NE(e.type, "turn_begin") << e.json;
}

}  // namespace
}  // namespace agentloop::server
