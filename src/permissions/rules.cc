// Rule parsing, load-time checks and per-rule matching.
#include "permissions/rules.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <sys/stat.h>

#include "base/strings.h"

namespace agentloop::permissions {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ToLower(a) == ToLower(b);
}

bool ValidToolChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '*' || c == ':';
}

// Numbers, strings, booleans, null, arrays and objects are the categories
// conditions compare within.
int Category(const Json& v) {
  if (v.is_number()) return 0;
  if (v.is_string()) return 1;
  if (v.is_boolean()) return 2;
  if (v.is_null()) return 3;
  if (v.is_array()) return 4;
  return 5;
}

bool SameValue(const Json& a, const Json& b) {
  if (Category(a) != Category(b)) return false;
  if (a.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

// -1, 0, 1; nullopt when the two cannot be ordered.
std::optional<int> Compare(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    double x = a.get<double>();
    double y = b.get<double>();
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return std::nullopt;
}

const Json* FindField(const Json& args, std::string_view path) {
  const Json* cur = &args;
  for (std::string_view seg : Split(path, '.')) {
    if (cur->is_object()) {
      auto it = cur->find(std::string(seg));
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      if (seg.empty() || seg.size() > 9 ||
          !std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return nullptr;
      }
      size_t idx = std::stoul(std::string(seg));
      if (idx >= cur->size()) return nullptr;
      cur = &(*cur)[idx];
    } else {
      return nullptr;
    }
  }
  return cur;
}

Status RuleError(std::string_view rule, std::string_view source, std::string_view what) {
  std::string m = "rule '" + std::string(rule) + "'";
  if (!source.empty()) m += " from " + std::string(source);
  m += ": " + std::string(what);
  return InvalidArgument(std::move(m));
}

Status CheckCondition(const Condition& c) {
  if (c.field.empty()) return InvalidArgument("condition has an empty field");
  for (std::string_view seg : Split(c.field, '.')) {
    if (seg.empty())
      return InvalidArgument("condition field '" + c.field + "' has an empty segment");
  }
  switch (c.op) {
    case ConditionOp::kIn:
      if (!c.value.is_array()) return InvalidArgument("condition op 'in' needs an array value");
      break;
    case ConditionOp::kGt:
    case ConditionOp::kGte:
    case ConditionOp::kLt:
    case ConditionOp::kLte:
      if (!c.value.is_number() && !c.value.is_string()) {
        return InvalidArgument("condition op '" + std::string(ConditionOpName(c.op)) +
                               "' needs a number or string value");
      }
      break;
    default:
      break;
  }
  return Status::Ok();
}

// "prefix" when `g` is `prefix*` (command) or `prefix/**` (path) with no
// other wildcard; nullopt otherwise.
std::optional<std::string> LiteralPrefix(const Rule& r) {
  if (!r.pattern) return std::nullopt;
  const std::string& p = *r.pattern;
  std::string prefix;
  if (r.kind == RulePatternKind::kCommand && p.size() >= 1 && p.back() == '*' &&
      !p.ends_with(":*")) {
    prefix = p.substr(0, p.size() - 1);
  } else if (r.kind == RulePatternKind::kPath && p.ends_with("/**")) {
    prefix = p.substr(0, p.size() - 2);  // keeps the trailing '/'
  } else {
    return std::nullopt;
  }
  if (prefix.find_first_of("*?[]{}\\") != std::string::npos) return std::nullopt;
  return prefix;
}

bool ToolNameCovers(const Rule& a, const Rule& b) {
  if (a.tool == "*") return true;
  if (b.tool_glob) return false;  // b is a glob: only `*` certainly covers it
  return ToolNameMatches(a, b.tool);
}

bool MatchesPathPattern(const Rule& rule, const NormalizedPath& p, const std::string& home,
                        bool widen) {
  if (!rule.path_glob) return false;
  const Glob& g = *rule.path_glob;
  const std::string& pat = *rule.pattern;
  if (pat.starts_with("~/")) {
    if (home.empty() || p.absolute.empty()) return false;
    std::string h = home;
    while (h.size() > 1 && h.back() == '/') h.pop_back();
    if (!p.absolute.starts_with(h + "/")) return false;
    return g.Matches("~/" + p.absolute.substr(h.size() + 1));
  }
  if (g.absolute()) return !p.absolute.empty() && g.Matches(p.absolute);
  if (p.inside) return g.Matches(p.relative.empty() ? "." : p.relative);
  // Outside the workspace: only ask/deny basename patterns reach it.
  if (widen && g.basename_only()) {
    return g.Matches(p.absolute.empty() ? p.relative : p.absolute);
  }
  return false;
}

// The literal text a command pattern starts with: `timeout 5 ls*` ->
// `timeout 5 ls`; `npm run test:*` -> `npm run test`.
std::string_view CommandPatternPrefix(std::string_view pattern) {
  std::string_view prefix = pattern.substr(0, pattern.find_first_of("*?[{\\"));
  if (prefix.size() < pattern.size() && prefix.ends_with(':')) prefix.remove_suffix(1);
  return prefix;
}

// An allow rule applies to one simple command: it matches the command as
// written, names the program that wrappers run (by matching the inner command
// too, or by spelling the wrapped program out literally, as
// `bash(timeout 5 ls*)` does), and no option escalates the command (unless
// the pattern is the exact command, without wildcards, or its literal
// beginning reaches past the words the escalation depends on).
bool AllowMatchesCommand(const Rule& rule, const SimpleCommand& c) {
  const Glob& g = *rule.command_glob;
  if (!g.Matches(c.text)) return false;
  if (!c.inner.empty() && !g.Matches(c.inner)) {
    std::string_view prefix = CommandPatternPrefix(*rule.pattern);
    if (prefix.size() < c.inner_program_end || !c.text.starts_with(prefix)) return false;
  }
  if (!c.escalation.empty() && !(g.IsLiteral() && *rule.pattern == c.text)) {
    // The pattern's literal beginning may spell out what escalates it
    // (`bash(python3 -m pytest*)` names the module that runs).
    std::string_view prefix = CommandPatternPrefix(*rule.pattern);
    if (prefix.size() < c.escalation_end || !c.text.starts_with(prefix)) return false;
  }
  return true;
}

bool MatchesCommandPattern(const Rule& rule, const CallSubject& s) {
  if (!rule.command_glob) return false;
  const Glob& g = *rule.command_glob;
  const CommandLine& line = *s.command_line;
  if (rule.decision == Decision::kAllow) {
    if (!line.complete) return false;
    if (line.commands.empty()) return g.Matches(Trim(s.command));
    bool pattern_redirects = rule.pattern->find('>') != std::string::npos;
    for (const auto& c : line.commands) {
      if (c.writes_file && !pattern_redirects) return false;
      if (!AllowMatchesCommand(rule, c)) return false;
    }
    return true;
  }
  for (const auto& c : line.commands) {
    if (g.Matches(c.text) || g.Matches(c.bare) || (!c.inner.empty() && g.Matches(c.inner)))
      return true;
  }
  // What could not be parsed is also tried whole, and from every word on
  // (`env -S 'rm x'`, `watch rm x`: a program may hide anywhere); so is an
  // escalated command, whose options may run one (`zip -TT 'rm x'`), also
  // as the value of a `--option=value` word (`tar --to-command='rm x'`).
  for (const auto& c : line.commands) {
    if (line.complete && c.escalation.empty()) continue;
    for (size_t k = 0; k < c.words.size(); ++k) {
      std::string suffix;
      for (size_t w = k; w < c.words.size(); ++w) suffix += (w > k ? " " : "") + c.words[w];
      if (g.Matches(suffix) || g.Matches(c.words[k])) return true;
      const std::string& word = c.words[k];
      if (size_t eq = word.find('='); word.starts_with("-") && eq != std::string::npos) {
        if (g.Matches(std::string_view(word).substr(eq + 1))) return true;
      }
    }
  }
  if (!line.complete || line.commands.empty()) return g.Matches(Trim(s.command));
  return false;
}

}  // namespace

std::optional<Decision> ParseDecision(std::string_view name) {
  return ParseDecisionName(ToLower(Trim(name)));
}

int ScopePattern::Specificity() const {
  return (tenant != "*") + (environment != "*") + (agent != "*");
}

bool ScopePattern::Matches(const Scope& s) const {
  return (tenant == "*" || tenant == s.tenant) &&
         (environment == "*" || environment == s.environment) && (agent == "*" || agent == s.agent);
}

std::string ScopePattern::ToString() const { return tenant + "/" + environment + "/" + agent; }

Result<ScopePattern> ParseScopePattern(std::string_view text) {
  std::vector<std::string_view> segs = Split(Trim(text), '/');
  if (segs.size() > 3) {
    return InvalidArgument("scope '" + std::string(text) +
                           "' has more than 3 segments (tenant/environment/agent)");
  }
  ScopePattern p;
  std::string* slots[3] = {&p.tenant, &p.environment, &p.agent};
  for (size_t k = 0; k < segs.size(); ++k) {
    std::string_view seg = Trim(segs[k]);
    if (seg.empty())
      return InvalidArgument("scope '" + std::string(text) + "' has an empty segment");
    if (seg != "*" && seg.find('*') != std::string_view::npos) {
      return InvalidArgument("scope segment '" + std::string(seg) +
                             "' must be a literal or '*' (no partial wildcards)");
    }
    *slots[k] = std::string(seg);
  }
  return p;
}

std::string_view ConditionOpName(ConditionOp op) {
  switch (op) {
    case ConditionOp::kEq:
      return "eq";
    case ConditionOp::kNe:
      return "ne";
    case ConditionOp::kGt:
      return "gt";
    case ConditionOp::kGte:
      return "gte";
    case ConditionOp::kLt:
      return "lt";
    case ConditionOp::kLte:
      return "lte";
    case ConditionOp::kIn:
      return "in";
    case ConditionOp::kContains:
      return "contains";
  }
  return "eq";
}

std::optional<ConditionOp> ParseConditionOp(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(ConditionOp::kContains); ++i) {
    auto op = static_cast<ConditionOp>(i);
    if (ConditionOpName(op) == name) return op;
  }
  return std::nullopt;
}

