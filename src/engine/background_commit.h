// BackgroundCommit: one store commit at a time on a thread of its own, so
// that the turn goes on (sends its model request) while the commit reaches
// the disk. The turn's sink (store_sink.cc, StoreSink) waits for it before it
// handles anything else of the turn.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "agentloop/status.h"

namespace agentloop::engine {

// Thread-safety: Start, Wait and the destructor are called by one thread at
// a time (the sink's caller); the commit runs on the helper thread.
class BackgroundCommit {
 public:
  BackgroundCommit() = default;
  // Waits for the commit in flight, then ends the helper thread.
  ~BackgroundCommit();
  BackgroundCommit(const BackgroundCommit&) = delete;
  BackgroundCommit& operator=(const BackgroundCommit&) = delete;

  // Runs `commit` on the helper thread (started on first use) and returns
  // at once. The commit Started before must have been waited for.
  void Start(std::function<Status()> commit);
  // A commit was started and its result not yet taken by Wait.
  bool started() const { return started_; }
  // Waits for the commit started last and returns its result; Ok when none
  // is started.
  Status Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> job_;   // guarded by mu_: the commit to run
  std::optional<Status> result_;  // guarded by mu_: the last commit's result
  bool stop_ = false;             // guarded by mu_
  bool started_ = false;          // the caller's own: a result to take
  std::thread thread_;
};

}  // namespace agentloop::engine
