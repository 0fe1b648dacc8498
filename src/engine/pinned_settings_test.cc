// What a later process may change in a session's pinned settings: narrowing
// and explicit provider changes apply, widening is refused by name.
#include "engine/pinned_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "protocol/session_settings.h"

namespace agentloop::engine {
namespace {

using ::testing::HasSubstr;

SessionOptions Pinned() {
  SessionOptions o;
  o.workspace = "/work/ws";
  o.provider = ProviderKind::kOpenAI;
  o.model = "gpt-4.1";
  o.base_url = "http://127.0.0.1:9999/v1";
  o.api_key_env = "MY_KEY";
  o.command = CommandKind::kCode;
  o.max_tool_calls = 10;
  o.allow.push_back({"bash(git status*)", "--allow"});
  o.deny.push_back({"bash(rm*)", "--deny"});
  o.sandbox = SandboxMode::kWorkspaceWrite;
  o.bash_timeout_ms = 60000;
  o.approver = ApproverMode::kDurable;
  o.webhook_secret_env = "HOOK_SECRET";
  o.system_prompt = "be brief";
  o.system_prompt_source = "/etc/prompt.md";
  return o;
}

std::string Refusal(const SettingsOverrides& o) {
  Result<AppliedSettings> r = ApplyOverrides(Pinned(), o);
  EXPECT_FALSE(r.ok()) << "expected a refusal";
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  return r.error().message();
}

TEST(PinnedSettingsTest, NoOverridesChangeNothing) {
  Result<AppliedSettings> r = ApplyOverrides(Pinned(), {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_TRUE(r->changes.empty());
  EXPECT_EQ(PinnedSettingsToJson(r->options), PinnedSettingsToJson(Pinned()));
}

TEST(PinnedSettingsTest, NarrowingIsAppliedAndRecorded) {
  SettingsOverrides o;
  o.deny.push_back({"bash(curl*)", "--deny"});
  o.deny.push_back({"bash(rm*)", "--deny"});  // already pinned: no change
  o.ask.push_back({"write", "--ask"});
  o.max_tool_calls = 5;
  o.max_tokens = 1000;
  o.default_mutating = Decision::kDeny;
  o.sandbox = SandboxMode::kReadOnly;
  o.bash_timeout_ms = 1000;
  o.todo_loop = false;
  o.reflector = false;
  o.approver = ApproverMode::kNone;
  o.command = CommandKind::kPlan;
  o.sources["max_tool_calls"] = "--max-tool-calls";
  Result<AppliedSettings> r = ApplyOverrides(Pinned(), o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const SessionOptions& n = r->options;
  ASSERT_EQ(n.deny.size(), 2u);
  EXPECT_EQ(n.deny[1].rule, "bash(curl*)");
  ASSERT_EQ(n.ask.size(), 1u);
  EXPECT_EQ(n.max_tool_calls, 5);
  EXPECT_EQ(n.max_tokens, 1000);
  EXPECT_EQ(n.default_mutating, Decision::kDeny);
  EXPECT_EQ(n.sandbox, SandboxMode::kReadOnly);
  EXPECT_EQ(n.bash_timeout_ms, 1000);
  EXPECT_FALSE(n.todo_loop);
  EXPECT_FALSE(n.reflector);
  EXPECT_EQ(n.approver, ApproverMode::kNone);
  EXPECT_EQ(n.command, CommandKind::kPlan);
  std::vector<std::string> keys;
  for (const SettingChange& c : r->changes) keys.push_back(c.key);
  EXPECT_THAT(keys, ::testing::UnorderedElementsAre(
                        "permissions.deny", "permissions.ask", "budget.max_tool_calls",
                        "budget.max_tokens", "permissions.default_mutating", "sandbox",
                        "tools.bash_timeout_ms", "todo_loop", "reflector", "approver", "command"));
  for (const SettingChange& c : r->changes) {
    if (c.key == "budget.max_tool_calls") {
      EXPECT_EQ(c.from, 10);
      EXPECT_EQ(c.to, 5);
      EXPECT_EQ(c.source, "--max-tool-calls");
    }
  }
}

TEST(PinnedSettingsTest, ExplicitProviderChangesAreAppliedAndRecorded) {
  SettingsOverrides o;
  o.model = "gpt-5";
  o.base_url = "http://127.0.0.1:1234/v1";
  o.sources["model"] = "--model";
  Result<AppliedSettings> r = ApplyOverrides(Pinned(), o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->options.model, "gpt-5");
  EXPECT_EQ(r->options.base_url, "http://127.0.0.1:1234/v1");
  ASSERT_EQ(r->changes.size(), 2u);
  EXPECT_EQ(r->changes[0].key, "model");
  EXPECT_EQ(r->changes[0].from, "gpt-4.1");
  EXPECT_EQ(r->changes[0].to, "gpt-5");
  EXPECT_EQ(r->changes[0].source, "--model");
}

TEST(PinnedSettingsTest, AnAllowRuleIsRefusedUnlessAlreadyPinned) {
  SettingsOverrides same;
  same.allow.push_back({"bash(git status*)", "--allow"});
  EXPECT_TRUE(ApplyOverrides(Pinned(), same).ok());

  SettingsOverrides o;
  o.allow.push_back({"*", "--allow"});
  EXPECT_THAT(Refusal(o), HasSubstr("--allow * is not among the pinned allow rules"));
}

TEST(PinnedSettingsTest, AnAllowRuleThePersonAddsIsAppliedAndRecorded) {
  SettingsOverrides o;
  o.person_allow.push_back({"bash(make*)", "/permissions"});
  o.person_allow.push_back({"bash(git status*)", "/permissions"});  // already pinned
  Result<AppliedSettings> r = ApplyOverrides(Pinned(), o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->options.allow.size(), 2u);
  EXPECT_EQ(r->options.allow[1].rule, "bash(make*)");
  ASSERT_EQ(r->changes.size(), 1u);
  EXPECT_EQ(r->changes[0].key, "permissions.allow");
  EXPECT_EQ(r->changes[0].source, "/permissions");
}

TEST(PinnedSettingsTest, LargerBudgetsAreRefused) {
  SettingsOverrides o;
  o.max_tool_calls = 11;
  o.sources["max_tool_calls"] = "--max-tool-calls";
  EXPECT_THAT(Refusal(o), HasSubstr("--max-tool-calls 11 is larger than the pinned 10"));
  SettingsOverrides tokens;
  tokens.max_tokens = DefaultBudget(CommandKind::kCode).max_tokens + 1;
  EXPECT_THAT(Refusal(tokens), HasSubstr("is larger than the pinned"));
}

// The person at the session's own terminal raises its budgets: applied and
// recorded with where the value came from.
TEST(PinnedSettingsTest, LargerBudgetsThePersonSetsAreAppliedAndRecorded) {
  SettingsOverrides o;
  o.person_budgets = true;
  o.max_tool_calls = 40;
  o.max_tokens = 200'000;
  o.max_wall_time = std::chrono::milliseconds(1000);  // none pinned: a narrowing
  o.sources["max_tool_calls"] = "--max-tool-calls (at the terminal)";
  o.sources["max_tokens"] = "/budget";
  Result<AppliedSettings> r = ApplyOverrides(Pinned(), o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->options.max_tool_calls, 40);
  EXPECT_EQ(r->options.max_tokens, 200'000);
  EXPECT_EQ(EffectiveBudget(r->options).max_tool_calls, 40);
  ASSERT_EQ(r->changes.size(), 3u);
  EXPECT_EQ(r->changes[0].key, "budget.max_tool_calls");
  EXPECT_EQ(r->changes[0].from, Json(10));
  EXPECT_EQ(r->changes[0].to, Json(40));
  EXPECT_EQ(r->changes[0].source, "--max-tool-calls (at the terminal)");
  EXPECT_EQ(r->changes[1].key, "budget.max_tokens");
  EXPECT_EQ(r->changes[1].source, "/budget");
  // Only budgets: the same overrides' allow rule is still refused.
  o.allow.push_back({"bash(*)", "--allow"});
  EXPECT_THAT(Refusal(o), HasSubstr("bash(*) is not among the pinned allow rules"));
}

TEST(PinnedSettingsTest, LooserDefaultsSandboxAndSwitchesAreRefused) {
  SettingsOverrides def;
  def.default_mutating = Decision::kAllow;
  EXPECT_THAT(Refusal(def), HasSubstr("allow is looser than the pinned ask"));

  SettingsOverrides sandbox;
  sandbox.sandbox = SandboxMode::kOff;
  sandbox.sources["sandbox"] = "--sandbox";
  EXPECT_THAT(Refusal(sandbox), HasSubstr("--sandbox off over the pinned workspace-write"));
  SettingsOverrides network;
  network.sandbox_network = true;
  EXPECT_THAT(Refusal(network), HasSubstr("true over the pinned false"));

  SettingsOverrides timeout;
  timeout.bash_timeout_ms = 600000;
  EXPECT_THAT(Refusal(timeout), HasSubstr("larger than the pinned 60000"));

  SessionOptions off = Pinned();
  off.todo_loop = false;
  SettingsOverrides on;
  on.todo_loop = true;
  Result<AppliedSettings> r = ApplyOverrides(off, on);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("turns todo_loop on"));
}

TEST(PinnedSettingsTest, ApproverNoneCannotBeLoosened) {
  SessionOptions none = Pinned();
  none.approver = ApproverMode::kNone;
  SettingsOverrides o;
  o.approver = ApproverMode::kConsole;
  Result<AppliedSettings> r = ApplyOverrides(none, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("console over the pinned none"));
}

TEST(PinnedSettingsTest, AnotherWorkspaceOrAMutatingCommandIsRefused) {
  SettingsOverrides ws;
  ws.workspace = "/elsewhere";
  ws.sources["workspace"] = "-C";
  EXPECT_THAT(Refusal(ws), HasSubstr("-C /elsewhere is not the session's workspace /work/ws"));

  SessionOptions plan = Pinned();
  plan.command = CommandKind::kPlan;
  plan.max_tool_calls.reset();
  SettingsOverrides build;
  build.command = CommandKind::kBuild;
  Result<AppliedSettings> r = ApplyOverrides(plan, build);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("build over the pinned plan"));
}

TEST(PinnedSettingsTest, AScopedAskRuleIsRefused) {
  SettingsOverrides o;
  o.ask.push_back({R"j({"rule": "bash(rm*)", "decision": "ask", "scope": "a/b/c"})j", "--ask"});
  EXPECT_THAT(Refusal(o), HasSubstr("has a scope"));
}

TEST(PinnedSettingsTest, EveryWideningIsNamedAndNothingIsApplied) {
  SettingsOverrides o;
  o.allow.push_back({"*", "--allow"});
  o.max_tool_calls = 50;
  o.deny.push_back({"bash(curl*)", "--deny"});  // a narrowing in the same request
  const std::string msg = Refusal(o);
  EXPECT_THAT(msg, HasSubstr("--allow *"));
  EXPECT_THAT(msg, HasSubstr("50 is larger than the pinned 10"));
}

TEST(PinnedSettingsTest, CodecRoundTripsWithoutSecrets) {
  SessionOptions o = Pinned();
  o.api_key = "sk-secret-value";
  o.webhook_secret = "hook-secret-value";
  o.max_wall_time = std::chrono::milliseconds(5000);
  o.default_read_only = Decision::kAsk;
  Json j = PinnedSettingsToJson(o);
  EXPECT_EQ(j.dump().find("secret-value"), std::string::npos);
  EXPECT_EQ(j["provider"]["api_key_env"], "MY_KEY");
  EXPECT_EQ(j["approver"]["secret_env"], "HOOK_SECRET");
  EXPECT_EQ(j["system_prompt"]["source"], "/etc/prompt.md");
  Result<SessionOptions> back = PinnedSettingsFromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(PinnedSettingsToJson(*back), j);
  EXPECT_EQ(back->api_key, "");
  EXPECT_EQ(back->max_wall_time, std::chrono::milliseconds(5000));
  EXPECT_EQ(back->deny, o.deny);

  SessionOptions builtin;
  EXPECT_EQ(PinnedSettingsToJson(builtin)["system_prompt"]["source"], "built-in");

  Json bad = j;
  bad["budget"]["max_tokens"] = "many";
  Result<SessionOptions> err = PinnedSettingsFromJson(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.error().message(), HasSubstr("'budget.max_tokens' must be an integer"));
}

// The provider kind is stored by its name, the names a configuration file
// spells; a name this build does not know is refused by name.
TEST(PinnedSettingsTest, ProviderKindIsStoredByItsName) {
  SessionOptions o = Pinned();
  o.provider = ProviderKind::kOpenAIResponses;
  Json j = PinnedSettingsToJson(o);
  EXPECT_EQ(j["provider"]["kind"], "openai-responses");
  Result<SessionOptions> back = PinnedSettingsFromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->provider, ProviderKind::kOpenAIResponses);

  j["provider"]["kind"] = "gemini";
  Result<SessionOptions> err = PinnedSettingsFromJson(j);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.error().message(), HasSubstr("'provider.kind' must be openai, anthropic"));
}

TEST(PinnedSettingsTest, ParseProviderKindNamesTheKnownKinds) {
  for (ProviderKind k : {ProviderKind::kOpenAI, ProviderKind::kAnthropic,
                         ProviderKind::kOpenAIResponses, ProviderKind::kScript}) {
    Result<ProviderKind> back = ParseProviderKind(ProviderKindName(k));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, k);
  }
  Result<ProviderKind> err = ParseProviderKind("OpenAI");
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(err.error().message(),
            "unknown provider 'OpenAI': expected openai, anthropic, openai-responses or script");
}

class NamedTool final : public Tool {
 public:
  explicit NamedTool(std::string name) : spec_{std::move(name), "", Json::object()} {}
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override { return ToolOutput::Ok(""); }

