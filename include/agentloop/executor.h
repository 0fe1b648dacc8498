// TurnExecutor: where the work of turns driven without a thread of their own
// runs (Session::Submit, RunTurnAsync in runner.h), and a
// thread-pool implementation of it for servers and tests.
//
// Two kinds of work:
//  - Post(key, fn): a step of a turn (state machine, store writes, approver
//    calls). Per key serial: a session's steps run in order, one at a time;
//    different keys run in parallel. Steps are short (no tool runs there, no
//    model call waits there).
//  - PostTool(key, fn): blocking work (one tool call, a provider without an
//    asynchronous path), under a cap on how many run at once, queued fairly
//    per key: the calls of one key do not starve another key's.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace agentloop {

// Neither call blocks. Implementations are thread-safe.
class TurnExecutor {
 public:
  virtual ~TurnExecutor() = default;
  // Runs `fn` off the I/O thread, after every earlier Post with the same
  // `key` has finished: a session's steps and store writes run in order, one
  // at a time.
  virtual void Post(const std::string& key, std::function<void()> fn) = 0;
  // Runs one tool call off the I/O thread, under the executor's cap on
  // concurrent tool calls, queued fairly per `key` (one session's flood of
  // calls does not starve another session's).
  virtual void PostTool(const std::string& key, std::function<void()> fn) = 0;
};

struct ThreadPoolExecutorOptions {
  // Threads that run Post work (steps of different keys in parallel).
  // 0: hardware_concurrency, at least 2.
  int step_threads = 0;
  // At most this many PostTool calls run at once (one thread each, started
  // when needed). 0: twice hardware_concurrency, at least 2.
  int max_tool_calls = 0;
};

// A TurnExecutor on two pools of threads.
//
// Fairness: keys with queued work take turns (round robin), one function per
// turn, in both pools; within a key, functions start in the order posted.
// Post work of one key never overlaps; PostTool work of one key may (a
// parallel lane's calls run together), up to the cap.
//
// A function that throws is contained: the exception is dropped (callers
// catch what they must report; the turn driver does).
//
// Shutdown: Shutdown() (also run by the destructor) lets every queued
// function run, including what those post meanwhile, then joins the threads;
// a function posted after Shutdown() has returned is dropped (destroyed
// without running). So stop the turns first (their stop tokens) and wait for
// their `done`: a turn whose completion arrives after the shutdown (a model
// answer, say) is never finished. Shutdown() must not be called from one of
// the executor's own threads.
class ThreadPoolExecutor final : public TurnExecutor {
 public:
  explicit ThreadPoolExecutor(ThreadPoolExecutorOptions options = {});
  ~ThreadPoolExecutor() override;
  ThreadPoolExecutor(const ThreadPoolExecutor&) = delete;
  ThreadPoolExecutor& operator=(const ThreadPoolExecutor&) = delete;

  void Post(const std::string& key, std::function<void()> fn) override;
  void PostTool(const std::string& key, std::function<void()> fn) override;
  void Shutdown();

  struct Stats {
    size_t queued_steps = 0;   // Post work waiting
    size_t running_steps = 0;  // Post work running
    size_t queued_tools = 0;   // PostTool work waiting for a slot
    size_t running_tools = 0;  // PostTool work running (at most max_tool_calls)
  };
  Stats stats() const;
  int max_tool_calls() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentloop
