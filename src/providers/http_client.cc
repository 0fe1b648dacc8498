// HttpClient on Boost.Beast/Asio: one io_context, one event thread (the
// client's own, or the caller's with HttpClientOptions::io_context). Every
// transfer is a chain of completion handlers on that thread: resolve ->
// connect -> [proxy CONNECT] -> [TLS handshake] -> write -> read head -> read
// body pieces. One steady_timer per transfer enforces the connect timeout
// and then the idle timeout; Cancel() and the destructor abort by closing the
// socket, so whatever operation is pending completes and the transfer ends.
//
// Ownership: the state of the client (ClientCore) is shared by every pending
// handler (each holds its transfer, which holds the core), so a handler
// that completes after the HttpClient object is gone (on a caller's
// io_context, which keeps running) still finds it. The HttpClient object
// (BeastClient) only starts and stops the event thread and aborts everything
// when it is destroyed.
#include "providers/http_client.h"

#include <dirent.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/strings.h"
#include "providers/http_exchange.h"
#include "providers/http_pool.h"
#include "providers/http_url.h"

namespace agentloop {

std::string_view FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return {};
}

bool IsHashedCertDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (!found) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    // <8 hex digits of the subject hash>.<n>
    std::string_view name(e->d_name);
    size_t dot = name.find('.');
    found = dot == 8 && dot + 1 < name.size() &&
            std::all_of(name.begin(), name.begin() + 8,
                        [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }) &&
            std::all_of(name.begin() + 9, name.end(),
                        [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  }
  ::closedir(d);
  return found;
}

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr size_t kMaxIdlePerOrigin = 8;
constexpr auto kIdleLifetime = std::chrono::seconds(60);
constexpr size_t kReadBuffer = 16384;
constexpr uint32_t kHeaderLimit = 64 * 1024;

// One TCP (or TLS) connection. Owned by one transfer at a time or by the idle
// pool.
struct Conn final : PooledConnection {
  // Each read asks for up to kReadBuffer bytes, so a response arrives in
  // few reads (and few wake-ups of a thread waiting in Fetch).
  explicit Conn(asio::io_context& ioc) : sock(ioc) { buf.reserve(kReadBuffer); }
  tcp::socket sock;  // plain http
  std::unique_ptr<ssl::stream<tcp::socket>> tls;
  beast::flat_buffer buf;
  // Has carried a request. A TLS connection that has not (a preconnect's)
  // may still receive the server's post-handshake messages (TLS 1.3 session
  // tickets), which an idle readability watch would take for a close.
  bool carried = false;
  // Its handshake began with the whole system trust store loaded.
  bool full_trust = false;

  tcp::socket& Lowest() { return tls ? tls->next_layer() : sock; }
  bool IsOpen() const override { return tls ? tls->next_layer().is_open() : sock.is_open(); }
  void Close() override {
    error_code ec;
    Lowest().close(ec);
  }
  void StopWatch() override {
    error_code ec;
    Lowest().cancel(ec);  // the readability watch
  }
  template <typename F>
  void With(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(sock);
    }
  }
};

class ClientCore;

struct Transfer : HttpTransfer, PoolWaiter, std::enable_shared_from_this<Transfer> {
  Transfer(std::shared_ptr<ClientCore> c, asio::io_context& ioc) : core(std::move(c)) {
    resolver.emplace(ioc);
    timer.emplace(ioc);
  }
  void Cancel() override;
  bool Gone() const override { return finished || abort.has_value(); }

  // Kept alive by the transfer: its handlers use the core, and may complete
  // after the HttpClient object is gone.
  std::shared_ptr<ClientCore> core;
  HttpRequest request;
  std::shared_ptr<HttpStreamHandler> handler;
  std::function<void(Status)> done;

  // Event-thread state.
  HttpUrl url;
  HttpRoute route;
  const HttpProxy* proxy = nullptr;  // route.proxy
  std::string key;
  // Destroyed by Finish() on the event thread: the handle may outlive the
  // client, and these must not outlive its io_context.
  std::optional<tcp::resolver> resolver;
  std::optional<asio::steady_timer> timer;
  std::optional<asio::steady_timer> attempt_timer;  // per-address fallback
  std::vector<tcp::endpoint> endpoints;             // addresses to try, in order
  size_t attempt = 0;                               // index into endpoints
  error_code connect_error;                         // the last attempt's failure
  Clock::time_point deadline = Clock::time_point::max();
  Status deadline_status;
  bool timer_armed = false;
  Clock::time_point armed_at;
  std::shared_ptr<Conn> conn;
  bool reused = false, retried = false, finished = false;
  // A Preconnect(): no request; the connection goes to the pool (or to a
  // transfer waiting for it) once it is open.
  bool preconnect = false;
  // Waiting for a preconnect to the same origin (no operation pending).
  bool waiting = false;
  // Already retried a TLS handshake with the whole system trust store.
  bool trust_retried = false;
  // Set while waiting: when the request's connect timeout ends, so that a
  // request left to connect on its own after a failed preconnect gets only
  // what is left of it.
  Clock::time_point connect_by = Clock::time_point::max();
  std::optional<Status> abort;
  HttpWireRequest req;
  http::request<http::empty_body> connect_req;
  std::optional<http::response_parser<http::empty_body>> connect_parser;
  std::optional<HttpResponseReader> reader;
};

