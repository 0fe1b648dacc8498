// The console's server side without a server: its assets, the sign-in
// cookie (signed, expiring, bound to a configured token) and the diff of a
// pending write or edit (confined to the workspace).
#include "server/console.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/files.h"
#include "config/trust.h"

namespace agentloop::server::console {
namespace {

namespace fs = std::filesystem;
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

PendingItem Call(const std::string& tool, Json args) {
  PendingItem p;
  p.id = "apr_1";
  p.tool = tool;
  p.arguments = std::move(args);
  return p;
}

TEST(ConsoleDiff, WriteAndEditAgainstTheFileAsItIs) {
  testing::TempDir ws("al_console");
  testing::WriteFile(ws.path() / "a.txt", "one\ntwo\nthree\n");
  Result<Json> w = PendingDiff(
      Call("write", {{"file_path", "a.txt"}, {"content", "one\n2\nthree\n"}}), ws.path());
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ((*w)["path"], "a.txt");
  EXPECT_EQ((*w)["created"], false);
  EXPECT_EQ((*w)["diff"], "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n");
  Result<Json> created =
      PendingDiff(Call("write", {{"file_path", "new/b.txt"}, {"content", "x\n"}}), ws.path());
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)["created"], true);
  EXPECT_THAT((*created)["diff"].get<std::string>(),
              StartsWith("--- /dev/null\n+++ b/new/b.txt\n"));

  Result<Json> e = PendingDiff(
      Call("edit", {{"file_path", "a.txt"}, {"old_string", "three"}, {"new_string", "3"}}),
      ws.path());
  ASSERT_TRUE(e.ok());
  EXPECT_THAT((*e)["diff"].get<std::string>(), HasSubstr("-three\n+3\n"));
  testing::WriteFile(ws.path() / "twice.txt", "x\nx\n");
  Result<Json> twice = PendingDiff(
      Call("edit", {{"file_path", "twice.txt"}, {"old_string", "x"}, {"new_string", "y"}}),
      ws.path());
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ((*twice)["diff"], "");
  EXPECT_THAT((*twice)["note"].get<std::string>(), HasSubstr("more than once"));
  Result<Json> all = PendingDiff(Call("edit", {{"file_path", "twice.txt"},
                                               {"old_string", "x"},
                                               {"new_string", "y"},
                                               {"replace_all", true}}),
                                 ws.path());
  ASSERT_TRUE(all.ok());
  EXPECT_THAT((*all)["diff"].get<std::string>(), HasSubstr("+y\n+y\n"));
}

TEST(ConsoleDiff, NothingOutsideTheWorkspaceIsRead) {
  testing::TempDir root("al_console");
  fs::create_directories(root.path() / "ws");
  testing::WriteFile(root.path() / "secret.txt", "top secret\n");
  fs::create_symlink(root.path() / "secret.txt", root.path() / "ws" / "link.txt");
  for (std::string path : {std::string("../secret.txt"), (root.path() / "secret.txt").string(),
                           std::string("link.txt")}) {
    Result<Json> d =
        PendingDiff(Call("write", {{"file_path", path}, {"content", "x"}}), root.path() / "ws");
    ASSERT_FALSE(d.ok()) << path << ": " << d->dump();
    EXPECT_EQ(d.error().code(), Code::kPermissionDenied) << path;
  }
}

TEST(ConsoleDiff, OnlyForWriteAndEdit) {
  testing::TempDir ws("al_console");
  Result<Json> d = PendingDiff(Call("bash", {{"command", "ls"}}), ws.path());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(d.error().message(), HasSubstr("'bash'"));
  EXPECT_FALSE(PendingDiff(Call("write", {{"content", "x"}}), ws.path()).ok());
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
