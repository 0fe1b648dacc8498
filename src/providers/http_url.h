// The HTTP client's configuration layer: request URLs, proxy URLs and the
// route a request takes (straight to its origin, through an http proxy in
// absolute form, or through a CONNECT tunnel), with the key under which its
// connections are pooled. No I/O: every decision here is a function of the
// URL and the settings.
//
// Proxy settings follow curl: https_proxy/HTTPS_PROXY for https,
// http_proxy/HTTP_PROXY for http, no_proxy/NO_PROXY (comma list of host names
// or domain suffixes, `*` = all); loopback hosts are never proxied. Proxy
// URLs are http://[user:pass@]host[:port] (Basic auth; the credentials live
// only in `HttpProxy::authorization`, which is never logged).
//
// Thread-safety: HttpProxyConfig is immutable after construction.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "agentloop/env.h"
#include "agentloop/status.h"

namespace agentloop {

struct HttpUrl {
  bool https = false;
  std::string host;      // without IPv6 brackets
  std::string port;      // decimal, 1..65535
  std::string target;    // path + query, never empty
  std::string userinfo;  // user:pass (proxy URLs only)
  bool ipv6 = false;

  bool DefaultPort() const { return port == (https ? "443" : "80"); }
  // host:port, IPv6 in brackets (what messages name, and a CONNECT target).
  std::string Authority() const;
  // The Host header: the port only when it is not the scheme's default.
  std::string HostHeader() const;
};

// Parses http(s)://[userinfo@]host[:port][/path][?query][#fragment] (a proxy
// URL: http only, the scheme optional). Errors are kInvalidArgument and never
// repeat the URL (it may carry keys).
Result<HttpUrl> ParseHttpUrl(std::string_view url, bool is_proxy = false);

// Whether `c` is a space or a control character, which no URL host or path
// and no header name may hold.
bool IsSpaceOrControl(char c);

// "%41" -> "A"; malformed escapes stay as they are.
std::string PercentDecode(std::string_view s);

// Whether `host` bypasses the proxy under `no_proxy` (comma list of host
// names or domain suffixes, `*` = all). Loopback hosts always bypass.
bool HttpProxyBypassed(std::string_view host, std::string_view no_proxy);

struct HttpProxy {
  bool configured = false;
  Status error;  // a bad setting fails the requests that would use the proxy
  HttpUrl url;
  std::string authorization;  // "Basic ..." or empty; never logged
};

// One proxy setting (`name` is the variable it stands for, for messages);
// blank = not configured.
HttpProxy ParseHttpProxy(std::string_view value, std::string_view name);

// How a request reaches its origin.
struct HttpRoute {
  // Null: straight to the origin. Points into the HttpProxyConfig.
  const HttpProxy* proxy = nullptr;
  // An http request through the proxy: absolute-form target, the proxy's
  // Authorization on the request itself; any origin shares the connection.
  bool absolute_form = false;
  // An https request through the proxy: a CONNECT tunnel, then TLS.
  bool tunnel = false;
  // Connections are pooled (and preconnects matched) under this key.
  std::string pool_key;
  // What is dialled, for messages: "proxy host:port" or the origin's.
  std::string dial_name;
};

class HttpProxyConfig {
 public:
  // Each setting that is unset comes from `env` (lower case first, then
  // upper case; a blank proxy variable counts as unset); a set empty string
  // means "no proxy" / "no exceptions".
  HttpProxyConfig(const std::optional<std::string>& http_proxy,
                  const std::optional<std::string>& https_proxy,
                  const std::optional<std::string>& no_proxy, const EnvMap& env);

  // The route to `url` (a parsed request URL): an error when the proxy it
  // would use has a bad setting.
  Result<HttpRoute> Route(const HttpUrl& url) const;

  // The proxy variables of the process environment (what the client reads
  // when its options leave them unset).
  static EnvMap ProcessEnv();

  const HttpProxy& http_proxy() const { return http_; }
  const HttpProxy& https_proxy() const { return https_; }
  const std::string& no_proxy() const { return no_proxy_; }

 private:
  HttpProxy http_;
  HttpProxy https_;
  std::string no_proxy_;
};

}  // namespace agentloop
