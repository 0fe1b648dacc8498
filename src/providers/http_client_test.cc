#include "providers/http_client.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include "base/testing/files.h"
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

// ---- helpers for the tests below: raw servers, TLS, a CONNECT proxy ----

namespace agentloop {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// A listening socket on 127.0.0.1 (ephemeral port).
int Listen(int* port, int backlog = 16) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, backlog) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectLocal(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads one request head (and no body); empty on EOF.
std::string ReadHead(int fd) {
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (::recv(fd, &c, 1, 0) != 1) return {};
    head += c;
  }
  return head;
}

bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// A keep-alive server whose first connection answers one request and then
// closes when the second request arrives (a server that timed the connection
// out just as the client reused it). Later connections answer everything.
class FlakyKeepAliveServer {
 public:
  FlakyKeepAliveServer() {
    fd_ = Listen(&port_);
    thread_ = std::thread([this] {
      for (int n = 0;; ++n) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        ++accepted_;
        for (int req = 0; !ReadHead(c).empty(); ++req) {
          if (n == 0 && req == 1) break;  // close without answering
          if (!SendAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) break;
        }
        ::close(c);
      }
    });
  }
  ~FlakyKeepAliveServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

struct KeyAndCert {
  std::string key_pem, cert_pem;
};

// A self-signed certificate (P-256) for `san`, e.g.
// "DNS:localhost,IP:127.0.0.1".
KeyAndCert MakeSelfSigned(const std::string& san, const std::string& cn = "agentloop test") {
  KeyAndCert out;
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair<int, std::string>{NID_subject_alt_name, san},
                            {NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, pkey, EVP_sha256());
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, x);
  char* data = nullptr;
  long len = BIO_get_mem_data(b, &data);
  out.cert_pem.assign(data, static_cast<size_t>(len));
  BIO_free(b);
  b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  len = BIO_get_mem_data(b, &data);
  out.key_pem.assign(data, static_cast<size_t>(len));
  BIO_free(b);
  X509_free(x);
  EVP_PKEY_free(pkey);
  return out;
}

// The certificate as a file (for HttpClientOptions::ca_file), removed at the
// end of the test.
class TempPem {
 public:
  explicit TempPem(const std::string& pem) {
    static std::atomic<int> n{0};
    path_ = ::testing::TempDir() + "al_http_ca_" + std::to_string(::getpid()) + "_" +
            std::to_string(n++) + ".pem";
    std::ofstream(path_) << pem;
  }
  ~TempPem() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// HTTPS on 127.0.0.1 (a thread per connection), answering "secure <target>"
// to every request.
class TlsServer {
 public:
  explicit TlsServer(const KeyAndCert& kc)
      : ctx_(ssl::context::tls_server),
        acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    ctx_.use_certificate_chain(asio::buffer(kc.cert_pem));
    ctx_.use_private_key(asio::buffer(kc.key_pem), ssl::context::pem);
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Loop(); });
  }
  ~TlsServer() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
    for (auto& t : conns_) t.join();  // clients are gone: their connections closed
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int handshake_failures() const { return handshake_failures_.load(); }
  // Waits until `n` handshakes have completed (the server has sent its
  // session tickets by then); false on timeout.
  bool WaitForHandshakes(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return handshakes_ >= n; });
  }

 private:
  void Loop() {
    while (true) {
      tcp::socket sock(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(sock, ec);
      if (ec) return;
      ++accepted_;
      conns_.emplace_back([this, sock = std::move(sock)]() mutable { Serve(std::move(sock)); });
    }
  }

  void Serve(tcp::socket sock) {
    boost::system::error_code ec;
    ssl::stream<tcp::socket> s(std::move(sock), ctx_);
    s.handshake(ssl::stream_base::server, ec);
    if (ec) {
      ++handshake_failures_;
      return;
    }
    {
      std::lock_guard lock(mu_);
      ++handshakes_;
    }
    cv_.notify_all();
    boost::beast::flat_buffer buf;
    while (true) {
      http::request<http::string_body> req;
      http::read(s, buf, req, ec);
      if (ec) return;
      http::response<http::string_body> res{http::status::ok, 11};
      res.body() = "secure " + std::string(req.target());
      res.prepare_payload();
      http::write(s, res, ec);
      if (ec) return;
    }
  }

  asio::io_context ioc_;
  ssl::context ctx_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<int> accepted_{0}, handshake_failures_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int handshakes_ = 0;  // guarded by mu_
  std::thread thread_;
  std::vector<std::thread> conns_;  // accept thread only, then the destructor
};

// An HTTP CONNECT proxy on 127.0.0.1 that records each request head and
// tunnels to 127.0.0.1:`target_port` whatever host was asked for (so tests
// can use names that need no DNS). With `status` != 200 it refuses.
class ConnectProxy {
 public:
  explicit ConnectProxy(int target_port, int status = 200) : target_(target_port), status_(status) {
    fd_ = Listen(&port_);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        std::string head = ReadHead(c);
        {
          std::lock_guard l(mu_);
          heads_.push_back(head);
        }
        if (status_ != 200) {
          SendAll(c, "HTTP/1.1 " + std::to_string(status_) + " No\r\nContent-Length: 0\r\n\r\n");
          ::close(c);
          continue;
        }
        int up = ConnectLocal(target_);
        SendAll(c, "HTTP/1.1 200 Connection established\r\n\r\n");
        Relay(c, up);
        ::close(up);
        ::close(c);
      }
    });
  }
  ~ConnectProxy() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::vector<std::string> heads() const {
    std::lock_guard l(mu_);
    return heads_;
  }

 private:
  static void Relay(int a, int b) {
    pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    char buf[16384];
    while (::poll(fds, 2, -1) > 0) {
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n <= 0 || !SendAll(fds[1 - i].fd, std::string_view(buf, static_cast<size_t>(n))))
          return;
      }
    }
  }

  int target_, status_;
  int fd_ = -1;
  int port_ = 0;
  mutable std::mutex mu_;
  std::vector<std::string> heads_;
  std::thread thread_;
};

