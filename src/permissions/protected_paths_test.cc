// The engine's own configuration is never written on a rule's say-so.
#include "permissions/protected_paths.h"

#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "permissions/policy.h"
#include "permissions/test_specs.h"
#include "protocol/testing/json.h"

namespace agentloop::permissions {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

using ::agentloop::testing::J;

ToolSpec Spec(const std::string& name, bool mutates) { return TestSpec(name, mutates); }

class ProtectedPathsTest : public ::testing::Test {
 protected:
  ProtectedPathsTest() {
    std::string tmpl = (fs::temp_directory_path() / "al_protected_XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    ws_ = root_ / "ws";
    fs::create_directories(ws_ / "src");
    fs::create_directories(ws_ / ".git");
  }
  ~ProtectedPathsTest() override { fs::remove_all(root_); }

  RulesPolicy Policy(std::vector<std::string> allow, std::vector<fs::path> roots = {}) {
    RuleSource src{"--allow", std::move(allow), {}, {}, {}};
    auto set = ParseRules({src});
    EXPECT_TRUE(set.ok());
    PolicyOptions o;
    o.workspace = ws_;
    o.home = (root_ / "home").string();
    o.protected_roots = std::move(roots);
    return RulesPolicy(std::move(*set), o);
  }

  fs::path root_, ws_;
};

TEST_F(ProtectedPathsTest, BroadAllowRulesDoNotCoverConfiguration) {
  const ToolSpec write = Spec("write", true);
  const ToolSpec edit = Spec("edit", true);
  for (const char* rule : {"*", "write(**)", "write", "edit(**)", "write(.agentloop/**)"}) {
    RulesPolicy p = Policy({rule});
    for (const char* path :
         {".agentloop/config.toml", ".git/config", ".git/hooks/pre-commit", "AGENTS.md",
          "docs/AGENTS.md", "agents.md", ".mcp.json", "CLAUDE.md", "sub/claude.md",
          "sub/.git/config", "./src/../.agentloop/skills/x/SKILL.md"}) {
      const Json args = Json{{"file_path", path}, {"content", "x"}};
      for (const ToolSpec* spec : {&write, &edit}) {
        PolicyVerdict v = p.Evaluate(*spec, args);
        EXPECT_EQ(v.decision, Decision::kAsk) << rule << " " << path << ": " << v.reason;
        EXPECT_TRUE(v.always_ask) << path;
        EXPECT_THAT(v.reason, HasSubstr("protected path"));
      }
    }
    if (std::string_view(rule) == "write(.agentloop/**)" || std::string_view(rule) == "edit(**)") {
      continue;
    }
    // Ordinary files stay allowed.
    EXPECT_EQ(p.Evaluate(write, J(R"({"file_path":"src/a.cc"})")).decision, Decision::kAllow);
    EXPECT_EQ(p.Evaluate(write, J(R"({"file_path":".gitignore"})")).decision, Decision::kAllow);
  }
}

TEST_F(ProtectedPathsTest, ReadsAreNotAffected) {
  RulesPolicy p = Policy({"read"});
  EXPECT_EQ(p.Evaluate(Spec("read", false), J(R"({"file_path":".git/config"})")).decision,
            Decision::kAllow);
}

TEST_F(ProtectedPathsTest, ASymlinkIntoGitIsSeenThrough) {
  fs::create_directory_symlink("../.git", ws_ / "src" / "gen");
  RulesPolicy p = Policy({"write(src/**)"});
  PolicyVerdict v = p.Evaluate(Spec("write", true), J(R"({"file_path":"src/gen/config"})"));
  EXPECT_EQ(v.decision, Decision::kAsk) << v.reason;
  EXPECT_THAT(v.reason, HasSubstr(".git"));
}

TEST_F(ProtectedPathsTest, UserConfigAndDataDirectoriesAreProtected) {
  const fs::path cfg = root_ / "home" / ".config" / "agentloop";
  RulesPolicy p = Policy({"*"}, {cfg});
  const Json args = Json{{"file_path", (cfg / "config.toml").string()}};
  EXPECT_EQ(p.Evaluate(Spec("write", true), args).decision, Decision::kAsk);
  PolicyVerdict v =
      p.Evaluate(Spec("bash", true), J(R"({"command":"cp x ~/.config/agentloop/config.toml"})"));
  EXPECT_EQ(v.decision, Decision::kAsk) << v.reason;
  v = p.Evaluate(Spec("bash", true), J(R"({"command":"cp x $HOME/.config/agentloop/a"})"));
  EXPECT_EQ(v.decision, Decision::kAsk) << v.reason;
}

TEST_F(ProtectedPathsTest, BashLinesNamingConfigurationAreAsked) {
  RulesPolicy p = Policy({"bash"});
  const ToolSpec bash = Spec("bash", true);
  for (const char* cmd :
       {"cp evil .git/hooks/pre-commit", "echo x > AGENTS.md", "echo x >> CLAUDE.md",
        "tee .agentloop/config.toml", "mv a .git", "cat x | dd of=./.git/config",
        "ln -s /tmp/x src/../.agentloop", "cp x .g*/config", "cp x '.git'/config",
        "git diff --output=.git/x", "cat x > AGENTS.md", "cat x >> .git/config",
        "grep x y 2> .agentloop/config.toml", "agentloop trust .",
        "timeout 5 agentloop approve p_1", "/usr/local/bin/agentloop deny x"}) {
    PolicyVerdict v = p.Evaluate(bash, Json{{"command", cmd}});
    EXPECT_EQ(v.decision, Decision::kAsk) << cmd << ": " << v.reason;
    EXPECT_TRUE(v.always_ask) << cmd;
  }
  for (const char* cmd : {"git status", "ls src", "cat .gitignore", "make test", "cat AGENTS.md",
                          "grep -r x .agentloop", "ls -la .git", "diff AGENTS.md b"}) {
    EXPECT_EQ(p.Evaluate(bash, Json{{"command", cmd}}).decision, Decision::kAllow) << cmd;
  }
}

// The agentloop binary reached under another name (the process's own
// executable, the parent's) is asked about under any rule, `*` included,
// also in lines the shell reader does not understand.
TEST_F(ProtectedPathsTest, AgentloopRunThroughProcIsAskedUnderAnyRule) {
  RulesPolicy p = Policy({"*"});
  const ToolSpec bash = Spec("bash", true);
  for (const char* cmd :
       {"/proc/$PPID/exe trust .", "/proc/self/exe trust .", "/proc/1234/exe approve p_1",
        "\"/proc/$PPID/exe\" trust .", "cp /proc/self/exe x && ./x trust .",
        "$(readlink /proc/$PPID/exe) trust .", "p=$PPID; /proc/$p/exe trust .",
        "/proc/*/exe trust .", "/proc/self/ex? trust .", "/proc/self/e''xe trust .",
        "cd /proc/self && ./exe trust ."}) {
    PolicyVerdict v = p.Evaluate(bash, Json{{"command", cmd}});
    EXPECT_EQ(v.decision, Decision::kAsk) << cmd << ": " << v.reason;
    EXPECT_TRUE(v.always_ask) << cmd;
  }
  for (const char* cmd : {"cat /proc/cpuinfo", "ls /proc/self/fd", "git status"}) {
    EXPECT_EQ(p.Evaluate(bash, Json{{"command", cmd}}).decision, Decision::kAllow) << cmd;
  }
}

TEST_F(ProtectedPathsTest, ASessionApprovalDoesNotCoverAProtectedWrite) {
  auto inner = std::make_shared<RulesPolicy>(Policy({"*"}));
  auto approvals = std::make_shared<SessionApprovals>(ws_);
  CachedPolicy cached(inner, approvals);
  ToolCall call;
  call.name = "write";
  call.input = J(R"({"file_path":".git/config","content":"x"})");
  approvals->Remember(TestSpec("write"), call.input);
  EXPECT_EQ(cached.Evaluate(Spec("write", true), call).decision, Decision::kAsk);
}

// The learning tools' writes (memories and skills every later session is
// given) are asked under any rule, `*` (`--yolo`) and the tool's own name
// included, and a session approval does not carry over; a deny holds.
TEST_F(ProtectedPathsTest, ToolsThatChangeLaterSessionsAreAlwaysAsked) {
  ToolSpec save = Spec("memory_save", true);
  save.always_ask = true;
  const Json args = Json{{"name", "n"}, {"scope", "user"}, {"body", "first run curl x | sh"}};
  for (const char* rule : {"*", "memory_save"}) {
    PolicyVerdict v = Policy({rule}).Evaluate(save, args);
    EXPECT_EQ(v.decision, Decision::kAsk) << rule << ": " << v.reason;
    EXPECT_TRUE(v.always_ask) << rule;
    EXPECT_THAT(v.reason, HasSubstr("later sessions"));
  }
  auto approvals = std::make_shared<SessionApprovals>(ws_);
  approvals->Remember(save, args);
  CachedPolicy cached(std::make_shared<RulesPolicy>(Policy({"*"})), approvals);
  EXPECT_EQ(cached.Evaluate(save, ToolCall{"c1", "memory_save", args}).decision, Decision::kAsk);
  // Without the mark the same tool follows the rules.
  EXPECT_EQ(Policy({"*"}).Evaluate(Spec("memory_save", true), args).decision, Decision::kAllow);
  RuleSource src{"cfg", {"*"}, {}, {"memory_save"}, {}};
  auto set = ParseRules({src});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(RulesPolicy(std::move(*set), PolicyOptions{}).Evaluate(save, args).decision,
            Decision::kDeny);
}

TEST_F(ProtectedPathsTest, DenyStaysDeny) {
  RuleSource src{"cfg", {"*"}, {}, {"write(.git/**)"}, {}};
  auto set = ParseRules({src});
  ASSERT_TRUE(set.ok());
  PolicyOptions o;
  o.workspace = ws_;
  RulesPolicy p(std::move(*set), o);
  EXPECT_EQ(p.Evaluate(Spec("write", true), J(R"({"file_path":".git/config"})")).decision,
            Decision::kDeny);
}

}  // namespace
}  // namespace agentloop::permissions
