// The session host of `agentloop serve`: what this server does with each
// session it serves, as one state machine per session (Phase), and the
// turns it runs on them. Routes ask it to start a turn, queue an input,
// continue a decided batch, compact or cancel; it opens the session on the
// store pool, starts the engine's asynchronous turn, hands the turn's
// events to the event hub and its outcome to whoever waits for it, closes
// the session when the turn is over, and then takes what waits: a decided
// batch first, else the next queued input (docs/server.md, "Queued
// inputs"). io thread only, except where a method says otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "agentloop/executor.h"

#include "server/event_hub.h"
#include "server/inbox.h"
#include "server/server_core.h"
#include "server/wakeup.h"

namespace agentloop::server {

// How a turn started by the server is answered: `reply` with 202 once its id
// is known (Exchange::Settle: when `reply` carries `stream`, the 202 is only
// what a repeat of the request gets), `stream` with its events after
// `after_seq` until it ends; `finish` with its outcome.
struct TurnStart {
  std::shared_ptr<Exchange> reply;
  std::shared_ptr<EventStream> stream;
  uint64_t after_seq = 0;
  TurnFinish finish;
  // Continue the session's interrupted or failed newest turn (what
  // `agentloop resume ID` does without a prompt) instead of the input.
  bool continue_turn = false;
  // When another process holds the session, queue the input in the store
  // (answered 202 queued) instead of failing busy.
  bool enqueue_if_busy = false;
  // Run the session's next queued input (SessionStore::NextQueuedInput):
  // nothing happens when none waits or another process holds the session.
  bool from_queue = false;
  // `stream` is the seeds' stream route's: it carries loopengine's adapter
  // events too (Subscriber::seeds).
  bool seeds = false;
};

class SessionHost {
 public:
  // What this server is doing with a session. A session moves
  //   kIdle -> kLooking -> kIdle | kRunning        (a look at its queue)
  //   kIdle -> kStarting -> kIdle | kRunning       (a turn asked for)
  //   kRunning -> kFinishing -> kClosing -> kIdle  (the turn ends)
  //   kIdle -> kStarting -> kClosing -> kIdle      (a compaction)
  // and only from kIdle does anything start on it.
  enum class Phase {
    kIdle,
    // Looking for its next queued input: not a turn yet (clients see the
    // session idle), and a request for a turn waits for the look.
    kLooking,
    // A turn is being opened on the pool (or a compaction runs).
    kStarting,
    // Its turn runs: the session is open (and locked) here.
    kRunning,
    // The running turn's turn_end is out: its outcome and the close of its
    // session follow.
    kFinishing,
    // The finished turn's session is being closed (its lock released);
    // no other turn may open it yet.
    kClosing,
  };

  // What a request for a turn finds (Admit).
  enum class Admission {
    kStart,  // the session is idle here: start it
    kLater,  // the request is asked again once the session is idle
    kBusy,   // a turn runs on it here
  };

  // `on_turn_end(session, agent, turn, result)`: a turn that ran ended (the
  // server's notifications). `on_settled`: a session became idle or a
  // start finished (the server's shutdown waits for every one).
  SessionHost(ServerContext& ctx, EventHub& hub,
              std::function<void(const std::string&, const std::string&, const std::string&,
                                 const TurnResult&)>
                  on_turn_end,
              std::function<void()> on_settled);
  ~SessionHost();

  // Whether a request for a turn on `id` (of `tenant`) may start one now.
  // kLater: the session is just finishing a turn, closing its session or
  // looking at its queue, and `again` runs once that is over (or `ex` is
  // answered 503 when the server is shutting down by then), so a client
  // that starts its next turn as soon as it sees the last one end is not
  // told "busy".
  Admission Admit(const std::string& id, const std::string& tenant,
                  const std::shared_ptr<Exchange>& ex, std::function<void()> again);
  // The turn running on `id` here (empty: none known yet).
  std::string RunningTurn(const std::string& id) const;
  // "running" while a turn starts or runs on `id` here, else "".
  std::string LiveStatus(const std::string& id) const;
  // The sessions a turn starts or runs on here.
  std::vector<std::string> Running() const;
  // The open session of the turn running on `id` here, or null.
  std::shared_ptr<Session> OpenSession(const std::string& id) const;

