#include "acp/agent.h"

#include <exception>
#include <stop_token>
#include <system_error>
#include <utility>
#include <vector>

namespace agentloop::acp {
namespace fs = std::filesystem;
namespace {

// ACP's "resource not found" (an unknown session id).
constexpr int kResourceNotFound = -32002;
constexpr int kProtocolVersion = 1;

int RpcCodeFor(const Status& s) {
  switch (s.code()) {
    case Code::kInvalidArgument:
      return kInvalidParams;
    case Code::kNotFound:
      return kResourceNotFound;
    default:
      return kInternalError;
  }
}

Result<std::string> StringParam(const Json& params, const char* key) {
  auto it = params.find(key);
  if (it == params.end()) return InvalidArgument(std::string("missing \"") + key + "\"");
  if (!it->is_string() || it->get<std::string>().empty()) {
    return InvalidArgument(std::string("\"") + key + "\" must be a non-empty string");
  }
  return it->get<std::string>();
}

// `cwd` of session/new and session/load: an absolute path to a directory.
Result<fs::path> CwdParam(const Json& params) {
  AL_ASSIGN_OR_RETURN(std::string cwd, StringParam(params, "cwd"));
  fs::path p(cwd);
  if (!p.is_absolute())
    return InvalidArgument("\"cwd\" must be an absolute path, got '" + cwd + "'");
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return InvalidArgument("\"cwd\" " + cwd + " is not a directory");
  return p.lexically_normal();
}

// The prompt's content blocks as the text of one user message: text as it
// is, a resource link as a mention of its URI, an embedded text resource
// with its URI. Errors: a block this agent does not take (images, audio,
// binary resources), a malformed block.
Result<std::string> PromptText(const Json& params) {
  auto it = params.find("prompt");
  if (it == params.end() || !it->is_array()) {
    return InvalidArgument("\"prompt\" must be an array of content blocks");
  }
  std::string text;
  auto add = [&](const std::string& part) {
    if (!text.empty()) text += "\n";
    text += part;
  };
  for (const Json& b : *it) {
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) {
      return InvalidArgument("a prompt content block needs a \"type\"");
    }
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) {
        return InvalidArgument("a text content block needs a string \"text\"");
      }
      add(b["text"].get<std::string>());
    } else if (type == "resource_link") {
      if (!b.contains("uri") || !b["uri"].is_string()) {
        return InvalidArgument("a resource_link content block needs a string \"uri\"");
      }
      add("@" + b["uri"].get<std::string>());
    } else if (type == "resource") {
      const Json r = b.value("resource", Json());
      if (!r.is_object() || !r.contains("text") || !r["text"].is_string()) {
        return InvalidArgument("only text resources are supported in a prompt");
      }
      const std::string uri =
          r.contains("uri") && r["uri"].is_string() ? r["uri"].get<std::string>() : std::string();
      add("<context uri=\"" + uri + "\">\n" + r["text"].get<std::string>() + "\n</context>");
    } else {
      return InvalidArgument("content blocks of type '" + type +
                             "' are not supported (promptCapabilities)");
    }
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidArgument("the prompt is empty");
  }
  return text;
}

}  // namespace

struct Agent::AcpSession {
  std::unique_ptr<Session> session;
  std::unique_ptr<UpdateMapper> mapper;
  std::unique_ptr<AcpApprover> approver;
  std::mutex mu;
  bool running = false;   // Guarded by mu.
  std::stop_source stop;  // Guarded by mu: the running turn's.
  std::thread worker;     // The running (or last) turn's thread.
};

Agent::Agent(Engine& engine, AgentOptions options,
             std::function<void(const std::string&)> write_line, std::ostream& log)
    : engine_(engine), options_(std::move(options)), conn_(std::move(write_line)), log_(log) {}

Agent::~Agent() { Shutdown(); }

void Agent::HandleLine(std::string_view line) {
  ParsedLine parsed = ParseLine(line);
  if (parsed.error_reply) {
    conn_.Send(*parsed.error_reply);
    return;
  }
  if (!parsed.message) return;
  const Incoming& m = *parsed.message;
  switch (m.kind) {
    case Incoming::Kind::kRequest:
      // A handler's JSON library error (a value of an unexpected type it
      // missed) is the request's failure, not the process's.
      try {
        HandleRequest(m);
      } catch (const std::exception& e) {
        conn_.Send(MakeError(m.id, kInternalError, std::string("internal error: ") + e.what()));
      }
      break;
    case Incoming::Kind::kNotification:
      HandleNotification(m);
      break;
    case Incoming::Kind::kResponse:
      if (!conn_.Deliver(m)) {
        std::lock_guard<std::mutex> lock(log_mu_);
        log_ << "agentloop acp: a response to an unknown request id " << DumpJson(m.id)
             << " was ignored\n";
      }
      break;
  }
}

