// [[notify]] entries (config.h NotifyConfig): each key checked when read,
// so a mistyped channel or key fails the load instead of silently sending
// nothing.
#include <algorithm>

#include "base/strings.h"
#include "config/config.h"

namespace agentloop {
namespace {

bool IsEnvVarName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// local@domain, nothing a header or an SMTP command could be cut at.
bool IsMailAddress(std::string_view a) {
  const size_t at = a.find('@');
  if (at == 0 || at == std::string_view::npos || at + 1 >= a.size() || a.size() > 254) return false;
  if (a.find('@', at + 1) != std::string_view::npos) return false;
  return std::none_of(a.begin(), a.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f || c == '<' || c == '>' || c == ',' || c == ';' || c == '"' ||
           c == '(' || c == ')' || c == '\\' || c == '[' || c == ']' || c == ':';
  });
}

bool IsLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || StartsWith(host, "127.");
}

struct SmtpUrl {
  std::string scheme, host;
};

// smtp://host[:port][/] or smtps://host[:port][/]; no user or password in it
// (they come from smtp_user and the variable smtp_password_env names).
Result<SmtpUrl> ParseSmtpUrl(std::string_view url) {
  SmtpUrl out;
  std::string_view rest;
  if (StartsWith(url, "smtp://")) {
    out.scheme = "smtp";
    rest = url.substr(7);
  } else if (StartsWith(url, "smtps://")) {
    out.scheme = "smtps";
    rest = url.substr(8);
  } else {
    return InvalidArgument(
        "must start with smtp:// (STARTTLS, e.g. smtp://mail.example.com:587) "
        "or smtps:// (TLS from the start, e.g. smtps://mail.example.com:465)");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('@') != std::string_view::npos) {
    return InvalidArgument(
        "must not carry a user or password: use smtp_user and smtp_password_env");
  }
  if (rest.empty() || rest.find_first_of("/?# \t\r\n") != std::string_view::npos) {
    return InvalidArgument("must be scheme://host[:port] with nothing after the port");
  }
  std::string_view host = rest;
  if (host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return InvalidArgument("has an unclosed '['");
    const std::string_view tail = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!tail.empty() && tail.front() != ':') return InvalidArgument("has text after ']'");
  } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    const std::string_view port = host.substr(colon + 1);
    if (port.empty() ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidArgument("has a port that is not a number");
    }
    host = host.substr(0, colon);
  }
  if (host.empty()) return InvalidArgument("names no host");
  out.host = std::string(host);
  return out;
}

bool IsHttpUrl(std::string_view u) {
  return (StartsWith(u, "http://") && u.size() > 7) || (StartsWith(u, "https://") && u.size() > 8);
}

}  // namespace

const std::vector<std::string>& NotifyEvents() {
  static const std::vector<std::string> kEvents = {"approval.requested", "question.asked",
                                                   "turn.completed"};
  return kEvents;
}

