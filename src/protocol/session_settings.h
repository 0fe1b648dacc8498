// JSON codec of the settings pinned to a session (SessionOptions without
// its secrets and per-process fields), the text the store keeps in
// sessions.settings. The format is documented in docs/storage.md.
//
// Thread-safety: pure functions over values.
#pragma once

#include <optional>
#include <string_view>

#include "agentloop/engine.h"
#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop {

// "auto" | "console" | "durable" | "webhook" | "none".
std::string_view ApproverModeName(ApproverMode mode);
std::optional<ApproverMode> ParseApproverMode(std::string_view name);

// The pinned part of `options`: never api_key or webhook_secret (only the
// variables they come from), nor session_id, continue_latest, interactive
// or overrides.
Json PinnedSettingsToJson(const SessionOptions& options);

// The options the JSON describes (the fields PinnedSettingsToJson writes;
// the others keep their defaults). Missing fields keep their defaults too, so
// an older row reads. Errors: kInvalidArgument naming the field whose value
// has the wrong type or an unknown name.
Result<SessionOptions> PinnedSettingsFromJson(const Json& j);

}  // namespace agentloop
