#include "learning/skills.h"

#include <gtest/gtest.h>

#include "learning/learning_tools.h"
#include "learning/listing.h"
#include "learning/paths.h"
#include "learning/test_util.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace {

using testing::TempDir;
using testing::WriteFile;
namespace fs = std::filesystem;

class SkillsTest : public ::testing::Test {
 protected:
  fs::path user() const { return tmp_.path() / "cfg" / "skills"; }
  fs::path ws() const { return tmp_.path() / "ws" / ".agentloop" / "skills"; }
  SkillStore store() const { return SkillStore(user(), ws()); }
  void Add(const fs::path& dir, const std::string& name, const std::string& description,
           const std::string& body = "Do it.") {
    WriteFile(dir / name / "SKILL.md",
              "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body + "\n");
  }
  TempDir tmp_;
};

TEST(SubstituteTest, ArgumentsAndPositionals) {
  EXPECT_EQ(SubstituteArguments("Fix $ARGUMENTS now", "issue 42"), "Fix issue 42 now");
  EXPECT_EQ(SubstituteArguments("a=$1 b=$2 c=$3 all=$ARGUMENTS", "x \"y z\""),
            "a=x b=y z c= all=x \"y z\"");
  EXPECT_EQ(SubstituteArguments("$10 $0 $", "a b c d e f g h i j"), "j $0 $");
  EXPECT_EQ(SubstituteArguments("No placeholders.", "extra"),
            "No placeholders.\n\nARGUMENTS: extra");
  EXPECT_EQ(SubstituteArguments("No placeholders.", "  "), "No placeholders.");
  EXPECT_EQ(SubstituteArguments("Cost: $5", ""), "Cost: ");
}

TEST_F(SkillsTest, ListWorkspaceHidesUserAndSkipsInvalid) {
  Add(user(), "deploy", "User deploy");
  Add(user(), "lint", "Run the linters");
  Add(ws(), "deploy", "Workspace deploy");
  WriteFile(ws() / "broken" / "SKILL.md", "no front matter");
  WriteFile(ws() / "noname" / "SKILL.md", "---\ndescription: x\n---\nbody\n");  // folder name used
  WriteFile(ws() / "Bad" / "SKILL.md", "---\nname: Bad Name\ndescription: x\n---\nbody\n");
  fs::create_directories(ws() / "empty-folder");
  std::vector<std::string> warnings;
  auto list = store().List(&warnings);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "deploy");
  EXPECT_EQ(list[0].description, "Workspace deploy");
  EXPECT_EQ(list[0].scope, Scope::kWorkspace);
  EXPECT_EQ(list[1].name, "noname");
  EXPECT_EQ(list[2].name, "lint");
  EXPECT_EQ(warnings.size(), 3u);  // broken, Bad, hidden user deploy
}

TEST_F(SkillsTest, IndexWithinTokenBudget) {
  EXPECT_EQ(store().Index(), "");
  Add(ws(), "alpha", "First skill");
  Add(ws(), "beta", "Second\tskill\x01 with <tags>");
  std::string header = "Available skills:\n";
  std::string a = "- alpha: First skill\n";
  std::string b = "- beta: Second skill with &lt;tags>\n";
  EXPECT_EQ(store().Index(), header + a + b);
  // Budget in tokens (4 characters each): exactly header + a fits.
  size_t chars = header.size() + a.size();
  ASSERT_EQ(chars % 4, 3u);
  EXPECT_EQ(store().Index(static_cast<int>(chars / 4)), "");  // 4*floor < chars
  EXPECT_EQ(store().Index(static_cast<int>(chars / 4) + 1), header + a);
  EXPECT_EQ(store().Index(0), "");
  // The default budget of 200 tokens holds at most 800 characters.
  for (int i = 0; i < 60; ++i) {
    Add(ws(), "skill-" + std::to_string(100 + i), "A skill with a moderately long description");
  }
  std::string idx = store().Index();
  EXPECT_LE(idx.size(), 800u);
  EXPECT_GT(idx.size(), 700u);
  EXPECT_TRUE(idx.starts_with(header));
}