void Agent::HandleRequest(const Incoming& m) {
  const Json params = m.params.is_null() ? Json::object() : m.params;
  if (!params.is_object()) {
    conn_.Send(MakeError(m.id, kInvalidParams, "invalid params: \"params\" must be an object"));
    return;
  }
  auto answer = [&](Result<Json> r) {
    if (r.ok()) {
      conn_.Send(MakeResult(m.id, std::move(*r)));
    } else {
      conn_.Send(MakeError(m.id, RpcCodeFor(r.error()),
                           (RpcCodeFor(r.error()) == kInvalidParams ? "invalid params: " : "") +
                               r.error().message()));
    }
  };
  if (m.method == "initialize") {
    answer(Initialize(params));
  } else if (m.method == "authenticate") {
    answer(Json::object());
  } else if (m.method == "session/new") {
    answer(NewSession(params));
  } else if (m.method == "session/load") {
    answer(LoadSession(params));
  } else if (m.method == "session/prompt") {
    Status s = Prompt(m.id, params);
    if (!s.ok()) answer(s);
  } else {
    conn_.Send(MakeError(m.id, kMethodNotFound, "method not found: '" + m.method + "'"));
  }
}

void Agent::HandleNotification(const Incoming& m) {
  if (m.method == "session/cancel") {
    Cancel(m.params.is_object() ? m.params : Json::object());
    return;
  }
  // Unknown notifications are ignored, as JSON-RPC asks.
  std::lock_guard<std::mutex> lock(log_mu_);
  log_ << "agentloop acp: ignored the notification '" << m.method << "'\n";
}

Json Agent::Initialize(const Json& params) {
  // The one protocol version this agent speaks is answered, whatever the
  // client asked for.
  auto flag = [](const Json& j, const char* key) {
    auto it = j.is_object() ? j.find(key) : j.end();
    return j.is_object() && it != j.end() ? *it : Json();
  };
  const Json fs = flag(flag(params, "clientCapabilities"), "fs");
  client_fs_ = flag(fs, "readTextFile") == true && flag(fs, "writeTextFile") == true;
  return Json{{"protocolVersion", kProtocolVersion},
              {"agentCapabilities",
               Json{{"loadSession", true},
                    {"promptCapabilities",
                     Json{{"image", false}, {"audio", false}, {"embeddedContext", true}}},
                    {"mcpCapabilities", Json{{"http", false}, {"sse", false}}}}},
              {"authMethods", Json::array()},
              {"agentInfo",
               Json{{"name", "agentloop"}, {"title", "agentloop"}, {"version", options_.version}}}};
}

Result<std::shared_ptr<Agent::AcpSession>> Agent::Attach(std::unique_ptr<Session> session) {
  auto s = std::make_shared<AcpSession>();
  const std::string id = session->id();
  const fs::path workspace = session->options().workspace;
  s->session = std::move(session);
  s->mapper = std::make_unique<UpdateMapper>(workspace, [this, id](Json update) {
    conn_.Notify("session/update", Json{{"sessionId", id}, {"update", std::move(update)}});
  });
  s->approver = std::make_unique<AcpApprover>(
      id, workspace, *s->mapper,
      [this](std::string_view method, Json params, std::stop_token stop) {
        return conn_.Call(method, std::move(params), std::move(stop));
      });
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = sessions_.emplace(id, s);
  if (!inserted) return FailedPrecondition("session " + id + " is already open in this agent");
  return s;
}

std::shared_ptr<Agent::AcpSession> Agent::Find(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

// The session's files through the client, when it offers them.
std::shared_ptr<ClientFiles> Agent::ClientFilesFor(SessionOptions& options) {
  if (!client_fs_) return nullptr;
  auto files = std::make_shared<ClientFiles>(
      [this](std::string_view method, Json params, std::stop_token stop) {
        return conn_.Call(method, std::move(params), std::move(stop));
      });
  options.extensions.files = files;
  return files;
}

Result<Json> Agent::NewSession(const Json& params) {
  AL_ASSIGN_OR_RETURN(fs::path cwd, CwdParam(params));
  if (auto mcp = params.find("mcpServers");
      mcp != params.end() && mcp->is_array() && !mcp->empty()) {
    std::lock_guard<std::mutex> lock(log_mu_);
    log_ << "agentloop acp: warning: the " << mcp->size()
         << " MCP server(s) of session/new are not started; configure them in agentloop's "
            "configuration (docs/mcp.md)\n";
  }
  AL_ASSIGN_OR_RETURN(SessionOptions options, options_.new_session(cwd));
  options.session_id.clear();
  options.continue_latest = false;
  // A person answers in the editor: the ACP approver is the live one.
  options.interactive = true;
  std::shared_ptr<ClientFiles> files = ClientFilesFor(options);
  AL_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, engine_.OpenSession(options));
  if (files) files->set_session(session->id());
  for (const std::string& w : session->load_warnings()) {
    std::lock_guard<std::mutex> lock(log_mu_);
    log_ << "agentloop acp: warning: " << w << "\n";
  }
  AL_ASSIGN_OR_RETURN(std::shared_ptr<AcpSession> s, Attach(std::move(session)));
  return Json{{"sessionId", s->session->id()}};
}

