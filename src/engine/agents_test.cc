// Agent definitions: loading and validation, the workspace policy, and the
// layers of an agent's session.
#include "engine/agents.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/files.h"

namespace agentloop::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using agentloop::testing::WriteFile;

class AgentsTest : public ::testing::Test {
 protected:
  AgentsTest() {
    root_ = fs::canonical(tmp_.path());
    config_dir_ = root_ / "config";
    fs::create_directories(root_ / "home");
    fs::create_directories(root_ / "ws");
    ctx_.env = {{"HOME", (root_ / "home").string()}};
    ctx_.cwd = root_ / "ws";
  }

  void Agent(const std::string& name, const std::string& toml) {
    WriteFile(config_dir_ / "agents" / name / "agent.toml", toml);
  }

  AgentDefinition Def(const std::string& name) {
    Result<AgentDefinition> d = LoadAgent(config_dir_, name);
    EXPECT_TRUE(d.ok()) << d.error().ToString();
    return d.ok() ? *d : AgentDefinition{};
  }

  ConfigSources Base() {
    ConfigSources s;
    s.env = ctx_.env;
    s.user_file = root_ / "home" / "config.toml";
    return s;
  }

  agentloop::testing::TempDir tmp_{"al_agents"};
  fs::path root_;
  fs::path config_dir_;
  MappingContext ctx_;
};

TEST_F(AgentsTest, NamesAreChecked) {
  EXPECT_TRUE(ValidateAgentName("reviewer").ok());
  EXPECT_TRUE(ValidateAgentName("a").ok());
  EXPECT_TRUE(ValidateAgentName("ci-bot_2").ok());
  EXPECT_TRUE(ValidateAgentName(std::string(64, 'a')).ok());
  EXPECT_FALSE(ValidateAgentName(std::string(65, 'a')).ok());
  EXPECT_FALSE(ValidateAgentName("").ok());
  EXPECT_FALSE(ValidateAgentName("-x").ok());
  EXPECT_FALSE(ValidateAgentName("_x").ok());
  EXPECT_FALSE(ValidateAgentName("Reviewer").ok());
  EXPECT_FALSE(ValidateAgentName("a/b").ok());
  EXPECT_FALSE(ValidateAgentName("..").ok());
}

TEST_F(AgentsTest, NoAgentsDirectoryIsAnEmptyList) {
  Result<std::vector<AgentDefinition>> all = LoadAgents(config_dir_);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

// A broken agent is listed with its problem (file and line) and the others
// still load.
TEST_F(AgentsTest, ABrokenAgentDoesNotStopTheOthers) {
  Agent("writer", "[agent]\ndescription = \"writes\"\n[provider]\nkind = \"openai\"\n");
  Agent("broken", "[agent]\ndescription = \"x\"\n[provider]\nmodle = \"m\"\n");
  Agent("typed", "[budget]\nmax_turns = \"many\"\n");
  Agent("Bad-Name", "");
  fs::create_directories(config_dir_ / "agents" / "empty");
  WriteFile(config_dir_ / "agents" / "notes.md", "not an agent folder");
  fs::create_directories(config_dir_ / "agents" / ".hidden");
  Result<std::vector<AgentDefinition>> all = LoadAgents(config_dir_);
  ASSERT_TRUE(all.ok()) << all.error().ToString();
  std::vector<std::string> names;
  for (const auto& a : *all) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Bad-Name", "broken", "empty", "typed", "writer"}));
  const AgentDefinition& bad_name = (*all)[0];
  ASSERT_EQ(bad_name.problems.size(), 1u);
  EXPECT_THAT(bad_name.problems[0], HasSubstr("[a-z0-9][a-z0-9_-]{0,63}"));
  const AgentDefinition& broken = (*all)[1];
  ASSERT_EQ(broken.problems.size(), 1u);
  EXPECT_THAT(broken.problems[0], HasSubstr("broken/agent.toml:4: unknown key 'provider.modle'"));
  EXPECT_THAT(broken.problems[0], HasSubstr("did you mean 'provider.model'?"));
  ASSERT_EQ((*all)[2].problems.size(), 1u);
  EXPECT_THAT((*all)[2].problems[0], HasSubstr("missing"));
  ASSERT_EQ((*all)[3].problems.size(), 1u);
  EXPECT_THAT((*all)[3].problems[0], HasSubstr("typed/agent.toml:2: budget.max_turns"));
  const AgentDefinition& writer = (*all)[4];
  EXPECT_TRUE(writer.ok());
  EXPECT_EQ(writer.description, "writes");
  EXPECT_EQ(writer.workspace_policy, AgentWorkspacePolicy::kCaller);

  // LoadAgent refuses a broken one with its problem, and suggests a name.
  Result<AgentDefinition> b = LoadAgent(config_dir_, "broken");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(b.error().message(), HasSubstr("provider.modle"));
  Result<AgentDefinition> missing = LoadAgent(config_dir_, "writr");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("did you mean 'writer'?"));
  EXPECT_EQ(LoadAgent(config_dir_, "../config").error().code(), Code::kInvalidArgument);
}

