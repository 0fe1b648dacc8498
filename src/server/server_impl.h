// The server behind `Server` (server.h), in parts:
// - server.cc: listening, the Host, token, Origin and idempotency checks,
//   the route table and its dispatch, the small routes, shutdown;
// - routes_v1.cc: the /v1 API (sessions, turns, events, pending items);
// - routes_seeds.cc: the seeds' HTTP adapter (docs/server.md, "Compatibility");
// - routes_pugi.cc: the seeds' one-call engine route (server/pugi.h);
// - routes_links.cc: approve/deny/answer links and Slack's buttons;
// - routes_console.cc: the web console's sign-in and diffs (console.h);
// - decisions.cc: a decision about a pending item, as every route makes it;
// - outbox.cc: the agents' notifications (notifier.h, channels.h);
// with the session host (session_host.h), which runs the turns, and the
// event hub (event_hub.h), which streams their events. A route parses its
// request, checks the caller, and calls the store (reads) or the session
// host (anything that runs a turn). io thread only, except where a method
// says otherwise.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "providers/http_client.h"
#include "server/channels.h"
#include "server/event_hub.h"
#include "server/links.h"
#include "server/notifier.h"
#include "server/server.h"
#include "server/server_core.h"
#include "server/session_host.h"

namespace agentloop::server {

class ServerImpl final : public Server {
 public:
  ServerImpl(ServerOptions options, Engine& engine, boost::asio::io_context& io);
  ~ServerImpl() override;

  Status Listen();
  int port() const override { return http_.port(); }
  Status Run() override;
  void Shutdown() override;

  // For RouteTable.
  static std::vector<std::pair<boost::beast::http::verb, std::string_view>> RouteList();

 private:
  using http_verb = boost::beast::http::verb;
  // The routes, as data: `GET /v1/openapi.json` serves a spec that a test
  // holds equal to this table. `{x}` matches one path segment; handlers get
  // the matched segments in order.
  using RouteFn = void (ServerImpl::*)(const std::shared_ptr<Exchange>&, const Principal&,
                                       const Params&);
  struct RouteSpec {
    http_verb method;
    std::string_view pattern;  // below /v1
    unsigned scope;            // 0: none
    RouteFn fn;
  };

  // --- plumbing (server.cc) ---------------------------------------------
  template <typename Work, typename Then>
  void Blocking(Work work, Then then) {
    ctx_.Blocking(std::move(work), std::move(then));
  }
  template <typename Then>
  void WithSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& id,
                   Then then) {
    ctx_.WithSession(ex, who, id, std::move(then));
  }
  template <typename Then>
  void WithSessionInfo(const std::string& id, Then then) {
    ctx_.WithSessionInfo(id, std::move(then));
  }
  std::unique_ptr<TenantStore> StoreFor(const std::string& tenant) { return ctx_.StoreFor(tenant); }
  const AgentSpec* FindAgent(const std::string& name) const { return ctx_.FindAgent(name); }
  // The agent a new session that names none gets: the only one, or the one
  // marked default; null when the server serves several and none is.
  const AgentSpec* DefaultAgent() const;
  static SessionOptions OptionsToOpen(const std::string& id) {
    return ServerContext::OptionsToOpen(id);
  }
  // Whether a request for a turn on `id` starts one now (SessionHost::Admit).
  // False when it does not: `again` runs once the session is idle, or `ex`
  // was answered 409 session_busy because a turn runs on it here.
  bool AdmitOrAnswerBusy(const std::shared_ptr<Exchange>& ex, const std::string& id,
                         const std::string& tenant, std::function<void()> again);
  void AllowHosts();
  void ContinueDecidedBatches();
  void Handle(std::shared_ptr<Exchange> ex);
  static const std::vector<RouteSpec>& Routes();
  static const std::vector<RouteSpec>& CompatRoutes();
  void Route(const std::shared_ptr<Exchange>& ex, const Principal& who,
             const std::vector<std::string>& p, const std::vector<RouteSpec>& table);
  std::optional<Principal> Authenticate(const Request& req) const;
  bool OriginAllowed(const Request& req) const;
  void Idempotent(const std::shared_ptr<Exchange>& ex, const Principal& who,
                  std::function<void()> run);
  // An unfinished idempotency record older than this belongs to a request
  // that was abandoned (the server stopped while running it).
  static constexpr std::chrono::milliseconds kInFlightTtl{5 * 60 * 1000};
  static std::string ResponseToJson(const Response& r);
  static Result<Response> ResponseFromJson(const std::string& text);
  void BeginShutdown();
  void MaybeFinishShutdown();

  // --- small routes (server.cc) -----------------------------------------
  void Health(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);
  void Ready(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);
  void Agents(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);
  void Agent(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p);
  void OpenApi(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);
  void Metrics(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);
  static Json AgentJson(const AgentSpec& a);

