// JSON codec of the settings pinned to a session (SessionOptions without
// its secrets and per-process fields), the text the store keeps in
// sessions.settings. The format is documented in docs/storage.md.
//
// Thread-safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The names of the process-local extensions a session was created with
// (SessionExtensions): an object is not stored, only what it was called.
struct PinnedExtensions {
  std::vector<std::string> tools;
  std::vector<std::string> hooks;
  bool provider_factory = false;
};

// The "extensions" member of pinned settings; empty when there is none.
// Errors: kInvalidArgument naming the member of the wrong type.
Result<PinnedExtensions> PinnedExtensionsFromJson(const Json& j);

}  // namespace agentloop
