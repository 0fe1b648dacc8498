#include "permissions/policy.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "permissions/test_specs.h"
#include "protocol/testing/json.h"

namespace agentloop::permissions {
namespace {

using ::testing::HasSubstr;

using ::agentloop::testing::J;

ToolSpec Spec(const std::string& name, bool mutates) { return TestSpec(name, mutates); }

const ToolSpec kBash = Spec("bash", true);
const ToolSpec kRead = Spec("read", false);
const ToolSpec kWrite = Spec("write", true);
const ToolSpec kEdit = Spec("edit", true);
const ToolSpec kMcp = Spec("mcp__gh__create_issue", true);

RulesPolicy Policy(std::vector<RuleSource> sources, PolicyOptions opts = {}) {
  auto set = ParseRules(sources, ParseOptions{TestSpecs()});
  EXPECT_TRUE(set.ok()) << set.error().ToString();
  if (opts.workspace.empty()) opts.workspace = "/ws";
  return RulesPolicy(std::move(*set), std::move(opts));
}

struct ResolveCase {
  const char* name;
  std::vector<std::string> allow, ask, deny;
  std::vector<const char*> tables;
  const ToolSpec* spec;
  const char* args;
  Decision want;
  const char* rule;  // expected deciding rule ("" = default)
};

class ResolveTest : public ::testing::TestWithParam<ResolveCase> {};

TEST_P(ResolveTest, Decides) {
  const ResolveCase& c = GetParam();
  RuleSource src{"cfg", c.allow, c.ask, c.deny, {}};
  for (const char* t : c.tables) src.tables.push_back(J(t));
  PolicyOptions opts;
  opts.scope = Scope{"acme", "production", "coder"};
  RulesPolicy p = Policy({src}, opts);
  PolicyVerdict v = p.Evaluate(*c.spec, J(c.args));
  EXPECT_EQ(v.decision, c.want) << c.name << ": " << v.reason;
  EXPECT_EQ(v.rule, c.rule) << c.name << ": " << v.reason;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ResolveTest,
    ::testing::Values(
        ResolveCase{"default mutating asks",
                    {},
                    {},
                    {},
                    {},
                    &kWrite,
                    R"j({"file_path":"a"})j",
                    Decision::kAsk,
                    ""},
        ResolveCase{"default read-only allows",
                    {},
                    {},
                    {},
                    {},
                    &kRead,
                    R"j({"file_path":"a"})j",
                    Decision::kAllow,
                    ""},
        ResolveCase{"allow matches",
                    {"bash(git status*)"},
                    {},
                    {},
                    {},
                    &kBash,
                    R"j({"command":"git status"})j",
                    Decision::kAllow,
                    "bash(git status*)"},
        ResolveCase{"chained rm is not allowed by git status*",
                    {"bash(git status*)"},
                    {},
                    {},
                    {},
                    &kBash,
                    R"j({"command":"git status && rm -rf x"})j",
                    Decision::kAsk,
                    ""},
        ResolveCase{"deny catches chained rm",
                    {"bash(git status*)"},
                    {},
                    {"bash(rm*)"},
                    {},
                    &kBash,
                    R"j({"command":"git status && rm -rf x"})j",
                    Decision::kDeny,
                    "bash(rm*)"},
        ResolveCase{"deny beats allow at equal specificity",
                    {"bash"},
                    {},
                    {"bash(rm*)"},
                    {},
                    &kBash,
                    R"j({"command":"rm x"})j",
                    Decision::kDeny,
                    "bash(rm*)"},
        ResolveCase{"ask beats allow",
                    {"write"},
                    {"write(secrets/**)"},
                    {},
                    {},
                    &kWrite,
                    R"j({"file_path":"secrets/k"})j",
                    Decision::kAsk,
                    "write(secrets/**)"},
        ResolveCase{"allow star allows every tool",
                    {"*"},
                    {},
                    {},
                    {},
                    &kMcp,
                    R"j({})j",
                    Decision::kAllow,
                    "*"},
        ResolveCase{"allow star still loses to a deny",
                    {"*"},
                    {},
                    {"write(secrets/**)"},
                    {},
                    &kWrite,
                    R"j({"file_path":"secrets/k"})j",
                    Decision::kDeny,
                    "write(secrets/**)"},
        ResolveCase{"more specific scope wins over a stricter global rule",
                    {},
                    {},
                    {"bash"},
                    {R"j({"rule":"bash(make*)","decision":"allow","scope":"acme"})j"},
                    &kBash,
                    R"j({"command":"make test"})j",
                    Decision::kAllow,
                    "bash(make*)"},
        ResolveCase{"three segments beat one",
                    {},
                    {},
                    {},
                    {R"j({"name":"tenant-deny","rule":"edit","decision":"deny","scope":"acme"})j",
                     R"j({"name":"agent-allow","rule":"edit","decision":"allow",
                         "scope":"acme/production/coder"})j"},
                    &kEdit,
                    R"j({"file_path":"a.md"})j",
                    Decision::kAllow,
                    "agent-allow"},
        ResolveCase{"strictest wins within one specificity",
                    {},
                    {},
                    {},
                    {R"j({"name":"a","rule":"edit","decision":"allow","scope":"acme"})j",
                     R"j({"name":"b","rule":"edit","decision":"deny","scope":"*/production"})j",
                     R"j({"name":"c","rule":"edit","decision":"ask","scope":"acme"})j"},
                    &kEdit,
                    R"j({"file_path":"a.md"})j",
                    Decision::kDeny,
                    "b"},
        ResolveCase{"scope of another tenant does not apply",
                    {},
                    {},
                    {},
                    {R"j({"rule":"edit","decision":"deny","scope":"other"})j"},
                    &kEdit,
                    R"j({"file_path":"a.md"})j",
                    Decision::kAsk,
                    ""},
        ResolveCase{"false condition falls through to the next rule",
                    {"bash"},
                    {},
                    {},
                    {R"j({"rule":"bash","decision":"deny",
                         "when":{"field":"timeout_ms","op":"gt","value":60000}})j"},
                    &kBash,
                    R"j({"command":"ls","timeout_ms":1000})j",
                    Decision::kAllow,
                    "bash"},
        ResolveCase{"true condition applies",
                    {"bash"},
                    {},
                    {},
                    {R"j({"name":"long-commands","rule":"bash","decision":"deny",
                         "when":{"field":"timeout_ms","op":"gt","value":60000}})j"},
                    &kBash,
                    R"j({"command":"ls","timeout_ms":600000})j",
                    Decision::kDeny,
                    "long-commands"},
        ResolveCase{"path outside workspace does not match relative allow",
                    {"edit(**)"},
                    {},
                    {},
                    {},
                    &kEdit,
                    R"j({"file_path":"/etc/hosts"})j",
                    Decision::kAsk,
                    ""}));

