#include "server/slack.h"

#include <charconv>
#include <cstdlib>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "agentloop/json.h"

#include "base/strings.h"
#include "server/http_server.h"
#include "server/render.h"

namespace agentloop::server {

std::string SlackSignature(std::string_view secret, std::string_view timestamp,
                           std::string_view body) {
  const std::string base = "v0:" + std::string(timestamp) + ":" + std::string(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(base.data()), base.size(), mac, &len);
  return "v0=" + HexEncode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

Result<size_t> VerifySlackSignature(const std::vector<std::string>& secrets,
                                    std::string_view timestamp, std::string_view signature,
                                    std::string_view body, int64_t now_s) {
  if (timestamp.empty() || signature.empty()) {
    return PermissionDenied(
        "not signed by Slack (X-Slack-Request-Timestamp and X-Slack-Signature)");
  }
  int64_t ts = 0;
  auto [end, ec] = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ts);
  if (ec != std::errc() || end != timestamp.data() + timestamp.size()) {
    return PermissionDenied("X-Slack-Request-Timestamp is not a number");
  }
  if (std::llabs(now_s - ts) > 300) {
    return PermissionDenied("X-Slack-Request-Timestamp is more than 300 s from now (a replay?)");
  }
  for (size_t i = 0; i < secrets.size(); ++i) {
    if (secrets[i].empty()) continue;
    const std::string want = SlackSignature(secrets[i], timestamp, body);
    if (want.size() == signature.size() &&
        CRYPTO_memcmp(want.data(), signature.data(), want.size()) == 0) {
      return i;
    }
  }
  return PermissionDenied("the X-Slack-Signature does not match");
}

Result<SlackClick> ParseSlackInteraction(std::string_view body) {
  Result<std::multimap<std::string, std::string>> form = ParseUrlEncoded(body);
  if (!form.ok()) return InvalidArgument("not a form: " + form.error().message());
  auto it = form->find("payload");
  if (it == form->end()) return InvalidArgument("no payload field");
  Json p = Json::parse(it->second, nullptr, false);
  if (!p.is_object()) return InvalidArgument("the payload is not a JSON object");
  if (p.value("type", std::string()) != "block_actions") {
    return InvalidArgument("not a block_actions interaction");
  }
  SlackClick c;
  auto s = [](const Json& j, const char* k) {
    auto f = j.find(k);
    return f != j.end() && f->is_string() ? f->get<std::string>() : std::string();
  };
  c.response_url = s(p, "response_url");
  if (auto u = p.find("user"); u != p.end() && u->is_object()) {
    c.user = s(*u, "username");
    if (c.user.empty()) c.user = s(*u, "name");
    if (c.user.empty()) c.user = s(*u, "id");
  }
  auto a = p.find("actions");
  if (a == p.end() || !a->is_array() || a->empty() || !(*a)[0].is_object()) {
    return InvalidArgument("no action in the payload");
  }
  c.action_id = s((*a)[0], "action_id");
  c.value = s((*a)[0], "value");
  return c;
}

bool SlackResponseUrlAllowed(std::string_view url, const std::vector<std::string>& api_base_urls) {
  if (StartsWith(url, "https://")) return true;
  for (const std::string& base : api_base_urls) {
    const size_t scheme = base.find("://");
    if (scheme == std::string::npos) continue;
    const size_t path = base.find('/', scheme + 3);
    if (StartsWith(url, base.substr(0, path) + "/")) return true;
  }
  return false;
}

Json SlackDecisionMessage(std::string_view heading, std::string_view message, std::string_view tool,
                          std::string_view agent, std::string_view user) {
  std::string h(heading);
  const bool decided = heading == "Approved" || heading == "Denied";
  if (decided) h += " by " + std::string(user);
  std::string detail = tool.empty() ? std::string(message)
                                    : std::string(tool) + " (agent " + std::string(agent) +
                                          "): " + std::string(message);
  if (heading == "Denied") detail += " No reason was given.";
  return SlackReplacement(h, detail);
}

}  // namespace agentloop::server
