#include "permissions/rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "permissions/test_specs.h"
#include "protocol/testing/json.h"

namespace agentloop::permissions {
namespace {

using ::testing::HasSubstr;

using ::agentloop::testing::J;

// ---- Rule strings -------------------------------------------------------

struct ParseCase {
  const char* text;
  const char* tool;
  std::optional<std::string> pattern;
};

class ParseRuleTest : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParseRuleTest, Parses) {
  const ParseCase& c = GetParam();
  auto r = ParseRule(c.text, Decision::kAllow, "test", TestSpecs());
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->tool, c.tool);
  EXPECT_EQ(r->pattern, c.pattern);
  EXPECT_EQ((r->command_glob != nullptr || r->path_glob != nullptr), c.pattern.has_value());
  EXPECT_EQ(r->source, "test");
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseRuleTest,
    ::testing::Values(
        ParseCase{"bash(git status*)", "bash", "git status*"},
        ParseCase{"read(src/**)", "read", "src/**"}, ParseCase{"edit(*.md)", "edit", "*.md"},
        ParseCase{"write(secrets/**)", "write", "secrets/**"}, ParseCase{"*", "*", std::nullopt},
        ParseCase{"bash", "bash", std::nullopt}, ParseCase{"  Bash(ls -la)  ", "Bash", "ls -la"},
        ParseCase{"mcp__x__y", "mcp__x__y", std::nullopt},
        ParseCase{"mcp__github__*", "mcp__github__*", std::nullopt},
        ParseCase{"bash(echo (a))", "bash", "echo (a)"}, ParseCase{"bash()", "bash", ""}));

TEST(ParseRuleTest, ErrorsNameRuleAndSource) {
  struct Case {
    const char* text;
    const char* fragment;
  };
  for (const Case& c : std::vector<Case>{{"bash(git status", "missing ')'"},
                                         {"bash)", "without '('"},
                                         {"(ls)", "missing tool name"},
                                         {"ba sh", "invalid character"},
                                         {"ask_user(x)", "takes no pattern"},
                                         {"*(x)", "takes no pattern"},
                                         {"bash(cat [abc)", "does not parse"},
                                         {"  ", "empty rule"}}) {
    auto r = ParseRule(c.text, Decision::kDeny, "cfg.toml",
                       std::vector<ToolSpec>{TestSpec("bash"), TestSpec("ask_user")});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.error().message(), HasSubstr(c.fragment)) << c.text;
    EXPECT_THAT(r.error().message(), HasSubstr("cfg.toml")) << c.text;
  }
}

TEST(ParseRuleTableTest, FullTable) {
  auto r = ParseRuleTable(J(R"({"name": "small-writes", "tool": "write", "pattern": "src/**",
                                 "decision": "allow", "scope": "acme/prod",
                                 "when": {"field": "content", "op": "ne", "value": ""}})"),
                          "project.toml");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->name, "small-writes");
  EXPECT_EQ(r->text, "write(src/**)");
  EXPECT_EQ(r->decision, Decision::kAllow);
  EXPECT_EQ(r->scope.ToString(), "acme/prod/*");
  ASSERT_TRUE(r->condition.has_value());
  EXPECT_EQ(r->condition->op, ConditionOp::kNe);
  EXPECT_THAT(r->Describe(), HasSubstr("small-writes"));
  EXPECT_THAT(r->Describe(), HasSubstr("from project.toml"));
}

TEST(ParseRuleTableTest, Errors) {
  struct Case {
    const char* json;
    const char* fragment;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"rule": "bash"})", "missing 'decision'"},
           {R"({"rule": "bash", "decision": "maybe"})", "not allow, ask or deny"},
           {R"({"decision": "deny"})", "missing 'rule' or 'tool'"},
           {R"({"rule": "bash", "tool": "bash", "decision": "deny"})", "not both"},
           {R"({"rule": "bash", "decision": "deny", "wen": {}})", "unknown key 'wen'"},
           {R"({"rule": "bash", "decision": "deny", "scope": "a/b/c/d"})", "more than 3"},
           {R"({"rule": "bash", "decision": "deny", "scope": "a//c"})", "empty segment"},
           {R"({"rule": "bash", "decision": "deny", "scope": "ac*/b"})", "literal or '*'"},
           {R"({"rule": "bash", "decision": "deny", "when": {"field": "x", "op": "like",
                "value": 1}})",
            "unknown op"},
           {R"({"rule": "bash", "decision": "deny", "when": {"field": "x", "op": "in",
                "value": 1}})",
            "needs an array"},
           {R"({"rule": "bash", "decision": "deny", "when": {"field": "x", "op": "gt",
                "value": true}})",
            "number or string"},
           {R"({"rule": "bash", "decision": "deny", "when": {"field": "a..b", "op": "eq",
                "value": 1}})",
            "empty segment"},
           {R"({"rule": "bash", "decision": "deny", "when": {"field": "x", "op": "eq"}})",
            "'when.value' is missing"}}) {
    auto r = ParseRuleTable(J(c.json), "cfg");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_THAT(r.error().message(), HasSubstr(c.fragment)) << c.json;
  }
}