// A timer of Wait(): fires once, or is cancelled by its stop token or the
// client's shutdown.
struct Waiter {
  explicit Waiter(asio::io_context& ioc) : timer(ioc) {}
  asio::steady_timer timer;
  std::function<void(bool)> fn;
  bool cancelled = false;
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  explicit ClientCore(HttpClientOptions options)
      : options_(std::move(options)),
        own_ioc_(options_.io_context != nullptr ? nullptr : std::make_unique<asio::io_context>()),
        ioc_(options_.io_context != nullptr ? *options_.io_context : *own_ioc_),
        proxies_(options_.http_proxy, options_.https_proxy, options_.no_proxy,
                 HttpProxyConfig::ProcessEnv()) {}

  asio::io_context& ioc() { return ioc_; }
  bool external() const { return own_ioc_ == nullptr; }

  // Event thread: aborts every transfer and waiter, closes the idle
  // connections; later requests fail with kCancelled.
  void Shutdown() {
    shutting_down_ = true;
    std::vector<std::shared_ptr<Transfer>> running(active_.begin(), active_.end());
    for (auto& t : running) Abort(t, Cancelled("http client shut down"));
    pool_.CloseAll();
    std::vector<std::shared_ptr<Waiter>> waiting(waiters_.begin(), waiters_.end());
    for (auto& w : waiting) CancelWaiter(w);
  }

  void Wait(std::chrono::milliseconds delay, std::stop_token stop, std::function<void(bool)> fn) {
    auto w = std::make_shared<Waiter>(ioc_);
    w->fn = std::move(fn);
    asio::post(ioc_, [self = shared_from_this(), w, delay, stop = std::move(stop)] {
      if (self->shutting_down_) return self->FireWaiter(w, false);
      self->waiters_.insert(w);
      w->timer.expires_after(delay);
      w->timer.async_wait([self, w](error_code ec) { self->FireWaiter(w, !ec && !w->cancelled); });
      // Runs at once (here) when the stop was requested already.
      std::weak_ptr<Waiter> weak = w;
      w->on_stop.emplace(stop, std::function<void()>([self, weak] {
                           asio::post(self->ioc_, [self, weak] {
                             if (auto waiter = weak.lock()) self->CancelWaiter(waiter);
                           });
                         }));
    });
  }

  std::shared_ptr<HttpTransfer> Start(HttpRequest request,
                                      std::shared_ptr<HttpStreamHandler> handler,
                                      std::function<void(Status)> done) {
    auto t = std::make_shared<Transfer>(shared_from_this(), ioc_);
    t->request = std::move(request);
    t->handler = std::move(handler);
    t->done = std::move(done);
    active_count_.fetch_add(1);
    asio::post(ioc_, [this, t] {
      // Begin creates the TLS context and the connection objects, which can
      // throw (bad_alloc, system_error from OpenSSL): the transfer then fails
      // instead of never finishing.
      try {
        Begin(t);
      } catch (const std::exception& e) {
        Finish(t, Internal(std::string("http client: ") + e.what()));
      } catch (...) {
        Finish(t, Internal("http client: unknown exception"));
      }
    });
    return t;
  }

  void Preconnect(const std::string& url, std::chrono::milliseconds connect_timeout) {
    auto t = std::make_shared<Transfer>(shared_from_this(), ioc_);
    t->request.method = "GET";
    t->request.url = url;
    t->request.connect_timeout = connect_timeout;
    t->preconnect = true;
    active_count_.fetch_add(1);
    asio::post(ioc_, [this, t] {
      try {
        Begin(t);
      } catch (...) {  // best effort: nothing to report to
        Finish(t, Status::Ok());
      }
    });
  }

  size_t active_transfers() const { return active_count_.load(); }

  void PostAbort(std::shared_ptr<Transfer> t) {
    // The client's own loop has ended: its Shutdown finished every transfer,
    // and a handler posted now would never run, keeping this core (which
    // owns that io_context) alive through its own queue.
    if (loop_ended_.load()) return;
    asio::post(ioc_, [this, t] { Abort(t, Cancelled("request cancelled")); });
  }
  // Called once the client's own event thread has returned.
  void MarkLoopEnded() { loop_ended_.store(true); }

 private:
  using TransferPtr = std::shared_ptr<Transfer>;

