#include "providers/http_exchange.h"

#include <memory>
#include <sstream>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/write.hpp>
#include <gtest/gtest.h>

#include "providers/testing/url.h"

namespace agentloop {
namespace {

namespace http = boost::beast::http;
using State = HttpResponseReader::State;

using ::agentloop::testing::Url;

std::string Header(const HttpWireRequest& req, std::string_view name) {
  auto it = req.find(boost::beast::string_view(name.data(), name.size()));
  return it == req.end() ? std::string("<none>") : std::string(it->value());
}

TEST(BuildHttpRequest, OriginFormWithDefaultsAndTheBodyMovedIn) {
  HttpRequest r;
  r.url = "http://example.com:8080/v1/x?y";
  r.headers = {{"Authorization", "Bearer k"}, {"Content-Length", "999"}, {"Accept", "text/x"}};
  r.body = "{}";
  HttpWireRequest req;
  ASSERT_TRUE(BuildHttpRequest(r, Url("http://example.com:8080/v1/x?y"), HttpRoute{}, req).ok());
  EXPECT_EQ(req.method(), http::verb::post);
  EXPECT_EQ(req.target(), "/v1/x?y");
  EXPECT_EQ(Header(req, "Host"), "example.com:8080");
  EXPECT_EQ(Header(req, "Accept"), "text/x");
  EXPECT_EQ(Header(req, "User-Agent"), "agentloop");
  EXPECT_EQ(Header(req, "Authorization"), "Bearer k");
  EXPECT_EQ(Header(req, "Content-Length"), "2");  // the caller's is ignored
  ASSERT_TRUE(req.body());
  EXPECT_EQ(*req.body(), "{}");
  EXPECT_TRUE(r.body.empty());
}

TEST(BuildHttpRequest, ASharedBodyIsSentAsIsWithoutACopy) {
  HttpRequest r;
  r.url = "http://h/v1";
  r.body = "ignored";
  auto body = std::make_shared<const std::string>("{\"a\":1}");
  r.shared_body = body;
  HttpWireRequest req;
  ASSERT_TRUE(BuildHttpRequest(r, Url("http://h/v1"), HttpRoute{}, req).ok());
  EXPECT_EQ(req.body().get(), body.get());
  EXPECT_EQ(Header(req, "Content-Length"), "7");
  std::ostringstream wire;
  wire << req;
  const std::string s = wire.str();
  EXPECT_EQ(s.substr(0, 13), "POST /v1 HTTP");
  EXPECT_EQ(s.substr(s.size() - 11), "\r\n\r\n{\"a\":1}");
  // The request lets go of it; the caller's reference stays valid.
  req.body().reset();
  EXPECT_EQ(*body, "{\"a\":1}");
}

TEST(BuildHttpRequest, ContentLengthOnlyWhereABodyBelongs) {
  HttpWireRequest get, post, custom;
  HttpRequest g;
  g.method = "GET";
  ASSERT_TRUE(BuildHttpRequest(g, Url("http://h/"), HttpRoute{}, get).ok());
  EXPECT_EQ(Header(get, "Content-Length"), "<none>");
  HttpRequest p;  // POST without a body still says so
  ASSERT_TRUE(BuildHttpRequest(p, Url("http://h/"), HttpRoute{}, post).ok());
  EXPECT_EQ(Header(post, "Content-Length"), "0");
  HttpRequest c;
  c.method = "PROPFIND2";
  ASSERT_TRUE(BuildHttpRequest(c, Url("http://h/"), HttpRoute{}, custom).ok());
  EXPECT_EQ(custom.method_string(), "PROPFIND2");
}

TEST(BuildHttpRequest, AbsoluteFormCarriesTheProxyCredentials) {
  HttpProxyConfig config(std::string("http://u:p@proxy:3128"), std::nullopt, std::string(),
                         EnvMap{});
  HttpUrl url = Url("http://example.com/a?b");
  Result<HttpRoute> route = config.Route(url);
  ASSERT_TRUE(route.ok());
  HttpRequest r;
  r.method = "GET";
  HttpWireRequest req;
  ASSERT_TRUE(BuildHttpRequest(r, url, *route, req).ok());
  EXPECT_EQ(req.target(), "http://example.com/a?b");
  EXPECT_EQ(Header(req, "Proxy-Authorization"), "Basic dTpw");
}

TEST(BuildHttpRequest, InvalidHeadersAndMethodsAreRefusedWithoutTheirValues) {
  HttpWireRequest req;
  HttpRequest bad_value;
  bad_value.headers = {{"X-Key", "secret\r\nInjected: 1"}};
  Status st = BuildHttpRequest(bad_value, Url("http://h/"), HttpRoute{}, req);
  ASSERT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("X-Key"), std::string::npos);
  EXPECT_EQ(st.message().find("secret"), std::string::npos);
  HttpRequest bad_name;
  bad_name.headers = {{"X Key", "v"}};
  EXPECT_EQ(BuildHttpRequest(bad_name, Url("http://h/"), HttpRoute{}, req).code(),
            Code::kInvalidArgument);
  HttpRequest bad_method;
  bad_method.method = "GET /";
  EXPECT_EQ(BuildHttpRequest(bad_method, Url("http://h/"), HttpRoute{}, req).code(),
            Code::kInvalidArgument);
}

// Appends `bytes` to the connection buffer and feeds the reader.
boost::system::error_code Feed(HttpResponseReader& r, boost::beast::flat_buffer& in,
                               std::string_view bytes, std::string& body) {
  auto b = in.prepare(bytes.size());
  boost::asio::buffer_copy(b, boost::asio::buffer(bytes.data(), bytes.size()));
  in.commit(bytes.size());
  return r.Feed(in, body);
}

TEST(HttpResponseReader, HeadThenBodyAcrossFeeds) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  long status = 0;
  HttpHeaders headers;
  EXPECT_EQ(r.state(), State::kHead);
  EXPECT_FALSE(r.got_some());
  ASSERT_FALSE(Feed(r, in, "HTTP/1.1 200 OK\r\nContent-Le", body));
  EXPECT_EQ(r.state(), State::kHead);
  EXPECT_TRUE(r.got_some());
  EXPECT_FALSE(r.TakeHead(status, headers));
  ASSERT_FALSE(Feed(r, in, "ngth: 10\r\nX-A: b\r\n\r\nhello", body));
  EXPECT_EQ(r.state(), State::kBody);
  ASSERT_TRUE(r.TakeHead(status, headers));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(FindHeader(headers, "x-a"), "b");
  EXPECT_FALSE(r.TakeHead(status, headers));  // once
  EXPECT_EQ(body, "hello");
  ASSERT_FALSE(Feed(r, in,
                    "world"
                    "HTTP/1.1 200",
                    body));
  EXPECT_EQ(r.state(), State::kDone);
  EXPECT_EQ(body, "helloworld");
  EXPECT_TRUE(r.keep_alive());
  // The next response's bytes stay for the connection's next reader.
  EXPECT_EQ(in.size(), 12u);
}