bool EvaluateCondition(const Condition& c, const Json& args) {
  const Json* f = FindField(args, c.field);
  if (f == nullptr) return false;
  switch (c.op) {
    case ConditionOp::kEq:
      return SameValue(*f, c.value);
    case ConditionOp::kNe:
      return Category(*f) == Category(c.value) && !SameValue(*f, c.value);
    case ConditionOp::kGt:
    case ConditionOp::kGte:
    case ConditionOp::kLt:
    case ConditionOp::kLte: {
      std::optional<int> cmp = Compare(*f, c.value);
      if (!cmp) return false;
      if (c.op == ConditionOp::kGt) return *cmp > 0;
      if (c.op == ConditionOp::kGte) return *cmp >= 0;
      if (c.op == ConditionOp::kLt) return *cmp < 0;
      return *cmp <= 0;
    }
    case ConditionOp::kIn:
      if (!c.value.is_array()) return false;
      for (const auto& e : c.value) {
        if (SameValue(*f, e)) return true;
      }
      return false;
    case ConditionOp::kContains:
      if (f->is_string() && c.value.is_string()) {
        return f->get_ref<const std::string&>().find(c.value.get_ref<const std::string&>()) !=
               std::string::npos;
      }
      if (f->is_array()) {
        for (const auto& e : *f) {
          if (SameValue(e, c.value)) return true;
        }
      }
      return false;
  }
  return false;
}