// A listener whose accept queue is full: Linux drops further SYNs, so a
// connect to it neither succeeds nor fails (like a black-holed route).
struct BlackHole {
  int fd = -1, filler = -1, port = 0;
  BlackHole() {
    fd = Listen(&port, /*backlog=*/0);
    if (fd >= 0) filler = ConnectLocal(port);  // fills the queue (never accepted)
  }
  ~BlackHole() {
    if (filler >= 0) ::close(filler);
    if (fd >= 0) ::close(fd);
  }
  BlackHole(const BlackHole&) = delete;
  BlackHole& operator=(const BlackHole&) = delete;
};

TEST(HttpClient, BlackHoledAddressFallsBackToTheNextOne) {
  BlackHole hole;
  ASSERT_GE(hole.filler, 0);
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "ok"}])"));
  ASSERT_TRUE(server.ok());
  const auto good = static_cast<uint16_t>((*server)->port());
  HttpClientOptions o;
  o.http_proxy = "";
  o.connect_attempt_delay = std::chrono::milliseconds(100);
  std::vector<std::string> asked;
  o.resolve_for_test = [&](const std::string& host) {
    asked.push_back(host);
    return std::vector<std::pair<std::string, uint16_t>>{
        {"127.0.0.1", static_cast<uint16_t>(hole.port)}, {"127.0.0.1", good}};
  };
  auto client = HttpClient::Create(o);
  // Without the fallback this waits for the whole 10 s connect timeout and
  // fails with kDeadlineExceeded.
  auto r = client->Post("http://model.test:" + std::to_string(good) + "/x", {}, "");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(asked, std::vector<std::string>{"model.test"});
  EXPECT_EQ((*server)->connections_accepted(), 1u);
}

TEST(HttpClient, EveryAddressRefusedIsUnavailableNamingTheLastError) {
  int closed_port;
  {
    auto s = FakeModelServer::Start(Json::array());
    ASSERT_TRUE(s.ok());
    closed_port = (*s)->port();
  }
  HttpClientOptions o;
  o.http_proxy = "";
  o.resolve_for_test = [&](const std::string&) {
    return std::vector<std::pair<std::string, uint16_t>>{
        {"127.0.0.1", static_cast<uint16_t>(closed_port)},
        {"127.0.0.1", static_cast<uint16_t>(closed_port)}};
  };
  auto client = HttpClient::Create(o);
  auto r = client->Post("http://model.test:1/x", {}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_NE(r.error().message().find("cannot connect to model.test:1: connection refused"),
            std::string::npos)
      << r.error().message();
}

HttpRequest Get(const std::string& url) {
  HttpRequest r;
  r.method = "GET";
  r.url = url;
  return r;
}

// A server on 127.0.0.1 that serves its connections one after another with
// `serve(fd, n)` (n counts the connections from 0).
class RawServer {
 public:
  explicit RawServer(std::function<void(int, int)> serve) : serve_(std::move(serve)) {
    fd_ = Listen(&port_);
    thread_ = std::thread([this] {
      for (int n = 0;; ++n) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        ++accepted_;
        serve_(c, n);
        ::close(c);
      }
    });
  }
  ~RawServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int accepted() const { return accepted_.load(); }

 private:
  std::function<void(int, int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

TEST(HttpClient, SequentialStreamsReuseOneConnection) {
  Json script = Json::array();
  for (int i = 0; i < 3; ++i) script.push_back(Json{{"text", "hello " + std::to_string(i)}});
  auto server = FakeModelServer::Start(script);
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  for (int i = 0; i < 3; ++i) {
    HttpRequest req;
    req.url = (*server)->base_url() + "/chat/completions";
    req.body = "{}";
    Buffer b;
    Status st = client->Fetch(req, b, {});
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_NE(b.body.find("\"hel\""), std::string::npos);  // text comes in 3-byte pieces
    EXPECT_NE(b.body.find("[DONE]"), std::string::npos);
  }
  EXPECT_EQ((*server)->connections_accepted(), 1u);
}

TEST(HttpClient, RequestHeadersAndTarget) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "x"}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  auto r = client->Post((*server)->base_url() + "?a=1#frag", {{"User-Agent", "custom"}}, "abc");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].path, "/?a=1");
  EXPECT_EQ(FindHeader(reqs[0].headers, "host"), "127.0.0.1:" + std::to_string((*server)->port()));
  EXPECT_EQ(FindHeader(reqs[0].headers, "user-agent"), "custom");
  EXPECT_EQ(FindHeader(reqs[0].headers, "content-length"), "3");
}

TEST(HttpClient, ReusedConnectionClosedByServerIsRetriedOnce) {
  FlakyKeepAliveServer server;
  auto client = HttpClient::Create();
  std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
  for (int i = 0; i < 2; ++i) {
    Buffer b;
    Status st = client->Fetch(Get(url), b, {});
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
    EXPECT_EQ(b.status, 200);
    EXPECT_EQ(b.body, "ok");
  }
  EXPECT_EQ(server.accepted(), 2);
}

