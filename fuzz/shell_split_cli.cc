// Prints how the shell reader splits command lines, for the differential
// fuzzer (shell_differential.py): reads a JSON array of strings on standard
// input, writes a JSON array with, per line,
//   {"complete": bool, "problem": "...", "programs": ["timeout", "ls", ...],
//    "escalated": bool}
// where `programs` is every program the reader names (wrappers included) and
// `escalated` says whether a command's options escalate it (command_risk.h:
// allow rules naming it do not apply).
#include <iostream>
#include <iterator>
#include <string>

#include "agentloop/json.h"

#include "permissions/shell_split.h"

int main() {
  using agentloop::Json;
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto parsed = agentloop::ParseJson(input);
  if (!parsed.ok() || !parsed->is_array()) {
    std::cerr << "shell_split_cli: expected a JSON array of strings on standard input\n";
    return 2;
  }
  Json out = Json::array();
  for (const Json& line : *parsed) {
    if (!line.is_string()) {
      std::cerr << "shell_split_cli: every element must be a string\n";
      return 2;
    }
    agentloop::permissions::CommandLine got =
        agentloop::permissions::SplitCommandLine(line.get<std::string>());
    Json programs = Json::array();
    bool escalated = false;
    for (const auto& c : got.commands) {
      for (const auto& p : c.programs) programs.push_back(p);
      if (!c.escalation.empty()) escalated = true;
    }
    out.push_back(Json{{"complete", got.complete},
                       {"problem", got.problem},
                       {"programs", programs},
                       {"escalated", escalated}});
  }
  std::cout << agentloop::DumpJson(out) << "\n";
  return 0;
}