std::string Rule::DisplayName() const { return name.empty() ? text : name; }

std::string Rule::Describe() const {
  std::string out = "'" + DisplayName() + "' (" + std::string(DecisionName(decision));
  if (!name.empty()) out += ", " + text;
  if (scope.Specificity() > 0) out += ", scope " + scope.ToString();
  if (condition) {
    out += ", when " + condition->field + " " + std::string(ConditionOpName(condition->op)) + " " +
           DumpJson(condition->value);
  }
  if (!source.empty()) out += ", from " + source;
  out += ")";
  return out;
}

bool ToolNameMatches(const Rule& rule, std::string_view tool) {
  if (rule.tool == "*") return true;
  if (rule.tool_glob) return rule.tool_glob->Matches(ToLower(tool));
  return EqualsIgnoreCase(rule.tool, tool);
}

Result<Rule> ParseRule(std::string_view text, Decision decision, std::string source,
                       std::span<const ToolSpec> tools) {
  std::string_view t = Trim(text);
  if (t.empty()) return RuleError(text, source, "empty rule");
  Rule r;
  r.decision = decision;
  r.source = std::move(source);
  size_t open = t.find('(');
  std::string_view tool = t;
  if (open != std::string_view::npos) {
    if (t.back() != ')') return RuleError(t, r.source, "unbalanced parentheses (missing ')')");
    tool = Trim(t.substr(0, open));
    r.pattern = std::string(t.substr(open + 1, t.size() - open - 2));
  } else if (t.find(')') != std::string_view::npos) {
    return RuleError(t, r.source, "unbalanced parentheses (')' without '(')");
  }
  if (tool.empty()) return RuleError(t, r.source, "missing tool name before '('");
  for (char c : tool) {
    if (!ValidToolChar(c)) {
      return RuleError(t, r.source, "invalid character '" + std::string(1, c) + "' in tool name");
    }
  }
  r.tool = std::string(tool);
  if (r.tool != "*" && r.tool.find('*') != std::string::npos) {
    auto g = Glob::Compile(ToLower(r.tool), GlobMode::kText);
    if (!g.ok()) return RuleError(t, r.source, g.error().message());
    r.tool_glob = std::make_shared<const Glob>(std::move(*g));
  }
  const ToolSpec* spec = nullptr;
  if (r.tool != "*" && !r.tool_glob) {
    for (const ToolSpec& s : tools) {
      if (EqualsIgnoreCase(s.name, r.tool)) spec = &s;
    }
  }
  if (spec != nullptr) r.kind = spec->pattern_kind;
  if (r.pattern) {
    if (r.tool == "*" || (spec != nullptr && r.kind == RulePatternKind::kNone)) {
      std::string with;
      for (const ToolSpec& s : tools) {
        if (s.pattern_kind != RulePatternKind::kNone) with += (with.empty() ? "" : ", ") + s.name;
      }
      return RuleError(t, r.source,
                       "tool '" + r.tool + "' takes no pattern" +
                           (with.empty() ? "" : " (patterns apply to " + with + ")") +
                           "; use a condition ('when') instead");
    }
    auto compile = [&](GlobMode mode) -> Result<std::shared_ptr<const Glob>> {
      auto g = Glob::Compile(*r.pattern, mode);
      if (!g.ok()) return RuleError(t, r.source, "pattern does not parse: " + g.error().message());
      return std::make_shared<const Glob>(std::move(*g));
    };
    if (r.kind == RulePatternKind::kCommand) {
      AL_ASSIGN_OR_RETURN(r.command_glob, compile(GlobMode::kText));
    } else if (r.kind == RulePatternKind::kPath) {
      AL_ASSIGN_OR_RETURN(r.path_glob, compile(GlobMode::kPath));
    } else {
      // The tool's kind is not known here: both forms (a form that does not
      // compile in path mode matches no path).
      AL_ASSIGN_OR_RETURN(r.command_glob, compile(GlobMode::kText));
      if (auto g = compile(GlobMode::kPath); g.ok()) r.path_glob = std::move(*g);
    }
    r.text = r.tool + "(" + *r.pattern + ")";
  } else {
    r.text = r.tool;
  }
  return r;
}

