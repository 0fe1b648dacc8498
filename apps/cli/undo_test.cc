#include "undo.h"

#include <unistd.h>

#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "base/diff.h"

namespace agentloop::cli {
namespace {

std::string Diff(const std::string& before, const std::string& after, bool created = false) {
  return UnifiedDiff(before, after, created ? "/dev/null" : "a/f.txt", "b/f.txt");
}

TEST(ReverseDiffTest, RestoresTheTextBeforeEveryKindOfChange) {
  std::string many;
  for (int i = 0; i < 40; ++i) many += "line " + std::to_string(i) + "\n";
  std::string many_changed = many;
  many_changed.replace(many_changed.find("line 3\n"), 7, "LINE three\nextra\n");
  many_changed.replace(many_changed.find("line 30\n"), 8, "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a\nb\nc\n", "a\nB\nc\n"},
      {"a\nb\nc", "a\nb\nc\n"},  // a newline added at the end
      {"a\nb\nc\n", "a\nb\nc"},  // and removed
      {"a\nb", "a\nx"},          // no newline on either side
      {"", "new file\n"},        // created
      {"x\ny\nz\n", ""},         // emptied
      {"-- a\n--- b\n+++ c\n", "-- a\n--- B\n+++ c\n"},
      {many, many_changed},  // two hunks
  };
  for (const auto& [before, after] : cases) {
    std::string d = Diff(before, after, before.empty());
    Result<std::string> back = ReverseDiff(after, d);
    ASSERT_TRUE(back.ok()) << back.error().ToString() << "\n" << d;
    EXPECT_EQ(*back, before) << d;
  }
}

TEST(ReverseDiffTest, RefusesAFileChangedSinceOrADiffThatCannotBeReversed) {
  std::string d = Diff("a\nb\nc\n", "a\nB\nc\n");
  Result<std::string> changed = ReverseDiff("a\nB2\nc\n", d);
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(changed.error().message().find("changed since"), std::string::npos);
  EXPECT_FALSE(ReverseDiff("a\n", d).ok());  // the region is gone
  Result<std::string> cut = ReverseDiff("a\nB\nc\n", d + "... 12 more bytes left out\n");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("cut"), std::string::npos);
  EXPECT_FALSE(ReverseDiff("a\n\xEF\xBF\xBD\n", Diff("a\n\xFF\n", "a\n\xEF\xBF\xBD\n")).ok());
  EXPECT_EQ(ReverseDiff("x", "not a diff").error().code(), Code::kInvalidArgument);
}

class RevertChangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/al_undo_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    ws_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(ws_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(ws_ / name, std::ios::binary) << text;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(ws_ / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::filesystem::path ws_;
};

TEST_F(RevertChangeTest, RewritesAnEditedFileAndRemovesACreatedOne) {
  Write("f.txt", "a\nB\nc\n");
  FileChange edit{"t1", "edit", "f.txt", false, Diff("a\nb\nc\n", "a\nB\nc\n")};
  Result<std::string> shown = RevertChange(edit, ws_);
  ASSERT_TRUE(shown.ok()) << shown.error().ToString();
  EXPECT_EQ(Read("f.txt"), "a\nb\nc\n");
  EXPECT_NE(shown->find("-B\n+b\n"), std::string::npos) << *shown;
  // Reverting it again finds the file changed (back as it was).
  EXPECT_FALSE(RevertChange(edit, ws_).ok());

  Write("new.txt", "hello\n");
  FileChange created{"t2", "write", "new.txt", true,
                     UnifiedDiff("", "hello\n", "/dev/null", "b/new.txt")};
  ASSERT_TRUE(RevertChange(created, ws_).ok());
  EXPECT_FALSE(std::filesystem::exists(ws_ / "new.txt"));
}

TEST_F(RevertChangeTest, RefusesAPathOutsideTheWorkspace) {
  FileChange out{"t1", "write", "../outside.txt", false, Diff("a\n", "b\n")};
  Result<std::string> r = RevertChange(out, ws_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kPermissionDenied);
  // Nor through a symbolic link put there since.
  std::filesystem::create_symlink("/etc/hostname", ws_ / "link.txt");
  FileChange linked{"t2", "write", "link.txt", false, Diff("a\n", "b\n")};
  EXPECT_EQ(RevertChange(linked, ws_).error().code(), Code::kPermissionDenied);
}

TEST(FileChangesTest, ReadsTheDiffsOfSuccessfulResultsInOrder) {
  Message call = Message::Assistant("");
  call.content.push_back(ContentBlock::ToolUse("t1", "edit", Json::object()));
  call.content.push_back(ContentBlock::ToolUse("t2", "write", Json::object()));
  Message results;
  results.role = Role::kUser;
  ContentBlock ok = ContentBlock::ToolResult("t1", "Edited", false);
  ok.meta = Json{{"details", {{"path", "a.txt"}, {"diff", "@@ -1 +1 @@\n-a\n+b\n"}}}};
  ContentBlock failed = ContentBlock::ToolResult("t2", "no", true);
  failed.meta = ok.meta;
  results.content = {ok, failed};
  std::vector<Message> h = {call, results};
  std::vector<FileChange> c = FileChanges(h);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].tool_use_id, "t1");
  EXPECT_EQ(c[0].tool, "edit");
  EXPECT_EQ(c[0].path, "a.txt");
  EXPECT_FALSE(c[0].created);
}

}  // namespace
}  // namespace agentloop::cli
