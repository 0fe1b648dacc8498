// Test helpers for text. For tests only.
#pragma once

#include <string>

namespace agentloop::testing {

// Whether `needle` occurs in `hay`.
inline bool Has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace agentloop::testing