TEST(RulesPolicyTest, ReasonNamesRuleDecisionAndSource) {
  RulesPolicy p =
      Policy({RuleSource{"~/.config/agentloop/config.toml", {"bash(git status*)"}, {}, {}, {}}});
  PolicyVerdict v = p.Evaluate(kBash, J(R"j({"command":"git status"})j"));
  EXPECT_EQ(v.reason,
            "matched rule 'bash(git status*)' (allow, from ~/.config/agentloop/config.toml)");
  PolicyVerdict d = p.Evaluate(kWrite, J(R"j({"file_path":"x"})j"));
  EXPECT_EQ(d.reason, "no rule matched: default ask for mutating tool 'write'");
  EXPECT_EQ(d.rule, "");
}

TEST(RulesPolicyTest, ConfiguredDefaults) {
  PolicyOptions opts;
  opts.default_mutating = Decision::kDeny;
  opts.default_read_only = Decision::kAsk;
  RulesPolicy p = Policy({}, opts);
  EXPECT_EQ(p.Evaluate(kWrite, J(R"j({"file_path":"x"})j")).decision, Decision::kDeny);
  EXPECT_EQ(p.Evaluate(kRead, J(R"j({"file_path":"x"})j")).decision, Decision::kAsk);
  EXPECT_THAT(p.Evaluate(kRead, J(R"j({"file_path":"x"})j")).reason,
              HasSubstr("default ask for read-only tool 'read'"));
}

