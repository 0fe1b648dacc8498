#include "engine/pinned_settings.h"

#include <algorithm>

#include "protocol/session_settings.h"

namespace agentloop::engine {
namespace {

// Higher confines more; -1: a value this build cannot rank (only an equal
// value is accepted over it).
int SandboxRank(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::kOff:
      return 0;
    case SandboxMode::kWorkspaceWrite:
      return 1;
    case SandboxMode::kReadOnly:
      return 2;
  }
  return -1;
}

bool HasRule(const std::vector<SourcedRule>& rules, const std::string& rule) {
  return std::any_of(rules.begin(), rules.end(),
                     [&](const SourcedRule& r) { return r.rule == rule; });
}

// A structured rule with a scope may be more specific than a pinned rule and
// so replace a stricter decision (the most specific scope wins): it cannot
// be judged a narrowing.
bool ScopedRule(const std::string& rule) {
  return !rule.empty() && rule.front() == '{' && rule.find("\"scope\"") != std::string::npos;
}

class Applier {
 public:
  Applier(const SessionOptions& pinned, const SettingsOverrides& o)
      : pinned_(pinned), o_(o), out_{pinned, {}} {}

  Result<AppliedSettings> Run() {
    SessionOptions& n = out_.options;
    if (o_.workspace && *o_.workspace != pinned_.workspace) {
      Widen(Source("workspace", "-C") + " " + o_.workspace->string() +
            " is not the session's workspace " + pinned_.workspace.string() +
            " (its tools run there)");
    }
    // Provider: an explicit change is allowed and recorded.
    if (o_.provider && *o_.provider != n.provider) {
      Record("provider", Json(ProviderKindName(n.provider)), Json(ProviderKindName(*o_.provider)));
      n.provider = *o_.provider;
    }
    Change("model", o_.model, n.model);
    Change("base_url", o_.base_url, n.base_url);
    Change("api_key_env", o_.api_key_env, n.api_key_env);
    Change("script", o_.script_path, n.script_path);
    ChangeInt("provider.context_window", o_.context_window, n.context_window);
    ChangeInt("provider.max_output_tokens", o_.max_output_tokens, n.max_output_tokens);

    if (o_.command && *o_.command != pinned_.command) {
      if (IsReadOnly(*o_.command)) {
        Record("command", Json(CommandKindName(pinned_.command)),
               Json(CommandKindName(*o_.command)));
        n.command = *o_.command;
      } else {
        Widen(Source("command", "--command") + " " + std::string(CommandKindName(*o_.command)) +
              " over the pinned " + std::string(CommandKindName(pinned_.command)) +
              " (only a read-only command narrows)");
      }
    }

    // Budgets: compared as the turns would use them.
    const Budget before = EffectiveBudget(pinned_);
    Limit("budget.max_tool_calls", "--max-tool-calls", o_.max_tool_calls, n.max_tool_calls,
          static_cast<int64_t>(before.max_tool_calls));
    Limit("budget.max_tokens", "--max-tokens", o_.max_tokens, n.max_tokens, before.max_tokens);
    Limit("budget.max_turns", "--max-turns", o_.max_turns, n.max_turns,
          static_cast<int64_t>(before.max_turns));
    if (o_.max_wall_time) {
      const int64_t asked = o_.max_wall_time->count();
      if (before.max_wall_time && asked > before.max_wall_time->count() && !o_.person_budgets) {
        Widen(Source("budget.max_wall_time_ms", "budget.max_wall_time_ms") + " " +
              std::to_string(asked) + " is larger than the pinned " +
              std::to_string(before.max_wall_time->count()));
      } else if (!before.max_wall_time || asked < before.max_wall_time->count()) {
        Record("budget.max_wall_time_ms",
               before.max_wall_time ? Json(before.max_wall_time->count()) : Json(nullptr),
               Json(asked));
        n.max_wall_time = *o_.max_wall_time;
      }
    }
    // A changed command may also raise the defaults its budget starts from.
    if (n.command != pinned_.command) {
      const Budget after = EffectiveBudget(n);
      if (after.max_tool_calls > before.max_tool_calls || after.max_tokens > before.max_tokens ||
          after.max_turns > before.max_turns) {
        Widen("the budget of command " + std::string(CommandKindName(n.command)) +
              " is larger than the pinned one");
      }
    }

    // Rules: allow only widens; ask and deny are added.
    for (const SourcedRule& r : o_.allow) {
      if (!HasRule(pinned_.allow, r.rule)) {
        Widen(Label(r.source, "--allow") + " " + r.rule + " is not among the pinned allow rules");
      }
    }
    for (const SourcedRule& r : o_.person_allow) {
      if (HasRule(n.allow, r.rule)) continue;
      Record("permissions.allow", nullptr, Json(r.rule), r.source);
      n.allow.push_back(r);
    }
    AddRules("permissions.ask", o_.ask, n.ask, /*may_replace_stricter=*/true);
    AddRules("permissions.deny", o_.deny, n.deny, /*may_replace_stricter=*/false);
    Default("permissions.default_mutating", o_.default_mutating, n.default_mutating,
            Decision::kAsk);
    Default("permissions.default_read_only", o_.default_read_only, n.default_read_only,
            Decision::kAllow);

    if (o_.approver && *o_.approver != pinned_.approver) {
      if (pinned_.approver == ApproverMode::kNone) {
        Widen(Source("approver", "approver") + " " + std::string(ApproverModeName(*o_.approver)) +
              " over the pinned none (every ask is denied)");
      } else {
        Record("approver", Json(ApproverModeName(pinned_.approver)),
               Json(ApproverModeName(*o_.approver)));
        n.approver = *o_.approver;
      }
    }
    Change("approver.webhook_url", o_.webhook_url, n.webhook_url);
    Change("approver.secret_env", o_.webhook_secret_env, n.webhook_secret_env);

    if (o_.sandbox && *o_.sandbox != pinned_.sandbox) {
      const int asked = SandboxRank(*o_.sandbox), had = SandboxRank(pinned_.sandbox);
      if (asked < 0 || had < 0 || asked < had) {
        Widen(Source("sandbox", "--sandbox") + " " + std::string(SandboxModeName(*o_.sandbox)) +
              " over the pinned " + std::string(SandboxModeName(pinned_.sandbox)));
      } else {
        Record("sandbox", Json(SandboxModeName(pinned_.sandbox)),
               Json(SandboxModeName(*o_.sandbox)));
        n.sandbox = *o_.sandbox;
      }
    }
    if (o_.sandbox_network && *o_.sandbox_network != pinned_.sandbox_network) {
      if (*o_.sandbox_network) {
        Widen(Source("sandbox_network", "tools.network") +
              " true over the pinned false (the sandbox has no network)");
      } else {
        Record("tools.network", Json(true), Json(false));
        n.sandbox_network = false;
      }
    }
    if (o_.bash_timeout_ms && *o_.bash_timeout_ms != pinned_.bash_timeout_ms) {
      if (*o_.bash_timeout_ms > pinned_.bash_timeout_ms) {
        Widen(Source("bash_timeout_ms", "tools.bash_timeout_ms") + " " +
              std::to_string(*o_.bash_timeout_ms) + " is larger than the pinned " +
              std::to_string(pinned_.bash_timeout_ms));
      } else {
        Record("tools.bash_timeout_ms", Json(pinned_.bash_timeout_ms), Json(*o_.bash_timeout_ms));
        n.bash_timeout_ms = *o_.bash_timeout_ms;
      }
    }
    Switch("todo_loop", "--no-todo-loop", o_.todo_loop, n.todo_loop);
    Switch("reflector", "reflector.enabled", o_.reflector, n.reflector);

    if (o_.system_prompt && o_.system_prompt != pinned_.system_prompt) {
      Record("system_prompt",
             Json(pinned_.system_prompt ? pinned_.system_prompt_source : "built-in"),
             Json(o_.system_prompt_source ? *o_.system_prompt_source : "(given)"));
      n.system_prompt = o_.system_prompt;
      n.system_prompt_source = o_.system_prompt_source.value_or("(given)");
    }

    if (!widenings_.empty()) {
      std::string msg = "refusing to widen the settings pinned to the session:";
      for (const std::string& w : widenings_) msg += "\n  - " + w;
      msg +=
          "\nflags given to a stored session may only narrow them (another --deny or --ask, "
          "a smaller budget, a stricter default)";
      return InvalidArgument(msg);
    }
    return std::move(out_);
  }

