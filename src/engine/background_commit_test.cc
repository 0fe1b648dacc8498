#include "engine/background_commit.h"

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace agentloop::engine {
namespace {

TEST(BackgroundCommitTest, WaitWithoutACommitIsOk) {
  BackgroundCommit c;
  EXPECT_FALSE(c.started());
  EXPECT_TRUE(c.Wait().ok());
}

TEST(BackgroundCommitTest, WaitReturnsEachCommitsResultOnce) {
  BackgroundCommit c;
  std::thread::id ran_on;
  c.Start([&] {
    ran_on = std::this_thread::get_id();
    return Unavailable("disk full");
  });
  EXPECT_TRUE(c.started());
  Status first = c.Wait();
  EXPECT_EQ(first.code(), Code::kUnavailable);
  EXPECT_EQ(first.message(), "disk full");
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(c.started());
  EXPECT_TRUE(c.Wait().ok());  // taken: nothing left to wait for

  c.Start([] { return Status::Ok(); });
  EXPECT_TRUE(c.Wait().ok());
}

TEST(BackgroundCommitTest, TheCallerGoesOnWhileTheCommitRuns) {
  BackgroundCommit c;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> done{false};
  c.Start([&] {
    released.wait();
    done = true;
    return Status::Ok();
  });
  // Start returned although the commit is still blocked.
  EXPECT_FALSE(done);
  release.set_value();
  EXPECT_TRUE(c.Wait().ok());
  EXPECT_TRUE(done);
}

TEST(BackgroundCommitTest, DestructionWaitsForTheCommitInFlight) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> done{false};
  {
    BackgroundCommit c;
    c.Start([&] {
      released.wait();
      done = true;
      return Status::Ok();
    });
    release.set_value();
  }
  EXPECT_TRUE(done);
}

TEST(BackgroundCommitTest, AThrowingCommitIsAnError) {
  BackgroundCommit c;
  c.Start([]() -> Status { throw std::runtime_error("boom"); });
  Status s = c.Wait();
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("boom"), std::string::npos);
}

}  // namespace
}  // namespace agentloop::engine