TEST(RulesPolicyTest, ReadOnlyCommandDeniesMutatingToolsWhateverTheRules) {
  PolicyOptions opts;
  opts.read_only_command = true;
  RulesPolicy p = Policy({RuleSource{"--allow", {"*"}, {}, {}, {}}}, opts);
  PolicyVerdict v = p.Evaluate(kBash, J(R"j({"command":"echo hi > f"})j"));
  EXPECT_EQ(v.decision, Decision::kDeny);
  EXPECT_THAT(v.reason, HasSubstr("read-only command"));
  EXPECT_EQ(p.Evaluate(kRead, J(R"j({"file_path":"x"})j")).decision, Decision::kAllow);
}

TEST(RulesPolicyTest, ReadOnlyCommandLeavesAToolConfinedThereToTheRules) {
  ToolSpec confined = kBash;
  confined.confined_in_read_only = true;
  PolicyOptions opts;
  opts.read_only_command = true;
  RulesPolicy none = Policy({}, opts);
  EXPECT_EQ(none.Evaluate(confined, J(R"j({"command":"ls"})j")).decision, Decision::kAsk);
  RulesPolicy rules = Policy({RuleSource{"--allow", {"bash(ls*)"}, {}, {"bash(rm*)"}, {}}}, opts);
  EXPECT_EQ(rules.Evaluate(confined, J(R"j({"command":"ls -l"})j")).decision, Decision::kAllow);
  EXPECT_EQ(rules.Evaluate(confined, J(R"j({"command":"rm -rf x"})j")).decision, Decision::kDeny);
}

TEST(RulesPolicyTest, EvaluateWithToolCall) {
  RulesPolicy p = Policy({RuleSource{"f", {"read(src/**)"}, {}, {"read(src/secret.txt)"}, {}}});
  ToolCall call{"id1", "read", J(R"j({"file_path":"src/secret.txt"})j")};
  EXPECT_EQ(p.Evaluate(kRead, call).decision, Decision::kDeny);
}

TEST(DecisionNameTest, Names) {
  EXPECT_EQ(DecisionName(Decision::kAllow), "allow");
  EXPECT_EQ(DecisionName(Decision::kAsk), "ask");
  EXPECT_EQ(DecisionName(Decision::kDeny), "deny");
  EXPECT_EQ(ParseDecision(" Deny "), Decision::kDeny);
  EXPECT_EQ(ParseDecision("maybe"), std::nullopt);
}

// ---- Rules see the real path ----------------------------------------------

// /tmp/al_policy_XXXXXX/ws with a few files and symbolic links.
class RealPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/al_policy_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = std::filesystem::canonical(tmpl);
    ws_ = root_ / "ws";
    std::filesystem::create_directories(ws_ / "docs");
    std::filesystem::create_directories(ws_ / "src");
    std::filesystem::create_directories(ws_ / ".git");
    std::ofstream(ws_ / ".env") << "KEY=1\n";
    std::ofstream(ws_ / ".git" / "config") << "[core]\n";
    std::filesystem::create_symlink("../.env", ws_ / "docs" / "notes.md");
    std::filesystem::create_symlink("../.git", ws_ / "src" / "gen");
    std::filesystem::create_symlink("../.git/hooks/pre-commit", ws_ / "src" / "hook");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  RulesPolicy Make(std::vector<std::string> allow, std::vector<std::string> deny) {
    PolicyOptions opts;
    opts.workspace = ws_;
    return Policy({RuleSource{"f", std::move(allow), {}, std::move(deny), {}}}, opts);
  }
  std::filesystem::path root_;
  std::filesystem::path ws_;
};

TEST_F(RealPathTest, ASymlinkToADeniedFileIsDenied) {
  RulesPolicy p = Make({}, {"read(.env)"});
  PolicyVerdict v = p.Evaluate(kRead, J(R"j({"file_path":"docs/notes.md"})j"));
  EXPECT_EQ(v.decision, Decision::kDeny);
  EXPECT_THAT(v.reason, HasSubstr("symbolic link to .env"));
  EXPECT_EQ(p.Evaluate(kRead, J(R"j({"file_path":"docs/../docs/notes.md"})j")).decision,
            Decision::kDeny);
  std::string abs = (ws_ / "docs" / "notes.md").string();
  EXPECT_EQ(p.Evaluate(kRead, J(R"({"file_path":")" + abs + R"("})")).decision, Decision::kDeny);
  // The search tools reach the same file.
  EXPECT_EQ(
      p.Evaluate(Spec("grep", false), J(R"j({"pattern":"K","path":"docs/notes.md"})j")).decision,
      Decision::kDeny);
}