TEST_F(AgentsTest, AgentTableIsValidated) {
  Agent("a", "[agent]\ndescripton = \"x\"\n");
  Agent("b", "description = \"x\"\n");
  Agent("c", "[agent]\nworkspace = \"relative/dir\"\n");
  Agent("d", "[agent]\nworkspace = \"/srv/a\"\nworkspace_root = \"/srv\"\n");
  Agent("e", "[agent]\ncreate_workspace = true\n");
  Agent("f", "[agent]\ndescription = 3\n");
  auto problem = [&](const std::string& name) {
    Result<AgentDefinition> d = LoadAgent(config_dir_, name);
    EXPECT_FALSE(d.ok()) << name;
    return d.ok() ? std::string() : d.error().message();
  };
  EXPECT_THAT(problem("a"), HasSubstr("a/agent.toml:2: unknown key 'agent.descripton' (did you "
                                      "mean 'agent.description'?)"));
  EXPECT_THAT(problem("b"), HasSubstr("did you mean 'agent.description'?"));
  EXPECT_THAT(problem("c"), HasSubstr("c/agent.toml:2: agent.workspace must be an absolute path"));
  EXPECT_THAT(problem("d"), HasSubstr("exclude each other"));
  EXPECT_THAT(problem("e"), HasSubstr("agent.create_workspace needs agent.workspace_root"));
  EXPECT_THAT(problem("f"), HasSubstr("agent.description expects a string"));
}

