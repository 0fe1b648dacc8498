// The HTTP client's exchange layer: one request on one connection, without
// the I/O. BuildHttpRequest turns an HttpRequest into what goes on the wire
// (validated headers, the target in origin or absolute form, the proxy's
// Authorization when the request itself goes to the proxy);
// HttpResponseReader turns the bytes that come back into the response's
// head and body pieces, in explicit states; TransportError and
// RetryableBeforeResponse classify the failures. The client's event thread
// moves the bytes between these and the socket.
//
// Thread-safety: none; one reader per exchange, used on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/optional.hpp>
#include <boost/system/error_code.hpp>

#include "agentloop/status.h"

#include "providers/http_client.h"
#include "providers/http_url.h"

namespace agentloop {

// A Beast body (writer only) sending a string owned elsewhere and shared:
// the transfer releases its reference once the body cannot be sent again,
// while the caller (a provider that may retry) keeps its own.
struct SharedStringBody {
  using value_type = std::shared_ptr<const std::string>;  // null: empty body

  static std::uint64_t size(const value_type& body) { return body ? body->size() : 0; }

  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool isRequest, class Fields>
    writer(const boost::beast::http::header<isRequest, Fields>&, const value_type& body)
        : body_(body) {}

    void init(boost::system::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::system::error_code& ec) {
      ec = {};
      if (!body_ || body_->empty()) return boost::none;
      return std::make_pair(const_buffers_type(body_->data(), body_->size()), false);
    }

   private:
    const value_type& body_;
  };
};

using HttpWireRequest = boost::beast::http::request<SharedStringBody>;

// Fills `out` for `request` to `url` along `route`. The request's body (its
// `shared_body`, else its `body`, moved: a model request can be megabytes)
// is shared with `out`. kInvalidArgument for an invalid method, header name
// or header value (the message names the header, never its value).
Status BuildHttpRequest(HttpRequest& request, const HttpUrl& url, const HttpRoute& route,
                        HttpWireRequest& out);

// Reads one response (after any interim 1xx answers) from fed bytes.
//
//   kHead --(final status line and headers)--> kBody --(end of body)--> kDone
//     \--(head of a body-less response, e.g. to HEAD, 204, 304)------> kDone
//   any state but kDone --(malformed bytes, or the connection ending the
//   message early)--> kFailed
class HttpResponseReader {
 public:
  enum class State { kHead, kBody, kDone, kFailed };

  // Headers beyond this many bytes fail the response.
  static constexpr uint32_t kHeaderLimit = 64 * 1024;

  explicit HttpResponseReader(bool head_request = false);

  // Parses and consumes what `in` holds, appending decoded body bytes to
  // `body`; stops when `in` runs out or the response is done (bytes after
  // it stay in `in`). Non-OK (and kFailed) for malformed input.
  boost::system::error_code Feed(boost::beast::flat_buffer& in, std::string& body);
  // The connection ended: completes a body delimited by the close, else
  // fails (http::error::end_of_stream before any byte of a response,
  // partial_message after some).
  boost::system::error_code FeedEof();

  // The final head, once, after the Feed that completed it: true and the
  // status and headers then, false before and after.
  bool TakeHead(long& status, HttpHeaders& headers);

  State state() const { return state_; }
  // Some byte of a response (final or interim) has arrived.
  bool got_some() const { return got_some_; }
  // The connection may carry another request (valid once kDone).
  bool keep_alive() const;

 private:
  using Parser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;

  void NewParser();

  bool head_request_;
  State state_ = State::kHead;
  bool got_some_ = false;
  bool head_pending_ = false;
  std::optional<Parser> parser_;
};

// A transport failure as the client reports it: kUnavailable naming the
// peer `where` (host:port), never a header value or path.
Status TransportError(const std::string& where, const boost::system::error_code& ec);

// Whether `ec`, met on a reused keep-alive connection before any byte of a
// response, means the server closed the connection meanwhile (so the request
// is worth one fresh attempt).
bool RetryableBeforeResponse(const boost::system::error_code& ec);

}  // namespace agentloop
