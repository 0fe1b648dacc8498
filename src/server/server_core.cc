// The helpers and the context every part of the server shares (server_core.h).
#include "server/server_core.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "agentloop/event_data.h"

#include "protocol/codec.h"

namespace agentloop::server {

void Histogram::Observe(double seconds) {
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) ++counts[i];
  }
  ++count;
  sum += seconds;
}

void Histogram::Write(std::string& m, const std::string& name, std::string_view help) const {
  m += "# HELP " + name + " " + std::string(help) + "\n# TYPE " + name + " histogram\n";
  for (size_t i = 0; i < kBounds.size(); ++i) {
    char le[32];
    std::snprintf(le, sizeof le, "%g", kBounds[i]);
    m += name + "_bucket{le=\"" + le + "\"} " + std::to_string(counts[i]) + "\n";
  }
  m += name + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
  char total[64];
  std::snprintf(total, sizeof total, "%.6f", sum);
  m += name + "_sum " + total + "\n" + name + "_count " + std::to_string(count) + "\n";
}

std::string Frame(std::string_view id, std::string_view event, std::string_view data) {
  std::string f;
  f.reserve(data.size() + event.size() + id.size() + 24);
  if (!id.empty()) f.append("id: ").append(id).append("\n");
  f.append("event: ").append(event).append("\ndata: ").append(data).append("\n\n");
  return f;
}

Response JsonResponse(unsigned status, const Json& body) {
  Response r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

Response FromStatus(const Status& s) {
  switch (s.code()) {
    case Code::kNotFound:
      return Problem(404, "not_found", s.message());
    case Code::kInvalidArgument:
      return Problem(400, "invalid_request", s.message());
    case Code::kBusy:
      return Problem(409, "session_busy", s.message());
    case Code::kLeaseLost:
      // Another instance took the session over: this one stopped its work.
      return Problem(409, "lease_lost", s.message());
    case Code::kFailedPrecondition:
      return Problem(409, "failed_precondition", s.message());
    case Code::kAlreadyExists:
      return Problem(409, "already_exists", s.message());
    case Code::kUnavailable: {
      // The store or a dependency is down for now (a database restarting).
      Response r = Problem(503, "unavailable", s.message());
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    case Code::kResourceExhausted: {
      // A session's queue of inputs is full until its turns take some.
      Response r = Problem(429, "queue_full", s.message());
      r.headers.emplace_back("Retry-After", "5");
      return r;
    }
    default:
      return Problem(500, "internal", s.message());
  }
}

Json PendingJson(const PendingRecord& r, std::string_view state) {
  Json j = ToJson(r.item);
  j["type"] = std::string(PendingKindName(r.item.kind));
  j["state"] = std::string(state);
  j["session_id"] = r.session_id;
  j["turn_id"] = r.turn_id;
  j["checkpoint_id"] = r.checkpoint_id;
  j["created_at_ms"] = r.created_at_ms;
  // A subagent's item is shown in its root's inbox, with the path of agents.
  if (!r.root_session_id.empty() && r.root_session_id != r.session_id) {
    j["root_session_id"] = r.root_session_id;
  }
  if (r.item.kind == PendingKind::kQuestion) {
    j["answer_url"] = "/v1/questions/" + r.item.id + "/answer";
  } else {
    j["decision_url"] = "/v1/approvals/" + r.item.id + "/decision";
  }
  return j;
}

Json TurnResultJson(const TurnResult& r) {
  Json j = {{"stop", std::string(StopReasonName(r.stop))},
            {"reason", r.reason},
            {"final_text", r.final_text},
            {"truncated", r.truncated},
            {"counters", ToJson(r.counters)}};
  Json pending = Json::array();
  for (const auto& p : r.pending) pending.push_back(p.id);
  j["pending"] = std::move(pending);
  return j;
}

// Parses a JSON object body; an empty body is {}.
Result<Json> ParseBody(const Request& req) {
  if (req.body.empty()) return Json::object();
  Json j = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the request body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("the request body must be a JSON object");
  return j;
}

// Checks that `body` has only the `known` keys.
Status OnlyKeys(const Json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [k, v] : body.items()) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string list;
      for (auto n : known) list += (list.empty() ? "" : ", ") + std::string(n);
      return InvalidArgument("unknown field '" + k + "' (known: " + list + ")");
    }
  }
  return Status::Ok();
}

Result<int> LimitParam(const Request& req) {
  std::string text = req.Query("limit", "50");
  if (text.empty() || text.size() > 4 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("limit must be a number from 1 to 200");
  }
  int n = std::stoi(text);
  if (n < 1 || n > 200) return InvalidArgument("limit must be a number from 1 to 200");
  return n;
}

Result<uint64_t> SeqParam(std::string_view text, std::string_view what) {
  if (text.empty()) return uint64_t{0};
  if (text.size() > 19 || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return InvalidArgument(std::string(what) + " must be an event seq (a non-negative integer)");
  }
  return static_cast<uint64_t>(std::stoull(std::string(text)));
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    size_t s = path.find('/');
    out.emplace_back(path.substr(0, s));
    path = s == std::string_view::npos ? std::string_view() : path.substr(s);
  }
  return out;
}

ServerContext::ServerContext(ServerOptions o, Engine& e, boost::asio::io_context& i)
    : options(std::move(o)),
      engine(e),
      state(*ServerStateOf(e.store())),
      io(i),
      pool(static_cast<size_t>(std::max(1, options.worker_threads))) {}

const AgentSpec* ServerContext::FindAgent(const std::string& name) const {
  for (const auto& a : options.agents) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

SessionOptions ServerContext::OptionsToOpen(const std::string& session_id) {
  SessionOptions o;
  o.session_id = session_id;
  return o;
}

Result<std::vector<McpServerSpec>> ServerContext::McpServersOf(const SessionInfo& info) const {
  const AgentSpec* agent = FindAgent(info.agent);
  if (agent == nullptr) return std::vector<McpServerSpec>{};
  if (agent->for_workspace) {
    std::error_code ec;
    const std::filesystem::path root =
        std::filesystem::weakly_canonical(agent->options.workspace / info.tenant, ec);
    const std::filesystem::path rel = info.workspace.lexically_relative(root);
    if (!ec && !rel.empty() && *rel.begin() != "..") {
      AL_ASSIGN_OR_RETURN(SessionOptions chosen,
                          agent->for_workspace(info.tenant, rel == "." ? "" : rel.string()));
      return std::move(chosen.mcp_servers);
    }
  }
  return agent->options.mcp_servers;
}

Result<SessionOptions> ServerContext::OptionsForTurn(const std::string& session_id) const {
  SessionOptions o = OptionsToOpen(session_id);
  AL_ASSIGN_OR_RETURN(SessionInfo info, engine.store().GetSession(session_id));
  AL_ASSIGN_OR_RETURN(o.mcp_servers, McpServersOf(info));
  return o;
}

}  // namespace agentloop::server
