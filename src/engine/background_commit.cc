#include "engine/background_commit.h"

#include <exception>
#include <string>
#include <utility>

namespace agentloop::engine {

BackgroundCommit::~BackgroundCommit() {
  if (started_) (void)Wait();
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundCommit::Start(std::function<Status()> commit) {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(commit);
  }
  started_ = true;
  cv_.notify_all();
}

Status BackgroundCommit::Wait() {
  if (!started_) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return result_.has_value(); });
  Status s = std::move(*result_);
  result_.reset();
  started_ = false;
  return s;
}

void BackgroundCommit::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || job_ != nullptr; });
    if (job_ == nullptr) return;  // stopped, nothing left to run
    std::function<Status()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    Status s = Status::Ok();
    try {
      s = job();
    } catch (const std::exception& e) {
      s = Internal(std::string("the commit threw: ") + e.what());
    }
    lock.lock();
    result_ = std::move(s);
    cv_.notify_all();
  }
}

}  // namespace agentloop::engine
