// The JSON value type of the public API.
//
// Tool inputs, tool schemas and event payloads are JSON by nature, so the API
// uses one JSON value type: nlohmann::ordered_json, which keeps object keys in
// insertion order (a tool call's arguments are sent back to the provider in
// the order the model wrote them, and golden files are stable).
//
// Parsing and serialising wire formats is not done here: codecs live in
// src/protocol (engine types) and src/providers (model wire formats).
#pragma once

#include <nlohmann/json.hpp>

#include "agentloop/status.h"

namespace agentloop {

using Json = nlohmann::ordered_json;

// Parses `text` as JSON without throwing. Errors name the byte offset.
Result<Json> ParseJson(std::string_view text);

// Serialises compactly; invalid UTF-8 is replaced (U+FFFD), never thrown.
std::string DumpJson(const Json& value);

}  // namespace agentloop
