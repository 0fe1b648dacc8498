#include "server/links.h"

#include "agentloop/json.h"

#include "base/strings.h"
#include "permissions/webhook.h"

namespace agentloop::server {

namespace {
constexpr std::string_view kKeyLabel = "agentloop approval links v1";
constexpr std::string_view kMacPrefix = "sha256=";
constexpr size_t kMaxTokenBytes = 2048;
}  // namespace

Result<std::string> LinkKey(std::string_view webhook_secret) {
  if (webhook_secret.empty()) return InvalidArgument("an agent's link key needs a webhook secret");
  return permissions::SignPayload(webhook_secret, kKeyLabel);
}

Result<std::string> MintLinkToken(std::string_view key, const LinkClaim& claim) {
  Json j = {
      {"a", claim.agent}, {"p", claim.pending_id}, {"d", claim.action}, {"e", claim.expires_at}};
  std::string payload = Base64Encode(DumpJson(j), /*url=*/true);
  AL_ASSIGN_OR_RETURN(std::string mac, permissions::SignPayload(key, payload));
  return payload + "." + mac.substr(kMacPrefix.size());
}

LinkCheck CheckLinkToken(
    std::string_view token, int64_t now,
    const std::function<std::optional<std::string>(const std::string&)>& key_for) {
  LinkCheck out;
  if (token.size() > kMaxTokenBytes) return out;
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos) return out;
  std::string_view payload = token.substr(0, dot);
  std::string_view mac = token.substr(dot + 1);
  Result<std::string> text = Base64Decode(payload, /*url=*/true);
  if (!text.ok()) return out;
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("a") || !j["a"].is_string() || !j.contains("p") ||
      !j["p"].is_string() || !j.contains("d") || !j["d"].is_string() || !j.contains("e") ||
      !j["e"].is_number_integer()) {
    return out;
  }
  LinkClaim claim;
  claim.agent = j["a"].get<std::string>();
  claim.pending_id = j["p"].get<std::string>();
  claim.action = j["d"].get<std::string>();
  claim.expires_at = j["e"].get<int64_t>();
  if (claim.action != "approve" && claim.action != "deny" && claim.action != "answer") return out;
  out.refusal = LinkRefusal::kForged;
  std::optional<std::string> key = key_for(claim.agent);
  if (!key ||
      !permissions::VerifySignature(*key, payload, std::string(kMacPrefix) + std::string(mac))) {
    return out;
  }
  if (now >= claim.expires_at) {
    out.refusal = LinkRefusal::kExpired;
    return out;
  }
  out.claim = std::move(claim);
  return out;
}

Response LinkPage(const LinkView& v) {
  std::string h;
  h.reserve(2048 + v.arguments.size());
  h += "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
       "<title>agentloop: ";
  h += HtmlEscape(v.heading);
  h += "</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:2rem auto;"
       "padding:0 1rem}pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;"
       "padding:.75rem;border-radius:4px}button{font-size:1rem;padding:.5rem 1.25rem;"
       "margin:.25rem .5rem .25rem 0}textarea,input[type=text]{width:100%;font:inherit}"
       "dt{font-weight:600}@media (prefers-color-scheme:dark){body{background:#111;color:#eee}"
       "pre{background:#222}}</style></head><body><h1>";
  h += HtmlEscape(v.heading);
  h += "</h1><p>";
  h += HtmlEscape(v.message);
  h += "</p>";
  if (!v.tool.empty() || !v.session_id.empty()) {
    h += "<dl>";
    auto row = [&h](std::string_view term, const std::string& value) {
      if (value.empty()) return;
      h.append("<dt>").append(term).append("</dt><dd>").append(HtmlEscape(value)).append("</dd>");
    };
    row("Agent", v.agent);
    row("Session", v.session_id);
    row("Tool", v.tool);
    row("Why it asks", v.reason);
    h += "</dl>";
    if (!v.arguments.empty()) {
      h += "<pre>";
      h += HtmlEscape(v.arguments);
      h += "</pre>";
    }
  }
  if (!v.action.empty()) {
    h += "<form method=\"post\">";
    if (v.action == "approve") {
      h += "<button type=\"submit\" autofocus>Approve</button>";
    } else if (v.action == "deny") {
      h += "<label for=\"reason\">Reason (the model sees it)</label>"
           "<textarea id=\"reason\" name=\"reason\" rows=\"3\" maxlength=\"4000\"></textarea>"
           "<button type=\"submit\">Deny</button>";
    } else {
      for (const std::string& o : v.options) {
        h += "<button type=\"submit\" name=\"answer\" value=\"";
        h += HtmlEscape(o);
        h += "\">";
        h += HtmlEscape(o);
        h += "</button>";
      }
      h += "<label for=\"answer\">Answer</label>"
           "<input type=\"text\" id=\"answer\" name=\"answer\" maxlength=\"4000\">"
           "<button type=\"submit\">Send</button>";
    }
    h += "</form>";
  }
  h += "</body></html>\n";
  Response r;
  r.status = v.status;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::move(h);
  r.headers = {{"Cache-Control", "no-store"},
               {"Referrer-Policy", "no-referrer"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                "frame-ancestors 'none'; base-uri 'none'"}};
  return r;
}

}  // namespace agentloop::server
