#include "providers/http_exchange.h"

#include <limits>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/error.hpp>

namespace agentloop {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

bool ValidHeaderName(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n) {
    if (IsSpaceOrControl(c) || c == ':' || static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

bool ValidHeaderValue(std::string_view v) {
  for (char c : v) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

}  // namespace

Status BuildHttpRequest(HttpRequest& r, const HttpUrl& url, const HttpRoute& route,
                        HttpWireRequest& req) {
  for (const auto& [k, v] : r.headers) {
    if (!ValidHeaderName(k)) return InvalidArgument("invalid HTTP header name");
    if (!ValidHeaderValue(v)) return InvalidArgument("invalid value for HTTP header " + k);
  }
  if (r.method.empty() || !ValidHeaderName(r.method)) {
    return InvalidArgument("invalid HTTP method");
  }
  try {
    req.version(11);
    http::verb verb = http::string_to_verb(r.method);
    if (verb == http::verb::unknown) {
      req.method_string(r.method);
    } else {
      req.method(verb);
    }
    req.target(route.absolute_form ? "http://" + url.HostHeader() + url.target : url.target);
    req.set(http::field::host, url.HostHeader());
    req.set(http::field::user_agent, "agentloop");
    req.set(http::field::accept, "*/*");
    for (const auto& [k, v] : r.headers) {
      http::field f = http::string_to_field(k);
      if (f == http::field::content_length || f == http::field::transfer_encoding) continue;
      if (f == http::field::host || f == http::field::user_agent || f == http::field::accept) {
        req.set(f, v);
      } else {
        req.insert(k, v);
      }
    }
    if (route.absolute_form && route.proxy != nullptr && !route.proxy->authorization.empty()) {
      req.set(http::field::proxy_authorization, route.proxy->authorization);
    }
    if (r.shared_body) {
      req.body() = std::move(r.shared_body);
    } else if (!r.body.empty()) {
      req.body() = std::make_shared<const std::string>(std::move(r.body));
      r.body.clear();
    }
    const size_t size = req.body() ? req.body()->size() : 0;
    if (size > 0 || (verb != http::verb::get && verb != http::verb::head)) {
      req.content_length(size);
    }
  } catch (const std::exception&) {
    return InvalidArgument("cannot build the HTTP request");
  }
  return Status::Ok();
}

HttpResponseReader::HttpResponseReader(bool head_request) : head_request_(head_request) {
  NewParser();
}

void HttpResponseReader::NewParser() {
  parser_.emplace();
  // Not boost::none: Beast 1.74 compares content-length > none as true.
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  parser_->header_limit(kHeaderLimit);
  if (head_request_) parser_->skip(true);
}

error_code HttpResponseReader::Feed(boost::beast::flat_buffer& in, std::string& body) {
  error_code ec;
  while ((state_ == State::kHead || state_ == State::kBody) && in.size() > 0) {
    if (state_ == State::kHead) {
      size_t n = parser_->put(in.data(), ec);
      in.consume(n);
      if (n > 0) got_some_ = true;
      if (ec == http::error::need_more) return {};
      if (ec) {
        state_ = State::kFailed;
        return ec;
      }
      if (!parser_->is_header_done()) {
        if (n == 0) return {};
        continue;
      }
      unsigned status = parser_->get().result_int();
      if (status >= 100 && status < 200 && status != 101) {  // interim answer
        NewParser();
        continue;
      }
      head_pending_ = true;
      state_ = parser_->is_done() ? State::kDone : State::kBody;
      continue;
    }
    // The body bytes are decoded straight into `body`: they are never more
    // than the input bytes they come from.
    const size_t old_size = body.size();
    const size_t room = in.size();
    body.resize(old_size + room);
    parser_->get().body().data = body.data() + old_size;
    parser_->get().body().size = room;
    size_t n = parser_->put(in.data(), ec);
    in.consume(n);
    size_t got = room - parser_->get().body().size;
    body.resize(old_size + got);
    if (parser_->is_done()) state_ = State::kDone;
    if (ec == http::error::need_buffer) {
      if (n == 0 && got == 0) return {};
      ec = {};
      continue;
    }
    if (ec == http::error::need_more) return {};
    if (ec) {
      state_ = State::kFailed;
      return ec;
    }
    if (n == 0 && got == 0) return {};
  }
  return ec;
}

error_code HttpResponseReader::FeedEof() {
  if (state_ == State::kDone) return {};
  error_code ec;
  if (state_ == State::kHead && !parser_->got_some()) {
    ec = got_some_ ? http::error::partial_message : http::error::end_of_stream;
  } else if (state_ == State::kFailed) {
    ec = http::error::partial_message;
  } else {
    parser_->put_eof(ec);
  }
  if (!ec && parser_->is_done()) {
    state_ = State::kDone;
  } else {
    if (!ec) ec = http::error::partial_message;
    state_ = State::kFailed;
  }
  return ec;
}

bool HttpResponseReader::TakeHead(long& status, HttpHeaders& headers) {
  if (!head_pending_) return false;
  head_pending_ = false;
  status = parser_->get().result_int();
  headers.clear();
  for (const auto& f : parser_->get()) {
    headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  return true;
}

bool HttpResponseReader::keep_alive() const {
  return state_ == State::kDone && parser_->keep_alive();
}

Status TransportError(const std::string& where, const error_code& ec) {
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
    return Unavailable("connection to " + where + " closed before the response was complete");
  }
  if (ec == asio::error::connection_reset) return Unavailable("connection to " + where + " reset");
  if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
    return Unavailable("invalid HTTP response from " + where + ": " + ec.message());
  }
  return Unavailable("connection to " + where + " failed: " + ec.message());
}

bool RetryableBeforeResponse(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == asio::ssl::error::stream_truncated;
}

}  // namespace agentloop
