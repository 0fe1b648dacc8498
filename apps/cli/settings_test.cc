#include "settings.h"

#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "base/ids.h"
#include "config/trust.h"

namespace agentloop::cli {
namespace {

namespace fs = std::filesystem;

class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("al_cli_settings_" + NewId("t"));
    fs::create_directories(root_ / "home");
    fs::create_directories(root_ / "ws" / ".agentloop");
    ctx_.env = {{"HOME", (root_ / "home").string()}};
    ctx_.cwd = root_ / "ws";
  }
  void TearDown() override { fs::remove_all(root_); }

  Result<CliSettings> Load(std::vector<std::string> argv) {
    Result<CliArgs> a = ParseArgs(argv);
    EXPECT_TRUE(a.ok()) << a.error().ToString();
    if (!a.ok()) return a.error();
    return LoadSettings(*a, ctx_);
  }

  void Write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

  fs::path root_;
  CliContext ctx_;
};

TEST_F(SettingsTest, FlagsMapToSessionOptions) {
  auto s = Load({"run",
                 "--provider",
                 "anthropic",
                 "--model",
                 "claude-x",
                 "--base-url",
                 "http://127.0.0.1:9",
                 "--command",
                 "fix",
                 "--max-tool-calls",
                 "3",
                 "--max-tokens",
                 "5000",
                 "--max-turns",
                 "4",
                 "--allow",
                 "*",
                 "--deny",
                 "bash(rm*)",
                 "--no-todo-loop",
                 "--output",
                 "json",
                 "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  const SessionOptions& o = s->session;
  EXPECT_TRUE(s->provider_configured);
  EXPECT_EQ(o.provider, ProviderKind::kAnthropic);
  EXPECT_EQ(o.model, "claude-x");
  EXPECT_EQ(o.base_url, "http://127.0.0.1:9");
  EXPECT_EQ(o.command, CommandKind::kFix);
  EXPECT_EQ(o.max_tool_calls, 3);
  EXPECT_EQ(o.max_tokens, 5000);
  EXPECT_EQ(o.max_turns, 4);
  ASSERT_EQ(o.allow.size(), 1u);
  EXPECT_EQ(o.allow[0].rule, "*");
  EXPECT_EQ(o.allow[0].source, "--allow");
  ASSERT_EQ(o.deny.size(), 1u);
  EXPECT_EQ(o.deny[0].rule, "bash(rm*)");
  EXPECT_FALSE(o.todo_loop);
  EXPECT_EQ(s->output, OutputFormat::kJson);
  EXPECT_EQ(o.workspace, fs::weakly_canonical(root_ / "ws"));
}

TEST_F(SettingsTest, UnsetBudgetsStayUnset) {
  auto s = Load({"run", "--provider", "openai", "x"});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->session.max_tool_calls);
  EXPECT_FALSE(s->session.max_tokens);
  EXPECT_FALSE(s->session.max_turns);
}

TEST_F(SettingsTest, NoProviderIsReported) {
  auto s = Load({"run", "x"});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->provider_configured);
}

TEST_F(SettingsTest, ProviderInferredFromKeyOrScript) {
  ctx_.env["ANTHROPIC_API_KEY"] = "k";
  auto s = Load({"run", "x"});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->provider_configured);
  EXPECT_EQ(s->session.provider, ProviderKind::kAnthropic);
  ctx_.env.erase("ANTHROPIC_API_KEY");
  auto t = Load({"run", "--script", "demo.json", "x"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->session.provider, ProviderKind::kScript);
  EXPECT_EQ(t->session.script_path, (root_ / "ws" / "demo.json").string());
}