TEST_F(RealPathTest, AnAllowMustHoldForTheRealPathToo) {
  RulesPolicy p = Make({"write(src/**)", "edit(src/**)"}, {});
  EXPECT_EQ(p.Evaluate(kWrite, J(R"j({"file_path":"src/main.cc"})j")).decision, Decision::kAllow);
  PolicyVerdict v = p.Evaluate(kWrite, J(R"j({"file_path":"src/gen/config"})j"));
  EXPECT_EQ(v.decision, Decision::kAsk);
  EXPECT_THAT(v.reason, HasSubstr(".git/config"));
  EXPECT_EQ(p.Evaluate(kEdit, J(R"j({"file_path":"src/gen/config"})j")).decision, Decision::kAsk);
  // A file that does not exist yet below the link, and a dangling link.
  EXPECT_EQ(p.Evaluate(kWrite, J(R"j({"file_path":"src/gen/hooks/post-merge"})j")).decision,
            Decision::kAsk);
  EXPECT_EQ(p.Evaluate(kWrite, J(R"j({"file_path":"src/hook"})j")).decision, Decision::kAsk);
}

TEST_F(RealPathTest, ADenyOnTheWrittenPathStillHolds) {
  RulesPolicy p = Make({"read(**)"}, {"read(docs/**)"});
  EXPECT_EQ(p.Evaluate(kRead, J(R"j({"file_path":"docs/notes.md"})j")).decision, Decision::kDeny);
}

TEST_F(RealPathTest, ReadRulesCoverGrepGlobAndLs) {
  RulesPolicy p = Make({}, {"read(.env)"});
  for (const char* tool : {"grep", "glob", "ls"}) {
    EXPECT_EQ(p.Evaluate(Spec(tool, false), J(R"j({"pattern":"x","path":".env"})j")).decision,
              Decision::kDeny)
        << tool;
    EXPECT_EQ(p.Evaluate(Spec(tool, false), J(R"j({"pattern":"x"})j")).decision, Decision::kAllow)
        << tool;
    EXPECT_EQ(p.PathRestriction(TestSpec(tool), (ws_ / ".env").string()), Decision::kDeny) << tool;
    EXPECT_EQ(p.PathRestriction(TestSpec(tool), (ws_ / "src" / "a.cc").string()), Decision::kAllow)
        << tool;
  }
  // Rules without a pattern decide the call, not which files it sees.
  RulesPolicy all = Make({}, {"read"});
  EXPECT_EQ(all.PathRestriction(TestSpec("grep"), (ws_ / ".env").string()), Decision::kAllow);
  EXPECT_EQ(all.Evaluate(Spec("grep", false), J(R"j({"pattern":"x"})j")).decision, Decision::kDeny);
  // An allow rule for read does not widen the other tools.
  RulesPolicy q = Make({"read(**)"}, {});
  EXPECT_EQ(q.Evaluate(Spec("grep", true), J(R"j({"pattern":"x"})j")).decision, Decision::kAsk);
}

