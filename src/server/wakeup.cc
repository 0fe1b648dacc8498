#include "server/wakeup.h"

#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "agentloop/engine.h"

namespace agentloop::server {

WakeupPoller::WakeupPoller(SessionStore& store, WakeupPollerOptions options,
                           std::function<void(WakeupWork)> found)
    : store_(store), options_(options), found_(std::move(found)) {}

WakeupPoller::~WakeupPoller() { Stop(); }

Result<bool> WakeupPoller::Start() {
  AL_ASSIGN_OR_RETURN(listener_, store_.ListenForWakeups());
  if (!listener_) return false;
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start the wake-up thread: ") + e.what());
  }
  return true;
}

void WakeupPoller::Stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (listener_) listener_->Interrupt();
  if (thread_.joinable()) thread_.join();
}

void WakeupPoller::Loop() {
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stopping_) return;
    }
    WakeupWork work;
    auto wait = options_.poll;
    // A store error (the database restarting) is met by the next look.
    if (auto claimed = store_.ClaimWakeups(options_.limit, options_.retry_after); claimed.ok()) {
      work.decided = std::move(claimed->sessions);
      work.queued = std::move(claimed->queued);
      if (claimed->next_due_in_ms) {
        // Wake up when the next one falls due (NOTIFY announced it early).
        wait = std::min(wait, std::chrono::milliseconds(*claimed->next_due_in_ms + 1));
      }
    }
    if (auto expired = store_.ListExpiredLocks(options_.limit); expired.ok()) {
      work.expired = std::move(*expired);
    }
    if (!work.decided.empty() || !work.queued.empty() || !work.expired.empty()) {
      std::lock_guard lk(mu_);
      if (stopping_) return;
      found_(std::move(work));
    }
    // Returns early on an announcement or Stop; a lost connection has
    // already waited out `wait` and reconnects on the next call.
    (void)listener_->Wait(wait);
  }
}

Result<bool> TakeOverExpired(SessionStore& store, const std::string& session_id, int64_t now_ms) {
  AL_ASSIGN_OR_RETURN(std::unique_ptr<SessionLock> lock,
                      store.AcquireLock(session_id, static_cast<int64_t>(getpid())));
  AL_ASSIGN_OR_RETURN(SessionSnapshot snap, store.Load(session_id, LoadOptions{}));
  // The turn that was running when its instance stopped ends, as every
  // takeover ends it.
  AL_RETURN_IF_ERROR(EndCutTurn(*lock, snap, now_ms));
  return snap.decided_checkpoint.has_value();
}

}  // namespace agentloop::server
