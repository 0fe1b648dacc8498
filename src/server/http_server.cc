#include "server/http_server.h"

#include <strings.h>

#include <optional>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "agentloop/json.h"

namespace agentloop::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string_view Request::Header(std::string_view name) const {
  auto it = headers.find(beast::string_view(name.data(), name.size()));
  if (it == headers.end()) return {};
  return {it->value().data(), it->value().size()};
}

std::string Request::Query(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

Result<std::string> PercentDecode(std::string_view text, bool query) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+' && query) {
      out += ' ';
    } else if (c == '%') {
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      int hi = i + 2 < text.size() ? hex(text[i + 1]) : -1;
      int lo = i + 2 < text.size() ? hex(text[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return InvalidArgument("malformed percent escape in '" + std::string(text) + "'");
      }
      char d = static_cast<char>(hi * 16 + lo);
      if (d == '\0') return InvalidArgument("a NUL byte in '" + std::string(text) + "'");
      out += d;
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::multimap<std::string, std::string>> ParseUrlEncoded(std::string_view text) {
  std::multimap<std::string, std::string> out;
  while (!text.empty()) {
    size_t amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    AL_ASSIGN_OR_RETURN(std::string k, PercentDecode(pair.substr(0, eq), true));
    AL_ASSIGN_OR_RETURN(
        std::string v,
        PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                      true));
    out.emplace(std::move(k), std::move(v));
  }
  return out;
}

Response Problem(unsigned status, std::string_view code, std::string detail,
                 std::string_view request_id) {
  Response r;
  r.status = status;
  r.content_type = "application/problem+json";
  Json j = {{"type", "urn:agentloop:problem:" + std::string(code)},
            {"title", std::string(http::obsolete_reason(static_cast<http::status>(status)))},
            {"status", status},
            {"detail", std::move(detail)},
            {"code", std::string(code)}};
  if (!request_id.empty()) j["request_id"] = std::string(request_id);
  r.body = DumpJson(j);
  return r;
}

namespace {

// Where the head of the request in `buffered` ends (after its empty line),
// or npos when it is not all there yet. Empty lines before the request line
// are skipped, as RFC 9112 lets a server do.
size_t HeadEnd(std::string_view buffered) {
  size_t start = buffered.find_first_not_of("\r\n");
  if (start == std::string_view::npos) return std::string_view::npos;
  size_t crlf = buffered.find("\r\n\r\n", start);
  size_t lf = buffered.find("\n\n", start);
  if (crlf != std::string_view::npos && (lf == std::string_view::npos || crlf + 2 <= lf)) {
    return crlf + 4;
  }
  return lf == std::string_view::npos ? lf : lf + 2;
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view TrimOws(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

}  // namespace

Status CheckRequestHead(std::string_view head) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < head.size();) {
    size_t nl = head.find('\n', at);
    std::string_view line = head.substr(at, nl == std::string_view::npos ? nl : nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  size_t i = 0;
  while (i < lines.size() && lines[i].empty()) ++i;  // before the request line
  if (i == lines.size()) return InvalidArgument("no request line");
  const std::string_view request_line = lines[i++];
  int hosts = 0;
  bool content_length = false;
  std::vector<std::string> codings;
  bool transfer_encoding = false;
  for (; i < lines.size() && !lines[i].empty(); ++i) {
    std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') {
      return InvalidArgument("obsolete line folding (a field line starting with white space)");
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the parser refuses it
    std::string_view name = line.substr(0, colon);
    if (!name.empty() && (name.back() == ' ' || name.back() == '\t')) {
      return InvalidArgument("white space between a field name and its colon");
    }
    std::string_view value = TrimOws(line.substr(colon + 1));
    if (IEquals(name, "host")) {
      ++hosts;
    } else if (IEquals(name, "content-length")) {
      content_length = true;
    } else if (IEquals(name, "transfer-encoding")) {
      transfer_encoding = true;
      while (true) {
        size_t comma = value.find(',');
        std::string_view c = TrimOws(value.substr(0, comma));
        if (!c.empty()) codings.emplace_back(c);
        if (comma == std::string_view::npos) break;
        value = value.substr(comma + 1);
      }
    }
  }
  if (hosts > 1) return InvalidArgument("more than one Host field");
  if (hosts == 0 && request_line.ends_with("HTTP/1.1")) {
    return InvalidArgument("an HTTP/1.1 request without a Host field");
  }
  if (transfer_encoding && content_length) {
    return InvalidArgument("Transfer-Encoding together with Content-Length");
  }
  if (transfer_encoding && (codings.size() != 1 || !IEquals(codings[0], "chunked"))) {
    std::string list;
    for (const auto& c : codings) list += (list.empty() ? "" : ", ") + c;
    return InvalidArgument("unsupported Transfer-Encoding '" + list +
                           "': only a single chunked is accepted");
  }
  return Status::Ok();
}

Result<tcp::endpoint> ParseListenAddress(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("listen address '" + std::string(text) +
                           "' has no port (expected HOST:PORT, e.g. 127.0.0.1:7878)");
  }
  std::string host(text.substr(0, colon));
  std::string port_text(text.substr(colon + 1));
  int port = -1;
  if (!port_text.empty() && port_text.size() <= 5 &&
      port_text.find_first_not_of("0123456789") == std::string::npos) {
    port = std::stoi(port_text);
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("listen address '" + std::string(text) + "': '" + port_text +
                           "' is not a port number (0-65535)");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  asio::ip::address addr = asio::ip::make_address(host, ec);
  if (ec) {
    return InvalidArgument("listen address '" + std::string(text) + "': '" + host +
                           "' is not an IP address (names other than localhost are not resolved)");
  }
  return tcp::endpoint(addr, static_cast<unsigned short>(port));
}

// --- connection ------------------------------------------------------------

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const HttpLimits& limits, std::shared_ptr<const Handler> handler,
             std::shared_ptr<size_t> open)
      : stream_(std::move(socket)),
        limits_(limits),
        handler_(std::move(handler)),
        open_(std::move(open)) {
    ++*open_;
    boost::system::error_code ec;
    tcp::endpoint peer = stream_.socket().remote_endpoint(ec);
    loopback_ = !ec && peer.address().is_loopback();
  }
  ~Connection() { --*open_; }

  void Start() { ReadRequest(); }

  void ReadRequest() {
    parser_.emplace();
    parser_->body_limit(limits_.max_body_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    stream_.expires_after(limits_.io_timeout);
    ReadHead();
  }

  // Reads until the buffer holds the whole head of the next request and
  // checks it (CheckRequestHead); then the parser reads the request from
  // the buffer on. A head over the limit goes to the parser, which refuses
  // it.
  void ReadHead() {
    std::string_view buffered(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    const size_t end = HeadEnd(buffered);
    if (end != std::string_view::npos) {
      Status head = CheckRequestHead(buffered.substr(0, end));
      if (!head.ok()) {
        return Reply(Problem(400, "malformed_request", "malformed HTTP request: " + head.message()),
                     false);
      }
      return ReadParsed();
    }
    if (buffered.size() > limits_.max_header_bytes) return ReadParsed();
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              // EOF between requests, a timeout, a reset:
                              // nothing to answer.
                              if (ec) return self->Shutdown();
                              self->buffer_.commit(n);
                              self->ReadHead();
                            });
  }

  void ReadParsed() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Reply(Problem(413, "body_too_large",
                           "the request body is larger than " +
                               std::to_string(limits_.max_body_bytes) + " bytes"),
                   false);
    }
    if (ec == http::error::header_limit) {
      return Reply(Problem(431, "headers_too_large",
                           "the request headers are larger than " +
                               std::to_string(limits_.max_header_bytes) + " bytes"),
                   false);
    }
    if (ec) {
      // EOF between requests, a timeout, a reset: nothing to answer. A
      // malformed request gets a 400 before the connection closes.
      if (ec.category() == make_error_code(http::error::end_of_stream).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message) {
        return Reply(Problem(400, "malformed_request", "malformed HTTP request: " + ec.message()),
                     false);
      }
      return Shutdown();
    }
    http::request<http::string_body> msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();
    Request req;
    req.method = msg.method();
    req.target = std::string(msg.target());
    req.headers = std::move(msg.base());
    req.body = std::move(msg.body());
    req.peer_is_loopback = loopback_;
    std::string_view target = req.target;
    size_t q = target.find('?');
    Result<std::string> path = PercentDecode(target.substr(0, q), false);
    if (!path.ok()) return Reply(Problem(400, "malformed_request", path.error().message()), false);
    req.path = std::move(*path);
    if (q != std::string_view::npos) {
      Result<std::multimap<std::string, std::string>> query = ParseUrlEncoded(target.substr(q + 1));
      if (!query.ok())
        return Reply(Problem(400, "malformed_request", query.error().message()), false);
      req.query = std::move(*query);
    }
    (*handler_)(std::make_shared<Exchange>(shared_from_this(), std::move(req)));
  }

  // io thread. Writes the response; then reads the next request or closes.
  void Reply(Response r, bool keep_alive) {
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->version(11);
    msg->result(r.status);
    msg->set(http::field::server, "agentloop");
    msg->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) msg->set(k, v);
    msg->body() = std::move(r.body);
    msg->keep_alive(keep_alive);
    msg->prepare_payload();
    stream_.expires_after(limits_.io_timeout);
    http::async_write(stream_, *msg,
                      [self = shared_from_this(), msg, keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Shutdown();
                        self->ReadRequest();
                      });
  }

  void Shutdown() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream& stream() { return stream_; }
  bool keep_alive() const { return keep_alive_; }
  asio::any_io_executor executor() { return stream_.get_executor(); }

  const HttpLimits& limits() const { return limits_; }

 private:
  beast::tcp_stream stream_;
  const HttpLimits limits_;
  std::shared_ptr<const Handler> handler_;
  std::shared_ptr<size_t> open_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  bool loopback_ = false;
};

