#include "core/hook_runner.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace agentloop {
namespace {

// Runs `fn`; returns "" or what it threw.
std::string RunContained(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  } catch (...) {
    return "threw a non-standard exception";
  }
  return {};
}

}  // namespace

struct HookRunner::Worker {
  struct Task {
    std::function<void()> fn;
    // Shared with the waiter; guarded by Worker::mu.
    std::shared_ptr<bool> done;
    std::shared_ptr<std::string> error;
  };

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> queue;  // Guarded by mu.
  bool exit = false;       // Guarded by mu.

  static void Loop(const std::shared_ptr<Worker>& self) {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(self->mu);
        self->cv.wait(lock, [&] { return self->exit || !self->queue.empty(); });
        if (self->queue.empty()) return;  // exit requested and nothing left
        task = std::move(self->queue.front());
        self->queue.pop_front();
      }
      std::string err = RunContained(task.fn);
      task.fn = nullptr;  // release captures before signalling
      {
        std::lock_guard<std::mutex> lock(self->mu);
        *task.error = std::move(err);
        *task.done = true;
      }
      self->cv.notify_all();
    }
  }
};

HookRunner::HookRunner() = default;

HookRunner::~HookRunner() {
  if (worker_) {
    {
      std::lock_guard<std::mutex> lock(worker_->mu);
      worker_->exit = true;
    }
    worker_->cv.notify_all();
  }
}

bool HookRunner::Run(const std::string& point, std::chrono::milliseconds timeout,
                     std::function<void()> fn, const ErrorFn& on_error) {
  if (timeout <= std::chrono::milliseconds::zero()) {
    // A trusted hook: no thread handoff (two context switches per call add up
    // to most of a step's overhead), exceptions still contained.
    std::string err = RunContained(fn);
    if (err.empty()) return true;
    on_error(point, err);
    return false;
  }
  if (!worker_) {
    worker_ = std::make_shared<Worker>();
    std::thread([w = worker_] { Worker::Loop(w); }).detach();
  }
  auto done = std::make_shared<bool>(false);
  auto error = std::make_shared<std::string>();
  std::shared_ptr<Worker> w = worker_;
  std::unique_lock<std::mutex> lock(w->mu);
  w->queue.push_back({std::move(fn), done, error});
  w->cv.notify_all();
  bool finished = w->cv.wait_for(lock, timeout, [&] { return *done; });
  if (!finished) {
    // Abandon this worker: it exits after the stuck hook returns.
    w->exit = true;
    lock.unlock();
    worker_.reset();
    on_error(point, "timed out after " + std::to_string(timeout.count()) + " ms");
    return false;
  }
  if (!error->empty()) {
    std::string e = *error;
    lock.unlock();
    on_error(point, e);
    return false;
  }
  return true;
}

}  // namespace agentloop
