// The /v1 API: sessions, turns, events and pending items (docs/server.md).
#include <algorithm>
#include <set>

#include "agentloop/event_data.h"
#include "agentloop/session_tree.h"

#include "mcp/servers.h"
#include "protocol/codec.h"
#include "server/server_impl.h"

namespace agentloop::server {

// How many sessions one list request looks at, at most, to fill a page of a
// status it filters on.
constexpr int kMaxListScan = 5000;

Json ServerImpl::SessionJson(const SessionInfo& s, std::string_view status) const {
  return {{"id", s.id},
          {"agent", s.agent},
          {"title", s.title},
          {"metadata", s.metadata.is_null() ? Json::object() : s.metadata},
          {"status", std::string(status)},
          {"workspace", s.workspace.string()},
          {"provider", s.provider},
          {"model", s.model},
          {"command", s.command},
          {"created_at_ms", s.created_at_ms},
          {"updated_at_ms", s.updated_at_ms},
          {"last_seq", s.last_seq},
          {"parent_id", s.parent_id},
          {"events_url", "/v1/sessions/" + s.id + "/events/stream"}};
}

const AgentSpec* ServerImpl::DefaultAgent() const {
  if (options_.agents.size() == 1) return &options_.agents.front();
  for (const AgentSpec& a : options_.agents) {
    if (a.is_default) return &a;
  }
  return nullptr;
}

void ServerImpl::CreateSession(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const Params&) {
  Result<Json> body = ParseBody(ex->request());
  if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
  Status keys = OnlyKeys(*body, {"agent", "title", "metadata", "workspace"});
  if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
  std::string agent_name;
  if (body->contains("agent")) {
    if (!(*body)["agent"].is_string()) {
      return ex->Send(Problem(400, "invalid_request", "agent must be a string"));
    }
    agent_name = (*body)["agent"].get<std::string>();
  } else if (const AgentSpec* chosen = DefaultAgent()) {
    agent_name = chosen->name;
  } else {
    std::string names;
    for (const AgentSpec& a : options_.agents) names += (names.empty() ? "" : ", ") + a.name;
    return ex->Send(Problem(400, "invalid_request",
                            "this server serves several agents (" + names +
                                "): name one in `agent`, or mark one `default = true` in the "
                                "[agent] table of its agent.toml"));
  }
  const AgentSpec* agent = FindAgent(agent_name);
  if (agent == nullptr) {
    return ex->Send(Problem(404, "not_found", "no agent '" + agent_name + "'"));
  }
  std::string workspace;
  if (body->contains("workspace")) {
    if (!(*body)["workspace"].is_string()) {
      return ex->Send(Problem(400, "invalid_request", "workspace must be a string"));
    }
    workspace = (*body)["workspace"].get<std::string>();
    if (!agent->for_workspace) {
      return ex->Send(Problem(400, "invalid_request",
                              "agent '" + agent->name +
                                  "' does not let a session choose its workspace (it needs "
                                  "workspace_root in its agent.toml)"));
    }
  }
  SessionOptions o = agent->options;
  o.tenant = who.tenant;
  o.agent = agent->name;
  if (body->contains("title")) {
    if (!(*body)["title"].is_string()) {
      return ex->Send(Problem(400, "invalid_request", "title must be a string"));
    }
    o.title = (*body)["title"].get<std::string>();
  }
  if (body->contains("metadata")) {
    const Json& md = (*body)["metadata"];
    if (std::string why = MetadataProblem(md, /*null_clears=*/false); !why.empty()) {
      return ex->Send(Problem(400, "invalid_request", why));
    }
    o.metadata = md;
  }
  Blocking(
      [this, o, workspace, agent]() mutable -> Result<SessionInfo> {
        // A session of an agent with a root of workspaces works in its
        // tenant's folder of the root, never in the root itself.
        if (agent->for_workspace) {
          AL_ASSIGN_OR_RETURN(SessionOptions chosen, agent->for_workspace(o.tenant, workspace));
          chosen.tenant = o.tenant;
          chosen.agent = o.agent;
          chosen.title = o.title;
          chosen.metadata = o.metadata;
          o = std::move(chosen);
        }
        // Creating a session starts no MCP server: its turns do
        // (OptionsForTurn).
        o.mcp_servers.clear();
        AL_ASSIGN_OR_RETURN(auto s, engine_.OpenSession(o));
        SessionInfo info = s->info();
        return info;  // closing releases the lock
      },
      [this, ex](Result<SessionInfo> r) {
        if (!r.ok()) return ex->Send(FromStatus(r.error()));
        ex->Send(JsonResponse(201, SessionJson(*r, "idle")));
      });
}

void ServerImpl::ListSessions(const std::shared_ptr<Exchange>& ex, const Principal& who,
                              const Params&) {
  const Request& req = ex->request();
  Result<int> limit = LimitParam(req);
  if (!limit.ok()) return ex->Send(Problem(400, "invalid_request", limit.error().message()));
  SessionListOptions o;
  o.tenant = who.tenant;
  o.limit = *limit;
  if (std::string a = req.Query("agent"); !a.empty()) o.agent = a;
  o.after_id = req.Query("cursor");
  std::string status = req.Query("status");
  if (!status.empty() && status != "idle" && status != "running" && status != "paused") {
    return ex->Send(Problem(400, "invalid_request", "status must be idle, running or paused"));
  }
  // A page holds up to `limit` sessions of the wanted status: the store
  // is read page by page until that many match, the list ends, or
  // kMaxListScan sessions were looked at (then the page may be short and
  // its cursor goes on from the last session looked at).
  struct Page {
    std::vector<std::pair<SessionInfo, std::string>> items;  // session, status
    std::string cursor;                                      // empty: the list ended
  };
  std::vector<std::string> here = host_.Running();
  std::set<std::string> running(here.begin(), here.end());
  Blocking(
      [this, o, status, running = std::move(running)]() -> Result<Page> {
        std::set<std::string> paused;
        AL_ASSIGN_OR_RETURN(auto pending, engine_.store().ListPending(std::nullopt));
        for (const auto& p : pending) paused.insert(p.session_id);
        Page page;
        SessionListOptions q = o;
        int scanned = 0;
        for (;;) {
          AL_ASSIGN_OR_RETURN(std::vector<SessionInfo> batch, engine_.store().ListSessions(q));
          for (SessionInfo& info : batch) {
            ++scanned;
            std::string st = running.count(info.id)  ? "running"
                             : paused.count(info.id) ? "paused"
                                                     : "idle";
            page.cursor = info.id;
            if (!status.empty() && st != status) continue;
            page.items.emplace_back(std::move(info), std::move(st));
            if (static_cast<int>(page.items.size()) == o.limit) return page;
          }
          if (static_cast<int>(batch.size()) < q.limit) {
            page.cursor.clear();
            return page;
          }
          if (scanned >= kMaxListScan) return page;
          q.after_id = page.cursor;
        }
      },
      [this, ex](Result<Page> r) {
        if (!r.ok()) {
          if (r.error().code() == Code::kNotFound) {
            return ex->Send(Problem(400, "invalid_cursor", r.error().message()));
          }
          return ex->Send(FromStatus(r.error()));
        }
        Json items = Json::array();
        for (const auto& [info, st] : r->items) items.push_back(SessionJson(info, st));
        Json out = {{"items", items}, {"next_cursor", nullptr}};
        if (!r->cursor.empty()) out["next_cursor"] = r->cursor;
        ex->Send(JsonResponse(200, out));
      });
}

void ServerImpl::GetSession(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
  const std::string& id = p[0];
  struct Detail {
    SessionInfo info;
    std::string status;
    Json pending = Json::array();
    Json settings;
    Json last_turn;
    Json children = Json::array();
    int omitted_children = 0;
  };
  WithSession(ex, who, id, [this, ex, id, tenant = who.tenant](SessionInfo) {
    Blocking(
        [this, id, tenant]() -> Result<Detail> {
          Detail d;
          LoadOptions lo;
          lo.repair = false;
          AL_ASSIGN_OR_RETURN(SessionSnapshot snap, StoreFor(tenant)->Load(id, lo));
          d.info = snap.info;
          d.status = "idle";
          if (snap.open_checkpoint) {
            d.status = "paused";
          } else if (snap.decided_checkpoint) {
            d.status = "queued";
          } else if (snap.last_turn_end && snap.last_turn_end->stop == StopReason::kFailed) {
            d.status = "failed";
          }
          AL_ASSIGN_OR_RETURN(auto pending, engine_.ListPending(id));
          for (const auto& item : pending) d.pending.push_back(PendingJson(item, "pending"));
          AL_ASSIGN_OR_RETURN(auto settings, StoreFor(tenant)->GetSettings(id));
          d.settings = settings ? *settings : Json(nullptr);
          if (snap.last_turn_end) {
            const auto& t = *snap.last_turn_end;
            d.last_turn = {{"id", t.turn_id},
                           {"stop", std::string(StopReasonName(t.stop))},
                           {"reason", t.reason},
                           {"counters", ToJson(t.counters)}};
          }
          // The sessions its subagents started, each with its spending.
          snap.messages.clear();
          AL_ASSIGN_OR_RETURN(SessionTreeNode tree,
                              LoadSessionTree(engine_.store(), std::move(snap)));
          for (const SessionTreeNode& child : tree.children) {
            d.children.push_back(SessionTreeJson(child));
          }
          d.omitted_children = tree.omitted_children;
          return d;
        },
        [this, ex](Result<Detail> r) {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          std::string st = host_.LiveStatus(r->info.id);
          Json j = SessionJson(r->info, st.empty() ? r->status : st);
          j["pending"] = r->pending;
          j["settings"] = r->settings;
          j["last_turn"] = r->last_turn;
          j["children"] = r->children;
          if (r->omitted_children > 0) j["omitted_children"] = r->omitted_children;
          if (std::string turn = host_.RunningTurn(r->info.id); !turn.empty()) {
            j["running_turn"] = turn;
          }
          ex->Send(JsonResponse(200, j));
        });
  });
}

// What is wrong with a session's `metadata` from a client (empty: nothing):
// a JSON object of at most 16 KiB, or null where `null_clears`.
std::string ServerImpl::MetadataProblem(const Json& md, bool null_clears) {
  const bool shape_ok = md.is_object() || (null_clears && md.is_null());
  if (shape_ok && md.dump().size() <= 16384) return {};
  return null_clears ? "metadata must be null or a JSON object of at most 16 KiB"
                     : "metadata must be a JSON object of at most 16 KiB";
}

// PATCH /v1/sessions/{id} {title?, metadata?}: relabels the session
// (metadata null clears it); answers with the session as GET does.
void ServerImpl::PatchSession(const std::shared_ptr<Exchange>& ex, const Principal& who,
                              const Params& p) {
  Result<Json> body = ParseBody(ex->request());
  if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
  Status keys = OnlyKeys(*body, {"title", "metadata"});
  if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
  std::optional<std::string> title;
  std::optional<Json> metadata;
  if (body->contains("title")) {
    const Json& t = (*body)["title"];
    if (!t.is_string() || t.get<std::string>().size() > 200) {
      return ex->Send(
          Problem(400, "invalid_request", "title must be a string of at most 200 bytes"));
    }
    title = t.get<std::string>();
  }
  if (body->contains("metadata")) {
    const Json& md = (*body)["metadata"];
    if (std::string why = MetadataProblem(md, /*null_clears=*/true); !why.empty()) {
      return ex->Send(Problem(400, "invalid_request", why));
    }
    metadata = md;
  }
  WithSession(ex, who, p[0], [this, ex, who, p, title, metadata](SessionInfo) {
    Blocking([this, id = p[0], title, metadata,
              t = who.tenant]() { return StoreFor(t)->RelabelSession(id, title, metadata); },
             [this, ex, who, p](Status s) {
               if (!s.ok()) return ex->Send(FromStatus(s));
               GetSession(ex, who, p);
             });
  });
}

void ServerImpl::DeleteSession(const std::shared_ptr<Exchange>& ex, const Principal& who,
                               const Params& p) {
  const std::string& id = p[0];
  WithSession(ex, who, id, [this, ex, id, tenant = who.tenant](SessionInfo) {
    if (!host_.LiveStatus(id).empty()) {
      return ex->Send(Problem(409, "session_busy", "session " + id + " is running a turn"));
    }
    Blocking([this, id, tenant]() { return StoreFor(tenant)->RemoveSession(id); },
             [ex](Status s) {
               if (!s.ok()) return ex->Send(FromStatus(s));
               Response r;
               r.status = 204;
               r.content_type = "application/json";
               ex->Send(std::move(r));
             });
  });
}

void ServerImpl::Messages(const std::shared_ptr<Exchange>& ex, const Principal& who,
                          const Params& p) {
  const std::string& id = p[0];
  Result<int> limit = LimitParam(ex->request());
  if (!limit.ok()) return ex->Send(Problem(400, "invalid_request", limit.error().message()));
  Result<uint64_t> cursor = SeqParam(ex->request().Query("cursor"), "cursor");
  if (!cursor.ok()) return ex->Send(Problem(400, "invalid_cursor", cursor.error().message()));
  WithSession(ex, who, id, [this, ex, id, who, limit = *limit, from = *cursor](SessionInfo) {
    Blocking(
        [this, id, tenant = who.tenant]() -> Result<std::vector<Message>> {
          LoadOptions lo;
          lo.repair = false;
          AL_ASSIGN_OR_RETURN(SessionSnapshot snap, StoreFor(tenant)->Load(id, lo));
          return std::move(snap.messages);
        },
        [ex, limit, from](Result<std::vector<Message>> r) {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          Json items = Json::array();
          size_t end = std::min(r->size(), static_cast<size_t>(from) + limit);
          for (size_t i = from; i < end; ++i) items.push_back(ToJson((*r)[i]));
          Json out = {{"items", items}, {"next_cursor", nullptr}};
          if (end < r->size()) out["next_cursor"] = std::to_string(end);
          ex->Send(JsonResponse(200, out));
        });
  });
}

void ServerImpl::PostTurn(const std::shared_ptr<Exchange>& ex, const Principal& who,
                          const Params& p) {
  const std::string& id = p[0];
  Result<Json> body = ParseBody(ex->request());
  if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
  Status keys = OnlyKeys(*body, {"input", "on_busy", "continue"});
  if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
  bool continue_turn = false;
  if (body->contains("continue")) {
    const Json& c = (*body)["continue"];
    if (!c.is_boolean()) {
      return ex->Send(Problem(400, "invalid_request", "continue must be a boolean"));
    }
    continue_turn = c.get<bool>();
  }
  if (continue_turn) {
    if (body->contains("input")) {
      return ex->Send(
          Problem(400, "invalid_request", "give either input or continue: true, not both"));
    }
  } else if (!body->contains("input") || !(*body)["input"].is_string() ||
             (*body)["input"].get<std::string>().empty()) {
    return ex->Send(Problem(400, "invalid_request", "input must be a non-empty string"));
  }
  std::string on_busy = "reject";
  if (body->contains("on_busy")) {
    const Json& b = (*body)["on_busy"];
    if (!b.is_string() || (b != "reject" && b != "enqueue")) {
      return ex->Send(Problem(400, "invalid_request", "on_busy must be reject or enqueue"));
    }
    on_busy = b.get<std::string>();
  }
  std::string input = continue_turn ? std::string() : (*body)["input"].get<std::string>();
  const bool stream =
      ex->request().Header("Accept").find("text/event-stream") != std::string_view::npos;
  WithSession(
      ex, who, id, [this, ex, who, p, id, input, on_busy, continue_turn, stream](SessionInfo info) {
        switch (host_.Admit(id, info.tenant, ex, [this, ex, who, p] { PostTurn(ex, who, p); })) {
          case SessionHost::Admission::kLater:
            return;
          case SessionHost::Admission::kBusy:
            if (on_busy == "enqueue") return host_.Enqueue(ex, id, input, continue_turn);
            return ex->Send(Problem(409, "session_busy",
                                    "session " + id + " is running turn " + host_.RunningTurn(id) +
                                        " (send on_busy: \"enqueue\" to queue this input)"));
          case SessionHost::Admission::kStart:
            break;
        }
        TurnStart start;
        start.after_seq = info.last_seq;
        start.continue_turn = continue_turn;
        start.enqueue_if_busy = on_busy == "enqueue";
        if (stream) start.stream = ex->OpenStream();
        start.reply = ex;
        host_.StartTurn(id, input, std::move(start));
      });
}

void ServerImpl::GetTurn(const std::shared_ptr<Exchange>& ex, const Principal& who,
                         const Params& p) {
  host_.TurnStatus(ex, who, p[0], p[1], false, 0);
}

void ServerImpl::WaitTurn(const std::shared_ptr<Exchange>& ex, const Principal& who,
                          const Params& p) {
  std::string t = ex->request().Query("timeout_s", "30");
  if (t.empty() || t.size() > 3 || t.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(t) > 300) {
    return ex->Send(Problem(400, "invalid_request", "timeout_s must be 0-300"));
  }
  host_.TurnStatus(ex, who, p[0], p[1], true, std::stoi(t));
}

// POST /v1/sessions/{id}/compact {focus?}: compacts the view of the
// history the model gets (a turn asking the model for a summary; the
// store keeps every message), as `/compact` does at a terminal. Answers
// with that turn's outcome; its events reach the session's watchers.
void ServerImpl::CompactSession(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                const Params& p) {
  Result<Json> body = ParseBody(ex->request());
  if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
  Status keys = OnlyKeys(*body, {"focus"});
  if (!keys.ok()) return ex->Send(Problem(400, "invalid_request", keys.message()));
  std::string focus;
  if (body->contains("focus")) {
    const Json& f = (*body)["focus"];
    if (!f.is_string() || f.get<std::string>().size() > 2000) {
      return ex->Send(
          Problem(400, "invalid_request", "focus must be a string of at most 2000 bytes"));
    }
    focus = f.get<std::string>();
  }
  const std::string& id = p[0];
  WithSession(ex, who, id, [this, ex, who, p, id, focus](SessionInfo info) {
    if (!AdmitOrAnswerBusy(ex, id, info.tenant,
                           [this, ex, who, p] { CompactSession(ex, who, p); })) {
      return;
    }
    host_.Compact(ex, id, focus);
  });
}

void ServerImpl::CancelTurn(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
  const std::string& id = p[0];
  const std::string& turn_id = p[1];
  if (!host_.Cancel(id, who.tenant, turn_id)) {
    // Another tenant's session does not exist for the caller (404); the
    // caller's own has no such turn running here (409).
    return WithSession(ex, who, id, [ex, id, turn_id](SessionInfo) {
      ex->Send(
          Problem(409, "turn_not_running", "turn " + turn_id + " is not running in session " + id));
    });
  }
  ex->Send(JsonResponse(202, {{"id", turn_id}, {"session_id", id}, {"status", "cancelling"}}));
}

void ServerImpl::EventsJson(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
  const std::string& id = p[0];
  Result<uint64_t> after = SeqParam(ex->request().Query("after"), "after");
  if (!after.ok()) return ex->Send(Problem(400, "invalid_request", after.error().message()));
  Result<int> limit = LimitParam(ex->request());
  if (!limit.ok()) return ex->Send(Problem(400, "invalid_request", limit.error().message()));
  WithSession(ex, who, id, [this, ex, id, who, after = *after, limit = *limit](SessionInfo) {
    // One more than the page: whether a next page exists, read with it.
    EventQuery page;
    page.after_seq = after;
    page.limit = static_cast<size_t>(limit) + 1;
    Blocking([this, id, page, t = who.tenant]() { return StoreFor(t)->QueryEvents(id, page); },
             [ex, limit](Result<std::vector<StoredEvent>> r) {
               if (!r.ok()) return ex->Send(FromStatus(r.error()));
               std::string items = "[";
               size_t n = std::min(r->size(), static_cast<size_t>(limit));
               for (size_t i = 0; i < n; ++i) {
                 if (i) items += ",";
                 items += (*r)[i].json;
               }
               items += "]";
               Response resp;
               resp.body = "{\"items\":" + items + ",\"next_after\":" +
                           (n < r->size() ? std::to_string((*r)[n - 1].seq) : "null") + "}";
               ex->Send(std::move(resp));
             });
  });
}

// The cursor a stream starts after: Last-Event-ID, else ?after=.
Result<uint64_t> ServerImpl::StreamCursor(const Request& req) {
  std::string_view last = req.Header("Last-Event-ID");
  if (!last.empty()) {
    size_t dot = last.rfind('.');  // multiplexed ids are "<session>.<seq>"
    return SeqParam(dot == std::string_view::npos ? last : last.substr(dot + 1), "Last-Event-ID");
  }
  return SeqParam(req.Query("after"), "after");
}

void ServerImpl::StreamEvents(const std::shared_ptr<Exchange>& ex, const Principal& who,
                              std::vector<std::string> ids, bool multiplexed) {
  Result<uint64_t> after = StreamCursor(ex->request());
  if (!after.ok()) return ex->Send(Problem(400, "invalid_request", after.error().message()));
  std::map<std::string, uint64_t> cursors;
  for (const auto& id : ids) cursors[id] = *after;
  OpenSubscription(ex, who, std::move(cursors), multiplexed);
}

void ServerImpl::StreamOne(const std::shared_ptr<Exchange>& ex, const Principal& who,
                           const Params& p) {
  StreamEvents(ex, who, {p[0]}, false);
}

// GET /v1/events/stream?sessions=a,b[&after=a:10,b:7]
void ServerImpl::StreamMany(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params&) {
  std::string list = ex->request().Query("sessions");
  if (list.empty()) {
    return ex->Send(Problem(400, "invalid_request", "sessions=ID[,ID...] is required"));
  }
  std::map<std::string, uint64_t> cursors;
  for (std::string_view rest = list; !rest.empty();) {
    size_t c = rest.find(',');
    std::string id(rest.substr(0, c));
    rest = c == std::string_view::npos ? std::string_view() : rest.substr(c + 1);
    if (!id.empty()) cursors[id] = 0;
  }
  if (cursors.size() > 100) {
    return ex->Send(Problem(400, "invalid_request", "at most 100 sessions per stream"));
  }
  std::string after = ex->request().Query("after");
  for (std::string_view rest = after; !rest.empty();) {
    size_t c = rest.find(',');
    std::string_view pair = rest.substr(0, c);
    rest = c == std::string_view::npos ? std::string_view() : rest.substr(c + 1);
    size_t colon = pair.find(':');
    if (colon == std::string_view::npos) {
      return ex->Send(Problem(400, "invalid_request", "after must be ID:SEQ[,ID:SEQ...]"));
    }
    Result<uint64_t> seq = SeqParam(pair.substr(colon + 1), "after");
    if (!seq.ok()) return ex->Send(Problem(400, "invalid_request", seq.error().message()));
    auto it = cursors.find(std::string(pair.substr(0, colon)));
    if (it != cursors.end()) it->second = *seq;
  }
  std::string_view last = ex->request().Header("Last-Event-ID");
  if (size_t dot = last.rfind('.'); dot != std::string_view::npos) {
    auto it = cursors.find(std::string(last.substr(0, dot)));
    Result<uint64_t> seq = SeqParam(last.substr(dot + 1), "Last-Event-ID");
    if (it != cursors.end() && seq.ok()) it->second = std::max(it->second, *seq);
  }
  OpenSubscription(ex, who, std::move(cursors), true);
}

void ServerImpl::OpenSubscription(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                  std::map<std::string, uint64_t> cursors, bool multiplexed) {
  std::vector<std::string> ids;
  for (const auto& [id, c] : cursors) ids.push_back(id);
  // Every session must be the caller's.
  Blocking(
      [this, ids, tenant = who.tenant]() -> Result<std::vector<SessionInfo>> {
        std::vector<SessionInfo> out;
        auto store = StoreFor(tenant);
        for (const auto& id : ids) {
          AL_ASSIGN_OR_RETURN(SessionInfo s, store->GetSession(id));
          out.push_back(std::move(s));
        }
        return out;
      },
      [this, ex, who, cursors, multiplexed](Result<std::vector<SessionInfo>> r) {
        if (!r.ok() && r.error().code() != Code::kNotFound) {
          return ex->Send(FromStatus(r.error()));
        }
        bool mine = r.ok();
        if (mine) {
          for (const auto& s : *r) mine = mine && s.tenant == who.tenant;
        }
        if (!mine) return ex->Send(Problem(404, "not_found", "no such session"));
        if (ctx_.shutting_down) return ex->Send(Problem(503, "shutting_down", "shutting down"));
        hub_.Subscribe(ex, who.tenant, cursors, multiplexed);
      });
}

void ServerImpl::SessionPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                const Params& p) {
  ListPending(ex, who, p[0], std::nullopt);
}