  void CancelWaiter(const std::shared_ptr<Waiter>& w) {
    if (w->cancelled || !w->fn) return;
    w->cancelled = true;
    w->timer.cancel();  // its handler reports the wait as cancelled
  }

  void FireWaiter(const std::shared_ptr<Waiter>& w, bool fired) {
    waiters_.erase(w);
    std::function<void(bool)> fn = std::move(w->fn);
    w->fn = nullptr;
    if (!fn) return;
    try {
      fn(fired);
    } catch (...) {  // a throwing callback must not kill the event thread
    }
  }

  // ---- lifecycle ----

  void Begin(const TransferPtr& t) {
    active_.insert(t);
    if (shutting_down_) return Finish(t, Cancelled("http client shut down"));
    Result<HttpUrl> u = ParseHttpUrl(t->request.url);
    if (!u.ok()) return Finish(t, u.error());
    if (!u->userinfo.empty()) {
      return Finish(t, InvalidArgument("bad URL: credentials in the URL are not supported"));
    }
    t->url = std::move(*u);
    Result<HttpRoute> route = proxies_.Route(t->url);
    if (!route.ok()) return Finish(t, route.error());
    t->route = std::move(*route);
    t->proxy = t->route.proxy;
    t->key = t->route.pool_key;
    if (t->url.https) {
      Status st = EnsureTls();
      if (!st.ok()) return Finish(t, st);
    }
    if (t->preconnect) {
      if (!pool_.BeginOpening(t->key, t.get())) return Finish(t, Status::Ok());
      return Connect(t);
    }
    Status st = BuildHttpRequest(t->request, t->url, t->route, t->req);
    if (!st.ok()) return Finish(t, st);
    if (auto c = std::static_pointer_cast<Conn>(pool_.TakeIdle(t->key, Clock::now()))) {
      t->conn = std::move(c);
      t->reused = true;
      Send(t);
    } else if (pool_.Opening(t->key)) {
      // The connection being opened for this origin is this transfer's;
      // its own connect timeout runs meanwhile.
      t->waiting = true;
      pool_.AddWaiter(t->key, t);
      if (t->request.connect_timeout.count() > 0) {
        t->connect_by = Clock::now() + t->request.connect_timeout;
        SetDeadline(t, t->connect_by, ConnectTimedOut(*t, DialName(*t)));
      }
    } else {
      Connect(t);
    }
  }

  // A preconnect's connection is open: the first transfer still waiting for
  // it gets it, else the pool does.
  void Preconnected(const TransferPtr& t) {
    std::shared_ptr<Conn> c = std::move(t->conn);
    std::vector<TransferPtr> waiters = TakeWaiters(t);
    Finish(t, Status::Ok());
    for (const TransferPtr& w : waiters) {
      if (c) {
        w->conn = std::move(c);
        Guarded(w, [&] { Send(w); });
      } else {
        Guarded(w, [&] { Connect(w); });
      }
    }
    if (c) Release(std::move(c));
  }

  // Runs a step of waiter `w` from another transfer's completion handler: an
  // exception (allocation, OpenSSL) fails `w` instead of escaping.
  template <typename F>
  void Guarded(const TransferPtr& w, F&& step) {
    try {
      step();
    } catch (const std::exception& e) {
      Fail(w, Internal(std::string("http client: ") + e.what()));
    } catch (...) {
      Fail(w, Internal("http client: unknown exception"));
    }
  }

  // Ends `t`'s claim on its origin; the transfers that were waiting for its
  // connection and have not ended since.
  std::vector<TransferPtr> TakeWaiters(const TransferPtr& t) {
    std::vector<TransferPtr> live;
    for (auto& w : pool_.EndOpening(t->key, t.get())) {
      auto waiter = std::static_pointer_cast<Transfer>(std::move(w));
      waiter->waiting = false;
      live.push_back(std::move(waiter));
    }
    return live;
  }

