#include "providers/http_dialer.h"

#include <boost/asio/error.hpp>
#include <gtest/gtest.h>

#include "providers/testing/url.h"

namespace agentloop {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

tcp::endpoint Ep(const char* ip, uint16_t port = 443) {
  return tcp::endpoint(asio::ip::make_address(ip), port);
}

using ::agentloop::testing::Url;

TEST(HttpDialer, AddressesAlternateFamiliesStartingWithTheFirst) {
  std::vector<tcp::endpoint> in = {Ep("2001:db8::1"), Ep("2001:db8::2"), Ep("2001:db8::3"),
                                   Ep("192.0.2.1"), Ep("192.0.2.2")};
  std::vector<tcp::endpoint> want = {Ep("2001:db8::1"), Ep("192.0.2.1"), Ep("2001:db8::2"),
                                     Ep("192.0.2.2"), Ep("2001:db8::3")};
  EXPECT_EQ(InterleaveAddresses(in), want);
  std::vector<tcp::endpoint> v4first = {Ep("192.0.2.1"), Ep("2001:db8::1"), Ep("192.0.2.2")};
  std::vector<tcp::endpoint> want4 = {Ep("192.0.2.1"), Ep("2001:db8::1"), Ep("192.0.2.2")};
  EXPECT_EQ(InterleaveAddresses(v4first), want4);
  EXPECT_TRUE(InterleaveAddresses({}).empty());
}

TEST(HttpDialer, FallbackStepsThroughAddressesAndIgnoresStaleCompletions) {
  AddressFallback f;
  f.Reset({Ep("2001:db8::1"), Ep("2001:db8::2"), Ep("192.0.2.1")});
  ASSERT_FALSE(f.Exhausted());
  EXPECT_EQ(f.endpoint(), Ep("2001:db8::1"));
  EXPECT_TRUE(f.HasNext());
  EXPECT_TRUE(f.IsCurrent(0));
  // The fallback timer abandons attempt 0: its late completion is stale.
  f.Failed(asio::error::timed_out);
  EXPECT_FALSE(f.IsCurrent(0));
  EXPECT_EQ(f.endpoint(), Ep("192.0.2.1"));  // interleaved: IPv4 second
  f.Failed(asio::error::connection_refused);
  EXPECT_EQ(f.endpoint(), Ep("2001:db8::2"));
  EXPECT_FALSE(f.HasNext());
  EXPECT_EQ(f.last_error(), asio::error::connection_refused);
  f.Failed(asio::error::host_unreachable);
  EXPECT_TRUE(f.Exhausted());
  EXPECT_FALSE(f.IsCurrent(2));
  EXPECT_EQ(f.last_error(), asio::error::host_unreachable);
  f.Failed(asio::error::timed_out);  // nothing left: no change
  EXPECT_EQ(f.last_error(), asio::error::host_unreachable);

  AddressFallback settled;
  settled.Reset({Ep("192.0.2.1"), Ep("192.0.2.2")});
  settled.Settle();
  EXPECT_FALSE(settled.IsCurrent(0));  // a timer firing after the connect
  EXPECT_TRUE(settled.Exhausted());
}

TEST(HttpDialer, ConnectErrorReadsAsTheRestOfASentence) {
  EXPECT_EQ(ConnectErrorText(asio::error::connection_refused), "connection refused");
  EXPECT_EQ(ConnectErrorText(asio::error::timed_out), "connection timed out");
}

TEST(HttpDialer, ConnectRequestNamesTheOriginAndCarriesProxyCredentials) {
  HttpProxy proxy = ParseHttpProxy("http://u:p@proxy:3128", "https_proxy");
  auto req = BuildConnectRequest(Url("https://api.example.com/v1"), proxy);
  EXPECT_EQ(req.method(), boost::beast::http::verb::connect);
  EXPECT_EQ(req.target(), "api.example.com:443");
  EXPECT_EQ(req[boost::beast::http::field::host], "api.example.com:443");
  EXPECT_EQ(req[boost::beast::http::field::proxy_authorization], "Basic dTpw");
  HttpProxy anonymous = ParseHttpProxy("http://proxy:3128", "https_proxy");
  auto plain = BuildConnectRequest(Url("https://[2001:db8::1]:8443/"), anonymous);
  EXPECT_EQ(plain.target(), "[2001:db8::1]:8443");
  EXPECT_EQ(plain.count(boost::beast::http::field::proxy_authorization), 0u);
}

TEST(HttpDialer, ConnectAnswerMustBeTwoHundredWithNothingAfter) {
  HttpUrl origin = Url("https://api.example.com/");
  EXPECT_TRUE(CheckConnectAnswer("proxy p:1", origin, 200, 0).ok());
  Status refused = CheckConnectAnswer("proxy p:1", origin, 403, 0);
  EXPECT_EQ(refused.code(), Code::kUnavailable);
  EXPECT_EQ(refused.message(), "proxy p:1 refused the tunnel to api.example.com:443 (HTTP 403)");
  EXPECT_NE(CheckConnectAnswer("proxy p:1", origin, 407, 0)
                .message()
                .find("proxy authentication required"),
            std::string::npos);
  EXPECT_EQ(CheckConnectAnswer("proxy p:1", origin, 200, 5).message(),
            "proxy p:1 sent data after the CONNECT answer");
}

TEST(HttpDialer, TrustReportsABadCaDirectoryOrFile) {
  HttpTlsTrust::Options dir_options;
  dir_options.ca_dir = "/nonexistent/ca-dir";
  HttpTlsTrust dir_trust(dir_options);
  Status st = dir_trust.Ensure();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("/nonexistent/ca-dir"), std::string::npos);
  EXPECT_EQ(dir_trust.Ensure().code(), Code::kInvalidArgument);  // the same, every time