// Permissions read a tool's pattern metadata from its spec: a tool the
// permissions code has never heard of gets path rules, the protected-path
// guard, read rules (when it reads files) and approvals by path.
TEST_F(RealPathTest, ACustomToolWithPathMetadataGetsPathRules) {
  ToolSpec mine;
  mine.name = "mytool";
  mine.mutates = true;
  mine.pattern_kind = RulePatternKind::kPath;
  mine.pattern_args = {"target"};
  auto set = ParseRules({RuleSource{"f", {"mytool(src/**)"}, {}, {"mytool(docs/*.md)"}, {}}},
                        ParseOptions{{mine}});
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  PolicyOptions opts;
  opts.workspace = ws_;
  RulesPolicy p(std::move(*set), opts);
  EXPECT_EQ(p.Evaluate(mine, J(R"j({"target":"src/a/b.cc"})j")).decision, Decision::kAllow);
  EXPECT_EQ(p.Evaluate(mine, J(R"j({"target":"src"})j")).decision, Decision::kAllow);
  EXPECT_EQ(p.Evaluate(mine, J(R"j({"target":"docs/x.md"})j")).decision, Decision::kDeny);
  EXPECT_EQ(p.Evaluate(mine, J(R"j({"target":"other.txt"})j")).decision, Decision::kAsk);
  // The path as it really is: src/gen leads into .git, which is protected.
  PolicyVerdict v = p.Evaluate(mine, J(R"j({"target":"src/gen/config"})j"));
  EXPECT_EQ(v.decision, Decision::kAsk);
  EXPECT_TRUE(v.always_ask);
  // An approval is remembered for the path, not for the argument object.
  EXPECT_EQ(SessionApprovals::AccessKey(mine, J(R"j({"target":"./src/a.cc","n":1})j"), ws_),
            SessionApprovals::AccessKey(mine, J(R"j({"target":"src/a.cc","n":2})j"), ws_));
  // A tool that declares it reads files is covered by read rules.
  ToolSpec finder = mine;
  finder.name = "finder";
  finder.mutates = false;
  finder.reads_files = true;
  RulesPolicy q = Make({}, {"read(.env)"});
  EXPECT_EQ(q.Evaluate(finder, J(R"j({"target":".env"})j")).decision, Decision::kDeny);
  EXPECT_EQ(q.PathRestriction(finder, (ws_ / ".env").string()), Decision::kDeny);
  // Without the metadata the same tool takes no pattern.
  ToolSpec plain;
  plain.name = "mytool";
  auto refused =
      ParseRules({RuleSource{"f", {"mytool(src/**)"}, {}, {}, {}}}, ParseOptions{{plain}});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message(), HasSubstr("takes no pattern"));
}

TEST_F(RealPathTest, SessionApprovalDoesNotFollowALinkChange) {
  std::string plain =
      SessionApprovals::AccessKey(TestSpec("read"), J(R"j({"file_path":"docs/a.md"})j"), ws_);
  std::string linked =
      SessionApprovals::AccessKey(TestSpec("read"), J(R"j({"file_path":"docs/notes.md"})j"), ws_);
  EXPECT_THAT(linked, HasSubstr("real:" + (ws_ / ".env").string()));
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("real:")));
}

TEST_F(RealPathTest, ExplainShowsTheRealPath) {
  RulesPolicy p = Make({}, {"read(.env)"});
  std::string text = ExplainDecision(p, kRead, J(R"j({"file_path":"docs/notes.md"})j"));
  EXPECT_THAT(text, HasSubstr("real path: .env"));
  EXPECT_THAT(text, HasSubstr("decision: deny"));
}

// ---- Session approvals ----------------------------------------------------

TEST(SessionApprovalsTest, KeysAreExactAccesses) {
  SessionApprovals a("/ws");
  a.Remember(TestSpec("bash"), J(R"j({"command":"npm test","timeout_ms":1000})j"));
  a.Remember(TestSpec("edit"),
             J(R"j({"file_path":"src/a.cc","old_string":"x","new_string":"y"})j"));
  a.Remember(TestSpec("mcp__gh__x"), J(R"j({"b":1,"a":{"d":2,"c":3}})j"));

  // bash: the exact command string, other arguments ignored.
  EXPECT_TRUE(a.Contains(TestSpec("bash"), J(R"j({"command":"npm test"})j")));
  EXPECT_FALSE(a.Contains(TestSpec("bash"), J(R"j({"command":"npm test && rm -rf x"})j")));
  EXPECT_FALSE(a.Contains(TestSpec("bash"), J(R"j({"command":"npm  test"})j")));
  // File tools: the normalised path, whatever the other arguments.
  EXPECT_TRUE(
      a.Contains(TestSpec("edit"), J(R"j({"file_path":"/ws/src/./a.cc","old_string":"q"})j")));
  EXPECT_FALSE(a.Contains(TestSpec("edit"), J(R"j({"file_path":"src/b.cc"})j")));
  EXPECT_FALSE(a.Contains(TestSpec("write"), J(R"j({"file_path":"src/a.cc"})j")));
  // Others: canonical JSON (key order does not matter, values do).
  EXPECT_TRUE(a.Contains(TestSpec("mcp__gh__x"), J(R"j({"a":{"c":3,"d":2},"b":1})j")));
  EXPECT_FALSE(a.Contains(TestSpec("mcp__gh__x"), J(R"j({"a":{"c":3,"d":2},"b":2})j")));
  EXPECT_EQ(a.size(), 3u);
  a.Clear();
  EXPECT_FALSE(a.Contains(TestSpec("bash"), J(R"j({"command":"npm test"})j")));
}