  Status EnsureTls() {
    if (tls_ctx_) return tls_status_;
    try {
      tls_ctx_ = std::make_unique<ssl::context>(ssl::context::tls_client);
    } catch (const std::exception& e) {
      return Unavailable(std::string("cannot set up TLS: ") + e.what());
    }
    SSL_CTX_set_min_proto_version(tls_ctx_->native_handle(), TLS1_2_VERSION);
    tls_ctx_->set_verify_mode(ssl::verify_peer);
    error_code ec;
    // The system's trust store: OpenSSL's bundle file (SSL_CERT_FILE or its
    // default) and hashed directory (SSL_CERT_DIR or its default). The file
    // is parsed whole (~150 certificates: ~23 ms on the development VM,
    // before every first https request); the directory is read lazily (the
    // file of each issuer looked up). Where the directory holds hash links
    // (Debian, Ubuntu, Alpine, Arch build it and the bundle from the same
    // certificates) it is used alone at first; a handshake that fails
    // verification that way is tried once more with the whole store
    // (LoadFullTrust), so whatever OpenSSL's default verifies still verifies,
    // a CA appended to the bundle by hand included.
    std::string dir = options_.system_ca_dir_for_test;
    if (dir.empty()) {
      const char* env_dir = std::getenv(X509_get_default_cert_dir_env());
      dir = env_dir != nullptr && *env_dir != '\0' ? env_dir : X509_get_default_cert_dir();
    }
    const bool lazy = IsHashedCertDir(dir) &&
                      SSL_CTX_load_verify_dir(tls_ctx_->native_handle(), dir.c_str()) == 1;
    if (!lazy) LoadFullTrust();
    if (!options_.ca_dir.empty()) {
      std::error_code fs_ec;
      if (!std::filesystem::is_directory(options_.ca_dir, fs_ec) ||
          SSL_CTX_load_verify_dir(tls_ctx_->native_handle(), options_.ca_dir.c_str()) != 1) {
        tls_status_ = InvalidArgument("CA directory " + options_.ca_dir + " is not a directory");
      }
    }
    if (!options_.ca_file.empty()) {
      tls_ctx_->load_verify_file(options_.ca_file, ec);
      if (ec) {
        tls_status_ =
            InvalidArgument("cannot load CA file " + options_.ca_file + ": " + ec.message());
      }
    }
    return tls_status_;
  }

  // What a transfer connects to, for messages: the proxy or the origin.
  static std::string DialName(const Transfer& t) { return t.route.dial_name; }

  // The system's whole trust store: OpenSSL's default bundle file and
  // directory (or SSL_CERT_FILE / SSL_CERT_DIR). Once.
  void LoadFullTrust() {
    if (full_trust_loaded_) return;
    full_trust_loaded_ = true;
    error_code ec;
    if (options_.system_ca_file_for_test.empty()) {
      tls_ctx_->set_default_verify_paths(ec);
    } else {
      tls_ctx_->load_verify_file(options_.system_ca_file_for_test, ec);
    }
  }

  static Status ConnectTimedOut(const Transfer& t, const std::string& what) {
    return DeadlineExceeded("cannot connect to " + what + ": no answer within " +
                            std::to_string(t.request.connect_timeout.count()) +
                            " ms (the connect timeout)");
  }
  // "connection refused": the system's words, as the rest of a sentence.
  static std::string ConnectError(const error_code& ec) {
    std::string m = ec.message();
    if (!m.empty() && m[0] >= 'A' && m[0] <= 'Z' &&
        (m.size() < 2 || !(m[1] >= 'A' && m[1] <= 'Z'))) {
      m[0] = static_cast<char>(m[0] - 'A' + 'a');
    }
    return m;
  }

  void Connect(const TransferPtr& t) {
    t->reused = false;
    t->conn = std::make_shared<Conn>(ioc_);
    t->conn->key = t->key;
    if (t->url.https) t->conn->tls = std::make_unique<ssl::stream<tcp::socket>>(ioc_, *tls_ctx_);
    const HttpUrl& dial = t->proxy != nullptr ? t->proxy->url : t->url;
    std::string what = DialName(*t);
    if (t->request.connect_timeout.count() > 0) {
      Clock::time_point by = std::min(Clock::now() + t->request.connect_timeout, t->connect_by);
      t->connect_by = Clock::time_point::max();
      SetDeadline(t, by, ConnectTimedOut(*t, what));
    } else {
      SetDeadline(t, Clock::time_point::max(), Status::Ok());
    }
    error_code ec;
    asio::ip::address addr = asio::ip::make_address(dial.host, ec);
    if (!ec) {
      return ConnectTo(t, {tcp::endpoint(addr, static_cast<uint16_t>(std::stoi(dial.port)))}, what);
    }
    if (options_.resolve_for_test) {
      std::vector<tcp::endpoint> eps;
      for (const auto& [ip, port] : options_.resolve_for_test(dial.host)) {
        eps.emplace_back(asio::ip::make_address(ip), port);
      }
      if (eps.empty()) return Fail(t, Unavailable("could not resolve host " + dial.host));
      return ConnectTo(t, std::move(eps), what);
    }
    t->resolver->async_resolve(
        dial.host, dial.port,
        [this, t, what, host = dial.host](error_code e, tcp::resolver::results_type results) {
          if (Aborted(t)) return;
          if (e) return Fail(t, Unavailable("could not resolve host " + host + ": " + e.message()));
          std::vector<tcp::endpoint> eps;
          for (const auto& r : results) eps.push_back(r.endpoint());
          ConnectTo(t, std::move(eps), what);
        });
  }