TEST(HttpResponseReader, InterimAnswersAreSkipped) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  ASSERT_FALSE(Feed(r, in, "HTTP/1.1 100 Continue\r\n\r\n", body));
  EXPECT_EQ(r.state(), State::kHead);
  long status = 0;
  HttpHeaders headers;
  EXPECT_FALSE(r.TakeHead(status, headers));
  ASSERT_FALSE(Feed(r, in, "HTTP/1.1 204 No Content\r\n\r\n", body));
  EXPECT_EQ(r.state(), State::kDone);
  ASSERT_TRUE(r.TakeHead(status, headers));
  EXPECT_EQ(status, 204);
}

TEST(HttpResponseReader, ChunkedBodyDecodedAndChunksFedTogetherComeOutTogether) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  ASSERT_FALSE(Feed(r, in,
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n4\r\ndefg\r\n",
                    body));
  EXPECT_EQ(r.state(), State::kBody);
  EXPECT_EQ(body, "abcdefg");
  ASSERT_FALSE(Feed(r, in, "0\r\n\r\n", body));
  EXPECT_EQ(r.state(), State::kDone);
}

TEST(HttpResponseReader, LargeBodiesPassThroughTheChunkBuffer) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  const std::string big(100000, 'x');
  ASSERT_FALSE(Feed(r, in, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, body));
  EXPECT_EQ(r.state(), State::kDone);
  EXPECT_EQ(body, big);
}