 private:
  ToolSpec spec_;
};

class NamedHook final : public Hook {
 public:
  std::string_view name() const override { return "audit"; }
};

// Extensions are pinned by name only, and only when there are any: the
// settings of a session without them read and write as before.
TEST(PinnedSettingsTest, ExtensionsArePinnedByNameOnlyWhenPresent) {
  SessionOptions o = Pinned();
  EXPECT_FALSE(PinnedSettingsToJson(o).contains("extensions"));
  Result<PinnedExtensions> none = PinnedExtensionsFromJson(PinnedSettingsToJson(o));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tools.empty());
  EXPECT_FALSE(none->provider_factory);

  o.extensions.tools.push_back(std::make_shared<NamedTool>("weather"));
  o.extensions.hooks.push_back(std::make_shared<NamedHook>());
  o.extensions.provider_factory = [](const SessionOptions&) {
    return Result<std::shared_ptr<ModelProvider>>(Internal("unused"));
  };
  Json j = PinnedSettingsToJson(o);
  Result<PinnedExtensions> x = PinnedExtensionsFromJson(j);
  ASSERT_TRUE(x.ok()) << x.error().ToString();
  EXPECT_EQ(x->tools, std::vector<std::string>{"weather"});
  EXPECT_EQ(x->hooks, std::vector<std::string>{"audit"});
  EXPECT_TRUE(x->provider_factory);
  // The rest reads as without extensions.
  Result<SessionOptions> back = PinnedSettingsFromJson(j);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_TRUE(back->extensions.empty());

  j["extensions"]["tools"] = "weather";
  Result<PinnedExtensions> bad = PinnedExtensionsFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message(), HasSubstr("'extensions.tools' must be an array of strings"));
}

}  // namespace
}  // namespace agentloop::engine