// --- exchange --------------------------------------------------------------

Exchange::Exchange(std::shared_ptr<Connection> conn, Request request)
    : conn_(std::move(conn)), request_(std::move(request)) {}

void Exchange::Send(Response response) {
  if (answered_.exchange(true)) return;
  auto conn = conn_;
  auto send = [conn, response]() mutable {
    asio::post(conn->executor(), [conn, response = std::move(response)]() mutable {
      conn->Reply(std::move(response), conn->keep_alive());
    });
  };
  if (auto fn = std::exchange(interceptor_, nullptr)) return fn(response, std::move(send));
  send();
}

void Exchange::Settle(Response response) {
  if (!streamed_) return Send(std::move(response));
  if (auto fn = std::exchange(interceptor_, nullptr)) fn(response, [] {});
}

std::shared_ptr<EventStream> Exchange::OpenStream(
    std::vector<std::pair<std::string, std::string>> extra_headers) {
  answered_ = true;
  streamed_ = true;
  std::string head =
      "HTTP/1.1 200 OK\r\nServer: agentloop\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n";
  for (auto& [k, v] : extra_headers) head += k + ": " + v + "\r\n";
  head += "\r\nretry: 2000\n\n";
  std::shared_ptr<EventStream> s(new EventStream(conn_, conn_->limits()));
  s->Start(std::move(head));
  return s;
}

