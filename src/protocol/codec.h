// JSON codecs for the engine's own types: how messages, pending items,
// checkpoints and results look in the session store, the event stream and
// `--output json`. This is the engine's format, not a model wire format.
//
// Decoders validate and return kInvalidArgument (or kDataLoss when the caller
// says the JSON came from storage) naming the field that is wrong.
#pragma once

#include "agentloop/json.h"
#include "agentloop/status.h"
#include "agentloop/turn.h"
#include "agentloop/types.h"

namespace agentloop {

Json ToJson(const ContentBlock& b);
Result<ContentBlock> ContentBlockFromJson(const Json& j);

Json ToJson(const Message& m);
Result<Message> MessageFromJson(const Json& j);

Json ToJson(const Usage& u);
Usage UsageFromJson(const Json& j);

Json ToJson(const TurnCounters& c);
TurnCounters TurnCountersFromJson(const Json& j);

Json ToJson(const PendingItem& p);
Result<PendingItem> PendingItemFromJson(const Json& j);

// A BatchDecision: {item, decision: "allow"|"deny", reason, by, answer?,
// edited_input?, remember?}. Defer is not a decision and is refused.
Json ToJson(const BatchDecision& d);
Result<BatchDecision> BatchDecisionFromJson(const Json& j);

Json ToJson(const Checkpoint& c);
Result<Checkpoint> CheckpointFromJson(const Json& j);

Json ToJson(const Budget& b);

}  // namespace agentloop
