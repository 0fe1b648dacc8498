// The web console's routes: sign-in by cookie and diffs (console.h,
// docs/console.md).
#include <chrono>

#include "engine/change_preview.h"
#include "server/console.h"
#include "server/server_impl.h"

namespace agentloop::server {

int64_t ServerImpl::ConsoleNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// POST /v1/console/session with a bearer token: the cookie that stands
// for it. Without tokens configured there is nothing to sign in to.
void ServerImpl::ConsoleSignIn(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const Params&) {
  if (options_.tokens.empty()) {
    return ex->Send(JsonResponse(200, ConsoleWho(who, false)));
  }
  const TokenGrant* g = console::BearerGrant(ex->request(), options_.tokens);
  if (g == nullptr) {
    return ex->Send(
        Problem(400, "invalid_request", "sign in with the token in Authorization: Bearer TOKEN"));
  }
  Result<std::string> cookie = console::SignInCookie(
      *g, cookie_key_, ConsoleNowMs(), ex->request().Header("Origin").starts_with("https://"));
  if (!cookie.ok()) return ex->Send(FromStatus(cookie.error()));
  Response r = JsonResponse(200, ConsoleWho(who, true));
  r.headers.emplace_back("Set-Cookie", std::move(*cookie));
  ex->Send(std::move(r));
}

void ServerImpl::ConsoleWhoAmI(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const Params&) {
  ex->Send(JsonResponse(200, ConsoleWho(who, who.console_cookie)));
}

// DELETE /v1/console/session: clears the cookie in the browser and, for a
// request signed in by it, revokes it in the store, so that a copy of it
// stops working on every server that shares the store, restarts
// included (the cookie itself is valid until it expires). Answered once
// the revocation is committed.
void ServerImpl::ConsoleSignOut(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                const Params&) {
  Response r;
  r.status = 204;
  r.headers.emplace_back("Set-Cookie", console::SignOutCookie());
  std::optional<console::CookieSignIn> c =
      who.console_cookie
          ? console::VerifyCookie(ex->request(), options_.tokens, cookie_key_, ConsoleNowMs())
          : std::nullopt;
  if (!c) return ex->Send(std::move(r));
  revoked_cookies_.insert(c->id);
  Blocking([this, tenant = who.tenant,
            c = *c]() { return ctx_.state.RevokeCredential(tenant, c.id, c.expires_at_ms); },
           [ex, r = std::move(r)](Status s) mutable {
             ex->Send(s.ok() ? std::move(r) : FromStatus(s));
           });
}

// Reads the revoked console sign-ins (Listen, before the server
// accepts, so that no copy of a signed-out cookie gets in after a restart).
Status ServerImpl::LoadRevokedCookies() {
  if (options_.tokens.empty()) return Status::Ok();
  AL_ASSIGN_OR_RETURN(std::vector<std::string> ids, ctx_.state.ListRevokedCredentials());
  revoked_cookies_.insert(ids.begin(), ids.end());
  return Status::Ok();
}

// Reads them again every kRevocationRefresh: another server sharing the
// store may have revoked one. Ids are only added (a revocation lasts
// until its cookie expires, and then the cookie is refused anyway).
void ServerImpl::RefreshRevokedCookies() {
  if (options_.tokens.empty() || ctx_.shutting_down) return;
  if (!revocation_timer_) revocation_timer_.emplace(io_);
  revocation_timer_->expires_after(kRevocationRefresh);
  revocation_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || ctx_.shutting_down) return;
    Blocking([this]() { return ctx_.state.ListRevokedCredentials(); },
             [this](Result<std::vector<std::string>> ids) {
               if (ids.ok()) revoked_cookies_.insert(ids->begin(), ids->end());
               RefreshRevokedCookies();
             });
  });
}

Json ServerImpl::ConsoleWho(const Principal& who, bool cookie) const {
  Json scopes = Json::array();
  for (auto [bit, name] : {std::pair{kScopeRead, "read"}, std::pair{kScopeWrite, "write"},
                           std::pair{kScopeApprove, "approve"}}) {
    if (who.Has(bit)) scopes.push_back(name);
  }
  return {{"tenant", who.tenant},
          {"scopes", scopes},
          {"tokens_required", !options_.tokens.empty()},
          {"cookie", cookie}};
}

// The change a pending write or edit would make, shown only to the extent
// the session may read the file (engine::PreviewPendingChange). Pool thread.
Result<Json> ServerImpl::ItemDiff(const SessionInfo& s, const PendingItem& item) const {
  AL_ASSIGN_OR_RETURN(tools::ChangePreview p, engine::PreviewPendingChange(
                                                  engine_, OptionsToOpen(s.id), s.workspace, item));
  return p.ToJson();
}

// GET /v1/approvals/{id}/diff: the change a pending write or edit would
// make to the file as it is now.
void ServerImpl::ApprovalDiff(const std::shared_ptr<Exchange>& ex, const Principal& who,
                              const Params& p) {
  WithPending(ex, who, p[0], PendingKind::kApproval, [this, ex](PendingLookup l) {
    Blocking(
        [this, l]() -> Result<Json> {
          AL_ASSIGN_OR_RETURN(SessionInfo s, engine_.store().GetSession(l.record.session_id));
          return ItemDiff(s, l.record.item);
        },
        [ex](Result<Json> r) {
          if (!r.ok() && r.error().code() == Code::kPermissionDenied) {
            return ex->Send(Problem(403, "forbidden", r.error().message()));
          }
          ex->Send(r.ok() ? JsonResponse(200, *r) : FromStatus(r.error()));
        });
  });
}

}  // namespace agentloop::server
