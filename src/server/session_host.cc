// The session host: the state machine of each session served here (Phase), the
// turns it runs and what waits for them (session_host.h).
#include "server/session_host.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agentloop/events.h"

#include "base/ids.h"
#include "protocol/codec.h"

namespace agentloop::server {

// Receives a turn's events on the executor's threads and hands them to
// the io thread.
class SessionHost::TurnObserver final : public EventSink {
 public:
  TurnObserver(SessionHost* s, std::string id) : server(s), session_id(std::move(id)) {}
  Status OnEvent(const Event& e) override {
    std::string json = e.Dump(session_id);
    std::string call;
    if (const auto* begin = e.As<ToolCallBeginData>()) call = begin->id;
    if (const auto* end = e.As<ToolCallEndData>()) call = end->id;
    // Deltas come from the model's thread and the rest from pool threads:
    // the inbox keeps the order they were emitted in.
    server->turn_inbox_.Post([srv = server, id = session_id, type = e.type, turn = e.turn_id,
                              seq = ShouldPersist(e.type) ? e.seq : 0, json = std::move(json),
                              delta = DeltaText(e), call = std::move(call)]() mutable {
      srv->Measure(id, type, call);
      srv->OnTurnEvent(id, turn, seq, type, std::move(json), delta);
    });
    return Status::Ok();
  }
  static std::string DeltaText(const Event& e) {
    const auto* d = e.As<TextDeltaData>();
    return d != nullptr ? d->text : std::string();
  }
  SessionHost* server;
  std::string session_id;
};

SessionHost::SessionHost(ServerContext& ctx, EventHub& hub,
                         std::function<void(const std::string&, const std::string&,
                                            const std::string&, const TurnResult&)>
                             on_turn_end,
                         std::function<void()> on_settled)
    : ctx_(ctx),
      hub_(hub),
      on_turn_end_(std::move(on_turn_end)),
      on_settled_(std::move(on_settled)),
      turn_inbox_(ctx.io),
      executor_([&] {
        ThreadPoolExecutorOptions e;
        e.step_threads = std::max(1, ctx.options.worker_threads);
        e.max_tool_calls = ctx.options.max_concurrent_tools;
        return e;
      }()) {}

SessionHost::~SessionHost() = default;

void SessionHost::Shutdown() {
  // Every turn ended: nothing of theirs is still to come when the executor
  // drains.
  executor_.Shutdown();
  compactions_.join();
}

std::string SessionHost::RunningTurn(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? std::string() : it->second.turn_id;
}

std::string SessionHost::LiveStatus(const std::string& id) const {
  auto it = sessions_.find(id);
  return it != sessions_.end() && it->second.turn_active() ? "running" : "";
}

std::vector<std::string> SessionHost::Running() const {
  std::vector<std::string> out;
  for (const auto& [id, s] : sessions_) {
    if (s.turn_active()) out.push_back(id);
  }
  return out;
}

std::shared_ptr<Session> SessionHost::OpenSession(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.session;
}

std::string SessionHost::SessionOfTurn(const std::string& turn_id) const {
  auto it = turns_.find(turn_id);
  return it == turns_.end() ? std::string() : it->second.session_id;
}

bool SessionHost::AnyInUse() const {
  return std::any_of(sessions_.begin(), sessions_.end(),
                     [](const auto& s) { return s.second.in_use(); });
}

void SessionHost::StopAll() {
  for (auto& [id, s] : sessions_) {
    if (s.stop) s.stop->request_stop();
  }
}

void SessionHost::ContinueDecision(const std::string& id, const std::string& tenant,
                                   const std::string& turn_id, TurnFinish finish) {
  sessions_[id].tenant = tenant;
  TurnRecord& t = turns_[turn_id];
  t.session_id = id;
  t.tenant = tenant;
  t.done = false;
  ContinueWhenIdle(id, turn_id, std::move(finish));
}

Json SessionHost::QueuedReply(const std::string& id, int64_t position) {
  return {{"status", "queued"},
          {"session_id", id},
          {"position", position},
          {"events_url", "/v1/sessions/" + id + "/events/stream"}};
}

// Queues the input in the store (docs/server.md, "Queued inputs"): the
// holder of the session takes it when the running turn ends, this server
// or another sharing the store.
void SessionHost::Enqueue(const std::shared_ptr<Exchange>& ex, const std::string& id,
                          const std::string& input, bool continue_turn) {
  ctx_.Blocking(
      [this, id, input, continue_turn]() -> Result<int64_t> {
        AL_RETURN_IF_ERROR(QueueHasRoom(id));
        return ctx_.engine.store().EnqueueInput(id, input, continue_turn);
      },
      [this, ex, id](Result<int64_t> place) {
        if (!place.ok()) return ex->Send(FromStatus(place.error()));
        ex->Send(JsonResponse(202, QueuedReply(id, *place)));
        Served& live = sessions_[id];
        ++live.enqueued;
        // The turn ended while the input was being stored.
        if (!live.in_use()) StartNextQueued(id);
      });
}

// kResourceExhausted when the session has max_queued_inputs waiting. The
// count is read before the input is queued: requests that race may each
// pass (at most one per store worker beyond the cap). Off the io thread.
Status SessionHost::QueueHasRoom(const std::string& id) {
  AL_ASSIGN_OR_RETURN(std::vector<QueuedInput> waiting, ctx_.engine.store().ListQueuedInputs(id));
  if (static_cast<int64_t>(waiting.size()) >= ctx_.options.max_queued_inputs) {
    return ResourceExhausted("session " + id + " has " + std::to_string(waiting.size()) +
                             " inputs queued, the most it may have (server.max_queued_inputs); "
                             "send this one after its turns took some");
  }
  return Status::Ok();
}

// Off the io thread: opens the session (its lock) for `start` and decides
// what its turn runs.
SessionHost::Opened SessionHost::OpenForTurn(const std::string& id, std::string input,
                                             bool continue_turn, bool enqueue_if_busy,
                                             bool from_queue) {
  Opened out;
  out.input = std::move(input);
  out.continue_turn = continue_turn;
  SessionStore& store = ctx_.engine.store();
  if (from_queue) {
    // The common case, nothing queued, opens nothing.
    Result<std::vector<QueuedInput>> waiting = store.ListQueuedInputs(id);
    if (!waiting.ok() || waiting->empty()) {
      out.nothing = true;
      return out;
    }
  }
  Result<SessionOptions> o = ctx_.OptionsForTurn(id);
  if (!o.ok()) {
    out.session = o.error();
  } else {
    out.session = ctx_.engine.OpenSession(*o);
  }
  if (!out.session.ok()) {
    if (enqueue_if_busy && out.session.error().code() == Code::kBusy) {
      // Another process runs a turn on it: its holder takes the input.
      Status room = QueueHasRoom(id);
      Result<int64_t> place =
          room.ok() ? store.EnqueueInput(id, out.input, continue_turn) : Result<int64_t>(room);
      if (place.ok()) {
        out.queued = *place;
      } else {
        out.session = place.error();
      }
    }
    if (from_queue) {
      out.nothing = true;
      // Its holder may be a request of this server holding it for a
      // moment, which takes no queued input: looked at again (the
      // holder's turn, when it runs one, takes it first).
      if (out.session.error().code() == Code::kBusy) {
        out.busy = true;
        out.busy_status = out.session.error();
      }
    }
    return out;
  }
  if (from_queue && (*out.session)->Preview(op::Continue{.decided_batch_only = true}).ok()) {
    // A decided batch goes before the queue (the turn that continues it
    // looks at the queue when it ends).
    out.session = std::unique_ptr<Session>();  // closed here, on the pool
    out.nothing = true;
    out.decided = true;
    return out;
  }
  if (from_queue) {
    // Left in the queue: the turn takes it with its first commit
    // (op::Queued), so a crash before that loses nothing.
    Result<std::optional<QueuedInput>> next =
        store.NextQueuedInput(id, static_cast<int64_t>(getpid()));
    if (!next.ok() || !next->has_value()) {
      if (!next.ok()) {
        std::fprintf(stderr, "agentloop serve: session %s: its next queued input: %s\n", id.c_str(),
                     next.error().ToString().c_str());
      }
      out.session = std::unique_ptr<Session>();  // closed here, on the pool
      out.nothing = true;
      // Paused: a decision committed while the session was held here
      // found it held and left the batch to its holder (on one machine
      // nothing else wakes it); one committed after this release found
      // it free and continued it itself.
      out.decided = next.ok() && DecidedAfterRelease(id);
      return out;
    }
    out.input = (*next)->input;
    out.continue_turn = (*next)->continue_turn;
    out.queued_input = std::move(*next);
    return out;
  }
  if (out.continue_turn) {
    // As `agentloop resume ID` without a prompt: the engine says whether
    // anything is to continue.
    if (Result<std::string> what = (*out.session)->Preview(op::Continue{}); !what.ok()) {
      out.session = what.error();
      out.nothing_to_continue = true;
    }
  }
  return out;
}

// Off the io thread, after this server released the session's lock: its
// paused batch was decided meanwhile and waits for its holder.
bool SessionHost::DecidedAfterRelease(const std::string& id) {
  Result<std::optional<Checkpoint>> open = ctx_.engine.store().OpenCheckpoint(id);
  if (!open.ok() || open->has_value()) return false;
  Result<std::vector<std::string>> decided = ctx_.engine.store().ListDecided();
  return decided.ok() && std::find(decided->begin(), decided->end(), id) != decided->end();
}

// Opens the session on the pool and starts the turn (`input` empty and
// not start.continue_turn: continue its decided batch), answered as
// `start` says.
void SessionHost::StartTurn(const std::string& id, std::string input, TurnStart start) {
  Served& starting = sessions_[id];
  // A look at the queue is not a turn yet: clients see the session idle,
  // and a request for a turn waits for the look (Admit).
  starting.phase = start.from_queue ? Phase::kLooking : Phase::kStarting;
  if (start.finish) starting.finish.push_back(std::move(start.finish));
  std::shared_ptr<EventStream> stream = std::move(start.stream);
  if (stream) hub_.FollowTurn(id, stream, starting.tenant, start.after_seq, start.seeds);
  starting.reply = std::move(start.reply);
  const uint64_t enqueued = starting.enqueued;
  const bool from_queue = start.from_queue;
  ctx_.Blocking(
      [this, id, input = std::move(input), cont = start.continue_turn,
       enqueue = start.enqueue_if_busy, from_queue]() mutable {
        return OpenForTurn(id, std::move(input), cont, enqueue, from_queue);
      },
      [this, id, stream, seeds = start.seeds, enqueued, from_queue](Opened opened) mutable {
        StartOpened(id, stream, seeds, enqueued, from_queue, std::move(opened));
        on_settled_();
      });
}

void SessionHost::StartOpened(const std::string& id, const std::shared_ptr<EventStream>& stream,
                              bool seeds, uint64_t enqueued, bool from_queue, Opened opened) {
  Served& live = sessions_[id];
  // Whatever follows, the start (or the look) is over.
  live.phase = Phase::kIdle;
  // A continuation that does not start continues nothing.
  const bool continuing = std::exchange(live.continuing, false);
  if (opened.queued) {
    Json queued = QueuedReply(id, *opened.queued);
    if (live.reply) live.reply->Settle(JsonResponse(202, queued));
    live.reply.reset();
    // A streamed request learns it in the stream's one frame.
    if (stream) stream->Close(Frame("", "queued", DumpJson(queued)));
    ++live.enqueued;
    return StartNextQueued(id);
  }
  if (opened.nothing) {
    if (opened.busy) return RetryWhenFree(id, /*decided=*/false, opened.busy_status);
    if (opened.decided) {
      // Its queued inputs run after the continued turn.
      return ContinueWhenIdle(id, "", {});
    }
    // An input queued here meanwhile may have missed the look.
    if (from_queue && live.enqueued != enqueued) return StartNextQueued(id);
    return StartNextQueued(id, /*look=*/false);
  }
  if (!opened.session.ok()) {
    Status s = opened.session.error();
    if (continuing && (s.code() == Code::kBusy || ClaimMayBeTriedAgain(s))) {
      // Held for a moment (a decider checking edited arguments, a read of
      // a cut turn, a look at the queue, here or in another process), or
      // the store refused the open's writes (its lock): the decided batch
      // is still this server's to continue.
      if (s.code() != Code::kBusy) {
        std::fprintf(stderr,
                     "agentloop serve: session %s: the continuation of its decided batch could "
                     "not open it (tried again): %s\n",
                     id.c_str(), s.ToString().c_str());
      }
      for (auto& f : std::exchange(live.finish, {})) live.continue_finish.push_back(std::move(f));
      if (live.continue_turn_id.empty()) live.continue_turn_id = live.turn_id;
      live.turn_id.clear();
      return RetryWhenFree(id, /*decided=*/true, s);
    }
    Response r = opened.nothing_to_continue ? Problem(409, "nothing_to_continue", s.message())
                 : s.code() == Code::kFailedPrecondition
                     ? Problem(409, "session_paused", s.message())
                     : FromStatus(s);
    if (live.reply) live.reply->Settle(r);
    live.reply.reset();
    if (stream) {
      stream->Close(Frame("", "error", seeds ? DumpJson({{"error", s.message()}}) : r.body));
    }
    Result<TurnResult> failed = s;
    for (auto& f : std::exchange(live.finish, {})) f(live.turn_id, failed);
    if (from_queue) {
      std::fprintf(stderr, "agentloop serve: session %s: its queued input: %s\n", id.c_str(),
                   s.ToString().c_str());
    }
    if (continuing) {
      // Left decided in the store: a client's `continue` or a restart
      // takes it.
      std::fprintf(stderr,
                   "agentloop serve: session %s: the continuation of its decided batch: %s\n",
                   id.c_str(), s.ToString().c_str());
    }
    return StartNextQueued(id, /*look=*/from_queue);
  }
  std::shared_ptr<Session> session = std::move(*opened.session);
  // A continuation's tries count on until its turn ends (OnTurnDone): its
  // claim may still fail on the store.
  if (!continuing) live.busy_retries = 0;
  live.continuing = continuing;
  live.turn_stored = false;
  live.session = session;
  live.stop = std::make_shared<std::stop_source>();
  live.phase = Phase::kRunning;
  auto observer = std::make_shared<TurnObserver>(this, id);
  AsyncTurnCallbacks cb;
  cb.observer = observer.get();
  // `done` must not own the session: the io thread closes it
  // when the turn is over, which releases its lock.
  cb.done = [this, id, observer](Result<TurnResult> r) {
    // Through the inbox, after the turn's last event.
    turn_inbox_.Post([this, id, observer, r = std::move(r)]() mutable {
      (void)observer;
      OnTurnDone(id, std::move(r));
    });
  };
  // The operation: a queued input, a continuation, the decided batch (no
  // input), or the input; the engine says what each means.
  Op op = opened.queued_input    ? Op(op::Queued{*opened.queued_input})
          : opened.continue_turn ? Op(op::Continue{})
          : opened.input.empty() ? Op(op::Continue{.decided_batch_only = true})
                                 : Op(op::UserInput{opened.input});
  session->Submit(std::move(op), executor_, std::move(cb), live.stop->get_token());
  // Started by a look that began before the shutdown, after the running
  // turns were cancelled: cancelled as they were.
  if (ctx_.shutting_down && !ctx_.drained) live.stop->request_stop();
  // Requests that waited for a look at the queue find this turn.
  for (auto& fn : std::exchange(live.after_close, {})) fn();
}

// Model and tool latency from the events' arrival on the io thread.
void SessionHost::Measure(const std::string& id, EventType type, const std::string& call) {
  Served& live = sessions_[id];
  const auto now = std::chrono::steady_clock::now();
  auto seconds = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(now - t).count();
  };
  if (type == EventType::kTurnBegin) {
    ++ctx_.metrics.turns_started;
  } else if (type == EventType::kStepBegin) {
    live.step_started = now;
  } else if (type == EventType::kStepEnd && live.step_started) {
    ctx_.metrics.model.Observe(seconds(*live.step_started));
    live.step_started.reset();
  } else if (type == EventType::kToolCallBegin) {
    live.tools_started[call] = now;
  } else if (type == EventType::kToolCallEnd) {
    auto it = live.tools_started.find(call);
    if (it != live.tools_started.end()) {
      ctx_.metrics.tool.Observe(seconds(it->second));
      live.tools_started.erase(it);
    }
  }
}