// ---- Conditions ---------------------------------------------------------

struct CondCase {
  const char* field;
  ConditionOp op;
  const char* value;
  bool want;
};

class ConditionTest : public ::testing::TestWithParam<CondCase> {};

TEST_P(ConditionTest, Evaluates) {
  const Json args = J(R"({"n": 5, "f": 2.5, "s": "hello world", "b": true, "z": null,
                          "arr": ["a", 1, 2.0], "obj": {"depth": 3, "list": [{"k": "v"}]}})");
  const CondCase& c = GetParam();
  Condition cond{c.field, c.op, J(c.value)};
  EXPECT_EQ(EvaluateCondition(cond, args), c.want)
      << c.field << " " << ConditionOpName(c.op) << " " << c.value;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConditionTest,
    ::testing::Values(
        CondCase{"n", ConditionOp::kEq, "5", true}, CondCase{"n", ConditionOp::kEq, "5.0", true},
        CondCase{"n", ConditionOp::kEq, "6", false},
        CondCase{"n", ConditionOp::kEq, "\"5\"", false},  // type mismatch
        CondCase{"n", ConditionOp::kNe, "6", true}, CondCase{"n", ConditionOp::kNe, "5", false},
        CondCase{"n", ConditionOp::kNe, "\"x\"", false},  // mismatch falls through
        CondCase{"n", ConditionOp::kGt, "4", true}, CondCase{"n", ConditionOp::kGt, "5", false},
        CondCase{"n", ConditionOp::kGte, "5", true}, CondCase{"f", ConditionOp::kLt, "3", true},
        CondCase{"f", ConditionOp::kLt, "2.5", false},
        CondCase{"f", ConditionOp::kLte, "2.5", true},
        CondCase{"n", ConditionOp::kGt, "\"4\"", false},  // mismatch
        CondCase{"s", ConditionOp::kGt, "\"hello\"", true},
        CondCase{"s", ConditionOp::kLt, "3", false},  // mismatch
        CondCase{"b", ConditionOp::kEq, "true", true}, CondCase{"b", ConditionOp::kGt, "0", false},
        CondCase{"z", ConditionOp::kEq, "null", true},
        CondCase{"s", ConditionOp::kIn, R"(["a", "hello world"])", true},
        CondCase{"n", ConditionOp::kIn, R"([1, 5.0])", true},
        CondCase{"n", ConditionOp::kIn, R"(["5"])", false},
        CondCase{"s", ConditionOp::kContains, "\"world\"", true},
        CondCase{"s", ConditionOp::kContains, "\"mars\"", false},
        CondCase{"arr", ConditionOp::kContains, "1", true},
        CondCase{"arr", ConditionOp::kContains, "\"b\"", false},
        CondCase{"n", ConditionOp::kContains, "5", false},  // mismatch
        CondCase{"obj.depth", ConditionOp::kGte, "3", true},
        CondCase{"obj.list.0.k", ConditionOp::kEq, "\"v\"", true},
        CondCase{"obj.list.1.k", ConditionOp::kEq, "\"v\"", false},  // missing index
        CondCase{"obj.missing", ConditionOp::kNe, "1", false},       // missing field
        CondCase{"s.deeper", ConditionOp::kEq, "1", false}));

