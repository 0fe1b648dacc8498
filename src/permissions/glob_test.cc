#include "permissions/glob.h"

#include <gtest/gtest.h>

namespace agentloop::permissions {
namespace {

struct GlobCase {
  const char* pattern;
  GlobMode mode;
  const char* text;
  bool want;
};

class GlobMatchTest : public ::testing::TestWithParam<GlobCase> {};

TEST_P(GlobMatchTest, Matches) {
  const GlobCase& c = GetParam();
  auto g = Glob::Compile(c.pattern, c.mode);
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  EXPECT_EQ(g->Matches(c.text), c.want) << "pattern '" << c.pattern << "' text '" << c.text << "'";
}

constexpr GlobMode kCmd = GlobMode::kText;
constexpr GlobMode kPath = GlobMode::kPath;

INSTANTIATE_TEST_SUITE_P(
    Table, GlobMatchTest,
    ::testing::Values(
        // Command mode: `*` spans spaces and slashes.
        GlobCase{"git status*", kCmd, "git status", true},
        GlobCase{"git status*", kCmd, "git status --short", true},
        GlobCase{"git status*", kCmd, "git diff", false},
        GlobCase{"git status*", kCmd, " git status", false},
        GlobCase{"npm run test:*", kCmd, "npm run test", true},
        GlobCase{"npm run test:*", kCmd, "npm run test --watch", true},
        GlobCase{"npm run test:*", kCmd, "npm run tests", false},
        GlobCase{"*", kCmd, "anything / at all", true}, GlobCase{"ls ?", kCmd, "ls a", true},
        GlobCase{"ls ?", kCmd, "ls ab", false},
        GlobCase{"make {build,test}", kCmd, "make test", true},
        GlobCase{"make {build,test}", kCmd, "make clean", false},
        GlobCase{"cat [abc].txt", kCmd, "cat b.txt", true},
        GlobCase{"cat [!abc].txt", kCmd, "cat b.txt", false},
        GlobCase{"cat [a-c].txt", kCmd, "cat c.txt", true},
        GlobCase{"echo \\*", kCmd, "echo *", true}, GlobCase{"echo \\*", kCmd, "echo x", false},
        // Path mode.
        GlobCase{"src/**", kPath, "src/a/b/c.cc", true}, GlobCase{"src/**", kPath, "src", true},
        GlobCase{"src/**", kPath, "srcx/a", false}, GlobCase{"src/*", kPath, "src/a.cc", true},
        GlobCase{"src/*", kPath, "src/a/b.cc", false},
        GlobCase{"src/**/*.cc", kPath, "src/a.cc", true},
        GlobCase{"src/**/*.cc", kPath, "src/x/y/a.cc", true},
        GlobCase{"src/**/*.cc", kPath, "src/x/y/a.h", false},
        GlobCase{"**/test_*.py", kPath, "test_a.py", true},
        GlobCase{"**/test_*.py", kPath, "a/b/test_a.py", true},
        GlobCase{"*.md", kPath, "docs/guide/a.md", true},  // basename rule
        GlobCase{"*.md", kPath, "README.md", true}, GlobCase{"*.md", kPath, "docs/a.mdx", false},
        GlobCase{".env", kPath, "config/.env", true},
        GlobCase{"secrets/**", kPath, "secrets/prod/key.pem", true},
        GlobCase{"secrets/**", kPath, "app/secrets/key.pem", false},
        GlobCase{"/etc/**", kPath, "/etc/passwd", true}, GlobCase{"a?c", kPath, "a/c", false},
        GlobCase{"**", kPath, ".", true}, GlobCase{"docs/*.{md,txt}", kPath, "docs/a.txt", true},
        GlobCase{"src/a/**/b", kPath, "src/a/b", true}, GlobCase{"**/*.env", kPath, ".env", true},
        GlobCase{"**/*.env", kPath, "config/prod.env", true},
        GlobCase{"make {build,{x,y}}", kCmd, "make y", true}));

TEST(GlobTest, CompileErrors) {
  for (const char* bad : {"cat [abc", "a{b,c", "trailing\\"}) {
    EXPECT_FALSE(Glob::Compile(bad, GlobMode::kText).ok()) << bad;
  }
}

// A rule path pattern whose `**` is not a whole segment looks recursive but
// would cover one directory: refused, with the fix in the message.
TEST(GlobTest, PartialDoubleStarInAPathPatternIsRefused) {
  auto g = Glob::Compile("src/**.cc", GlobMode::kPath);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("whole path segment"), std::string::npos);
  // Matched against base names it means what it says.
  EXPECT_TRUE(Glob::Compile("**.env", GlobMode::kPath)->Matches("a/b/prod.env"));
  EXPECT_TRUE(Glob::Compile("src/**/*.cc", GlobMode::kPath).ok());
}

// Rules and the glob and grep tools share one engine: a path pattern with
// `/` matches exactly what the tools' patterns match.
TEST(GlobTest, PathRulesAgreeWithTheToolsEngine) {
  const char* patterns[] = {"src/**", "**/*.env", "a/**/b",         "src/*",
                            "**",     ".git/**",  "docs/*.{md,txt}"};
  const char* paths[] = {"src",   "src/a.cc", "src/a/b.cc",  ".env",      "a/.env",     "a/b",
                         "a/x/b", "a/xb",     ".git/config", "docs/a.md", "docs/x/a.md"};
  for (const char* p : patterns) {
    auto rule = Glob::Compile(p, GlobMode::kPath);
    auto tool = GlobPattern::Compile(p);
    ASSERT_TRUE(rule.ok() && tool.ok()) << p;
    for (const char* path : paths) {
      if (rule->basename_only()) continue;
      EXPECT_EQ(rule->Matches(path), tool->Match(path)) << p << " vs " << path;
    }
  }
}

TEST(GlobTest, Properties) {
  EXPECT_TRUE(Glob::Compile("*", GlobMode::kText)->MatchesEverything());
  EXPECT_TRUE(Glob::Compile("**", GlobMode::kPath)->MatchesEverything());
  EXPECT_FALSE(Glob::Compile("src/**", GlobMode::kPath)->MatchesEverything());
  EXPECT_FALSE(Glob::Compile("git *", GlobMode::kText)->MatchesEverything());
  EXPECT_TRUE(Glob::Compile("git status", GlobMode::kText)->IsLiteral());
  EXPECT_FALSE(Glob::Compile("git*", GlobMode::kText)->IsLiteral());
  EXPECT_TRUE(Glob::Compile("/etc/**", GlobMode::kPath)->absolute());
  EXPECT_TRUE(Glob::Compile("*.md", GlobMode::kPath)->basename_only());
}

}  // namespace
}  // namespace agentloop::permissions
