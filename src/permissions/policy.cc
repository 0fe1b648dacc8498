// Rule resolution, the session approval cache and explanations.
#include "permissions/policy.h"

#include <algorithm>
#include <sstream>

#include "base/strings.h"
#include "permissions/protected_paths.h"

namespace agentloop::permissions {
namespace {

// Key-sorted compact JSON, never throwing (invalid UTF-8 is replaced).
std::string CanonicalJson(const Json& v) {
  if (v.is_object()) {
    std::vector<std::pair<std::string, const Json*>> items;
    for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(it.key(), &it.value());
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string out = "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ",";
      out += DumpJson(Json(items[i].first)) + ":" + CanonicalJson(*items[i].second);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ",";
      out += CanonicalJson(v[i]);
    }
    return out + "]";
  }
  return DumpJson(v);
}

}  // namespace

RulesPolicy::RulesPolicy(RuleSet rules, PolicyOptions options)
    : rules_(std::move(rules)), options_(std::move(options)) {
  for (const Rule& r : rules_.rules) {
    if (r.decision != Decision::kAllow && r.pattern) has_restrictions_ = true;
  }
}

std::vector<RulesPolicy::Match> RulesPolicy::MatchSubject(const ToolSpec& spec, const Json& args,
                                                          const CallSubject& subject) const {
  std::vector<Match> out;
  for (const Rule& r : rules_.rules) {
    if (RuleApplies(r, spec, args, subject, options_.scope, options_.home)) {
      out.push_back({&r, r.scope.Specificity()});
    }
  }
  return out;
}

std::vector<RulesPolicy::Match> RulesPolicy::MatchingRules(const ToolSpec& spec,
                                                           const Json& args) const {
  CallSubject subject = DescribeCall(spec, args, options_.workspace);
  ResolveSubjectPath(subject, options_.workspace);
  std::vector<Match> out = MatchSubject(spec, args, subject);
  if (subject.real_path) {
    std::vector<Match> real = MatchSubject(spec, args, RealSubject(subject));
    for (const Match& m : real) {
      bool seen =
          std::any_of(out.begin(), out.end(), [&](const Match& o) { return o.rule == m.rule; });
      if (!seen) out.push_back(m);
    }
    std::sort(out.begin(), out.end(),
              [](const Match& a, const Match& b) { return a.rule < b.rule; });
  }
  return out;
}

Decision RulesPolicy::PathRestriction(const ToolSpec& spec, const std::string& abs_path) const {
  if (!has_restrictions_ || spec.pattern_kind != RulePatternKind::kPath) return Decision::kAllow;
  if (spec.pattern_args.empty()) return Decision::kAllow;
  Json args = Json::object();
  args[spec.pattern_args.front()] = abs_path;
  CallSubject subject = DescribeCall(spec, args, options_.workspace);
  Decision out = Decision::kAllow;
  for (const Rule& r : rules_.rules) {
    // Only rules that single out paths: a rule without a pattern (`ask *`,
    // `deny read`) decides the call itself, not which files it may see.
    if (!r.pattern || DecisionStrictness(r.decision) <= DecisionStrictness(out)) continue;
    if (RuleApplies(r, spec, args, subject, options_.scope, options_.home)) out = r.decision;
  }
  return out;
}

PolicyVerdict RulesPolicy::Evaluate(const ToolSpec& spec, const ToolCall& call) const {
  return Evaluate(spec, call.input);
}

PolicyVerdict RulesPolicy::Evaluate(const ToolSpec& spec, const Json& args) const {
  CallSubject subject = DescribeCall(spec, args, options_.workspace);
  ResolveSubjectPath(subject, options_.workspace);
  PolicyVerdict v = EvaluateRules(spec, args, subject);
  // Also for `ask`: marked always_ask, an approval "for this session" does
  // not carry over to the next write of the engine's configuration.
  if (v.decision == Decision::kDeny) return v;
  if (std::optional<std::string> why = ProtectedReason(spec, subject)) {
    v.decision = Decision::kAsk;
    v.always_ask = true;
    v.reason = "protected path: " + *why + " (the rules said: " + v.reason + ")";
  }
  return v;
}