void SessionHost::OnTurnEvent(const std::string& id, const std::string& turn_id, uint64_t seq,
                              EventType type, std::string json, const std::string& delta) {
  Served& live = sessions_[id];
  if (!turn_id.empty() && live.turn_id != turn_id && type == EventType::kTurnBegin) {
    live.turn_id = turn_id;
    TurnRecord& t = turns_[turn_id];
    t.session_id = id;
    t.tenant = live.tenant;
    t.done = false;
  }
  // A turn is answered 202 once its first commit has stored it: the engine
  // hands on a commit boundary event only after that commit succeeded.
  if (seq != 0 && !live.turn_stored && IsCommitBoundary(type)) live.turn_stored = true;
  if (live.reply && live.turn_stored && !live.turn_id.empty()) {
    live.reply->Settle(JsonResponse(202, TurnAccepted(id, live.turn_id)));
    live.reply.reset();
  }
  if (type == EventType::kTurnEnd && live.phase == Phase::kRunning) live.phase = Phase::kFinishing;
  hub_.OnTurnEvent(id, turn_id, seq, type, json, delta);
}

void SessionHost::OnTurnDone(const std::string& id, Result<TurnResult> r) {
  Served& live = sessions_[id];
  if (live.continuing && !live.turn_stored) {
    // Nothing of the continued turn was stored: its batch, claimed only
    // with the turn's first commit, is still decided.
    if (!r.ok() && ClaimMayBeTriedAgain(r.error())) return RetryContinuation(id, r.error());
    if (r.ok() && r->stop == StopReason::kFailed && !IsLeaseLostReason(r->reason)) {
      return RetryContinuation(id, Unavailable("the continued turn stored nothing: " + r->reason));
    }
  }
  std::string turn_id = live.turn_id;
  if (r.ok() && r->checkpoint) turn_id = r->checkpoint->turn_id;
  if (live.reply) {
    if (!r.ok()) {
      live.reply->Settle(r.error().code() == Code::kFailedPrecondition
                             ? Problem(409, "session_paused", r.error().message())
                             : FromStatus(r.error()));
    } else {
      // No commit of the turn succeeded (its first one would have answered
      // 202): the log does not have it.
      live.reply->Settle(Problem(503, "turn_not_stored", "the turn was not stored: " + r->reason));
    }
    live.reply.reset();
  }
  ++ctx_.metrics.turns_finished[r.ok() ? std::string(StopReasonName(r->stop)) : "error"];
  LogLeaseLost(id, r);
  // Nothing decided any more (another request or process continued it)
  // is not a failure.
  if (live.continuing && !r.ok() && r.error().code() != Code::kFailedPrecondition) {
    std::fprintf(stderr, "agentloop serve: session %s: the continuation of its decided batch: %s\n",
                 id.c_str(), r.error().ToString().c_str());
  }
  live.busy_retries = 0;
  if (r.ok()) on_turn_end_(id, live.session ? live.session->info().agent : "", turn_id, *r);
  for (auto& f : std::exchange(live.finish, {})) f(turn_id, r);
  live.tools_started.clear();
  live.step_started.reset();
  if (!turn_id.empty()) {
    TurnRecord& t = turns_[turn_id];
    t.session_id = id;
    t.tenant = live.tenant;
    t.done = true;
    t.result = r.ok() ? TurnResultJson(*r) : Json{{"error", r.error().message()}};
    auto waiters = std::move(t.waiters);
    for (auto& w : waiters) w();
    finished_turns_.push_back(turn_id);
    while (finished_turns_.size() > 10000) {
      turns_.erase(finished_turns_.front());
      finished_turns_.pop_front();
    }
  }
  // Closing the session releases its lock (a store call, on the pool);
  // the session counts as running until then, so the next turn cannot
  // find it still locked.
  live.continuing = false;
  std::shared_ptr<Session> session = std::move(live.session);
  live.stop.reset();
  live.turn_id.clear();
  live.phase = Phase::kClosing;
  hub_.OnTurnEnd(id, r);
  const bool paused = r.ok() && r->checkpoint.has_value();
  ctx_.Blocking(
      [this, id, session, paused]() mutable {
        session.reset();
        // A decision that came while the session was still held here
        // (from another process, which found it held) is this server's
        // to continue.
        return paused && DecidedAfterRelease(id);
      },
      [this, id](bool decided) {
        sessions_[id].phase = Phase::kIdle;
        if (decided && !ctx_.shutting_down) return ContinueWhenIdle(id, "", {});
        StartNextQueued(id);
        on_settled_();
      });
}

