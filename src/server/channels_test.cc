// The email and Slack renderings of a notification (render.h), Slack's
// request signature and interaction payload (slack.h), and the channel keys
// of delivery ids (channels.h).
#include "server/channels.h"

#include <cctype>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/json.h"

#include "base/strings.h"
#include "server/http_server.h"
#include "server/render.h"
#include "server/slack.h"

namespace agentloop::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A hostile tool call: every field tries to break out of where it lands.
std::string HostileApproval() {
  Json b = {{"type", "approval.requested"},
            {"agent", "writer"},
            {"session_id", "ses_1"},
            {"tool", "write\r\nBcc: victim@example.com"},
            {"reason", "<script>alert(1)</script> & <!channel>"},
            {"arguments",
             {{"file_path", "a.txt"}, {"content", "</pre><img src=x onerror=alert(1)> <@U123>"}}},
            {"diff", {{"path", "a<b>.txt"}, {"diff", "+<b>bold</b>\n-```\n"}}},
            {"links",
             {{"approve", "http://127.0.0.1:1/v1/links/TOKA.mac"},
              {"deny", "http://127.0.0.1:1/v1/links/TOKD.mac"},
              {"expires_at", 1800000000}}}};
  return b.dump();
}

TEST(ChannelsTest, DeliveryIdsCarryTheChannelKey) {
  EXPECT_EQ(ChannelDeliveryId("dlv_apr_1", ""), "dlv_apr_1");
  EXPECT_EQ(ChannelDeliveryId("dlv_apr_1", "email0"), "dlv_apr_1.email0");
  EXPECT_EQ(ChannelKeyOf("dlv_apr_1.email0"), "email0");
  EXPECT_EQ(ChannelKeyOf("dlv_apr_1"), "");
}

