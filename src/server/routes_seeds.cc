// The routes of the seeds' HTTP adapter (docs/server.md, "Compatibility").
#include <cstdio>

#include "protocol/codec.h"
#include "server/server_impl.h"

namespace agentloop::server {

void ServerImpl::CompatPost(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
  CompatMessage(ex, who, p[0], false);
}

void ServerImpl::CompatPostStream(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                  const Params& p) {
  CompatMessage(ex, who, p[0], true);
}

void ServerImpl::CompatResolveApproval(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                       const Params& p) {
  CompatResolve(ex, who, p[0], PendingKind::kApproval, "", true);
}

void ServerImpl::CompatAnswerQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                      const Params& p) {
  CompatResolve(ex, who, p[0], PendingKind::kQuestion, "", true);
}

void ServerImpl::CompatApprove(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const Params& p) {
  CompatResolve(ex, who, p[0], PendingKind::kApproval, "approve", false);
}

void ServerImpl::CompatDeny(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
  CompatResolve(ex, who, p[0], PendingKind::kApproval, "deny", false);
}

void ServerImpl::CompatAnswer(const std::shared_ptr<Exchange>& ex, const Principal& who,
                              const Params& p) {
  CompatResolve(ex, who, p[0], PendingKind::kQuestion, "", false);
}

// POST /agents/{name}/messages[/stream] {message, sessionId?}: a turn run to
// its end, answered 200 {text, sessionId, events, stopReason?} or, paused,
// 202 with the pending item and where to decide it.
void ServerImpl::CompatMessage(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const std::string& name, bool stream) {
  const AgentSpec* agent = FindAgent(name);
  if (agent == nullptr) return ex->Send(Problem(404, "not_found", "no agent '" + name + "'"));
  Result<Json> body = ParseBody(ex->request());
  if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
  Status keys = OnlyKeys(*body, {"message", "sessionId"});
  if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
  if (!body->contains("message") || !(*body)["message"].is_string() ||
      (*body)["message"].get<std::string>().empty()) {
    return ex->Send(Problem(400, "invalid_request", "message must be a non-empty string"));
  }
  std::string message = (*body)["message"].get<std::string>();
  std::string sid;
  if (body->contains("sessionId")) {
    if (!(*body)["sessionId"].is_string()) {
      return ex->Send(Problem(400, "invalid_request", "sessionId must be a string"));
    }
    sid = (*body)["sessionId"].get<std::string>();
  }
  SessionOptions o = agent->options;
  o.tenant = who.tenant;
  o.agent = agent->name;
  Blocking(
      [this, o, sid, agent]() mutable -> Result<SessionInfo> {
        if (!sid.empty()) return StoreFor(o.tenant)->GetSession(sid);
        // In the tenant's folder of a root of workspaces, as CreateSession.
        if (agent->for_workspace) {
          AL_ASSIGN_OR_RETURN(SessionOptions chosen, agent->for_workspace(o.tenant, ""));
          chosen.tenant = o.tenant;
          chosen.agent = o.agent;
          o = std::move(chosen);
        }
        o.mcp_servers.clear();  // started by the turn (OptionsForTurn)
        AL_ASSIGN_OR_RETURN(auto session, engine_.OpenSession(o));
        SessionInfo info = session->info();
        return info;
      },
      [this, ex, who, name, message, stream](Result<SessionInfo> r) {
        if (!r.ok() || r->tenant != who.tenant || r->agent != name) {
          if (r.ok() || r.error().code() == Code::kNotFound) {
            return ex->Send(Problem(404, "not_found", "no session of agent " + name));
          }
          return ex->Send(FromStatus(r.error()));
        }
        const std::string id = r->id;
        if (!AdmitOrAnswerBusy(ex, id, who.tenant, [this, ex, who, name, stream] {
              CompatMessage(ex, who, name, stream);
            })) {
          return;
        }
        TurnStart start;
        start.after_seq = r->last_seq;
        if (stream) {
          start.stream = ex->OpenStream();
          start.seeds = true;
          start.stream->Push(Frame("", "session", DumpJson({{"sessionId", id}})));
        } else {
          start.finish = [this, ex, id, name, after = r->last_seq](const std::string& turn_id,
                                                                   const Result<TurnResult>& t) {
            CompatAnswer(ex, id, name, turn_id, after, t);
          };
        }
        host_.StartTurn(id, message, std::move(start));
      });
}