TEST(CachedPolicyTest, TurnsAskIntoAllowButNeverOverridesDeny) {
  auto approvals = std::make_shared<SessionApprovals>("/ws");
  auto inner = std::make_shared<RulesPolicy>(Policy({RuleSource{"f", {}, {}, {"bash(rm*)"}, {}}}));
  CachedPolicy cached(inner, approvals);
  ToolCall ls{"1", "bash", J(R"j({"command":"ls"})j")};
  ToolCall rm{"2", "bash", J(R"j({"command":"rm -rf x"})j")};
  EXPECT_EQ(cached.Evaluate(kBash, ls).decision, Decision::kAsk);
  approvals->Remember(TestSpec("bash"), ls.input);
  approvals->Remember(TestSpec("bash"), rm.input);
  PolicyVerdict v = cached.Evaluate(kBash, ls);
  EXPECT_EQ(v.decision, Decision::kAllow);
  EXPECT_THAT(v.reason, HasSubstr("allowed for this session"));
  EXPECT_EQ(cached.Evaluate(kBash, rm).decision, Decision::kDeny);
  ToolCall other{"3", "bash", J(R"j({"command":"ls -la"})j")};
  EXPECT_EQ(cached.Evaluate(kBash, other).decision, Decision::kAsk);
}

// ---- permissions check ------------------------------------------------------

TEST(ExplainDecisionTest, ShowsDecisionRuleAndSimpleCommands) {
  RulesPolicy p = Policy({RuleSource{"--allow", {"bash(git status*)"}, {}, {}, {}},
                          RuleSource{"--deny", {}, {}, {"bash(rm*)"}, {}}});
  std::string out = ExplainDecision(p, kBash, J(R"j({"command":"git status && rm -rf x"})j"));
  EXPECT_THAT(out, HasSubstr("decision: deny\n"));
  EXPECT_THAT(out, HasSubstr("reason: matched rule 'bash(rm*)' (deny, from --deny)"));
  EXPECT_THAT(out, HasSubstr("rule: bash(rm*)\n"));
  EXPECT_THAT(out, HasSubstr("  git status\n"));
  EXPECT_THAT(out, HasSubstr("  rm -rf x\n"));
  EXPECT_THAT(out, HasSubstr("matching rules:\n  deny 'bash(rm*)'"));

  std::string def = ExplainDecision(p, kWrite, J(R"j({"file_path":"/ws/a/../b.txt"})j"));
  EXPECT_THAT(def, HasSubstr("decision: ask\n"));
  EXPECT_THAT(def, HasSubstr("rule: (default)\n"));
  EXPECT_THAT(def, HasSubstr("path: b.txt\n"));
  EXPECT_THAT(def, HasSubstr("matching rules: (none)\n"));

  PolicyOptions ro;
  ro.read_only_command = true;
  RulesPolicy plan = Policy({}, ro);
  EXPECT_THAT(ExplainDecision(plan, kWrite, J(R"j({"file_path":"x"})j")),
              HasSubstr("read-only command: mutating tools are denied (plan mode)"));
}

TEST(ExplainDecisionTest, ShowsWrappedProgramsAndEscalation) {
  RulesPolicy p = Policy({RuleSource{"--allow", {"bash(git log*)", "bash(timeout*)"}, {}, {}, {}}});
  std::string out =
      ExplainDecision(p, kBash, J(R"j({"command":"git log --output=x; timeout 5 rm y"})j"));
  EXPECT_THAT(out, HasSubstr("decision: ask\n"));
  EXPECT_THAT(out, HasSubstr("[escalated: git: '--output=x' writes a file or runs a program;"));
  EXPECT_THAT(out, HasSubstr("[runs: rm y]"));
}

}  // namespace
}  // namespace agentloop::permissions