// The session's MCP servers (docs/mcp.md, "Seeing the servers"). While a
// turn runs here they are the open session's, as they are now; otherwise
// none runs (they start with a turn and stop when it ends), and the
// configured ones are listed "stopped" (or "disabled").
void ServerImpl::SessionMcp(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p) {
  const std::string& id = p[0];
  WithSession(ex, who, id, [this, ex, id](SessionInfo info) {
    if (std::shared_ptr<Session> open = host_.OpenSession(id)) {
      Json servers = Json::array();
      for (const McpServerState& s : open->mcp_servers()) {
        servers.push_back(mcp::McpServerStateToJson(s));
      }
      return ex->Send(JsonResponse(200, {{"running", true}, {"servers", servers}}));
    }
    Blocking([this, info]() { return ctx_.McpServersOf(info); },
             [ex](Result<std::vector<McpServerSpec>> specs) {
               if (!specs.ok()) return ex->Send(FromStatus(specs.error()));
               Json servers = Json::array();
               for (const McpServerSpec& spec : *specs) {
                 servers.push_back(mcp::McpServerStateToJson(mcp::StoppedState(spec)));
               }
               ex->Send(JsonResponse(200, {{"running", false}, {"servers", servers}}));
             });
  });
}

// The session whose tenant owns a pending item: its tree's root (a
// subagent's item is listed in its root's inbox).
const std::string& ServerImpl::TreeRootOf(const PendingRecord& p) {
  return p.root_session_id.empty() ? p.session_id : p.root_session_id;
}

