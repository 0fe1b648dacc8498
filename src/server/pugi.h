// The seeds' engine wire, `POST /api/pugi/engine`: one model call for a client
// that runs its own loop and its own tools. The client sends the transcript
// and the tools it offers; the server answers with the model's text or tool
// calls. What the server owns is checked here: the request's caps (at most 64
// tools, maxTokens at most 200,000, bounded strings) and plan mode's
// re-check, which refuses a tool list that offers anything but the engine's
// read-only tools when the command is `plan` (a client that forged its list
// gets 400, never a model call).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/provider.h"
#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop::server {

inline constexpr size_t kPugiMaxTools = 64;
inline constexpr int64_t kPugiMaxTokens = 200'000;

struct PugiCall {
  std::string persona;                 // the agent that answers
  std::optional<CommandKind> command;  // unset: the agent's
  std::string model;                   // empty: the agent's
  int64_t max_tokens = 0;              // 0: the agent's cap
  std::optional<double> temperature;   // checked; providers use their own
  std::string system;                  // the system messages, joined
  std::vector<Message> messages;
  std::vector<ToolSpec> tools;
};

// Reads a request body. Errors: kInvalidArgument naming the field and what
// it must be.
Result<PugiCall> ParsePugiRequest(const Json& body);

// Plan mode's re-check: every tool offered must be one of `read_only`.
// Errors: kPermissionDenied naming the first tool that is not.
Status CheckPugiPlanTools(const PugiCall& call, const std::set<std::string>& read_only);

// The answer: {stop: text|tool_use|length, content, toolCalls?, tokensUsed,
// model}.
Json PugiResponse(const ModelResponse& response, const std::string& model);

}  // namespace agentloop::server