std::optional<std::string> RulesPolicy::ProtectedReason(const ToolSpec& spec,
                                                        const CallSubject& subject) const {
  if (spec.always_ask) {
    return "'" + spec.name +
           "' changes the memories or skills later sessions are given, which could widen what "
           "the agent does in them: always asked";
  }
  if (subject.kind == RulePatternKind::kCommand) {
    // Read as text first: a line the shell reader does not understand can
    // still be allowed by a rule without a pattern (`bash`, `*`).
    if (auto why = SelfRunReason(subject.command)) return why;
  }
  if (subject.command_line) {
    return ProtectedCommandReason(*subject.command_line, options_.workspace,
                                  options_.protected_roots, options_.home);
  }
  if (!subject.path || !spec.mutates) return std::nullopt;
  // The written path, and where it leads (already resolved for the rules).
  for (const std::optional<NormalizedPath>& p : {subject.path, subject.real_path}) {
    if (!p) continue;
    const std::filesystem::path abs =
        p->absolute.empty() ? options_.workspace / p->relative : std::filesystem::path(p->absolute);
    if (auto why = ProtectedLocation(abs.lexically_normal(), options_.protected_roots)) return why;
  }
  return std::nullopt;
}

PolicyVerdict RulesPolicy::EvaluateRules(const ToolSpec& spec, const Json& args,
                                         const CallSubject& subject) const {
  if (options_.read_only_command && spec.mutates && !spec.confined_in_read_only) {
    return {Decision::kDeny,
            "read-only command: mutating tool '" + spec.name +
                "' is refused in plan mode (no rule can override this)",
            ""};
  }
  PolicyVerdict written = Resolve(spec, args, subject);
  if (!subject.real_path) return written;
  PolicyVerdict real = Resolve(spec, args, RealSubject(subject));
  if (DecisionStrictness(real.decision) <= DecisionStrictness(written.decision)) return written;
  const NormalizedPath& rp = *subject.real_path;
  real.reason = "the path leads through a symbolic link to " +
                (rp.inside ? rp.relative : rp.absolute) + ": " + real.reason;
  return real;
}

PolicyVerdict RulesPolicy::Resolve(const ToolSpec& spec, const Json& args,
                                   const CallSubject& subject) const {
  std::vector<Match> matches = MatchSubject(spec, args, subject);
  const Match* best = nullptr;
  for (const Match& m : matches) {
    if (best == nullptr || m.specificity > best->specificity ||
        (m.specificity == best->specificity &&
         DecisionStrictness(m.rule->decision) > DecisionStrictness(best->rule->decision))) {
      best = &m;
    }
  }
  if (best != nullptr) {
    return {best->rule->decision, "matched rule " + best->rule->Describe(),
            best->rule->DisplayName()};
  }
  Decision d = spec.mutates ? options_.default_mutating : options_.default_read_only;
  return {d,
          "no rule matched: default " + std::string(DecisionName(d)) + " for " +
              (spec.mutates ? "mutating" : "read-only") + " tool '" + spec.name + "'",
          ""};
}

SessionApprovals::SessionApprovals(std::filesystem::path workspace)
    : workspace_(std::move(workspace)) {}

std::string SessionApprovals::AccessKey(const ToolSpec& spec, const Json& args,
                                        const std::filesystem::path& workspace) {
  std::string key = ToLower(spec.name) + '\x1f';
  if (spec.pattern_kind == RulePatternKind::kCommand) {
    CallSubject s = DescribeCall(spec, args, workspace);
    if (s.command_line) return key + "command:" + s.command;
  }
  if (spec.pattern_kind == RulePatternKind::kPath) {
    CallSubject s = DescribeCall(spec, args, workspace);
    ResolveSubjectPath(s, workspace);
    if (s.path) {
      key += "path:" + (s.path->inside ? s.path->relative : s.path->absolute);
      // An approval of a path does not carry over to where a symbolic link
      // put there later leads.
      if (s.real_path) key += "\x1freal:" + s.real_path->absolute;
      return key;
    }
  }
  return key + "args:" + CanonicalJson(args);
}

