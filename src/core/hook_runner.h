// HookRunner: calls in-process hooks with a per-call timeout and error
// containment. A hook that throws or exceeds its timeout is reported through
// `on_error` and skipped; it never fails the turn.
//
// Hooks run on one lazily started worker thread (none when no hooks are
// registered). When a call times out the worker is abandoned (it exits once
// the hook returns) and a fresh worker serves the next call.
//
// Thread-safety: one HookRunner per turn, used from the turn's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace agentloop {

class HookRunner {
 public:
  using ErrorFn = std::function<void(const std::string& point, const std::string& error)>;

  HookRunner();
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  // Runs `fn` on the worker and waits up to `timeout`. Returns true when it
  // completed normally; false (after calling on_error) when it threw or timed
  // out. `fn` must own what it touches after a timeout (capture copies).
  // A zero (or negative) timeout runs `fn` inline on the calling thread: the
  // hook is trusted to return promptly; a throw is still contained.
  bool Run(const std::string& point, std::chrono::milliseconds timeout, std::function<void()> fn,
           const ErrorFn& on_error);

 private:
  struct Worker;
  std::shared_ptr<Worker> worker_;
};

}  // namespace agentloop
