// The web console of `agentloop serve` (docs/console.md): its page and
// assets, compiled into the binary from src/server/console/ and served at
// `/` and `/console/...`; the sign-in that exchanges a bearer token for an
// HttpOnly, SameSite=Strict cookie. (The diff of a pending write or edit
// is engine::PreviewPendingChange.)
//
// Thread-safety: free functions without shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/status.h"
#include "agentloop/types.h"

#include "server/http_server.h"
#include "server/server.h"

namespace agentloop::server::console {

inline constexpr std::string_view kCookieName = "agentloop_console";
// How long a console sign-in lasts.
inline constexpr std::chrono::hours kCookieLifetime{12};

// The Content-Security-Policy of the page: nothing but this origin, no
// inline script or style, and no string ever assigned to innerHTML (trusted
// types with no policy).
inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "object-src 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

// The answer to a GET or HEAD of `/` or of an asset under `/console/`
// (with the CSP and no-sniff headers); nullopt for any other request, which
// goes on to the API. An unknown `/console/...` path is a 404 problem.
std::optional<Response> Asset(const Request& req);

// The paths of the embedded assets (`/` and `/console/...`), for tests.
std::vector<std::string> AssetPaths();

// The grant whose token is the request's `Authorization: Bearer` token, or
// null.
const TokenGrant* BearerGrant(const Request& req, const std::vector<TokenGrant>& tokens);

// The `Set-Cookie` value that signs `grant` in until `now_ms` plus
// kCookieLifetime: `v2.<grant id>.<expiry ms>.<nonce>.<mac>`, where the
// grant id is derived from the token's hash (it is not the hash) and the
// mac is HMAC-SHA256 under `key`, the server's cookie secret
// (ServerOptions::cookie_secret), which neither the configuration nor any
// output holds: knowing a token's hash is not enough to make a cookie. The
// cookie is not stored: any server with the same key and token grants
// accepts it and a restart keeps it. Removing the token from the
// configuration revokes every cookie of the token, a new key every cookie;
// signing out revokes one (the server records its id, CookieSignIn::id, in
// the store). `secure` adds the Secure attribute (HTTPS).
Result<std::string> SignInCookie(const TokenGrant& grant, std::string_view key, int64_t now_ms,
                                 bool secure);
// The `Set-Cookie` value that clears the console's cookie.
std::string SignOutCookie();

// A console cookie that checked out (VerifyCookie).
struct CookieSignIn {
  const TokenGrant* grant = nullptr;  // the grant it was signed for
  // Names this sign-in (each sign-in makes a new one): what signing out
  // revokes. Not a secret (the cookie cannot be made from it).
  std::string id;
  int64_t expires_at_ms = 0;
};
// The request's console cookie when it is well formed, unexpired at
// `now_ms`, and signed under `key` for a configured token; otherwise
// nullopt. Whether it was revoked (signed out) is the server's to check, by
// its id.
std::optional<CookieSignIn> VerifyCookie(const Request& req, const std::vector<TokenGrant>& tokens,
                                         std::string_view key, int64_t now_ms);
// VerifyCookie's grant, or null.
const TokenGrant* CookieGrant(const Request& req, const std::vector<TokenGrant>& tokens,
                              std::string_view key, int64_t now_ms);

}  // namespace agentloop::server::console
