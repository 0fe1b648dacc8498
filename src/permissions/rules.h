// Permission rules: what they are, how they are written, and whether one
// applies to a tool call. Resolution among rules is in policy.h.
//
// A rule is `tool` or `tool(pattern)` plus a decision (allow, ask, deny),
// optionally a name, a scope `tenant/environment/agent` (`*` wildcards) and a
// condition on the arguments `{field, op, value}`. Examples:
//   bash(git status*)   read(src/**)   edit(*.md)   write(secrets/**)
//   *                   bash           mcp__github__create_issue
//
// Patterns (see glob.h for the glob syntax):
//  - bash: matched against every simple command of the command line (see
//    shell_split.h). An allow rule applies only if EVERY simple command
//    matches, also naming the program its wrappers run, the line could be
//    fully parsed, no command is escalated by its options (command_risk.h;
//    unless the pattern is exactly the command) and no command redirects
//    output to a file (unless the pattern itself contains '>'); an ask or
//    deny rule applies if ANY simple command matches, also as the command
//    its wrappers run or in its "bare" form (`sudo /bin/rm x` is caught by
//    `rm*`), and on a line not fully parsed from any of its words on.
//  - Which tools take which pattern is the tools' own metadata
//    (ToolSpec::pattern_kind, pattern_args, default_path, reads_files); no
//    tool name is special here. Below, "bash" and "the file tools" are the
//    built-in tools that declare a command and a path pattern.
//  - bash (kCommand): see above.
//  - read, write, edit, grep, glob, ls (kPath): a path glob on the argument
//    the spec names, normalised relative to the workspace; grep, glob and ls
//    without a path mean their default path, the workspace root ("."). Relative patterns match
//    paths inside the workspace; `/abs/**` and `~/...` match absolute paths.
//    A pattern without '/' matches the last component anywhere (`.env`);
//    for ask/deny rules also outside the workspace.
//    Rules see the real path: a path rule is matched against the path as
//    written AND against the location it reaches on disk (symbolic links
//    resolved, see RealToolPath); policy.h combines the two so that the
//    stricter decision wins. An ask or deny rule for `read` also applies to
//    grep, glob and ls (they read or list the same files).
//  - other tools take no pattern (use a condition instead).
//
// Tool names compare case-insensitively (`Bash(ls)` = `bash(ls)`); a tool
// name may contain `*` (`mcp__github__*`).
//
// Thread-safety: Rule and RuleSet are immutable values after parsing; the
// compiled matchers they hold are shared and immutable.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/permission.h"
#include "agentloop/status.h"

#include "permissions/glob.h"
#include "permissions/shell_split.h"

namespace agentloop::permissions {

// "allow" | "ask" | "deny" (case-insensitive) -> Decision.
std::optional<Decision> ParseDecision(std::string_view name);

// Where a call happens, for scoped rules.
struct Scope {
  std::string tenant = "default";
  std::string environment = "production";
  std::string agent = "agentloop";
};

// `tenant/environment/agent`, each a literal or `*`.
struct ScopePattern {
  std::string tenant = "*";
  std::string environment = "*";
  std::string agent = "*";

  // Number of non-wildcard segments (0..3).
  int Specificity() const;
  bool Matches(const Scope& scope) const;
  std::string ToString() const;  // "acme/*/*"
  bool operator==(const ScopePattern&) const = default;
};

// Parses "a/b/c"; fewer segments are padded with `*` ("acme" =
// "acme/*/*"). Errors: more than 3 segments, an empty segment, a segment
// that mixes `*` with other characters.
Result<ScopePattern> ParseScopePattern(std::string_view text);

enum class ConditionOp { kEq, kNe, kGt, kGte, kLt, kLte, kIn, kContains };
std::string_view ConditionOpName(ConditionOp op);
std::optional<ConditionOp> ParseConditionOp(std::string_view name);

// A test on one argument. `field` is a dot path into the arguments
// ("options.depth", "files.0"). No expressions are evaluated.
struct Condition {
  std::string field;
  ConditionOp op = ConditionOp::kEq;
  Json value;

  bool operator==(const Condition&) const = default;
};

// True when the condition holds. A missing field, or a field whose type does
// not fit the operation (a string compared with gt to a number), is false:
// the rule does not apply and resolution falls through to other rules.
//  eq/ne: same JSON type (numbers compare numerically, 1 == 1.0);
//  gt/gte/lt/lte: two numbers, or two strings (byte order);
//  in: `value` is an array holding an element equal to the field;
//  contains: a string field containing the string `value`, or an array
//  field holding an element equal to `value`.
bool EvaluateCondition(const Condition& condition, const Json& args);

struct Rule {
  std::string name;                    // optional, for messages
  std::string tool;                    // "*", a tool name, or a name glob
  std::optional<std::string> pattern;  // as written, without the parentheses
  std::optional<Condition> condition;
  ScopePattern scope;
  Decision decision = Decision::kAsk;
  std::string source;  // where it came from: a config file path, "--allow", ...
  std::string text;    // canonical `tool` or `tool(pattern)`