TEST(ChannelsTest, EmailEscapesEverythingAModelWrote) {
  auto v = ViewOf("approval.requested", HostileApproval());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const std::string m = BuildEmail(*v, EmailEnvelope{"agents@example.com",
                                                     {"a@example.com", "b@example.com"},
                                                     1800000000,
                                                     "dlv_apr_1.email0@example.com"});
  // Headers: every line of the head is one header or a fold; no Bcc made it in.
  const std::string head = m.substr(0, m.find("\r\n\r\n"));
  EXPECT_THAT(head, Not(HasSubstr("\r\nBcc:")));
  EXPECT_THAT(head, HasSubstr("Subject: [agentloop] writer: approve write  Bcc: victim"));
  EXPECT_THAT(head, HasSubstr("Date: Fri, 15 Jan 2027 08:00:00 +0000"));
  EXPECT_THAT(head, HasSubstr("Message-ID: <dlv_apr_1.email0@example.com>"));
  EXPECT_THAT(head, HasSubstr("To: a@example.com, b@example.com"));
  EXPECT_THAT(head, HasSubstr("Content-Type: multipart/alternative; boundary="));
  // The parts, decoded.
  std::vector<std::string> parts;
  size_t at = 0;
  while ((at = m.find("Content-Transfer-Encoding: base64\r\n\r\n", at)) != std::string::npos) {
    at += 37;
    const size_t end = m.find("--", at);
    std::string b64 = m.substr(at, end - at);
    std::string joined;
    for (char c : b64) {
      if (c != '\r' && c != '\n') joined.push_back(c);
    }
    auto d = Base64Decode(joined);
    ASSERT_TRUE(d.ok());
    parts.push_back(*d);
  }
  ASSERT_EQ(parts.size(), 2u);
  const std::string& text = parts[0];
  const std::string& html = parts[1];
  EXPECT_THAT(text, HasSubstr("Approve: http://127.0.0.1:1/v1/links/TOKA.mac"));
  EXPECT_THAT(text, HasSubstr("Deny: http://127.0.0.1:1/v1/links/TOKD.mac"));
  EXPECT_THAT(text, HasSubstr("+<b>bold</b>"));
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, Not(HasSubstr("<b>bold")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;!channel&gt;"));
  EXPECT_THAT(html, HasSubstr("&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;"));
  EXPECT_THAT(html, HasSubstr("href=\"http://127.0.0.1:1/v1/links/TOKA.mac\""));
}

TEST(ChannelsTest, NonAsciiSubjectsAreEncodedWords) {
  const std::string v = HeaderValue(
      "[agentloop] écrivain: approuver l'écriture de résumé.txt "
      "et de bien d'autres fichiers encore?",
      9);
  EXPECT_EQ(v.rfind("=?UTF-8?B?", 0), 0u);
  size_t start = 0;
  std::string decoded;
  for (std::string_view part : Split(v, '\n')) {
    std::string w(part);
    if (!w.empty() && w.back() == '\r') w.pop_back();
    EXPECT_LE(w.size() + (start == 0 ? 9 : 0), 78u) << w;
    if (!w.empty() && w[0] == ' ') w = w.substr(1);
    ASSERT_EQ(w.rfind("=?UTF-8?B?", 0), 0u);
    auto d = Base64Decode(w.substr(10, w.size() - 12));
    ASSERT_TRUE(d.ok());
    decoded += *d;
    ++start;
  }
  EXPECT_GT(start, 1u);
  EXPECT_EQ(decoded,
            "[agentloop] écrivain: approuver l'écriture de résumé.txt et de bien d'autres "
            "fichiers encore?");
  EXPECT_EQ(HeaderValue("a\r\nb", 9), "a  b");
}

TEST(ChannelsTest, SlackMessageEscapesMrkdwnAndCarriesTokens) {
  auto v = ViewOf("approval.requested", HostileApproval());
  ASSERT_TRUE(v.ok());
  const Json msg = SlackMessage(*v, true);
  const std::string all = msg.dump();
  EXPECT_THAT(all, Not(HasSubstr("<!channel>")));
  EXPECT_THAT(all, Not(HasSubstr("<@U123>")));
  EXPECT_THAT(all, Not(HasSubstr("<script>")));
  EXPECT_THAT(all, HasSubstr("&lt;!channel&gt;"));
  bool buttons = false;
  for (const Json& b : msg["blocks"]) {
    if (b["type"] == "section") {
      EXPECT_LE(b["text"]["text"].get<std::string>().size(), 3000u);
    }
    if (b["type"] == "header") {
      EXPECT_LE(b["text"]["text"].get<std::string>().size(), 150u);
      EXPECT_THAT(b["text"]["text"].get<std::string>(), Not(HasSubstr("\n")));
    }
    if (b["type"] != "actions") continue;
    buttons = true;
    ASSERT_EQ(b["elements"].size(), 2u);
    EXPECT_EQ(b["elements"][0]["style"], "primary");
    EXPECT_EQ(b["elements"][0]["value"], "TOKA.mac");
    EXPECT_EQ(b["elements"][1]["style"], "danger");
    EXPECT_EQ(b["elements"][1]["value"], "TOKD.mac");
  }
  EXPECT_TRUE(buttons);
  // Without a signing secret: links only.
  EXPECT_THAT(SlackMessage(*v, false).dump(), Not(HasSubstr("\"actions\"")));
  // A long argument is cut after escaping, never inside an entity.
  Json b = Json::parse(HostileApproval());
  b["arguments"]["content"] = std::string(5000, '<');
  auto big = ViewOf("approval.requested", b.dump());
  ASSERT_TRUE(big.ok());
  const Json message = SlackMessage(*big, true);
  for (const Json& block : message["blocks"]) {
    if (block["type"] != "section") continue;
    const std::string t = block["text"]["text"].get<std::string>();
    EXPECT_LE(t.size(), 3000u);
    EXPECT_THAT(t, Not(HasSubstr("<")));
  }
}

TEST(ChannelsTest, AQuestionShowsItsOptionsAndTheAnswerLink) {
  const Json b = {
      {"type", "question.asked"},
      {"agent", "writer"},
      {"tool", "ask_user"},
      {"arguments", {{"question", "Which <b>branch</b>?"}, {"options", {"main", "<dev> & co"}}}},
      {"links", {{"answer", "http://127.0.0.1:1/v1/links/TOKQ.mac"}}}};
  auto v = ViewOf("question.asked", b.dump());
  ASSERT_TRUE(v.ok());
  const std::string m = BuildEmail(*v, EmailEnvelope{"a@example.com", {"b@example.com"}, 0, "x"});
  EXPECT_THAT(m, HasSubstr("Subject: [agentloop] writer asks: Which <b>branch</b>?"));
  const Json slack = SlackMessage(*v, true);
  const std::string all = slack.dump();
  EXPECT_THAT(all, HasSubstr("Which &lt;b&gt;branch&lt;/b&gt;?"));
  EXPECT_THAT(all, HasSubstr("• &lt;dev&gt; &amp; co"));
  EXPECT_THAT(all, HasSubstr("<http://127.0.0.1:1/v1/links/TOKQ.mac|Answer the question>"));
  // A question is answered on its page: no buttons.
  EXPECT_THAT(all, Not(HasSubstr("\"actions\"")));
}

TEST(ChannelsTest, SlackSignatureIsCheckedInFull) {
  const std::vector<std::string> secrets = {"other", "s3cret"};
  const std::string body = "payload=%7B%7D";
  const std::string sig = SlackSignature("s3cret", "1800000000", body);
  EXPECT_EQ(sig.rfind("v0=", 0), 0u);
  EXPECT_EQ(sig.size(), 3u + 64u);
  auto ok = VerifySlackSignature(secrets, "1800000000", sig, body, 1800000100);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, 1u);
  // Another body, timestamp, secret, or an old or future timestamp: refused.
  EXPECT_FALSE(VerifySlackSignature(secrets, "1800000000", sig, body + "x", 1800000100).ok());
  EXPECT_FALSE(VerifySlackSignature(secrets, "1800000001", sig, body, 1800000100).ok());
  EXPECT_FALSE(VerifySlackSignature({"nope"}, "1800000000", sig, body, 1800000100).ok());
  auto old = VerifySlackSignature(secrets, "1800000000", sig, body, 1800000301);
  ASSERT_FALSE(old.ok());
  EXPECT_THAT(old.status().message(), HasSubstr("300 s"));
  EXPECT_FALSE(VerifySlackSignature(secrets, "1800000000", sig, body, 1799999699).ok());
  EXPECT_FALSE(VerifySlackSignature(secrets, "", sig, body, 1800000000).ok());
  EXPECT_FALSE(VerifySlackSignature(secrets, "1800000000", "", body, 1800000000).ok());
  auto wrong = VerifySlackSignature(secrets, "1800000000", "v0=00", body, 1800000000);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr("s3cret")));
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr(sig)));
}

