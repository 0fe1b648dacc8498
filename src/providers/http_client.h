// HttpClient: agentloop's one HTTP/1.1 client (Boost.Beast/Asio, OpenSSL for
// TLS). One io_context driven by one event thread carries every transfer (no
// thread per request), so thousands of sessions can stream at once. The
// thread is the client's own, or the caller's: with
// HttpClientOptions::io_context the client joins an io_context the caller
// runs (a server's I/O thread) and starts no thread.
// Keep-alive connections are pooled per origin (at most 8 idle per origin,
// dropped after 60 s idle or when the server closes them); a reused
// connection that fails before any response byte is retried once on a fresh
// one. TCP_NODELAY is on. https verifies the peer (system CA store,
// SSL_CERT_FILE / SSL_CERT_DIR, HttpClientOptions::ca_file and ca_dir) and the
// host name, and sends SNI. The system store is read lazily from its hashed
// directory where there is one; a handshake that fails verification that way
// is tried once more, on a new connection and within the same connect
// timeout, with the whole store (bundle file included; see HttpTlsTrust in
// http_dialer.h). The client's layers (URL and proxy configuration, dialer,
// pool, exchange) are units of their own: see http_client.cc.
//
// Proxies come from the environment like curl: https_proxy/HTTPS_PROXY for
// https (CONNECT tunnel, then TLS to the origin), http_proxy/HTTP_PROXY for
// http (absolute-form request target), no_proxy/NO_PROXY (comma list of host
// suffixes, `*` = all); localhost/127.0.0.1/::1 are never proxied. Proxy URLs
// are http://[user:pass@]host[:port] (Basic auth); credentials are never
// logged.
//
// Three ways to use it:
//  - Start(): asynchronous; callbacks run on the event thread and must not
//    block. Returns a handle whose Cancel() aborts the transfer.
//  - Fetch(): blocking; runs the handler on the CALLING thread as bytes
//    arrive (what providers' Complete() uses, so StreamSink deltas stay on
//    the thread that runs it). When the stop token fires it returns at
//    once and the transfer is aborted on the event thread. Never call it
//    (or Post()) on the event thread: it would wait for itself.
//  - Post(): blocking, whole body buffered (webhooks).
// Wait() is the event thread's timer (providers' retry backoff).
//
// Errors (transport, not HTTP status): kUnavailable for connection failures
// (refused, reset, DNS, TLS, proxy, truncated body), kDeadlineExceeded for
// the connect timeout (resolve + connect + proxy + TLS handshake) and the
// idle timeout (no byte for `idle_timeout`), kCancelled when the stop token
// fired or Cancel() was called, kInvalidArgument for a bad or unsupported URL.
// Messages name host and port, never header values, paths or credentials.
//
// Thread-safety: all methods are thread-safe. The destructor aborts whatever
// is still running (transfers end with kCancelled, waits report false): with
// its own thread it waits for that; on the caller's io_context it happens
// there (at once when the client is destroyed on that thread), and the
// client's state lives on until the last pending handler has run, so the
// io_context may keep running.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentloop/status.h"

#include "providers/http_url.h"

namespace boost::asio {
class io_context;
}

