#include "server/links.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::optional<std::string> KeyOf(const std::string& agent) {
  if (agent != "coder") return std::nullopt;
  return *LinkKey("webhook-secret");
}

TEST(LinksTest, AMintedTokenChecksUntilItExpires) {
  Result<std::string> key = LinkKey("webhook-secret");
  ASSERT_TRUE(key.ok());
  Result<std::string> token = MintLinkToken(*key, {"coder", "apr_1", "approve", 1000});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(
      token->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."),
      std::string::npos)
      << "a token must be usable in a URL path as is: " << *token;
  LinkCheck ok = CheckLinkToken(*token, 999, KeyOf);
  ASSERT_TRUE(ok.claim.has_value());
  EXPECT_EQ(ok.claim->agent, "coder");
  EXPECT_EQ(ok.claim->pending_id, "apr_1");
  EXPECT_EQ(ok.claim->action, "approve");
  LinkCheck late = CheckLinkToken(*token, 1000, KeyOf);
  EXPECT_FALSE(late.claim.has_value());
  EXPECT_EQ(late.refusal, LinkRefusal::kExpired);
}

TEST(LinksTest, AChangedClaimOrMacOrKeyIsRefused) {
  std::string token = *MintLinkToken(*LinkKey("webhook-secret"), {"coder", "apr_1", "deny", 5000});
  const size_t dot = token.find('.');
  // The claim rewritten to approve instead of deny, with the old mac.
  std::string forged_claim =
      *MintLinkToken(*LinkKey("webhook-secret"), {"coder", "apr_1", "approve", 5000});
  forged_claim = forged_claim.substr(0, forged_claim.find('.')) + token.substr(dot);
  EXPECT_EQ(CheckLinkToken(forged_claim, 1, KeyOf).refusal, LinkRefusal::kForged);
  std::string bad_mac = token;
  bad_mac.back() = bad_mac.back() == '0' ? '1' : '0';
  EXPECT_EQ(CheckLinkToken(bad_mac, 1, KeyOf).refusal, LinkRefusal::kForged);
  // Signed with another secret.
  std::string other = *MintLinkToken(*LinkKey("another"), {"coder", "apr_1", "deny", 5000});
  EXPECT_EQ(CheckLinkToken(other, 1, KeyOf).refusal, LinkRefusal::kForged);
  // An agent without a key.
  std::string nobody =
      *MintLinkToken(*LinkKey("webhook-secret"), {"nobody", "apr_1", "deny", 5000});
  EXPECT_EQ(CheckLinkToken(nobody, 1, KeyOf).refusal, LinkRefusal::kForged);
  for (const std::string& junk : std::vector<std::string>{"", ".", "abc", "!!!.00", "e30.00",
                                                          std::string(5000, 'a') + ".00"}) {
    LinkCheck c = CheckLinkToken(junk, 1, KeyOf);
    EXPECT_FALSE(c.claim.has_value()) << junk;
    EXPECT_EQ(c.refusal, LinkRefusal::kMalformed) << junk;
  }
  EXPECT_FALSE(LinkKey("").ok());
}

TEST(LinksTest, ThePageEscapesEverythingAndCarriesNoScript) {
  LinkView v;
  v.heading = "Approve <this>?";
  v.message = "m";
  v.tool = "write";
  v.arguments = R"({"file_path": "<img src=x onerror=alert(1)>"})";
  v.reason = "<script>alert(2)</script>";
  v.action = "answer";
  v.options = {"\"><script>alert(3)</script>"};
  Response r = LinkPage(v);
  EXPECT_THAT(r.body, Not(HasSubstr("<img")));
  EXPECT_THAT(r.body, Not(HasSubstr("<script")));
  EXPECT_THAT(r.body, HasSubstr("&lt;img src=x onerror=alert(1)&gt;"));
  EXPECT_THAT(r.body, HasSubstr("value=\"&quot;&gt;&lt;script&gt;"));
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  bool csp = false, referrer = false;
  for (const auto& [k, val] : r.headers) {
    csp = csp || (k == "Content-Security-Policy" && val.find("default-src 'none'") == 0);
    referrer = referrer || (k == "Referrer-Policy" && val == "no-referrer");
  }
  EXPECT_TRUE(csp);
  EXPECT_TRUE(referrer);
}

}  // namespace
}  // namespace agentloop::server