TEST_F(SettingsTest, WorkspaceFileAndProvenance) {
  const std::string text =
      "[provider]\nkind = \"script\"\nscript = \"s.json\"\n[permissions]\nallow = [\"read\"]\n"
      "deny = [\"bash(rm*)\"]\n";
  Write(root_ / "ws" / ".agentloop" / "config.toml", text);
  // Untrusted: the provider and the allow rule are ignored, the deny applies.
  auto s = Load({"run", "--allow", "bash(ls)", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->loaded.workspace_trust, WorkspaceTrust::kUntrusted);
  EXPECT_TRUE(s->session.script_path.empty());
  ASSERT_EQ(s->session.allow.size(), 1u);
  EXPECT_EQ(s->session.allow[0].source, "--allow");
  ASSERT_EQ(s->session.deny.size(), 1u);
  EXPECT_NE(s->session.deny[0].source.find("config.toml:"), std::string::npos);

  // Trusted in the data directory of the environment: read in full.
  auto data_dir = DefaultDataDir(ctx_.env);
  ASSERT_TRUE(data_dir.ok());
  ASSERT_TRUE(TrustWorkspace(TrustStorePath(*data_dir), root_ / "ws", 1).ok());
  s = Load({"run", "--allow", "bash(ls)", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->loaded.workspace_trust, WorkspaceTrust::kTrusted);
  EXPECT_EQ(s->session.provider, ProviderKind::kScript);
  // Relative to the file's directory.
  EXPECT_EQ(s->session.script_path, (root_ / "ws" / ".agentloop" / "s.json").string());
  ASSERT_EQ(s->session.allow.size(), 2u);
  EXPECT_EQ(s->session.allow[0].rule, "read");
  EXPECT_NE(s->session.allow[0].source.find("config.toml:"), std::string::npos);
  EXPECT_EQ(s->session.allow[1].source, "--allow");
}

TEST_F(SettingsTest, SandboxAndBashEnvironmentReachSessionOptions) {
  Write(root_ / "home" / ".config" / "agentloop" / "config.toml",
        "[provider]\napi_key_env = \"MY_LLM_KEY\"\n"
        "[approver]\nsecret_env = \"HOOK_HMAC\"\n"
        "[tools]\nnetwork = true\nsandbox_fallback = \"warn\"\n"
        "[tools.env]\npass = [\"GITHUB_TOKEN\"]\nset = {CI = \"1\"}\n");
  ctx_.env["MY_LLM_KEY"] = "k";
  int probes = 0;
  ctx_.sandbox_unavailable = [&probes] {
    ++probes;
    return std::string();
  };
  auto s = Load({"run", "--sandbox", "workspace-write", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->session.sandbox, SandboxMode::kWorkspaceWrite);
  EXPECT_TRUE(s->session.sandbox_network);
  EXPECT_EQ(s->session.sandbox_fallback, SandboxFallback::kWarn);
  EXPECT_EQ(s->session.env_remove, (std::vector<std::string>{"MY_LLM_KEY", "HOOK_HMAC"}));
  EXPECT_EQ(s->session.env_pass, std::vector<std::string>{"GITHUB_TOKEN"});
  EXPECT_EQ(s->session.env_set, (std::map<std::string, std::string>{{"CI", "1"}}));
  EXPECT_EQ(probes, 1);
  EXPECT_TRUE(s->loaded.warnings.empty());

  // Defaults: off, no network, refuse; no probe when the sandbox is off.
  Write(root_ / "home" / ".config" / "agentloop" / "config.toml", "");
  s = Load({"run", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->session.sandbox, SandboxMode::kOff);
  EXPECT_FALSE(s->session.sandbox_network);
  EXPECT_EQ(s->session.sandbox_fallback, SandboxFallback::kRefuse);
  EXPECT_EQ(probes, 1);
}

TEST_F(SettingsTest, UnavailableSandboxRefusesOrWarnsOnce) {
  ctx_.sandbox_unavailable = [] { return std::string("bubblewrap (bwrap) was not found"); };
  // Refuse (the default): a configuration error (exit 2) saying what to do.
  auto s = Load({"run", "--sandbox", "workspace-write", "x"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
  EXPECT_NE(
      s.error().message().find("the bash sandbox \"workspace-write\" (tools.sandbox, flag "
                               "--sandbox) cannot run here: bubblewrap (bwrap) was not found"),
      std::string::npos)
      << s.error().message();
  EXPECT_NE(s.error().message().find("tools.sandbox_fallback = \"warn\""), std::string::npos);

  // Warn: one line, and bash runs unsandboxed (the tool falls back itself).
  ctx_.env["AGENTLOOP_TOOLS_SANDBOX_FALLBACK"] = "warn";
  s = Load({"run", "--sandbox", "read-only", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_EQ(s->loaded.warnings.size(), 1u);
  EXPECT_NE(s->loaded.warnings[0].find("bash runs UNSANDBOXED"), std::string::npos);
  EXPECT_EQ(s->loaded.warnings[0].find('\n'), std::string::npos);
  EXPECT_EQ(s->session.sandbox_fallback, SandboxFallback::kWarn);

  // A read-only command never runs bash unsandboxed: it is simply not
  // offered, whatever the fallback says.
  ctx_.env.erase("AGENTLOOP_TOOLS_SANDBOX_FALLBACK");
  s = Load({"run", "--command", "plan", "--sandbox", "workspace-write", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_EQ(s->loaded.warnings.size(), 1u);
  EXPECT_NE(s->loaded.warnings[0].find("bash is not offered to the read-only 'plan' command"),
            std::string::npos)
      << s->loaded.warnings[0];

  // Subcommands that run no turn do not care.
  s = Load({"config", "show", "--sandbox", "workspace-write"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_TRUE(s->loaded.warnings.empty());
}

// store.sync reaches EngineOptions (and so the store of every subcommand),
// from the user file or the environment, never from the workspace file.
TEST_F(SettingsTest, StoreSyncMapsToEngineOptions) {
  auto s = Load({"run", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(engine::EngineOptionsFromConfig(s->loaded.config, ctx_.env).store_sync,
            StoreSync::kFull);
  EXPECT_EQ(engine::EngineOptionsFromConfig(s->loaded.config, ctx_.env).env, ctx_.env);

  Write(root_ / "ws" / ".agentloop" / "config.toml", "[store]\nsync = \"normal\"\n");
  s = Load({"run", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(engine::EngineOptionsFromConfig(s->loaded.config, ctx_.env).store_sync,
            StoreSync::kFull);
  ASSERT_EQ(s->loaded.warnings.size(), 1u);
  EXPECT_NE(s->loaded.warnings[0].find("store.sync"), std::string::npos);

  Write(root_ / "home" / ".config" / "agentloop" / "config.toml", "[store]\nsync = \"normal\"\n");
  s = Load({"run", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(engine::EngineOptionsFromConfig(s->loaded.config, ctx_.env).store_sync,
            StoreSync::kNormal);

  ctx_.env["AGENTLOOP_STORE_SYNC"] = "full";
  s = Load({"run", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(engine::EngineOptionsFromConfig(s->loaded.config, ctx_.env).store_sync,
            StoreSync::kFull);

  ctx_.env["AGENTLOOP_STORE_SYNC"] = "sometimes";  // warning, safe fallback, not an error
  s = Load({"approve", "p_1"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(engine::EngineOptionsFromConfig(s->loaded.config, ctx_.env).store_sync,
            StoreSync::kFull);
}

TEST_F(SettingsTest, MalformedFileIsAnInvalidArgumentNamingTheFile) {
  Write(root_ / "ws" / ".agentloop" / "config.toml", "[provider\nkind = 3\n");
  auto s = Load({"run", "x"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
  EXPECT_NE(s.error().message().find("config.toml"), std::string::npos);
}

TEST_F(SettingsTest, MissingWorkspaceIsAnError) {
  auto s = Load({"run", "-C", (root_ / "nope").string(), "x"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
}

TEST_F(SettingsTest, SystemPromptFileIsRead) {
  Write(root_ / "ws" / "sp.txt", "be brief");
  auto s = Load({"run", "--system-prompt-file", "sp.txt", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->session.system_prompt, "be brief");
  auto bad = Load({"run", "--system-prompt-file", "missing.txt", "x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kInvalidArgument);
}

TEST_F(SettingsTest, InteractiveOnlyWithTerminals) {
  auto s = Load({"run", "x"});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->session.interactive);
  ctx_.stdin_tty = ctx_.stderr_tty = true;
  auto t = Load({"run", "x"});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->session.interactive);
}

TEST_F(SettingsTest, ConfigFlagNamesTheUserFileAndItsAgents) {
  Write(root_ / "etc" / "config.toml", "[provider]\nmodel = \"from-etc\"\n");
  Write(root_ / "etc" / "agents" / "rev" / "agent.toml", "[agent]\nworkspace_root = \"" +
                                                             (root_ / "jobs").string() +
                                                             "\"\n[provider]\nkind = \"openai\"\n");
  fs::create_directories(root_ / "jobs" / "j1");
  const std::string file = (root_ / "etc" / "config.toml").string();
  auto s = Load({"run", "--config", file, "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->session.model, "from-etc");
  // -C names the subdirectory under the agent's root, not a directory of
  // the current one.
  s = Load({"run", "--config", file, "--agent", "rev", "-C", "j1", "x"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->workspace, fs::canonical(root_ / "jobs" / "j1"));
  EXPECT_EQ(s->session.workspace, s->workspace);
  EXPECT_EQ(s->session.model, "from-etc");
  EXPECT_EQ(s->session.provider, ProviderKind::kOpenAI);
  s = Load({"run", "--config", file, "--agent", "rev", "-C", "../ws", "x"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
  s = Load({"run", "--agent", "rev", "x"});  // not in the default config directory
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("no agent 'rev'"), std::string::npos);
  s = Load({"run", "--config", (root_ / "missing.toml").string(), "x"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("is not a file"), std::string::npos);
}

}  // namespace
}  // namespace agentloop::cli