// Reads one request with its Content-Length body; the body, or nullopt on
// EOF.
std::optional<std::string> ReadBody(int fd) {
  std::string head = ReadHead(fd);
  if (head.empty()) return std::nullopt;
  size_t p = head.find("Content-Length: ");
  size_t len = p == std::string::npos ? 0 : std::stoul(head.substr(p + 16));
  std::string body(len, '\0');
  for (size_t got = 0; got < len;) {
    ssize_t n = ::recv(fd, body.data() + got, len - got, 0);
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return body;
}

// A keep-alive server that records each request's body; its first
// connection answers one request, then reads the second whole and closes
// without answering. Later connections answer everything.
class RecordingFlakyServer {
 public:
  RecordingFlakyServer()
      : server_([this](int fd, int n) {
          for (int req = 0;; ++req) {
            std::optional<std::string> body = ReadBody(fd);
            if (!body) return;
            {
              std::lock_guard lock(mu_);
              received_.push_back(*body);
            }
            if (n == 0 && req == 1) return;
            if (!SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) return;
          }
        }) {}
  std::string url(const std::string& path) const { return server_.url(path); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> received_;  // Guarded by mu_.
  RawServer server_;                   // last: its thread uses the rest
};

TEST(HttpClient, ARetryOnAFreshConnectionSendsTheIdenticalSharedBody) {
  // The first connection answers one request, then reads the second whole
  // and closes without answering; the second connection answers.
  RecordingFlakyServer server;
  auto client = HttpClient::Create();
  std::vector<std::shared_ptr<const std::string>> bodies;
  for (char c : {'a', 'b'}) {
    // Large enough to take several writes.
    bodies.push_back(std::make_shared<const std::string>(std::string(300000, c) + "end"));
    HttpRequest req;
    req.url = server.url("/v1");
    req.shared_body = bodies.back();
    Buffer b;
    Status st = client->Fetch(std::move(req), b, {});
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(b.body, "ok");
    // Written and answered: the client holds no reference any more.
    EXPECT_EQ(bodies.back().use_count(), 1);
  }
  EXPECT_EQ(server.accepted(), 2);
  std::vector<std::string> received = server.received();
  ASSERT_EQ(received.size(), 3u);
  EXPECT_EQ(received[0], *bodies[0]);
  EXPECT_EQ(received[1], *bodies[1]);  // the attempt the server dropped
  EXPECT_EQ(received[2], *bodies[1]);  // its retry
}

TEST(HttpClient, WithABodySourceTheBodyIsDroppedOnceWrittenAndRebuiltForARetry) {
  // As above; the second request gives a body_source, so the client keeps
  // no reference to the body once it is written, even on the reused
  // connection, and the retry sends the rebuilt body.
  RecordingFlakyServer server;
  auto client = HttpClient::Create();
  const std::string text = std::string(300000, 'x') + "end";
  long held_at_rebuild = -1;
  int rebuilt = 0;
  for (int i = 0; i < 2; ++i) {
    auto body = std::make_shared<const std::string>(text);
    HttpRequest req;
    req.url = server.url("/v1");
    req.shared_body = body;
    req.body_source = [&, weak = std::weak_ptr<const std::string>(body)] {
      ++rebuilt;
      held_at_rebuild = weak.use_count();  // the test's own reference only
      return std::make_shared<const std::string>(text);
    };
    Buffer b;
    Status st = client->Fetch(std::move(req), b, {});
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(b.body, "ok");
  }
  EXPECT_EQ(rebuilt, 1);
  EXPECT_EQ(held_at_rebuild, 1);
  EXPECT_EQ(server.accepted(), 2);
  std::vector<std::string> received = server.received();
  ASSERT_EQ(received.size(), 3u);
  for (const std::string& r : received) EXPECT_EQ(r, text);
}

TEST(HttpClient, UnsupportedSchemeIsInvalidArgument) {
  auto client = HttpClient::Create();
  auto r = client->Post("ftp://127.0.0.1/x", {}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_NE(r.error().message().find("ftp"), std::string::npos);
  auto r2 = client->Post("127.0.0.1/x", {}, "");
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code(), Code::kInvalidArgument);
}

TEST(HttpClient, HeaderValuesAreNotEchoedInErrors) {
  auto client = HttpClient::Create();
  auto r =
      client->Post("http://127.0.0.1:1/x", {{"Authorization", "Bearer sk-secret\r\nX: y"}}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.error().message().find("sk-secret"), std::string::npos);
}

TEST(HttpClient, CancelMidStream) {
  auto server = FakeModelServer::Start(
      Json::parse(R"([{"text": "a b c d e f", "chunk_size": 5, "latency_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  struct Handler : HttpStreamHandler {
    std::mutex m;
    std::condition_variable cv;
    std::string body;
    Status OnHead(long, const HttpHeaders&) override { return Status::Ok(); }
    Status OnBody(std::string_view b) override {
      std::lock_guard l(m);
      body += b;
      cv.notify_all();
      return Status::Ok();
    }
  };
  auto handler = std::make_shared<Handler>();
  std::mutex m;
  std::condition_variable cv;
  std::optional<Status> result;
  HttpRequest req;
  req.url = (*server)->base_url() + "/chat/completions";
  auto transfer = client->Start(req, handler, [&](Status s) {
    std::lock_guard l(m);
    result = s;
    cv.notify_all();
  });
  {
    std::unique_lock l(handler->m);
    ASSERT_TRUE(
        handler->cv.wait_for(l, std::chrono::seconds(30), [&] { return !handler->body.empty(); }));
  }
  transfer->Cancel();
  std::unique_lock l(m);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return result.has_value(); }));
  EXPECT_EQ(result->code(), Code::kCancelled);
  EXPECT_EQ(handler->body.size(), 5u);
  EXPECT_EQ(client->active_transfers(), 0u);
}

TEST(HttpClient, DestructorAbortsRunningTransfers) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  std::optional<Status> result;  // written on the event thread before ~HttpClient returns
  HttpRequest req;
  req.url = (*server)->base_url() + "/chat/completions";
  client->Start(req, std::make_shared<Buffer>(), [&](Status s) { result = s; });
  ASSERT_TRUE((*server)->WaitForRequests(1, std::chrono::seconds(30)));
  client.reset();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), Code::kCancelled);
}

