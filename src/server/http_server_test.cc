#include "server/http_server.h"

#include <set>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "agentloop/json.h"

#include "server/inbox.h"
#include "server/server.h"

namespace agentloop::server {
namespace {

TEST(PercentDecode, DecodesAndRefusesMalformedEscapes) {
  EXPECT_EQ(*PercentDecode("/v1/a%20b", false), "/v1/a b");
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_EQ(*PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(*PercentDecode("%41%42", false), "AB");
  EXPECT_EQ(PercentDecode("%4", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PercentDecode("%", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PercentDecode("%zz", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PercentDecode("a%00b", true).status().code(), Code::kInvalidArgument);
}

TEST(ParseListenAddress, AcceptsHostPortAndRefusesNames) {
  auto a = ParseListenAddress("127.0.0.1:7878");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port(), 7878);
  EXPECT_TRUE(a->address().is_loopback());
  EXPECT_TRUE(ParseListenAddress(":0")->address().is_loopback());
  EXPECT_TRUE(ParseListenAddress("localhost:1")->address().is_loopback());
  EXPECT_TRUE(ParseListenAddress("[::1]:9")->address().is_v6());
  EXPECT_FALSE(ParseListenAddress("0.0.0.0:80")->address().is_loopback());
  EXPECT_EQ(ParseListenAddress("127.0.0.1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseListenAddress("127.0.0.1:99999").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseListenAddress("example.com:80").status().code(), Code::kInvalidArgument);
}

TEST(Problem, IsProblemJsonWithAStableCode) {
  Response r = Problem(409, "session_busy", "busy", "req_1");
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.content_type, "application/problem+json");
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["code"], "session_busy");
  EXPECT_EQ(j["status"], 409);
  EXPECT_EQ(j["title"], "Conflict");
  EXPECT_EQ(j["detail"], "busy");
  EXPECT_EQ(j["request_id"], "req_1");
  EXPECT_EQ(j["type"], "urn:agentloop:problem:session_busy");
}

TEST(ParseTokenGrant, NeedsAHashATenantAndKnownScopes) {
  std::string hash(64, 'a');
  auto g = ParseTokenGrant(hash + ":acme:read,approve");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tenant, "acme");
  EXPECT_EQ(g->scopes, unsigned{kScopeRead | kScopeApprove});
  EXPECT_EQ(ParseTokenGrant("secret-token:acme:read").status().code(), Code::kInvalidArgument);
  EXPECT_NE(ParseTokenGrant("secret:acme:read").status().message().find("SHA-256"),
            std::string::npos);
  EXPECT_EQ(ParseTokenGrant(hash + ":acme:root").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":Acme Corp:read").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":acme:").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":acme").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":..:read").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":.:read").status().code(), Code::kInvalidArgument);
}

// The checked-in description and the route table agree, both ways.
TEST(OpenApi, DescribesExactlyTheRoutes) {
  Json spec = Json::parse(OpenApiSpec(), nullptr, false);
  ASSERT_FALSE(spec.is_discarded());
  EXPECT_EQ(spec["openapi"], "3.1.0");
  std::set<std::pair<std::string, std::string>> described, routed;
  for (const auto& [path, ops] : spec["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string m = method;
      for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      described.emplace(m, path);
      EXPECT_TRUE(op.contains("responses")) << m << " " << path;
    }
  }
  for (const auto& r : RouteTable()) routed.insert(r);
  EXPECT_EQ(described, routed);
  EXPECT_GE(routed.size(), 25u);
}

// A server answering 200 with the body it read, on a thread of its own.
class EchoServer {
 public:
  EchoServer()
      : http_(io_, HttpLimits{}, [](std::shared_ptr<Exchange> ex) {
          Response r;
          r.content_type = "text/plain";
          r.body = "got:" + ex->request().body;
          ex->Send(std::move(r));
        }) {
    EXPECT_TRUE(http_.Listen(*ParseListenAddress("127.0.0.1:0")).ok());
    loop_ = std::thread([this] { io_.run(); });
  }
  ~EchoServer() {
    boost::asio::post(io_, [this] {
      http_.StopAccepting();
      io_.stop();
    });
    loop_.join();
  }
  // Everything the server writes back to `raw` until it closes.
  std::string Send(const std::string& raw) {
    namespace asio = boost::asio;
    asio::io_context client_io;
    asio::ip::tcp::socket sock(client_io);
    sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(http_.port())});
    timeval tv{20, 0};
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    asio::write(sock, asio::buffer(raw));
    std::string all;
    boost::system::error_code ec;
    asio::read(sock, asio::dynamic_buffer(all), ec);
    return all;
  }

 private:
  boost::asio::io_context io_{1};
  HttpServer http_;
  std::thread loop_;
};