  // Opens the session on the pool and starts the turn (`input` empty and
  // not start.continue_turn: continue its decided batch), answered as
  // `start` says. The session must be idle here (Admit).
  void StartTurn(const std::string& id, std::string input, TurnStart start);
  // Queues the input in the store (docs/server.md, "Queued inputs"): the
  // holder of the session takes it when the running turn ends, this server
  // or another sharing the store. Answers `ex` 202 queued.
  void Enqueue(const std::shared_ptr<Exchange>& ex, const std::string& id, const std::string& input,
               bool continue_turn);
  // Compacts the session (op::Compact on the compaction threads: the
  // summary is a blocking model call) and answers `ex` with its outcome.
  // The session must be idle here (Admit).
  void Compact(const std::shared_ptr<Exchange>& ex, const std::string& id, std::string focus);
  // Asks the turn `turn_id` running on `id` (of `tenant`) to stop; false
  // when no such turn runs here.
  bool Cancel(const std::string& id, const std::string& tenant, const std::string& turn_id);
  // GET .../turns/{turn}[/wait]: the turn's state, from memory while this
  // server knows it, else from the store (a cut turn is ended first).
  void TurnStatus(const std::shared_ptr<Exchange>& ex, const Principal& who, const std::string& id,
                  const std::string& turn_id, bool wait, int timeout_s);
  // The session of a turn this server ran or runs ("" when unknown).
  std::string SessionOfTurn(const std::string& turn_id) const;

  // A decision completed the batch of `turn_id` on `id` (of `tenant`):
  // continue it here (ContinueWhenIdle); `finish`, when set, is told the
  // continued turn's outcome.
  void ContinueDecision(const std::string& id, const std::string& tenant,
                        const std::string& turn_id, TurnFinish finish);
  // Work found in the store at start or announced by the wake-up poller.
  void ContinueDecided(const std::string& id);
  void RunQueued(const std::string& id);
  void OnWakeupWork(const WakeupWork& w);
  // With a store that announces wake-ups (PostgreSQL): continues batches
  // decided elsewhere, takes over sessions whose instance stopped mid-turn
  // (server/wakeup.h); false when the store announces none.
  bool StartSharedStore();
  void StopSharedStore();

  // Shutdown: whether any session is in use here, and stopping every turn.
  bool AnyInUse() const;
  void StopAll();
  // Ends the turns' executor (after every turn ended).
  void Shutdown();

 private:
  // What the host knows of a session (io thread only).
  struct Served {
    Phase phase = Phase::kIdle;
    std::string tenant;
    std::shared_ptr<Session> session;  // open (and locked) while a turn runs
    std::shared_ptr<std::stop_source> stop;
    std::string turn_id;
    // Inputs this server queued for the session (store.EnqueueInput): a
    // look at the queue that began before the latest one committed looks
    // again.
    uint64_t enqueued = 0;
    // Requests for a turn that came while the session was not idle but
    // about to be: asked again once it is (Admit).
    std::vector<std::function<void()>> after_close;
    // A decided batch to continue as soon as the session is idle here
    // (ContinueWhenIdle): its turn, when known, and who waits for the
    // continued turn's outcome.
    bool continue_decided = false;
    std::string continue_turn_id;
    std::vector<TurnFinish> continue_finish;
    // The turn starting or running here continues a decided batch
    // (StartDecided): a decision of that batch reported again waits for it.
    bool continuing = false;
    // A commit of the running turn succeeded (the engine hands on a commit
    // boundary event only then).
    bool turn_stored = false;
    // Starts owed to the session that found it held, or continuations
    // that failed on the store, in a row (RetryWhenFree); none once a turn
    // ends.
    int busy_retries = 0;
    // The POST that started the turn, answered 202 once the turn's id is
    // known.
    std::shared_ptr<Exchange> reply;
    // Told when the running (or starting) turn ends.
    std::vector<TurnFinish> finish;
    std::optional<std::chrono::steady_clock::time_point> step_started;
    std::map<std::string, std::chrono::steady_clock::time_point> tools_started;
    // In use: anything but idle (no other turn may open it).
    bool in_use() const { return phase != Phase::kIdle; }
    // A turn is starting or running (what clients see as "running").
    bool turn_active() const {
      return phase == Phase::kStarting || phase == Phase::kRunning || phase == Phase::kFinishing;
    }
  };

