// The built-in workspace tools: read, write, edit, grep, glob, ls and bash.
//
// Names and argument names are a contract (models are trained on them and
// users script against them); see docs/tools.md.
//
// Thread-safety: the tools keep no per-call state; Run() may be called
// concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "agentloop/tool.h"

namespace agentloop {

struct BuiltinToolOptions {
  // bash sandbox through bubblewrap: "off" | "workspace-write" | "read-only".
  std::string sandbox = "off";
  int bash_default_timeout_ms = 120000;
  int bash_max_timeout_ms = 600000;
  // Cap on what grep, glob, ls and bash return to the model (characters).
  size_t output_cap_chars = 30000;
};

// The seven tools, in the order read, write, edit, grep, glob, ls, bash.
std::vector<std::shared_ptr<Tool>> MakeBuiltinTools(const BuiltinToolOptions& options);

// Adds MakeBuiltinTools(options) to `registry`.
void RegisterBuiltinTools(ToolRegistry& registry, const BuiltinToolOptions& options);

}  // namespace agentloop