// ---- Path normalisation and matching -----------------------------------

TEST(NormalizeToolPathTest, Table) {
  const std::filesystem::path ws = "/work/proj";
  struct Case {
    const char* in;
    const char* rel;
    const char* abs;
    bool inside;
  };
  for (const Case& c :
       std::vector<Case>{{"src/a.cc", "src/a.cc", "/work/proj/src/a.cc", true},
                         {"./src/../docs/x.md", "docs/x.md", "/work/proj/docs/x.md", true},
                         {"/work/proj/src/", "src", "/work/proj/src", true},
                         {"/work/proj", ".", "/work/proj", true},
                         {".", ".", "/work/proj", true},
                         {"../other/x", "", "/work/other/x", false},
                         {"/work/projx/a", "", "/work/projx/a", false},
                         {"src/../../etc/passwd", "", "/work/etc/passwd", false}}) {
    NormalizedPath p = NormalizeToolPath(c.in, ws);
    EXPECT_EQ(p.relative, c.rel) << c.in;
    EXPECT_EQ(p.absolute, c.abs) << c.in;
    EXPECT_EQ(p.inside, c.inside) << c.in;
  }
}

struct ApplyCase {
  const char* rule;
  Decision decision;
  const char* tool;
  const char* args;
  bool want;
};

class RuleAppliesTest : public ::testing::TestWithParam<ApplyCase> {};

TEST_P(RuleAppliesTest, Applies) {
  const ApplyCase& c = GetParam();
  auto r = ParseRule(c.rule, c.decision, "t");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  Json args = J(c.args);
  CallSubject s = DescribeCall(TestSpec(c.tool), args, "/ws");
  EXPECT_EQ(RuleApplies(*r, TestSpec(c.tool), args, s, Scope{}, "/home/me"), c.want)
      << c.rule << " (" << DecisionName(c.decision) << ") vs " << c.tool << " " << c.args;
}

constexpr Decision kA = Decision::kAllow;
constexpr Decision kD = Decision::kDeny;
constexpr Decision kQ = Decision::kAsk;

INSTANTIATE_TEST_SUITE_P(
    Bash, RuleAppliesTest,
    ::testing::Values(
        ApplyCase{"bash(git status*)", kA, "bash", R"({"command": "git status"})", true},
        ApplyCase{"bash(git status*)", kA, "bash", R"({"command": "git status && rm -rf x"})",
                  false},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "git status && rm -rf x"})", true},
        ApplyCase{"bash(rm*)", kQ, "bash", R"({"command": "git status && rm -rf x"})", true},
        ApplyCase{"bash(git *)", kA, "bash", R"({"command": "git status; git diff | git apply"})",
                  true},
        ApplyCase{"bash(git *)", kA, "bash", R"j({"command": "git log $(rm -rf x)"})j", false},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "echo `rm -rf x`"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "sudo /bin/rm -rf x"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "bash -c 'rm -rf x'"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "find . | xargs rm"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "FOO=1 sudo /bin/rm x"})", true},
        ApplyCase{"bash(*)", kA, "bash", R"({"command": "ls > out.txt"})", false},
        ApplyCase{"bash(*)", kA, "bash", R"({"command": "ls 2>/dev/null | wc -l"})", true},
        ApplyCase{"bash(git status*)", kA, "bash", R"({"command": "git status > ~/.bashrc"})",
                  false},
        ApplyCase{"bash(echo * > out.txt)", kA, "bash", R"({"command": "echo hi > out.txt"})",
                  true},
        ApplyCase{"bash(git status*)", kA, "bash", R"({"command": "git status 'unterminated"})",
                  false},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "rm 'unterminated"})", true},
        ApplyCase{"bash(ls*)", kA, "bash", R"({"command": "FOO=1 ls"})", false},
        ApplyCase{"bash(ls*)", kA, "bash", R"({"nocommand": 1})", false},
        ApplyCase{"Bash(ls*)", kA, "bash", R"({"command": "ls"})", true},
        ApplyCase{"bash", kA, "bash", R"({"command": "anything at all; rm -rf /"})", true},
        ApplyCase{"*", kA, "write", R"({"file_path": "x"})", true},
        ApplyCase{"mcp__gh__*", kA, "mcp__gh__create_issue", R"({})", true},
        ApplyCase{"mcp__gh__*", kA, "mcp__other__x", R"({})", false}));

