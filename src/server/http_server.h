// HttpServer: an HTTP/1.1 server on Boost.Beast that runs entirely on one
// io_context (the caller runs it on one thread). It reads requests under
// limits (header bytes, body bytes, a deadline for each read and write),
// hands each to a handler as an Exchange, writes the response the handler
// gives, and keeps the connection alive for the next request. A handler may
// instead open an event stream (server-sent events) on the exchange, which
// then owns the connection until either side closes it.
//
// Threads: everything here runs on the io_context's thread, except
// Exchange::Send, which may be called from any thread (it posts).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include "agentloop/status.h"

namespace agentloop::server {

struct HttpLimits {
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 16 << 10;
  // Each read of a request and each write of a response must finish within
  // this; an idle keep-alive connection is closed after it.
  std::chrono::milliseconds io_timeout{30000};
  // An event stream writes a comment line after this much silence.
  std::chrono::milliseconds heartbeat{15000};
  // Bytes an event stream may have queued for a slow reader before it is
  // told `stream.desync` and closed.
  size_t max_stream_backlog = 1 << 20;
};

struct Request {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  std::string target;                             // as sent: path and query
  std::string path;                               // decoded path, without the query
  std::multimap<std::string, std::string> query;  // decoded
  boost::beast::http::fields headers;
  std::string body;
  bool peer_is_loopback = false;

  std::string_view Header(std::string_view name) const;
  // The first value of a query parameter, or `fallback`.
  std::string Query(const std::string& name, const std::string& fallback = {}) const;
};

struct Response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Connection;

// An open server-sent-events response. io_context thread only.
class EventStream : public std::enable_shared_from_this<EventStream> {
 public:
  // Queues a complete frame ("id: ...\nevent: ...\ndata: ...\n\n"). Returns
  // false when the stream is closed. A frame that would take the backlog
  // over HttpLimits::max_stream_backlog closes the stream after
  // `overflow_frame` (see SetOverflowFrame) instead: the reader reconnects
  // and replays from the store.
  bool Push(std::string frame);
  // Ends the stream: writes every frame already queued, then `final_frame`
  // (may be empty), then closes. Later pushes are refused.
  void Close(std::string final_frame);
  // Ends the stream now: drops what is queued (after the frame being
  // written), writes `final_frame`, and closes; for a reader that cannot
  // keep up, who reconnects and replays.
  void Abort(std::string final_frame);
  bool closed() const { return closed_; }
  // Called once when the stream ends (either side).
  void OnClose(std::function<void()> fn) { on_close_ = std::move(fn); }
  // What to send in place of frames that do not fit (computed when needed).
  void SetOverflowFrame(std::function<std::string()> fn) { overflow_frame_ = std::move(fn); }
  size_t backlog_bytes() const { return backlog_; }

 private:
  friend class Connection;
  friend class Exchange;
  explicit EventStream(std::shared_ptr<Connection> conn, const HttpLimits& limits);
  void Start(std::string head);
  void WriteNext();
  void ArmHeartbeat();
  void WatchForClose();
  void Finish();

  std::shared_ptr<Connection> conn_;
  HttpLimits limits_;
  std::deque<std::string> queue_;
  size_t backlog_ = 0;
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
  std::function<void()> on_close_;
  std::function<std::string()> overflow_frame_;
  boost::asio::steady_timer heartbeat_;
  char probe_[64];
};

// One request and the means to answer it, once.
class Exchange {
 public:
  Exchange(std::shared_ptr<Connection> conn, Request request);
  const Request& request() const { return request_; }
  // Sends the response (any thread). Later calls are ignored.
  void Send(Response response);
  // io_context thread only: answers with an event stream (status 200,
  // text/event-stream) and returns it; `extra_headers` are added.
  std::shared_ptr<EventStream> OpenStream(
      std::vector<std::pair<std::string, std::string>> extra_headers = {});
  // Sends `response`; or, when the exchange was answered with an event
  // stream, tells the interceptor that `response` is what a repeat of this
  // request is answered with (once).
  void Settle(Response response);
  bool answered() const { return answered_; }
  // Set before the exchange is handed on: `fn` gets the response instead of
  // the connection, on the sending thread, and calls `send` (from any
  // thread) to send it, e.g. once it is recorded elsewhere. For an exchange
  // answered with a stream, Settle calls it with a `send` that does nothing.
  using Interceptor = std::function<void(const Response&, std::function<void()> send)>;
  void InterceptResponse(Interceptor fn) { interceptor_ = std::move(fn); }

 private:
  std::shared_ptr<Connection> conn_;
  Request request_;
  std::atomic<bool> answered_{false};
  bool streamed_ = false;  // io_context thread only
  Interceptor interceptor_;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpLimits limits, Handler handler);
  ~HttpServer();
  // Binds and starts accepting. Port 0 picks a free port (see port()).
  Status Listen(const boost::asio::ip::tcp::endpoint& endpoint);
  int port() const { return port_; }
  // Stops accepting; open connections finish their current exchange.
  void StopAccepting();
  size_t open_connections() const;

 private:
  void Accept();

  HttpLimits limits_;
  std::shared_ptr<const Handler> handler_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::shared_ptr<size_t> open_;
};

// An RFC 9457 problem (application/problem+json): {type, title, status,
// detail, code, request_id}. `code` is the stable, documented name clients
// switch on.
Response Problem(unsigned status, std::string_view code, std::string detail,
                 std::string_view request_id = {});

// What the server refuses in a request head (RFC 9112) beyond what its
// parser refuses, so that no two readers of the same bytes (a proxy in
// front, this server) can frame a request differently: Transfer-Encoding
// together with Content-Length, any transfer coding but a single final
// `chunked`, more than one Host (or none in HTTP/1.1), obsolete line
// folding, white space before a field's colon. `head` is the request line
// and fields, up to the empty line. kInvalidArgument saying which.
Status CheckRequestHead(std::string_view head);

// "127.0.0.1:7878", "[::1]:7878", "localhost:7878", ":7878" (loopback).
Result<boost::asio::ip::tcp::endpoint> ParseListenAddress(std::string_view text);

// Percent-decoding of a path or query component ('+' is a space in a query).
// Errors: kInvalidArgument for a malformed escape or a NUL byte.
Result<std::string> PercentDecode(std::string_view text, bool query);

// The pairs of a query string or an application/x-www-form-urlencoded body,
// decoded. Errors: as PercentDecode.
Result<std::multimap<std::string, std::string>> ParseUrlEncoded(std::string_view text);

}  // namespace agentloop::server