TEST(HttpResponseReader, HeadRequestHasNoBody) {
  HttpResponseReader r(/*head_request=*/true);
  boost::beast::flat_buffer in;
  std::string body;
  ASSERT_FALSE(Feed(r, in, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", body));
  EXPECT_EQ(r.state(), State::kDone);
  EXPECT_TRUE(body.empty());
}

TEST(HttpResponseReader, BodyDelimitedByTheCloseEndsAtEof) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  ASSERT_FALSE(Feed(r, in, "HTTP/1.1 200 OK\r\n\r\npartly", body));
  EXPECT_EQ(r.state(), State::kBody);
  EXPECT_FALSE(r.FeedEof());
  EXPECT_EQ(r.state(), State::kDone);
  EXPECT_EQ(body, "partly");
  EXPECT_FALSE(r.keep_alive());
}

TEST(HttpResponseReader, EofBeforeTheEndFails) {
  {
    HttpResponseReader r;
    EXPECT_EQ(r.FeedEof(), http::error::end_of_stream);
    EXPECT_EQ(r.state(), State::kFailed);
    EXPECT_FALSE(r.got_some());
  }
  {
    HttpResponseReader r;
    boost::beast::flat_buffer in;
    std::string body;
    ASSERT_FALSE(Feed(r, in, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", body));
    EXPECT_EQ(r.FeedEof(), http::error::partial_message);
    EXPECT_EQ(r.state(), State::kFailed);
  }
  {
    HttpResponseReader r;
    boost::beast::flat_buffer in;
    std::string body;
    ASSERT_FALSE(Feed(r, in, "HTTP/1.1 2", body));
    EXPECT_EQ(r.FeedEof(), http::error::partial_message);
  }
}

TEST(HttpResponseReader, MalformedResponseFails) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  EXPECT_TRUE(Feed(r, in, "SMTP ready\r\n\r\n", body));
  EXPECT_EQ(r.state(), State::kFailed);
}

TEST(HttpResponseReader, ConnectionCloseIsNotKeptAlive) {
  HttpResponseReader r;
  boost::beast::flat_buffer in;
  std::string body;
  ASSERT_FALSE(
      Feed(r, in, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", body));
  EXPECT_EQ(r.state(), State::kDone);
  EXPECT_FALSE(r.keep_alive());
}

TEST(HttpTransportError, NamesThePeerAndTheCause) {
  EXPECT_EQ(TransportError("h:1", http::error::partial_message).message(),
            "connection to h:1 closed before the response was complete");
  EXPECT_EQ(TransportError("h:1", boost::asio::error::connection_reset).message(),
            "connection to h:1 reset");
  EXPECT_NE(TransportError("h:1", http::error::bad_version).message().find("invalid HTTP response"),
            std::string::npos);
  EXPECT_EQ(TransportError("h:1", boost::asio::error::eof).code(), Code::kUnavailable);
  EXPECT_TRUE(RetryableBeforeResponse(http::error::end_of_stream));
  EXPECT_TRUE(RetryableBeforeResponse(boost::asio::error::connection_reset));
  EXPECT_FALSE(RetryableBeforeResponse(http::error::bad_version));
  EXPECT_FALSE(RetryableBeforeResponse(boost::asio::error::timed_out));
}

}  // namespace
}  // namespace agentloop
