#include "agentloop/budget_ledger.h"

#include <algorithm>
#include <string>

namespace agentloop {

struct BudgetLedger::Tree {
  mutable std::mutex mu;
  SubagentCaps caps;
  int spawns = 0;  // Guarded by mu.
};

BudgetLedger::BudgetLedger(std::shared_ptr<Tree> tree, BudgetLedger* parent, int depth)
    : tree_(std::move(tree)), parent_(parent), depth_(depth) {}

BudgetLedger::~BudgetLedger() { Release(); }

std::shared_ptr<BudgetLedger> BudgetLedger::Root(const Budget& limits, const TurnCounters& spent,
                                                 Clock::time_point now, SubagentCaps caps,
                                                 int depth) {
  auto tree = std::make_shared<Tree>();
  tree->caps = caps;
  std::shared_ptr<BudgetLedger> root(new BudgetLedger(std::move(tree), nullptr, depth));
  root->limit_.tool_calls = limits.max_tool_calls;
  root->limit_.tokens = limits.max_tokens;
  if (limits.max_wall_time) root->limit_.deadline = now + *limits.max_wall_time;
  root->spent_.tool_calls = spent.tool_calls;
  root->spent_.tokens = spent.tokens;
  return root;
}

BudgetShare BudgetLedger::AvailableLocked(Clock::time_point now) const {
  BudgetShare a;
  a.tool_calls = limit_.tool_calls - spent_.tool_calls;
  a.tokens = limit_.tokens - spent_.tokens;
  for (const BudgetLedger* c : children_) {
    // What a running child spent is already in spent_; what it may still
    // spend is held for it.
    a.tool_calls -= std::max<int64_t>(0, c->limit_.tool_calls - c->spent_.tool_calls);
    a.tokens -= std::max<int64_t>(0, c->limit_.tokens - c->spent_.tokens);
  }
  a.tool_calls = std::max<int64_t>(0, a.tool_calls);
  a.tokens = std::max<int64_t>(0, a.tokens);
  a.deadline = limit_.deadline;
  (void)now;
  return a;
}

BudgetShare BudgetLedger::Available(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(tree_->mu);
  return AvailableLocked(now);
}

Result<std::shared_ptr<BudgetLedger>> BudgetLedger::Reserve(const Budget& wanted,
                                                            Clock::time_point now) {
  std::lock_guard<std::mutex> lock(tree_->mu);
  const SubagentCaps& caps = tree_->caps;
  if (depth_ + 1 > caps.max_depth) {
    return ResourceExhausted("subagent depth cap reached: a subagent at depth " +
                             std::to_string(depth_) + " may not start another (max depth " +
                             std::to_string(caps.max_depth) + ")");
  }
  if (static_cast<int>(children_.size()) >= caps.max_concurrent) {
    return ResourceExhausted(
        "concurrent subagent cap reached: " + std::to_string(children_.size()) +
        " already running (max " + std::to_string(caps.max_concurrent) + " per parent)");
  }
  if (tree_->spawns >= caps.max_spawns) {
    return ResourceExhausted("subagent spawn cap reached: " + std::to_string(tree_->spawns) +
                             " started in this root turn (max " + std::to_string(caps.max_spawns) +
                             ")");
  }
  const BudgetShare avail = AvailableLocked(now);
  if (avail.tool_calls <= 0 || avail.tokens <= 0 || (avail.deadline && *avail.deadline <= now)) {
    std::string what = avail.tool_calls <= 0 ? "tool calls"
                       : avail.tokens <= 0   ? "tokens"
                                             : "wall time";
    return ResourceExhausted("no budget left for a subagent: the caller has no " + what +
                             " left to share");
  }
  std::shared_ptr<BudgetLedger> child(new BudgetLedger(tree_, this, depth_ + 1));
  child->parent_ref_ = shared_from_this();
  child->limit_.tool_calls = std::min<int64_t>(wanted.max_tool_calls, avail.tool_calls);
  child->limit_.tokens = std::min<int64_t>(wanted.max_tokens, avail.tokens);
  child->limit_.deadline = avail.deadline;
  if (wanted.max_wall_time) {
    const Clock::time_point own = now + *wanted.max_wall_time;
    if (!child->limit_.deadline || own < *child->limit_.deadline) child->limit_.deadline = own;
  }
  children_.push_back(child.get());
  ++tree_->spawns;
  return child;
}

void BudgetLedger::Charge(int64_t tool_calls, int64_t tokens) {
  std::lock_guard<std::mutex> lock(tree_->mu);
  for (BudgetLedger* n = this; n != nullptr; n = n->parent_) {
    n->spent_.tool_calls += tool_calls;
    n->spent_.tokens += tokens;
  }
}

void BudgetLedger::Release() {
  std::lock_guard<std::mutex> lock(tree_->mu);
  if (released_ || parent_ == nullptr) return;
  released_ = true;
  auto& siblings = parent_->children_;
  siblings.erase(std::remove(siblings.begin(), siblings.end(), this), siblings.end());
}

BudgetShare BudgetLedger::limit() const {
  std::lock_guard<std::mutex> lock(tree_->mu);
  return limit_;
}

BudgetShare BudgetLedger::spent() const {
  std::lock_guard<std::mutex> lock(tree_->mu);
  return spent_;
}

int BudgetLedger::spawns() const {
  std::lock_guard<std::mutex> lock(tree_->mu);
  return tree_->spawns;
}

int BudgetLedger::running_children() const {
  std::lock_guard<std::mutex> lock(tree_->mu);
  return static_cast<int>(children_.size());
}

const SubagentCaps& BudgetLedger::caps() const { return tree_->caps; }

Budget BudgetLedger::AsBudget(int max_turns, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(tree_->mu);
  Budget b;
  b.max_tool_calls = static_cast<int>(std::min<int64_t>(limit_.tool_calls, 1 << 30));
  b.max_tokens = limit_.tokens;
  b.max_turns = max_turns;
  if (limit_.deadline) {
    b.max_wall_time =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::duration_cast<std::chrono::milliseconds>(*limit_.deadline - now));
  }
  return b;
}

}  // namespace agentloop
