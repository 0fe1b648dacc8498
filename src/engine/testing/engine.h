// Test helpers for engines. For tests only.
#pragma once

#include <filesystem>

#include "agentloop/engine.h"

namespace agentloop::testing {

// Options of an engine that touches nothing of the user's: HOME is
// `root`/home and the data directory `root`/data.
inline EngineOptions IsolatedEngineOptions(const std::filesystem::path& root) {
  EngineOptions eo;
  eo.env = {{"HOME", (root / "home").string()}};
  eo.data_dir = root / "data";
  return eo;
}

}  // namespace agentloop::testing