TEST_F(SkillsTest, UsedSkillsComeFirstInTheIndex) {
  Add(ws(), "alpha", "A");
  Add(ws(), "zulu", "Z");
  ASSERT_TRUE(RecordUseIn(ws(), "zulu", "t", 1).ok());
  EXPECT_EQ(store().Index(), "Available skills:\n- zulu: Z\n- alpha: A\n");
}

TEST_F(SkillsTest, SkillToolSubstitutesAndReportsUse) {
  Add(ws(), "fix-issue", "Fix a GitHub issue", "Read issue $1 and fix it: $ARGUMENTS");
  WriteFile(ws() / "fix-issue" / "scripts" / "helper.sh", "echo hi\n");
  LearningDirs dirs;
  dirs.user_skills = user();
  auto tool = MakeSkillTool(dirs);
  EXPECT_FALSE(tool->spec().mutates);
  ToolContext ctx;
  ctx.workspace = tmp_.path() / "ws";
  auto out =
      tool->Run({"c1", "skill", Json{{"skill", "fix-issue"}, {"args", "123 urgently"}}}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->is_error);
  EXPECT_TRUE(out->content.starts_with("Read issue 123 and fix it: 123 urgently")) << out->content;
  EXPECT_NE(out->content.find("scripts/helper.sh"), std::string::npos);
  EXPECT_EQ(out->details[kUseDetailsKey][0]["kind"], "skill");
  EXPECT_EQ(out->details[kUseDetailsKey][0]["store"], ws().string());

  out = tool->Run({"c2", "skill", Json{{"skill", "nope"}}}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->is_error);
  EXPECT_NE(out->content.find("available: fix-issue"), std::string::npos);
}

TEST_F(SkillsTest, SynthesizeSkillWritesAFolderOnce) {
  LearningDirs dirs;
  dirs.user_skills = user();
  auto tool = MakeSynthesizeSkillTool(dirs);
  EXPECT_TRUE(tool->spec().mutates);
  ToolContext ctx;
  ctx.workspace = tmp_.path() / "ws";
  Json in = {{"name", "release"}, {"description", "Cut a release"}, {"body", "1. tag $1\n2. push"}};
  ASSERT_TRUE(ValidateAgainstSchema(in, tool->spec().input_schema).ok());
  auto out = tool->Run({"c1", "synthesize_skill", in}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->is_error) << out->content;
  ASSERT_TRUE(fs::exists(user() / "release" / "SKILL.md"));  // default scope: user
  Result<Skill> s = store().Get("release");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->body, "1. tag $1\n2. push");

  out = tool->Run({"c2", "synthesize_skill", in}, ctx);
  EXPECT_TRUE(out->is_error);
  EXPECT_NE(out->content.find("already exists"), std::string::npos);
  in["overwrite"] = true;
  in["body"] = "new";
  out = tool->Run({"c3", "synthesize_skill", in}, ctx);
  EXPECT_FALSE(out->is_error);
  EXPECT_EQ(store().Get("release")->body, "new");

  Json bad = {{"name", "../escape"}, {"description", "x"}, {"body", "y"}};
  out = tool->Run({"c4", "synthesize_skill", bad}, ctx);
  EXPECT_TRUE(out->is_error);
  EXPECT_FALSE(fs::exists(user().parent_path() / "escape"));
  Json ws_scope = {{"name", "local"}, {"description", "x"}, {"body", "y"}, {"scope", "workspace"}};
  out = tool->Run({"c5", "synthesize_skill", ws_scope}, ctx);
  EXPECT_FALSE(out->is_error);
  EXPECT_TRUE(fs::exists(ws() / "local" / "SKILL.md"));
}