TEST(HttpClient, PreconnectOpensTheConnectionTheRequestUses) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "ok"}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  const std::string url = (*server)->base_url() + "/v1/chat/completions";
  client->Preconnect(url, std::chrono::seconds(10));
  ASSERT_TRUE((*server)->WaitForConnections(1, std::chrono::seconds(30)));
  client->Preconnect(url, std::chrono::seconds(10));  // pooled or opening: no second one
  auto r = client->Post(url, {}, "x");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ((*server)->connections_accepted(), 1u);
  EXPECT_EQ(client->active_transfers(), 0u);
}

TEST(HttpClient, PreconnectThatFailsLeavesTheRequestItsOwnError) {
  int port;
  {
    auto s = FakeModelServer::Start(Json::array());
    ASSERT_TRUE(s.ok());
    port = (*s)->port();
  }
  auto client = HttpClient::Create();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  client->Preconnect(url, std::chrono::seconds(10));
  auto r = client->Post(url, {}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_NE(r.error().message().find("refused"), std::string::npos) << r.error().message();
}

// Starts `req`; the future gets the transfer's result.
std::future<Status> StartForResult(HttpClient& client, HttpRequest req,
                                   std::shared_ptr<HttpStreamHandler> handler,
                                   std::shared_ptr<HttpTransfer>* transfer = nullptr) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  auto t = client.Start(std::move(req), std::move(handler),
                        [done](Status st) { done->set_value(std::move(st)); });
  if (transfer != nullptr) *transfer = std::move(t);
  return result;
}

// A client that resolves every name to 127.0.0.1, on the port `port_for(n)`
// gives for the n-th lookup (from 0; counted in `lookups`).
std::shared_ptr<HttpClient> ClientWithLookups(std::atomic<int>& lookups,
                                              std::function<uint16_t(int)> port_for) {
  HttpClientOptions o;
  o.http_proxy = "";
  o.resolve_for_test = [&lookups, port_for = std::move(port_for)](const std::string&) {
    return std::vector<std::pair<std::string, uint16_t>>{
        {"127.0.0.1", port_for(lookups.fetch_add(1))}};
  };
  return HttpClient::Create(o);
}

// A request that begins while a preconnect is still connecting waits for that
// connection instead of opening a second one.
TEST(HttpClient, RequestBegunDuringAPreconnectWaitsForItsConnection) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "ok"}])"));
  ASSERT_TRUE(server.ok());
  const auto port = static_cast<uint16_t>((*server)->port());
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  std::atomic<int> lookups{0};
  auto client = ClientWithLookups(lookups, [&](int n) {
    // Holds the preconnect (on the event thread) until the request is queued.
    if (n == 0) released.wait_for(std::chrono::seconds(30));
    return port;
  });
  const std::string url = "http://model.test:" + std::to_string(port) + "/x";
  client->Preconnect(url, std::chrono::seconds(10));
  auto handler = std::make_shared<Buffer>();
  std::future<Status> f = StartForResult(*client, Get(url), handler);
  go.set_value();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  Status st = f.get();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(handler->body, "ok");
  EXPECT_EQ(lookups.load(), 1);
  EXPECT_EQ((*server)->connections_accepted(), 1u);
}

// When the preconnect a request waits for gives up, the request connects on
// its own.
TEST(HttpClient, RequestWaitingForAFailedPreconnectConnectsItself) {
  BlackHole hole;
  ASSERT_GE(hole.filler, 0);
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "ok"}])"));
  ASSERT_TRUE(server.ok());
  const auto good = static_cast<uint16_t>((*server)->port());
  std::atomic<int> lookups{0};
  auto client = ClientWithLookups(lookups, [&](int n) {
    // The preconnect's lookup (first) finds the black hole, the request's the server.
    return n == 0 ? static_cast<uint16_t>(hole.port) : good;
  });
  const std::string url = "http://model.test:" + std::to_string(good) + "/x";
  client->Preconnect(url, std::chrono::milliseconds(200));
  auto r = client->Post(url, {}, "");  // begins after the preconnect: waits for it
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(lookups.load(), 2);
  EXPECT_EQ((*server)->connections_accepted(), 1u);
}

TEST(HttpClient, CancellingARequestWaitingForAPreconnectEndsIt) {
  BlackHole hole;
  ASSERT_GE(hole.filler, 0);
  auto client = HttpClient::Create();
  const std::string url = "http://127.0.0.1:" + std::to_string(hole.port) + "/x";
  client->Preconnect(url, std::chrono::seconds(60));
  std::shared_ptr<HttpTransfer> t;
  std::future<Status> f = StartForResult(*client, Get(url), std::make_shared<Buffer>(), &t);
  t->Cancel();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get().code(), Code::kCancelled);
  client.reset();  // aborts the preconnect still connecting
}

TEST(HttpClient, RequestWaitingForAPreconnectKeepsItsConnectTimeout) {
  BlackHole hole;
  ASSERT_GE(hole.filler, 0);
  auto client = HttpClient::Create();
  const std::string url = "http://127.0.0.1:" + std::to_string(hole.port) + "/x";
  client->Preconnect(url, std::chrono::seconds(600));
  HttpRequest req = Get(url);
  req.connect_timeout = std::chrono::milliseconds(100);
  Buffer b;
  Status st = client->Fetch(req, b, {});
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("cannot connect to 127.0.0.1:" + std::to_string(hole.port) +
                              ": no answer within 100 ms (the connect timeout)"),
            std::string::npos)
      << st.message();
}

