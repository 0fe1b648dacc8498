// Tool specs for the permission tests, with the pattern metadata of the
// built-in tools of the same names (src/tools declares the real ones). The
// permissions read a tool's metadata, never its name; these tests use the
// built-ins' shapes so that rules like `read(src/**)` have tools to apply to.
#pragma once

#include <string>
#include <vector>

#include "agentloop/types.h"

namespace agentloop::permissions {

inline ToolSpec TestSpec(const std::string& name) {
  ToolSpec s;
  s.name = name;
  s.mutates = true;
  if (name == "bash") {
    s.pattern_kind = RulePatternKind::kCommand;
    s.pattern_args = {"command"};
  } else if (name == "read" || name == "write" || name == "edit") {
    s.mutates = name != "read";
    s.pattern_kind = RulePatternKind::kPath;
    s.pattern_args = {"file_path"};
  } else if (name == "grep" || name == "glob" || name == "ls") {
    s.mutates = false;
    s.pattern_kind = RulePatternKind::kPath;
    s.pattern_args = {"path"};
    s.default_path = ".";
    s.reads_files = true;
  }
  return s;
}

inline ToolSpec TestSpec(const std::string& name, bool mutates) {
  ToolSpec s = TestSpec(name);
  s.mutates = mutates;
  return s;
}

// The specs of bash and the file tools.
inline std::vector<ToolSpec> TestSpecs() {
  std::vector<ToolSpec> out;
  for (const char* n : {"bash", "read", "write", "edit", "grep", "glob", "ls"}) {
    out.push_back(TestSpec(n));
  }
  return out;
}

}  // namespace agentloop::permissions
