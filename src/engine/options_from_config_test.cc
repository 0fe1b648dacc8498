// The mapping from configuration layers to EngineOptions and SessionOptions
// that the CLI and the server share.
#include "engine/options_from_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/files.h"

namespace agentloop::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class OptionsFromConfigTest : public ::testing::Test {
 protected:
  OptionsFromConfigTest() {
    root_ = fs::canonical(tmp_.path());
    fs::create_directories(root_ / "home");
    fs::create_directories(root_ / "ws");
    ctx_.env = {{"HOME", (root_ / "home").string()}};
    ctx_.cwd = root_ / "ws";
  }

  Config Load(std::vector<FlagOverride> flags = {}) {
    ConfigSources src;
    src.env = ctx_.env;
    src.workspace = root_ / "ws";
    src.flags = std::move(flags);
    Result<LoadedConfig> loaded = LoadConfig(src);
    EXPECT_TRUE(loaded.ok()) << loaded.error().ToString();
    return loaded.ok() ? loaded->config : DefaultConfig();
  }

  fs::path UserFile() const { return root_ / "home" / ".config" / "agentloop" / "config.toml"; }

  agentloop::testing::TempDir tmp_{"al_options_from_config"};
  fs::path root_;
  MappingContext ctx_;
};

TEST_F(OptionsFromConfigTest, ProviderBudgetsAndRulesWithSources) {
  agentloop::testing::WriteFile(UserFile(),
                                "[provider]\nkind = \"anthropic\"\nmodel = \"claude-x\"\n"
                                "[budget.fix]\nmax_tool_calls = 7\n"
                                "[permissions]\ndeny = [\"bash(rm*)\"]\n");
  Config c = Load({{"command", "fix", "--command"}, {"permissions.allow", "*", "--allow"}});
  bool configured = false;
  Result<SessionOptions> o = SessionOptionsFromConfig(c, root_ / "ws", ctx_, &configured);
  ASSERT_TRUE(o.ok()) << o.error().ToString();
  EXPECT_TRUE(configured);
  EXPECT_EQ(o->provider, ProviderKind::kAnthropic);
  EXPECT_EQ(o->model, "claude-x");
  EXPECT_EQ(o->command, CommandKind::kFix);
  EXPECT_EQ(o->max_tool_calls, 7);
  EXPECT_FALSE(o->max_tokens);  // not set anywhere: the command's default applies
  ASSERT_EQ(o->allow.size(), 1u);
  EXPECT_EQ(o->allow[0].source, "--allow");
  ASSERT_EQ(o->deny.size(), 1u);
  EXPECT_THAT(o->deny[0].source, HasSubstr("config.toml:"));
  EXPECT_EQ(o->workspace, root_ / "ws");
}

TEST_F(OptionsFromConfigTest, ProviderInferredFromKeyOrScript) {
  bool configured = true;
  ASSERT_TRUE(SessionOptionsFromConfig(Load(), root_ / "ws", ctx_, &configured).ok());
  EXPECT_FALSE(configured);
  ctx_.env["OPENAI_API_KEY"] = "k";
  Result<SessionOptions> o = SessionOptionsFromConfig(Load(), root_ / "ws", ctx_, &configured);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(configured);
  EXPECT_EQ(o->provider, ProviderKind::kOpenAI);
  o = SessionOptionsFromConfig(Load({{"provider.script", "s.json", "--script"}}), root_ / "ws",
                               ctx_, &configured);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->provider, ProviderKind::kScript);
  EXPECT_EQ(o->script_path, (root_ / "ws" / "s.json").string());  // relative to cwd
}

TEST_F(OptionsFromConfigTest, ABaseUrlAloneIsAnOpenAICompatibleServer) {
  bool configured = false;
  Result<SessionOptions> o = SessionOptionsFromConfig(
      Load({{"provider.base_url", "http://127.0.0.1:8080/v1", "--base-url"}}), root_ / "ws", ctx_,
      &configured);
  ASSERT_TRUE(o.ok()) << o.error().ToString();
  EXPECT_TRUE(configured);
  EXPECT_EQ(o->provider, ProviderKind::kOpenAI);
  EXPECT_EQ(o->base_url, "http://127.0.0.1:8080/v1");
  // A key in the environment still says which API the URL speaks.
  ctx_.env["ANTHROPIC_API_KEY"] = "k";
  o = SessionOptionsFromConfig(Load({{"provider.base_url", "http://127.0.0.1:8080", "--base-url"}}),
                               root_ / "ws", ctx_, &configured);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->provider, ProviderKind::kAnthropic);
}

TEST_F(OptionsFromConfigTest, UnsetKeyVariableAndWebhookWithoutUrlAreErrors) {
  Result<SessionOptions> o = SessionOptionsFromConfig(
      Load({{"provider.api_key_env", "MY_KEY", "--key-env"}}), root_ / "ws", ctx_, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(o.error().message(), HasSubstr("MY_KEY"));
  o = SessionOptionsFromConfig(Load({{"approver.kind", "webhook", "--approver"}}), root_ / "ws",
                               ctx_, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message(), HasSubstr("approver.webhook_url"));
}

TEST_F(OptionsFromConfigTest, SystemPromptOnlyFromAllowedRoots) {
  agentloop::testing::WriteFile(root_ / "ws" / "sp.md", "be brief");
  agentloop::testing::WriteFile(root_ / "elsewhere" / "sp.md", "be someone else");
  Result<SessionOptions> o = SessionOptionsFromConfig(
      Load({{"system_prompt_file", "sp.md", "--system-prompt-file"}}), root_ / "ws", ctx_, nullptr);
  ASSERT_TRUE(o.ok()) << o.error().ToString();
  EXPECT_EQ(o->system_prompt, "be brief");
  const Config outside = Load(
      {{"system_prompt_file", (root_ / "elsewhere" / "sp.md").string(), "--system-prompt-file"}});
  o = SessionOptionsFromConfig(outside, root_ / "ws", ctx_, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message(), HasSubstr("outside"));
  // A root of the context (an agent's folder) admits it.
  ctx_.prompt_roots.push_back(root_ / "elsewhere");
  o = SessionOptionsFromConfig(outside, root_ / "ws", ctx_, nullptr);
  ASSERT_TRUE(o.ok()) << o.error().ToString();
  EXPECT_EQ(o->system_prompt, "be someone else");
}

TEST_F(OptionsFromConfigTest, InteractiveAndEngineOptions) {
  Config c = Load();
  ctx_.interactive = true;
  Result<SessionOptions> o = SessionOptionsFromConfig(c, root_ / "ws", ctx_, nullptr);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->interactive);
  EXPECT_EQ(EngineOptionsFromConfig(c, ctx_.env).store_sync, StoreSync::kFull);
  EXPECT_EQ(EngineOptionsFromConfig(c, ctx_.env).env, ctx_.env);
  c = Load({{"store.sync", "normal", "--sync"}});
  EXPECT_EQ(EngineOptionsFromConfig(c, ctx_.env).store_sync, StoreSync::kNormal);
}

// store.pool_timeout_ms reaches the PostgreSQL store's options; 0 (the
// default) leaves the choice, the lease TTL, to the store.
TEST_F(OptionsFromConfigTest, StorePoolTimeout) {
  EXPECT_EQ(EngineOptionsFromConfig(Load(), ctx_.env).store_pool_timeout.count(), 0);
  Config c = Load({{"store.pool_timeout_ms", "2500", "--pool-timeout"}});
  EXPECT_EQ(EngineOptionsFromConfig(c, ctx_.env).store_pool_timeout.count(), 2500);
}

}  // namespace
}  // namespace agentloop::engine