Result<Rule> ParseRuleTable(const Json& table, std::string source,
                            std::span<const ToolSpec> tools) {
  if (!table.is_object()) return InvalidArgument("rule table from " + source + " is not a table");
  std::string label =
      table.contains("name") && table["name"].is_string()
          ? table["name"].get<std::string>()
          : (table.contains("rule") && table["rule"].is_string() ? table["rule"].get<std::string>()
                                                                 : DumpJson(table));
  static const std::vector<std::string> kKeys = {"name",  "rule", "tool",    "pattern",
                                                 "scope", "when", "decision"};
  for (auto it = table.begin(); it != table.end(); ++it) {
    if (std::find(kKeys.begin(), kKeys.end(), it.key()) == kKeys.end()) {
      return RuleError(label, source,
                       "unknown key '" + it.key() +
                           "' (expected name, rule, tool, pattern, decision, scope, when)");
    }
  }
  auto str = [&](const char* key) -> Result<std::optional<std::string>> {
    auto it = table.find(key);
    if (it == table.end()) return std::optional<std::string>();
    if (!it->is_string())
      return RuleError(label, source, std::string("'") + key + "' must be a string");
    return std::optional<std::string>(it->get<std::string>());
  };
  AL_ASSIGN_OR_RETURN(auto decision_s, str("decision"));
  if (!decision_s) return RuleError(label, source, "missing 'decision' (allow, ask or deny)");
  std::optional<Decision> decision = ParseDecision(*decision_s);
  if (!decision) {
    return RuleError(label, source, "decision '" + *decision_s + "' is not allow, ask or deny");
  }
  AL_ASSIGN_OR_RETURN(auto rule_s, str("rule"));
  AL_ASSIGN_OR_RETURN(auto tool_s, str("tool"));
  AL_ASSIGN_OR_RETURN(auto pattern_s, str("pattern"));
  AL_ASSIGN_OR_RETURN(auto name_s, str("name"));
  AL_ASSIGN_OR_RETURN(auto scope_s, str("scope"));
  std::string text;
  if (rule_s) {
    if (tool_s || pattern_s)
      return RuleError(label, source, "give either 'rule' or 'tool', not both");
    text = *rule_s;
  } else if (tool_s) {
    text = pattern_s ? *tool_s + "(" + *pattern_s + ")" : *tool_s;
  } else {
    return RuleError(label, source, "missing 'rule' or 'tool'");
  }
  auto parsed = ParseRule(text, *decision, source, tools);
  if (!parsed.ok()) return parsed.error();
  Rule r = std::move(*parsed);
  if (name_s) r.name = *name_s;
  if (scope_s) {
    auto sp = ParseScopePattern(*scope_s);
    if (!sp.ok()) return RuleError(label, source, sp.error().message());
    r.scope = *sp;
  }
  if (auto w = table.find("when"); w != table.end()) {
    if (!w->is_object())
      return RuleError(label, source, "'when' must be a table {field, op, value}");
    for (auto it = w->begin(); it != w->end(); ++it) {
      if (it.key() != "field" && it.key() != "op" && it.key() != "value") {
        return RuleError(label, source, "unknown key '" + it.key() + "' in 'when'");
      }
    }
    if (!w->contains("field") || !(*w)["field"].is_string()) {
      return RuleError(label, source, "'when.field' must be a string");
    }
    if (!w->contains("op") || !(*w)["op"].is_string()) {
      return RuleError(label, source, "'when.op' must be a string");
    }
    if (!w->contains("value")) return RuleError(label, source, "'when.value' is missing");
    Condition c;
    c.field = (*w)["field"].get<std::string>();
    std::string op = (*w)["op"].get<std::string>();
    std::optional<ConditionOp> parsed_op = ParseConditionOp(op);
    if (!parsed_op) {
      return RuleError(label, source,
                       "unknown op '" + op + "' (eq, ne, gt, gte, lt, lte, in, contains)");
    }
    c.op = *parsed_op;
    c.value = (*w)["value"];
    if (Status s = CheckCondition(c); !s.ok()) return RuleError(label, source, s.message());
    r.condition = std::move(c);
  }
  return r;
}