TEST(HttpClient, HttpsPreconnectCarriesTheRequest) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  TempPem ca(kc.cert_pem);
  TlsServer server(kc);
  HttpClientOptions opts;
  opts.ca_file = ca.path();
  auto client = HttpClient::Create(opts);
  const std::string url = "https://localhost:" + std::to_string(server.port()) + "/p";
  client->Preconnect(url, std::chrono::seconds(10));
  Buffer b;
  Status st = client->Fetch(Get(url), b, {});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.body, "secure /p");
  EXPECT_EQ(server.accepted(), 1);
  EXPECT_EQ(server.handshake_failures(), 0);
}

TEST(HttpClient, HttpsWithCaFile) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  TempPem ca(kc.cert_pem);
  TlsServer server(kc);
  HttpClientOptions opts;
  opts.ca_file = ca.path();
  auto client = HttpClient::Create(opts);
  for (std::string host : {"127.0.0.1", "localhost", "localhost"}) {
    Buffer b;
    Status st = client->Fetch(
        Get("https://" + host + ":" + std::to_string(server.port()) + "/a?b=1"), b, {});
    ASSERT_TRUE(st.ok()) << host << ": " << st.ToString();
    EXPECT_EQ(b.status, 200);
    EXPECT_EQ(b.body, "secure /a?b=1");
  }
  EXPECT_EQ(server.accepted(), 2);  // one per origin, kept alive
}

// The certificate's OpenSSL subject-hash file name, <hash>.0.
std::string HashName(const std::string& cert_pem) {
  BIO* b = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  char name[32];
  std::snprintf(name, sizeof(name), "%08lx.0", X509_subject_name_hash(x));
  X509_free(x);
  BIO_free(b);
  return name;
}

// A preconnected TLS connection that waits in the pool (no request yet)
// receives the server's session tickets; it must not be taken for closed.
TEST(HttpClient, HttpsPreconnectWaitingInThePoolCarriesTheRequest) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  TempPem ca(kc.cert_pem);
  TlsServer server(kc);
  HttpClientOptions opts;
  opts.ca_file = ca.path();
  auto client = HttpClient::Create(opts);
  const std::string url = "https://localhost:" + std::to_string(server.port()) + "/q";
  client->Preconnect(url, std::chrono::seconds(10));
  ASSERT_TRUE(server.WaitForHandshakes(1));
  // The tickets reach the idle connection now: give the event thread a
  // whole transfer's worth of turns before the request takes the connection.
  for (int i = 0; i < 3; ++i) {
    auto r = client->Post("http://127.0.0.1:1/", {}, "");  // refused at once
    EXPECT_FALSE(r.ok());
  }
  Buffer b;
  Status st = client->Fetch(Get(url), b, {});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.body, "secure /q");
  EXPECT_EQ(server.accepted(), 1);
}

// A client whose system trust store is a hashed directory holding
// `dir_certs` and a bundle file holding `bundle_pem`.
struct SystemStoreClient {
  SystemStoreClient(const std::vector<std::string>& dir_certs, const std::string& bundle_pem)
      : bundle(bundle_pem) {
    for (const std::string& pem : dir_certs) testing::WriteFile(dir.path() / HashName(pem), pem);
    HttpClientOptions opts;
    opts.system_ca_dir_for_test = dir.path().string();
    opts.system_ca_file_for_test = bundle.path();
    client = HttpClient::Create(opts);
  }
  Status Fetch(const std::string& host, const TlsServer& server, Buffer& b) {
    return client->Fetch(Get("https://" + host + ":" + std::to_string(server.port()) + "/t"), b,
                         {});
  }

  testing::TempDir dir{"al_http_sysdir"};
  TempPem bundle;
  std::shared_ptr<HttpClient> client;
};

// The system store read from its hashed directory lacks a CA that only the
// bundle file has: the handshake is tried once more with the whole store.
TEST(HttpClient, TrustFallsBackToTheBundleWhenTheDirectoryLacksTheIssuer) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  KeyAndCert other = MakeSelfSigned("DNS:other.test", "another CA");
  TlsServer server(kc);
  SystemStoreClient c({other.cert_pem}, other.cert_pem + kc.cert_pem);
  Buffer b;
  Status st = c.Fetch("localhost", server, b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.body, "secure /t");
  EXPECT_EQ(server.accepted(), 2);  // the directory alone, then the whole store
  // Now the whole store is loaded: the next origin verifies the first time.
  Buffer b2;
  st = c.Fetch("127.0.0.1", server, b2);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(server.accepted(), 3);
}

TEST(HttpClient, TrustFromTheDirectoryAloneNeedsNoRetry) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  TlsServer server(kc);
  SystemStoreClient c({kc.cert_pem}, "");
  Buffer b;
  Status st = c.Fetch("localhost", server, b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(server.accepted(), 1);
}

TEST(HttpClient, UntrustedAfterTheRetryStillFails) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  KeyAndCert other = MakeSelfSigned("DNS:other.test", "another CA");
  TlsServer server(kc);
  SystemStoreClient c({other.cert_pem}, other.cert_pem);
  Buffer b;
  Status st = c.Fetch("localhost", server, b);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("certificate verify failed"), std::string::npos) << st.message();
  EXPECT_EQ(server.accepted(), 2);
}

TEST(HttpClient, CaDirThatIsNoDirectoryIsAnError) {
  HttpClientOptions opts;
  opts.ca_dir = "/nonexistent/agentloop-ca-dir";
  auto client = HttpClient::Create(opts);
  Buffer b;
  Status st = client->Fetch(Get("https://127.0.0.1:1/"), b, {});
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("/nonexistent/agentloop-ca-dir"), std::string::npos);
}

