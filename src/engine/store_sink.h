// Persistence of a turn: StoreSink is the turn's event sink. It buffers the
// events the store keeps and commits them at the step boundaries the
// durability contract names (IsCommitBoundary): before a model call
// (step_begin), before a tool runs (tool_call_begin), when a batch pauses
// (pending: with its checkpoint and pending index, in one transaction) and
// when the turn ends. A failed commit fails the turn before its next step.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/events.h"
#include "agentloop/store.h"
#include "agentloop/turn.h"

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
  // Writes the session's state the turn leaves (through the lock) just
  // before the commit of its `turn_end`. A failure fails that commit: the
  // end is not stored without its state (the sink fails, Flush returns the
  // error, and the turn's result is `failed` with it as the reason).
  void SaveStateBeforeEnd(std::function<Status()> save) { save_state_ = std::move(save); }
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
  SessionLock& lock_;
  std::string session_id_;
  EventSink* observer_;
  std::vector<Event> buffer_;
  // The checkpoint of a `pending` event in the buffer, not stored yet.
  std::optional<Checkpoint> pause_;
  // Events of that pause the observer has not seen yet.
  std::vector<Event> held_;
  std::string take_input_;
  bool pause_saved_ = false;
  std::function<Status()> save_state_;
  Status state_error_;  // of save_state_: the end is not committed
};

}  // namespace agentloop
