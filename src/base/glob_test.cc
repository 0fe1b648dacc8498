#include "base/glob.h"

#include <gtest/gtest.h>

namespace agentloop {
namespace {

struct Case {
  const char* pattern;
  const char* path;
  bool want;
};

// The `**` rules every caller shares (docs/permissions.md, docs/tools.md).
class PathGlobTest : public ::testing::TestWithParam<Case> {};

TEST_P(PathGlobTest, Matches) {
  const Case& c = GetParam();
  auto g = GlobPattern::Compile(c.pattern, GlobMode::kPath);
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  EXPECT_EQ(g->Match(c.path), c.want) << "pattern '" << c.pattern << "' path '" << c.path << "'";
}

INSTANTIATE_TEST_SUITE_P(
    DoubleStar, PathGlobTest,
    ::testing::Values(
        // At the start: zero or more leading segments.
        Case{"**/b.txt", "b.txt", true}, Case{"**/b.txt", "x/y/b.txt", true},
        Case{"**/b.txt", "xb.txt", false}, Case{"**/*.env", ".env", true},
        Case{"**/*.env", "a/.env", true}, Case{"**/*.env", "a/b/prod.env", true},
        Case{"**/*.env", "a/env", false},
        // In the middle: `a/**/b` matches `a/b`.
        Case{"a/**/b", "a/b", true}, Case{"a/**/b", "a/x/y/b", true}, Case{"a/**/b", "a/xb", false},
        Case{"a/**/b", "ab", false}, Case{"a/**/b", "a/x/b/c", false},
        // At the end: the directory itself and everything below it.
        Case{"src/**", "src", true}, Case{"src/**", "src/a.cc", true},
        Case{"src/**", "src/a/b/c.cc", true}, Case{"src/**", "srcx/a", false},
        Case{"src/**", "app/src/a", false},
        // Alone: everything.
        Case{"**", "a", true}, Case{"**", "a/b/.c", true}, Case{"**", ".", true},
        // `*`, `?` and classes never cross `/`.
        Case{"src/*", "src/a.cc", true}, Case{"src/*", "src/a/b.cc", false},
        Case{"*.cc", "a/b.cc", false}, Case{"a?c", "a/c", false}, Case{"a[/]c", "a/c", false},
        // Dotfiles are ordinary names.
        Case{"src/*", "src/.hidden", true}, Case{"*", ".env", true},
        Case{".git/**", ".git/hooks/pre-commit", true},
        // `**` that is not a whole segment is `*`.
        Case{"src/**.cc", "src/a.cc", true}, Case{"src/**.cc", "src/x/a.cc", false},
        Case{"a**", "abc", true}, Case{"a**", "a/b", false},
        // Alternatives and escapes.
        Case{"docs/*.{md,txt}", "docs/a.txt", true}, Case{"{src,lib}/**", "lib", true},
        Case{"\\*.md", "*.md", true}, Case{"\\*.md", "a.md", false}));

TEST(GlobTextTest, StarsAndClassesCrossSlashes) {
  auto g = GlobPattern::Compile("git -C * status", GlobMode::kText);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Match("git -C /a/b status"));
  EXPECT_TRUE(GlobPattern::Compile("a?c", GlobMode::kText)->Match("a/c"));
  EXPECT_TRUE(GlobPattern::Compile("a[!x]c", GlobMode::kText)->Match("a/c"));
  EXPECT_TRUE(GlobPattern::Compile("rm **", GlobMode::kText)->Match("rm -rf /"));
  EXPECT_TRUE(GlobPattern::Compile("*", GlobMode::kText)->matches_everything());
}

TEST(GlobTest, Properties) {
  EXPECT_TRUE(GlobPattern::Compile("**", GlobMode::kPath)->matches_everything());
  EXPECT_TRUE(GlobPattern::Compile("*", GlobMode::kPath)->matches_everything());  // base names
  EXPECT_FALSE(GlobPattern::Compile("src/**", GlobMode::kPath)->matches_everything());
  EXPECT_FALSE(GlobPattern::Compile("*/*", GlobMode::kPath)->matches_everything());
  EXPECT_TRUE(GlobPattern::Compile("a/b.txt", GlobMode::kPath)->literal());
  EXPECT_FALSE(GlobPattern::Compile("a/{b,c}", GlobMode::kPath)->literal());
  EXPECT_TRUE(GlobPattern::Compile("src/**.cc", GlobMode::kPath)->has_partial_double_star());
  EXPECT_FALSE(GlobPattern::Compile("src/**/*.cc", GlobMode::kPath)->has_partial_double_star());
  // The dir-itself form of `src/**` does not spoil the walking hints.
  auto g = GlobPattern::Compile("src/lib/**", GlobMode::kPath);
  EXPECT_EQ(g->literal_prefix(), "src/lib");
  EXPECT_EQ(g->fixed_depth(), -1);
}

TEST(GlobTest, CompileErrors) {
  for (const char* bad : {"[abc", "{a,b", "a}", "trailing\\"}) {
    EXPECT_FALSE(GlobPattern::Compile(bad).ok()) << bad;
  }
}

TEST(GlobTest, ManyStarsStayLinear) {
  auto g = GlobPattern::Compile("*a*a*a*a*a*a*a*a*a*b", GlobMode::kText);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->Match(std::string(20000, 'a')));
  EXPECT_TRUE(g->Match(std::string(20000, 'a') + "b"));
}

}  // namespace
}  // namespace agentloop
