#include <cstdio>

#include "tools/tools.h"

namespace agentloop::tools {

void AppendNumberedLine(std::string& out, uint64_t lineno, std::string_view line) {
  char num[32];
  int n = std::snprintf(num, sizeof num, "%6llu\t", static_cast<unsigned long long>(lineno));
  out.append(num, static_cast<size_t>(n));
  out.append(line);
  out.push_back('\n');
}

bool CapAtLine(std::string& text, size_t cap, const std::string& note) {
  if (text.size() <= cap) return false;
  size_t budget = cap > note.size() + 2 ? cap - note.size() - 2 : 0;
  size_t cut = text.rfind('\n', budget);
  cut = cut == std::string::npos ? 0 : cut + 1;
  text.resize(cut);
  text += "\n";
  text += note;
  return true;
}

ToolSpec BuiltinSpec(const BuiltinSpecFields& fields) {
  ToolSpec s;
  s.name = std::string(fields.name);
  s.description = std::string(fields.description);
  s.input_schema = Json::parse(fields.schema);
  s.mutates = fields.mutates;
  s.parallel_safe = fields.parallel_safe;
  switch (fields.target) {
    case RuleTarget::kNone:
      break;
    case RuleTarget::kFilePath:
      s.pattern_kind = RulePatternKind::kPath;
      s.pattern_args = {"file_path"};
      break;
    case RuleTarget::kSearchPath:
      s.pattern_kind = RulePatternKind::kPath;
      s.pattern_args = {"path"};
      s.default_path = ".";
      s.reads_files = true;
      break;
    case RuleTarget::kCommand:
      s.pattern_kind = RulePatternKind::kCommand;
      s.pattern_args = {"command"};
      break;
  }
  return s;
}

std::string StringArg(const Json& input, const char* name, std::string def) {
  auto it = input.find(name);
  if (it == input.end() || !it->is_string()) return def;
  return it->get<std::string>();
}

int64_t IntArg(const Json& input, const char* name, int64_t def) {
  auto it = input.find(name);
  if (it == input.end()) return def;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number()) return static_cast<int64_t>(it->get<double>());
  return def;
}

bool BoolArg(const Json& input, const char* name, bool def) {
  auto it = input.find(name);
  if (it == input.end() || !it->is_boolean()) return def;
  return it->get<bool>();
}

}  // namespace agentloop::tools