  // IPv6 and IPv4 addresses alternate, starting with the family the
  // resolver put first (its order follows the system's preferences).
  static std::vector<tcp::endpoint> Interleave(std::vector<tcp::endpoint> eps) {
    if (eps.empty()) return eps;
    const bool first_v6 = eps.front().address().is_v6();
    std::vector<tcp::endpoint> a, b, out;
    for (auto& e : eps) (e.address().is_v6() == first_v6 ? a : b).push_back(e);
    for (size_t i = 0; i < a.size() || i < b.size(); ++i) {
      if (i < a.size()) out.push_back(a[i]);
      if (i < b.size()) out.push_back(b[i]);
    }
    return out;
  }

  void ConnectTo(const TransferPtr& t, std::vector<tcp::endpoint> eps, const std::string& what) {
    t->endpoints = Interleave(std::move(eps));
    t->attempt = 0;
    ConnectAttempt(t, what);
  }

  // One address at a time. A stale completion (of an attempt the fallback
  // timer abandoned) is recognised by its index and ignored.
  void ConnectAttempt(const TransferPtr& t, const std::string& what) {
    if (t->attempt >= t->endpoints.size()) {
      return Fail(t,
                  Unavailable("cannot connect to " + what + ": " + ConnectError(t->connect_error)));
    }
    const size_t n = t->attempt;
    error_code ignored;
    t->conn->Lowest().close(ignored);
    if (n + 1 < t->endpoints.size()) {
      if (!t->attempt_timer) t->attempt_timer.emplace(ioc_);
      t->attempt_timer->expires_after(options_.connect_attempt_delay);
      t->attempt_timer->async_wait([this, t, n, what](error_code ec) {
        if (ec || t->finished || t->attempt != n) return;
        if (Aborted(t)) return;
        t->connect_error = asio::error::timed_out;
        ++t->attempt;  // makes the pending connect's completion stale
        error_code ig;
        t->conn->Lowest().close(ig);
        ConnectAttempt(t, what);
      });
    }
    t->conn->Lowest().async_connect(t->endpoints[n], [this, t, n, what](error_code e) {
      if (t->finished || t->attempt != n) return;
      if (t->attempt_timer) t->attempt_timer->cancel();
      if (e && !t->abort) {
        t->connect_error = e;
        ++t->attempt;
        return ConnectAttempt(t, what);
      }
      // Settled. The fallback timer may have fired already, its completion
      // queued behind this one (cancel() cannot recall it): past the last
      // index, that completion is stale and leaves this connection alone.
      t->attempt = t->endpoints.size();
      OnConnected(t, e, what);
    });
  }

  void OnConnected(const TransferPtr& t, error_code ec, const std::string& what) {
    if (Aborted(t)) return;
    if (ec) return Fail(t, Unavailable("cannot connect to " + what + ": " + ConnectError(ec)));
    error_code ignored;
    t->conn->Lowest().set_option(tcp::no_delay(true), ignored);
    t->conn->Lowest().set_option(asio::socket_base::keep_alive(true), ignored);
    if (t->route.tunnel) return ProxyConnect(t);
    if (t->url.https) return Handshake(t);
    Send(t);
  }

  void ProxyConnect(const TransferPtr& t) {
    std::string proxy_name = "proxy " + t->proxy->url.Authority();
    try {
      t->connect_req = {http::verb::connect, t->url.Authority(), 11};
      t->connect_req.set(http::field::host, t->url.Authority());
      t->connect_req.set(http::field::user_agent, "agentloop");
      if (!t->proxy->authorization.empty()) {
        t->connect_req.set(http::field::proxy_authorization, t->proxy->authorization);
      }
    } catch (const std::exception&) {
      return Fail(t, InvalidArgument("cannot build the CONNECT request"));
    }
    http::async_write(
        t->conn->Lowest(), t->connect_req, [this, t, proxy_name](error_code ec, size_t) {
          if (Aborted(t)) return;
          if (ec)
            return Fail(t, Unavailable(proxy_name + ": sending CONNECT failed: " + ec.message()));
          t->connect_parser.emplace();
          t->connect_parser->skip(true);
          t->connect_parser->header_limit(kHeaderLimit);
          http::async_read_header(
              t->conn->Lowest(), t->conn->buf, *t->connect_parser,
              [this, t, proxy_name](error_code e, size_t) {
                if (Aborted(t)) return;
                if (e) {
                  return Fail(t,
                              Unavailable(proxy_name + ": no answer to CONNECT: " + e.message()));
                }
                unsigned status = t->connect_parser->get().result_int();
                t->connect_parser.reset();
                if (status / 100 != 2) {
                  std::string msg = proxy_name + " refused the tunnel to " + t->url.Authority() +
                                    " (HTTP " + std::to_string(status) + ")";
                  if (status == 407) msg += ": proxy authentication required";
                  return Fail(t, Unavailable(msg));
                }
                if (t->conn->buf.size() != 0) {
                  return Fail(t, Unavailable(proxy_name + " sent data after the CONNECT answer"));
                }
                Handshake(t);
              });
        });
  }