TEST(HttpClient, HttpsWithHashedCaDirectory) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  testing::TempDir dir("al_http_cadir");
  testing::WriteFile(dir.path() / HashName(kc.cert_pem), kc.cert_pem);
  EXPECT_TRUE(IsHashedCertDir(dir.path().string()));
  TlsServer server(kc);
  HttpClientOptions opts;
  opts.ca_dir = dir.path().string();
  auto client = HttpClient::Create(opts);
  Buffer b;
  Status st =
      client->Fetch(Get("https://localhost:" + std::to_string(server.port()) + "/d"), b, {});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.body, "secure /d");
}

TEST(HttpClient, HashedCertDirNeedsHashLinks) {
  testing::TempDir dir("al_http_cadir");
  EXPECT_FALSE(IsHashedCertDir(dir.path().string()));
  testing::WriteFile(dir.path() / "ca.pem", "x");
  testing::WriteFile(dir.path() / "0123abcd.pem", "x");
  testing::WriteFile(dir.path() / "0123abc.0", "x");
  EXPECT_FALSE(IsHashedCertDir(dir.path().string()));
  testing::WriteFile(dir.path() / "0123abcd.1", "x");
  EXPECT_TRUE(IsHashedCertDir(dir.path().string()));
  EXPECT_FALSE(IsHashedCertDir((dir.path() / "missing").string()));
}

TEST(HttpClient, HttpsWithoutTrustFailsVerification) {
  KeyAndCert kc = MakeSelfSigned("DNS:localhost,IP:127.0.0.1");
  TlsServer server(kc);
  auto client = HttpClient::Create();
  Buffer b;
  Status st = client->Fetch(Get("https://127.0.0.1:" + std::to_string(server.port()) + "/"), b, {});
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("certificate verify failed"), std::string::npos) << st.message();
  EXPECT_EQ(b.status, 0);
}

TEST(HttpClient, HttpsHostNameMismatchFails) {
  KeyAndCert kc = MakeSelfSigned("DNS:origin.test");
  TempPem ca(kc.cert_pem);
  TlsServer server(kc);
  HttpClientOptions opts;
  opts.ca_file = ca.path();
  auto client = HttpClient::Create(opts);
  Buffer b;
  Status st = client->Fetch(Get("https://127.0.0.1:" + std::to_string(server.port()) + "/"), b, {});
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("mismatch"), std::string::npos) << st.message();
}

TEST(HttpClient, HttpsThroughConnectProxy) {
  KeyAndCert kc = MakeSelfSigned("DNS:origin.test");
  TempPem ca(kc.cert_pem);
  TlsServer server(kc);
  ConnectProxy proxy(server.port());
  HttpClientOptions opts;
  opts.ca_file = ca.path();
  opts.https_proxy = "http://user:p%40ss@127.0.0.1:" + std::to_string(proxy.port());
  opts.no_proxy = "";
  auto client = HttpClient::Create(opts);
  std::string url = "https://origin.test:" + std::to_string(server.port()) + "/v1/x";
  for (int i = 0; i < 2; ++i) {
    Buffer b;
    Status st = client->Fetch(Get(url), b, {});
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(b.body, "secure /v1/x");
  }
  auto heads = proxy.heads();
  ASSERT_EQ(heads.size(), 1u);  // the tunnel is kept alive
  EXPECT_EQ(heads[0].substr(0, heads[0].find("\r\n")),
            "CONNECT origin.test:" + std::to_string(server.port()) + " HTTP/1.1");
  EXPECT_NE(heads[0].find("Proxy-Authorization: Basic dXNlcjpwQHNz"), std::string::npos)
      << heads[0];  // base64("user:p@ss")
}

TEST(HttpClient, ProxyRefusalIsUnavailableWithoutCredentials) {
  ConnectProxy proxy(1, 407);
  HttpClientOptions opts;
  opts.https_proxy = "http://user:topsecret@127.0.0.1:" + std::to_string(proxy.port());
  opts.no_proxy = "";
  auto client = HttpClient::Create(opts);
  Buffer b;
  Status st = client->Fetch(Get("https://origin.test/"), b, {});
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("407"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("topsecret"), std::string::npos);
  EXPECT_EQ(st.message().find("user"), std::string::npos);
}

TEST(HttpClient, HttpProxyGetsAbsoluteFormTarget) {
  auto proxy = FakeModelServer::Start(
      Json::parse(R"([{"http_status": 200, "body": "a"}, {"http_status": 200, "body": "b"}])"));
  ASSERT_TRUE(proxy.ok());
  HttpClientOptions opts;
  opts.http_proxy = "127.0.0.1:" + std::to_string((*proxy)->port());  // scheme optional
  opts.no_proxy = "example.com";
  auto client = HttpClient::Create(opts);
  auto r = client->Post("http://origin.test:8080/hook?x=1", {}, "{}");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->body, "a");
  auto r2 = client->Post("http://other.test/", {}, "{}");
  ASSERT_TRUE(r2.ok()) << r2.error().ToString();
  auto reqs = (*proxy)->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].path, "http://origin.test:8080/hook?x=1");
  EXPECT_EQ(FindHeader(reqs[0].headers, "host"), "origin.test:8080");
  EXPECT_EQ(FindHeader(reqs[0].headers, "proxy-authorization"), "");
  EXPECT_EQ(reqs[1].path, "http://other.test/");
  EXPECT_EQ((*proxy)->connections_accepted(), 1u);  // one proxy connection for all origins
}