// A continuation's error that leaves its batch decided in the store for
// this server to claim again: the session's open, the read of the batch or
// the turn's first commit failed on the store, not because the batch is gone (kFailedPrecondition:
// nothing decided, or it still waits), the session is another's (kBusy, a
// lost lease: its holder continues it) or the server stops (kCancelled).
bool SessionHost::ClaimMayBeTriedAgain(const Status& s) {
  switch (s.code()) {
    case Code::kFailedPrecondition:
    case Code::kBusy:
    case Code::kCancelled:
    case Code::kNotFound:
    case Code::kLeaseLost:
      return false;
    default:
      return true;
  }
}

// The continuation of the session's decided batch stored nothing (reading
// the batch, or the turn's first commit, which claims it, failed on the
// store, e.g. while the disk refused writes): said on stderr, and tried
// again like a start that found the session held (RetryWhenFree), once
// this server released the session; whoever waits for the continued turn
// waits on.
void SessionHost::RetryContinuation(const std::string& id, const Status& error) {
  Served& live = sessions_[id];
  std::fprintf(stderr,
               "agentloop serve: session %s: the continuation of its decided batch failed "
               "(tried again): %s\n",
               id.c_str(), error.ToString().c_str());
  for (auto& f : std::exchange(live.finish, {})) live.continue_finish.push_back(std::move(f));
  if (live.continue_turn_id.empty()) live.continue_turn_id = live.turn_id;
  live.turn_id.clear();
  live.continuing = false;
  live.tools_started.clear();
  live.step_started.reset();
  std::shared_ptr<Session> session = std::move(live.session);
  live.stop.reset();
  live.phase = Phase::kClosing;
  hub_.OnTurnEnd(id, error);
  ctx_.Blocking(
      [session]() mutable {
        session.reset();
        return true;
      },
      [this, id, error](bool) {
        sessions_[id].phase = Phase::kIdle;
        RetryWhenFree(id, /*decided=*/true, error);
        on_settled_();
      });
}

