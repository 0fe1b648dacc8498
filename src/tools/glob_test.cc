#include "base/glob.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "tools/ignore.h"
#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

using testing::RunTool;
using testing::TempWorkspace;

bool M(const char* pattern, const char* path) {
  auto g = GlobPattern::Compile(pattern);
  EXPECT_TRUE(g.ok()) << pattern;
  return g.ok() && g->Match(path);
}

TEST(GlobPatternTest, Table) {
  struct Case {
    const char* pattern;
    const char* path;
    bool match;
  } cases[] = {
      {"*.cc", "a.cc", true},
      {"*.cc", "d/a.cc", false},
      {"**/*.cc", "a.cc", true},
      {"**/*.cc", "x/y/a.cc", true},
      {"**/*.cc", "x/y/a.h", false},
      {"src/**/*.h", "src/a.h", true},
      {"src/**/*.h", "src/x/y/a.h", true},
      {"src/**/*.h", "lib/a.h", false},
      {"src/**", "src/a/b", true},
      {"src/**", "src", true},  // `**` matches zero segments too
      {"a?c", "abc", true},
      {"a?c", "a/c", false},
      {"[a-c]x", "bx", true},
      {"[!a-c]x", "bx", false},
      {"[!a-c]x", "dx", true},
      {"[]]", "]", true},
      {"*.{ts,tsx}", "a.tsx", true},
      {"*.{ts,tsx}", "a.js", false},
      {"{src,lib}/**/*.{c,h}", "lib/x/a.h", true},
      {"a\\*b", "a*b", true},
      {"a\\*b", "axb", false},
      {"**", "any/thing", true},
      {"a/**/b", "a/b", true},
      {"a/**/b", "a/x/y/b", true},
      {"a/**/b", "a/xb", false},
      {"*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
      {"x**y", "xaay", true},
      {"x**y", "xa/ay", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(M(c.pattern, c.path), c.match) << c.pattern << " vs " << c.path;
  }
  EXPECT_FALSE(GlobPattern::Compile("[abc").ok());
  EXPECT_FALSE(GlobPattern::Compile("{a,b").ok());
  auto g = GlobPattern::Compile("src/lib/**/*.cc");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->literal_prefix(), "src/lib");
  EXPECT_EQ(g->fixed_depth(), -1);
  g = GlobPattern::Compile("a/*/c.txt");
  EXPECT_EQ(g->fixed_depth(), 3);
}

TEST(IgnoreTest, GitSemantics) {
  auto node = std::make_shared<IgnoreNode>();
  node->dir = "/r";
  node->git_ignore = ParseIgnoreFile(
      "# comment\n\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/*.tmp\n\\#hash\ntrailing   \n");
  auto ign = [&](const char* p, bool dir = false) { return IsIgnored(node.get(), p, dir); };
  EXPECT_TRUE(ign("/r/a.log"));
  EXPECT_TRUE(ign("/r/x/y/a.log"));
  EXPECT_FALSE(ign("/r/keep.log"));
  EXPECT_FALSE(ign("/r/x/keep.log"));
  EXPECT_TRUE(ign("/r/build", true));
  EXPECT_TRUE(ign("/r/x/build", true));
  EXPECT_FALSE(ign("/r/build", false));  // dir-only rule, a file named build
  EXPECT_TRUE(ign("/r/top.txt"));
  EXPECT_FALSE(ign("/r/x/top.txt"));  // anchored
  EXPECT_TRUE(ign("/r/docs/a.tmp"));
  EXPECT_FALSE(ign("/r/docs/x/a.tmp"));  // '*' does not cross '/'
  EXPECT_TRUE(ign("/r/#hash"));
  EXPECT_TRUE(ign("/r/trailing"));
  EXPECT_FALSE(ign("/r/main.cc"));

  // A deeper file overrides, and .ignore beats .gitignore in one directory.
  auto child = std::make_shared<IgnoreNode>();
  child->parent = node;
  child->dir = "/r/sub";
  child->git_ignore = ParseIgnoreFile("!*.log\nsecret.txt\n");
  child->dot_ignore = ParseIgnoreFile("!secret.txt\n");
  EXPECT_FALSE(IsIgnored(child.get(), "/r/sub/a.log", false));
  EXPECT_TRUE(IsIgnored(child.get(), "/r/other.log", false));
  EXPECT_FALSE(IsIgnored(child.get(), "/r/sub/secret.txt", false));
}

class WalkIgnoreTest : public ::testing::Test {
 protected:
  std::string Files(Json in = Json{{"pattern", "**/*"}}) {
    GlobToolOptions o;
    o.max_results = 0;
    GlobTool glob(o);
    auto out = RunTool(glob, t_.ctx(), std::move(in));
    // Sort for comparison (the tool orders by mtime).
    std::vector<std::string> lines;
    for (std::string_view l : Split(out.content, '\n')) {
      if (!l.empty()) lines.emplace_back(l);
    }
    std::sort(lines.begin(), lines.end());
    std::string s;
    for (auto& l : lines) s += l + "\n";
    return s;
  }
  static std::vector<std::string_view> Split(std::string_view s, char c) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i <= s.size()) {
      size_t j = s.find(c, i);
      if (j == std::string_view::npos) j = s.size();
      out.push_back(s.substr(i, j - i));
      i = j + 1;
    }
    return out;
  }
  TempWorkspace t_;
};

