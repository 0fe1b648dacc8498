// RegisterBuiltinTools lives apart from MakeBuiltinTools so that linking the
// tools (e.g. in this module's tests) does not require ToolRegistry, which
// src/core implements.
#include "tools/builtin.h"

namespace agentloop {

void RegisterBuiltinTools(ToolRegistry& registry, const BuiltinToolOptions& options) {
  for (auto& tool : MakeBuiltinTools(options)) registry.Add(std::move(tool));
}

}  // namespace agentloop