Json SessionHost::TurnAccepted(const std::string& id, const std::string& turn_id) {
  return {{"id", turn_id},
          {"session_id", id},
          {"status", "running"},
          {"events_url", "/v1/sessions/" + id + "/events/stream"},
          {"wait_url", "/v1/sessions/" + id + "/turns/" + turn_id + "/wait"}};
}

// The session is idle here: runs its next queued input, if one waits and
// this server can take the session (`look`: look in the store), else
// forgets the session unless clients watch it; then asks again the
// requests that waited for it to close.
void SessionHost::StartNextQueued(const std::string& id, bool look) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Served& live = it->second;
  if (live.in_use()) return;
  auto again = std::exchange(live.after_close, {});
  if (live.continue_decided && !ctx_.shutting_down) {
    // A decided batch goes first; its turn looks at the queue when it ends.
    StartDecided(id);
  } else if (look && !ctx_.shutting_down) {
    TurnStart next;
    next.from_queue = true;
    StartTurn(id, std::string(), std::move(next));
  } else if (live.finish.empty() && again.empty()) {
    sessions_.erase(it);
  }
  for (auto& fn : again) fn();
}

SessionHost::Admission SessionHost::Admit(const std::string& id, const std::string& tenant,
                                          const std::shared_ptr<Exchange>& ex,
                                          std::function<void()> again) {
  Served& live = sessions_[id];
  live.tenant = tenant;
  switch (live.phase) {
    case Phase::kIdle:
      return Admission::kStart;
    case Phase::kStarting:
    case Phase::kRunning:
      return Admission::kBusy;
    case Phase::kLooking:
    case Phase::kFinishing:
    case Phase::kClosing:
      break;
  }
  live.after_close.push_back([this, ex, again = std::move(again)] {
    if (ctx_.shutting_down) return ex->Send(Problem(503, "shutting_down", "shutting down"));
    again();
  });
  return Admission::kLater;
}