// Wrappers: an allow rule must name the program a wrapper runs; deny and ask
// rules see it. Escalating options turn an allow by name into no match.
INSTANTIATE_TEST_SUITE_P(
    BashWrappersAndEscalation, RuleAppliesTest,
    ::testing::Values(
        ApplyCase{"bash(timeout*)", kA, "bash", R"({"command": "timeout 5 rm -rf x"})", false},
        ApplyCase{"bash(timeout 5 ls*)", kA, "bash", R"({"command": "timeout 5 ls -la"})", true},
        ApplyCase{"bash(timeout 5 ls*)", kA, "bash", R"({"command": "timeout 5 lsblk"})", false},
        ApplyCase{"bash(timeout 5 l*)", kA, "bash", R"({"command": "timeout 5 ls"})", false},
        ApplyCase{"bash(*)", kA, "bash", R"({"command": "timeout 5 ls"})", true},
        ApplyCase{"bash(command*)", kA, "bash", R"({"command": "command -p rm x"})", false},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "command -p rm x"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "sudo -u x -- rm y"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "exec -a name rm y"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "find . -exec rm {} \\;"})", true},
        ApplyCase{"bash(rm*)", kQ, "bash", R"({"command": "bash -xc 'rm y'"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "env -S 'rm y'"})", true},
        ApplyCase{"bash(ls*)", kA, "bash", R"({"command": "env -S 'rm y' ls"})", false},
        ApplyCase{"bash(git log*)", kA, "bash", R"({"command": "git log --oneline"})", true},
        ApplyCase{"bash(git log*)", kA, "bash", R"({"command": "git log --output=~/.bashrc"})",
                  false},
        ApplyCase{"bash(git log*)", kA, "bash", R"({"command": "git log --out=x"})", false},
        ApplyCase{"bash(git *)", kA, "bash", R"({"command": "git -c core.pager=id log"})", false},
        ApplyCase{"bash(git diff*)", kA, "bash", R"({"command": "git diff --ext-diff"})", false},
        ApplyCase{"bash(git log*)", kA, "bash", R"({"command": "git log *"})", false},
        ApplyCase{"bash(sed*)", kA, "bash", R"({"command": "sed -i s/a/b/ f"})", false},
        ApplyCase{"bash(sed*)", kA, "bash", R"({"command": "sed s/a/b/ f"})", true},
        ApplyCase{"bash(sed -i s/a/b/ f)", kA, "bash", R"({"command": "sed -i s/a/b/ f"})", true},
        ApplyCase{"bash(find*)", kA, "bash", R"({"command": "find . -delete"})", false},
        ApplyCase{"bash(sort*)", kA, "bash", R"({"command": "sort -o out f"})", false},
        ApplyCase{"bash(tar*)", kA, "bash", R"({"command": "tar -xf a.tar"})", false},
        ApplyCase{"bash(tar*)", kA, "bash", R"({"command": "tar -tf a.tar"})", true},
        ApplyCase{"bash(rm*)", kD, "bash", R"({"command": "ls ${x:-$(rm -rf x)}"})", true}));