bool RuleCovers(const Rule& a, const Rule& b) {
  if (!(a.scope == b.scope)) return false;
  if (!ToolNameCovers(a, b)) return false;
  if (a.condition && !(b.condition && *a.condition == *b.condition)) return false;
  if (!a.pattern) return true;
  const bool everything = (!a.command_glob || a.command_glob->MatchesEverything()) &&
                          (!a.path_glob || a.path_glob->MatchesEverything());
  if (everything) return true;
  if (!b.pattern) return false;
  if (*a.pattern == *b.pattern) return true;
  std::optional<std::string> prefix = LiteralPrefix(a);
  if (!prefix) return false;
  if (a.kind == RulePatternKind::kPath) {
    // `dir/**` also matches `dir` itself.
    std::string_view dir = std::string_view(*prefix).substr(0, prefix->size() - 1);
    if (*b.pattern == dir) return true;
  }
  return b.pattern->starts_with(*prefix);
}

Result<RuleSet> ParseRules(const std::vector<RuleSource>& sources, const ParseOptions& options) {
  RuleSet set;
  std::vector<std::string> errors;
  for (const RuleSource& src : sources) {
    auto add_list = [&](const std::vector<std::string>& list, Decision d) {
      for (const auto& text : list) {
        auto r = ParseRule(text, d, src.source, options.tools.view());
        if (r.ok()) {
          set.rules.push_back(std::move(*r));
        } else {
          errors.push_back(r.error().message());
        }
      }
    };
    add_list(src.deny, Decision::kDeny);
    add_list(src.ask, Decision::kAsk);
    add_list(src.allow, Decision::kAllow);
    for (const Json& t : src.tables) {
      auto r = ParseRuleTable(t, src.source, options.tools.view());
      if (r.ok()) {
        set.rules.push_back(std::move(*r));
      } else {
        errors.push_back(r.error().message());
      }
    }
  }
  if (!errors.empty()) {
    std::string m;
    for (const auto& e : errors) m += (m.empty() ? "" : "; ") + e;
    return InvalidArgument(std::move(m));
  }
  for (const Rule& r : set.rules) {
    std::string where = r.source.empty() ? "" : " from " + r.source;
    if (!options.tools.empty() && r.tool != "*" && !r.tool_glob &&
        !ToLower(r.tool).starts_with("mcp__")) {
      bool known = std::any_of(options.tools.begin(), options.tools.end(),
                               [&](const ToolSpec& k) { return EqualsIgnoreCase(k.name, r.tool); });
      if (!known) {
        std::string list;
        for (const auto& k : options.tools) list += (list.empty() ? "" : ", ") + k.name;
        set.warnings.push_back("rule '" + r.text + "'" + where +
                               " can never match: no tool named '" + r.tool + "' (known: " + list +
                               ")");
      }
    }
    if (r.pattern && Trim(*r.pattern).empty()) {
      set.warnings.push_back("rule '" + r.text + "'" + where +
                             " has an empty pattern and can never match");
    }
  }
  for (size_t i = 0; i < set.rules.size(); ++i) {
    const Rule& weak = set.rules[i];
    for (size_t j = 0; j < set.rules.size(); ++j) {
      const Rule& strong = set.rules[j];
      if (i == j || DecisionStrictness(strong.decision) <= DecisionStrictness(weak.decision))
        continue;
      if (RuleCovers(strong, weak)) {
        set.warnings.push_back("rule " + weak.Describe() + " never takes effect: rule " +
                               strong.Describe() + " is stricter and matches everything it does");
        break;
      }
    }
  }
  return set;
}

