// Persistence of a turn: StoreSink is the turn's event sink. It buffers the
// events the store keeps and commits them at the step boundaries the
// durability contract names (IsCommitBoundary): before a model call
// (step_begin), before a tool runs (tool_call_begin), when a batch pauses
// (pending: with its checkpoint and pending index, in one transaction) and
// when the turn ends. A failed commit fails the turn before its next step. In a turn run
// to its end by the caller (RunTurnWith) the commit at a step_begin runs on
// a thread of its own while the model request goes out (BackgroundCommit);
// the sink waits for it before it handles the turn's next event, so it is
// complete before any tool runs and before the turn ends.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/events.h"
#include "agentloop/store.h"
#include "agentloop/turn.h"

#include "engine/background_commit.h"

namespace agentloop {

// Buffers persisted events and commits them at step boundaries; forwards
// every event to the front end's observer after the store has it. Commits go
// through the session's lock, which fences them (SessionLock): once the lock
// is lost the next commit fails (IsLeaseLost), and the turn, whose sink failed,
// ends `failed` without running another tool.
class StoreSink final : public EventSink {
 public:
  StoreSink(SessionLock& lock, std::string session_id, EventSink* observer)
      : lock_(lock), session_id_(std::move(session_id)), observer_(observer) {}

  // The queued input this turn runs: taken from the queue with the first
  // commit (SessionLock::AppendTakingInput).
  void TakeInputWithFirstCommit(std::string input_id) { take_input_ = std::move(input_id); }
  // The decided batch this turn continues: claimed with the first commit
  // (SessionLock::AppendClaimingDecided), so a first commit that fails
  // leaves the batch decided for the next try.
  void ClaimBatchWithFirstCommit() { claim_batch_ = true; }
  // Writes the session's state the turn leaves (through the lock) just
  // before the commit of its `turn_end`. A failure fails that commit: the
  // end is not stored without its state (the sink fails, Flush returns the
  // error, and the turn's result is `failed` with it as the reason).
  void SaveStateBeforeEnd(std::function<Status()> save) { save_state_ = std::move(save); }
  // The commit at a step_begin (not a turn's first commit taking a queued
  // input or claiming a decided batch) runs on a thread of its own while the turn sends its
  // request. The next event (a delta or the step's end: before any tool runs), Flush and the sink's
  // end wait for that commit first; observers hear of the step_begin once it is committed. A failed
  // commit fails the event that waited for it, its events go back to the buffer (committed again
  // with the next boundary, as after a failed Flush), and nobody hears of the step_begin.
  void OverlapStepCommits() { overlap_ = true; }
  // Takes the queued input now if no commit took it (the turn ended before
  // its first commit, or failed to commit). Best effort: a store error
  // leaves it queued.
  void TakeInputIfUntaken() {
    if (take_input_.empty()) return;
    (void)lock_.AppendTakingInput({}, take_input_);
    take_input_.clear();
  }

  Status OnEvent(const Event& event) override;

  // Commits the buffered events (with the pause's checkpoint while it is
  // not stored yet).
  Status Flush();

  // The turn's pause (its checkpoint) is stored.
  bool pause_saved() const { return pause_saved_; }

 private:
  Status Handle(const Event& event);
  Status FlushBuffer();
  void StartBackgroundCommit();
  // Waits for the background commit, if one is started; then the events it
  // held back reach the observer.
  Status SettleBackground();

  SessionLock& lock_;
  std::string session_id_;
  EventSink* observer_;
  std::vector<Event> buffer_;
  // The checkpoint of a `pending` event in the buffer, not stored yet.
  std::optional<Checkpoint> pause_;
  // Events the observer has not seen yet: a pause's until it is stored, a
  // step_begin until its background commit has completed.
  std::vector<Event> held_;
  std::string take_input_;
  bool claim_batch_ = false;
  bool pause_saved_ = false;
  std::function<Status()> save_state_;
  Status state_error_;  // of save_state_: the end is not committed
  bool overlap_ = false;
  std::vector<Event> in_flight_;  // the background commit's events
  // Last: destroyed first, waiting for the commit that reads in_flight_.
  engine::BackgroundCommit background_;
};

}  // namespace agentloop