// RFC 9112: what two readers could frame differently is refused with 400
// and the connection closed, so nothing after it is read as a request.
TEST(HttpServer, AmbiguousFramingIsRefused) {
  EchoServer server;
  const std::string smuggled = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"te and cl",
       "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
       "Connection: close\r\n\r\n0\r\n\r\n"},
      {"cl and te",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n"
       "\r\n0\r\n\r\n"},
      {"xchunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n" + smuggled},
      {"chunked, identity",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n" + smuggled},
      {"two codings in two fields",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "gzip\r\n\r\n" +
           smuggled},
      {"gzip", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + smuggled},
      {"two hosts", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"},
      {"no host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"},
      {"folding", "GET / HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n"},
      {"folding by tab", "GET / HTTP/1.1\r\nHost: x\r\nX-A: one\r\n\ttwo\r\n\r\n"},
      {"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n"},
  };
  for (const auto& [what, raw] : refused) {
    std::string answer = server.Send(raw);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << what << ": " << answer;
    EXPECT_EQ(answer.find("HTTP/1.1 200"), std::string::npos) << what << ": " << answer;
    EXPECT_NE(answer.find("malformed_request"), std::string::npos) << what;
  }
  // What is well framed is read.
  std::string chunked = server.Send(
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.rfind("HTTP/1.1 200 ", 0), 0u) << chunked;
  EXPECT_NE(chunked.find("got:hello"), std::string::npos) << chunked;
  std::string sized =
      server.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
  EXPECT_NE(sized.find("got:hi"), std::string::npos) << sized;
  std::string old = server.Send("GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.rfind("HTTP/1.1 200 ", 0), 0u) << old;
  // Two requests in one write: both are answered, in order.
  std::string two = server.Send(
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nb");
  EXPECT_NE(two.find("got:a"), std::string::npos) << two;
  EXPECT_LT(two.find("got:a"), two.find("got:b")) << two;
}

TEST(CheckRequestHead, NamesWhatIsWrong) {
  EXPECT_TRUE(CheckRequestHead("GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  EXPECT_TRUE(CheckRequestHead("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n").ok());
  Status s = CheckRequestHead("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("xchunked"), std::string::npos);
  EXPECT_NE(CheckRequestHead("GET / HTTP/1.1\r\nhost: a\r\nHOST: a\r\n").message().find("Host"),
            std::string::npos);
}

// A stream closed right after a burst of pushes still delivers every frame
// queued before the close, then the final frame.
TEST(EventStream, CloseWritesWhatIsQueuedFirst) {
  namespace asio = boost::asio;
  asio::io_context io{1};
  const std::string payload(1000, 'x');
  HttpServer http(io, HttpLimits{}, [&](std::shared_ptr<Exchange> ex) {
    auto stream = ex->OpenStream();
    for (int i = 0; i < 300; ++i) {
      EXPECT_TRUE(stream->Push("id: " + std::to_string(i) + "\ndata: " + payload + "\n\n"));
    }
    stream->Close("event: end\ndata: {}\n\n");
    EXPECT_FALSE(stream->Push("data: late\n\n"));
  });
  ASSERT_TRUE(http.Listen(*ParseListenAddress("127.0.0.1:0")).ok());
  std::thread loop([&] { io.run(); });

  asio::io_context client_io;
  asio::ip::tcp::socket sock(client_io);
  sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(http.port())});
  timeval tv{20, 0};
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  asio::write(sock, asio::buffer(std::string("GET /s HTTP/1.1\r\nHost: x\r\n\r\n")));
  std::string all;
  boost::system::error_code ec;
  asio::read(sock, asio::dynamic_buffer(all), ec);  // to EOF: the server closes
  EXPECT_EQ(ec, asio::error::eof);
  size_t frames = 0;
  for (size_t at = all.find("\nid: "); at != std::string::npos; at = all.find("\nid: ", at + 1)) {
    ++frames;
  }
  EXPECT_EQ(frames, 300u);
  EXPECT_NE(all.find("id: 299\n"), std::string::npos);
  EXPECT_EQ(all.find("event: end"), all.size() - std::string("event: end\ndata: {}\n\n").size());
  EXPECT_EQ(all.find("late"), std::string::npos);
  asio::post(io, [&] {
    http.StopAccepting();
    io.stop();
  });
  loop.join();
}

// Work handed over from inside a running handler on a one-thread
// io_context, then from another thread, runs in that order (a plain post
// from the handler would wait in the thread's private queue and run last).
TEST(Inbox, KeepsTheOrderOfHandOverAcrossThreads) {
  boost::asio::io_context io{1};
  Inbox inbox(io);
  std::vector<std::string> ran;
  boost::asio::post(io, [&] {
    inbox.Post([&] { ran.push_back("io thread"); });
    std::thread other([&] { inbox.Post([&] { ran.push_back("other thread"); }); });
    other.join();
    inbox.Post([&] {
      ran.push_back("io thread again");
      io.stop();
    });
  });
  io.run();
  EXPECT_EQ(ran, (std::vector<std::string>{"io thread", "other thread", "io thread again"}));
}

}  // namespace
}  // namespace agentloop::server