TEST_F(AgentsTest, FixedWorkspace) {
  fs::create_directories(root_ / "srv" / "app");
  Agent("fixed", "[agent]\nworkspace = \"" + (root_ / "srv" / "app").string() + "\"\n");
  const AgentDefinition def = Def("fixed");
  EXPECT_EQ(def.workspace_policy, AgentWorkspacePolicy::kFixed);
  Result<fs::path> ws = ResolveAgentWorkspace(def, "", root_ / "ws");
  ASSERT_TRUE(ws.ok()) << ws.error().ToString();
  EXPECT_EQ(*ws, root_ / "srv" / "app");
  ws = ResolveAgentWorkspace(def, (root_ / "srv" / "app").string(), root_ / "ws");
  ASSERT_TRUE(ws.ok());
  EXPECT_FALSE(ResolveAgentWorkspace(def, "app", root_ / "srv").ok());
  ws = ResolveAgentWorkspace(def, (root_ / "ws").string(), root_ / "ws");
  ASSERT_FALSE(ws.ok());
  EXPECT_EQ(ws.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(ws.error().message(), HasSubstr("works only in"));
  fs::remove_all(root_ / "srv");
  ws = ResolveAgentWorkspace(def, "", root_ / "ws");
  ASSERT_FALSE(ws.ok());
  EXPECT_EQ(ws.error().code(), Code::kFailedPrecondition);
}

TEST_F(AgentsTest, WorkspaceRootConfinesTheRequest) {
  const fs::path root = root_ / "sessions";
  fs::create_directories(root / "alpha" / "deep");
  fs::create_directories(root_ / "outside");
  fs::create_directory_symlink(root_ / "outside", root / "escape");
  fs::create_directory_symlink(root / "alpha", root / "alias");
  Agent("rooted", "[agent]\nworkspace_root = \"" + root.string() + "\"\n");
  const AgentDefinition def = Def("rooted");
  EXPECT_EQ(def.workspace_policy, AgentWorkspacePolicy::kRoot);

  auto ok = [&](std::string_view req) {
    Result<fs::path> ws = ResolveAgentWorkspace(def, req, root_ / "ws");
    EXPECT_TRUE(ws.ok()) << req << ": " << ws.error().ToString();
    return ws.ok() ? *ws : fs::path();
  };
  auto refused = [&](std::string_view req) {
    Result<fs::path> ws = ResolveAgentWorkspace(def, req, root_ / "ws");
    EXPECT_FALSE(ws.ok()) << req << " was accepted as " << (ws.ok() ? ws->string() : "");
    if (ws.ok()) return std::string();
    EXPECT_EQ(ws.error().code(), Code::kInvalidArgument) << req;
    return ws.error().message();
  };
  EXPECT_EQ(ok("alpha"), root / "alpha");
  EXPECT_EQ(ok("alpha/deep"), root / "alpha" / "deep");
  EXPECT_EQ(ok("./alpha/"), root / "alpha");
  EXPECT_EQ(ok(""), root);
  EXPECT_EQ(ok("alias"), root / "alpha");  // a link that stays inside
  EXPECT_THAT(refused((root / "alpha").string()), HasSubstr("must be a relative path"));
  EXPECT_THAT(refused("../outside"), HasSubstr("may not contain '..'"));
  EXPECT_THAT(refused("alpha/../../outside"), HasSubstr("may not contain '..'"));
  EXPECT_THAT(refused("escape"), HasSubstr("leads outside the root"));
  EXPECT_THAT(refused("escape/sub"), HasSubstr("leads outside the root"));
  EXPECT_THAT(refused("beta"), HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(root / "beta"));
  EXPECT_THAT(refused(std::string("a\0b", 3)), HasSubstr("NUL"));
  // The agent name and the root are in the message for the server's client.
  EXPECT_THAT(refused("beta"), HasSubstr("agent 'rooted'"));
}

TEST_F(AgentsTest, WorkspaceRootCreatesMissingDirectories) {
  const fs::path root = root_ / "sessions";
  fs::create_directories(root);
  fs::create_directories(root_ / "outside");
  fs::create_directory_symlink(root_ / "outside", root / "escape");
  Agent("maker", "[agent]\nworkspace_root = \"" + root.string() + "\"\ncreate_workspace = true\n");
  const AgentDefinition def = Def("maker");
  Result<fs::path> ws = ResolveAgentWorkspace(def, "team/s1", root_ / "ws");
  ASSERT_TRUE(ws.ok()) << ws.error().ToString();
  EXPECT_EQ(*ws, root / "team" / "s1");
  EXPECT_TRUE(fs::is_directory(root / "team" / "s1"));
  // Never through a link out of the root, even when creating.
  ws = ResolveAgentWorkspace(def, "escape/new", root_ / "ws");
  ASSERT_FALSE(ws.ok());
  EXPECT_FALSE(fs::exists(root_ / "outside" / "new"));
  // A refused value creates nothing, also where its first part was fine.
  for (const std::string& bad : {std::string("fresh/../x"), std::string("fresh/more/..") + "/y",
                                 "fresh/" + std::string(300, 'n'), std::string("fresh/a\0b", 9)}) {
    EXPECT_FALSE(ResolveAgentWorkspace(def, bad, root_ / "ws").ok()) << bad;
    EXPECT_FALSE(fs::exists(root / "fresh")) << bad;
  }
  std::string deep = "made";
  for (int i = 0; i < 5; ++i) deep += "/" + std::string(250, 'z');
  EXPECT_FALSE(ResolveAgentWorkspace(def, deep, root_ / "ws").ok());
  EXPECT_FALSE(fs::exists(root / "made"));
  std::ofstream(root / "team" / "file") << "x";
  EXPECT_FALSE(ResolveAgentWorkspace(def, "team/file/sub", root_ / "ws").ok());
  EXPECT_FALSE(fs::exists(root / "team" / "file" / "sub"));
}

TEST_F(AgentsTest, CallerWorkspace) {
  Agent("plain", "");
  const AgentDefinition def = Def("plain");
  Result<fs::path> ws = ResolveAgentWorkspace(def, "", root_ / "ws");
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(*ws, root_ / "ws");
  EXPECT_FALSE(ResolveAgentWorkspace(def, "relative", root_ / "ws").ok());
  EXPECT_FALSE(ResolveAgentWorkspace(def, (root_ / "nope").string(), root_ / "ws").ok());
}

// user file < agent file < workspace file (untrusted) < environment < flags;
// system.md replaces the built-in prompt.
TEST_F(AgentsTest, SessionOptionsLayerTheAgentAboveTheUserFile) {
  WriteFile(root_ / "home" / "config.toml",
            "[provider]\nkind = \"openai\"\nmodel = \"user-model\"\n"
            "[permissions]\ndeny = [\"bash(rm*)\"]\n");
  Agent("rev",
        "[agent]\ndescription = \"reviews\"\n[provider]\nkind = \"script\"\n"
        "script = \"demo.json\"\nmodel = \"agent-model\"\n[budget]\nmax_tool_calls = 9\n"
        "[permissions]\nallow = [\"read\"]\n");
  WriteFile(config_dir_ / "agents" / "rev" / "system.md", "You review code.");
  WriteFile(root_ / "ws" / ".agentloop" / "config.toml",
            "[provider]\nkind = \"anthropic\"\n[permissions]\nallow = [\"*\"]\n");
  const AgentDefinition def = Def("rev");
  ASSERT_TRUE(def.system_prompt);
  Result<AgentSettings> s = AgentSessionOptions(def, Base(), ctx_, "");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  const SessionOptions& o = s->session;
  EXPECT_TRUE(s->provider_configured);
  EXPECT_EQ(o.provider, ProviderKind::kScript);  // the untrusted workspace cannot change it
  EXPECT_EQ(o.model, "agent-model");
  EXPECT_EQ(o.script_path, (config_dir_ / "agents" / "rev" / "demo.json").string());
  EXPECT_EQ(o.max_tool_calls, 9);
  EXPECT_EQ(o.system_prompt, "You review code.");
  EXPECT_EQ(o.system_prompt_source, (config_dir_ / "agents" / "rev" / "system.md").string());
  ASSERT_EQ(o.allow.size(), 1u);  // the workspace's allow rule is ignored
  EXPECT_EQ(o.allow[0].rule, "read");
  EXPECT_THAT(o.allow[0].source, HasSubstr("rev/agent.toml:"));
  ASSERT_EQ(o.deny.size(), 1u);  // the user's deny rule still applies
  EXPECT_EQ(s->workspace, root_ / "ws");
  EXPECT_EQ(s->loaded.agent.description.value, "reviews");

  ConfigSources base = Base();
  base.flags = {{"provider.model", "flag-model", "--model"}};
  s = AgentSessionOptions(def, base, ctx_, "");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->session.model, "flag-model");
  ctx_.env["AGENTLOOP_MODEL"] = "env-model";
  base = Base();
  s = AgentSessionOptions(def, base, ctx_, "");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->session.model, "env-model");
}

