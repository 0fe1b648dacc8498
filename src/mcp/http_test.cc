// The streamable HTTP transport against a small MCP server on 127.0.0.1
// written here (raw sockets, one thread per connection): JSON and
// event-stream replies, the session header, the version header, the bearer
// token, 404 and a new session, DELETE, the GET event stream, errors and
// cancellation.
#include <poll.h>
#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "mcp/http_transport.h"
#include "mcp/servers.h"

namespace agentloop::mcp {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct Seen {
  std::string method;                          // HTTP method
  std::map<std::string, std::string> headers;  // lower-case names
  Json body;                                   // null for no body
  std::string Header(const std::string& n) const {
    auto it = headers.find(n);
    return it == headers.end() ? "" : it->second;
  }
};

class FakeHttpMcp {
 public:
  // Answer POSTed requests with an event stream instead of JSON.
  std::atomic<bool> sse{false};
  // Answer GET with an event stream (else 405).
  std::atomic<bool> events{false};

  FakeHttpMcp() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeHttpMcp() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (int c : conns_) ::shutdown(c, SHUT_RDWR);
      cv_.notify_all();
    }
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    for (auto& t : threads_) t.join();
    ::close(fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

  // The next request that names the current session gets 404.
  void ExpireSession() {
    std::lock_guard<std::mutex> lock(mu_);
    session_.clear();
  }

  // Sends `msg` on the open GET stream.
  void Push(const Json& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    pushed_.push_back(msg.dump());
    cv_.notify_all();
  }

  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

  // Waits until `pred(seen)` holds.
  bool WaitFor(const std::function<bool(const std::vector<Seen>&)>& pred,
               std::chrono::milliseconds limit = 20s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return pred(seen_); });
  }
  bool WaitForSlowClosed(std::chrono::milliseconds limit = 20s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return slow_closed_; });
  }

 private:
  void AcceptLoop() {
    while (true) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(c);
        return;
      }
      conns_.push_back(c);
      threads_.emplace_back([this, c] {
        Serve(c);
        std::lock_guard<std::mutex> l(mu_);
        conns_.erase(std::find(conns_.begin(), conns_.end(), c));
        ::close(c);
      });
    }
  }

  static bool WriteAll(int c, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  static std::string Reply(int status, const std::string& body,
                           const std::vector<std::string>& headers = {}) {
    std::string r = "HTTP/1.1 " + std::to_string(status) + " X\r\n";
    for (const auto& h : headers) r += h + "\r\n";
    if (!body.empty()) r += "Content-Type: application/json\r\n";
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return r;
  }

  static std::string StreamHead(const std::vector<std::string>& headers = {}) {
    std::string r = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n";
    for (const auto& h : headers) r += h + "\r\n";
    return r + "\r\n";
  }

  static std::string Event(const Json& msg) {
    return "event: message\ndata: " + msg.dump() + "\n\n";
  }

  // Reads one request; false at the end of the connection.
  static bool Read(int c, std::string& buf, Seen& out) {
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      char tmp[4096];
      ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
    std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);
    out.method = head.substr(0, head.find(' '));
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos < head.size()) {
      size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, next == std::string::npos ? next : next - pos - 2);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(tolower(ch));
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        out.headers[name] = value;
      }
      pos = next;
    }
    size_t length =
        out.headers.count("content-length") ? std::stoul(out.headers["content-length"]) : 0;
    while (buf.size() < length) {
      char tmp[4096];
      ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
    std::string body = buf.substr(0, length);
    buf.erase(0, length);
    out.body = body.empty() ? Json() : Json::parse(body, nullptr, false);
    return true;
  }

  // Waits until the peer closes `c` (or the server stops).
  void HoldUntilClosed(int c) {
    while (true) {
      pollfd p{c, POLLIN, 0};
      int r = ::poll(&p, 1, 100);
      if (r > 0) {
        char tmp[64];
        if (::recv(c, tmp, sizeof tmp, 0) <= 0) return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
  }

  void Serve(int c) {
    std::string buf;
    while (true) {
      Seen req;
      if (!Read(c, buf, req)) return;
      std::string session;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(req);
        session = session_;
        cv_.notify_all();
      }
      const std::string sid = req.Header("mcp-session-id");
      if (req.method == "DELETE") {
        if (!WriteAll(c, Reply(200, ""))) return;
        continue;
      }
      if (req.method == "GET") {
        if (!events) {
          if (!WriteAll(c, Reply(405, ""))) return;
          continue;
        }
        if (!WriteAll(c, StreamHead() + ": open\n\n")) return;
        ServeEvents(c);
        return;
      }
      const Json& m = req.body;
      const std::string method = m.value("method", "");
      if (method != "initialize" && (sid.empty() || sid != session)) {
        if (!WriteAll(c, Reply(sid.empty() ? 400 : 404, ""))) return;
        continue;
      }
      if (!m.contains("id") || !m.contains("method")) {  // notification or response
        if (!WriteAll(c, Reply(202, ""))) return;
        continue;
      }
      const Json id = m["id"];
      auto result = [&](const Json& r) {
        return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", r}};
      };
      if (method == "initialize") {
        std::string fresh;
        {
          std::lock_guard<std::mutex> lock(mu_);
          session_ = fresh = "sid-" + std::to_string(++sessions_);
        }
        Json r = result({{"protocolVersion", "2025-06-18"},
                         {"capabilities", {{"tools", {{"listChanged", true}}}}},
                         {"serverInfo", {{"name", "fake-http"}, {"version", "0.9"}}}});
        if (!WriteAll(c, Reply(200, r.dump(), {"Mcp-Session-Id: " + fresh}))) return;
        continue;
      }
      if (method == "tools/list") {
        const std::string cursor = m["params"].value("cursor", "");
        Json tools = Json::array();
        Json r;
        auto tool = [](const char* name) {
          return Json{{"name", name}, {"inputSchema", {{"type", "object"}}}};
        };
        if (cursor.empty()) {
          r = {{"tools", {tool("echo")}}, {"nextCursor", "p2"}};
        } else {
          r = {{"tools", {tool("slow"), tool("fail")}}};
        }
        if (!WriteAll(c, Reply(200, result(r).dump()))) return;
        continue;
      }
      if (method == "tools/call") {
        const Json& p = m["params"];
        const std::string name = p.value("name", "");
        if (name == "fail") {
          if (!WriteAll(c, Reply(500, "boom"))) return;
          continue;
        }
        Json progress;
        if (p.contains("_meta") && p["_meta"].contains("progressToken")) {
          progress = {
              {"jsonrpc", "2.0"},
              {"method", "notifications/progress"},
              {"params", {{"progressToken", p["_meta"]["progressToken"]}, {"progress", 1}}}};
        }
        if (name == "slow") {
          std::string s = StreamHead() + ": priming\n\n";
          if (!progress.is_null()) s += Event(progress);
          if (!WriteAll(c, s)) return;
          HoldUntilClosed(c);
          std::lock_guard<std::mutex> lock(mu_);
          slow_closed_ = true;
          cv_.notify_all();
          return;
        }
        Json r =
            result({{"content",
                     {{{"type", "text"}, {"text", "echo: " + p["arguments"].value("text", "")}}}}});
        if (sse) {
          std::string s = StreamHead() + "id: 1\ndata:\n\n";  // a priming event without data
          if (!progress.is_null()) s += Event(progress);
          s += Event(r);
          WriteAll(c, s);
          return;  // the stream ends with the connection
        }
        if (!WriteAll(c, Reply(200, r.dump()))) return;
        continue;
      }
      Json err = {{"jsonrpc", "2.0"},
                  {"id", id},
                  {"error", {{"code", -32601}, {"message", "no " + method}}}};
      if (!WriteAll(c, Reply(200, err.dump()))) return;
    }
  }

  void ServeEvents(int c) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait(lock, [&] { return stopping_ || !pushed_.empty(); });
      while (!pushed_.empty()) {
        std::string frame = "data: " + pushed_.front() + "\n\n";
        pushed_.pop_front();
        lock.unlock();
        bool ok = WriteAll(c, frame);
        lock.lock();
        if (!ok) return;
      }
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;  // Guarded by mu_.
  std::vector<int> conns_;            // Guarded by mu_.
  std::vector<Seen> seen_;            // Guarded by mu_.
  std::deque<std::string> pushed_;    // Guarded by mu_.
  std::string session_;               // Guarded by mu_.
  int sessions_ = 0;                  // Guarded by mu_.
  bool slow_closed_ = false;          // Guarded by mu_.
  bool stopping_ = false;             // Guarded by mu_.
};

