// The budget tree of a root turn: reservations, charges up the tree,
// returns, caps.
#include "agentloop/budget_ledger.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace agentloop {
namespace {

using Clock = BudgetLedger::Clock;
using std::chrono::milliseconds;

Budget MakeBudget(int calls, int64_t tokens, std::optional<milliseconds> wall = std::nullopt) {
  Budget b;
  b.max_tool_calls = calls;
  b.max_tokens = tokens;
  b.max_wall_time = wall;
  return b;
}

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

TEST(BudgetLedger, ChildGetsTheSmallerOfItsBudgetAndWhatIsLeft) {
  auto root = BudgetLedger::Root(
      MakeBudget(20, 1000),
      TurnCounters{.tool_calls = 5, .tokens = 400, .model_calls = 0, .usage = {}}, kT0);
  auto small = root->Reserve(MakeBudget(3, 100), kT0);
  ASSERT_TRUE(small.ok()) << small.error().ToString();
  EXPECT_EQ((*small)->limit().tool_calls, 3);
  EXPECT_EQ((*small)->limit().tokens, 100);
  // The root has 15 calls and 600 tokens left, 3 and 100 of them held.
  EXPECT_EQ(root->Available(kT0).tool_calls, 12);
  EXPECT_EQ(root->Available(kT0).tokens, 500);
  auto big = root->Reserve(MakeBudget(50, 50'000), kT0);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->limit().tool_calls, 12);
  EXPECT_EQ((*big)->limit().tokens, 500);
  EXPECT_EQ(root->Available(kT0).tool_calls, 0);
  EXPECT_EQ((*big)->depth(), 1);
}

TEST(BudgetLedger, ChargesReachEveryAncestorAndUnspentReturns) {
  auto root = BudgetLedger::Root(MakeBudget(20, 1000), {}, kT0);
  auto child = *root->Reserve(MakeBudget(10, 500), kT0);
  auto grandchild = *child->Reserve(MakeBudget(4, 200), kT0);
  EXPECT_EQ(grandchild->depth(), 2);
  grandchild->Charge(2, 150);
  child->Charge(1, 50);
  EXPECT_EQ(grandchild->spent().tool_calls, 2);
  EXPECT_EQ(child->spent().tool_calls, 3);
  EXPECT_EQ(child->spent().tokens, 200);
  EXPECT_EQ(root->spent().tool_calls, 3);
  EXPECT_EQ(root->spent().tokens, 200);
  // While the child runs, its unspent share is held from the root.
  EXPECT_EQ(root->Available(kT0).tool_calls, 20 - 3 - (10 - 3));
  grandchild->Release();
  child->Release();
  // Released: only what was spent stays taken.
  EXPECT_EQ(root->Available(kT0).tool_calls, 17);
  EXPECT_EQ(root->Available(kT0).tokens, 800);
  child->Release();  // idempotent
  EXPECT_EQ(root->Available(kT0).tool_calls, 17);
}

TEST(BudgetLedger, ChildrenCannotOutspendTheRoot) {
  auto root = BudgetLedger::Root(MakeBudget(4, 100), {}, kT0);
  auto a = *root->Reserve(MakeBudget(3, 60), kT0);
  auto b = *root->Reserve(MakeBudget(3, 60), kT0);
  EXPECT_EQ(b->limit().tool_calls, 1);
  EXPECT_EQ(b->limit().tokens, 40);
  auto c = root->Reserve(MakeBudget(3, 60), kT0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kResourceExhausted);
  EXPECT_NE(c.error().message().find("no budget left"), std::string::npos);
}

TEST(BudgetLedger, WallTimeIsTheEarlierDeadline) {
  auto root = BudgetLedger::Root(MakeBudget(20, 1000, milliseconds(10'000)), {}, kT0);
  auto a = *root->Reserve(MakeBudget(5, 100, milliseconds(2'000)), kT0);
  EXPECT_EQ(*a->limit().deadline, kT0 + milliseconds(2'000));
  auto b = *root->Reserve(MakeBudget(5, 100, milliseconds(60'000)), kT0 + milliseconds(1'000));
  EXPECT_EQ(*b->limit().deadline, kT0 + milliseconds(10'000));
  EXPECT_EQ(b->AsBudget(7, kT0 + milliseconds(4'000)).max_wall_time, milliseconds(6'000));
  EXPECT_EQ(b->AsBudget(7, kT0).max_turns, 7);
  a->Release();
  b->Release();
  auto late = root->Reserve(MakeBudget(5, 100), kT0 + milliseconds(10'000));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message().find("wall time"), std::string::npos);
}

TEST(BudgetLedger, CapsRefuseSpawns) {
  auto root =
      BudgetLedger::Root(MakeBudget(100, 100'000), {}, kT0,
                         SubagentCaps{.max_depth = 1, .max_concurrent = 2, .max_spawns = 3});
  auto a = *root->Reserve(MakeBudget(5, 100), kT0);
  auto deep = a->Reserve(MakeBudget(5, 100), kT0);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message().find("depth cap"), std::string::npos);
  auto b = *root->Reserve(MakeBudget(5, 100), kT0);
  auto third = root->Reserve(MakeBudget(5, 100), kT0);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.error().message().find("concurrent"), std::string::npos);
  b->Release();
  auto c = root->Reserve(MakeBudget(5, 100), kT0);
  ASSERT_TRUE(c.ok());
  (*c)->Release();
  auto d = root->Reserve(MakeBudget(5, 100), kT0);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("spawn cap"), std::string::npos);
  EXPECT_EQ(root->spawns(), 3);
}

TEST(BudgetLedger, ConcurrentChargesSumAtTheRoot) {
  auto root = BudgetLedger::Root(MakeBudget(10'000, 10'000'000), {}, kT0);
  auto a = *root->Reserve(MakeBudget(5'000, 5'000'000), kT0);
  auto b = *root->Reserve(MakeBudget(5'000, 5'000'000), kT0);
  std::vector<std::thread> threads;
  for (auto node : {a, b}) {
    threads.emplace_back([node] {
      for (int i = 0; i < 1000; ++i) node->Charge(1, 7);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(root->spent().tool_calls, 2000);
  EXPECT_EQ(root->spent().tokens, 14'000);
}

TEST(BudgetLedger, DroppingAChildNodeReleasesIt) {
  auto root = BudgetLedger::Root(MakeBudget(10, 1000), {}, kT0);
  {
    auto a = *root->Reserve(MakeBudget(10, 1000), kT0);
    a->Charge(2, 100);
    EXPECT_EQ(root->running_children(), 1);
  }
  EXPECT_EQ(root->running_children(), 0);
  EXPECT_EQ(root->Available(kT0).tool_calls, 8);
}

}  // namespace
}  // namespace agentloop