  void Handshake(const TransferPtr& t) {
    SSL* s = t->conn->tls->native_handle();
    error_code ec;
    asio::ip::make_address(t->url.host, ec);
    bool is_ip = !ec;
    if (is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), t->url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(s, t->url.host.c_str());
      X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(s), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      SSL_set1_host(s, t->url.host.c_str());
    }
    t->conn->tls->set_verify_mode(ssl::verify_peer);
    t->conn->full_trust = full_trust_loaded_;
    t->conn->tls->async_handshake(ssl::stream_base::client, [this, t](error_code e) {
      if (Aborted(t)) return;
      if (e) {
        long vr = SSL_get_verify_result(t->conn->tls->native_handle());
        if (vr != X509_V_OK && !t->conn->full_trust && !t->trust_retried) {
          // The hashed directory may lack a CA that only the bundle file
          // has (one appended to it by hand): once with the whole store.
          LoadFullTrust();
          t->trust_retried = true;
          t->conn->Close();
          t->conn.reset();
          return Guarded(t, [&] { Connect(t); });
        }
        std::string cause = vr != X509_V_OK ? std::string("certificate verify failed: ") +
                                                  X509_verify_cert_error_string(vr)
                                            : e.message();
        return Fail(t,
                    Unavailable("TLS handshake with " + t->url.Authority() + " failed: " + cause));
      }
      Send(t);
    });
  }

  void Send(const TransferPtr& t) {
    if (t->preconnect) return Preconnected(t);
    t->conn->carried = true;
    SetIdleDeadline(t);
    t->conn->With([&](auto& stream) {
      http::async_write(stream, t->req, [this, t](error_code ec, size_t) {
        if (Aborted(t)) return;
        if (ec) {
          if (CanRetry(t, ec)) return Retry(t);
          return Fail(t, TransportError(t->url.Authority(), ec));
        }
        Touch(t);
        t->reader.emplace(t->req.method() == http::verb::head);
        Read(t);
      });
    });
  }

  // Reads what the server sends and hands it to the reader; the head and
  // the body bytes decoded from each read go to the handler at once.
  void Read(const TransferPtr& t) {
    t->conn->With([&](auto& stream) {
      stream.async_read_some(t->conn->buf.prepare(kReadBuffer), [this, t](error_code ec, size_t n) {
        if (Aborted(t)) return;
        t->conn->buf.commit(n);
        OnRead(t, ec);
      });
    });
  }

  void OnRead(const TransferPtr& t, error_code read_error) {
    if (t->conn->buf.size() > 0) Touch(t);
    std::string body;
    error_code ec = t->reader->Feed(t->conn->buf, body);
    if (!ec && read_error == asio::error::eof) {
      ec = t->reader->FeedEof();
    } else if (!ec) {
      ec = read_error;
    }
    long status = 0;
    HttpHeaders headers;
    if (t->reader->TakeHead(status, headers)) {
      Status st = CallHandler(t, [&] { return t->handler->OnHead(status, headers); });
      if (!st.ok()) return Fail(t, st);
    }
    if (!body.empty()) {
      Status st = CallHandler(t, [&] { return t->handler->OnBody(body); });
      if (!st.ok()) return Fail(t, st);
    }
    if (ec) {
      if (CanRetry(t, ec)) return Retry(t);
      return Fail(t, TransportError(t->url.Authority(), ec));
    }
    if (t->reader->state() == HttpResponseReader::State::kDone) return Complete(t);
    // An abort (Cancel() posts one) is seen here only once it has run; one
    // delivered from inside OnBody ends the transfer here.
    if (Aborted(t)) return;
    Read(t);
  }

  void Complete(const TransferPtr& t) {
    std::shared_ptr<Conn> c = std::move(t->conn);
    // The parser's keep_alive(), not the message's: a body that ended with
    // the connection (no Content-Length, not chunked) leaves nothing to reuse.
    if (t->reader->keep_alive() && c->buf.size() == 0 && c->Lowest().is_open()) {
      Release(std::move(c));
    } else {
      c->Close();
    }
    Finish(t, Status::Ok());
  }

  // A reused connection the server closed meanwhile: one fresh attempt.
  bool CanRetry(const TransferPtr& t, error_code ec) {
    if (!t->reused || t->retried) return false;
    if (t->reader && t->reader->got_some()) return false;
    return RetryableBeforeResponse(ec);
  }

  void Retry(const TransferPtr& t) {
    t->retried = true;
    t->conn->Close();
    t->conn.reset();
    t->reader.reset();
    Connect(t);
  }

  template <typename F>
  static Status CallHandler(const TransferPtr&, F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return Internal(std::string("http stream handler threw: ") + e.what());
    } catch (...) {
      return Internal("http stream handler threw");
    }
  }

  // Ends the transfer if it was aborted (or already ended) while an
  // operation was pending; every completion handler starts with this.
  bool Aborted(const TransferPtr& t) {
    if (t->finished) return true;
    if (t->abort) {
      Fail(t, *t->abort);
      return true;
    }
    return false;
  }

  void Abort(const TransferPtr& t, Status why) {
    if (t->finished || t->abort) return;
    t->abort = std::move(why);
    // Nothing is pending for a transfer waiting for a preconnect: it ends now.
    if (t->waiting) return Fail(t, *t->abort);
    t->resolver->cancel();
    if (t->conn) t->conn->Close();
  }

  void Fail(const TransferPtr& t, Status st) {
    if (t->conn) {
      t->conn->Close();
      t->conn.reset();
    }
    Finish(t, std::move(st));
  }

  void Finish(const TransferPtr& t, Status st) {
    if (t->finished) return;
    t->finished = true;
    if (t->waiting) {  // no longer waits: the preconnect lets it go
      t->waiting = false;
      pool_.RemoveWaiter(t->key, t.get());
    }
    // A failed preconnect: whoever waited for it connects on its own (and
    // reports its own failure), once this transfer is cleaned up.
    std::vector<TransferPtr> orphans;
    if (t->preconnect) orphans = TakeWaiters(t);
    t->timer.reset();  // cancels: a pending wait ends with operation_aborted
    t->attempt_timer.reset();
    t->resolver.reset();
    if (t->conn) {
      t->conn->Close();
      t->conn.reset();
    }
    active_.erase(t);
    active_count_.fetch_sub(1);
    std::function<void(Status)> done = std::move(t->done);
    t->handler.reset();
    t->reader.reset();
    for (const TransferPtr& w : orphans) Guarded(w, [&] { Connect(w); });
    if (!done) return;
    try {
      done(std::move(st));
    } catch (...) {  // a throwing callback must not kill the event thread
    }
  }

  // ---- timeouts ----

  void SetDeadline(const TransferPtr& t, Clock::time_point when, Status why) {
    t->deadline = when;
    t->deadline_status = std::move(why);
    if (when == Clock::time_point::max()) return;
    if (!t->timer_armed || when < t->armed_at) Arm(t);
  }

  void SetIdleDeadline(const TransferPtr& t) {
    auto idle = t->request.idle_timeout;
    if (idle.count() <= 0) return SetDeadline(t, Clock::time_point::max(), Status::Ok());
    SetDeadline(t, Clock::now() + idle,
                DeadlineExceeded("no data from " + t->url.Authority() + " for " +
                                 std::to_string(idle.count()) + " ms"));
  }

  void Touch(const TransferPtr& t) {
    auto idle = t->request.idle_timeout;
    if (idle.count() > 0) t->deadline = Clock::now() + idle;
  }

  void Arm(const TransferPtr& t) {
    t->timer_armed = true;
    t->armed_at = t->deadline;
    t->timer->expires_at(t->deadline);
    t->timer->async_wait([this, t](error_code ec) {
      if (ec == asio::error::operation_aborted || t->finished) return;
      t->timer_armed = false;
      if (t->deadline == Clock::time_point::max()) return;
      if (Clock::now() >= t->deadline) return Abort(t, t->deadline_status);
      Arm(t);
    });
  }

  // ---- idle connection pool ----

  void Release(std::shared_ptr<Conn> c) {
    if (shutting_down_) return c->Close();
    const uint64_t token = pool_.Put(c, Clock::now());
    // Not watched: the server's session tickets would look like a close. A
    // close meanwhile shows when the connection is reused, and a reused
    // connection that fails before any response byte is retried once.
    if (c->tls && !c->carried) return;
    // An idle connection that becomes readable was closed by the server (or
    // sent something unsolicited): drop it.
    c->Lowest().async_wait(tcp::socket::wait_read,
                           [this, self = shared_from_this(), c, token](error_code) {
                             std::shared_ptr<PooledConnection> pooled = c;
                             pool_.Evict(pooled, token);
                           });
  }

  HttpClientOptions options_;
  std::unique_ptr<asio::io_context> own_ioc_;  // null: the caller's
  asio::io_context& ioc_;
  std::atomic<size_t> active_count_{0};
  const HttpProxyConfig proxies_;

  // Event-thread state.
  bool shutting_down_ = false;
  std::atomic<bool> loop_ended_{false};
  std::unique_ptr<ssl::context> tls_ctx_;
  Status tls_status_;
  bool full_trust_loaded_ = false;  // LoadFullTrust() ran
  std::unordered_set<TransferPtr> active_;
  HttpConnectionPool pool_{{kMaxIdlePerOrigin, kIdleLifetime}};
  std::unordered_set<std::shared_ptr<Waiter>> waiters_;
};

