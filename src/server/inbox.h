// Inbox: hands work from any thread to one io_context thread in the order
// it was handed over.
//
// asio::post alone does not keep that order across threads: on an
// io_context constructed for one thread, a post made from inside a running
// handler waits in that thread's private queue until the handler returns,
// so a post made meanwhile from another thread overtakes it. A turn's text
// deltas are emitted on the io thread (where the model streams) and its
// other events on pool threads, in one sequence that the server must
// publish unchanged; the Inbox keeps one queue under a lock and posts one
// drain at a time.
#pragma once

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace agentloop::server {

class Inbox {
 public:
  explicit Inbox(boost::asio::io_context& io) : io_(io) {}
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // Any thread: `fn` runs on the io_context's thread after everything
  // handed over before this call returned.
  void Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    if (drain_posted_) return;
    drain_posted_ = true;
    boost::asio::post(io_, [this] { Drain(); });
  }

 private:
  void Drain() {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(queue_);
      drain_posted_ = false;
    }
    for (auto& fn : batch) fn();
  }

  boost::asio::io_context& io_;
  std::mutex mu_;
  std::vector<std::function<void()>> queue_;
  bool drain_posted_ = false;
};

}  // namespace agentloop::server
