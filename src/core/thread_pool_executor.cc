// ThreadPoolExecutor: two pools (steps, tool calls) under one mutex. Each
// pool keeps a queue of functions per key and a ring of the keys that have
// work ready; a free thread takes the key at the front of the ring, starts
// that key's oldest function and, when the key has more that may start, puts
// it at the back. In the step pool a key with a function running is out of
// the ring until it finishes (per-key serial order); in the tool pool it
// stays in (a key's calls may overlap). Threads start when work arrives and
// no thread is free, up to the pool's size, and stay until Shutdown().
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agentloop/executor.h"

namespace agentloop {

class ThreadPoolExecutor::Impl {
 public:
  explicit Impl(ThreadPoolExecutorOptions options) {
    const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    steps_.size =
        static_cast<size_t>(options.step_threads > 0 ? options.step_threads : std::max(2, hw));
    steps_.serial = true;
    tools_.size = static_cast<size_t>(options.max_tool_calls > 0 ? options.max_tool_calls
                                                                 : std::max(2, 2 * hw));
    tools_.serial = false;
  }

  void Push(bool tool, const std::string& key, std::function<void()> fn) {
    if (!fn) return;
    std::unique_lock lock(mu_);
    if (closed_) return;  // dropped: see Shutdown()
    Pool& p = tool ? tools_ : steps_;
    KeyQueue& q = p.keys[key];
    q.fns.push_back(std::move(fn));
    ++p.queued;
    if (!q.in_ring && (!p.serial || q.running == 0)) {
      p.ring.push_back(key);
      q.in_ring = true;
    }
    if (p.queued > p.waiting && p.threads.size() < p.size) {
      p.threads.emplace_back([this, &p] { Work(p); });
    } else {
      p.cv.notify_one();
    }
  }

  void Shutdown() {
    std::vector<std::thread> threads;
    {
      std::unique_lock lock(mu_);
      idle_.wait(lock, [&] { return Idle(steps_) && Idle(tools_); });
      closed_ = true;
      steps_.cv.notify_all();
      tools_.cv.notify_all();
      for (Pool* p : {&steps_, &tools_}) {
        for (auto& t : p->threads) threads.push_back(std::move(t));
        p->threads.clear();
      }
    }
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }

  Stats stats() const {
    std::lock_guard lock(mu_);
    return Stats{steps_.queued, steps_.running, tools_.queued, tools_.running};
  }
  int max_tool_calls() const { return static_cast<int>(tools_.size); }

 private:
  struct KeyQueue {
    std::deque<std::function<void()>> fns;
    size_t running = 0;
    bool in_ring = false;
  };
  struct Pool {
    size_t size = 1;
    bool serial = false;
    std::deque<std::string> ring;
    // Node-based: references to a KeyQueue stay valid while others come and go.
    std::unordered_map<std::string, KeyQueue> keys;
    size_t queued = 0, running = 0, waiting = 0;
    std::vector<std::thread> threads;
    std::condition_variable cv;
  };

  static bool Idle(const Pool& p) { return p.queued == 0 && p.running == 0; }

  void Work(Pool& p) {
    std::unique_lock lock(mu_);
    for (;;) {
      ++p.waiting;
      p.cv.wait(lock, [&] { return !p.ring.empty() || closed_; });
      --p.waiting;
      if (p.ring.empty()) return;  // closed
      std::string key = std::move(p.ring.front());
      p.ring.pop_front();
      KeyQueue& q = p.keys[key];
      q.in_ring = false;
      std::function<void()> fn = std::move(q.fns.front());
      q.fns.pop_front();
      --p.queued;
      ++p.running;
      ++q.running;
      if (!p.serial && !q.fns.empty()) {
        p.ring.push_back(key);
        q.in_ring = true;
      }
      lock.unlock();
      try {
        fn();
      } catch (...) {  // contained: see the class comment
      }
      fn = nullptr;  // what it holds is released outside the lock
      lock.lock();
      --p.running;
      --q.running;
      if (p.serial && !q.fns.empty() && !q.in_ring) {
        p.ring.push_back(key);
        q.in_ring = true;
      }
      if (q.fns.empty() && q.running == 0 && !q.in_ring) p.keys.erase(key);
      if (Idle(steps_) && Idle(tools_)) idle_.notify_all();
    }
  }

  mutable std::mutex mu_;
  Pool steps_, tools_;
  bool closed_ = false;
  std::condition_variable idle_;
};

ThreadPoolExecutor::ThreadPoolExecutor(ThreadPoolExecutorOptions options)
    : impl_(std::make_unique<Impl>(options)) {}
ThreadPoolExecutor::~ThreadPoolExecutor() { impl_->Shutdown(); }
void ThreadPoolExecutor::Post(const std::string& key, std::function<void()> fn) {
  impl_->Push(false, key, std::move(fn));
}
void ThreadPoolExecutor::PostTool(const std::string& key, std::function<void()> fn) {
  impl_->Push(true, key, std::move(fn));
}
void ThreadPoolExecutor::Shutdown() { impl_->Shutdown(); }
ThreadPoolExecutor::Stats ThreadPoolExecutor::stats() const { return impl_->stats(); }
int ThreadPoolExecutor::max_tool_calls() const { return impl_->max_tool_calls(); }

}  // namespace agentloop