McpServerSpec HttpSpec(const FakeHttpMcp& server) {
  McpServerSpec s;
  s.name = "web";
  s.url = server.url();
  s.startup_timeout_ms = 20000;
  return s;
}

std::shared_ptr<McpClient> Client(const McpServerSpec& spec, const LaunchContext& ctx = {}) {
  auto t = MakeTransport(spec, ctx);
  EXPECT_TRUE(t.ok()) << t.error().message();
  if (!t.ok()) return nullptr;
  return std::make_shared<McpClient>(spec.name, std::move(*t));
}

std::vector<Seen> Posts(const std::vector<Seen>& all, const std::string& method) {
  std::vector<Seen> out;
  for (const Seen& s : all) {
    if (s.method == "POST" && s.body.is_object() && s.body.value("method", "") == method) {
      out.push_back(s);
    }
  }
  return out;
}

TEST(HttpTransport, SessionVersionAndTokenGoWithEveryRequestAndDeleteEndsIt) {
  FakeHttpMcp server;
  McpServerSpec spec = HttpSpec(server);
  spec.bearer_token_env_var = "WEB_TOKEN";
  LaunchContext ctx;
  ctx.token_env = {{"WEB_TOKEN", "s3cret"}};
  auto client = Client(spec, ctx);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Connect(20s).ok());
  EXPECT_EQ(client->protocol_version(), "2025-06-18");
  ASSERT_EQ(client->tools().size(), 3u);  // two pages
  EXPECT_EQ(client->tools()[2].name, "fail");
  auto r = client->CallTool("echo", {{"text", "hi"}}, CallOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->result["content"][0]["text"], "echo: hi");
  client->Shutdown();

  std::vector<Seen> seen = server.seen();
  auto init = Posts(seen, "initialize");
  ASSERT_EQ(init.size(), 1u);
  EXPECT_EQ(init[0].Header("mcp-session-id"), "");
  EXPECT_EQ(init[0].Header("mcp-protocol-version"), "");
  EXPECT_EQ(init[0].Header("authorization"), "Bearer s3cret");
  EXPECT_THAT(init[0].Header("accept"), HasSubstr("application/json"));
  EXPECT_THAT(init[0].Header("accept"), HasSubstr("text/event-stream"));
  for (const char* m : {"notifications/initialized", "tools/list", "tools/call"}) {
    auto posts = Posts(seen, m);
    ASSERT_FALSE(posts.empty()) << m;
    for (const Seen& s : posts) {
      EXPECT_EQ(s.Header("mcp-session-id"), "sid-1") << m;
      EXPECT_EQ(s.Header("mcp-protocol-version"), "2025-06-18") << m;
      EXPECT_EQ(s.Header("authorization"), "Bearer s3cret") << m;
    }
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().method, "DELETE");
  EXPECT_EQ(seen.back().Header("mcp-session-id"), "sid-1");
}

TEST(HttpTransport, EventStreamRepliesCarryProgressAndTheResponse) {
  FakeHttpMcp server;
  server.sse = true;
  auto client = Client(HttpSpec(server));
  ASSERT_TRUE(client->Connect(20s).ok());
  std::atomic<int> progress{0};
  CallOptions o;
  o.progress = true;
  o.on_progress = [&](const Json& p) {
    if (p.value("progress", 0) == 1) ++progress;
  };
  auto r = client->CallTool("echo", {{"text", "streamed"}}, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->result["content"][0]["text"], "echo: streamed");
  EXPECT_EQ(progress.load(), 1);
}

TEST(HttpTransport, ExpiredSessionIsOpenedAgainAndTheCallSucceeds) {
  FakeHttpMcp server;
  auto client = Client(HttpSpec(server));
  ASSERT_TRUE(client->Connect(20s).ok());
  server.ExpireSession();
  auto r = client->CallTool("echo", {{"text", "again"}}, CallOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->result["content"][0]["text"], "echo: again");
  std::vector<Seen> seen = server.seen();
  EXPECT_EQ(Posts(seen, "initialize").size(), 2u);
  auto calls = Posts(seen, "tools/call");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].Header("mcp-session-id"), "sid-1");  // answered 404
  EXPECT_EQ(calls[1].Header("mcp-session-id"), "sid-2");
  EXPECT_EQ(Posts(seen, "notifications/initialized").back().Header("mcp-session-id"), "sid-2");
}

