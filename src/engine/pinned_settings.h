// The settings pinned to a stored session and what a later process may
// change in them (SettingsOverrides): narrowing and explicit provider
// changes are applied and reported, widening is refused.
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "agentloop/engine.h"
#include "agentloop/event_data.h"
#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop::engine {

// One changed setting, as the `settings` event records it.
struct SettingChange {
  std::string key;  // "model", "permissions.deny", "budget.max_tool_calls", ...
  Json from;
  Json to;
  std::string source;  // the flag or caller that asked, e.g. "--model"
};

struct AppliedSettings {
  SessionOptions options;              // the pinned settings with the overrides applied
  std::vector<SettingChange> changes;  // empty: nothing changed
};

// Applies `overrides` to `pinned`. The workspaces are compared as given
// (the caller makes both canonical). Errors: kInvalidArgument whose message
// names every change that would widen the pinned settings, with the value
// it asked for and the pinned one; nothing is applied then.
Result<AppliedSettings> ApplyOverrides(const SessionOptions& pinned,
                                       const SettingsOverrides& overrides);

// The budget a session's options give its turns (command defaults plus the
// values set).
Budget EffectiveBudget(const SessionOptions& options);

// The `settings` event's data.
SettingsData SettingsEventData(const std::vector<SettingChange>& changes, const Json& settings);

}  // namespace agentloop::engine