void Transfer::Cancel() { core->PostAbort(shared_from_this()); }

// The HttpClient object: runs the event thread (unless the caller's
// io_context is used) and shuts the core down when destroyed.
class BeastClient final : public HttpClient {
 public:
  explicit BeastClient(HttpClientOptions options)
      : core_(std::make_shared<ClientCore>(std::move(options))) {
    if (core_->external()) return;
    work_.emplace(asio::make_work_guard(core_->ioc()));
    thread_ = std::thread([ioc = &core_->ioc()] {
      while (true) {
        try {
          ioc->run();
          return;
        } catch (...) {  // handlers catch what they call; keep the thread alive
        }
      }
    });
  }

  ~BeastClient() override {
    // On the caller's io_context this runs there (at once when destroyed on
    // its thread); the core lives on in the handlers still pending.
    asio::dispatch(core_->ioc(), [core = core_] { core->Shutdown(); });
    if (thread_.joinable()) {
      work_.reset();
      thread_.join();
      core_->MarkLoopEnded();
    }
  }

  std::shared_ptr<HttpTransfer> Start(HttpRequest request,
                                      std::shared_ptr<HttpStreamHandler> handler,
                                      std::function<void(Status)> done) override {
    return core_->Start(std::move(request), std::move(handler), std::move(done));
  }
  void Preconnect(const std::string& url, std::chrono::milliseconds connect_timeout) override {
    core_->Preconnect(url, connect_timeout);
  }
  void Wait(std::chrono::milliseconds delay, std::stop_token stop,
            std::function<void(bool)> fn) override {
    core_->Wait(delay, std::move(stop), std::move(fn));
  }
  size_t active_transfers() const override { return core_->active_transfers(); }

