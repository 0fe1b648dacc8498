// The HTTP client's dialer: opens one connection along an HttpRoute. Name
// lookup (the system resolver, or a test's answers), then the addresses one
// at a time, IPv6 and IPv4 alternating (an attempt neither connected nor
// failed after `attempt_delay` is abandoned for the next address, so a
// black-holed address does not use up the connect timeout), then through a
// proxy the CONNECT tunnel, then for https the TLS handshake (SNI, peer and
// host name verification; a handshake that fails verification against the
// lazily read system directory is dialled once more with the whole store,
// see HttpTlsTrust).
//
// The dialer keeps no deadline: its owner enforces the connect timeout by
// calling Cancel(), after which `done` still comes, exactly once. The pieces
// without I/O (address order and fallback, the CONNECT request and answer,
// error wording) are functions and a small state class, tested on their own.
//
// Thread-safety: none; one dialer per connection attempt, used on the event
// thread of its io_context.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>

#include "agentloop/status.h"

#include "providers/http_pool.h"
#include "providers/http_url.h"

namespace agentloop {

// One TCP (or TLS) connection: owned by one transfer at a time or by the
// pool.
struct HttpConnection final : PooledConnection {
  using Tcp = boost::asio::ip::tcp;
  // Each read asks for up to kReadBuffer bytes, so a response arrives in
  // few reads (and few wake-ups of a thread waiting in Fetch).
  static constexpr size_t kReadBuffer = 16384;

  explicit HttpConnection(boost::asio::io_context& ioc) : sock(ioc) {}

  Tcp::socket sock;  // plain http
  std::unique_ptr<boost::asio::ssl::stream<Tcp::socket>> tls;
  // Bytes read and not yet parsed. Empty and without storage while a plain
  // connection waits for data (the client reads it only once the socket is
  // readable, and releases the storage once parsed), so a connection
  // waiting for a model's answer holds no read buffer; a TLS connection
  // keeps it between reads (the TLS stream may hold decrypted bytes the
  // socket's readiness does not show).
  boost::beast::flat_buffer buf;
  // Has carried a request. A TLS connection that has not (a preconnect's)
  // may still receive the server's post-handshake messages (TLS 1.3 session
  // tickets), which an idle readability watch would take for a close.
  bool carried = false;
  // Its handshake began with the whole system trust store loaded.
  bool full_trust = false;

  Tcp::socket& Lowest() { return tls ? tls->next_layer() : sock; }
  bool IsOpen() const override { return tls ? tls->next_layer().is_open() : sock.is_open(); }
  void Close() override;
  void StopWatch() override;  // cancels the readability watch
  template <typename F>
  void With(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(sock);
    }
  }
};

// The TLS client context and the trust store behind it, created on first
// use. The system store's hashed directory is read lazily where there is
// one; LoadFull() adds the whole store (bundle file included), once.
class HttpTlsTrust {
 public:
  struct Options {
    std::string ca_file;  // extra PEM file
    std::string ca_dir;   // extra hashed directory
    // Empty: OpenSSL's defaults (SSL_CERT_DIR / SSL_CERT_FILE or built in).
    std::string system_ca_dir;
    std::string system_ca_file;
  };
  explicit HttpTlsTrust(Options options);

  // Creates the context (once) and reports what failed to load (a bad
  // ca_file or ca_dir): then every https request fails with it.
  Status Ensure();
  void LoadFull();
  bool full_loaded() const { return full_loaded_; }
  // Valid once Ensure() succeeded.
  boost::asio::ssl::context& context() { return *ctx_; }

 private:
  Options options_;
  std::unique_ptr<boost::asio::ssl::context> ctx_;
  Status status_;
  bool full_loaded_ = false;
};

// IPv6 and IPv4 addresses alternate, starting with the family listed first
// (the resolver's order follows the system's preferences).
std::vector<boost::asio::ip::tcp::endpoint> InterleaveAddresses(
    std::vector<boost::asio::ip::tcp::endpoint> eps);