void ServerImpl::ListPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const std::string& session_id, std::optional<PendingKind> kind) {
  std::string status = ex->request().Query("status", "pending");
  if (status != "pending") {
    return ex->Send(Problem(400, "invalid_request",
                            "status must be pending (decided items are in the event log)"));
  }
  struct Listed {
    std::vector<PendingRecord> items;
    std::map<std::string, std::string> tenants;
  };
  Blocking(
      [this, session_id]() -> Result<Listed> {
        Listed l;
        std::optional<std::string> only;
        if (!session_id.empty()) only = session_id;
        AL_ASSIGN_OR_RETURN(l.items, engine_.ListPending(only));
        std::vector<std::string> ids;
        if (!session_id.empty()) ids.push_back(session_id);
        for (const auto& p : l.items) ids.push_back(TreeRootOf(p));
        for (const std::string& id : ids) {
          if (l.tenants.count(id)) continue;
          AL_ASSIGN_OR_RETURN(SessionInfo s, engine_.store().GetSession(id));
          l.tenants[id] = s.tenant;
        }
        return l;
      },
      [ex, who, session_id, kind](Result<Listed> r) {
        if (!r.ok()) return ex->Send(FromStatus(r.error()));
        if (!session_id.empty() && r->tenants[session_id] != who.tenant) {
          return ex->Send(Problem(404, "not_found", "no session " + session_id));
        }
        Json items = Json::array();
        for (const auto& p : r->items) {
          if (r->tenants[TreeRootOf(p)] != who.tenant) continue;
          if (kind && p.item.kind != *kind) continue;
          items.push_back(PendingJson(p, "pending"));
        }
        ex->Send(JsonResponse(200, {{"items", items}}));
      });
}