  // --- the /v1 API (routes_v1.cc) ---------------------------------------
  Json SessionJson(const SessionInfo& s, std::string_view status) const;
  void CreateSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void ListSessions(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void GetSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  static std::string MetadataProblem(const Json& md, bool null_clears);
  void PatchSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void DeleteSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void Messages(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void PostTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void GetTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void WaitTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompactSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CancelTurn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void EventsJson(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  static Result<uint64_t> StreamCursor(const Request& req);
  void StreamEvents(const std::shared_ptr<Exchange>& ex, const Principal& who,
                    std::vector<std::string> ids, bool multiplexed);
  void StreamOne(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void StreamMany(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void OpenSubscription(const std::shared_ptr<Exchange>& ex, const Principal& who,
                        std::map<std::string, uint64_t> cursors, bool multiplexed);
  void SessionPending(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void SessionMcp(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  static const std::string& TreeRootOf(const PendingRecord& p);
  void ListPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                   const std::string& session_id, std::optional<PendingKind> kind);
  void Approvals(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void Questions(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void GetApproval(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void GetQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void GetPending(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& pid,
                  PendingKind kind);
  void DecideApproval(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void AnswerQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void Decide(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& pid,
              PendingKind kind);

  // --- decisions (decisions.cc) -----------------------------------------
  // What a decision came to (agentloop::DecisionOutcome), with what the
  // answer names.
  struct Decided {
    using Kind = agentloop::DecisionOutcome;
    Kind kind = Kind::kRecorded;
    std::string session_id;
    std::string turn_id;
    int outstanding = 0;  // kRecorded
    // kAlreadyResolved, kConflict: the decision recorded before.
    std::optional<ApprovalDecision> earlier;
    // The words every front end reports it with.
    std::string Detail() const { return DescribeDecisionOutcome(kind, outstanding, earlier); }
  };
  // How a decision body names its fields: the /v1 routes (snake_case,
  // unknown keys refused, `scope`) or the seeds' routes (camelCase, other
  // keys ignored as the seeds do).
  struct DecisionFields {
    const char* edited_args;
    bool strict;
  };
  static constexpr DecisionFields kV1Fields{"edited_args", true};
  static constexpr DecisionFields kSeedFields{"editedArgs", false};
  static std::string StateName(PendingLookup::State s);
  static Json LookupJson(const PendingLookup& l);
  // Finds the item and checks its tenant and kind; nullopt answered 404.
  template <typename Then>
  void WithPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                   const std::string& pid, PendingKind kind, Then then);
  // Reads a decision about an item of `kind` into `res` ({answer} for a
  // question; {decision, edited args, reason, scope} for an approval, where
  // `verb` fixes the decision when the route names it). Returns the 400 to
  // answer with when the body is wrong.
  static std::optional<Response> ParseResolution(const Request& req, PendingKind kind,
                                                 const std::string& verb, DecisionFields f,
                                                 Resolution& res);
  // Records `res` about the item `pid` (checked to be the caller's and of
  // `kind`: else 404 on `ex`) and tells `answer` what happened; a refused
  // edit is 400 on `ex` with the item still pending. When the decision
  // completes the batch this server continues the turn (kResumed) and
  // `finish`, when set, gets the continued turn's outcome.
  void Resolve(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& pid,
               PendingKind kind, Resolution res, std::function<void(const Decided&)> answer,
               TurnFinish finish = {}, std::string by = {});
  static Decided Settled(const PendingLookup& l, const Resolution& res);

  // --- the seeds' HTTP adapter (routes_seeds.cc) ------------------------
  void CompatPost(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompatPostStream(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompatResolveApproval(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const Params& p);
  void CompatAnswerQuestion(const std::shared_ptr<Exchange>& ex, const Principal& who,
                            const Params& p);
  void CompatApprove(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompatDeny(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompatAnswer(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompatMessage(const std::shared_ptr<Exchange>& ex, const Principal& who,
                     const std::string& name, bool stream);
  void CompatAnswer(const std::shared_ptr<Exchange>& ex, const std::string& sid,
                    const std::string& agent, const std::string& turn_id, uint64_t after,
                    const Result<TurnResult>& t);
  void CompatSession(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  void CompatResolve(const std::shared_ptr<Exchange>& ex, const Principal& who,
                     const std::string& pid, PendingKind kind, const std::string& verb,
                     bool durable);
  void CompatAnswerFor(const std::shared_ptr<Exchange>& ex, const std::string& sid,
                       const std::string& turn_id, const Result<TurnResult>& t);

  // --- the seeds' engine route (routes_pugi.cc) -------------------------
  static const std::set<std::string>& ReadOnlyToolNames();
  void PugiEngine(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);

  // --- the web console (routes_console.cc) ------------------------------
  static int64_t ConsoleNowMs();
  void ConsoleSignIn(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void ConsoleWhoAmI(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  void ConsoleSignOut(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params&);
  Status LoadRevokedCookies();
  void RefreshRevokedCookies();
  Json ConsoleWho(const Principal& who, bool cookie) const;
  Result<Json> ItemDiff(const SessionInfo& s, const PendingItem& item) const;
  void ApprovalDiff(const std::shared_ptr<Exchange>& ex, const Principal& who, const Params& p);
  static constexpr std::chrono::seconds kRevocationRefresh{10};

  // --- links and Slack's buttons (routes_links.cc) ----------------------
  template <typename Then>
  void WithLink(const std::shared_ptr<Exchange>& ex, const std::string& token, Then then,
                std::function<void(const LinkView&)> refused = {});
  static LinkView ItemView(const LinkClaim& claim, const PendingLookup& l, const SessionInfo& s);
  void LinkShow(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p);
  void LinkDecide(const std::shared_ptr<Exchange>& ex, const Principal&, const Params& p);
  void DecideLink(const std::shared_ptr<Exchange>& ex, const LinkClaim& claim,
                  const PendingLookup& l, const SessionInfo& s, Resolution res, std::string by,
                  std::function<void(const LinkView&)> reply);
  void SlackInteraction(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&);

  // --- notifications (outbox.cc) ----------------------------------------
  NotifierOptions NotifierOptionsFor();
  OutboxNotification PendingNotification(const AgentSpec& agent, const std::string& key,
                                         const std::string& sid, const std::string& turn_id,
                                         const PendingItem& item, int64_t created_at_s) const;
  std::vector<OutboxNotification> RecordNotifications(std::vector<OutboxNotification> notes);
  void Deliver(const OutboxNotification& n);
  // Records and delivers the notifications of a turn's end (session `sid`
  // of `agent`; empty: read from the store). A store that cannot be read
  // leaves nothing recorded: the same is tried again every notify_retry,
  // said on stderr each time, until the links' lifetime has passed.
  void Notify(const std::string& sid, const std::string& agent, const std::string& turn_id,
              const TurnResult& r, int attempt);
  void StartOutbox();
  void SweepOutbox();

  ServerContext ctx_;
  ServerOptions& options_ = ctx_.options;
  Engine& engine_ = ctx_.engine;
  boost::asio::io_context& io_ = ctx_.io;
  HttpServer http_;
  // The webhooks' HTTP client (NotifierOptionsFor; null without webhooks).
  // Declared before notifier_, whose options make it.
  std::shared_ptr<HttpClient> notify_http_;
  Notifier notifier_;
  ChannelSender channels_;  // email and Slack (channels.h)
  std::optional<boost::asio::steady_timer> outbox_timer_;
  std::set<std::string> delivering_;  // delivery ids the notifier has in flight
  // Slack signing secrets with the agent each belongs to.
  std::vector<std::pair<std::string, std::string>> slack_signers_;
  std::vector<std::string> slack_api_bases_;  // Slack channels' api_base_url
  // Agents with a webhook: the key their links are signed with.
  std::map<std::string, std::string> link_keys_;
  std::string public_url_;                 // set by Listen
  std::set<std::string> hosts_;            // the Host values answered (AllowHosts)
  std::string cookie_key_;                 // signs console cookies (ServerOptions::cookie_secret)
  std::set<std::string> revoked_cookies_;  // console sign-ins signed out
  std::optional<boost::asio::steady_timer> revocation_timer_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer drain_timer_;
  bool stop_posted_ = false;
  // Set by the last handler of this server's shutdown (shared: the handler
  // may run after a Run that ended on another stop).
  std::shared_ptr<std::atomic<bool>> finished_ = std::make_shared<std::atomic<bool>>(false);
  // Last: destroyed first, with the streams and sessions they still hold.
  EventHub hub_;
  SessionHost host_;
};

// Finds the item and checks its tenant and kind; nullopt answered 404.
template <typename Then>
void ServerImpl::WithPending(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const std::string& pid, PendingKind kind, Then then) {
  struct Found {
    std::optional<PendingLookup> lookup;
    std::string tenant;
  };
  ctx_.Blocking(
      [this, pid, tenant = who.tenant]() -> Result<Found> {
        Found f;
        auto store = ctx_.StoreFor(tenant);
        AL_ASSIGN_OR_RETURN(f.lookup, store->LookupPending(pid));
        if (f.lookup) {
          AL_ASSIGN_OR_RETURN(SessionInfo s, store->GetSession(f.lookup->record.session_id));
          f.tenant = s.tenant;
        }
        return f;
      },
      [ex, who, pid, kind, then = std::move(then)](Result<Found> r) mutable {
        if (!r.ok()) return ex->Send(FromStatus(r.error()));
        if (!r->lookup || r->tenant != who.tenant) {
          return ex->Send(
              Problem(404, "not_found", "no " + std::string(PendingKindName(kind)) + " " + pid));
        }
        if (r->lookup->record.item.kind != kind) {
          const bool question = r->lookup->record.item.kind == PendingKind::kQuestion;
          return ex->Send(Problem(
              400, "wrong_kind",
              pid + " is " + (question ? "a question: answer it with POST " : "an approval: ") +
                  (question ? "/v1/questions/" + pid + "/answer (or /pending-questions/" + pid +
                                  "/answer)"
                            : "decide it with POST /v1/approvals/" + pid +
                                  "/decision (or /pending-approvals/" + pid + "/resolve)")));
        }
        then(std::move(*r->lookup));
      });
}

}  // namespace agentloop::server
