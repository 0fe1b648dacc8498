#include "tools/paths.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

using testing::RunTool;
using testing::TempWorkspace;

TEST(ResolvePathTest, RelativeAndAbsoluteInsideAreAccepted) {
  TempWorkspace t;
  t.Write("a/b.txt", "x");
  auto rel = ResolvePath(t.ctx(), "a/b.txt", Access::kRead);
  ASSERT_TRUE(rel.ok()) << rel.error().message();
  EXPECT_EQ(rel->abs, (t.ws() / "a/b.txt").string());
  EXPECT_EQ(rel->display, "a/b.txt");
  EXPECT_TRUE(rel->exists);
  auto abs = ResolvePath(t.ctx(), (t.ws() / "a/./b.txt").string(), Access::kWrite);
  ASSERT_TRUE(abs.ok());
  EXPECT_EQ(abs->display, "a/b.txt");
  auto inner_dotdot = ResolvePath(t.ctx(), "a/../a/b.txt", Access::kRead);
  ASSERT_TRUE(inner_dotdot.ok());
  EXPECT_EQ(inner_dotdot->display, "a/b.txt");
  auto missing = ResolvePath(t.ctx(), "new/dir/file.txt", Access::kWrite);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->exists);
  EXPECT_EQ(missing->display, "new/dir/file.txt");
}

// The hostile inputs, each with the words its refusal must contain.
struct HostileCase {
  const char* name;
  std::string path;
  Code code;
  const char* reason;
};

TEST(ResolvePathTest, HostilePathsAreRefusedWithAReason) {
  TempWorkspace t;
  t.Write(t.outside() / "secret.txt", "secret");
  std::filesystem::create_symlink(t.outside(), t.ws() / "link_out");
  std::filesystem::create_symlink(t.outside() / "secret.txt", t.ws() / "file_link_out");
  std::filesystem::create_symlink("loop_b", t.ws() / "loop_a");
  std::filesystem::create_symlink("loop_a", t.ws() / "loop_b");
  std::filesystem::create_symlink("..", t.ws() / "up");
  t.Write("plain.txt", "x");

  const HostileCase cases[] = {
      {"dotdot", "../outside/secret.txt", Code::kPermissionDenied, "escapes the workspace"},
      {"deep dotdot", "a/b/../../../outside", Code::kPermissionDenied, "escapes the workspace"},
      {"absolute elsewhere", "/etc/passwd", Code::kPermissionDenied, "outside the workspace"},
      {"symlinked dir out", "link_out/secret.txt", Code::kPermissionDenied, "symbolic link"},
      {"symlinked file out", "file_link_out", Code::kPermissionDenied, "symbolic link"},
      {"new file via dir link", "link_out/new.txt", Code::kPermissionDenied, "symbolic link"},
      {"symlink to parent", "up/outside/secret.txt", Code::kPermissionDenied, "symbolic link"},
      {"symlink loop", "loop_a", Code::kInvalidArgument, "symlink loop"},
      {"through a file", "plain.txt/x", Code::kInvalidArgument, "not a directory"},
      {"empty", "", Code::kInvalidArgument, "empty"},
      {"nul byte", std::string("a\0b", 3), Code::kInvalidArgument, "NUL"},
  };
  for (const auto& c : cases) {
    for (Access access : {Access::kRead, Access::kWrite}) {
      auto r = ResolvePath(t.ctx(), c.path, access);
      ASSERT_FALSE(r.ok()) << c.name;
      EXPECT_EQ(r.error().code(), c.code) << c.name << ": " << r.error().message();
      EXPECT_NE(r.error().message().find(c.reason), std::string::npos)
          << c.name << ": " << r.error().message();
    }
  }
}

TEST(ResolvePathTest, ExtraReadRootsAreReadOnly) {
  TempWorkspace t;
  t.Write(t.outside() / "skill.md", "# skill");
  t.ctx().extra_read_roots.push_back(t.outside());
  auto read = ResolvePath(t.ctx(), (t.outside() / "skill.md").string(), Access::kRead);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->in_workspace);
  EXPECT_EQ(read->display, (t.outside() / "skill.md").string());
  auto write = ResolvePath(t.ctx(), (t.outside() / "skill.md").string(), Access::kWrite);
  EXPECT_FALSE(write.ok());

  ReadTool tool;
  auto out = RunTool(tool, t.ctx(), Json{{"file_path", (t.outside() / "skill.md").string()}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_NE(out.content.find("# skill"), std::string::npos);
}

TEST(ResolvePathTest, SymlinkInsidePointingInsideIsFollowed) {
  TempWorkspace t;
  t.Write("real/f.txt", "x");
  std::filesystem::create_symlink(t.ws() / "real", t.ws() / "alias");
  auto r = ResolvePath(t.ctx(), "alias/f.txt", Access::kWrite);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->display, "real/f.txt");
}

TEST(ToolsConfinementTest, EveryToolRefusesOutsidePaths) {
  TempWorkspace t;
  t.Write(t.outside() / "secret.txt", "secret");
  std::filesystem::create_symlink(t.outside(), t.ws() / "link_out");
  ReadTool read;
  WriteTool write;
  EditTool edit;
  GrepTool grep;
  GlobTool glob;
  LsTool ls;
  std::vector<std::pair<Tool*, Json>> calls = {
      {&read, {{"file_path", "../outside/secret.txt"}}},
      {&read, {{"file_path", "link_out/secret.txt"}}},
      {&write, {{"file_path", "../outside/new.txt"}, {"content", "x"}}},
      {&write, {{"file_path", "link_out/new.txt"}, {"content", "x"}}},
      {&edit, {{"file_path", "link_out/secret.txt"}, {"old_string", "s"}, {"new_string", "t"}}},
      {&grep, {{"pattern", "secret"}, {"path", "../outside"}}},
      {&grep, {{"pattern", "secret"}, {"path", "link_out"}}},
      {&glob, {{"pattern", "*.txt"}, {"path", "link_out"}}},
      {&glob, {{"pattern", (t.outside() / "*.txt").string()}}},
      {&ls, {{"path", "/"}}},
  };
  for (auto& [tool, input] : calls) {
    ToolOutput out = RunTool(*tool, t.ctx(), input);
    EXPECT_TRUE(out.is_error) << tool->spec().name << " " << input.dump() << " -> " << out.content;
    EXPECT_NE(out.content.find("denied"), std::string::npos) << out.content;
  }
  EXPECT_FALSE(std::filesystem::exists(t.outside() / "new.txt"));
  EXPECT_EQ(t.Slurp(t.outside() / "secret.txt"), "secret");
}

TEST(ToolsConfinementTest, WalksDoNotFollowSymlinksOut) {
  TempWorkspace t;
  t.Write(t.outside() / "secret.txt", "needle");
  t.Write("inside.txt", "needle");
  std::filesystem::create_symlink(t.outside(), t.ws() / "link_out");
  std::filesystem::create_symlink(t.outside() / "secret.txt", t.ws() / "file_link");
  GrepTool grep;
  auto out = RunTool(grep, t.ctx(), Json{{"pattern", "needle"}});
  EXPECT_EQ(out.content, "inside.txt\n");
  GlobTool glob;
  out = RunTool(glob, t.ctx(), Json{{"pattern", "**/*.txt"}});
  EXPECT_EQ(out.content, "inside.txt\n");
}

}  // namespace
}  // namespace agentloop::tools
