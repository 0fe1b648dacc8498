// Approve/deny/answer links (links.h) and Slack's buttons (slack.h), which
// decide as the link they carry would.
#include <cstdio>
#include <map>

#include "base/strings.h"
#include "server/server_impl.h"
#include "server/slack.h"

namespace agentloop::server {

// Checks a link's token, finds its item, and calls `then` with the claim,
// the item and its session; when the link is bad, `refused` gets the view
// saying why (unset: a page answers it).
template <typename Then>
void ServerImpl::WithLink(const std::shared_ptr<Exchange>& ex, const std::string& token, Then then,
                          std::function<void(const LinkView&)> refused) {
  if (!refused) refused = [ex](const LinkView& v) { ex->Send(LinkPage(v)); };
  LinkCheck check = CheckLinkToken(token, SystemNowMs() / 1000, [this](const std::string& agent) {
    auto it = link_keys_.find(agent);
    return it == link_keys_.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  if (!check.claim) {
    LinkView v;
    if (check.refusal == LinkRefusal::kExpired) {
      v.status = 410;
      v.heading = "This link has expired";
      v.message = "Decide the item in the console or with `agentloop approve`.";
    } else {
      v.status = 403;
      v.heading = "This link is not valid";
      v.message = "Check that the whole link was copied.";
    }
    return refused(v);
  }
  struct Found {
    std::optional<PendingLookup> lookup;
    SessionInfo session;
  };
  std::string pid = check.claim->pending_id;
  Blocking(
      [this, pid = std::move(pid)]() -> Result<Found> {
        Found f;
        AL_ASSIGN_OR_RETURN(f.lookup, engine_.store().LookupPending(pid));
        if (f.lookup) {
          AL_ASSIGN_OR_RETURN(f.session, engine_.store().GetSession(f.lookup->record.session_id));
        }
        return f;
      },
      [claim = std::move(*check.claim), then = std::move(then),
       refused = std::move(refused)](Result<Found> r) mutable {
        LinkView v;
        if (!r.ok()) {
          v.status = 503;
          v.heading = "Try again";
          v.message = "The server could not read the item: " + r.error().message();
          return refused(v);
        }
        const bool question = claim.action == "answer";
        if (!r->lookup || r->session.agent != claim.agent ||
            (r->lookup->record.item.kind == PendingKind::kQuestion) != question) {
          v.status = 404;
          v.heading = "Nothing to decide";
          v.message = "The item this link names does not exist (any more).";
          return refused(v);
        }
        then(std::move(claim), std::move(*r->lookup), std::move(r->session));
      });
}

// The page for an item: its state, and the form when it still waits.
LinkView ServerImpl::ItemView(const LinkClaim& claim, const PendingLookup& l,
                              const SessionInfo& s) {
  const PendingItem& item = l.record.item;
  LinkView v;
  v.agent = s.agent;
  v.session_id = s.id;
  v.tool = item.tool;
  v.reason = item.reason;
  v.arguments = item.arguments.is_null() ? std::string() : item.arguments.dump(2);
  switch (l.state) {
    case PendingLookup::State::kOutstanding:
      if (claim.action == "answer") {
        v.heading = "Answer the agent's question";
        v.message = item.arguments.is_object() && item.arguments.contains("question") &&
                            item.arguments["question"].is_string()
                        ? item.arguments["question"].get<std::string>()
                        : item.reason;
        if (item.arguments.is_object() && item.arguments.contains("options") &&
            item.arguments["options"].is_array()) {
          for (const auto& o : item.arguments["options"]) {
            if (o.is_string()) v.options.push_back(o.get<std::string>());
          }
        }
      } else {
        v.heading = claim.action == "approve" ? "Approve this call?" : "Deny this call?";
        v.message =
            "The agent waits for this decision. Nothing happens until you press the "
            "button below.";
      }
      v.action = claim.action;
      break;
    case PendingLookup::State::kDecided: {
      v.heading = "Already decided";
      const bool denied = l.decision && l.decision->kind == ApprovalDecision::Kind::kDeny;
      v.message = std::string(item.kind == PendingKind::kQuestion ? "It was answered"
                              : denied                            ? "It was denied"
                                                                  : "It was approved") +
                  (l.decision && !l.decision->by.empty() ? " (by " + l.decision->by + ")" : "") +
                  ". This link decides nothing more.";
      break;
    }
    case PendingLookup::State::kCancelled:
      v.heading = "No longer waiting";
      v.message =
          "The call was withdrawn: another call of its batch was denied, or the turn "
          "moved on.";
      break;
  }
  return v;
}

// GET /v1/links/{token}: a confirmation page; only its POST decides.
void ServerImpl::LinkShow(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p) {
  WithLink(ex, p[0], [ex](LinkClaim claim, PendingLookup l, SessionInfo s) {
    ex->Send(LinkPage(ItemView(claim, l, s)));
  });
}

// POST /v1/links/{token}: decides the item as the link says (a form body
// may carry `reason` for a deny, `answer` for a question).
void ServerImpl::LinkDecide(const std::shared_ptr<Exchange>& ex, const Principal&,
                            const Params& p) {
  WithLink(ex, p[0], [this, ex](LinkClaim claim, PendingLookup l, SessionInfo s) {
    if (l.state != PendingLookup::State::kOutstanding) {
      return ex->Send(LinkPage(ItemView(claim, l, s)));
    }
    Result<std::multimap<std::string, std::string>> form = ParseUrlEncoded(ex->request().body);
    LinkView v;
    v.agent = s.agent;
    v.session_id = s.id;
    v.tool = l.record.item.tool;
    if (!form.ok()) {
      v.status = 400;
      v.heading = "The form could not be read";
      v.message = form.error().message();
      return ex->Send(LinkPage(v));
    }
    Resolution res;
    auto field = [&](const std::string& name) {
      std::string value;
      auto [b, e] = form->equal_range(name);
      for (auto it = b; it != e && value.empty(); ++it) value = it->second;
      return value;
    };
    if (claim.action == "answer") {
      res.kind = Resolution::Kind::kAnswer;
      res.answer = field("answer");
      if (res.answer.empty()) {
        v.status = 400;
        v.heading = "No answer given";
        v.message = "Go back and type an answer, or pick one of the options.";
        return ex->Send(LinkPage(v));
      }
    } else if (claim.action == "deny") {
      res.kind = Resolution::Kind::kDeny;
      res.reason = field("reason");
    } else {
      res.kind = Resolution::Kind::kApprove;
    }
    DecideLink(ex, claim, l, s, std::move(res), "link:" + claim.action,
               [ex](const LinkView& done) { ex->Send(LinkPage(done)); });
  });
}

// Records the decision `res` a link (or a Slack button) carries about the
// outstanding item `l`, by `by`, and tells `reply` what happened.
void ServerImpl::DecideLink(const std::shared_ptr<Exchange>& ex, const LinkClaim& claim,
                            const PendingLookup& l, const SessionInfo& s, Resolution res,
                            std::string by, std::function<void(const LinkView&)> reply) {
  const PendingKind kind = l.record.item.kind;
  Resolve(
      ex, Principal{s.tenant, kScopeApprove}, l.record.item.id, kind, std::move(res),
      [claim, l, s, reply = std::move(reply)](const Decided& o) {
        LinkView done;
        done.agent = s.agent;
        done.session_id = s.id;
        done.tool = l.record.item.tool;
        switch (o.kind) {
          case Decided::Kind::kRecorded:
          case Decided::Kind::kResumed:
            done.heading = claim.action == "approve" ? "Approved"
                           : claim.action == "deny"  ? "Denied"
                                                     : "Answered";
            done.message = o.kind == Decided::Kind::kResumed
                               ? "The turn continues."
                               : "Recorded. " + std::to_string(o.outstanding) +
                                     " other call(s) of this turn still wait.";
            break;
          case Decided::Kind::kAlreadyResolved:
          case Decided::Kind::kConflict:
            done.heading = "Already decided";
            done.message = "Someone decided this item first (" + o.Detail() +
                           "). This link decides nothing more.";
            break;
          case Decided::Kind::kCancelled:
            done.heading = "No longer waiting";
            done.message = "The call was withdrawn before this decision.";
            break;
          case Decided::Kind::kInvalidEdit:
            done.heading = "Not decided";
            done.message = o.Detail();
            break;
        }
        reply(done);
      },
      {}, std::move(by));
}

// POST /v1/slack/interactions (docs/notifications.md): a click on the
// Approve or Deny button of a Slack notification, decided as its link
// would be (server/slack.h checks Slack's signature first, before
// anything of the request is read). Slack gets 200 once the decision is
// recorded; the message is then replaced through its response_url,
// saying who decided and how. Without a Slack channel that has a signing
// secret the route does not exist.
void ServerImpl::SlackInteraction(const std::shared_ptr<Exchange>& ex, const Principal&,
                                  const Params&) {
  if (slack_signers_.empty()) {
    return ex->Send(Problem(404, "not_found", "no Slack channel with a signing secret"));
  }
  const Request& req = ex->request();
  std::vector<std::string> secrets;
  for (const auto& [secret, agent] : slack_signers_) secrets.push_back(secret);
  Result<size_t> signer =
      VerifySlackSignature(secrets, req.Header("X-Slack-Request-Timestamp"),
                           req.Header("X-Slack-Signature"), req.body, SystemNowMs() / 1000);
  if (!signer.ok()) return ex->Send(Problem(401, "unauthorized", signer.error().message()));
  Result<SlackClick> click = ParseSlackInteraction(req.body);
  if (!click.ok()) return ex->Send(Problem(400, "invalid_request", click.error().message()));
  // A link button (the pages) also reports its click: nothing to decide.
  if (click->action_id != "approve" && click->action_id != "deny") {
    return ex->Send(Response{200, "text/plain", "", {}});
  }
  const std::string signed_for = slack_signers_[*signer].second;
  auto reply = [this, ex, url = click->response_url, user = click->user](const LinkView& v) {
    ex->Send(Response{200, "text/plain", "", {}});
    if (url.empty() || !SlackResponseUrlAllowed(url, slack_api_bases_)) return;
    Json replacement = SlackDecisionMessage(v.heading, v.message, v.tool, v.agent, user);
    channels_.PostJson(url, DumpJson(replacement), [](Status s) {
      if (!s.ok()) {
        std::fprintf(stderr, "agentloop: Slack message not replaced: %s\n",
                     RedactSecrets(s.message()).c_str());
      }
    });
  };
  WithLink(
      ex, click->value,
      [this, ex, reply, signed_for, action = click->action_id, user = click->user](
          LinkClaim claim, PendingLookup l, SessionInfo s) {
        if (claim.agent != signed_for || claim.action != action) {
          LinkView v;
          v.heading = "This button is not valid";
          v.message = "It does not belong to this Slack app's notification.";
          return reply(v);
        }
        if (l.state != PendingLookup::State::kOutstanding) return reply(ItemView(claim, l, s));
        Resolution res;
        res.kind = action == "approve" ? Resolution::Kind::kApprove : Resolution::Kind::kDeny;
        DecideLink(ex, claim, l, s, std::move(res), "slack:" + user, reply);
      },
      reply);
}

}  // namespace agentloop::server
