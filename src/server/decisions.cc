// A decision about a pending item, as every route makes it: parsed from a
// request, recorded by the engine, and the batch continued by the session
// host when it is complete.
#include "agentloop/event_data.h"

#include "protocol/codec.h"
#include "server/server_impl.h"

namespace agentloop::server {

std::string ServerImpl::StateName(PendingLookup::State s) {
  switch (s) {
    case PendingLookup::State::kOutstanding:
      return "pending";
    case PendingLookup::State::kDecided:
      return "resolved";
    case PendingLookup::State::kCancelled:
      return "cancelled";
  }
  return "pending";
}

Json ServerImpl::LookupJson(const PendingLookup& l) {
  Json j = PendingJson(l.record, StateName(l.state));
  if (l.decision) {
    j["decision"] = l.decision->kind == ApprovalDecision::Kind::kDeny ? "deny" : "approve";
    if (l.record.item.kind == PendingKind::kQuestion) j["decision"] = "answer";
    j["decided_by"] = l.decision->by;
  }
  return j;
}

// Reads a decision about an item of `kind` into `res` ({answer} for a
// question; {decision, edited args, reason, scope} for an approval, where
// `verb` fixes the decision when the route names it). Returns the 400 to
// answer with when the body is wrong.
std::optional<Response> ServerImpl::ParseResolution(const Request& req, PendingKind kind,
                                                    const std::string& verb, DecisionFields f,
                                                    Resolution& res) {
  auto bad = [](std::string_view code, std::string detail) {
    return std::optional<Response>(Problem(400, code, std::move(detail)));
  };
  Result<Json> body = ParseBody(req);
  if (!body.ok()) return bad("invalid_request", body.error().message());
  const Json& b = *body;
  if (kind == PendingKind::kQuestion) {
    if (f.strict) {
      if (Status keys = OnlyKeys(b, {"answer"}); !keys.ok()) {
        return bad("invalid_request", keys.message());
      }
    }
    if (!b.contains("answer") || !b["answer"].is_string()) {
      return bad("invalid_request", "answer must be a string");
    }
    res.kind = Resolution::Kind::kAnswer;
    res.answer = b["answer"].get<std::string>();
    return std::nullopt;
  }
  if (f.strict) {
    Status keys = OnlyKeys(b, {"decision", f.edited_args, "scope", "reason"});
    if (!keys.ok()) return bad("invalid_request", keys.message());
  }
  std::string decision = verb;
  if (decision.empty()) {
    const Json& d = b.value("decision", Json());
    if (d != "approve" && d != "deny") {
      return bad("invalid_request", "decision must be approve or deny");
    }
    decision = d.get<std::string>();
  }
  res.kind = decision == "approve" ? Resolution::Kind::kApprove : Resolution::Kind::kDeny;
  if (b.contains(f.edited_args)) {
    if (res.kind != Resolution::Kind::kApprove || !b[f.edited_args].is_object()) {
      return bad("invalid_edited_args",
                 std::string(f.edited_args) + " must be a JSON object, with decision approve");
    }
    res.edited_arguments = b[f.edited_args];
  }
  if (b.contains("reason")) {
    if (!b["reason"].is_string()) return bad("invalid_request", "reason must be a string");
    res.reason = b["reason"].get<std::string>();
  }
  if (f.strict && b.contains("scope")) {
    const Json& scope = b["scope"];
    if (scope != "once" && scope != "session") {
      return bad("unsupported_scope",
                 "scope must be once (this call) or session (this exact access for the rest "
                 "of the session; add an allow rule to the agent for more)");
    }
    if (scope == "session" && res.kind != Resolution::Kind::kApprove) {
      return bad("unsupported_scope", "scope session goes with decision approve");
    }
    res.remember_for_session = scope == "session";
  }
  return std::nullopt;
}

// Records `res` about the item `pid` (checked to be the caller's and of
// `kind`: else 404 on `ex`) and tells `answer` what happened; a refused
// edit is 400 on `ex` with the item still pending. When the decision
// completes the batch this server continues the turn (kResumed) and
// `finish`, when set, gets the continued turn's outcome.
void ServerImpl::Resolve(const std::shared_ptr<Exchange>& ex, const Principal& who,
                         const std::string& pid, PendingKind kind, Resolution res,
                         std::function<void(const Decided&)> answer, TurnFinish finish,
                         std::string by) {
  res.continue_turn = false;
  res.by = by.empty() ? "http:" + who.tenant : std::move(by);
  res.tenant = who.tenant;
  WithPending(ex, who, pid, kind, [this, ex, who, pid, res, answer, finish](PendingLookup l) {
    if (l.state != PendingLookup::State::kOutstanding) return answer(Settled(l, res));
    const std::string sid = l.record.session_id;
    struct Outcome {
      ResolveReport report;
      std::optional<PendingLookup> after;
      uint64_t seq_before = 0;
    };
    Blocking(
        [this, pid, res, sid]() -> Result<Outcome> {
          Outcome o;
          auto store = StoreFor(*res.tenant);
          AL_ASSIGN_OR_RETURN(SessionInfo before, store->GetSession(sid));
          o.seq_before = before.last_seq;
          AL_ASSIGN_OR_RETURN(o.report,
                              engine_.Submit(op::Decide{pid, res}, OptionsToOpen(sid), {}, {}));
          if (o.report.already_resolved) {
            AL_ASSIGN_OR_RETURN(o.after, store->LookupPending(pid));
          }
          return o;
        },
        [this, ex, who, res, sid, l, answer, finish](Result<Outcome> r) {
          if (!r.ok()) {
            if (r.error().code() == Code::kInvalidArgument) {
              return ex->Send(
                  Problem(400, "invalid_edited_args",
                          DescribeDecisionOutcome(agentloop::DecisionOutcome::kInvalidEdit, 0, {}) +
                              ": " + r.error().message()));
            }
            return ex->Send(FromStatus(r.error()));
          }
          if (r->report.outcome == agentloop::DecisionOutcome::kInvalidEdit) {
            return ex->Send(Problem(
                400, "invalid_edited_args",
                DescribeDecisionOutcome(r->report.outcome, 0, {}) + ": " + r->report.refused));
          }
          if (r->report.already_resolved) return answer(Settled(r->after ? *r->after : l, res));
          // The decision's event was written by the store: watchers get it.
          hub_.PublishStored(sid, r->seq_before);
          Decided o;
          o.session_id = sid;
          o.turn_id = l.record.turn_id;
          if (!r->report.continues_later) {
            o.outstanding = r->report.outstanding;
            return answer(o);
          }
          // The batch is decided: this server continues the turn. For a
          // subagent's item that is the root's turn (the decision woke
          // the calls waiting on the subagent, up to the root).
          o.kind = Decided::Kind::kResumed;
          const std::string rsid = r->report.session_id.empty() ? sid : r->report.session_id;
          const std::string rtid = r->report.turn_id.empty() ? l.record.turn_id : r->report.turn_id;
          o.session_id = rsid;
          o.turn_id = rtid;
          host_.ContinueDecision(rsid, who.tenant, rtid, finish);
          answer(o);
        });
  });
}

// A decision about an item no longer outstanding: the same decision again
// is answered as already made; a different one conflicts; an item whose
// batch was closed without it says so.
ServerImpl::Decided ServerImpl::Settled(const PendingLookup& l, const Resolution& res) {
  Decided o;
  o.session_id = l.record.session_id;
  o.turn_id = l.record.turn_id;
  o.kind = SettledOutcome(l, res);
  o.earlier = l.decision;
  return o;
}

}  // namespace agentloop::server