TEST_F(SkillsTest, SkillRowsListing) {
  Add(ws(), "alpha", "A");
  ASSERT_TRUE(RecordUseIn(ws(), "alpha", "t", 1714564800000).ok());
  ASSERT_TRUE(RecordOutcomeIn(ws(), "alpha", "t", true).ok());
  auto rows = SkillRows(store());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].uses, 1);
  EXPECT_EQ(rows[0].completed, 1);
  EXPECT_NE(FormatUsageRows(rows, "skill").find("1/1 100%"), std::string::npos);
  EXPECT_EQ(FormatUsageRows({}, "skill"), "No skills.\n");
}

TEST(SafeExtraReadRootsTest, FoldersLinkedOutOfTheirPlaceAreDropped) {
  TempDir t;
  fs::path ws = t.path() / "ws";
  fs::path config = t.path() / "config";
  fs::path data = t.path() / "data";
  fs::create_directories(ws / ".agentloop");
  fs::create_directories(config / "skills");
  fs::create_directories(data);
  fs::create_symlink("/", ws / ".agentloop" / "skills");
  LearningDirs dirs = MakeLearningDirs(data, config, ws);
  std::vector<std::string> dropped;
  auto roots = SafeExtraReadRoots(dirs, ws, config, data, &dropped);
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0], fs::canonical(config / "skills"));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_NE(dropped[0].find("outside the workspace"), std::string::npos) << dropped[0];

  // A user folder that links out of the config and data directories.
  fs::create_directories(t.path() / "elsewhere");
  fs::remove(config / "skills");
  fs::create_symlink(t.path() / "elsewhere", config / "skills");
  dropped.clear();
  EXPECT_TRUE(SafeExtraReadRoots(dirs, ws, config, data, &dropped).empty());
  EXPECT_EQ(dropped.size(), 2u);

  // A workspace folder that stays inside needs no extra root.
  fs::remove(ws / ".agentloop" / "skills");
  fs::create_directories(ws / "shared-skills");
  fs::create_symlink("../shared-skills", ws / ".agentloop" / "skills");
  fs::remove(config / "skills");
  dropped.clear();
  EXPECT_TRUE(SafeExtraReadRoots(dirs, ws, config, data, &dropped).empty());
  EXPECT_TRUE(dropped.empty());
}

TEST(ConfineWorkspaceDirsTest, FoldersLinkedOutOfTheWorkspaceLoseTheWorkspaceScope) {
  TempDir t;
  fs::path ws = t.path() / "ws";
  fs::create_directories(ws / ".agentloop");
  fs::create_directories(t.path() / "user-notes");
  fs::create_symlink(t.path() / "user-notes", ws / ".agentloop" / "memory");
  LearningDirs dirs = MakeLearningDirs(t.path() / "data", t.path() / "config", ws);
  std::vector<std::string> dropped;
  ConfineWorkspaceDirs(dirs, ws, &dropped);
  EXPECT_TRUE(dirs.workspace_memory.empty());
  EXPECT_EQ(dirs.workspace_skills, ws / ".agentloop" / "skills");  // missing, inside
  ASSERT_EQ(dropped.size(), 1u);
  // A link of `.agentloop` itself counts too.
  fs::remove(ws / ".agentloop" / "memory");
  fs::remove(ws / ".agentloop");
  fs::create_symlink(t.path() / "user-notes", ws / ".agentloop");
  LearningDirs again = MakeLearningDirs(t.path() / "data", t.path() / "config", ws);
  dropped.clear();
  ConfineWorkspaceDirs(again, ws, &dropped);
  EXPECT_TRUE(again.workspace_memory.empty());
  EXPECT_TRUE(again.workspace_skills.empty());
  EXPECT_EQ(dropped.size(), 2u);
  // A dangling link: making the folder would create its target elsewhere.
  fs::remove(ws / ".agentloop");
  fs::create_symlink(t.path() / "not-yet", ws / ".agentloop");
  LearningDirs dangling = MakeLearningDirs(t.path() / "data", t.path() / "config", ws);
  ConfineWorkspaceDirs(dangling, ws, nullptr);
  EXPECT_TRUE(dangling.workspace_memory.empty());
  EXPECT_TRUE(dangling.workspace_skills.empty());
}

}  // namespace
}  // namespace agentloop::learning