TEST(HttpTransport, AnHttpErrorFailsTheCallNamingTheStatus) {
  FakeHttpMcp server;
  auto client = Client(HttpSpec(server));
  ASSERT_TRUE(client->Connect(20s).ok());
  auto r = client->CallTool("fail", Json::object(), CallOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("HTTP 500"));
  EXPECT_THAT(r.error().message(), HasSubstr("boom"));
  // One failed request does not end the connection.
  EXPECT_TRUE(client->health().ok());
  EXPECT_TRUE(client->CallTool("echo", {{"text", "x"}}, CallOptions{}).ok());
}

TEST(HttpTransport, ListChangedOnTheGetStreamListsAgain) {
  FakeHttpMcp server;
  server.events = true;
  auto client = Client(HttpSpec(server));
  ASSERT_TRUE(client->Connect(20s).ok());
  ASSERT_TRUE(server.WaitFor([](const std::vector<Seen>& s) {
    for (const Seen& x : s) {
      if (x.method == "GET") {
        return x.Header("mcp-session-id") == "sid-1" &&
               x.Header("accept").find("text/event-stream") != std::string::npos;
      }
    }
    return false;
  }));
  server.Push({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  EXPECT_TRUE(client->WaitForListGeneration(2, 20s));
}

TEST(HttpTransport, TimeoutSendsCancelledAndAbortsThePost) {
  FakeHttpMcp server;
  auto client = Client(HttpSpec(server));
  ASSERT_TRUE(client->Connect(20s).ok());
  std::atomic<int> progress{0};
  CallOptions o;
  o.timeout = 300ms;
  o.max_timeout = 300ms;
  o.progress = true;
  o.on_progress = [&](const Json&) { ++progress; };
  auto r = client->CallTool("slow", Json::object(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
  ASSERT_TRUE(server.WaitFor(
      [](const std::vector<Seen>& s) { return !Posts(s, "notifications/cancelled").empty(); }));
  auto cancelled = Posts(server.seen(), "notifications/cancelled");
  auto calls = Posts(server.seen(), "tools/call");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(cancelled[0].body["params"]["requestId"], calls[0].body["id"]);
  EXPECT_TRUE(server.WaitForSlowClosed());
  EXPECT_TRUE(client->health().ok());
}

TEST(HttpTransport, StopTokenCancelsTheCall) {
  FakeHttpMcp server;
  auto client = Client(HttpSpec(server));
  ASSERT_TRUE(client->Connect(20s).ok());
  std::stop_source stop;
  CallOptions o;
  o.stop = stop.get_token();
  o.progress = true;
  o.on_progress = [&](const Json&) { stop.request_stop(); };
  auto r = client->CallTool("slow", Json::object(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kCancelled);
  EXPECT_TRUE(server.WaitForSlowClosed());
}

TEST(HttpTransport, MissingTokenVariableIsAClearError) {
  McpServerSpec spec;
  spec.name = "web";
  spec.url = "http://127.0.0.1:9/mcp";
  spec.bearer_token_env_var = "NOT_SET_HERE";
  auto t = MakeTransport(spec, LaunchContext{});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.error().message(), HasSubstr("NOT_SET_HERE"));
  EXPECT_THAT(t.error().message(), HasSubstr("bearer_token_env_var"));
}

TEST(HttpTransport, UnreachableServerFailsToStartNamingIt) {
  int port = 0;
  {
    FakeHttpMcp gone;  // a port that was just free
    port = std::stoi(gone.url().substr(17));
  }
  McpServerSpec spec;
  spec.name = "web";
  spec.url = "http://127.0.0.1:" + std::to_string(port) + "/mcp";
  spec.startup_timeout_ms = 20000;
  auto started = StartServers({spec}, LaunchContext{});
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->servers.size(), 1u);
  EXPECT_EQ(started->servers[0].state, "failed");
  EXPECT_THAT(started->servers[0].error, HasSubstr("MCP server 'web'"));
}

TEST(HttpTransport, NotAnHttpUrlIsRefused) {
  McpServerSpec spec;
  spec.name = "web";
  spec.url = "ftp://127.0.0.1/mcp";
  auto started = StartServers({spec}, LaunchContext{});
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->servers[0].state, "failed");
  EXPECT_THAT(started->servers[0].error, HasSubstr("not an http:// or https://"));
}

}  // namespace
}  // namespace agentloop::mcp