  struct TurnRecord {
    std::string session_id;
    std::string tenant;
    bool done = false;
    Json result;  // TurnResultJson, or {error}
    std::vector<std::function<void()>> waiters;
  };

  // What StartTurn's work on the pool found: the open session and what to
  // run on it, or why nothing runs.
  struct Opened {
    Result<std::unique_ptr<Session>> session = std::unique_ptr<Session>();
    std::string input;
    bool continue_turn = false;
    std::optional<int64_t> queued;  // enqueued (this place) because another holds it
    bool nothing = false;           // from_queue: no input was taken
    bool nothing_to_continue = false;
    bool decided = false;                     // from_queue: a decided batch waits (it goes first)
    std::optional<QueuedInput> queued_input;  // from_queue: the input to run
    bool busy = false;                        // from_queue: inputs wait but the session is held
    Status busy_status;
  };

  class TurnObserver;

  static Json QueuedReply(const std::string& id, int64_t position);
  Status QueueHasRoom(const std::string& id);
  Opened OpenForTurn(const std::string& id, std::string input, bool continue_turn,
                     bool enqueue_if_busy, bool from_queue);
  bool DecidedAfterRelease(const std::string& id);
  // Starts what OpenForTurn found (`stream`: the request's own, when it
  // follows the turn).
  void StartOpened(const std::string& id, const std::shared_ptr<EventStream>& stream, bool seeds,
                   uint64_t enqueued, bool from_queue, Opened opened);
  void Measure(const std::string& id, EventType type, const std::string& call);
  void OnTurnEvent(const std::string& id, const std::string& turn_id, uint64_t seq, EventType type,
                   std::string json, const std::string& delta);
  void OnTurnDone(const std::string& id, Result<TurnResult> r);
  static Json TurnAccepted(const std::string& id, const std::string& turn_id);
  void StartNextQueued(const std::string& id, bool look = true);
  Json TurnJson(const std::string& turn_id) const;
  template <typename Then>
  void WithServedSession(const std::string& id, Then then);
  void ContinueWhenIdle(const std::string& id, const std::string& turn_id, TurnFinish finish);
  void StartDecided(const std::string& id);
  void RetryWhenFree(const std::string& id, bool decided, const Status& busy);
  // RetryWhenFree's schedule: 20 ms doubling up to 1.28 s, about 30 s in
  // all.
  static constexpr int kBusyRetries = 28;
  static constexpr int kBusyRetryFirstMs = 20;
  static void LogLeaseLost(const std::string& id, const Result<TurnResult>& r);
  static bool ClaimMayBeTriedAgain(const Status& s);
  void RetryContinuation(const std::string& id, const Status& error);

  ServerContext& ctx_;
  EventHub& hub_;
  std::function<void(const std::string&, const std::string&, const std::string&, const TurnResult&)>
      on_turn_end_;
  std::function<void()> on_settled_;
  Inbox turn_inbox_;  // turns' events and outcomes, in order; outlives executor_
  ThreadPoolExecutor executor_;
  // Compactions, each a blocking model call: kept off the store pool. More
  // compactions than threads queue.
  boost::asio::thread_pool compactions_{2};
  std::unique_ptr<WakeupPoller> wakeups_;
  std::unordered_map<std::string, Served> sessions_;
  std::unordered_map<std::string, TurnRecord> turns_;
  std::deque<std::string> finished_turns_;
  // Expires with the host: RetryWhenFree's timers outlive it on the io
  // context.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace agentloop::server