NormalizedPath NormalizeToolPath(std::string_view path, const std::filesystem::path& workspace) {
  namespace fs = std::filesystem;
  NormalizedPath out;
  fs::path p(std::string{path});
  auto strip = [](std::string s) {
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  if (p.is_relative() && workspace.empty()) {
    std::string rel = strip(p.lexically_normal().generic_string());
    if (rel.empty()) rel = ".";
    out.relative = rel;
    out.inside = rel != ".." && !rel.starts_with("../");
    return out;
  }
  fs::path abs = p.is_relative() ? (workspace / p) : p;
  out.absolute = strip(abs.lexically_normal().generic_string());
  if (!workspace.empty()) {
    fs::path ws = workspace.lexically_normal();
    std::string ws_s = strip(ws.generic_string());
    if (out.absolute == ws_s) {
      out.relative = ".";
      out.inside = true;
    } else if (out.absolute.starts_with(ws_s == "/" ? "/" : ws_s + "/")) {
      out.relative = out.absolute.substr(ws_s == "/" ? 1 : ws_s.size() + 1);
      out.inside = true;
    }
  }
  return out;
}

CallSubject DescribeCall(const ToolSpec& spec, const Json& args,
                         const std::filesystem::path& workspace) {
  CallSubject s;
  s.kind = spec.pattern_kind;
  if (!args.is_object()) return s;
  // The first of the spec's pattern arguments given as a string.
  const Json* p = nullptr;
  for (const std::string& name : spec.pattern_args) {
    if (auto it = args.find(name); it != args.end() && it->is_string()) {
      p = &*it;
      break;
    }
  }
  if (s.kind == RulePatternKind::kCommand) {
    if (p != nullptr) {
      s.command = p->get<std::string>();
      s.command_line = SplitCommandLine(s.command);
    }
  } else if (s.kind == RulePatternKind::kPath) {
    if (p != nullptr && !p->get_ref<const std::string&>().empty()) {
      s.path = NormalizeToolPath(p->get_ref<const std::string&>(), workspace);
    } else if (p == nullptr && !spec.default_path.empty()) {
      s.path = NormalizeToolPath(spec.default_path, workspace);
    }
  }
  return s;
}

namespace {

// Components of an absolute or relative path, "" and "." dropped.
void PushPathComponents(std::string_view path, std::vector<std::string>& stack) {
  std::vector<std::string> parts;
  for (std::string_view seg : Split(path, '/')) {
    if (!seg.empty() && seg != ".") parts.emplace_back(seg);
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) stack.push_back(std::move(*it));
}

void PopPathComponent(std::string& cur) {
  size_t slash = cur.rfind('/');
  cur.resize(slash == 0 || slash == std::string::npos ? 1 : slash);
}

// Resolves `abs` like the file tools do (see RealToolPath). Sets *via_link
// when a symbolic link was followed.
std::optional<std::string> ResolveOnDisk(const std::string& abs, bool* via_link) {
  constexpr int kMaxLinks = 40;
  std::vector<std::string> stack;
  PushPathComponents(abs, stack);
  std::string cur = "/";
  int links = 0;
  bool missing = false;
  while (!stack.empty()) {
    std::string c = std::move(stack.back());
    stack.pop_back();
    if (c == "..") {
      PopPathComponent(cur);
      continue;
    }
    std::string next = cur == "/" ? "/" + c : cur + "/" + c;
    if (missing) {
      cur = std::move(next);
      continue;
    }
    struct stat st;
    if (lstat(next.c_str(), &st) != 0) {
      if (errno != ENOENT) return std::nullopt;
      missing = true;
      cur = std::move(next);
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxLinks) return std::nullopt;
      char buf[PATH_MAX];
      ssize_t n = readlink(next.c_str(), buf, sizeof buf - 1);
      if (n < 0) return std::nullopt;
      *via_link = true;
      std::string_view target(buf, static_cast<size_t>(n));
      if (!target.empty() && target[0] == '/') cur = "/";
      PushPathComponents(target, stack);
      continue;
    }
    cur = std::move(next);
  }
  return cur;
}

}  // namespace