void SessionHost::TurnStatus(const std::shared_ptr<Exchange>& ex, const Principal& who,
                             const std::string& id, const std::string& turn_id, bool wait,
                             int timeout_s) {
  auto it = turns_.find(turn_id);
  if (it != turns_.end() && it->second.session_id == id && it->second.tenant == who.tenant) {
    TurnRecord& t = it->second;
    if (t.done || !wait || timeout_s == 0) return ex->Send(JsonResponse(200, TurnJson(turn_id)));
    auto timer =
        std::make_shared<boost::asio::steady_timer>(ctx_.io, std::chrono::seconds(timeout_s));
    auto answered = std::make_shared<bool>(false);
    auto answer = [this, ex, turn_id, answered, timer] {
      if (*answered) return;
      *answered = true;
      timer->cancel();
      ex->Send(JsonResponse(200, TurnJson(turn_id)));
    };
    t.waiters.push_back(answer);
    timer->async_wait([answer](boost::system::error_code ec) {
      if (!ec) answer();
    });
    return;
  }
  // Not in memory: the turn's state from the store. A turn that began
  // and never ended there was cut (its process stopped) unless another
  // process runs it now: a takeover ends it (EndCutTurn) and it reads as
  // done, `failed`; while another process holds the session it is running.
  ctx_.WithSession(ex, who, id, [this, ex, id, turn_id, tenant = who.tenant](SessionInfo) {
    ctx_.Blocking(
        [this, id, turn_id, tenant]() -> Result<Json> {
          auto store = ctx_.StoreFor(tenant);
          EventQuery bounds;
          bounds.turn_id = turn_id;
          bounds.types = {std::string(EventTypeName(EventType::kTurnBegin)),
                          std::string(EventTypeName(EventType::kTurnEnd))};
          AL_ASSIGN_OR_RETURN(auto events, store->QueryEvents(id, bounds));
          Json out;
          bool begun = false;
          bool cut = false;
          for (const auto& e : events) {
            if (e.turn_id != turn_id) continue;
            if (e.kind() == EventType::kTurnBegin) {
              begun = true;
              cut = true;
              out = {{"id", turn_id}, {"session_id", id}, {"status", "running"}};
            }
            if (e.kind() != EventType::kTurnEnd) continue;
            Json j = Json::parse(e.json, nullptr, false);
            if (j.is_discarded()) continue;
            cut = false;
            out = {{"id", turn_id}, {"session_id", id}, {"status", "done"}, {"result", j}};
          }
          if (!begun && out.is_null()) {
            return NotFound("no turn " + turn_id + " in session " + id);
          }
          if (!cut) return out;
          // Only the session's newest turn can be unfinished.
          AL_ASSIGN_OR_RETURN(auto newest, store->QueryEvents(id, NewestTurnBoundary()));
          if (newest.empty() || newest[0].kind() != EventType::kTurnBegin ||
              newest[0].turn_id != turn_id) {
            return out;
          }
          Result<bool> taken = TakeOverExpired(ctx_.engine.store(), id, SystemNowMs());
          if (!taken.ok()) {
            if (taken.error().code() == Code::kBusy) return out;  // running elsewhere
            return taken.error();
          }
          AL_ASSIGN_OR_RETURN(auto after, store->QueryEvents(id, bounds));
          for (const auto& e : after) {
            if (e.turn_id != turn_id || e.kind() != EventType::kTurnEnd) continue;
            Json j = Json::parse(e.json, nullptr, false);
            if (j.is_discarded()) continue;
            out = {{"id", turn_id}, {"session_id", id}, {"status", "done"}, {"result", j}};
          }
          return out;
        },
        [ex](Result<Json> r) {
          if (!r.ok()) return ex->Send(FromStatus(r.error()));
          ex->Send(JsonResponse(200, *r));
        });
  });
}