// An agent declares MCP servers as any layer does: its table of a name
// replaces the user file's; an untrusted workspace's are ignored.
TEST_F(AgentsTest, AgentsDeclareMcpServersAboveTheUserFile) {
  WriteFile(root_ / "home" / "config.toml",
            "[mcp_servers.notes]\ncommand = \"user-notes\"\n"
            "[mcp_servers.gh]\ncommand = \"user-gh\"\n");
  Agent("tools", "[mcp_servers.gh]\ncommand = \"agent-gh\"\nargs = [\"stdio\"]\n");
  WriteFile(root_ / "ws" / ".agentloop" / "config.toml",
            "[mcp_servers.planted]\ncommand = \"evil\"\n");
  Result<AgentSettings> s = AgentSessionOptions(Def("tools"), Base(), ctx_, "");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  const std::vector<McpServerSpec>& m = s->session.mcp_servers;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "notes");
  EXPECT_EQ(m[0].command, "user-notes");
  EXPECT_EQ(m[1].name, "gh");
  EXPECT_EQ(m[1].command, "agent-gh");
  EXPECT_EQ(m[1].args, (std::vector<std::string>{"stdio"}));
  EXPECT_THAT(m[1].source, HasSubstr("tools/agent.toml:1"));
}

TEST_F(AgentsTest, SystemPromptMustStayInTheFolderAndNotBeSetTwice) {
  Agent("twice", "system_prompt_file = \"other.md\"\n");
  WriteFile(config_dir_ / "agents" / "twice" / "system.md", "a");
  Result<AgentDefinition> d = LoadAgent(config_dir_, "twice");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.error().message(), HasSubstr("twice/agent.toml:1: system_prompt_file is set"));

  WriteFile(root_ / "secret.txt", "not a prompt");
  Agent("linked", "");
  fs::create_symlink(root_ / "secret.txt", config_dir_ / "agents" / "linked" / "system.md");
  d = LoadAgent(config_dir_, "linked");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.error().message(), HasSubstr("must be a file inside"));
}

TEST_F(AgentsTest, ABrokenDefinitionNeverRuns) {
  AgentDefinition def;
  def.name = "x";
  def.problems.push_back("x/agent.toml:1: bad");
  Result<AgentSettings> s = AgentSessionOptions(def, Base(), ctx_, "");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("x/agent.toml:1: bad"));
}

TEST_F(AgentsTest, ConfigDirectory) {
  Result<fs::path> d = AgentConfigDir(ctx_.env, fs::path("/etc/agentloop/config.toml"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, fs::path("/etc/agentloop"));
  EnvMap env = ctx_.env;
  env["AGENTLOOP_CONFIG"] = "/srv/al/config.toml";
  EXPECT_EQ(*AgentConfigDir(env, std::nullopt), fs::path("/srv/al"));
  EXPECT_EQ(*AgentConfigDir(ctx_.env, std::nullopt), root_ / "home" / ".config" / "agentloop");
  EXPECT_EQ(AgentsDir("/etc/agentloop"), fs::path("/etc/agentloop/agents"));
}

}  // namespace
}  // namespace agentloop::engine