 private:
  std::string Label(const std::string& source, std::string_view fallback) const {
    return source.empty() ? std::string(fallback) : source;
  }
  std::string Source(const std::string& key, std::string_view fallback) const {
    auto it = o_.sources.find(key);
    return it == o_.sources.end() ? std::string(fallback) : it->second;
  }
  void Widen(std::string what) { widenings_.push_back(std::move(what)); }
  void Record(const std::string& key, Json from, Json to, std::string source = "") {
    if (source.empty()) {
      // Sources are keyed by the override's field name ("max_tool_calls"
      // for "budget.max_tool_calls").
      std::string field = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
      source = Source(key, Source(field, "caller"));
    }
    out_.changes.push_back({key, std::move(from), std::move(to), std::move(source)});
  }
  void Change(const std::string& key, const std::optional<std::string>& asked, std::string& field) {
    if (!asked || *asked == field) return;
    Record(key, Json(field), Json(*asked));
    field = *asked;
  }
  // A model's numbers are facts about the model, not a permission: an
  // explicit change is allowed and recorded, like the model itself.
  void ChangeInt(const std::string& key, const std::optional<int64_t>& asked,
                 std::optional<int64_t>& field) {
    if (!asked || asked == field) return;
    Record(key, field ? Json(*field) : Json(nullptr), Json(*asked));
    field = asked;
  }
  template <typename T>
  void Limit(const std::string& key, std::string_view flag, const std::optional<T>& asked,
             std::optional<T>& field, int64_t pinned) {
    if (!asked) return;
    const auto v = static_cast<int64_t>(*asked);
    if (v > pinned && !o_.person_budgets) {
      std::string field_name = key.substr(key.rfind('.') + 1);
      Widen(Source(field_name, flag) + " " + std::to_string(v) + " is larger than the pinned " +
            std::to_string(pinned));
      return;
    }
    if (v == pinned) return;
    Record(key, Json(pinned), Json(v));
    field = *asked;
  }
  void AddRules(const std::string& key, const std::vector<SourcedRule>& asked,
                std::vector<SourcedRule>& field, bool may_replace_stricter) {
    for (const SourcedRule& r : asked) {
      if (HasRule(field, r.rule)) continue;
      if (may_replace_stricter && ScopedRule(r.rule)) {
        Widen(Label(r.source, "--ask") + " " + r.rule +
              " has a scope and may replace a stricter pinned rule");
        continue;
      }
      Record(key, nullptr, Json(r.rule), r.source);
      field.push_back(r);
    }
  }
  void Default(const std::string& key, const std::optional<Decision>& asked,
               std::optional<Decision>& field, Decision unset) {
    if (!asked) return;
    const Decision had = field.value_or(unset);
    if (*asked == had) return;
    if (DecisionStrictness(*asked) < DecisionStrictness(had)) {
      Widen(Source(key.substr(key.rfind('.') + 1), "permissions.default") + " " +
            std::string(DecisionName(*asked)) + " is looser than the pinned " +
            std::string(DecisionName(had)) + " (" + key + ")");
      return;
    }
    Record(key, Json(DecisionName(had)), Json(DecisionName(*asked)));
    field = *asked;
  }
  void Switch(const std::string& key, std::string_view flag, const std::optional<bool>& asked,
              bool& field) {
    if (!asked || *asked == field) return;
    if (*asked) {
      Widen(Source(key, flag) + " turns " + key + " on; it is off for this session");
      return;
    }
    Record(key, Json(true), Json(false));
    field = false;
  }

  const SessionOptions& pinned_;
  const SettingsOverrides& o_;
  AppliedSettings out_;
  std::vector<std::string> widenings_;
};

}  // namespace

Budget EffectiveBudget(const SessionOptions& o) {
  Budget b = DefaultBudget(o.command);
  if (o.max_tool_calls) b.max_tool_calls = *o.max_tool_calls;
  if (o.max_tokens) b.max_tokens = *o.max_tokens;
  if (o.max_turns) b.max_turns = *o.max_turns;
  if (o.max_wall_time) b.max_wall_time = *o.max_wall_time;
  return b;
}

Result<AppliedSettings> ApplyOverrides(const SessionOptions& pinned,
                                       const SettingsOverrides& overrides) {
  return Applier(pinned, overrides).Run();
}

SettingsData SettingsEventData(const std::vector<SettingChange>& changes, const Json& settings) {
  SettingsData d;
  for (const SettingChange& c : changes) d.changes.push_back({c.key, c.from, c.to, c.source});
  d.settings = settings;
  return d;
}

}  // namespace agentloop::engine