Json SessionHost::TurnJson(const std::string& turn_id) const {
  const TurnRecord& t = turns_.at(turn_id);
  Json j = {{"id", turn_id}, {"session_id", t.session_id}, {"status", t.done ? "done" : "running"}};
  if (t.done) j["result"] = t.result;
  return j;
}

void SessionHost::Compact(const std::shared_ptr<Exchange>& ex, const std::string& id,
                          std::string focus) {
  Served& live = sessions_[id];
  live.phase = Phase::kStarting;  // in use until the compaction has ended
  live.stop = std::make_shared<std::stop_source>();
  auto observer = std::make_shared<TurnObserver>(this, id);
  // On the compaction threads, not the store workers: the summary is a
  // blocking model round trip (up to compaction.summary_timeout_ms) that
  // must not hold up other sessions' store calls.
  boost::asio::post(compactions_, [this, ex, id, focus = std::move(focus), observer,
                                   stop = live.stop->get_token()]() mutable {
    Result<TurnResult> r = [&]() -> Result<TurnResult> {
      AL_ASSIGN_OR_RETURN(auto session, ctx_.engine.OpenSession(ctx_.OptionsToOpen(id)));
      SessionCallbacks cb;
      cb.observer = observer.get();
      return RunBlocking(*session, op::Compact{focus}, cb, stop);
    }();
    boost::asio::post(ctx_.io, [this, ex, id, observer, r = std::move(r)]() mutable {
      // After the events the compaction handed over.
      turn_inbox_.Post([this, ex, id, observer, r = std::move(r)]() mutable {
        sessions_[id].phase = Phase::kIdle;
        Response answer = r.ok() ? JsonResponse(200, TurnResultJson(*r))
                          : r.error().code() == Code::kFailedPrecondition
                              ? Problem(409, "session_paused", r.error().message())
                              : FromStatus(r.error());
        OnTurnDone(id, std::move(r));
        ex->Send(std::move(answer));
      });
    });
  });
}