// The seeds' answer for a finished turn: 200 {text, sessionId, events,
// stopReason?}, or 202 {pending: true, ...} when it paused.
void ServerImpl::CompatAnswer(const std::shared_ptr<Exchange>& ex, const std::string& sid,
                              const std::string& agent, const std::string& turn_id, uint64_t after,
                              const Result<TurnResult>& t) {
  if (!t.ok()) {
    return ex->Send(t.error().code() == Code::kFailedPrecondition
                        ? Problem(409, "session_paused", t.error().message())
                        : FromStatus(t.error()));
  }
  TurnResult result = *t;
  // The turn's own events (a query on the turn, not the log after it).
  EventQuery turn_events;
  turn_events.after_seq = after;
  turn_events.turn_id = turn_id;
  Blocking([this, sid, turn_events]() { return engine_.store().QueryEvents(sid, turn_events); },
           [ex, sid, agent, turn_id, result](Result<std::vector<StoredEvent>> r) {
             Json events = Json::array();
             if (!r.ok()) {
               // The turn ran: it is answered, without its events (the
               // session's events route has them), rather than as a
               // failure a client would retry.
               std::fprintf(stderr, "agentloop serve: session %s: the events of turn %s: %s\n",
                            sid.c_str(), turn_id.c_str(), r.error().ToString().c_str());
             }
             for (const auto& e : r.ok() ? *r : std::vector<StoredEvent>{}) {
               Json j = Json::parse(e.json, nullptr, false);
               if (!j.is_discarded()) events.push_back(std::move(j));
             }
             if (!result.pending.empty()) {
               const PendingItem& item = result.pending.front();
               const bool question = item.kind == PendingKind::kQuestion;
               Json j = {
                   {"pending", true},        {"type", question ? "question" : "approval"},
                   {"id", item.id},          {"tool", item.tool},
                   {"args", item.arguments}, {"reason", item.reason},
                   {"sessionId", sid},       {"statusUrl", "/agents/" + agent + "/sessions/" + sid},
                   {"events", events}};
               if (question) {
                 j["answerUrl"] = "/pending-questions/" + item.id + "/answer";
               } else {
                 j["approveUrl"] = "/approvals/" + item.id + "/approve";
                 j["denyUrl"] = "/approvals/" + item.id + "/deny";
                 j["resolveUrl"] = "/pending-approvals/" + item.id + "/resolve";
               }
               Json ids = Json::array();
               for (const auto& p : result.pending) ids.push_back(p.id);
               j["pendingIds"] = ids;
               return ex->Send(JsonResponse(202, j));
             }
             Json j = {{"text", result.final_text}, {"sessionId", sid}, {"events", events}};
             if (result.stop != StopReason::kCompleted) {
               j["stopReason"] = std::string(StopReasonName(result.stop));
             }
             ex->Send(JsonResponse(200, j));
           });
}

