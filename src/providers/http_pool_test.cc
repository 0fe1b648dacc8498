#include "providers/http_pool.h"

#include <gtest/gtest.h>

namespace agentloop {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

struct FakeConn : PooledConnection {
  explicit FakeConn(std::string k) { key = std::move(k); }
  bool IsOpen() const override { return open; }
  void Close() override {
    open = false;
    ++closes;
  }
  void StopWatch() override { ++watch_stops; }
  bool open = true;
  int closes = 0;
  int watch_stops = 0;
};

struct FakeWaiter : PoolWaiter {
  bool Gone() const override { return gone; }
  bool gone = false;
};

HttpConnectionPool::Limits SmallLimits() { return {2, seconds(60)}; }

TEST(HttpConnectionPool, TakesTheMostRecentIdleConnectionOfItsKeyOnly) {
  HttpConnectionPool pool(SmallLimits());
  const Clock::time_point t0{};
  auto a = std::make_shared<FakeConn>("http://a:80");
  auto b = std::make_shared<FakeConn>("http://a:80");
  auto other = std::make_shared<FakeConn>("http://b:80");
  pool.Put(a, t0);
  pool.Put(b, t0 + seconds(1));
  pool.Put(other, t0);
  EXPECT_EQ(pool.idle_total(), 3u);
  EXPECT_EQ(pool.TakeIdle("http://a:80", t0 + seconds(2)), b);
  EXPECT_EQ(b->watch_stops, 1);
  EXPECT_EQ(pool.TakeIdle("http://a:80", t0 + seconds(2)), a);
  EXPECT_EQ(pool.TakeIdle("http://a:80", t0 + seconds(2)), nullptr);
  EXPECT_FALSE(pool.HasIdle("http://a:80"));
  EXPECT_TRUE(pool.HasIdle("http://b:80"));
  EXPECT_EQ(a->closes + b->closes, 0);
}

TEST(HttpConnectionPool, OldestIdleConnectionIsClosedOverTheLimit) {
  HttpConnectionPool pool(SmallLimits());
  const Clock::time_point t0{};
  auto a = std::make_shared<FakeConn>("k");
  auto b = std::make_shared<FakeConn>("k");
  auto c = std::make_shared<FakeConn>("k");
  pool.Put(a, t0);
  pool.Put(b, t0);
  pool.Put(c, t0);
  EXPECT_EQ(pool.idle_count("k"), 2u);
  EXPECT_EQ(a->closes, 1);
  EXPECT_EQ(b->closes + c->closes, 0);
}

TEST(HttpConnectionPool, ExpiredOrClosedConnectionsAreDroppedNotReused) {
  HttpConnectionPool pool(SmallLimits());
  const Clock::time_point t0{};
  auto old = std::make_shared<FakeConn>("k");
  auto closed = std::make_shared<FakeConn>("k");
  pool.Put(old, t0);
  pool.Put(closed, t0 + seconds(30));
  closed->open = false;
  // 61 s after `old` went idle: both are unusable, one for each reason.
  EXPECT_EQ(pool.TakeIdle("k", t0 + seconds(61)), nullptr);
  EXPECT_EQ(old->closes, 1);
  EXPECT_EQ(closed->closes, 1);
  EXPECT_EQ(pool.idle_total(), 0u);

  // An expired one is also dropped when another is pooled under its key.
  auto stale = std::make_shared<FakeConn>("k");
  auto fresh = std::make_shared<FakeConn>("k");
  pool.Put(stale, t0);
  pool.Put(fresh, t0 + seconds(61));
  EXPECT_EQ(stale->closes, 1);
  EXPECT_EQ(pool.idle_count("k"), 1u);
}

TEST(HttpConnectionPool, EvictHonoursOnlyTheCurrentPoolEntry) {
  HttpConnectionPool pool(SmallLimits());
  const Clock::time_point t0{};
  auto c = std::make_shared<FakeConn>("k");
  std::shared_ptr<PooledConnection> pc = c;
  uint64_t first = pool.Put(c, t0);
  ASSERT_EQ(pool.TakeIdle("k", t0), c);
  uint64_t second = pool.Put(c, t0);
  // The watch of its first stay fires late: stale, the connection stays.
  EXPECT_FALSE(pool.Evict(pc, first));
  EXPECT_EQ(c->closes, 0);
  EXPECT_EQ(pool.idle_count("k"), 1u);
  EXPECT_TRUE(pool.Evict(pc, second));
  EXPECT_EQ(c->closes, 1);
  EXPECT_EQ(pool.idle_count("k"), 0u);
  EXPECT_FALSE(pool.Evict(pc, second));
  EXPECT_EQ(c->closes, 1);
}

TEST(HttpConnectionPool, CloseAllClosesEveryIdleConnection) {
  HttpConnectionPool pool(SmallLimits());
  auto a = std::make_shared<FakeConn>("x");
  auto b = std::make_shared<FakeConn>("y");
  std::shared_ptr<PooledConnection> pa = a;
  uint64_t token = pool.Put(a, {});
  pool.Put(b, {});
  pool.CloseAll();
  EXPECT_EQ(a->closes, 1);
  EXPECT_EQ(b->closes, 1);
  EXPECT_EQ(pool.idle_total(), 0u);
  EXPECT_FALSE(pool.Evict(pa, token));
}

TEST(HttpConnectionPool, OnePreconnectPerKeyAndNoneWhenOneIsIdle) {
  HttpConnectionPool pool(SmallLimits());
  int opener = 0, second = 0;
  EXPECT_TRUE(pool.BeginOpening("k", &opener));
  EXPECT_TRUE(pool.Opening("k"));
  EXPECT_FALSE(pool.BeginOpening("k", &second));
  pool.Put(std::make_shared<FakeConn>("idle"), {});
  EXPECT_FALSE(pool.BeginOpening("idle", &second));
  // Only the opener ends its claim.
  EXPECT_TRUE(pool.EndOpening("k", &second).empty());
  EXPECT_TRUE(pool.Opening("k"));
  pool.EndOpening("k", &opener);
  EXPECT_FALSE(pool.Opening("k"));
}

TEST(HttpConnectionPool, WaitersComeBackInOrderWithoutTheGoneOnes) {
  HttpConnectionPool pool(SmallLimits());
  int opener = 0;
  auto w1 = std::make_shared<FakeWaiter>();
  auto w2 = std::make_shared<FakeWaiter>();
  auto w3 = std::make_shared<FakeWaiter>();
  auto w4 = std::make_shared<FakeWaiter>();
  EXPECT_FALSE(pool.AddWaiter("k", w1));  // nothing being opened: connect yourself
  ASSERT_TRUE(pool.BeginOpening("k", &opener));
  EXPECT_TRUE(pool.AddWaiter("k", w1));
  EXPECT_TRUE(pool.AddWaiter("k", w2));
  EXPECT_TRUE(pool.AddWaiter("k", w3));
  EXPECT_TRUE(pool.AddWaiter("k", w4));
  pool.RemoveWaiter("k", w2.get());  // ended while waiting
  w3->gone = true;                   // aborted, not yet removed
  EXPECT_EQ(pool.waiter_count("k"), 3u);
  std::vector<std::shared_ptr<PoolWaiter>> live = pool.EndOpening("k", &opener);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0], w1);
  EXPECT_EQ(live[1], w4);
  EXPECT_EQ(pool.waiter_count("k"), 0u);
  EXPECT_TRUE(pool.EndOpening("k", &opener).empty());
}

}  // namespace
}  // namespace agentloop