// --- event stream ----------------------------------------------------------

EventStream::EventStream(std::shared_ptr<Connection> conn, const HttpLimits& limits)
    : conn_(std::move(conn)), limits_(limits), heartbeat_(conn_->executor()) {}

void EventStream::Start(std::string head) {
  // The connection is a stream now: no deadline while it waits for events
  // (each write gets one).
  conn_->stream().expires_never();
  queue_.push_back(std::move(head));
  backlog_ = queue_.back().size();
  WatchForClose();
  WriteNext();
}

bool EventStream::Push(std::string frame) {
  if (closed_ || closing_) return false;
  if (backlog_ + frame.size() > limits_.max_stream_backlog) {
    Abort(overflow_frame_ ? overflow_frame_() : std::string());
    return false;
  }
  backlog_ += frame.size();
  queue_.push_back(std::move(frame));
  WriteNext();
  return true;
}

void EventStream::Close(std::string final_frame) {
  if (closed_ || closing_) return;
  closing_ = true;
  if (!final_frame.empty()) {
    backlog_ += final_frame.size();
    queue_.push_back(std::move(final_frame));
  }
  WriteNext();
}

void EventStream::Abort(std::string final_frame) {
  if (closed_ || closing_) return;
  closing_ = true;
  // Whatever is queued is dropped: a reader that reconnects replays it.
  if (!writing_) {
    queue_.clear();
    backlog_ = 0;
  } else {
    while (queue_.size() > 1) queue_.pop_back();
    backlog_ = queue_.empty() ? 0 : queue_.front().size();
  }
  if (!final_frame.empty()) {
    backlog_ += final_frame.size();
    queue_.push_back(std::move(final_frame));
  }
  WriteNext();
}

