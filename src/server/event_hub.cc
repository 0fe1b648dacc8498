// The event hub: watchers, replay and publication (event_hub.h).
#include "server/event_hub.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "agentloop/events.h"

#include "protocol/codec.h"

namespace agentloop::server {

bool Subscriber::replaying() const {
  return std::any_of(cursors.begin(), cursors.end(),
                     [](const auto& c) { return c.second.replaying; });
}

EventHub::EventHub(ServerContext& ctx, std::function<bool(const std::string&)> turn_active,
                   std::function<void()> on_closed)
    : ctx_(ctx), turn_active_(std::move(turn_active)), on_closed_(std::move(on_closed)) {}

void EventHub::Attach(const std::shared_ptr<Subscriber>& sub, const std::string& id) {
  channels_[id].subscribers.push_back(sub);
  subscribers_.insert(sub);
  std::weak_ptr<Subscriber> weak = sub;
  sub->stream->OnClose([this, weak] {
    auto s = weak.lock();
    if (!s) return;
    subscribers_.erase(s);
    if (s->close_after_turn.empty()) --sse_clients_;
    for (const auto& [sid, c] : s->cursors) {
      auto it = channels_.find(sid);
      if (it == channels_.end()) continue;
      std::erase(it->second.subscribers, s);
      ForgetIfUnused(sid);
    }
    on_closed_();
  });
  sub->stream->SetOverflowFrame([this, weak] {
    ++ctx_.metrics.overflows;
    auto s = weak.lock();
    Json last = Json::object();
    if (s) {
      for (const auto& [sid, c] : s->cursors) last[sid] = c.last_seq;
    }
    return Frame("", "stream.desync", DumpJson({{"last_seq", last}}));
  });
}

// Sends the session's stored events after the subscriber's cursor, a page
// (kReplayPage events, one query) at a time, then the text in flight; live
// frames that arrive meanwhile are held and sent after (without repeats).
void EventHub::Replay(const std::shared_ptr<Subscriber>& sub, const std::string& id) {
  Subscriber::Cursor& start = sub->cursors[id];
  if (start.replaying) return;
  start.replaying = true;
  EventQuery page;
  page.after_seq = start.last_seq;
  page.limit = kReplayPage;
  ctx_.Blocking([this, id, page]() { return ctx_.engine.store().QueryEvents(id, page); },
                [this, sub, id](Result<std::vector<StoredEvent>> r) {
                  if (sub->stream->closed()) return;
                  Subscriber::Cursor& c = sub->cursors[id];
                  if (!r.ok()) {
                    sub->stream->Close(Frame("", "error", FromStatus(r.error()).body));
                    return;
                  }
                  for (const auto& e : *r) {
                    if (e.seq <= c.last_seq) continue;
                    Send(*sub, id, e.seq, e.type, e.json);
                  }
                  c.replaying = false;
                  // A full page: the log may go on; the next page first.
                  if (r->size() == kReplayPage) return Replay(sub, id);
                  auto held = std::move(c.held);
                  c.held.clear();
                  auto it = channels_.find(id);
                  if (it != channels_.end() && !it->second.partial_text.empty()) {
                    Json snap = {{"type", "message.snapshot"},
                                 {"session_id", id},
                                 {"turn_id", it->second.turn_id},
                                 {"text", it->second.partial_text}};
                    SendFrame(*sub, id, 0, Frame("", "message.snapshot", DumpJson(snap)));
                  }
                  for (auto& [seq, frame] : held) {
                    if (seq == 0) continue;  // deltas: the snapshot has their text
                    if (seq <= c.last_seq) continue;
                    if (seq > c.last_seq + 1) return Replay(sub, id);  // still a gap
                    SendFrame(*sub, id, seq, frame);
                  }
                  if (sub->close_after_replay && !sub->replaying()) sub->stream->Close({});
                });
}

void EventHub::Send(Subscriber& sub, const std::string& id, uint64_t seq, std::string_view type,
                    std::string_view json) {
  std::string frame_id = seq == 0          ? std::string()
                         : sub.multiplexed ? id + "." + std::to_string(seq)
                                           : std::to_string(seq);
  SendFrame(sub, id, seq, Frame(frame_id, type, json));
}

void EventHub::SendFrame(Subscriber& sub, const std::string& id, uint64_t seq, std::string frame) {
  if (sub.multiplexed && seq != 0 && frame.rfind("id: ", 0) == 0 &&
      frame.compare(4, id.size() + 1, id + ".") != 0) {
    size_t nl = frame.find('\n');
    frame = "id: " + id + "." + std::to_string(seq) + frame.substr(nl);
  }
  if (seq != 0) sub.cursors[id].last_seq = seq;
  std::optional<std::pair<std::string, std::string>> native;
  if (sub.seeds) native = FrameEvent(frame);
  sub.stream->Push(std::move(frame));
  if (native) SendSeedEvents(sub, id, native->first, native->second);
}

// The event name and data of an SSE frame.
std::optional<std::pair<std::string, std::string>> EventHub::FrameEvent(const std::string& frame) {
  size_t e = frame.rfind("event: ", 0) == 0 ? 0 : frame.find("\nevent: ");
  size_t d = frame.find("\ndata: ");
  if (e == std::string::npos || d == std::string::npos) return std::nullopt;
  e += frame[e] == '\n' ? 8 : 7;
  size_t e_end = frame.find('\n', e);
  size_t d_end = frame.find('\n', d + 7);
  return std::make_pair(frame.substr(e, e_end - e), frame.substr(d + 7, d_end - d - 7));
}

// loopengine's adapter events for a native event (SEMANTICS 4.11): each
// pending item as `approval:pending` or `question:pending`, and `done
// {text, stopReason?}` with the turn's end (the stream ends after it).
void EventHub::SendSeedEvents(Subscriber& sub, const std::string& id, const std::string& type,
                              const std::string& data) {
  const std::optional<EventType> t = ParseEventType(type);
  if (t != EventType::kPending && t != EventType::kTurnEnd) return;
  Result<Event> e = Event::FromJson(Json::parse(data, nullptr, false));
  if (!e.ok()) return;
  if (const auto* end = e->As<TurnEndData>()) {
    Json done = {{"text", end->final_text}};
    if (end->stop != StopReason::kCompleted) done["stopReason"] = StopReasonName(end->stop);
    sub.stream->Push(Frame("", "done", DumpJson(done)));
    return;
  }
  const auto* pending = e->As<PendingData>();
  if (pending == nullptr) return;
  for (const PendingItem& item : pending->items) {
    const bool question = item.kind == PendingKind::kQuestion;
    const Json args = item.arguments.is_object() ? item.arguments : Json::object();
    Json j = {{"id", item.id},         {"tool", item.tool}, {"args", args},
              {"reason", item.reason}, {"sessionId", id},   {"requestedAt", e->ts}};
    if (question) {
      j["question"] = args.value("question", "");
      if (args.contains("options")) j["options"] = args["options"];
      j["answerUrl"] = "/pending-questions/" + item.id + "/answer";
    } else {
      j["resolveUrl"] = "/pending-approvals/" + item.id + "/resolve";
    }
    sub.stream->Push(Frame("", question ? "question:pending" : "approval:pending", DumpJson(j)));
  }
}

void EventHub::Publish(const std::string& id, uint64_t seq, const std::string& type,
                       const std::string& turn_id, const std::string& json) {
  auto it = channels_.find(id);
  if (it == channels_.end()) return;
  const bool ends_turn = ParseEventType(type) == EventType::kTurnEnd;
  for (auto& sub : std::vector<std::shared_ptr<Subscriber>>(it->second.subscribers)) {
    if (sub->stream->closed()) continue;
    Subscriber::Cursor& c = sub->cursors[id];
    if (c.replaying) {
      std::string frame = Frame(seq ? std::to_string(seq) : "", type, json);
      c.held.emplace_back(seq, std::move(frame));
      continue;
    }
    if (seq != 0) {
      if (seq <= c.last_seq) continue;
      if (seq > c.last_seq + 1) {
        // Events written outside this server's turns (a decision, a
        // settings change) came between: fetch them first.
        c.held.emplace_back(seq, Frame(std::to_string(seq), type, json));
        Replay(sub, id);
        continue;
      }
    }
    Send(*sub, id, seq, type, json);
    if (ends_turn && !sub->close_after_turn.empty() &&
        (sub->close_after_turn == "*" || sub->close_after_turn == turn_id)) {
      sub->stream->Close({});
    }
  }
}

// Publishes events the store holds after `after` for `id` (written outside
// a turn of this server).
void EventHub::PublishStored(const std::string& id, uint64_t after) {
  auto it = channels_.find(id);
  if (it == channels_.end() || it->second.subscribers.empty()) return;
  ctx_.Blocking([this, id, after]() { return ctx_.engine.store().Events(id, after); },
                [this, id](Result<std::vector<StoredEvent>> r) {
                  if (!r.ok()) return;
                  for (const auto& e : *r) Publish(id, e.seq, e.type, e.turn_id, e.json);
                });
}

void EventHub::TailWatched() {
  tail_timer_->expires_after(std::chrono::milliseconds(250));
  tail_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || ctx_.shutting_down) return;
    for (auto& [id, channel] : channels_) {
      if (channel.subscribers.empty() || tailing_.count(id) != 0 || turn_active_(id)) continue;
      std::optional<uint64_t> after;
      for (const auto& sub : channel.subscribers) {
        auto c = sub->cursors.find(id);
        if (c == sub->cursors.end() || c->second.replaying) continue;
        after = std::min(after.value_or(c->second.last_seq), c->second.last_seq);
      }
      if (!after) continue;
      tailing_.insert(id);
      ctx_.Blocking(
          [this, id = id, after = *after]() { return ctx_.engine.store().Events(id, after); },
          [this, id = id](Result<std::vector<StoredEvent>> r) {
            tailing_.erase(id);
            if (!r.ok()) return;
            if (!channels_.contains(id) || turn_active_(id)) return;
            for (const auto& e : *r) Publish(id, e.seq, e.type, e.turn_id, e.json);
          });
    }
    TailWatched();
  });
}