 private:
  std::shared_ptr<ClientCore> core_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
};

// Moves events from the event thread to the thread blocked in Fetch().
struct Bridge : HttpStreamHandler {
  std::mutex mu;
  std::condition_variable_any cv;
  bool head = false;
  long status = 0;
  HttpHeaders headers;
  std::string buf;
  bool done = false;
  Status result;

  Status OnHead(long s, const HttpHeaders& h) override {
    std::lock_guard lock(mu);
    head = true;
    status = s;
    headers = h;
    cv.notify_all();
    return Status::Ok();
  }
  Status OnBody(std::string_view bytes) override {
    std::lock_guard lock(mu);
    buf.append(bytes);
    cv.notify_all();
    return Status::Ok();
  }
  void Done(Status s) {
    std::lock_guard lock(mu);
    done = true;
    result = std::move(s);
    cv.notify_all();
  }
};

struct BufferingHandler : HttpStreamHandler {
  HttpResponse response;
  Status OnHead(long s, const HttpHeaders& h) override {
    response.status = s;
    response.headers = h;
    return Status::Ok();
  }
  Status OnBody(std::string_view bytes) override {
    response.body.append(bytes);
    return Status::Ok();
  }
};

}  // namespace

std::shared_ptr<HttpClient> HttpClient::Create(HttpClientOptions options) {
  return std::make_shared<BeastClient>(std::move(options));
}

Status HttpClient::Fetch(HttpRequest request, HttpStreamHandler& handler, std::stop_token stop) {
  if (stop.stop_requested()) return Cancelled("request cancelled");
  auto bridge = std::make_shared<Bridge>();
  std::shared_ptr<HttpTransfer> transfer =
      Start(std::move(request), bridge, [bridge](Status s) { bridge->Done(std::move(s)); });
  bool head_delivered = false;
  std::string local;
  while (true) {
    bool new_head = false, finished = false;
    Status result;
    long status = 0;
    HttpHeaders headers;
    {
      std::unique_lock lock(bridge->mu);
      bridge->cv.wait(lock, stop, [&] {
        return bridge->done || (bridge->head && !head_delivered) || !bridge->buf.empty();
      });
      if (stop.stop_requested()) {
        lock.unlock();
        transfer->Cancel();
        return Cancelled("request cancelled");
      }
      if (bridge->head && !head_delivered) {
        new_head = true;
        head_delivered = true;
        status = bridge->status;
        headers = std::move(bridge->headers);
      }
      local.swap(bridge->buf);
      finished = bridge->done;
      result = bridge->result;
    }
    // A throwing handler leaves Fetch, but must not leave the transfer
    // running (streaming, buffering, billing) behind it.
    Status st;
    try {
      if (new_head) st = handler.OnHead(status, headers);
      if (st.ok() && !local.empty()) {
        st = handler.OnBody(local);
        local.clear();
      }
    } catch (...) {
      transfer->Cancel();
      throw;
    }
    if (!st.ok()) {
      transfer->Cancel();
      return st;
    }
    if (finished) return result;
  }
}

Result<HttpResponse> HttpClient::Post(const std::string& url, const HttpHeaders& headers,
                                      std::string body, std::stop_token stop) {
  HttpRequest req;
  req.url = url;
  req.headers = headers;
  req.body = std::move(body);
  BufferingHandler h;
  AL_RETURN_IF_ERROR(Fetch(req, h, stop));
  return std::move(h.response);
}

}  // namespace agentloop
