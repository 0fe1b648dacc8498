// Several `agentloop serve` instances on one shared store (docs/storage.md,
// "Several instances"): the thread that finds the work other processes left
// for this one, and the takeover of a session whose instance stopped.
//
// WakeupPoller waits on the store's wake-up listener (PostgreSQL LISTEN on
// one connection) and, on an announcement and at least every `poll`, claims
// due wake-ups (decided batches to continue, queued inputs to run) and lists
// leases that expired while held (instances that stopped mid-turn). NOTIFY is only a hint: a
// missed one costs at most one poll interval. A store that announces nothing
// (SQLite, one machine) starts no thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentloop/store.h"

namespace agentloop::server {

struct WakeupWork {
  std::vector<std::string> decided;  // claimed wake-ups: continue their batch
  std::vector<std::string> queued;   // claimed wake-ups: take their next queued input
  std::vector<std::string> expired;  // sessions whose holder stopped renewing its lease
};

struct WakeupPollerOptions {
  // The longest wait between two looks at the store.
  std::chrono::milliseconds poll{1500};
  // A claimed wake-up is due again this long later (if this instance could
  // not continue the session, another will).
  std::chrono::milliseconds retry_after{30000};
  // Wake-ups claimed and expired leases listed per look.
  int limit = 16;
};

class WakeupPoller {
 public:
  // `found` runs on the poller's thread with each non-empty look's work; it
  // must hand it off (post it to the I/O thread) and return.
  WakeupPoller(SessionStore& store, WakeupPollerOptions options,
               std::function<void(WakeupWork)> found);
  ~WakeupPoller();
  WakeupPoller(const WakeupPoller&) = delete;
  WakeupPoller& operator=(const WakeupPoller&) = delete;

  // Starts the thread when the store announces wake-ups. Returns false (and
  // starts nothing) for a store that does not. A database that cannot be
  // reached now is tried again on every look. Errors: kUnavailable (no
  // thread to be had).
  Result<bool> Start();
  // Ends the thread (returns after it has ended; `found` is not called any
  // more). Idempotent.
  void Stop();

 private:
  void Loop();

  SessionStore& store_;
  WakeupPollerOptions options_;
  std::function<void(WakeupWork)> found_;
  std::unique_ptr<WakeupListener> listener_;
  std::mutex mu_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

// Takes over a session whose lease expired while held (its instance
// stopped mid-turn): takes the lease, loads the session with crash repair
// (every tool call without a result gets an is_error result saying what is
// known), and, when its newest turn has no `turn_end`, ends that turn
// `failed` (EndCutTurn), so watchers see it end. The turn is not
// continued: the user may continue it. Returns whether the session has a
// decided batch waiting to be continued. Errors: kBusy when another holder
// is live (nothing to take over); the store's.
Result<bool> TakeOverExpired(SessionStore& store, const std::string& session_id, int64_t now_ms);

}  // namespace agentloop::server
