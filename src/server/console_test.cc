// The console's server side without a server: its assets and the sign-in
// cookie (signed, expiring, bound to a configured token).
#include "server/console.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/trust.h"

namespace agentloop::server::console {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Request Get(const std::string& path) {
  Request r;
  r.method = boost::beast::http::verb::get;
  r.path = path;
  r.target = path;
  return r;
}

TokenGrant Grant(const std::string& token, const std::string& tenant) {
  TokenGrant g;
  g.sha256 = Sha256Hex(token);
  g.tenant = tenant;
  g.scopes = kScopeRead | kScopeApprove;
  return g;
}

Request WithCookie(const std::string& set_cookie) {
  Request r = Get("/v1/sessions");
  // "name=value; Path=/; ..." -> "other=1; name=value"
  r.headers.set("Cookie", "other=1; " + set_cookie.substr(0, set_cookie.find(';')));
  return r;
}

TEST(ConsoleAssets, ThePageAndItsModulesWithTheirTypesAndTheCsp) {
  auto page = Asset(Get("/"));
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->status, 200u);
  EXPECT_THAT(page->content_type, StartsWith("text/html"));
  EXPECT_THAT(page->body, HasSubstr("/console/app.mjs"));
  bool csp = false;
  for (const auto& [k, v] : page->headers) csp = csp || (k == "Content-Security-Policy");
  EXPECT_TRUE(csp);
  auto js = Asset(Get("/console/app.mjs"));
  ASSERT_TRUE(js.has_value());
  EXPECT_THAT(js->content_type, StartsWith("text/javascript"));
  EXPECT_EQ(Asset(Get("/console/missing.js"))->status, 404u);
  EXPECT_FALSE(Asset(Get("/v1/sessions")).has_value());
  Request post = Get("/");
  post.method = boost::beast::http::verb::post;
  EXPECT_FALSE(Asset(post).has_value());
  std::vector<std::string> paths = AssetPaths();
  EXPECT_THAT(paths, ::testing::IsSupersetOf(
                         {"/", "/console/app.mjs", "/console/sse.mjs", "/console/console.css"}));
}

constexpr std::string_view kKey = "0123456789abcdef0123456789abcdef";

TEST(ConsoleCookie, SignedForItsTokenUntilItExpires) {
  std::vector<TokenGrant> tokens = {Grant("alpha", "a"), Grant("beta", "b")};
  const int64_t now = 1'700'000'000'000;
  Result<std::string> c = SignInCookie(tokens[1], kKey, now, false);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_THAT(*c, StartsWith(std::string(kCookieName) + "=v2."));
  EXPECT_THAT(*c, HasSubstr("HttpOnly"));
  EXPECT_THAT(*c, HasSubstr("SameSite=Strict"));
  EXPECT_THAT(*c, ::testing::Not(HasSubstr("Secure")));
  EXPECT_THAT(*c, ::testing::Not(HasSubstr(tokens[1].sha256)));
  EXPECT_THAT(*SignInCookie(tokens[1], kKey, now, true), HasSubstr("; Secure"));

  const TokenGrant* g = CookieGrant(WithCookie(*c), tokens, kKey, now + 1000);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->tenant, "b");
  // Expired.
  EXPECT_EQ(CookieGrant(WithCookie(*c), tokens, kKey, now + 13LL * 3600 * 1000), nullptr);
  // The token is no longer configured.
  EXPECT_EQ(CookieGrant(WithCookie(*c), {tokens[0]}, kKey, now), nullptr);
  // A changed expiry breaks the signature.
  std::string longer = *c;
  size_t dot = longer.find('.', longer.find("v2.") + 3);
  longer.replace(dot + 1, 1, "9");
  EXPECT_EQ(CookieGrant(WithCookie(longer), tokens, kKey, now), nullptr);
  // Malformed values.
  for (std::string bad : {std::string(kCookieName) + "=", std::string(kCookieName) + "=v2.x",
                          std::string(kCookieName) + "=v2.a.b.c.d.e"}) {
    EXPECT_EQ(CookieGrant(WithCookie(bad), tokens, kKey, now), nullptr) << bad;
  }
  EXPECT_THAT(SignOutCookie(), HasSubstr("Max-Age=0"));
}

// Each sign-in has an id of its own (what signing out revokes), the same
// every time its cookie is checked.
TEST(ConsoleCookie, EachSignInHasItsOwnId) {
  std::vector<TokenGrant> tokens = {Grant("alpha", "a")};
  const int64_t now = 1'700'000'000'000;
  Result<std::string> first = SignInCookie(tokens[0], kKey, now, false);
  Result<std::string> second = SignInCookie(tokens[0], kKey, now, false);
  ASSERT_TRUE(first.ok() && second.ok());
  std::optional<CookieSignIn> a = VerifyCookie(WithCookie(*first), tokens, kKey, now);
  std::optional<CookieSignIn> again = VerifyCookie(WithCookie(*first), tokens, kKey, now + 5);
  std::optional<CookieSignIn> b = VerifyCookie(WithCookie(*second), tokens, kKey, now);
  ASSERT_TRUE(a && again && b);
  EXPECT_EQ(a->grant, &tokens[0]);
  EXPECT_FALSE(a->id.empty());
  EXPECT_EQ(a->id, again->id);
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(a->expires_at_ms, now + 12LL * 3600 * 1000);
  EXPECT_THAT(*first, ::testing::Not(HasSubstr(tokens[0].sha256)));
}

TEST(ConsoleCookie, BearerGrantFindsTheTokensGrant) {
  std::vector<TokenGrant> tokens = {Grant("alpha", "a")};
  Request r = Get("/v1/console/session");
  EXPECT_EQ(BearerGrant(r, tokens), nullptr);
  r.headers.set("Authorization", "Bearer alpha");
  ASSERT_NE(BearerGrant(r, tokens), nullptr);
  r.headers.set("Authorization", "Bearer alphax");
  EXPECT_EQ(BearerGrant(r, tokens), nullptr);
}

// What the configuration shows of a token (its SHA-256) cannot make a
// cookie: one signed under the hash, or under another key, is refused.
TEST(ConsoleCookie, ACookieSignedWithoutTheServersKeyIsRefused) {
  std::vector<TokenGrant> tokens = {Grant("alpha", "admin")};
  const int64_t now = 1'700'000'000'000;
  Result<std::string> from_hash = SignInCookie(tokens[0], tokens[0].sha256, now, false);
  Result<std::string> other_key = SignInCookie(tokens[0], std::string(64, 'f'), now, false);
  ASSERT_TRUE(from_hash.ok() && other_key.ok());
  EXPECT_EQ(CookieGrant(WithCookie(*from_hash), tokens, kKey, now), nullptr);
  EXPECT_EQ(CookieGrant(WithCookie(*other_key), tokens, kKey, now), nullptr);
  Result<std::string> real = SignInCookie(tokens[0], kKey, now, false);
  ASSERT_TRUE(real.ok());
  EXPECT_NE(CookieGrant(WithCookie(*real), tokens, kKey, now), nullptr);
  EXPECT_FALSE(SignInCookie(tokens[0], "", now, false).ok());
  EXPECT_EQ(CookieGrant(WithCookie(*real), tokens, "", now), nullptr);
}

}  // namespace
}  // namespace agentloop::server::console
