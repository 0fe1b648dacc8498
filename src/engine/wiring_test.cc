// The wiring turns a specification into the registry, policy, hooks and
// prompt that every front end shares.
#include "engine/wiring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/files.h"
#include "env/process.h"

namespace agentloop::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class FixedTool final : public Tool {
 public:
  FixedTool(std::string name, bool mutates)
      : spec_{std::move(name), "a test tool", Json::object()} {
    spec_.input_schema = Json{{"type", "object"}};
    spec_.mutates = mutates;
  }
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override {
    return ToolOutput::Ok("ran " + spec_.name);
  }

 private:
  ToolSpec spec_;
};

class AuditHook final : public Hook {
 public:
  std::string_view name() const override { return "audit"; }
};

class WiringTest : public ::testing::Test {
 protected:
  WiringTest() {
    workspace_ = fs::canonical(tmp_.path()) / "ws";
    fs::create_directories(workspace_);
    ctx_ = MakeWiringContext({{"HOME", (tmp_.path() / "home").string()}}, tmp_.path() / "data");
    spec_.workspace = workspace_;
  }

  Decision Judge(const WiredTools& tools, const std::string& tool, const Json& args) {
    auto policy = WirePolicy(spec_, tools.registry, ctx_);
    EXPECT_TRUE(policy.ok()) << policy.error().ToString();
    if (!policy.ok()) return Decision::kDeny;
    const Tool* t = tools.registry.Find(tool);
    EXPECT_NE(t, nullptr) << tool;
    if (t == nullptr) return Decision::kDeny;
    return policy->rules->Evaluate(t->spec(), args).decision;
  }

  testing::TempDir tmp_;
  fs::path workspace_;
  WiringContext ctx_;
  SessionOptions spec_;
};

TEST_F(WiringTest, ContextComesFromTheEnvironment) {
  WiringContext ctx = MakeWiringContext(
      {{"HOME", "/home/u"}, {"XDG_CONFIG_HOME", "/cfg"}, {"AGENTLOOP_HOME", "/data/al"}});
  EXPECT_EQ(ctx.config_dir, fs::path("/cfg/agentloop"));
  EXPECT_EQ(ctx.data_dir, fs::path("/data/al"));
  EXPECT_EQ(MakeWiringContext({{"HOME", "/home/u"}}, "/given").data_dir, fs::path("/given"));
}

// Every tool a session offers is known to the policy: the learning tools
// are read-only, so the default allows them (a front end that judged them
// as unknown tools would ask).
TEST_F(WiringTest, PolicyKnowsEveryToolTheSessionOffers) {
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok()) << tools.error().ToString();
  for (const char* name : {"read", "write", "edit", "grep", "glob", "ls", "bash", "todo",
                           "ask_user", "memory_search"}) {
    EXPECT_NE(tools->registry.Find(name), nullptr) << name;
  }
  EXPECT_EQ(Judge(*tools, "memory_search", Json{{"query", "build"}}), Decision::kAllow);
  EXPECT_EQ(Judge(*tools, "write", Json{{"file_path", "a.txt"}, {"content", ""}}), Decision::kAsk);
  spec_.deny.push_back({"memory_search", "--deny"});
  EXPECT_EQ(Judge(*tools, "memory_search", Json{{"query", "build"}}), Decision::kDeny);
}

TEST_F(WiringTest, RuleThatDoesNotParseIsNamed) {
  spec_.allow.push_back({"bash(", "--allow"});
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok());
  auto policy = WirePolicy(spec_, tools->registry, ctx_);
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(policy.error().message(), HasSubstr("bash("));
}

TEST_F(WiringTest, ReadOnlyCommandDeniesWrites) {
  spec_.command = CommandKind::kPlan;
  spec_.allow.push_back({"*", "--allow"});
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(Judge(*tools, "write", Json{{"file_path", "a.txt"}, {"content", ""}}), Decision::kDeny);
}

// An extra tool is offered after the engine's own, judged by its spec as
// the built-in tools are (read-only: allowed by default; mutating: asked)
// and by the rules that name it, and runs.
TEST_F(WiringTest, ExtraToolIsOfferedJudgedAndRunnable) {
  spec_.extensions.tools.push_back(std::make_shared<FixedTool>("weather", false));
  spec_.extensions.tools.push_back(std::make_shared<FixedTool>("deploy", true));
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok()) << tools.error().ToString();
  std::vector<ToolSpec> specs = tools->registry.Specs();
  ASSERT_GE(specs.size(), 2u);
  EXPECT_EQ(specs[specs.size() - 2].name, "weather");
  EXPECT_EQ(specs.back().name, "deploy");
  EXPECT_EQ(Judge(*tools, "weather", Json::object()), Decision::kAllow);
  EXPECT_EQ(Judge(*tools, "deploy", Json::object()), Decision::kAsk);
  spec_.allow.push_back({"deploy", "--allow"});
  EXPECT_EQ(Judge(*tools, "deploy", Json::object()), Decision::kAllow);

  ToolContext tctx;
  tctx.workspace = workspace_;
  auto out = tools->registry.Find("weather")->Run(ToolCall{"c1", "weather", Json::object()}, tctx);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->content, "ran weather");
}

