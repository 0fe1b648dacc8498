#include "providers/http_url.h"

#include <gtest/gtest.h>

#include "providers/testing/url.h"

namespace agentloop {
namespace {

TEST(HttpUrl, ParsesSchemeHostPortAndTarget) {
  Result<HttpUrl> u = ParseHttpUrl("https://API.example.com:8443/v1/x?y=1#frag");
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_TRUE(u->https);
  EXPECT_EQ(u->host, "API.example.com");
  EXPECT_EQ(u->port, "8443");
  EXPECT_EQ(u->target, "/v1/x?y=1");
  EXPECT_EQ(u->Authority(), "API.example.com:8443");
  EXPECT_EQ(u->HostHeader(), "API.example.com:8443");
}

TEST(HttpUrl, DefaultsPortAndTarget) {
  Result<HttpUrl> u = ParseHttpUrl("http://example.com?q");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->target, "/?q");
  EXPECT_EQ(u->HostHeader(), "example.com");
  Result<HttpUrl> s = ParseHttpUrl("HTTPS://example.com");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->port, "443");
  EXPECT_EQ(s->target, "/");
}

TEST(HttpUrl, Ipv6HostKeepsBracketsOnlyOnTheWire) {
  Result<HttpUrl> u = ParseHttpUrl("http://[::1]:8080/p");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->ipv6);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->Authority(), "[::1]:8080");
  EXPECT_EQ(u->HostHeader(), "[::1]:8080");
  EXPECT_FALSE(ParseHttpUrl("http://[::1").ok());
  EXPECT_FALSE(ParseHttpUrl("http://[::1]x/").ok());
}

TEST(HttpUrl, RejectsBadUrlsWithoutRepeatingThem) {
  for (const char* bad :
       {"example.com/secret", "ftp://example.com/secret", "http:///secret", "http://h:0/secret",
        "http://h:65536/secret", "http://h:8x/secret", "http://h/se cret", "http://h\\x/secret"}) {
    Result<HttpUrl> u = ParseHttpUrl(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.error().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(u.error().message().find("secret"), std::string::npos) << bad;
  }
}

TEST(HttpUrl, ProxyUrlsAreHttpWithAnOptionalScheme) {
  Result<HttpUrl> p = ParseHttpUrl("proxy.local:3128", true);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Authority(), "proxy.local:3128");
  Result<HttpUrl> s = ParseHttpUrl("https://proxy.local", true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("unsupported proxy scheme 'https'"), std::string::npos);
}

TEST(HttpUrl, PercentDecodeLeavesMalformedEscapes) {
  EXPECT_EQ(PercentDecode("a%41b"), "aAb");
  EXPECT_EQ(PercentDecode("p%40ss%3a"), "p@ss:");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%4"), "%4");
  EXPECT_EQ(PercentDecode("%zz"), "%zz");
}

TEST(HttpProxy, CredentialsBecomeBasicAuthAndLeaveTheUrl) {
  HttpProxy p = ParseHttpProxy(" http://us%65r:p%40ss@proxy:3128 ", "https_proxy");
  ASSERT_TRUE(p.configured);
  ASSERT_TRUE(p.error.ok());
  EXPECT_EQ(p.authorization, "Basic dXNlcjpwQHNz");  // user:p@ss
  EXPECT_TRUE(p.url.userinfo.empty());
  EXPECT_EQ(p.url.Authority(), "proxy:3128");
}

TEST(HttpProxy, BlankIsNotConfiguredAndBadIsAnErrorNamingTheVariable) {
  EXPECT_FALSE(ParseHttpProxy("  ", "http_proxy").configured);
  HttpProxy bad = ParseHttpProxy("socks5://user:secret@p:1080", "https_proxy");
  EXPECT_TRUE(bad.configured);
  ASSERT_FALSE(bad.error.ok());
  std::string m = bad.error.message();
  EXPECT_NE(m.find("bad proxy setting (https_proxy)"), std::string::npos) << m;
  EXPECT_EQ(m.find("secret"), std::string::npos) << m;
}

using ::agentloop::testing::Url;