namespace agentloop {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive header lookup; empty when absent.
std::string_view FindHeader(const HttpHeaders& headers, std::string_view name);

struct HttpRequest {
  std::string method = "POST";
  std::string url;
  HttpHeaders headers;  // values may be secrets: never logged
  std::string body;
  // When set, the body sent instead of `body`, shared with the caller: the
  // client holds its reference only while it may still send the body (until
  // it is written on a fresh connection, or until the first byte of the
  // answer on a reused one, which may be retried on a fresh one; see
  // body_source).
  std::shared_ptr<const std::string> shared_body;
  // Builds the same body again (the same bytes). When set, the client lets
  // go of the body as soon as it is written, also on a reused connection,
  // and a retry on a fresh connection sends what this returns. Called on
  // the event thread; a null result (or a throw) fails the transfer.
  std::function<std::shared_ptr<const std::string>()> body_source;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds idle_timeout{120000};  // 0 = none
};

struct HttpResponse {
  long status = 0;
  HttpHeaders headers;
  std::string body;
};

// Callbacks for one transfer. For Start() they run on the event thread; for
// Fetch() on the calling thread. A non-OK Status from OnHead/OnBody aborts the
// transfer and becomes its result.
class HttpStreamHandler {
 public:
  virtual ~HttpStreamHandler() = default;
  // Called once, before the first OnBody (or at the end when there is no
  // body), with the final status line and headers.
  virtual Status OnHead(long status, const HttpHeaders& headers) = 0;
  virtual Status OnBody(std::string_view bytes) = 0;
};

class HttpTransfer {
 public:
  virtual ~HttpTransfer() = default;
  // Aborts the transfer; `done` then gets kCancelled (if not already done).
  virtual void Cancel() = 0;
};

struct HttpClientOptions {
  // Extra trusted CA certificates (PEM file), added to the system store.
  std::string ca_file;
  // Extra trusted CA directory in OpenSSL's hashed layout (<subject hash>.0
  // files, as `openssl rehash` makes), read lazily; added to the system store.
  std::string ca_dir;
  // Proxy settings; unset = from the environment (see above). An empty
  // string means "no proxy" / "no exceptions".
  std::optional<std::string> http_proxy;
  std::optional<std::string> https_proxy;
  std::optional<std::string> no_proxy;
  // A host name with several addresses is tried one address at a time, IPv6
  // and IPv4 alternating. An attempt that has neither connected nor failed
  // after this long is abandoned for the next address, so a black-holed
  // address (broken IPv6 routes drop packets silently) does not use up the
  // whole connect timeout; the last address gets what is left of it.
  std::chrono::milliseconds connect_attempt_delay{1000};
  // Run on this io_context (the caller runs it on ONE thread) instead of a
  // thread of the client's own. It must outlive the client's transfers.
  boost::asio::io_context* io_context = nullptr;
  // Tests only: the system trust store's hashed directory and bundle file
  // (empty: OpenSSL's defaults).
  std::string system_ca_dir_for_test;
  std::string system_ca_file_for_test;
  // Tests only: answers name lookups instead of DNS (the endpoints to try,
  // in order). Null: the system resolver.
  std::function<std::vector<std::pair<std::string, uint16_t>>(const std::string& host)>
      resolve_for_test;
};

// Whether `dir` holds OpenSSL hash links (<8 hex digits>.<n>), so that
// certificates can be looked up in it by subject.
bool IsHashedCertDir(const std::string& dir);

class HttpClient {
 public:
  static std::shared_ptr<HttpClient> Create(HttpClientOptions options = {});
  virtual ~HttpClient() = default;

  // Asynchronous transfer. `handler` is kept alive by the client until
  // `done` has been called (exactly once, on the event thread).
  virtual std::shared_ptr<HttpTransfer> Start(HttpRequest request,
                                              std::shared_ptr<HttpStreamHandler> handler,
                                              std::function<void(Status)> done) = 0;

  // Blocking streaming transfer: handler callbacks run on this thread.
  // Returns OK when the body arrived completely (whatever the HTTP status).
  Status Fetch(HttpRequest request, HttpStreamHandler& handler, std::stop_token stop);

  // Blocking request with the whole body buffered. OK for any HTTP status;
  // transport failures are errors.
  Result<HttpResponse> Post(const std::string& url, const HttpHeaders& headers, std::string body,
                            std::stop_token stop = {});

  // Opens a connection to the origin of `url` ahead of a request to it
  // (name lookup, connect, proxy tunnel and TLS handshake, bounded by
  // `connect_timeout`) and keeps it in the idle pool for that request.
  // Returns at once. Best effort: a failure is dropped, and the next request
  // connects (and reports failures) as it would have. Does nothing when an
  // idle connection to the origin is pooled or one is being opened. A request
  // that starts while the connection is being opened waits for it instead of
  // opening a second one (its connect timeout still applies).
  virtual void Preconnect(const std::string& url, std::chrono::milliseconds connect_timeout) = 0;

  // Calls `fn(true)` on the event thread once `delay` has passed, or
  // `fn(false)` there as soon as `stop` fires or the client shuts down;
  // exactly once. An Asio timer: no thread waits.
  virtual void Wait(std::chrono::milliseconds delay, std::stop_token stop,
                    std::function<void(bool)> fn) = 0;

  // Transfers currently running (for tests and metrics).
  virtual size_t active_transfers() const = 0;
};

}  // namespace agentloop
