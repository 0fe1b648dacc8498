// RunTurn: the blocking driver of a Turn, for the CLI, tests and embedders
// that are happy to give a turn a thread.
//
// It calls the provider, asks the approver, runs tool lanes (calls of a
// parallel lane on their own threads, results in model order) and returns
// when the turn finishes. Cancellation: `stop` is checked at every step and
// passed into the provider, the approver and the tools.
#pragma once

#include <filesystem>
#include <memory>
#include <stop_token>

#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"
#include "agentloop/turn.h"

namespace agentloop {

struct RunnerDeps {
  ModelProvider* provider = nullptr;    // required
  const ToolRegistry* tools = nullptr;  // required
  Approver* approver = nullptr;         // null: every `ask` is denied (fail closed)
  StreamSink* stream = nullptr;         // optional extra display sink for deltas
  ToolContext tool_context;             // workspace, ledger, scrubbed env
};

// Runs `turn` (already Start()ed) to completion.
TurnResult RunTurn(Turn& turn, RunnerDeps& deps, std::stop_token stop);

// Runs a batch of tool calls: lanes in order, calls within a lane
// concurrently. Unknown tools and thrown exceptions become is_error outputs.
std::vector<Result<ToolOutput>> RunToolLanes(const std::vector<std::vector<ToolCall>>& lanes,
                                             const ToolRegistry& tools, ToolContext& ctx);

}  // namespace agentloop