TEST_F(WalkIgnoreTest, NestedGitignoreNegationDotIgnoreAndInfoExclude) {
  t_.Write(".gitignore", "*.log\nout/\n");
  t_.Write("a.log", "");
  t_.Write("a.txt", "");
  t_.Write("out/x.txt", "");
  t_.Write("sub/.gitignore", "!important.log\n*.tmp\n");
  t_.Write("sub/important.log", "");
  t_.Write("sub/other.log", "");
  t_.Write("sub/x.tmp", "");
  t_.Write("sub/deeper/y.tmp", "");
  t_.Write("sub/deeper/ok.txt", "");
  t_.Write(".ignore", "vendor\n");
  t_.Write("vendor/lib.txt", "");
  t_.Write(".git/info/exclude", "local-only.txt\n");
  t_.Write("local-only.txt", "");
  t_.Write("nested/local-only.txt", "");
  EXPECT_EQ(Files(), "a.txt\nsub/deeper/ok.txt\nsub/important.log\n");
  // Walking a subdirectory still applies the ignore files above it.
  EXPECT_EQ(Files(Json{{"pattern", "**/*"}, {"path", "sub"}}),
            "sub/deeper/ok.txt\nsub/important.log\n");
}

TEST_F(WalkIgnoreTest, HiddenFilesOnlyWhenThePatternNamesThem) {
  t_.Write(".github/workflows/ci.yml", "");
  t_.Write("a.yml", "");
  EXPECT_EQ(Files(Json{{"pattern", "**/*.yml"}}), "a.yml\n");
  EXPECT_EQ(Files(Json{{"pattern", ".github/**/*.yml"}}), ".github/workflows/ci.yml\n");
}

TEST(GlobToolTest, NewestFirstCappedAndTopLevelOnlyWithoutStars) {
  TempWorkspace t;
  for (int i = 0; i < 5; ++i) {
    std::string name = "f" + std::to_string(i) + ".txt";
    t.Write(name, "x");
    struct timeval tv[2] = {{1000000 + i * 10, 0}, {1000000 + i * 10, 0}};
    utimes((t.ws() / name).c_str(), tv);
  }
  t.Write("d/deep.txt", "x");
  struct timeval old[2] = {{10, 0}, {10, 0}};
  utimes((t.ws() / "d/deep.txt").c_str(), old);
  GlobToolOptions o;
  o.max_results = 3;
  GlobTool glob(o);
  auto out = RunTool(glob, t.ctx(), Json{{"pattern", "*.txt"}});
  EXPECT_EQ(out.content.substr(0, out.content.find("\n\n")), "f4.txt\nf3.txt\nf2.txt");
  EXPECT_NE(out.content.find("3 most recently modified of 5"), std::string::npos);
  out = RunTool(glob, t.ctx(), Json{{"pattern", "d/*.txt"}});
  EXPECT_EQ(out.content, "d/deep.txt\n");
  out = RunTool(glob, t.ctx(), Json{{"pattern", (t.ws() / "d" / "*.txt").string()}});
  EXPECT_EQ(out.content, "d/deep.txt\n");
  out = RunTool(glob, t.ctx(), Json{{"pattern", "nothing/**/*.x"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_NE(out.content.find("No files found"), std::string::npos);
}

TEST(LsToolTest, TreeWithIgnores) {
  TempWorkspace t;
  t.Write("src/main.cc", "");
  t.Write("src/util/a.h", "");
  t.Write("README.md", "");
  t.Write("node_modules/x/index.js", "");
  t.Write("debug.log", "");
  t.Write(".gitignore", "*.log\n");
  t.Write(".git/HEAD", "");
  LsTool ls;
  auto out = RunTool(ls, t.ctx(), Json{{"ignore", Json::array({"node_modules"})}});
  EXPECT_EQ(out.content, t.ws().string() +
                             "/\n  .gitignore\n  README.md\n  src/\n    main.cc\n    util/\n"
                             "      a.h\n");
  out = RunTool(ls, t.ctx(), Json{{"path", "src"}});
  EXPECT_EQ(out.content, "src/\n  main.cc\n  util/\n    a.h\n");
  LsTool tiny(2);
  out = RunTool(tiny, t.ctx(), Json{{"path", "src"}});
  EXPECT_NE(out.content.find("Listing stopped after 2 entries"), std::string::npos);
}

}  // namespace
}  // namespace agentloop::tools