void EventHub::Subscribe(const std::shared_ptr<Exchange>& ex, const std::string& tenant,
                         const std::map<std::string, uint64_t>& cursors, bool multiplexed) {
  auto sub = std::make_shared<Subscriber>();
  sub->tenant = tenant;
  sub->multiplexed = multiplexed;
  sub->stream = ex->OpenStream();
  ++sse_clients_;
  for (const auto& [id, after] : cursors) {
    sub->cursors[id].last_seq = after;
    Attach(sub, id);
    Replay(sub, id);
  }
}

void EventHub::FollowTurn(const std::string& id, std::shared_ptr<EventStream> stream,
                          const std::string& tenant, uint64_t after_seq, bool seeds) {
  auto sub = std::make_shared<Subscriber>();
  sub->stream = std::move(stream);
  sub->tenant = tenant;
  sub->cursors[id].last_seq = after_seq;
  sub->close_after_turn = "*";  // the first turn_end seen
  sub->seeds = seeds;
  Attach(sub, id);
}

void EventHub::OnTurnEvent(const std::string& id, const std::string& turn_id, uint64_t seq,
                           EventType type, const std::string& json, const std::string& delta) {
  Channel& channel = channels_[id];
  if (!turn_id.empty()) channel.turn_id = turn_id;
  if (type == EventType::kTextDelta) {
    channel.partial_text += delta;
  } else if (type == EventType::kStepBegin || type == EventType::kMessage) {
    channel.partial_text.clear();
  }
  const std::string name(EventTypeName(type));
  if (seq != 0) {
    if (!IsCommitBoundary(type)) {
      // Stored with the next boundary's commit: sent with it.
      channel.uncommitted.push_back({seq, name, turn_id, json});
      return;
    }
    // The engine hands on a boundary event after its commit, which stored
    // every event held before it.
    for (const Channel::Held& e : std::exchange(channel.uncommitted, {})) {
      Publish(id, e.seq, e.type, e.turn_id, e.json);
    }
  }
  ForgetIfUnused(id);
  Publish(id, seq, name, turn_id, json);
}

