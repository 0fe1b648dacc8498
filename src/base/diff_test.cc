#include "base/diff.h"

#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

namespace agentloop {
namespace {

// Applies a unified diff to `before` strictly (every context and removed
// line must match), so a wrong hunk header or line fails the test.
std::string Apply(const std::string& before, const std::string& diff) {
  std::vector<std::string> a;
  for (size_t s = 0; s < before.size();) {
    size_t nl = before.find('\n', s);
    size_t e = nl == std::string::npos ? before.size() : nl + 1;
    a.push_back(before.substr(s, e - s));
    s = e;
  }
  std::vector<std::string> lines;
  std::istringstream in(diff);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  size_t next = 0;  // next line of `a` not yet copied
  std::string* last = nullptr;
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("@@ -", 0) == 0) {
      size_t start = std::stoul(l.substr(4));
      size_t comma = l.find(',');
      size_t space = l.find(' ', 4);
      size_t count = comma < space ? std::stoul(l.substr(comma + 1)) : 1;
      size_t first = count == 0 ? start : start - 1;
      EXPECT_GE(first, next) << l;
      while (next < first) out += a[next++];
      continue;
    }
    if (l == "\\ No newline at end of file") {
      EXPECT_NE(last, nullptr);
      if (last) last->pop_back();
      continue;
    }
    std::string text = l.substr(1) + "\n";
    if (l[0] == ' ' || l[0] == '-') {
      EXPECT_LT(next, a.size());
      if (next >= a.size()) return "";
      std::string want = a[next];
      if (want.back() != '\n') want += '\n';  // the marker line follows
      EXPECT_EQ(text, want) << "line " << next;
      ++next;
    }
    if (l[0] == ' ' || l[0] == '+') {
      out += text;
      last = &out;
    } else {
      last = nullptr;
      static std::string removed;
      removed = text;
      last = &removed;  // a marker after a removed line changes nothing in `out`
    }
  }
  while (next < a.size()) out += a[next++];
  return out;
}

TEST(UnifiedDiffTest, EqualTextsGiveNothing) {
  EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "a/f", "b/f"), "");
  EXPECT_EQ(UnifiedDiff("", "", "a/f", "b/f"), "");
}

TEST(UnifiedDiffTest, OneChangedLineWithContextAsDiffPrintsIt) {
  std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n";
  std::string after = "1\n2\n3\n4\nfive\n6\n7\n8\n";
  EXPECT_EQ(UnifiedDiff(before, after, "a/f.txt", "b/f.txt"),
            "--- a/f.txt\n+++ b/f.txt\n"
            "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(UnifiedDiffTest, NewFileAndDeletedContent) {
  EXPECT_EQ(UnifiedDiff("", "x\ny\n", "/dev/null", "b/new"),
            "--- /dev/null\n+++ b/new\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  EXPECT_EQ(UnifiedDiff("x\n", "", "a/old", "b/old"), "--- a/old\n+++ b/old\n@@ -1 +0,0 @@\n-x\n");
}

TEST(UnifiedDiffTest, MissingFinalNewlineIsMarked) {
  EXPECT_EQ(UnifiedDiff("a\nb", "a\nb\n", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
}

TEST(UnifiedDiffTest, DistantChangesMakeSeparateHunks) {
  std::string before, after;
  for (int i = 1; i <= 20; ++i) {
    before += std::to_string(i) + "\n";
    after += (i == 2 || i == 18 ? "x" : std::to_string(i)) + "\n";
  }
  std::string d = UnifiedDiff(before, after, "a/f", "b/f");
  EXPECT_NE(d.find("@@ -1,5 +1,5 @@\n"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -15,6 +15,6 @@\n"), std::string::npos) << d;
  EXPECT_EQ(Apply(before, d), after);
}

TEST(UnifiedDiffTest, MinimalScriptKeepsTheCommonLines) {
  // Myers finds the 2-edit script; a naive replace of the middle takes 6.
  std::string d = UnifiedDiff("a\nb\nc\nd\n", "x\na\nb\nc\n", "a/f", "b/f");
  EXPECT_EQ(d, "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n+x\n a\n b\n c\n-d\n");
}

TEST(UnifiedDiffTest, RandomEditsRoundTrip) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::string before, after;
    int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      std::string line = std::string(1, static_cast<char>('a' + rng() % 4));
      before += line + "\n";
      int r = static_cast<int>(rng() % 6);
      if (r == 0) continue;  // removed
      if (r == 1) after += "new" + std::to_string(rng() % 3) + "\n";
      after += line + "\n";
    }
    if (rng() % 3 == 0 && !after.empty()) after.pop_back();
    if (rng() % 3 == 0 && !before.empty()) before.pop_back();
    for (size_t max_edits : {size_t{2000}, size_t{2}}) {
      UnifiedDiffOptions o;
      o.context = static_cast<int>(rng() % 4);
      o.max_edits = max_edits;
      std::string d = UnifiedDiff(before, after, "a/f", "b/f", o);
      if (before == after) {
        EXPECT_EQ(d, "");
        continue;
      }
      EXPECT_EQ(Apply(before, d), after) << "before:\n" << before << "after:\n" << after << d;
    }
  }
}

TEST(UnifiedDiffTest, LongOutputIsCutWithANote) {
  std::string after;
  for (int i = 0; i < 1000; ++i) after += "line " + std::to_string(i) + "\n";
  UnifiedDiffOptions o;
  o.max_bytes = 200;
  std::string d = UnifiedDiff("", after, "/dev/null", "b/f", o);
  EXPECT_LE(d.size(), 260u);
  EXPECT_NE(d.find("... (diff cut: "), std::string::npos);
  EXPECT_EQ(d.back(), '\n');
}

}  // namespace
}  // namespace agentloop
