#include "providers/http_dialer.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "providers/http_client.h"

namespace agentloop {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {
constexpr uint32_t kConnectHeaderLimit = 64 * 1024;
}  // namespace

void HttpConnection::Close() {
  error_code ec;
  Lowest().close(ec);
}

void HttpConnection::StopWatch() {
  error_code ec;
  Lowest().cancel(ec);
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

// ---- TLS trust ----

HttpTlsTrust::HttpTlsTrust(Options options) : options_(std::move(options)) {}

Status HttpTlsTrust::Ensure() {
  if (ctx_) return status_;
  try {
    ctx_ = std::make_unique<ssl::context>(ssl::context::tls_client);
  } catch (const std::exception& e) {
    return Unavailable(std::string("cannot set up TLS: ") + e.what());
  }
  SSL_CTX_set_min_proto_version(ctx_->native_handle(), TLS1_2_VERSION);
  ctx_->set_verify_mode(ssl::verify_peer);
  error_code ec;
  // The system's trust store: OpenSSL's bundle file (SSL_CERT_FILE or its
  // default) and hashed directory (SSL_CERT_DIR or its default). The file is
  // parsed whole (~150 certificates: ~23 ms on the development VM, before
  // every first https request); the directory is read lazily (the file of
  // each issuer looked up). Where the directory holds hash links (Debian,
  // Ubuntu, Alpine, Arch build it and the bundle from the same certificates)
  // it is used alone at first; a handshake that fails verification that way
  // is tried once more with the whole store (LoadFull), so whatever
  // OpenSSL's default verifies still verifies, a CA appended to the bundle
  // by hand included.
  std::string dir = options_.system_ca_dir;
  if (dir.empty()) {
    const char* env_dir = std::getenv(X509_get_default_cert_dir_env());
    dir = env_dir != nullptr && *env_dir != '\0' ? env_dir : X509_get_default_cert_dir();
  }
  const bool lazy =
      IsHashedCertDir(dir) && SSL_CTX_load_verify_dir(ctx_->native_handle(), dir.c_str()) == 1;
  if (!lazy) LoadFull();
  if (!options_.ca_dir.empty()) {
    std::error_code fs_ec;
    if (!std::filesystem::is_directory(options_.ca_dir, fs_ec) ||
        SSL_CTX_load_verify_dir(ctx_->native_handle(), options_.ca_dir.c_str()) != 1) {
      status_ = InvalidArgument("CA directory " + options_.ca_dir + " is not a directory");
    }
  }
  if (!options_.ca_file.empty()) {
    ctx_->load_verify_file(options_.ca_file, ec);
    if (ec) {
      status_ = InvalidArgument("cannot load CA file " + options_.ca_file + ": " + ec.message());
    }
  }
  return status_;
}

void HttpTlsTrust::LoadFull() {
  if (full_loaded_ || !ctx_) return;
  full_loaded_ = true;
  error_code ec;
  if (options_.system_ca_file.empty()) {
    ctx_->set_default_verify_paths(ec);
  } else {
    ctx_->load_verify_file(options_.system_ca_file, ec);
  }
}

// ---- pieces without I/O ----

std::vector<tcp::endpoint> InterleaveAddresses(std::vector<tcp::endpoint> eps) {
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

void AddressFallback::Reset(std::vector<tcp::endpoint> eps) {
  eps_ = InterleaveAddresses(std::move(eps));
  attempt_ = 0;
  last_error_ = {};
}

void AddressFallback::Failed(error_code ec) {
  if (Exhausted()) return;
  last_error_ = ec;
  ++attempt_;
}

std::string ConnectErrorText(const error_code& ec) {
  std::string m = ec.message();
  if (!m.empty() && m[0] >= 'A' && m[0] <= 'Z' && (m.size() < 2 || !(m[1] >= 'A' && m[1] <= 'Z'))) {
    m[0] = static_cast<char>(m[0] - 'A' + 'a');
  }
  return m;
}

http::request<http::empty_body> BuildConnectRequest(const HttpUrl& origin, const HttpProxy& proxy) {
  http::request<http::empty_body> req{http::verb::connect, origin.Authority(), 11};
  req.set(http::field::host, origin.Authority());
  req.set(http::field::user_agent, "agentloop");
  if (!proxy.authorization.empty()) req.set(http::field::proxy_authorization, proxy.authorization);
  return req;
}

Status CheckConnectAnswer(const std::string& proxy_name, const HttpUrl& origin, unsigned status,
                          size_t bytes_after_head) {
  if (status / 100 != 2) {
    std::string msg = proxy_name + " refused the tunnel to " + origin.Authority() + " (HTTP " +
                      std::to_string(status) + ")";
    if (status == 407) msg += ": proxy authentication required";
    return Unavailable(msg);
  }
  if (bytes_after_head != 0) return Unavailable(proxy_name + " sent data after the CONNECT answer");
  return Status::Ok();
}

// ---- the dialer ----

HttpDialer::HttpDialer(asio::io_context& ioc, HttpTlsTrust* trust, Options options)
    : ioc_(ioc), trust_(trust), options_(std::move(options)) {}

void HttpDialer::Dial(const HttpUrl& origin, const HttpRoute& route, Done done) {
  origin_ = origin;
  route_ = route;
  done_ = std::move(done);
  Start();
}

void HttpDialer::Cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  if (resolver_) resolver_->cancel();
  if (attempt_timer_) attempt_timer_->cancel();
  if (conn_) conn_->Close();
}

void HttpDialer::Finish(Status st) {
  if (state_ == State::kDone || state_ == State::kFailed) return;
  state_ = st.ok() ? State::kDone : State::kFailed;
  addresses_.Settle();
  if (attempt_timer_) attempt_timer_->cancel();
  std::shared_ptr<HttpConnection> c = std::move(conn_);
  if (!st.ok() && c) {
    c->Close();
    c.reset();
  }
  Done done = std::move(done_);
  if (done) done(std::move(st), std::move(c));
}

void HttpDialer::Start() {
  // Creating the connection (an OpenSSL stream) can throw: the dial fails.
  try {
    conn_ = std::make_shared<HttpConnection>(ioc_);
    conn_->key = route_.pool_key;
    if (origin_.https)
      conn_->tls = std::make_unique<ssl::stream<tcp::socket>>(ioc_, trust_->context());
  } catch (const std::exception& e) {
    return Finish(Internal(std::string("http client: ") + e.what()));
  }
  if (cancelled_) return Finish(Cancelled("dial cancelled"));
  const HttpUrl& dial = route_.proxy != nullptr ? route_.proxy->url : origin_;
  error_code ec;
  asio::ip::address addr = asio::ip::make_address(dial.host, ec);
  if (!ec) {
    return Resolved({tcp::endpoint(addr, static_cast<uint16_t>(std::stoi(dial.port)))});
  }
  if (options_.resolve_for_test) {
    std::vector<tcp::endpoint> eps;
    for (const auto& [ip, port] : options_.resolve_for_test(dial.host)) {
      eps.emplace_back(asio::ip::make_address(ip), port);
    }
    if (eps.empty()) return Finish(Unavailable("could not resolve host " + dial.host));
    return Resolved(std::move(eps));
  }
  state_ = State::kResolving;
  if (!resolver_) resolver_.emplace(ioc_);
  resolver_->async_resolve(
      dial.host, dial.port,
      [self = shared_from_this(), host = dial.host](error_code e,
                                                    tcp::resolver::results_type results) {
        if (self->cancelled_) return self->Finish(Cancelled("dial cancelled"));
        if (e) {
          return self->Finish(Unavailable("could not resolve host " + host + ": " + e.message()));
        }
        std::vector<tcp::endpoint> eps;
        for (const auto& r : results) eps.push_back(r.endpoint());
        self->Resolved(std::move(eps));
      });
}

void HttpDialer::Resolved(std::vector<tcp::endpoint> eps) {
  state_ = State::kConnecting;
  addresses_.Reset(std::move(eps));
  Attempt();
}

// One address at a time. A stale completion (of an attempt the fallback
// timer abandoned) is recognised by its index and ignored.
void HttpDialer::Attempt() {
  if (cancelled_) return Finish(Cancelled("dial cancelled"));
  if (addresses_.Exhausted()) {
    return Finish(Unavailable("cannot connect to " + route_.dial_name + ": " +
                              ConnectErrorText(addresses_.last_error())));
  }
  const size_t n = addresses_.attempt();
  error_code ignored;
  conn_->Lowest().close(ignored);
  if (addresses_.HasNext()) {
    if (!attempt_timer_) attempt_timer_.emplace(ioc_);
    attempt_timer_->expires_after(options_.attempt_delay);
    attempt_timer_->async_wait([self = shared_from_this(), n](error_code ec) {
      if (ec || !self->addresses_.IsCurrent(n)) return;
      self->addresses_.Failed(asio::error::timed_out);  // the pending connect is stale now
      error_code ig;
      self->conn_->Lowest().close(ig);
      self->Attempt();
    });
  }
  conn_->Lowest().async_connect(addresses_.endpoint(),
                                [self = shared_from_this(), n](error_code e) {
                                  if (!self->addresses_.IsCurrent(n)) return;
                                  if (self->attempt_timer_) self->attempt_timer_->cancel();
                                  if (self->cancelled_)
                                    return self->Finish(Cancelled("dial cancelled"));
                                  if (e) {
                                    self->addresses_.Failed(e);
                                    return self->Attempt();
                                  }
                                  // Settled. The fallback timer may have fired already, its
                                  // completion queued behind this one (cancel() cannot recall it):
                                  // it is stale now.
                                  self->addresses_.Settle();
                                  self->Connected();
                                });
}

void HttpDialer::Connected() {
  error_code ignored;
  conn_->Lowest().set_option(tcp::no_delay(true), ignored);
  conn_->Lowest().set_option(asio::socket_base::keep_alive(true), ignored);
  if (route_.tunnel) return Tunnel();
  if (origin_.https) return Handshake();
  Finish(Status::Ok());
}

void HttpDialer::Tunnel() {
  state_ = State::kTunnelling;
  try {
    connect_req_ = BuildConnectRequest(origin_, *route_.proxy);
  } catch (const std::exception&) {
    return Finish(InvalidArgument("cannot build the CONNECT request"));
  }
  http::async_write(
      conn_->Lowest(), connect_req_, [self = shared_from_this()](error_code ec, size_t) {
        const std::string& name = self->route_.dial_name;
        if (self->cancelled_) return self->Finish(Cancelled("dial cancelled"));
        if (ec)
          return self->Finish(Unavailable(name + ": sending CONNECT failed: " + ec.message()));
        self->connect_parser_.emplace();
        self->connect_parser_->skip(true);
        self->connect_parser_->header_limit(kConnectHeaderLimit);
        http::async_read_header(
            self->conn_->Lowest(), self->conn_->buf, *self->connect_parser_,
            [self](error_code e, size_t) {
              const std::string& proxy = self->route_.dial_name;
              if (self->cancelled_) return self->Finish(Cancelled("dial cancelled"));
              if (e)
                return self->Finish(Unavailable(proxy + ": no answer to CONNECT: " + e.message()));
              unsigned status = self->connect_parser_->get().result_int();
              self->connect_parser_.reset();
              Status st = CheckConnectAnswer(proxy, self->origin_, status, self->conn_->buf.size());
              if (!st.ok()) return self->Finish(st);
              self->Handshake();
            });
      });
}

void HttpDialer::Handshake() {
  state_ = State::kHandshaking;
  SSL* s = conn_->tls->native_handle();
  error_code ec;
  asio::ip::make_address(origin_.host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), origin_.host.c_str());
  } else {
    SSL_set_tlsext_host_name(s, origin_.host.c_str());
    X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(s), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(s, origin_.host.c_str());
  }
  conn_->tls->set_verify_mode(ssl::verify_peer);
  conn_->full_trust = trust_->full_loaded();
  conn_->tls->async_handshake(ssl::stream_base::client, [self = shared_from_this()](error_code e) {
    if (self->cancelled_) return self->Finish(Cancelled("dial cancelled"));
    if (!e) return self->Finish(Status::Ok());
    long vr = SSL_get_verify_result(self->conn_->tls->native_handle());
    if (vr != X509_V_OK && !self->conn_->full_trust && !self->trust_retried_) {
      // The hashed directory may lack a CA that only the bundle file has
      // (one appended to it by hand): once more with the whole store.
      self->trust_->LoadFull();
      self->trust_retried_ = true;
      self->conn_->Close();
      self->conn_.reset();
      self->state_ = State::kIdle;
      return self->Start();
    }
    std::string cause = vr != X509_V_OK ? std::string("certificate verify failed: ") +
                                              X509_verify_cert_error_string(vr)
                                        : e.message();
    self->Finish(
        Unavailable("TLS handshake with " + self->origin_.Authority() + " failed: " + cause));
  });
}

}  // namespace agentloop