void EventHub::OnTurnEnd(const std::string& id, const Result<TurnResult>& r) {
  auto it = channels_.find(id);
  if (it == channels_.end()) return;
  it->second.partial_text.clear();
  // Held events no boundary commit was seen for: the turn's last commit
  // (after its end) decides whether the store has them, so what the store
  // holds from the first of them on is published.
  if (!it->second.uncommitted.empty()) {
    const uint64_t after = it->second.uncommitted.front().seq - 1;
    it->second.uncommitted.clear();
    PublishStored(id, after);
  }
  it->second.turn_id.clear();
  // Streams that followed only this turn end with it.
  for (auto& sub : std::vector<std::shared_ptr<Subscriber>>(it->second.subscribers)) {
    if (sub->close_after_turn.empty()) continue;
    if (!r.ok() && sub->seeds) {
      sub->stream->Close(Frame("", "error", DumpJson({{"error", r.error().message()}})));
    } else if (!r.ok()) {
      sub->stream->Close(Frame("", "error", FromStatus(r.error()).body));
    } else if (sub->replaying()) {
      sub->close_after_replay = true;
    } else {
      sub->stream->Close({});
    }
  }
  ForgetIfUnused(id);
}

void EventHub::ForgetIfUnused(const std::string& id) {
  auto it = channels_.find(id);
  if (it != channels_.end() && it->second.unused()) channels_.erase(it);
}

void EventHub::StartTail() {
  tail_timer_.emplace(ctx_.io);
  TailWatched();
}

void EventHub::StopTail() {
  if (tail_timer_) tail_timer_->cancel();
}

void EventHub::CloseAll(const std::string& frame) {
  for (auto& sub :
       std::vector<std::shared_ptr<Subscriber>>(subscribers_.begin(), subscribers_.end())) {
    sub->stream->Close(frame);
  }
}

}  // namespace agentloop::server