TEST(RuleAppliesTest, LinesBashReadsDifferentlyAreNotAllowed) {
  auto allow = ParseRule("bash(ls*)", Decision::kAllow, "t");
  auto deny = ParseRule("bash(rm*)", Decision::kDeny, "t");
  ASSERT_TRUE(allow.ok() && deny.ok());
  for (const char* line :
       {"ls \r# ; rm -rf x", "ls ${x:-\"}\"} ; rm -rf x\necho \"", "ls `echo \\`rm -rf x\\``",
        "ls $[1<<2]\nrm -rf x\n2]", "ls; ((x<<EOF))\nrm -rf x\nEOF",
        "ls <<EOF\nEO\\\nF\nrm -rf x\nEOF", "ls ${x:-<(rm -rf y)}"}) {
    Json args = Json::object();
    args["command"] = line;
    CallSubject s = DescribeCall(TestSpec("bash"), args, "/ws");
    EXPECT_FALSE(RuleApplies(*allow, TestSpec("bash"), args, s, Scope{}, "")) << line;
    EXPECT_TRUE(RuleApplies(*deny, TestSpec("bash"), args, s, Scope{}, "")) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, RuleAppliesTest,
    ::testing::Values(
        ApplyCase{"read(src/**)", kA, "read", R"({"file_path": "src/a/b.cc"})", true},
        ApplyCase{"read(src/**)", kA, "read", R"({"file_path": "/ws/src/a/b.cc"})", true},
        ApplyCase{"read(src/**)", kA, "read", R"({"file_path": "src/../secrets/k"})", false},
        ApplyCase{"write(secrets/**)", kD, "write", R"({"file_path": "src/../secrets/k"})", true},
        ApplyCase{"edit(*.md)", kA, "edit", R"({"file_path": "docs/guide.md"})", true},
        ApplyCase{"edit(*.md)", kA, "edit", R"({"file_path": "/elsewhere/x.md"})", false},
        ApplyCase{"read(.env)", kD, "read", R"({"file_path": "/elsewhere/.env"})", true},
        ApplyCase{"read(**)", kA, "read", R"({"file_path": "/etc/passwd"})", false},
        ApplyCase{"read(/etc/**)", kD, "read", R"({"file_path": "/etc/passwd"})", true},
        ApplyCase{"read(~/.ssh/**)", kD, "read", R"({"file_path": "/home/me/.ssh/id_rsa"})", true},
        ApplyCase{"read(~/.ssh/**)", kD, "read", R"({"file_path": "/home/you/.ssh/id_rsa"})",
                  false},
        ApplyCase{"grep(src/**)", kA, "grep", R"({"pattern": "x", "path": "src/lib"})", true},
        ApplyCase{"grep(src/**)", kA, "grep", R"({"pattern": "x"})", false},
        ApplyCase{"ls(**)", kA, "ls", R"({})", true},
        ApplyCase{"write(src/**)", kA, "write", R"({"content": "x"})", false}));

TEST(RuleAppliesTest, ConditionAndScope) {
  auto r = ParseRuleTable(J(R"({"rule": "bash", "decision": "allow", "scope": "acme/*/*",
                                 "when": {"field": "timeout_ms", "op": "lte", "value": 5000}})"),
                          "t");
  ASSERT_TRUE(r.ok());
  Json fast = J(R"({"command": "x", "timeout_ms": 1000})");
  Json slow = J(R"({"command": "x", "timeout_ms": 60000})");
  Json odd = J(R"({"command": "x", "timeout_ms": "1000"})");
  Scope acme{"acme", "production", "agentloop"};
  Scope other{"other", "production", "agentloop"};
  auto applies = [&](const Json& a, const Scope& s) {
    return RuleApplies(*r, TestSpec("bash"), a, DescribeCall(TestSpec("bash"), a, "/ws"), s, "");
  };
  EXPECT_TRUE(applies(fast, acme));
  EXPECT_FALSE(applies(slow, acme));
  EXPECT_FALSE(applies(odd, acme));  // mistyped: falls through
  EXPECT_FALSE(applies(fast, other));
}

// ---- Rule sets and warnings -----------------------------------------------

TEST(ParseRulesTest, ListsAndTablesInOrder) {
  RuleSource flags{"--allow", {"bash(git status*)", "*"}, {"write"}, {"bash(rm*)"}, {}};
  RuleSource cfg{
      "config.toml", {}, {}, {}, {J(R"j({"rule": "read(src/**)", "decision": "deny"})j")}};
  auto set = ParseRules({flags, cfg});
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  ASSERT_EQ(set->rules.size(), 5u);
  EXPECT_EQ(set->rules[0].text, "bash(rm*)");
  EXPECT_EQ(set->rules[0].decision, Decision::kDeny);
  EXPECT_EQ(set->rules[4].source, "config.toml");
}

TEST(ParseRulesTest, AllErrorsReportedTogether) {
  RuleSource a{"a.toml", {"bash(oops", "read(src/**)"}, {}, {"ask_user(x)"}, {}};
  std::vector<ToolSpec> tools = TestSpecs();
  tools.push_back(TestSpec("ask_user"));
  auto set = ParseRules({a}, ParseOptions{tools});
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.error().message(), HasSubstr("rule 'bash(oops' from a.toml"));
  EXPECT_THAT(set.error().message(), HasSubstr("rule 'ask_user(x)' from a.toml"));
}

TEST(ParseRulesTest, Warnings) {
  struct Case {
    RuleSource src;
    const char* fragment;  // nullptr: no warning expected
  };
  ParseOptions opts{TestSpecs()};
  std::vector<Case> cases = {
      {{"s", {"bsh"}, {}, {}, {}}, "no tool named 'bsh'"},
      {{"s", {"mcp__gh__x"}, {}, {}, {}}, nullptr},
      {{"s", {"bash()"}, {}, {}, {}}, "empty pattern"},
      {{"s", {"bash(git push*)"}, {}, {"bash"}, {}}, "never takes effect"},
      {{"s", {"bash(git push*)"}, {}, {"bash(git*)"}, {}}, "never takes effect"},
      {{"s", {"bash(git push*)"}, {"bash(git push --force*)"}, {}, {}}, nullptr},
      {{"s", {"write(secrets/keys/**)"}, {}, {"write(secrets/**)"}, {}}, "never takes effect"},
      {{"s", {"bash(git push*)"}, {}, {"*"}, {}}, "never takes effect"},
      {{"s", {"bash(ls*)"}, {"bash(ls*)"}, {}, {}}, "never takes effect"},
      {{"s", {"bash(ls*)"}, {}, {"bash(rm*)"}, {}}, nullptr},
  };
  for (const Case& c : cases) {
    auto set = ParseRules({c.src}, opts);
    ASSERT_TRUE(set.ok()) << set.error().ToString();
    if (c.fragment == nullptr) {
      EXPECT_TRUE(set->warnings.empty()) << set->warnings.front();
    } else {
      ASSERT_FALSE(set->warnings.empty()) << c.fragment;
      EXPECT_THAT(set->warnings.front(), HasSubstr(c.fragment));
    }
  }
  // A deny in a narrower scope does not shadow a global allow.
  RuleSource scoped{"s", {"bash(ls*)"}, {}, {}, {J(R"({"rule": "bash", "decision": "deny",
                                                       "scope": "acme"})")}};
  auto set = ParseRules({scoped}, opts);
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->warnings.empty());
  // A conditional deny does not shadow an unconditional allow.
  RuleSource cond{"s", {"bash(ls*)"}, {}, {}, {J(R"({"rule": "bash", "decision": "deny",
                                                     "when": {"field": "x", "op": "eq",
                                                              "value": 1}})")}};
  set = ParseRules({cond}, opts);
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->warnings.empty());
}

}  // namespace
}  // namespace agentloop::permissions