  // How the named tool matches patterns, when the rule was parsed knowing
  // its spec; kNone otherwise (a tool glob, an unknown tool).
  RulePatternKind kind = RulePatternKind::kNone;
  // Compiled matchers (null when absent). Shared, immutable. A pattern is
  // compiled for the kind of its tool; for a rule whose tool's kind is not
  // known at parse time, both forms (the path form when it compiles), and a
  // call uses the form of its own tool's kind.
  std::shared_ptr<const Glob> command_glob;
  std::shared_ptr<const Glob> path_glob;
  std::shared_ptr<const Glob> tool_glob;  // only when `tool` has a wildcard

  // The name if set, else `text`.
  std::string DisplayName() const;
  // "'bash(git status*)' (allow, from --allow)", with the scope and the
  // condition when present.
  std::string Describe() const;
};

struct RuleSet {
  std::vector<Rule> rules;            // declaration order
  std::vector<std::string> warnings;  // rules that can never take effect
};

// One layer of rules as configuration and flags give them.
struct RuleSource {
  std::string source;  // e.g. "~/.config/agentloop/config.toml" or "--allow"
  std::vector<std::string> allow;
  std::vector<std::string> ask;
  std::vector<std::string> deny;
  // Structured rules: objects with `rule` ("bash(git *)") or `tool` (plus
  // optional `pattern`), `decision` (required), and optional `name`, `scope`
  // ("tenant/env/agent") and `when` ({field, op, value}). Unknown keys are
  // errors (a misspelt `when` must not silently widen a rule).
  std::vector<Json> tables;
};

struct ParseOptions {
  // Tools the session has. A rule naming one of them is compiled for its
  // pattern kind (a pattern on a tool that takes none is an error); rules
  // naming other tools get a warning (tools named `mcp__*` are exempt: MCP
  // servers are discovered later). Empty: no check.
  ToolSpecList tools;
};

// Parses `bash(git status*)`, `read(src/**)`, `*`, `bash`, `mcp__x__y`.
// `tools`: the session's tools (see ParseOptions::tools); may be empty.
// Errors (kInvalidArgument) name the rule and the source: an empty rule, a
// bad tool name, unbalanced parentheses, a pattern on `*` or on a known tool
// that takes none, a pattern that does not compile.
Result<Rule> ParseRule(std::string_view text, Decision decision, std::string source,
                       std::span<const ToolSpec> tools = {});

// Parses one structured rule (see RuleSource::tables).
Result<Rule> ParseRuleTable(const Json& table, std::string source,
                            std::span<const ToolSpec> tools = {});

// Parses every layer, in order. All errors are reported together (one
// kInvalidArgument, messages joined by "; "); nothing is half-loaded.
// Warnings: unknown tools, empty patterns, rules shadowed by a stricter rule
// of the same scope that matches everything they do.
Result<RuleSet> ParseRules(const std::vector<RuleSource>& sources,
                           const ParseOptions& options = {});

// Whether `a` applies to every call `b` applies to (used for shadowing
// warnings; conservative: false when unsure).
bool RuleCovers(const Rule& a, const Rule& b);

// A file path argument, normalised.
struct NormalizedPath {
  // Relative to the workspace ("." is the root); empty if outside (when no
  // workspace is known: the normalised relative path, maybe "../x").
  std::string relative;
  std::string absolute;  // empty when no workspace is known and the path is relative
  bool inside = false;   // within the workspace (or relative with no `..` when unknown)
};
NormalizedPath NormalizeToolPath(std::string_view path, const std::filesystem::path& workspace);

// What a rule pattern is matched against, computed once per call.
struct CallSubject {
  RulePatternKind kind = RulePatternKind::kNone;
  std::string command;                      // bash: the raw command string
  std::optional<CommandLine> command_line;  // bash: split
  std::optional<NormalizedPath> path;       // file tools: the path argument
  // File tools: where `path` leads on disk, when that differs from `path`
  // (a symbolic link on the way). Filled by ResolveSubjectPath.
  std::optional<NormalizedPath> real_path;
};
CallSubject DescribeCall(const ToolSpec& spec, const Json& args,
                         const std::filesystem::path& workspace);

// The location a path reaches on disk, resolved as the file tools resolve
// it: component by component, following symbolic links (a dangling one too:
// writing through it creates its target), components that do not exist yet
// appended lexically. nullopt when no symbolic link lies on the way (the
// written path is the real one) or the path cannot be resolved (a loop of
// links, an unreadable link); the tools refuse such paths themselves.
// Reads the file system (lstat, readlink); never writes.
std::optional<NormalizedPath> RealToolPath(const NormalizedPath& written,
                                           const std::filesystem::path& workspace);

// Fills subject.real_path for a file tool's path (see RealToolPath).
void ResolveSubjectPath(CallSubject& subject, const std::filesystem::path& workspace);

// The same subject with the real path in place of the written one (the
// subject itself when no real path differs).
CallSubject RealSubject(const CallSubject& subject);

// Whether `rule` applies to a call of `tool` with `args` in `scope` (tool
// name, pattern per the rule's decision, condition, scope). `home` expands
// `~/` in path patterns (empty: such patterns match nothing).
bool RuleApplies(const Rule& rule, const ToolSpec& spec, const Json& args,
                 const CallSubject& subject, const Scope& scope, const std::string& home);

// Whether `rule.tool` names `tool` (case-insensitive, globs, `*`).
bool ToolNameMatches(const Rule& rule, std::string_view tool);

}  // namespace agentloop::permissions