TEST(ChannelsTest, SlackResponseUrlsAndTheDecisionMessage) {
  const std::vector<std::string> bases = {"http://127.0.0.1:8080/api"};
  EXPECT_TRUE(SlackResponseUrlAllowed("https://hooks.slack.com/actions/T/1/x", bases));
  EXPECT_TRUE(SlackResponseUrlAllowed("http://127.0.0.1:8080/response/1", bases));
  EXPECT_FALSE(SlackResponseUrlAllowed("http://127.0.0.1:8081/response/1", bases));
  EXPECT_FALSE(SlackResponseUrlAllowed("http://127.0.0.1:8080.evil.com/x", bases));
  EXPECT_FALSE(SlackResponseUrlAllowed("http://hooks.slack.com/actions/T/1/x", {}));
  const std::string m =
      SlackDecisionMessage("Denied", "The turn continues.", "write", "writer", "<!here>").dump();
  EXPECT_THAT(m, HasSubstr("Denied by &lt;!here&gt;"));
  EXPECT_THAT(m, HasSubstr("No reason was given."));
  EXPECT_THAT(m, HasSubstr("\"replace_original\":true"));
  EXPECT_THAT(
      SlackDecisionMessage("Already decided", "It was approved (by slack:a).", "", "", "b").dump(),
      Not(HasSubstr(" by b")));
}

TEST(ChannelsTest, SlackInteractionPayloadIsParsed) {
  const Json p = {{"type", "block_actions"},
                  {"user", {{"id", "U1"}, {"username", "alice"}}},
                  {"response_url", "https://hooks.slack.com/actions/T/1/x"},
                  {"actions", {{{"action_id", "deny"}, {"value", "TOK.mac"}, {"type", "button"}}}}};
  const std::string body = "payload=" + UrlEncode(p.dump());
  auto c = ParseSlackInteraction(body);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->action_id, "deny");
  EXPECT_EQ(c->value, "TOK.mac");
  EXPECT_EQ(c->user, "alice");
  EXPECT_EQ(c->response_url, "https://hooks.slack.com/actions/T/1/x");
  EXPECT_FALSE(
      ParseSlackInteraction("payload=" + UrlEncode("{\"type\":\"view_submission\"}")).ok());
  EXPECT_FALSE(ParseSlackInteraction("nothing=1").ok());
}

}  // namespace
}  // namespace agentloop::server
