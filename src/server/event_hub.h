// The event hub of `agentloop serve`: who watches which session over
// server-sent events, and what each is sent. A watcher first gets the
// session's stored events after its cursor (replay), then the text in
// flight; live events published meanwhile are held and follow without
// repeats or gaps (a gap is fetched from the store). A durable event (one
// with a seq) is sent only once the commit that stores it has happened, so
// every `id: N` a watcher sees is the log's event N; deltas go out live. The session host
// (session_host.h) hands it every event of a turn that runs here; events written elsewhere (a
// decision, another instance's turn) are published from the store. io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "agentloop/event_type.h"

#include "server/server_core.h"

namespace agentloop::server {

// A client watching one or more sessions over server-sent events.
struct Subscriber {
  std::shared_ptr<EventStream> stream;
  std::string tenant;
  bool multiplexed = false;  // frames name their session in the id
  // The seeds' stream route: loopengine's adapter events (`approval:pending`,
  // `question:pending`, `done`, `error`) go with the native ones.
  bool seeds = false;
  // Per watched session: the highest seq sent, and whether a replay from
  // the store is under way (live frames wait in `held` meanwhile).
  struct Cursor {
    uint64_t last_seq = 0;
    bool replaying = false;
    std::vector<std::pair<uint64_t, std::string>> held;  // (seq or 0, frame)
  };
  std::map<std::string, Cursor> cursors;
  // Turn streams (POST .../turns with Accept: text/event-stream) end after
  // this turn's turn_end.
  std::string close_after_turn;
  // The turn ended while a replay was under way: end once it is sent.
  bool close_after_replay = false;
  bool replaying() const;
};

class EventHub {
 public:
  // `turn_active(id)`: a turn of the session runs here (its events come
  // from it, not from the store's tail). `on_closed`: a stream closed.
  EventHub(ServerContext& ctx, std::function<bool(const std::string&)> turn_active,
           std::function<void()> on_closed);

  // Opens a stream on `ex` that watches `cursors` (session -> the seq it
  // starts after) and replays each from the store.
  void Subscribe(const std::shared_ptr<Exchange>& ex, const std::string& tenant,
                 const std::map<std::string, uint64_t>& cursors, bool multiplexed);
  // Has `stream` follow the session's next turn from `after_seq` on: it
  // ends after that turn's turn_end (or with its error).
  void FollowTurn(const std::string& id, std::shared_ptr<EventStream> stream,
                  const std::string& tenant, uint64_t after_seq, bool seeds);

  // An event of a turn running here (`seq` 0: not stored, a delta).
  void OnTurnEvent(const std::string& id, const std::string& turn_id, uint64_t seq, EventType type,
                   const std::string& json, const std::string& delta);
  // The turn running here ended with `r`: streams that followed only it end.
  void OnTurnEnd(const std::string& id, const Result<TurnResult>& r);
  // Publishes the events the store holds after `after` for `id` (written
  // outside a turn of this server), when anyone watches it.
  void PublishStored(const std::string& id, uint64_t after);

  // With a shared store: tails the event log of the sessions watched here
  // while no turn of theirs runs here.
  void StartTail();
  void StopTail();
  // Ends every stream with `frame` (shutdown).
  void CloseAll(const std::string& frame);
  bool empty() const { return subscribers_.empty(); }
  size_t clients() const { return sse_clients_; }

 private:
  // What the hub keeps of a session it has watchers or a running turn of.
  struct Channel {
    std::vector<std::shared_ptr<Subscriber>> subscribers;
    // Durable events of the running turn observed since its last commit
    // boundary, held back from watchers: the engine commits them with the
    // next boundary event (IsCommitBoundary), which it hands on only once
    // that commit has succeeded. The text of the step in flight, with its
    // turn.
    struct Held {
      uint64_t seq;
      std::string type, turn_id, json;
    };
    std::vector<Held> uncommitted;
    std::string partial_text;
    std::string turn_id;
    bool unused() const {
      return subscribers.empty() && uncommitted.empty() && partial_text.empty();
    }
  };

  // The stored events a replay reads with one query: a stream that starts
  // at the beginning of a long log reads it a page at a time.
  static constexpr size_t kReplayPage = 256;

  void Attach(const std::shared_ptr<Subscriber>& sub, const std::string& id);
  void Replay(const std::shared_ptr<Subscriber>& sub, const std::string& id);
  void Publish(const std::string& id, uint64_t seq, const std::string& type,
               const std::string& turn_id, const std::string& json);
  void Send(Subscriber& sub, const std::string& id, uint64_t seq, std::string_view type,
            std::string_view json);
  void SendFrame(Subscriber& sub, const std::string& id, uint64_t seq, std::string frame);
  static std::optional<std::pair<std::string, std::string>> FrameEvent(const std::string& frame);
  void SendSeedEvents(Subscriber& sub, const std::string& id, const std::string& type,
                      const std::string& data);
  void ForgetIfUnused(const std::string& id);
  void TailWatched();

  ServerContext& ctx_;
  std::function<bool(const std::string&)> turn_active_;
  std::function<void()> on_closed_;
  std::unordered_map<std::string, Channel> channels_;
  std::set<std::shared_ptr<Subscriber>> subscribers_;
  size_t sse_clients_ = 0;
  std::optional<boost::asio::steady_timer> tail_timer_;
  std::set<std::string> tailing_;  // sessions with a tail read in flight
};

}  // namespace agentloop::server