// A response without Content-Length or chunking ends when the server closes:
// that connection must not go back to the pool (the message says keep-alive,
// the parser knows better). The second request starts from the first one's
// callback, before the pool's read-watch could notice the close.
TEST(HttpClient, ResponseEndedByCloseIsNotPooled) {
  std::atomic<int> requests_after_eof{0};
  RawServer server([&](int fd, int) {
    if (ReadHead(fd).empty()) return;
    SendAll(fd, "HTTP/1.1 200 OK\r\n\r\nuntil eof");
    ::shutdown(fd, SHUT_WR);  // the body ends here; the read side stays open
    if (!ReadHead(fd).empty()) ++requests_after_eof;
  });
  auto client = HttpClient::Create();
  HttpClient* c = client.get();
  std::mutex m;
  std::condition_variable cv;
  std::optional<Status> r1, r2;
  auto first = std::make_shared<Buffer>();
  auto second = std::make_shared<Buffer>();
  std::string url = server.url("/");
  client->Start(Get(url), first, [&](Status s) {
    c->Start(Get(url), second, [&](Status s2) {
      std::lock_guard l(m);
      r2 = s2;
      cv.notify_all();
    });
    std::lock_guard l(m);
    r1 = s;
    cv.notify_all();
  });
  std::unique_lock l(m);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return r1 && r2; }));
  ASSERT_TRUE(r1->ok()) << r1->ToString();
  ASSERT_TRUE(r2->ok()) << r2->ToString();
  EXPECT_EQ(first->body, "until eof");
  EXPECT_EQ(second->body, "until eof");
  EXPECT_EQ(requests_after_eof.load(), 0);
  EXPECT_EQ(server.accepted(), 2);
}

// The handle from Start() may be kept (and Cancel()ed) after the client is
// gone: its timer and resolver must not outlive the client's io_context.
TEST(HttpClient, TransferHandleMayOutliveTheClient) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  auto client = HttpClient::Create();
  std::optional<Status> result;  // written on the event thread before ~HttpClient returns
  HttpRequest req;
  req.url = (*server)->base_url() + "/chat/completions";
  std::shared_ptr<HttpTransfer> transfer =
      client->Start(req, std::make_shared<Buffer>(), [&](Status s) { result = s; });
  ASSERT_TRUE((*server)->WaitForRequests(1, std::chrono::seconds(30)));
  client.reset();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), Code::kCancelled);
  transfer->Cancel();  // no client any more: nothing happens
  transfer.reset();
}

// Beast's default body limit (8 MB) is lifted: a big body arrives whole,
// with a Content-Length or chunked.
TEST(HttpClient, BodiesLargerThanEightMegabytes) {
  const std::string big(9 << 20, 'x');
  RawServer server([&](int fd, int) {
    for (int n = 0; !ReadHead(fd).empty(); ++n) {
      if (n == 0) {
        SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: " + std::to_string(big.size()) +
                        "\r\n\r\n" + big);
      } else {
        std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (size_t i = 0; i < big.size(); i += 1 << 20)
          out += "100000\r\n" + big.substr(i, 1 << 20) + "\r\n";
        SendAll(fd, out + "0\r\n\r\n");
      }
    }
  });
  auto client = HttpClient::Create();
  for (long want : {400, 200}) {
    auto r = client->Post(server.url("/"), {}, "{}");
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_EQ(r->status, want);
    EXPECT_EQ(r->body.size(), big.size());
  }
  EXPECT_EQ(server.accepted(), 1);
}

// 1xx answers are skipped; a HEAD answer has no body whatever its
// Content-Length says; the connection stays usable after both.
TEST(HttpClient, InterimAnswersAndHead) {
  RawServer server([&](int fd, int) {
    for (int n = 0;; ++n) {
      std::string head = ReadHead(fd);
      if (head.empty()) return;
      if (n == 0) {
        SendAll(fd,
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
      } else if (head.rfind("HEAD ", 0) == 0) {
        SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
      } else {
        SendAll(fd, "HTTP/1.1 204 No Content\r\n\r\n");
      }
    }
  });
  auto client = HttpClient::Create();
  Buffer b1, b2, b3;
  ASSERT_TRUE(client->Fetch(Get(server.url("/a")), b1, {}).ok());
  EXPECT_EQ(b1.status, 200);
  EXPECT_EQ(b1.body, "ok");
  HttpRequest head = Get(server.url("/b"));
  head.method = "HEAD";
  Status st = client->Fetch(head, b2, {});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b2.status, 200);
  EXPECT_EQ(b2.body, "");
  ASSERT_TRUE(client->Fetch(Get(server.url("/c")), b3, {}).ok());
  EXPECT_EQ(b3.status, 204);
  EXPECT_EQ(server.accepted(), 1);
}

// A proxy that sends bytes after its 200 to CONNECT (or a body with its
// refusal) fails the request cleanly.
TEST(HttpClient, ConnectAnswersWithExtraBytes) {
  for (std::string answer : {"HTTP/1.1 200 OK\r\n\r\ngarbage",
                             "HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\n\r\nnope!"}) {
    RawServer proxy([&](int fd, int) {
      if (!ReadHead(fd).empty()) SendAll(fd, answer);
      ReadHead(fd);  // until the client closes
    });
    HttpClientOptions opts;
    opts.https_proxy = proxy.url("");
    opts.no_proxy = "";
    auto client = HttpClient::Create(opts);
    Buffer b;
    Status st = client->Fetch(Get("https://origin.test/"), b, {});
    EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
    EXPECT_EQ(b.status, 0);
  }
}