void EventStream::WriteNext() {
  if (closed_ || writing_) return;
  if (queue_.empty()) {
    if (closing_) return Finish();
    return ArmHeartbeat();
  }
  writing_ = true;
  heartbeat_.cancel();
  conn_->stream().expires_after(limits_.io_timeout);
  auto self = shared_from_this();
  asio::async_write(conn_->stream(), asio::buffer(queue_.front()),
                    [self](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      if (self->closed_) return;
                      self->backlog_ -= self->queue_.front().size();
                      self->queue_.pop_front();
                      if (ec) return self->Finish();
                      self->conn_->stream().expires_never();
                      self->WriteNext();
                    });
}

void EventStream::ArmHeartbeat() {
  heartbeat_.expires_after(limits_.heartbeat);
  std::weak_ptr<EventStream> weak = shared_from_this();
  heartbeat_.async_wait([weak](beast::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_ || self->writing_ || !self->queue_.empty()) return;
    self->Push(": hb\n\n");
  });
}

void EventStream::WatchForClose() {
  // A reader sends nothing on a stream: a completed read is its close (or
  // garbage, which ends the stream as well).
  auto self = shared_from_this();
  conn_->stream().socket().async_read_some(asio::buffer(probe_), [self](beast::error_code, size_t) {
    if (!self->closed_) self->Finish();
  });
}

void EventStream::Finish() {
  if (closed_) return;
  closed_ = true;
  heartbeat_.cancel();
  queue_.clear();
  backlog_ = 0;
  conn_->Shutdown();
  if (auto fn = std::move(on_close_)) fn();
}

// --- server ----------------------------------------------------------------

HttpServer::HttpServer(asio::io_context& io, HttpLimits limits, Handler handler)
    : limits_(limits),
      handler_(std::make_shared<const Handler>(std::move(handler))),
      acceptor_(io),
      open_(std::make_shared<size_t>(0)) {}

HttpServer::~HttpServer() { StopAccepting(); }

Status HttpServer::Listen(const tcp::endpoint& endpoint) {
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + endpoint.address().to_string() + ":" +
                       std::to_string(endpoint.port()) + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  return Status::Ok();
}

void HttpServer::StopAccepting() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

size_t HttpServer::open_connections() const { return *open_; }

void HttpServer::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      std::make_shared<Connection>(std::move(socket), limits_, handler_, open_)->Start();
    }
    // A failed accept (too many open files, say) must not stop the server.
    Accept();
  });
}

}  // namespace agentloop::server
