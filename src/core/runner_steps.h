// What the blocking driver (RunTurn) and the asynchronous one (RunTurnAsync)
// share, so that both give a Turn the same answers: the forwarding of
// deltas, one tool call, the approver's decisions and the fail-closed rule.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"
#include "agentloop/turn.h"

namespace agentloop::core {

// Forwards provider deltas to the turn's event stream and an optional
// display sink.
class ForwardingSink final : public StreamSink {
 public:
  ForwardingSink(Turn& turn, StreamSink* extra) : turn_(turn), extra_(extra) {}
  void OnTextDelta(std::string_view text) override;
  void OnThinkingDelta(std::string_view text) override;
  void OnRetry(const RetryData& retry) override;

 private:
  Turn& turn_;
  StreamSink* extra_;
};

// Runs one call: an unknown tool, a cancelled turn, a wall-time budget that
// ran out before the call started (ToolContext::deadline) and a thrown
// exception become is_error outputs.
Result<ToolOutput> RunOne(const ToolCall& call, const ToolRegistry& tools, ToolContext& ctx);

// Asks `approver` about each request in order, stopping after the first
// denial (the batch is cancelled anyway). Without an approver every request
// is denied (fail closed); an approver that throws denies.
std::vector<ApprovalDecision> DecideAll(const std::vector<ApprovalRequest>& requests,
                                        Approver* approver, std::stop_token stop);

// The outputs of a batch when there is no tool registry.
std::vector<Result<ToolOutput>> NoRegistryOutputs(const std::vector<std::vector<ToolCall>>& lanes);

// The tool context of a turn's calls: `base` with the turn's stop token, and
// read_only in a read-only command (tools confine themselves there;
// Turn::CheckReadOnly).
ToolContext TurnToolContext(const ToolContext& base, const Turn& turn, std::stop_token stop);

// The deadline of a batch's calls (ToolContext::deadline): now + time_left.
std::optional<std::chrono::steady_clock::time_point> BatchDeadline(
    std::optional<std::chrono::milliseconds> time_left);

}  // namespace agentloop::core
