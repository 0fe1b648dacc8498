// Permission policies: resolving rules into one decision per call, the
// session approval cache, and `permissions check` explanations.
//
// Resolution (RulesPolicy::Evaluate):
//  1. In a read-only command (plan, explain) with `read_only_command` set, a
//     mutating tool is denied, whatever the rules say, unless it confines
//     itself there (ToolSpec::confined_in_read_only: bash in a read-only
//     sandbox), when the rules decide as for any mutating tool.
//  2. Among the rules that apply (rules.h: scope, tool, pattern, condition),
//     the most specific scope wins (specificity = non-wildcard segments of
//     `tenant/environment/agent`); within that specificity the strictest
//     decision wins (deny > ask > allow); among equals the first declared is
//     named in the reason.
//  3. No rule applies: the default decision (ask for mutating tools, allow
//     for read-only ones, unless configured).
//  4. A write to a protected path (protected_paths.h), or a bash line that
//     names one, is `ask` unless denied, marked `always_ask`: no rule and no
//     earlier approval for this session can allow it.
// For the file tools, steps 2 and 3 run for the path as written and, when a
// symbolic link lies on the way, again for the real path (rules.h,
// RealToolPath); the stricter of the two decisions wins, so an allow holds
// only when it holds for both.
//
// Thread-safety: RulesPolicy and CachedPolicy are immutable after
// construction and safe for concurrent Evaluate calls. SessionApprovals is
// internally synchronised.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agentloop/permission.h"

#include "permissions/rules.h"

namespace agentloop::permissions {

struct PolicyOptions {
  Scope scope;                      // where calls happen (for scoped rules)
  std::filesystem::path workspace;  // absolute; paths are matched relative to it
  std::string home;                 // expands `~/` in path patterns; empty: none
  Decision default_mutating = Decision::kAsk;
  Decision default_read_only = Decision::kAllow;
  // Plan/explain: mutating tools are denied by Evaluate (the turn enforces
  // this too; the flag lets `permissions check` show it).
  bool read_only_command = false;
  // Configuration outside the workspace (the user's config directory, the
  // data directory): writes there are asked like writes to `.agentloop/**`
  // (protected_paths.h).
  std::vector<std::filesystem::path> protected_roots;
};

class RulesPolicy final : public PermissionPolicy {
 public:
  RulesPolicy(RuleSet rules, PolicyOptions options);

  // See the file comment. Reasons look like
  //   matched rule 'bash(git status*)' (allow, from ~/.config/agentloop/config.toml)
  //   no rule matched: default ask for mutating tool 'write'
  // `rule` is the deciding rule's DisplayName(), empty for a default.
  PolicyVerdict Evaluate(const ToolSpec& spec, const ToolCall& call) const override;
  PolicyVerdict Evaluate(const ToolSpec& spec, const Json& args) const;

  struct Match {
    const Rule* rule;  // points into rules()
    int specificity;
  };
  // Every rule that applies to the call (for the written or the real
  // path), in declaration order.
  std::vector<Match> MatchingRules(const ToolSpec& spec, const Json& args) const;

  // The strictest ask or deny rule with a path pattern that covers the file
  // or directory at `abs_path` (absolute, symbolic links already resolved)
  // for `tool`; read rules count for grep, glob and ls. kAllow when no such
  // rule applies: allow rules, rules without a pattern (they decide the call
  // itself) and the defaults play no part. The tools use it to leave out
  // the files of a directory they search that a rule keeps from reading, and
  // to refuse a target that a deny rule covers where it was really opened.
  // REQUIRES: `spec` is the tool's spec (its path metadata locates the path).
  Decision PathRestriction(const ToolSpec& spec, const std::string& abs_path) const;

  const RuleSet& rules() const { return rules_; }
  const PolicyOptions& options() const { return options_; }

 private:
  // Steps 1-3 for a subject described (and its real path resolved) once.
  PolicyVerdict EvaluateRules(const ToolSpec& spec, const Json& args,
                              const CallSubject& subject) const;
  // Step 4: why the call touches a protected path, or nullopt.
  std::optional<std::string> ProtectedReason(const ToolSpec& spec,
                                             const CallSubject& subject) const;
  std::vector<Match> MatchSubject(const ToolSpec& spec, const Json& args,
                                  const CallSubject& subject) const;
  PolicyVerdict Resolve(const ToolSpec& spec, const Json& args, const CallSubject& subject) const;

  RuleSet rules_;
  PolicyOptions options_;
  bool has_restrictions_ = false;  // some ask or deny rule has a pattern
};

// "Allow for this session": remembered per exact access. The key is the tool
// plus the canonical access: for bash the exact command string, for file
// tools the normalised path (and the real path when a symbolic link lies on
// the way), for other tools the canonical (key-sorted) JSON
// of the arguments. Thread-safe.
class SessionApprovals {
 public:
  explicit SessionApprovals(std::filesystem::path workspace = {});

  void Remember(const ToolSpec& spec, const Json& args);
  bool Contains(const ToolSpec& spec, const Json& args) const;
  size_t size() const;
  void Clear();
  // The remembered accesses as opaque keys (AccessKey), to be stored with
  // the session, and their restoring when it is reopened.
  std::vector<std::string> Keys() const;
  void Restore(const std::vector<std::string>& keys);

  // The cache key of one access (exposed for tests and the event log).
  static std::string AccessKey(const ToolSpec& spec, const Json& args,
                               const std::filesystem::path& workspace);

 private:
  const std::filesystem::path workspace_;
  mutable std::mutex mu_;
  std::set<std::string> keys_;  // Guarded by mu_.
};

// Decorates a policy: an `ask` for an access approved for this session
// becomes `allow`. Never changes `deny` or `allow`.
class CachedPolicy final : public PermissionPolicy {
 public:
  // REQUIRES: both non-null.
  CachedPolicy(std::shared_ptr<const PermissionPolicy> inner,
               std::shared_ptr<const SessionApprovals> approvals);

  PolicyVerdict Evaluate(const ToolSpec& spec, const ToolCall& call) const override;

 private:
  std::shared_ptr<const PermissionPolicy> inner_;
  std::shared_ptr<const SessionApprovals> approvals_;
};

// For `agentloop permissions check TOOL JSON_ARGS`: the decision, the reason,
// the rule that made it, every rule that applied, and for bash the simple
// commands the line was split into. Several lines, ending with '\n'.
std::string ExplainDecision(const RulesPolicy& policy, const ToolSpec& spec, const Json& args);

}  // namespace agentloop::permissions
