// BudgetLedger: one budget per root turn, shaped as a tree (docs/subagents.md).
//
// The root node holds what the root turn may spend (tool calls, tokens, a
// wall-clock deadline). A subagent's node is made by Reserve on its
// parent's node: it gets min(what the child asks for, what the parent has
// left), where "left" is the parent's limit minus what it and its
// descendants spent, minus the unspent reservations of its other running
// children. Charge on a node adds to that node and every ancestor, so a
// child can never outspend its root; Release (the child is done) returns
// what the child reserved but did not spend.
//
// Caps (depth, concurrent children per parent, spawns per root turn) are
// checked by Reserve too, so one lock decides a spawn.
//
// Thread-safety: every method may be called from any thread; the whole tree
// shares one mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

// Amounts of the three budgets a ledger tracks.
struct BudgetShare {
  int64_t tool_calls = 0;
  int64_t tokens = 0;
  // The moment the node's time runs out; nullopt: no wall-time limit.
  std::optional<std::chrono::steady_clock::time_point> deadline;

  bool operator==(const BudgetShare&) const = default;
};

// The caps a spawn is checked against.
struct SubagentCaps {
  int max_depth = 2;       // children below the root (a root's child has depth 1)
  int max_concurrent = 3;  // running children per parent
  int max_spawns = 20;     // children started per root turn (all depths)

  bool operator==(const SubagentCaps&) const = default;
};

class BudgetLedger : public std::enable_shared_from_this<BudgetLedger> {
 public:
  using Clock = std::chrono::steady_clock;

  // A root turn's ledger: `limits` (max_wall_time counted from `now`), with
  // `spent` already spent (a turn continued after a pause).
  // `depth`: where the tree starts (a child session continued in another
  // process is the root of its own ledger there, at its own depth, so the
  // depth cap still counts from the real root).
  static std::shared_ptr<BudgetLedger> Root(const Budget& limits, const TurnCounters& spent,
                                            Clock::time_point now, SubagentCaps caps = {},
                                            int depth = 0);

  // A child node: each budget is min(`wanted`'s, Available()). Errors:
  // kResourceExhausted when a cap is reached (the message names it) or when
  // nothing is left of the tool calls, the tokens or the time.
  Result<std::shared_ptr<BudgetLedger>> Reserve(const Budget& wanted, Clock::time_point now);

  // Spending of this node's turn: added to this node and every ancestor.
  void Charge(int64_t tool_calls, int64_t tokens);
  // The child is done: its unspent reservation returns to its parent.
  // Idempotent; a root ignores it.
  void Release();

  // What this node may still spend (never negative), its reservations for
  // running children taken out.
  BudgetShare Available(Clock::time_point now) const;
  // The node's limits and what it and its descendants spent.
  BudgetShare limit() const;
  BudgetShare spent() const;
  // 0 for the root of a root turn.
  int depth() const { return depth_; }
  // Children started under the root of this tree so far.
  int spawns() const;
  // Running children of this node.
  int running_children() const;
  const SubagentCaps& caps() const;

  // The budget a child's turn runs with: the node's limits as a Budget
  // (max_wall_time from `now` to the deadline) and `max_turns`.
  Budget AsBudget(int max_turns, Clock::time_point now) const;

  BudgetLedger(const BudgetLedger&) = delete;
  BudgetLedger& operator=(const BudgetLedger&) = delete;
  ~BudgetLedger();

 private:
  struct Tree;
  BudgetLedger(std::shared_ptr<Tree> tree, BudgetLedger* parent, int depth);
  BudgetShare AvailableLocked(Clock::time_point now) const;

  std::shared_ptr<Tree> tree_;
  // The parent node; the child holds a reference, so a parent outlives its
  // children's nodes.
  std::shared_ptr<BudgetLedger> parent_ref_;
  BudgetLedger* parent_ = nullptr;
  int depth_ = 0;
  // Guarded by tree_->mu.
  BudgetShare limit_;
  BudgetShare spent_;
  std::vector<BudgetLedger*> children_;  // running children
  bool released_ = false;
};

}  // namespace agentloop