TEST(HttpProxyConfig, DirectRouteKeysByOrigin) {
  HttpProxyConfig config(std::nullopt, std::nullopt, std::nullopt, EnvMap{});
  Result<HttpRoute> r = config.Route(Url("https://api.example.com/v1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->proxy, nullptr);
  EXPECT_FALSE(r->tunnel);
  EXPECT_FALSE(r->absolute_form);
  EXPECT_EQ(r->pool_key, "https://api.example.com:443");
  EXPECT_EQ(r->dial_name, "api.example.com:443");
}

TEST(HttpProxyConfig, EnvironmentLowerCaseFirstAndOptionsOverride) {
  EnvMap env{{"https_proxy", "http://lower:1"},
             {"HTTPS_PROXY", "http://upper:2"},
             {"HTTP_PROXY", "http://plain:3"}};
  HttpProxyConfig from_env(std::nullopt, std::nullopt, std::nullopt, env);
  EXPECT_EQ(from_env.https_proxy().url.Authority(), "lower:1");
  EXPECT_EQ(from_env.http_proxy().url.Authority(), "plain:3");

  HttpProxyConfig blank_lower(std::nullopt, std::nullopt, std::nullopt,
                              EnvMap{{"https_proxy", ""}, {"HTTPS_PROXY", "http://upper:2"}});
  EXPECT_EQ(blank_lower.https_proxy().url.Authority(), "upper:2");

  // An option set to "" means no proxy, whatever the environment says.
  HttpProxyConfig off(std::string(), std::string("http://opt:4"), std::nullopt, env);
  EXPECT_FALSE(off.http_proxy().configured);
  EXPECT_EQ(off.https_proxy().url.Authority(), "opt:4");
}

TEST(HttpProxyConfig, TunnelForHttpsAbsoluteFormForHttp) {
  HttpProxyConfig config(std::string("http://hp:3128"), std::string("http://sp:3129"),
                         std::string(), EnvMap{});
  Result<HttpRoute> s = config.Route(Url("https://api.example.com/v1"));
  ASSERT_TRUE(s.ok());
  ASSERT_NE(s->proxy, nullptr);
  EXPECT_TRUE(s->tunnel);
  EXPECT_FALSE(s->absolute_form);
  EXPECT_EQ(s->pool_key, "https://api.example.com:443 via sp:3129");
  EXPECT_EQ(s->dial_name, "proxy sp:3129");

  Result<HttpRoute> a = config.Route(Url("http://one.example/x"));
  Result<HttpRoute> b = config.Route(Url("http://two.example:81/y"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(a->absolute_form);
  EXPECT_FALSE(a->tunnel);
  // Any origin shares the proxy's connections.
  EXPECT_EQ(a->pool_key, "http-proxy hp:3128");
  EXPECT_EQ(b->pool_key, a->pool_key);
}

TEST(HttpProxyConfig, NoProxyAndLoopbackGoDirect) {
  HttpProxyConfig config(std::nullopt, std::nullopt, std::nullopt,
                         EnvMap{{"https_proxy", "http://sp:1"}, {"NO_PROXY", ".internal"}});
  EXPECT_EQ(config.no_proxy(), ".internal");
  Result<HttpRoute> internal = config.Route(Url("https://svc.internal/"));
  ASSERT_TRUE(internal.ok());
  EXPECT_EQ(internal->proxy, nullptr);
  Result<HttpRoute> loop = config.Route(Url("https://127.0.0.1:9/"));
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ(loop->proxy, nullptr);
  Result<HttpRoute> out = config.Route(Url("https://api.example.com/"));
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->proxy, nullptr);

  // Lower case wins even when empty: no exceptions.
  HttpProxyConfig lower(std::nullopt, std::nullopt, std::nullopt,
                        EnvMap{{"no_proxy", ""}, {"NO_PROXY", "*"}});
  EXPECT_EQ(lower.no_proxy(), "");
}

TEST(HttpProxyConfig, BadProxyFailsOnlyTheRequestsThatUseIt) {
  HttpProxyConfig config(std::nullopt, std::nullopt, std::string("bypass.example"),
                         EnvMap{{"https_proxy", "ftp://p:1"}});
  Result<HttpRoute> used = config.Route(Url("https://api.example.com/"));
  ASSERT_FALSE(used.ok());
  EXPECT_EQ(used.error().code(), Code::kInvalidArgument);
  EXPECT_TRUE(config.Route(Url("https://bypass.example/")).ok());
  EXPECT_TRUE(config.Route(Url("http://api.example.com/")).ok());
}

}  // namespace
}  // namespace agentloop