// A Fetch() handler that throws: the exception reaches the caller and the
// transfer is cancelled (its connection closed), not left streaming.
TEST(HttpClient, ThrowingFetchHandlerCancelsTheTransfer) {
  std::promise<void> closed;
  RawServer server([&](int fd, int) {
    if (ReadHead(fd).empty()) return;
    SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
    ReadHead(fd);  // returns when the client closes the connection
    closed.set_value();
  });
  auto client = HttpClient::Create();
  struct Thrower : HttpStreamHandler {
    Status OnHead(long, const HttpHeaders&) override { return Status::Ok(); }
    Status OnBody(std::string_view) override { throw std::runtime_error("sink failed"); }
  } handler;
  EXPECT_THROW((void)client->Fetch(Get(server.url("/")), handler, {}), std::runtime_error);
  EXPECT_EQ(closed.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
}

// Chunks that arrived together reach the handler together: a streamed
// response sends one SSE event per chunk, and handing them over one at a
// time cost a wake-up of the waiting thread per event.
TEST(HttpClient, ChunksReceivedTogetherAreDeliveredTogether) {
  std::string chunks;
  for (int i = 0; i < 100; ++i) chunks += "2\r\nx\n\r\n";
  RawServer server([&](int fd, int) {
    if (ReadHead(fd).empty()) return;
    SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n");
  });
  struct Counter : HttpStreamHandler {
    int calls = 0;
    std::string body;
    Status OnHead(long, const HttpHeaders&) override { return Status::Ok(); }
    Status OnBody(std::string_view b) override {
      ++calls;
      body += b;
      return Status::Ok();
    }
  };
  auto handler = std::make_shared<Counter>();
  std::promise<Status> done;
  auto client = HttpClient::Create();
  auto transfer = client->Start(Get(server.url("/")), handler,
                                [&](Status st) { done.set_value(std::move(st)); });
  auto fut = done.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ASSERT_TRUE(fut.get().ok());
  EXPECT_EQ(handler->body.size(), 200u);
  // One read carried all 100 chunks; allow the TCP stack to split them a few
  // times, but not once per chunk.
  EXPECT_LE(handler->calls, 5) << "each chunk was handed over on its own";
}

// Bytes already received reach the handler before any more arrive, also
// when they end with part of the next chunk's header.
TEST(HttpClient, ReceivedChunkIsDeliveredBeforeTheNextArrives) {
  std::promise<void> got_first;
  std::atomic<bool> delivered_in_time{false};
  RawServer server([&](int fd, int) {
    if (ReadHead(fd).empty()) return;
    SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n3");
    delivered_in_time =
        got_first.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    SendAll(fd, "\r\nabc\r\n0\r\n\r\n");
  });
  struct Handler : HttpStreamHandler {
    std::promise<void>* first;
    std::string body;
    Status OnHead(long, const HttpHeaders&) override { return Status::Ok(); }
    Status OnBody(std::string_view b) override {
      bool had = body.find("first") != std::string::npos;
      body += b;
      if (!had && body.find("first") != std::string::npos) first->set_value();
      return Status::Ok();
    }
  } handler;
  handler.first = &got_first;
  auto client = HttpClient::Create();
  Status st = client->Fetch(Get(server.url("/")), handler, {});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(handler.body, "firstabc");
  EXPECT_TRUE(delivered_in_time.load()) << "the first chunk waited for the next one";
}

TEST(HttpClient, LoopbackAndNoProxyBypassTheProxy) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"http_status": 200, "body": "direct"}])"));
  ASSERT_TRUE(server.ok());
  HttpClientOptions opts;
  opts.http_proxy = "http://127.0.0.1:1";  // nothing listens there
  opts.no_proxy = "";
  auto client = HttpClient::Create(opts);
  auto r = client->Post((*server)->base_url() + "/", {}, "");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->body, "direct");

  EXPECT_TRUE(HttpProxyBypassed("localhost", ""));
  EXPECT_TRUE(HttpProxyBypassed("[::1]", ""));
  EXPECT_TRUE(HttpProxyBypassed("api.example.com", "foo.org, .example.com"));
  EXPECT_TRUE(HttpProxyBypassed("example.com", "example.com"));
  EXPECT_TRUE(HttpProxyBypassed("API.Example.com", "example.com"));
  EXPECT_FALSE(HttpProxyBypassed("badexample.com", "example.com"));
  EXPECT_FALSE(HttpProxyBypassed("api.openai.com", "example.com"));
  EXPECT_TRUE(HttpProxyBypassed("api.openai.com", "*"));
  EXPECT_FALSE(HttpProxyBypassed("api.openai.com", ""));
}

// A client on the caller's io_context, destroyed on that thread while a
// transfer still waits for its answer, after which the io_context stops and
// is destroyed without running again (a server's shutdown): nothing of the
// transfer is left behind (its handler, held by the transfer, is freed).
TEST(HttpClient, DestroyedMidTransferWithItsLoopEndedLeavesNothingBehind) {
  std::weak_ptr<Buffer> handler_alive;
  {
    auto io = std::make_unique<boost::asio::io_context>();
    boost::asio::ip::tcp::acceptor acceptor(*io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    boost::asio::ip::tcp::socket held(*io);  // accepts, never answers
    bool accepted = false;
    acceptor.async_accept(held, [&](boost::system::error_code ec) { accepted = !ec; });
    HttpClientOptions o;
    o.io_context = io.get();
    std::shared_ptr<HttpClient> client = HttpClient::Create(std::move(o));
    HttpRequest req;
    req.url = "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()) + "/";
    req.connect_timeout = std::chrono::milliseconds(30000);
    req.idle_timeout = std::chrono::milliseconds(30000);
    auto handler = std::make_shared<Buffer>();
    handler_alive = handler;
    client->Start(std::move(req), std::move(handler), [](Status) {});
    while (!accepted) ASSERT_GT(io->run_one(), 0u);
    boost::asio::post(*io, [&] {
      client.reset();
      io->stop();
    });
    io->run();
  }
  EXPECT_TRUE(handler_alive.expired());
}

}  // namespace
}  // namespace agentloop
