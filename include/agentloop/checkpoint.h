// What a paused turn keeps to continue later, in any process: the
// checkpoint of its open batch (turn.h drives it; the pending event carries
// it, event_data.h).
#pragma once

#include <string>
#include <vector>

#include "agentloop/permission.h"
#include "agentloop/types.h"

namespace agentloop {

// A person's decision about one item of a paused batch, kept in the
// checkpoint until every item is decided and the turn continues.
struct BatchDecision {
  PendingItem item;
  ApprovalDecision decision;  // kAllow (edited_input, answer) or kDeny
};

// What a paused turn needs to continue later, in any process.
struct Checkpoint {
  std::string session_id;
  std::string turn_id;
  // The tool_use ids of the open assistant message, in model order.
  std::vector<std::string> tool_use_ids;
  // Results decided or produced so far (tool_result blocks, model order).
  std::vector<ContentBlock> results_so_far;
  std::vector<PendingItem> outstanding;
  // Decisions recorded so far about items no longer outstanding.
  std::vector<BatchDecision> decisions;
  TurnCounters counters;
  CommandKind command = CommandKind::kCode;
  // The stuck guard's window (tool name and arguments of the latest calls),
  // so a continued turn judges repeats as the paused one would have.
  std::vector<std::string> recent_calls;
};

}  // namespace agentloop