void ServerImpl::Approvals(const std::shared_ptr<Exchange>& ex, const Principal& who,
                           const Params&) {
  ListPending(ex, who, "", PendingKind::kApproval);
}

void ServerImpl::Questions(const std::shared_ptr<Exchange>& ex, const Principal& who,
                           const Params&) {
  ListPending(ex, who, "", PendingKind::kQuestion);
}

void ServerImpl::GetApproval(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const Params& p) {
  GetPending(ex, who, p[0], PendingKind::kApproval);
}

void ServerImpl::GetQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const Params& p) {
  GetPending(ex, who, p[0], PendingKind::kQuestion);
}

void ServerImpl::GetPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const std::string& pid, PendingKind kind) {
  WithPending(ex, who, pid, kind,
              [ex](PendingLookup l) { ex->Send(JsonResponse(200, LookupJson(l))); });
}

void ServerImpl::DecideApproval(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                const Params& p) {
  Decide(ex, who, p[0], PendingKind::kApproval);
}

void ServerImpl::AnswerQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who,
                                const Params& p) {
  Decide(ex, who, p[0], PendingKind::kQuestion);
}

// POST /v1/approvals/{id}/decision and /v1/questions/{id}/answer.
void ServerImpl::Decide(const std::shared_ptr<Exchange>& ex, const Principal& who,
                        const std::string& pid, PendingKind kind) {
  Resolution res;
  if (auto refused = ParseResolution(ex->request(), kind, "", kV1Fields, res)) {
    return ex->Send(std::move(*refused));
  }
  Resolve(ex, who, pid, kind, res, [ex](const Decided& o) {
    // `status` is the outcome's name (agentloop::DecisionOutcome) and
    // `detail` the sentence the CLI prints for it.
    const std::string status(DecisionOutcomeName(o.kind));
    Json body = {{"status", status}, {"session_id", o.session_id}, {"detail", o.Detail()}};
    if (o.earlier) {
      body["decided_by"] = o.earlier->by;
      body["decision"] = o.earlier->kind == ApprovalDecision::Kind::kDeny ? "deny"
                         : o.earlier->answer.empty()                      ? "approve"
                                                                          : "answer";
    }
    switch (o.kind) {
      case Decided::Kind::kRecorded:
        body["outstanding"] = o.outstanding;
        body["pending_url"] = "/v1/sessions/" + o.session_id + "/pending";
        return ex->Send(JsonResponse(200, body));
      case Decided::Kind::kResumed:
        body["turn_id"] = o.turn_id;
        body["events_url"] = "/v1/sessions/" + o.session_id + "/events/stream";
        body["wait_url"] = "/v1/sessions/" + o.session_id + "/turns/" + o.turn_id + "/wait";
        return ex->Send(JsonResponse(200, body));
      case Decided::Kind::kCancelled:
        body["already_resolved"] = true;
        return ex->Send(JsonResponse(200, body));
      case Decided::Kind::kConflict:
      case Decided::Kind::kInvalidEdit: {
        Response r = Problem(409, "approval_already_resolved", o.Detail());
        Json j = Json::parse(r.body, nullptr, false);
        if (j.is_object()) {
          j["outcome"] = status;
          if (body.contains("decided_by")) j["decided_by"] = body["decided_by"];
          if (body.contains("decision")) j["decision"] = body["decision"];
          r.body = DumpJson(j);
        }
        return ex->Send(std::move(r));
      }
      case Decided::Kind::kAlreadyResolved:
        body["already_resolved"] = true;
        body["turn_id"] = o.turn_id;
        return ex->Send(JsonResponse(200, body));
    }
  });
}

}  // namespace agentloop::server