void SessionApprovals::Remember(const ToolSpec& spec, const Json& args) {
  std::string k = AccessKey(spec, args, workspace_);
  std::lock_guard<std::mutex> lock(mu_);
  keys_.insert(std::move(k));
}

bool SessionApprovals::Contains(const ToolSpec& spec, const Json& args) const {
  std::string k = AccessKey(spec, args, workspace_);
  std::lock_guard<std::mutex> lock(mu_);
  return keys_.count(k) > 0;
}

size_t SessionApprovals::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_.size();
}

std::vector<std::string> SessionApprovals::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {keys_.begin(), keys_.end()};
}

void SessionApprovals::Restore(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_.insert(keys.begin(), keys.end());
}

void SessionApprovals::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  keys_.clear();
}

CachedPolicy::CachedPolicy(std::shared_ptr<const PermissionPolicy> inner,
                           std::shared_ptr<const SessionApprovals> approvals)
    : inner_(std::move(inner)), approvals_(std::move(approvals)) {}

PolicyVerdict CachedPolicy::Evaluate(const ToolSpec& spec, const ToolCall& call) const {
  PolicyVerdict v = inner_->Evaluate(spec, call);
  if (v.decision == Decision::kAsk && !v.always_ask && approvals_->Contains(spec, call.input)) {
    v.decision = Decision::kAllow;
    v.reason =
        "allowed for this session (approved earlier for this exact access; was: " + v.reason + ")";
  }
  return v;
}

std::string ExplainDecision(const RulesPolicy& policy, const ToolSpec& spec, const Json& args) {
  std::ostringstream out;
  PolicyVerdict v = policy.Evaluate(spec, args);
  out << "tool: " << spec.name << (spec.mutates ? " (mutating)" : " (read-only)") << "\n";
  out << "decision: " << DecisionName(v.decision) << "\n";
  out << "reason: " << v.reason << "\n";
  out << "rule: " << (v.rule.empty() ? "(default)" : v.rule) << "\n";
  const PolicyOptions& o = policy.options();
  out << "scope: " << o.scope.tenant << "/" << o.scope.environment << "/" << o.scope.agent << "\n";
  if (o.read_only_command) {
    out << "read-only command: mutating tools are denied (plan mode)\n";
  }
  CallSubject s = DescribeCall(spec, args, o.workspace);
  if (s.command_line) {
    out << "simple commands:";
    if (s.command_line->commands.empty()) out << " (none)";
    out << "\n";
    for (const auto& c : s.command_line->commands) {
      out << "  " << c.text;
      if (c.bare != c.text) out << "   [bare: " << c.bare << "]";
      if (c.writes_file) out << "   [writes a file]";
      if (!c.inner.empty()) out << "   [runs: " << c.inner << "]";
      if (!c.escalation.empty()) {
        out << "   [escalated: " << c.escalation << "; allow rules naming it do not apply]";
      }
      out << "\n";
    }
    if (!s.command_line->complete) {
      out << "  (not fully parsed: " << s.command_line->problem << "; allow rules cannot match)\n";
    }
  }
  if (s.path) {
    out << "path: " << (s.path->inside ? s.path->relative : s.path->absolute)
        << (s.path->inside ? "" : " (outside the workspace)") << "\n";
    ResolveSubjectPath(s, o.workspace);
    if (s.real_path) {
      out << "real path: " << (s.real_path->inside ? s.real_path->relative : s.real_path->absolute)
          << (s.real_path->inside ? "" : " (outside the workspace)")
          << " (through a symbolic link; rules are matched against both)\n";
    }
  }
  std::vector<RulesPolicy::Match> matches = policy.MatchingRules(spec, args);
  out << "matching rules:";
  if (matches.empty()) out << " (none)";
  out << "\n";
  for (const auto& m : matches) {
    out << "  " << DecisionName(m.rule->decision) << " " << m.rule->Describe() << " specificity "
        << m.specificity << "\n";
  }
  return out.str();
}

}  // namespace agentloop::permissions