Result<Json> Agent::LoadSession(const Json& params) {
  AL_ASSIGN_OR_RETURN(std::string id, StringParam(params, "sessionId"));
  AL_ASSIGN_OR_RETURN(fs::path cwd, CwdParam(params));
  if (Find(id) != nullptr) return InvalidArgument("session " + id + " is already open");
  AL_ASSIGN_OR_RETURN(SessionOptions options, options_.load_session(id, cwd));
  options.session_id = id;
  options.continue_latest = false;
  options.interactive = true;
  std::shared_ptr<ClientFiles> files = ClientFilesFor(options);
  AL_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, engine_.OpenSession(options));
  if (files) files->set_session(session->id());
  AL_ASSIGN_OR_RETURN(std::shared_ptr<AcpSession> s, Attach(std::move(session)));
  // The conversation so far, then the answer (the protocol's order).
  s->mapper->Replay(s->session->history());
  return Json::object();
}

Status Agent::Prompt(const Json& id, const Json& params) {
  AL_ASSIGN_OR_RETURN(std::string sid, StringParam(params, "sessionId"));
  AL_ASSIGN_OR_RETURN(std::string text, PromptText(params));
  std::shared_ptr<AcpSession> s = Find(sid);
  if (s == nullptr)
    return NotFound("unknown session '" + sid + "' (session/new or session/load first)");
  std::stop_token stop;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->running) {
      return InvalidArgument("session " + sid + " is already running a prompt; cancel it first");
    }
    s->running = true;
    s->stop = std::stop_source();
    stop = s->stop.get_token();
  }
  if (s->worker.joinable()) s->worker.join();  // the previous turn's thread, done
  s->worker = std::thread([this, s, id, sid, text = std::move(text), stop] {
    SessionCallbacks cb;
    cb.observer = s->mapper.get();
    cb.stream = s->mapper.get();
    cb.console_approver = s->approver.get();
    Result<TurnResult> r = RunBlocking(*s->session, op::UserInput{text}, cb, stop);
    Json reply;
    if (!r.ok()) {
      reply = stop.stop_requested() ? MakeResult(id, Json{{"stopReason", "cancelled"}})
                                    : MakeError(id, kInternalError, r.error().message());
    } else {
      std::optional<std::string_view> reason = AcpStopReason(*r, stop.stop_requested());
      if (!reason) {
        reply = MakeError(id, kInternalError, "the turn failed: " + r->reason);
      } else {
        if (r->stop != StopReason::kCompleted && *reason != "cancelled") {
          // Why the turn stopped, for the person (denied, paused, a budget).
          const std::string note =
              "\n\n(agentloop: " + std::string(StopReasonName(r->stop)) + ": " + r->reason + ")";
          Json content{{"type", "text"}, {"text", note}};
          Json update{{"sessionUpdate", "agent_message_chunk"}, {"content", std::move(content)}};
          conn_.Notify("session/update", Json{{"sessionId", sid}, {"update", std::move(update)}});
        }
        reply = MakeResult(id, Json{{"stopReason", std::string(*reason)}});
      }
    }
    {
      std::lock_guard<std::mutex> lock(s->mu);
      s->running = false;
    }
    conn_.Send(reply);
  });
  return Status::Ok();
}

void Agent::Cancel(const Json& params) {
  auto it = params.find("sessionId");
  if (it == params.end() || !it->is_string()) return;
  std::shared_ptr<AcpSession> s = Find(it->get<std::string>());
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->running) s->stop.request_stop();
}

void Agent::Shutdown() {
  std::vector<std::shared_ptr<AcpSession>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  for (const auto& s : all) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->running) s->stop.request_stop();
  }
  conn_.Close();  // a turn waiting for a permission answer stops waiting
  for (const auto& s : all) {
    if (s->worker.joinable()) s->worker.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.clear();
}

}  // namespace agentloop::acp