std::optional<NormalizedPath> RealToolPath(const NormalizedPath& written,
                                           const std::filesystem::path& workspace) {
  if (written.absolute.empty()) return std::nullopt;
  bool via_link = false;
  std::optional<std::string> real = ResolveOnDisk(written.absolute, &via_link);
  if (!via_link || !real) return std::nullopt;
  // The workspace is matched by its real location too.
  std::filesystem::path ws = workspace;
  if (!workspace.empty()) {
    bool ws_link = false;
    if (auto w = ResolveOnDisk(workspace.lexically_normal().generic_string(), &ws_link)) ws = *w;
  }
  NormalizedPath out = NormalizeToolPath(*real, ws);
  if (out.absolute == written.absolute) return std::nullopt;
  return out;
}

void ResolveSubjectPath(CallSubject& subject, const std::filesystem::path& workspace) {
  if (subject.kind != RulePatternKind::kPath || !subject.path) return;
  subject.real_path = RealToolPath(*subject.path, workspace);
}

CallSubject RealSubject(const CallSubject& subject) {
  CallSubject out = subject;
  if (subject.real_path) {
    out.path = subject.real_path;
    out.real_path.reset();
  }
  return out;
}

bool RuleApplies(const Rule& rule, const ToolSpec& spec, const Json& args,
                 const CallSubject& subject, const Scope& scope, const std::string& home) {
  if (!rule.scope.Matches(scope)) return false;
  // What a rule keeps from `read` it keeps from the tools that search and
  // list files too.
  const bool read_rule_for_search = rule.decision != Decision::kAllow && rule.tool != "*" &&
                                    spec.reads_files && ToolNameMatches(rule, "read");
  if (!ToolNameMatches(rule, spec.name) && !read_rule_for_search) return false;
  if (rule.pattern) {
    bool widen = rule.decision != Decision::kAllow;
    // The pattern is read as the called tool reads patterns.
    switch (subject.kind) {
      case RulePatternKind::kCommand:
        if (!subject.command_line) return false;
        if (!MatchesCommandPattern(rule, subject)) return false;
        break;
      case RulePatternKind::kPath:
        if (!subject.path) return false;
        if (!MatchesPathPattern(rule, *subject.path, home, widen)) return false;
        break;
      case RulePatternKind::kNone:
        return false;
    }
  }
  if (rule.condition && !EvaluateCondition(*rule.condition, args)) return false;
  return true;
}

}  // namespace agentloop::permissions