// GET /agents/{name}/sessions/{id}: the history and what waits.
void ServerImpl::CompatSession(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const Params& p) {
  const std::string& name = p[0];
  const std::string& id = p[1];
  WithSession(ex, who, id, [this, ex, name, id](SessionInfo info) {
    if (info.agent != name) {
      return ex->Send(Problem(404, "not_found", "no session " + id + " of agent " + name));
    }
    struct View {
      std::vector<Message> messages;
      std::vector<PendingRecord> pending;
    };
    Blocking(
        [this, id]() -> Result<View> {
          View v;
          LoadOptions lo;
          lo.repair = false;
          AL_ASSIGN_OR_RETURN(SessionSnapshot snap, engine_.store().Load(id, lo));
          v.messages = std::move(snap.messages);
          AL_ASSIGN_OR_RETURN(v.pending, engine_.ListPending(id));
          return v;
        },
        [ex, id, name](Result<View> r) {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          Json messages = Json::array();
          for (const auto& msg : r->messages) messages.push_back(ToJson(msg));
          Json pending = Json::array();
          for (const auto& item : r->pending) pending.push_back(PendingJson(item, "pending"));
          ex->Send(JsonResponse(
              200,
              {{"sessionId", id}, {"agent", name}, {"messages", messages}, {"pending", pending}}));
        });
  });
}

// POST /pending-approvals/{id}/resolve {decision, editedArgs?},
// /pending-questions/{id}/answer {answer} (`durable`: {alreadyResolved},
// {resolved, outstanding}, or the continued turn's answer), and the live
// routes /approvals/{id}/approve|deny, /questions/{id}/answer (the
// continued turn's answer, or 202 with the next item of the batch).
void ServerImpl::CompatResolve(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const std::string& pid, PendingKind kind, const std::string& verb,
                               bool durable) {
  Resolution res;
  if (auto refused = ParseResolution(ex->request(), kind, verb, kSeedFields, res)) {
    return ex->Send(std::move(*refused));
  }
  TurnFinish finish = [this, ex](const std::string& turn_id, const Result<TurnResult>& t) {
    CompatAnswerFor(ex, host_.SessionOfTurn(turn_id), turn_id, t);
  };
  Resolve(
      ex, who, pid, kind, res,
      [this, ex, durable](const Decided& o) {
        using K = Decided::Kind;
        if (o.kind == K::kResumed) return;  // `finish` answers
        // `outcome` and `detail` name the outcome as the /v1 routes and the
        // CLI do (agentloop::DecisionOutcome).
        Json said = {{"outcome", std::string(DecisionOutcomeName(o.kind))}, {"detail", o.Detail()}};
        if (o.kind != K::kRecorded) {
          said["alreadyResolved"] = true;
          if (o.earlier) said["decidedBy"] = o.earlier->by;
          return ex->Send(JsonResponse(200, said));
        }
        if (durable) {
          said["resolved"] = true;
          said["outstanding"] = o.outstanding;
          return ex->Send(JsonResponse(200, said));
        }
        // The live routes answer with the next item that waits.
        Blocking([this, sid = o.session_id]() { return engine_.ListPending(sid); },
                 [ex, sid = o.session_id](Result<std::vector<PendingRecord>> r) {
                   if (!r.ok() || r->empty()) {
                     return ex->Send(JsonResponse(200, {{"resolved", true}, {"outstanding", 0}}));
                   }
                   Json j = PendingJson(r->front(), "pending");
                   j["pending"] = true;
                   j["sessionId"] = sid;
                   j["outstanding"] = r->size();
                   ex->Send(JsonResponse(202, j));
                 });
      },
      std::move(finish));
}

// CompatAnswer for a continued turn (its events since the pause).
void ServerImpl::CompatAnswerFor(const std::shared_ptr<Exchange>& ex, const std::string& sid,
                                 const std::string& turn_id, const Result<TurnResult>& t) {
  if (sid.empty()) return CompatAnswer(ex, sid, "", turn_id, 0, t);
  TurnResult copy;
  if (t.ok()) copy = *t;
  Status error = t.ok() ? Status::Ok() : t.error();
  WithSessionInfo(sid, [this, ex, sid, turn_id, copy, error](Result<SessionInfo> info) {
    std::string agent = info.ok() ? info->agent : "";
    Result<TurnResult> again = error.ok() ? Result<TurnResult>(copy) : Result<TurnResult>(error);
    CompatAnswer(ex, sid, agent, turn_id, 0, again);
  });
}

}  // namespace agentloop::server