bool SessionHost::Cancel(const std::string& id, const std::string& tenant,
                         const std::string& turn_id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.tenant != tenant || it->second.turn_id != turn_id ||
      !it->second.stop) {
    return false;
  }
  it->second.stop->request_stop();
  return true;
}

bool SessionHost::StartSharedStore() {
  wakeups_ = std::make_unique<WakeupPoller>(
      ctx_.engine.store(), WakeupPollerOptions{}, [this](WakeupWork w) {
        boost::asio::post(ctx_.io, [this, w = std::move(w)] { OnWakeupWork(w); });
      });
  Result<bool> started = wakeups_->Start();
  if (!started.ok()) {
    std::fprintf(stderr, "agentloop serve: wake-ups: %s\n", started.error().ToString().c_str());
    return false;
  }
  return *started;
}

void SessionHost::StopSharedStore() {
  if (wakeups_) wakeups_->Stop();
}

void SessionHost::OnWakeupWork(const WakeupWork& w) {
  if (ctx_.shutting_down) return;
  for (const auto& id : w.decided) ContinueDecided(id);
  for (const auto& id : w.queued) RunQueued(id);
  for (const auto& id : w.expired) {
    auto it = sessions_.find(id);
    if (it != sessions_.end() && it->second.in_use()) continue;  // running here
    ctx_.Blocking([this, id]() { return TakeOverExpired(ctx_.engine.store(), id, SystemNowMs()); },
                  [this, id](Result<bool> decided) {
                    if (!decided.ok()) {
                      // Another instance took it over first.
                      if (decided.error().code() != Code::kBusy && !IsLeaseLost(decided.error())) {
                        std::fprintf(stderr, "agentloop serve: taking over session %s: %s\n",
                                     id.c_str(), decided.error().ToString().c_str());
                      }
                      return;
                    }
                    std::fprintf(
                        stderr,
                        "agentloop serve: took over session %s (its instance stopped renewing "
                        "its lease)\n",
                        id.c_str());
                    // The repaired session's queued inputs run after its decided
                    // batch (the turn that ends then looks at the queue), or now.
                    if (*decided) {
                      ContinueDecided(id);
                    } else {
                      RunQueued(id);
                    }
                  });
  }
}

// Continues the session's decided batch here if this server runs its
// agent and nothing runs it here yet; a session another instance holds
// stays with it (the open fails busy, quietly).
void SessionHost::ContinueDecided(const std::string& id) {
  WithServedSession(id, [this, id](Served&) { ContinueWhenIdle(id, "", {}); });
}

