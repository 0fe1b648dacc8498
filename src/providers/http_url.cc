#include "providers/http_url.h"

#include <cctype>
#include <cstdlib>

#include "base/strings.h"

namespace agentloop {

namespace {

std::string StripBrackets(std::string s) {
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') return s.substr(1, s.size() - 2);
  return s;
}

// A proxy variable: the lower-case name, else the upper-case one; blank
// counts as unset.
std::string ProxyVariable(const EnvMap& env, const std::string& lower, const std::string& upper) {
  for (const std::string* name : {&lower, &upper}) {
    auto it = env.find(*name);
    if (it != env.end() && !it->second.empty()) return it->second;
  }
  return {};
}

}  // namespace

std::string HttpUrl::Authority() const { return (ipv6 ? "[" + host + "]" : host) + ":" + port; }

std::string HttpUrl::HostHeader() const {
  std::string h = ipv6 ? "[" + host + "]" : host;
  return DefaultPort() ? h : h + ":" + port;
}

Result<HttpUrl> ParseHttpUrl(std::string_view url, bool is_proxy) {
  HttpUrl u;
  std::string scheme = "http";
  if (size_t p = url.find("://"); p != std::string_view::npos) {
    scheme = ToLower(url.substr(0, p));
    url.remove_prefix(p + 3);
  } else if (!is_proxy) {
    return InvalidArgument("bad URL: no scheme (expected http:// or https://)");
  }
  if (scheme == "https" && !is_proxy) {
    u.https = true;
  } else if (scheme != "http") {
    return InvalidArgument(
        std::string(is_proxy ? "unsupported proxy scheme '" : "unsupported URL scheme '") + scheme +
        (is_proxy ? "' (expected http)" : "' (expected http or https)"));
  }
  size_t end = url.find_first_of("/?#");
  std::string_view authority = url.substr(0, end);
  std::string_view rest = end == std::string_view::npos ? std::string_view() : url.substr(end);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    u.userinfo = std::string(authority.substr(0, at));
    authority.remove_prefix(at + 1);
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t rb = authority.find(']');
    if (rb == std::string_view::npos) return InvalidArgument("bad URL: unterminated IPv6 address");
    u.host = std::string(authority.substr(1, rb - 1));
    u.ipv6 = true;
    std::string_view after = authority.substr(rb + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("bad URL: junk after the IPv6 address");
      port = after.substr(1);
    }
  } else {
    if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      authority = authority.substr(0, colon);
    }
    u.host = std::string(authority);
  }
  if (u.host.empty()) return InvalidArgument("bad URL: no host");
  for (char c : u.host) {
    if (IsSpaceOrControl(c) || c == '/' || c == '\\')
      return InvalidArgument("bad URL: invalid host");
  }
  if (port.empty()) {
    u.port = u.https ? "443" : "80";
  } else {
    long n = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || n > 65535) return InvalidArgument("bad URL: invalid port");
      n = n * 10 + (c - '0');
    }
    if (n < 1 || n > 65535) return InvalidArgument("bad URL: invalid port");
    u.port = std::to_string(n);
  }
  if (size_t hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  if (rest.empty()) {
    u.target = "/";
  } else if (rest.front() == '?') {
    u.target = "/" + std::string(rest);
  } else {
    u.target = std::string(rest);
  }
  for (char c : u.target) {
    if (IsSpaceOrControl(c)) return InvalidArgument("bad URL: invalid character in the path");
  }
  return u;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool HttpProxyBypassed(std::string_view host, std::string_view no_proxy) {
  std::string h = StripBrackets(ToLower(host));
  if (h == "localhost" || EndsWith(h, ".localhost") || StartsWith(h, "127.") || h == "::1") {
    return true;
  }
  for (std::string_view e : Split(no_proxy, ',')) {
    e = Trim(e);
    if (e.empty()) continue;
    if (e == "*") return true;
    std::string entry = StripBrackets(ToLower(e));
    if (!entry.empty() && entry.front() == '.') entry.erase(0, 1);
    if (entry.empty()) continue;
    if (h == entry) return true;
    if (h.size() > entry.size() && EndsWith(h, entry) && h[h.size() - entry.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}

HttpProxy ParseHttpProxy(std::string_view value, std::string_view name) {
  HttpProxy p;
  value = Trim(value);
  if (value.empty()) return p;
  p.configured = true;
  Result<HttpUrl> u = ParseHttpUrl(value, true);
  if (!u.ok()) {
    p.error = InvalidArgument("bad proxy setting (" + std::string(name) +
                              "): " + std::string(u.error().message()));
    return p;
  }
  p.url = std::move(*u);
  if (!p.url.userinfo.empty()) {
    std::string_view ui = p.url.userinfo;
    size_t colon = ui.find(':');
    std::string user = PercentDecode(ui.substr(0, colon));
    std::string pass =
        colon == std::string_view::npos ? std::string() : PercentDecode(ui.substr(colon + 1));
    p.authorization = "Basic " + Base64Encode(user + ":" + pass);
    p.url.userinfo.clear();
  }
  return p;
}

HttpProxyConfig::HttpProxyConfig(const std::optional<std::string>& http_proxy,
                                 const std::optional<std::string>& https_proxy,
                                 const std::optional<std::string>& no_proxy, const EnvMap& env)
    : http_(ParseHttpProxy(
          http_proxy ? *http_proxy : ProxyVariable(env, "http_proxy", "HTTP_PROXY"), "http_proxy")),
      https_(ParseHttpProxy(
          https_proxy ? *https_proxy : ProxyVariable(env, "https_proxy", "HTTPS_PROXY"),
          "https_proxy")) {
  if (no_proxy) {
    no_proxy_ = *no_proxy;
  } else if (auto it = env.find("no_proxy"); it != env.end()) {
    no_proxy_ = it->second;
  } else if (auto up = env.find("NO_PROXY"); up != env.end()) {
    no_proxy_ = up->second;
  }
}

Result<HttpRoute> HttpProxyConfig::Route(const HttpUrl& url) const {
  HttpRoute r;
  const HttpProxy& proxy = url.https ? https_ : http_;
  if (proxy.configured && !HttpProxyBypassed(url.host, no_proxy_)) {
    if (!proxy.error.ok()) return proxy.error;
    r.proxy = &proxy;
  }
  if (r.proxy != nullptr && !url.https) {
    r.absolute_form = true;
    r.pool_key = "http-proxy " + r.proxy->url.Authority();  // any origin
  } else {
    r.tunnel = r.proxy != nullptr;
    r.pool_key = (url.https ? "https://" : "http://") + url.Authority();
    if (r.proxy != nullptr) r.pool_key += " via " + r.proxy->url.Authority();
  }
  r.dial_name = r.proxy != nullptr ? "proxy " + r.proxy->url.Authority() : url.Authority();
  return r;
}

EnvMap HttpProxyConfig::ProcessEnv() {
  EnvMap env;
  for (const char* name :
       {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"}) {
    if (const char* v = std::getenv(name); v != nullptr) env[name] = v;
  }
  return env;
}

bool IsSpaceOrControl(char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; }

}  // namespace agentloop