  HttpTlsTrust::Options file_options;
  file_options.ca_file = "/nonexistent/ca.pem";
  HttpTlsTrust file_trust(file_options);
  EXPECT_EQ(file_trust.Ensure().code(), Code::kInvalidArgument);
}

TEST(HttpDialer, FullTrustIsLoadedOnceAndOnlyWhenAsked) {
  HttpTlsTrust::Options options;
  // A directory without hash links: the whole store is loaded at once.
  options.system_ca_dir = "/nonexistent/system-dir";
  options.system_ca_file = "/nonexistent/bundle.pem";
  HttpTlsTrust eager(options);
  ASSERT_TRUE(eager.Ensure().ok());
  EXPECT_TRUE(eager.full_loaded());
}

TEST(HttpDialer, NameWithoutAddressesFailsWithoutIo) {
  asio::io_context ioc;
  HttpDialer::Options options;
  options.resolve_for_test = [](const std::string&) {
    return std::vector<std::pair<std::string, uint16_t>>{};
  };
  auto dialer = std::make_shared<HttpDialer>(ioc, nullptr, options);
  HttpUrl url = Url("http://nowhere.example/");
  HttpRoute route;
  route.pool_key = "http://nowhere.example:80";
  route.dial_name = url.Authority();
  std::optional<Status> result;
  bool got_conn = true;
  dialer->Dial(url, route, [&](Status st, std::shared_ptr<HttpConnection> c) {
    result = st;
    got_conn = c != nullptr;
  });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), Code::kUnavailable);
  EXPECT_EQ(result->message(), "could not resolve host nowhere.example");
  EXPECT_FALSE(got_conn);
  EXPECT_EQ(dialer->state(), HttpDialer::State::kFailed);
  dialer->Cancel();  // after the end: nothing more happens
  EXPECT_EQ(ioc.poll(), 0u);
}

TEST(HttpDialer, CancelledDialReportsOnceWhenItsPendingStepEnds) {
  asio::io_context ioc;
  HttpDialer::Options options;
  options.resolve_for_test = [](const std::string&) {
    return std::vector<std::pair<std::string, uint16_t>>{{"127.0.0.1", 9}, {"127.0.0.1", 10}};
  };
  auto dialer = std::make_shared<HttpDialer>(ioc, nullptr, options);
  HttpUrl url = Url("http://local.example:9/");
  HttpRoute route;
  route.dial_name = url.Authority();
  int calls = 0;
  Status result;
  dialer->Dial(url, route, [&](Status st, std::shared_ptr<HttpConnection>) {
    ++calls;
    result = st;
  });
  // The connect is pending until the io_context runs; cancelled before
  // that, its completion (whatever the port said) ends the dial cancelled.
  EXPECT_EQ(dialer->state(), HttpDialer::State::kConnecting);
  EXPECT_EQ(calls, 0);
  dialer->Cancel();
  ioc.run_for(std::chrono::seconds(10));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(result.code(), Code::kCancelled);
  EXPECT_EQ(dialer->state(), HttpDialer::State::kFailed);
}

}  // namespace
}  // namespace agentloop
