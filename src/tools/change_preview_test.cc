#include "tools/change_preview.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/test_util.h"

namespace agentloop::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ChangePreviewTest, WriteOverAnExistingFileIsADiffThatReplacesTheFile) {
  testing::TempWorkspace w;
  w.Write("a.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n");
  Result<ChangePreview> p = PreviewChange(
      "write", {{"file_path", "a.txt"}, {"content", "one\ntwo\nthree\nfour\nFIVE\nsix\n"}}, w.ws());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->path, "a.txt");
  EXPECT_FALSE(p->created);
  EXPECT_TRUE(p->replaces_file);
  EXPECT_EQ(p->old_lines, 8u);
  EXPECT_EQ(p->new_lines, 6u);
  // Context lines around the change, and the removed tail.
  EXPECT_EQ(p->diff,
            "--- a/a.txt\n+++ b/a.txt\n@@ -2,7 +2,5 @@\n two\n three\n four\n-five\n+FIVE\n six\n"
            "-seven\n-eight\n");
  EXPECT_EQ(p->Summary(), "replaces the whole file (8 lines) with 6 lines");
  EXPECT_EQ(p->ToJson(), (Json{{"path", "a.txt"}, {"created", false}, {"diff", p->diff}}));
}

TEST(ChangePreviewTest, NewFile) {
  testing::TempWorkspace w;
  Result<ChangePreview> p =
      PreviewChange("write", {{"file_path", "new/b.txt"}, {"content", "x\ny\n"}}, w.ws());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->created);
  EXPECT_FALSE(p->replaces_file);
  EXPECT_EQ(p->diff, "--- /dev/null\n+++ b/new/b.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  EXPECT_EQ(p->Summary(), "(new file, 2 lines)");
  EXPECT_EQ(p->ToJson()["created"], true);
}

TEST(ChangePreviewTest, EditShowsTheChangeInTheFileWithContext) {
  testing::TempWorkspace w;
  w.Write("a.py", "def f():\n    return 1\n\nprint(f())\n");
  Result<ChangePreview> p = PreviewChange(
      "edit", {{"file_path", "a.py"}, {"old_string", "return 1"}, {"new_string", "return 2"}},
      w.ws());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->diff,
            "--- a/a.py\n+++ b/a.py\n@@ -1,4 +1,4 @@\n def f():\n-    return 1\n+    return 2\n"
            " \n print(f())\n");
  // The strings lack a final newline; the file does not: no marker.
  EXPECT_THAT(p->diff, Not(HasSubstr("No newline")));
  EXPECT_FALSE(p->replaces_file);
  EXPECT_EQ(p->Summary(), "");

  w.Write("twice.txt", "x\nx\n");
  Result<ChangePreview> twice = PreviewChange(
      "edit", {{"file_path", "twice.txt"}, {"old_string", "x"}, {"new_string", "y"}}, w.ws());
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->diff, "");
  EXPECT_THAT(twice->note, HasSubstr("more than once"));
  Result<ChangePreview> all = PreviewChange(
      "edit",
      {{"file_path", "twice.txt"}, {"old_string", "x"}, {"new_string", "y"}, {"replace_all", true}},
      w.ws());
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(all->diff, HasSubstr("+y\n+y\n"));
  Result<ChangePreview> missing = PreviewChange(
      "edit", {{"file_path", "a.py"}, {"old_string", "nope"}, {"new_string", "y"}}, w.ws());
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->diff, "");
  EXPECT_THAT(missing->note, HasSubstr("not in a.py"));
}

TEST(ChangePreviewTest, MarksAMissingFinalNewlineOnlyWhereTheFileLacksOne) {
  testing::TempWorkspace w;
  w.Write("n.txt", "a\nb");
  Result<ChangePreview> p = PreviewChange(
      "edit", {{"file_path", "n.txt"}, {"old_string", "a"}, {"new_string", "A"}}, w.ws());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(
      p->diff,
      "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n");
  EXPECT_EQ(p->old_lines, 2u);
}

TEST(ChangePreviewTest, AWithheldFileIsNotRead) {
  testing::TempWorkspace w;
  w.Write(".env", "TOKEN=secret\n");
  ChangePreviewOptions o;
  o.withheld = "the session may not read it (deny read(.env))";
  Result<ChangePreview> p =
      PreviewChange("write", {{"file_path", ".env"}, {"content", "TOKEN=x\n"}}, w.ws(), o);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->diff, "");
  EXPECT_THAT(p->note, HasSubstr("is not shown: the session may not read it"));
  EXPECT_EQ(p->old_lines, 0u);
  EXPECT_THAT(p->ToJson().dump(), Not(HasSubstr("secret")));
  EXPECT_THAT(p->Summary(), Not(HasSubstr("secret")));
}

TEST(ChangePreviewTest, TheDiffIsCutAtTheCap) {
  testing::TempWorkspace w;
  std::string big;
  for (int i = 0; i < 2000; ++i) big += "line " + std::to_string(i) + "\n";
  ChangePreviewOptions o;
  o.max_diff_bytes = 1000;
  Result<ChangePreview> p =
      PreviewChange("write", {{"file_path", "big.txt"}, {"content", big}}, w.ws(), o);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->truncated);
  EXPECT_LE(p->diff.size(), 1100u);
  EXPECT_THAT(p->diff, StartsWith("--- /dev/null\n+++ b/big.txt\n"));
  EXPECT_THAT(p->diff, HasSubstr("... (diff cut: "));
  EXPECT_EQ(p->new_lines, 2000u);
  Result<ChangePreview> whole =
      PreviewChange("write", {{"file_path", "big.txt"}, {"content", big}}, w.ws());
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(whole->truncated);
}

TEST(ChangePreviewTest, NothingOutsideTheWorkspaceIsRead) {
  testing::TempWorkspace w;
  w.Write(w.outside() / "secret.txt", "top secret\n");
  std::filesystem::create_symlink(w.outside() / "secret.txt", w.ws() / "link.txt");
  for (std::string path : {std::string("../outside/secret.txt"),
                           (w.outside() / "secret.txt").string(), std::string("link.txt")}) {
    Result<ChangePreview> p =
        PreviewChange("write", {{"file_path", path}, {"content", "x"}}, w.ws());
    ASSERT_FALSE(p.ok()) << path << ": " << p->diff;
    EXPECT_EQ(p.error().code(), Code::kPermissionDenied) << path;
  }
}

TEST(ChangePreviewTest, OnlyForWriteAndEdit) {
  testing::TempWorkspace w;
  Result<ChangePreview> p = PreviewChange("bash", {{"command", "ls"}}, w.ws());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(p.error().message(), HasSubstr("'bash'"));
  EXPECT_FALSE(PreviewChange("write", {{"content", "x"}}, w.ws()).ok());
}

}  // namespace
}  // namespace agentloop::tools
