// Test helper for JSON literals. For tests only.
#pragma once

#include <string_view>

#include "agentloop/json.h"

namespace agentloop::testing {

// The JSON value of `text`, which a test writes and knows to be valid.
inline Json J(std::string_view text) { return *ParseJson(text); }

}  // namespace agentloop::testing