// Calls `then` with the session's live state (its tenant set) on the io
// thread if this server runs the session's agent and is not shutting
// down; else does nothing. Work found in the store (a decided batch,
// queued inputs) starts through it.
template <typename Then>
void SessionHost::WithServedSession(const std::string& id, Then then) {
  ctx_.Blocking([this, id]() { return ctx_.engine.store().GetSession(id); },
                [this, id, then = std::move(then)](Result<SessionInfo> s) mutable {
                  if (!s.ok() || ctx_.shutting_down || ctx_.FindAgent(s->agent) == nullptr) return;
                  Served& live = sessions_[id];
                  live.tenant = s->tenant;
                  then(live);
                });
}

// Continues the session's decided batch (`turn_id`, when known, is its
// turn) now if the session is idle here, else as soon as it is: a
// decision can complete the batch while the turn that paused is still
// finishing here (its `pending` event is out as soon as the pause is
// stored), while its session closes, or while its queue is looked at.
// `finish`, when set, is told the continued turn's outcome.
void SessionHost::ContinueWhenIdle(const std::string& id, const std::string& turn_id,
                                   TurnFinish finish) {
  Served& live = sessions_[id];
  if (live.continuing && (turn_id.empty() || live.turn_id.empty() || live.turn_id == turn_id)) {
    // Already being continued here (the decision was seen twice: by the
    // server that recorded it and after the pausing turn's release).
    if (finish) live.finish.push_back(std::move(finish));
    return;
  }
  live.continue_decided = true;
  if (!turn_id.empty()) live.continue_turn_id = turn_id;
  if (finish) live.continue_finish.push_back(std::move(finish));
  if (!live.in_use()) StartNextQueued(id);
}

// Starts the continuation ContinueWhenIdle asked for (the session is
// idle here).
void SessionHost::StartDecided(const std::string& id) {
  Served& live = sessions_[id];
  live.continue_decided = false;
  for (auto& f : std::exchange(live.continue_finish, {})) live.finish.push_back(std::move(f));
  const std::string turn_id = std::exchange(live.continue_turn_id, {});
  StartTurn(id, "", TurnStart{});
  Served& started = sessions_[id];
  started.continuing = true;
  if (!turn_id.empty()) started.turn_id = turn_id;
}

// A start this server owes the session (its decided batch when `decided`,
// else a look at its queue) found it held (`busy`): tried again on the io
// context's timer with a growing delay while the session is idle here (a
// start on it meanwhile, or its holder's own turn, takes the work with
// it); after kBusyRetries tries the start is given up and said on stderr.
void SessionHost::RetryWhenFree(const std::string& id, bool decided, const Status& busy) {
  Served& live = sessions_[id];
  if (ctx_.shutting_down) return StartNextQueued(id, /*look=*/false);
  if (live.busy_retries >= kBusyRetries) {
    live.busy_retries = 0;
    std::fprintf(stderr, "agentloop serve: session %s: %s given up: %s\n", id.c_str(),
                 decided ? "the continuation of its decided batch" : "its queued inputs",
                 busy.ToString().c_str());
    if (decided) {
      live.continue_decided = false;
      live.continue_turn_id.clear();
      Result<TurnResult> failed = busy;
      for (auto& f : std::exchange(live.continue_finish, {})) f("", failed);
    }
    return StartNextQueued(id, /*look=*/false);
  }
  const int shift = std::min(live.busy_retries, 6);
  ++live.busy_retries;
  if (decided) live.continue_decided = true;
  auto timer = std::make_shared<boost::asio::steady_timer>(
      ctx_.io, std::chrono::milliseconds(kBusyRetryFirstMs << shift));
  // The io context may outlive this host (a later server runs on it).
  timer->async_wait(
      [this, id, timer, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired() || ctx_.shutting_down) return;
        auto it = sessions_.find(id);
        if (it == sessions_.end() || it->second.in_use()) return;  // taken meanwhile
        StartNextQueued(id);
      });
  // Requests that waited for the start find the session idle.
  for (auto& fn : std::exchange(live.after_close, {})) fn();
}

// Runs the session's queued inputs here if this server runs its agent and
// nothing runs it here yet (one at a time, each after the turn before).
void SessionHost::RunQueued(const std::string& id) {
  WithServedSession(id, [this, id](Served& live) {
    if (!live.in_use()) StartNextQueued(id);
  });
}

// A turn stopped because this instance lost the session's lease: said on
// stderr (the turn itself ends `failed` with the reason).
void SessionHost::LogLeaseLost(const std::string& id, const Result<TurnResult>& r) {
  const bool lost = r.ok() ? r->stop == StopReason::kFailed && IsLeaseLostReason(r->reason)
                           : IsLeaseLost(r.error());
  if (!lost) return;
  std::fprintf(stderr, "agentloop serve: session %s: the turn stopped: %s\n", id.c_str(),
               r.ok() ? r->reason.c_str() : r.error().ToString().c_str());
}

}  // namespace agentloop::server
