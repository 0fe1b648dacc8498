#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "agentloop/executor.h"

#include "core/testing/fakes.h"

namespace agentloop {
namespace {

using testing::kTimeout;

using testing::Gate;

// Waits (bounded) until `pred` holds, re-checked whenever `notify` is called.
class Monitor {
 public:
  template <typename F>
  void Update(F&& f) {
    std::lock_guard lock(mu_);
    f();
    cv_.notify_all();
  }
  template <typename P>
  bool WaitFor(P&& pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, pred);
  }
  std::mutex& mu() { return mu_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

TEST(ThreadPoolExecutor, StepsOfOneKeyRunInOrderOneAtATime) {
  ThreadPoolExecutor ex(ThreadPoolExecutorOptions{.step_threads = 4, .max_tool_calls = 2});
  Monitor m;
  std::vector<int> order;
  std::atomic<int> inside{0}, overlaps{0};
  for (int i = 0; i < 200; ++i) {
    ex.Post("a", [&, i] {
      if (inside.fetch_add(1) != 0) ++overlaps;
      m.Update([&] { order.push_back(i); });
      inside.fetch_sub(1);
    });
  }
  ASSERT_TRUE(m.WaitFor([&] { return order.size() == 200; }));
  EXPECT_EQ(overlaps.load(), 0);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
}

TEST(ThreadPoolExecutor, StepsOfDifferentKeysRunInParallel) {
  ThreadPoolExecutor ex(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
  Gate b_ran;
  std::atomic<bool> a_saw_b{false};
  Monitor m;
  bool a_done = false;
  // A's step waits for B's: with steps of one key at a time only (or one
  // thread), this would time out.
  ex.Post("a", [&] {
    a_saw_b = b_ran.Wait();
    m.Update([&] { a_done = true; });
  });
  ex.Post("b", [&] { b_ran.Open(); });
  ASSERT_TRUE(m.WaitFor([&] { return a_done; }));
  EXPECT_TRUE(a_saw_b.load());
}

TEST(ThreadPoolExecutor, OneKeysFloodOfToolCallsDoesNotStarveAnother) {
  ThreadPoolExecutor ex(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 1});
  Gate first_may_finish;
  Monitor m;
  std::vector<std::string> ran;
  bool first_started = false;
  ex.PostTool("a", [&] {
    m.Update([&] { first_started = true; });
    first_may_finish.Wait();
    m.Update([&] { ran.push_back("a"); });
  });
  ASSERT_TRUE(m.WaitFor([&] { return first_started; }));
  for (int i = 1; i < 100; ++i) {
    ex.PostTool("a", [&] { m.Update([&] { ran.push_back("a"); }); });
  }
  ex.PostTool("b", [&] { m.Update([&] { ran.push_back("b"); }); });
  first_may_finish.Open();
  ASSERT_TRUE(m.WaitFor([&] { return ran.size() == 101; }));
  // Round robin: after the call that was running and the one of `a` at the
  // front of the ring, `b` takes its turn (not after `a`'s 99 queued calls).
  size_t b_at = 0;
  for (size_t i = 0; i < ran.size(); ++i) {
    if (ran[i] == "b") b_at = i;
  }
  EXPECT_EQ(b_at, 2u);
}

TEST(ThreadPoolExecutor, ToolCallsRespectTheCap) {
  ThreadPoolExecutor ex(ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 2});
  EXPECT_EQ(ex.max_tool_calls(), 2);
  Gate release;
  Monitor m;
  int running = 0, max_running = 0, finished = 0;
  for (int i = 0; i < 5; ++i) {
    ex.PostTool(i % 2 == 0 ? "a" : "b", [&] {
      m.Update([&] {
        ++running;
        max_running = std::max(max_running, running);
      });
      release.Wait();
      m.Update([&] {
        --running;
        ++finished;
      });
    });
  }
  ASSERT_TRUE(m.WaitFor([&] { return running == 2; }));
  ThreadPoolExecutor::Stats s = ex.stats();
  EXPECT_EQ(s.running_tools, 2u);
  EXPECT_EQ(s.queued_tools, 3u);
  release.Open();
  ASSERT_TRUE(m.WaitFor([&] { return finished == 5; }));
  EXPECT_EQ(max_running, 2);
}

TEST(ThreadPoolExecutor, ToolCallsOfOneKeyMayRunTogether) {
  ThreadPoolExecutor ex(ThreadPoolExecutorOptions{.step_threads = 1, .max_tool_calls = 2});
  Monitor m;
  int arrived = 0;
  bool both = true;
  for (int i = 0; i < 2; ++i) {
    ex.PostTool("a", [&] {
      m.Update([&] { ++arrived; });
      bool met = m.WaitFor([&] { return arrived == 2; });
      m.Update([&] { both = both && met; });
    });
  }
  ex.Shutdown();
  EXPECT_EQ(arrived, 2);
  EXPECT_TRUE(both);
}

TEST(ThreadPoolExecutor, ShutdownRunsWhatIsQueuedAndWhatThatPostsThenDrops) {
  auto ex = std::make_unique<ThreadPoolExecutor>(
      ThreadPoolExecutorOptions{.step_threads = 1, .max_tool_calls = 1});
  std::atomic<int> ran{0};
  Gate go;
  ex->Post("a", [&] {
    go.Wait();
    ++ran;
    // Work posted by running work during the drain runs too.
    ex->PostTool("a", [&] {
      ++ran;
      ex->Post("a", [&] { ++ran; });
    });
  });
  go.Open();
  ex->Shutdown();
  EXPECT_EQ(ran.load(), 3);
  bool destroyed_unrun = false;
  std::shared_ptr<int> flag(new int(0), [&](int* p) {
    destroyed_unrun = true;
    delete p;
  });
  ex->Post("a", [&, flag] { ++ran; });
  flag.reset();
  EXPECT_TRUE(destroyed_unrun);  // dropped, not kept
  EXPECT_EQ(ran.load(), 3);
  ex.reset();
}

TEST(ThreadPoolExecutor, ThrowingWorkIsContained) {
  ThreadPoolExecutor ex(ThreadPoolExecutorOptions{.step_threads = 1, .max_tool_calls = 1});
  Monitor m;
  bool after = false;
  ex.Post("a", [] { throw std::runtime_error("step failed"); });
  ex.Post("a", [&] { m.Update([&] { after = true; }); });
  EXPECT_TRUE(m.WaitFor([&] { return after; }));
}

}  // namespace
}  // namespace agentloop