TEST_F(WiringTest, ExtraToolMayNotReplaceOneOfTheEngines) {
  spec_.extensions.tools.push_back(std::make_shared<FixedTool>("bash", false));
  auto tools = WireTools(spec_, ctx_);
  ASSERT_FALSE(tools.ok());
  EXPECT_EQ(tools.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(tools.error().message(), HasSubstr("a tool named 'bash' is already offered"));

  spec_.extensions.tools = {nullptr};
  tools = WireTools(spec_, ctx_);
  ASSERT_FALSE(tools.ok());
  EXPECT_THAT(tools.error().message(), HasSubstr("extensions.tools[0] is null"));
}

TEST_F(WiringTest, ExtraHooksRunAfterTheBuiltInOnes) {
  auto audit = std::make_shared<AuditHook>();
  spec_.extensions.hooks.push_back(audit);
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok());
  auto hooks = WireHooks(spec_, *tools, nullptr, ctx_, {});
  ASSERT_TRUE(hooks.ok()) << hooks.error().ToString();
  ASSERT_GE(hooks->all.size(), 4u);
  EXPECT_EQ(hooks->all.back(), audit);
  EXPECT_NE(hooks->todo_loop, nullptr);
  EXPECT_NE(hooks->reflector, nullptr);

  spec_.todo_loop = false;
  spec_.reflector = false;
  hooks = WireHooks(spec_, *tools, nullptr, ctx_, {});
  ASSERT_TRUE(hooks.ok());
  EXPECT_EQ(hooks->todo_loop, nullptr);
  EXPECT_EQ(hooks->reflector, nullptr);
  EXPECT_EQ(hooks->all.back(), audit);

  spec_.extensions.hooks.push_back(nullptr);
  hooks = WireHooks(spec_, *tools, nullptr, ctx_, {});
  ASSERT_FALSE(hooks.ok());
  EXPECT_THAT(hooks.error().message(), HasSubstr("extensions.hooks[1] is null"));
}

TEST_F(WiringTest, SystemPromptTakesTheSpecificationsText) {
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok());
  spec_.system_prompt = "You answer in haiku.";
  EXPECT_THAT(WireSystemPrompt(spec_, tools->learning_dirs), HasSubstr("You answer in haiku."));
}

// MCP servers start only for a session that runs turns; their tools come
// after the others, asked for by default (an untrusted server's hints are
// not believed), and a rule by name allows them.
TEST_F(WiringTest, McpServersToolsAreOfferedAndJudgedByName) {
  const std::string python = FindExecutable("python3");
  if (python.empty()) GTEST_SKIP() << "python3 is not installed";
  McpServerSpec server;
  server.name = "fake";
  server.command = python;
  server.args = {AL_FAKE_MCP_SERVER};
  server.startup_timeout_ms = 30000;
  McpServerSpec broken;
  broken.name = "broken";
  broken.command = "/nonexistent/server";
  spec_.mcp_servers = {server, broken};

  auto without = WireTools(spec_, ctx_);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->registry.Find("mcp__fake__echo"), nullptr);

  ctx_.start_mcp_servers = true;
  ctx_.env["PATH"] = "/usr/bin:/bin";
  auto tools = WireTools(spec_, ctx_);
  ASSERT_TRUE(tools.ok()) << tools.error().ToString();
  ASSERT_NE(tools->registry.Find("mcp__fake__echo"), nullptr);
  EXPECT_EQ(tools->registry.Specs().back().name, "mcp__fake__env");
  ASSERT_EQ(tools->mcp_servers.size(), 2u);
  EXPECT_EQ(tools->mcp_servers[0].state, "ready");
  EXPECT_EQ(tools->mcp_servers[1].state, "failed");
  EXPECT_THAT(tools->warnings, ::testing::Contains(HasSubstr("server 'broken' failed to start")));
  EXPECT_EQ(Judge(*tools, "mcp__fake__echo", Json{{"text", "x"}}), Decision::kAsk);
  const std::string prompt = WireSystemPrompt(spec_, tools->learning_dirs, tools->mcp_servers);
  EXPECT_THAT(prompt, HasSubstr("Instructions of MCP server 'fake'"));
  EXPECT_THAT(prompt, HasSubstr("Use echo to echo."));
  std::vector<mcp::ServerStatus> chatty = tools->mcp_servers;
  chatty[0].instructions = std::string(5000, 'z');
  EXPECT_THAT(WireSystemPrompt(spec_, tools->learning_dirs, chatty),
              HasSubstr(std::string(kMcpInstructionsChars, 'z') + " [cut]"));
  spec_.allow = {{"mcp__fake__*", "test"}};
  EXPECT_EQ(Judge(*tools, "mcp__fake__echo", Json{{"text", "x"}}), Decision::kAllow);

  spec_.mcp_servers[1].required = true;
  auto required = WireTools(spec_, ctx_);
  ASSERT_FALSE(required.ok());
  EXPECT_THAT(required.error().message(), HasSubstr("required MCP server 'broken'"));
}

}  // namespace
}  // namespace agentloop::engine