// The addresses of one dial and which is being tried. An attempt's
// completion carries its index; one that is no longer current (abandoned by
// the fallback timer, or after the dial settled) is stale and ignored.
class AddressFallback {
 public:
  void Reset(std::vector<boost::asio::ip::tcp::endpoint> eps);  // interleaves
  bool Exhausted() const { return attempt_ >= eps_.size(); }
  size_t attempt() const { return attempt_; }
  const boost::asio::ip::tcp::endpoint& endpoint() const { return eps_[attempt_]; }
  // Whether another address follows the current one.
  bool HasNext() const { return attempt_ + 1 < eps_.size(); }
  bool IsCurrent(size_t n) const { return n == attempt_ && !Exhausted(); }
  // The current attempt failed (or was abandoned: asio::error::timed_out):
  // on to the next address.
  void Failed(boost::system::error_code ec);
  // Connected (or ended): every later completion is stale.
  void Settle() { attempt_ = eps_.size(); }
  const boost::system::error_code& last_error() const { return last_error_; }

 private:
  std::vector<boost::asio::ip::tcp::endpoint> eps_;
  size_t attempt_ = 0;
  boost::system::error_code last_error_;
};

// "Connection refused" -> "connection refused": the system's words, as the
// rest of a sentence.
std::string ConnectErrorText(const boost::system::error_code& ec);

// The CONNECT request for a tunnel to `origin` (host:port) through `proxy`.
boost::beast::http::request<boost::beast::http::empty_body> BuildConnectRequest(
    const HttpUrl& origin, const HttpProxy& proxy);

// The proxy's answer to CONNECT: OK for 2xx with nothing after the head;
// otherwise kUnavailable naming the proxy (`proxy_name`) and the origin.
Status CheckConnectAnswer(const std::string& proxy_name, const HttpUrl& origin, unsigned status,
                          size_t bytes_after_head);

class HttpDialer : public std::enable_shared_from_this<HttpDialer> {
 public:
  enum class State { kIdle, kResolving, kConnecting, kTunnelling, kHandshaking, kDone, kFailed };
  using Done = std::function<void(Status, std::shared_ptr<HttpConnection>)>;
  using Resolver = std::function<std::vector<std::pair<std::string, uint16_t>>(const std::string&)>;
  struct Options {
    std::chrono::milliseconds attempt_delay{1000};
    Resolver resolve_for_test;  // null: the system resolver
  };

  // `trust` (needed for https; its Ensure() succeeded) outlives the dialer.
  HttpDialer(boost::asio::io_context& ioc, HttpTlsTrust* trust, Options options);

  // Opens a connection to `origin` along `route`, tagged with `pool_key`;
  // `done` gets it, or the error. Once per dialer.
  void Dial(const HttpUrl& origin, const HttpRoute& route, Done done);
  // Stops what is pending (lookup, connect, tunnel, handshake); `done` then
  // comes with an error, unless it came already.
  void Cancel();
  State state() const { return state_; }

 private:
  using Ptr = std::shared_ptr<HttpDialer>;
  void Start();
  void Resolved(std::vector<boost::asio::ip::tcp::endpoint> eps);
  void Attempt();
  void Connected();
  void Tunnel();
  void Handshake();
  void Finish(Status st);

  boost::asio::io_context& ioc_;
  HttpTlsTrust* trust_;
  Options options_;
  State state_ = State::kIdle;
  HttpUrl origin_;
  HttpRoute route_;
  Done done_;
  bool cancelled_ = false;
  bool trust_retried_ = false;
  std::shared_ptr<HttpConnection> conn_;
  std::optional<boost::asio::ip::tcp::resolver> resolver_;
  std::optional<boost::asio::steady_timer> attempt_timer_;
  AddressFallback addresses_;
  boost::beast::http::request<boost::beast::http::empty_body> connect_req_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::empty_body>>
      connect_parser_;
};

}  // namespace agentloop
