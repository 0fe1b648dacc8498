// Test helpers for the learning tests: the project's temporary directory and
// file helpers (src/base/testing/files.h), under the names these tests use.
#pragma once

#include "base/testing/files.h"

namespace agentloop::learning::testing {

using agentloop::testing::ReadFile;
using agentloop::testing::TempDir;
using agentloop::testing::WriteFile;

}  // namespace agentloop::learning::testing