Result<NotifyConfig> ParseNotifyEntry(const Json& entry, const ConfigOrigin& origin) {
  const std::string at = origin.ToString() + ": [[notify]]";
  if (!entry.is_object()) return InvalidArgument(at + " must be a table");
  NotifyConfig n;
  n.origin = origin;
  auto text = [&](const char* key, std::string& out) -> Status {
    auto it = entry.find(key);
    if (it == entry.end()) return Status::Ok();
    if (!it->is_string()) return InvalidArgument(at + " " + key + " expects a string");
    out = it->get<std::string>();
    if (out.find_first_of("\r\n") != std::string::npos) {
      return InvalidArgument(at + " " + key + " must be one line");
    }
    return Status::Ok();
  };
  auto list = [&](const char* key, std::vector<std::string>& out) -> Status {
    auto it = entry.find(key);
    if (it == entry.end()) return Status::Ok();
    if (!it->is_array()) return InvalidArgument(at + " " + key + " expects a list of strings");
    for (const Json& e : *it) {
      if (!e.is_string()) return InvalidArgument(at + " " + key + " expects a list of strings");
      out.push_back(e.get<std::string>());
    }
    return Status::Ok();
  };
  AL_RETURN_IF_ERROR(text("channel", n.channel));
  static const std::vector<std::string> kCommon = {"channel", "events"};
  static const std::vector<std::string> kWebhook = {"url", "secret_env"};
  static const std::vector<std::string> kEmail = {
      "smtp_url", "tls", "smtp_user", "smtp_password_env", "from", "to", "ca_file", "timeout_s"};
  static const std::vector<std::string> kSlack = {"bot_token_env", "slack_channel", "api_base_url",
                                                  "webhook_url", "signing_secret_env"};
  const std::vector<std::string>* own = n.channel == "webhook" ? &kWebhook
                                        : n.channel == "email" ? &kEmail
                                        : n.channel == "slack" ? &kSlack
                                                               : nullptr;
  if (own == nullptr) {
    return InvalidArgument(at + " channel must be one of webhook, email, slack; got '" + n.channel +
                           "'");
  }
  for (const auto& [key, value] : entry.items()) {
    const bool known = std::find(kCommon.begin(), kCommon.end(), key) != kCommon.end() ||
                       std::find(own->begin(), own->end(), key) != own->end();
    if (!known) {
      std::string keys;
      for (const auto& k : *own) keys += (keys.empty() ? "" : ", ") + k;
      return InvalidArgument(at + " unknown key '" + key + "' for channel '" + n.channel +
                             "' (its keys: channel, events, " + keys + ")");
    }
  }
  AL_RETURN_IF_ERROR(list("events", n.events));
  if (entry.contains("events") && n.events.empty()) {
    return InvalidArgument(at +
                           " events is empty: list at least one of approval.requested, "
                           "question.asked, turn.completed (or leave it out)");
  }
  for (const std::string& e : n.events) {
    const auto& all = NotifyEvents();
    if (std::find(all.begin(), all.end(), e) == all.end()) {
      return InvalidArgument(at + " events: unknown event '" + e +
                             "' (one of approval.requested, question.asked, turn.completed)");
    }
  }
  if (n.events.empty()) n.events = {"approval.requested", "question.asked"};
  auto env_name = [&](const char* key, const std::string& v) -> Status {
    if (!v.empty() && !IsEnvVarName(v)) {
      return InvalidArgument(at + " " + key + " must name an environment variable " +
                             "([A-Za-z_][A-Za-z0-9_]*), not hold the secret itself");
    }
    return Status::Ok();
  };
  if (n.channel == "webhook") {
    AL_RETURN_IF_ERROR(text("url", n.url));
    AL_RETURN_IF_ERROR(text("secret_env", n.secret_env));
    if (!IsHttpUrl(n.url)) {
      return InvalidArgument(at + " channel 'webhook' needs url = \"http(s)://...\"");
    }
    if (n.secret_env.empty()) {
      return InvalidArgument(at +
                             " channel 'webhook' needs secret_env: the variable holding the "
                             "secret its notifications are signed with");
    }
    AL_RETURN_IF_ERROR(env_name("secret_env", n.secret_env));
  } else if (n.channel == "email") {
    AL_RETURN_IF_ERROR(text("smtp_url", n.smtp_url));
    AL_RETURN_IF_ERROR(text("tls", n.tls));
    AL_RETURN_IF_ERROR(text("smtp_user", n.smtp_user));
    AL_RETURN_IF_ERROR(text("smtp_password_env", n.smtp_password_env));
    AL_RETURN_IF_ERROR(text("from", n.from));
    AL_RETURN_IF_ERROR(list("to", n.to));
    AL_RETURN_IF_ERROR(text("ca_file", n.ca_file));
    if (auto t = entry.find("timeout_s"); t != entry.end()) {
      if (!t->is_number_integer() || t->get<int64_t>() < 1 || t->get<int64_t>() > 600) {
        return InvalidArgument(at + " timeout_s expects a whole number of seconds, 1 to 600");
      }
      n.timeout_s = t->get<int64_t>();
    }
    if (n.smtp_url.empty()) return InvalidArgument(at + " channel 'email' needs smtp_url");
    Result<SmtpUrl> url = ParseSmtpUrl(n.smtp_url);
    if (!url.ok()) return InvalidArgument(at + " smtp_url " + url.error().message());
    if (!n.tls.empty() && n.tls != "none") {
      return InvalidArgument(at + " tls must be \"none\" or left out (TLS required); got '" +
                             n.tls + "'");
    }
    if (n.tls == "none" && (url->scheme != "smtp" || !IsLoopbackHost(url->host))) {
      return InvalidArgument(at + " tls = \"none\" is allowed only for smtp:// to a loopback " +
                             "relay (127.0.0.1, ::1, localhost); got " + n.smtp_url);
    }
    AL_RETURN_IF_ERROR(env_name("smtp_password_env", n.smtp_password_env));
    if (!n.smtp_password_env.empty() && n.smtp_user.empty()) {
      return InvalidArgument(at + " smtp_password_env needs smtp_user");
    }
    if (!n.smtp_user.empty() && n.smtp_password_env.empty()) {
      return InvalidArgument(at +
                             " smtp_user needs smtp_password_env: the variable holding the "
                             "password");
    }
    if (!IsMailAddress(n.from)) {
      return InvalidArgument(at + " from must be one address (name@example.com); got '" + n.from +
                             "'");
    }
    if (n.to.empty()) return InvalidArgument(at + " channel 'email' needs to = [\"...\"]");
    for (const std::string& t : n.to) {
      if (!IsMailAddress(t)) {
        return InvalidArgument(at + " to: '" + t + "' is not one address (name@example.com)");
      }
    }
  } else {
    AL_RETURN_IF_ERROR(text("bot_token_env", n.bot_token_env));
    AL_RETURN_IF_ERROR(text("slack_channel", n.slack_channel));
    AL_RETURN_IF_ERROR(text("api_base_url", n.api_base_url));
    AL_RETURN_IF_ERROR(text("webhook_url", n.webhook_url));
    AL_RETURN_IF_ERROR(text("signing_secret_env", n.signing_secret_env));
    AL_RETURN_IF_ERROR(env_name("bot_token_env", n.bot_token_env));
    AL_RETURN_IF_ERROR(env_name("signing_secret_env", n.signing_secret_env));
    const bool bot = !n.bot_token_env.empty();
    if (bot == !n.webhook_url.empty()) {
      return InvalidArgument(at + " channel 'slack' needs either bot_token_env (with " +
                             "slack_channel) or webhook_url, not both");
    }
    if (bot && n.slack_channel.empty()) {
      return InvalidArgument(at +
                             " bot_token_env needs slack_channel (a conversation id such as "
                             "C0123456789, or #name)");
    }
    if (!bot && (!n.slack_channel.empty() || !n.api_base_url.empty())) {
      return InvalidArgument(at + " slack_channel and api_base_url go with bot_token_env; an " +
                             "incoming webhook posts to the channel it was made for");
    }
    if (!n.webhook_url.empty() && !StartsWith(n.webhook_url, "https://") &&
        !StartsWith(n.webhook_url, "http://127.0.0.1")) {
      return InvalidArgument(at + " webhook_url must be an https:// URL");
    }
    if (!n.api_base_url.empty() && !IsHttpUrl(n.api_base_url)) {
      return InvalidArgument(at + " api_base_url must be an http(s):// URL; got '" +
                             n.api_base_url + "'");
    }
  }
  return n;
}

}  // namespace agentloop
