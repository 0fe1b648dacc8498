#include "engine/store_sink.h"

#include "agentloop/events.h"

#include "protocol/codec.h"

namespace agentloop {

Status StoreSink::OnEvent(const Event& event) {
  Status settled = SettleBackground();
  Status handled = Handle(event);
  return settled.ok() ? handled : settled;
}

Status StoreSink::Flush() {
  // A background commit that failed put its events back in the buffer:
  // they are committed again below.
  (void)SettleBackground();
  return FlushBuffer();
}

Status StoreSink::Handle(const Event& event) {
  if (ShouldPersist(event.type)) {
    buffer_.push_back(event);
    if (event.type == EventType::kPending) {
      // The pause is one commit: its events through the turn's end, its
      // checkpoint and the index of its pending ids. Only once that has
      // committed does anyone hear of it, so a decision sent the instant
      // the `pending` event arrives finds every item it names, and its
      // `decision` event is numbered after the paused turn's end.
      pause_ = event.As<PendingData>()->checkpoint;
    }
    if (event.type == EventType::kTurnEnd && save_state_ && state_error_.ok()) {
      Status saved = save_state_();
      if (!saved.ok()) state_error_ = std::move(saved);
    }
    if (!state_error_.ok()) return state_error_;
    // While a pause waits for its turn's end, nothing else commits.
    if (IsCommitBoundary(event.type) && (!pause_ || event.type == EventType::kTurnEnd)) {
      if (overlap_ && event.type == EventType::kStepBegin && take_input_.empty() && !claim_batch_) {
        StartBackgroundCommit();
        if (observer_ != nullptr) held_.push_back(event);
        return Status::Ok();
      }
      Status s = FlushBuffer();
      if (!s.ok()) return s;
    }
  }
  if (observer_ == nullptr) return Status::Ok();
  // The front end sees every event in seq order: at once, except those
  // of a pause not yet stored, which it sees once the pause has
  // committed. A display failure (e.g. a closed pipe) never fails the
  // turn.
  if (pause_) {
    held_.push_back(event);
    return Status::Ok();
  }
  for (const Event& e : held_) (void)observer_->OnEvent(e);
  held_.clear();
  (void)observer_->OnEvent(event);
  return Status::Ok();
}

Status StoreSink::FlushBuffer() {
  if (!state_error_.ok()) return state_error_;
  if (buffer_.empty() && !pause_) return Status::Ok();
  if (claim_batch_) {
    // The continued turn's beginning and the claim of its batch: one
    // commit.
    Status claimed = lock_.AppendClaimingDecided(buffer_);
    if (!claimed.ok()) return claimed.WithContext("saving session " + session_id_);
    claim_batch_ = false;
    buffer_.clear();
    if (take_input_.empty() && !pause_) return Status::Ok();
  }
  if (!take_input_.empty()) {
    // The turn's beginning and the taking of its input: one commit (a
    // pause is never the first commit of a queued input's turn).
    Status taken = lock_.AppendTakingInput(buffer_, take_input_);
    if (!taken.ok()) return taken.WithContext("saving session " + session_id_);
    take_input_.clear();
    buffer_.clear();
    if (!pause_) return Status::Ok();
  }
  Status s = pause_ ? lock_.SaveCheckpoint(*pause_, buffer_) : lock_.Append(buffer_);
  if (!s.ok()) {
    return s.WithContext(pause_ ? "saving the paused batch of session " + session_id_
                                : "saving session " + session_id_);
  }
  buffer_.clear();
  if (pause_) {
    pause_.reset();
    pause_saved_ = true;
  }
  return Status::Ok();
}

void StoreSink::StartBackgroundCommit() {
  in_flight_ = std::move(buffer_);
  buffer_.clear();
  background_.Start([this] { return lock_.Append(in_flight_); });
}

Status StoreSink::SettleBackground() {
  if (!background_.started()) return Status::Ok();
  Status s = background_.Wait();
  if (!s.ok()) {
    buffer_.insert(buffer_.begin(), std::make_move_iterator(in_flight_.begin()),
                   std::make_move_iterator(in_flight_.end()));
    in_flight_.clear();
    held_.clear();
    return s.WithContext("saving session " + session_id_);
  }
  in_flight_.clear();
  if (observer_ != nullptr && !pause_) {
    for (const Event& e : held_) (void)observer_->OnEvent(e);
    held_.clear();
  }
  return Status::Ok();
}

}  // namespace agentloop
