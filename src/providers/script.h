// The scripted-response format shared by ScriptedProvider (in-process) and
// the fake model server (tests/support), documented in docs/providers.md.
//
// A script is `{"responses": [item, ...]}` or a bare array of items. An item
// is either a response
//   {"text": "...", "thinking": "...", "thinking_signature": "...",
//    "tool_calls": [{"id": "c1", "name": "read", "input": {...}}
//                   | {"id": "c2", "name": "bash", "arguments": "<raw string>"}],
//    "usage": {"input_tokens": N, "output_tokens": M, "cache_read_tokens": ..,
//              "cache_write_tokens": .., "reasoning_tokens": ..},
//    "finish": "stop" | "tool_use" | "length", "delay_ms": N, "match": "..."}
// or an error `{"error": {"code": "unavailable", "message": "..."}}` where
// code is a Status code name (CodeName) such as "prompt_too_long".
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/provider.h"
#include "agentloop/status.h"

namespace agentloop {

struct ScriptItem {
  // Set for error items; `response` is then unused.
  std::optional<Status> error;
  ModelResponse response;
  int delay_ms = 0;
  // "match": the item answers only a request whose text holds this string
  // (ScriptedProvider: the system prompt and the offered tools' names, one
  // per line; the fake server: the request body). Such requests take the
  // first unused item they match, in order; empty: any request.
  std::string match;
  // The item as written, for consumers with extra keys (the fake server).
  Json raw;
};

// Parses a script (object with "responses" or bare array). Errors name the
// item index and the field that is wrong.
Result<std::vector<ScriptItem>> ParseScript(const Json& script);

// Parses one item; `index` only labels errors.
Result<ScriptItem> ParseScriptItem(const Json& item, size_t index);

// Inverse of CodeName ("unavailable" -> kUnavailable). nullopt if unknown.
std::optional<Code> ParseCodeName(std::string_view name);

// Reads and parses a script file.
Result<std::vector<ScriptItem>> LoadScriptFile(const std::string& path);

}  // namespace agentloop
