#include <algorithm>

#include <gtest/gtest.h>

#include "tools/search.h"
#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

using testing::RunTool;
using testing::TempWorkspace;

class GrepToolTest : public ::testing::Test {
 protected:
  ToolOutput Grep(Json in) { return RunTool(grep_, t_.ctx(), std::move(in)); }
  TempWorkspace t_;
  GrepTool grep_;
};

TEST_F(GrepToolTest, FilesWithMatchesSortedByPath) {
  t_.Write("b.txt", "needle\n");
  t_.Write("a/z.txt", "a needle here\n");
  t_.Write("a-b/y.txt", "needle\n");
  t_.Write("c.txt", "nothing\n");
  auto out = Grep(Json{{"pattern", "needle"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.content, "a/z.txt\na-b/y.txt\nb.txt\n");
  out = Grep(Json{{"pattern", "absent"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.content, "No matches found.");
}

TEST_F(GrepToolTest, ContentCountAndContext) {
  t_.Write("f.txt", "one\ntwo\nthree needle\nfour\nfive\nsix\nseven needle\neight\n");
  auto out = Grep(Json{{"pattern", "needle"}, {"output_mode", "content"}});
  EXPECT_EQ(out.content, "f.txt:3:three needle\nf.txt:7:seven needle\n");
  out = Grep(Json{{"pattern", "needle"}, {"output_mode", "count"}});
  EXPECT_EQ(out.content, "f.txt:2\n");
  out = Grep(Json{{"pattern", "needle"}, {"output_mode", "content"}, {"context", 1}});
  EXPECT_EQ(out.content,
            "f.txt-2-two\nf.txt:3:three needle\nf.txt-4-four\n--\n"
            "f.txt-6-six\nf.txt:7:seven needle\nf.txt-8-eight\n");
  out = Grep(Json{{"pattern", "needle"}, {"output_mode", "content"}, {"context", 2}});
  EXPECT_EQ(out.content,
            "f.txt-1-one\nf.txt-2-two\nf.txt:3:three needle\nf.txt-4-four\nf.txt-5-five\n"
            "f.txt-6-six\nf.txt:7:seven needle\nf.txt-8-eight\n");
}

TEST_F(GrepToolTest, RegexCaseInsensitiveAndMultiline) {
  t_.Write("f.cc", "int Foo();\nint foo_bar();\nvoid FOO();\nstruct S {\n  int x;\n};\n");
  auto out = Grep(Json{{"pattern", "foo"}, {"case_insensitive", true}, {"output_mode", "count"}});
  EXPECT_EQ(out.content, "f.cc:3\n");
  out = Grep(Json{{"pattern", "^int [a-z_]+\\("}, {"output_mode", "content"}});
  EXPECT_EQ(out.content, "f.cc:2:int foo_bar();\n");
  // Without multiline a match never crosses a line, even with \s or [^x].
  out = Grep(Json{{"pattern", "S \\{\\s+int"}, {"output_mode", "content"}});
  EXPECT_EQ(out.content, "No matches found.");
  out = Grep(Json{{"pattern", "S \\{.*int x"}, {"output_mode", "content"}, {"multiline", true}});
  EXPECT_EQ(out.content, "f.cc:4:struct S {\nf.cc:5:  int x;\n");
  out = Grep(Json{{"pattern", "foo("}});
  EXPECT_TRUE(out.is_error);
  EXPECT_NE(out.content.find("invalid regular expression"), std::string::npos);
}

TEST_F(GrepToolTest, CatastrophicPatternCompletesWithTheRightAnswer) {
  // (a+)+$ backtracks exponentially in backtracking engines on "aaaa...b".
  std::string line(50000, 'a');
  t_.Write("evil.txt", line + "b\n" + "aaaa\n");
  auto out = Grep(Json{{"pattern", "(a+)+$"}, {"output_mode", "content"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.content, "evil.txt:2:aaaa\n");
  out = Grep(Json{{"pattern", "(x+x+)+y"}, {"output_mode", "count"}});
  EXPECT_EQ(out.content, "No matches found.");
}

TEST_F(GrepToolTest, SkipsBinaryHiddenAndIgnoredByDefault) {
  t_.Write("text.txt", "needle\n");
  t_.Write("bin.dat", std::string("needle\0\0binary", 14));
  t_.Write(".hidden/h.txt", "needle\n");
  t_.Write(".dotfile", "needle\n");
  t_.Write(".gitignore", "build/\n*.log\n");
  t_.Write("build/out.txt", "needle\n");
  t_.Write("x.log", "needle\n");
  t_.Write(".git/config", "needle\n");
  auto out = Grep(Json{{"pattern", "needle"}});
  EXPECT_EQ(out.content, "text.txt\n");
  // Explicit paths are searched even when ignored, hidden or binary.
  out = Grep(Json{{"pattern", "needle"}, {"path", "build"}});
  EXPECT_EQ(out.content, "build/out.txt\n");
  out = Grep(Json{{"pattern", "needle"}, {"path", "bin.dat"}, {"output_mode", "content"}});
  EXPECT_EQ(out.content, "Binary file bin.dat matches\n");
}

TEST_F(GrepToolTest, CrlfAndNonUtf8Files) {
  t_.Write("win.txt", "first\r\nneedle here\r\nlast\r\n");
  t_.Write("latin.txt", "caf\xe9 needle\n");
  auto out = Grep(Json{{"pattern", "needle"}, {"output_mode", "content"}});
  EXPECT_EQ(out.content, "latin.txt:1:caf\xef\xbf\xbd needle\nwin.txt:2:needle here\n");
  out = Grep(Json{{"pattern", "here$"}, {"output_mode", "content"}});
  // '$' matches before '\n' only, as in ripgrep without --crlf.
  EXPECT_EQ(out.content, "No matches found.");
}

TEST_F(GrepToolTest, GlobTypeAndPathFilters) {
  t_.Write("src/a.cc", "needle\n");
  t_.Write("src/a.h", "needle\n");
  t_.Write("src/b.py", "needle\n");
  t_.Write("docs/c.md", "needle\n");
  auto out = Grep(Json{{"pattern", "needle"}, {"type", "cc"}});
  EXPECT_EQ(out.content, "src/a.cc\nsrc/a.h\n");
  out = Grep(Json{{"pattern", "needle"}, {"glob", "*.{py,md}"}});
  EXPECT_EQ(out.content, "docs/c.md\nsrc/b.py\n");
  out = Grep(Json{{"pattern", "needle"}, {"glob", "src/*.h"}});
  EXPECT_EQ(out.content, "src/a.h\n");
  out = Grep(Json{{"pattern", "needle"}, {"path", "src"}, {"glob", "*.py"}});
  EXPECT_EQ(out.content, "src/b.py\n");
  out = Grep(Json{{"pattern", "needle"}, {"type", "cobol"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_NE(out.content.find("known types"), std::string::npos);
}

TEST_F(GrepToolTest, HeadLimitAndOutputCapSayWhatWasLeftOut) {
  for (int i = 0; i < 30; ++i) t_.Write("f" + std::to_string(100 + i) + ".txt", "needle\n");
  auto out = Grep(Json{{"pattern", "needle"}, {"head_limit", 5}});
  EXPECT_NE(out.content.find("f104.txt\n\n[Showing the first 5 of 30 files"), std::string::npos)
      << out.content;
  EXPECT_NE(out.content.find("25 more not shown"), std::string::npos);
  GrepToolOptions small;
  small.output_cap_chars = 100;
  GrepTool capped(small);
  out = RunTool(capped, t_.ctx(), Json{{"pattern", "needle"}});
  EXPECT_NE(
      out.content.find("[Output truncated at 100 characters: showing 11 of 30 files; 19 more"),
      std::string::npos)
      << out.content;
}

TEST_F(GrepToolTest, HugeFileIsSearched) {
  {
    std::ofstream f(t_.ws() / "huge.txt", std::ios::binary);
    std::string line(127, 'x');
    line += '\n';
    for (int i = 0; i < 600000; ++i) f << line;  // 76 MB: above the mmap threshold
    f << "the needle\n";
  }
  auto out = Grep(Json{{"pattern", "needle"}, {"output_mode", "content"}});
  EXPECT_EQ(out.content, "huge.txt:600001:the needle\n");
}

TEST_F(GrepToolTest, CancelledWalkReportsCancellation) {
  t_.Write("a/b.txt", "needle\n");
  std::stop_source stop;
  stop.request_stop();
  t_.ctx().stop = stop.get_token();
  auto out = Grep(Json{{"pattern", "needle"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_EQ(out.content, "grep was cancelled");
}

TEST(MatcherTest, TheBuildScansWithThePathItWasBuiltFor) {
#if defined(AL_PORTABLE_SEARCH) || !defined(__x86_64__)
  EXPECT_EQ(LiteralScanName(), "portable");
#else
  EXPECT_NE(LiteralScanName(), "portable");
#endif
}

TEST(MatcherTest, CountNewlinesAcrossBlockBoundaries) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += std::string(static_cast<size_t>(i % 7), 'x') + "\n";
  for (size_t n = 0; n <= text.size(); ++n) {
    EXPECT_EQ(CountNewlines(text.data(), n),
              static_cast<size_t>(std::count(text.begin(), text.begin() + n, '\n')));
  }
}

TEST(MatcherTest, LiteralAndRegexAgreeOnEveryOffset) {
  // The SIMD literal scan must find matches at any alignment and at the end.
  for (bool ci : {false, true}) {
    auto lit = Matcher::Create("NeedLe", ci, false);
    auto re = Matcher::Create(ci ? "(?i)Need[L]e" : "Need[L]e", false, false);
    ASSERT_TRUE(lit.ok() && re.ok());
    EXPECT_TRUE((*lit)->is_literal());
    EXPECT_FALSE((*re)->is_literal());
    for (size_t pad = 0; pad < 80; ++pad) {
      std::string buf(pad, 'e');
      buf += ci ? "nEEDle" : "NeedLe";
      buf += std::string(pad % 7, 'L');
      size_t b1, e1, b2, e2;
      bool f1 = (*lit)->Find(buf.data(), buf.size(), 0, &b1, &e1);
      bool f2 = (*re)->Find(buf.data(), buf.size(), 0, &b2, &e2);
      ASSERT_EQ(f1, f2) << pad;
      ASSERT_TRUE(f1);
      EXPECT_EQ(b1, pad);
      EXPECT_EQ(b1, b2);
      EXPECT_EQ(e1, e2);
    }
  }
  auto esc = Matcher::Create("a\\.b\\(", false, false);
  ASSERT_TRUE(esc.ok());
  EXPECT_TRUE((*esc)->is_literal());
  std::string s = "axb( a.b(";
  size_t b, e;
  ASSERT_TRUE((*esc)->Find(s.data(), s.size(), 0, &b, &e));
  EXPECT_EQ(b, 5u);
}

}  // namespace
}  // namespace agentloop::tools
