#include <gtest/gtest.h>

#include "learning/frontmatter.h"
#include "learning/learning_tools.h"
#include "learning/listing.h"
#include "learning/memory_store.h"
#include "learning/test_util.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

Memory Make(std::string name, std::string description, std::string body,
            Scope scope = Scope::kWorkspace, std::string type = "fact") {
  Memory m;
  m.name = std::move(name);
  m.type = std::move(type);
  m.description = std::move(description);
  m.body = std::move(body);
  m.scope = scope;
  return m;
}

class MemoryTest : public ::testing::Test {
 protected:
  fs::path user() const { return tmp_.path() / "data" / "memory"; }
  fs::path ws() const { return tmp_.path() / "ws" / ".agentloop" / "memory"; }
  MemoryStore store() const { return MemoryStore(user(), ws()); }
  TempDir tmp_;
};

TEST_F(MemoryTest, ValidationNamesTheBrokenRule) {
  EXPECT_TRUE(ValidateMemory(Make("build-cmd", "d", "b")).ok());
  auto expect_bad = [](const Memory& m, const std::string& field) {
    Status s = ValidateMemory(m);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_TRUE(s.message().starts_with(field)) << s.message();
  };
  expect_bad(Make("Build", "d", "b"), "name:");
  expect_bad(Make("../etc", "d", "b"), "name:");
  expect_bad(Make("", "d", "b"), "name:");
  expect_bad(Make("x", "d", "b", Scope::kUser, "secret"), "type:");
  expect_bad(Make("x", "", "b"), "description:");
  expect_bad(Make("x", std::string(281, 'd'), "b"), "description:");
  expect_bad(Make("x", "two\nlines", "b"), "description:");
  expect_bad(Make("x", "d", "  "), "body:");
  expect_bad(Make("x", "d", std::string(4001, 'b')), "body:");
  EXPECT_TRUE(ValidateMemory(Make("x", std::string(280, 'd'), std::string(4000, 'b'))).ok());
  Memory tags = Make("x", "d", "b");
  tags.tags = {"ok", "Not OK"};
  expect_bad(tags, "tags:");
  tags.tags = std::vector<std::string>(11, "t");
  expect_bad(tags, "tags:");
}

TEST_F(MemoryTest, SaveGetRoundTripAndReplace) {
  MemoryStore s = store();
  Memory m = Make("build-cmd", "How to build: \"cmake\" then ninja",
                  "Run `cmake -G Ninja`.\n\nThen ninja.");
  m.tags = {"build", "cmake"};
  Result<bool> saved = s.Save(m);
  ASSERT_TRUE(saved.ok()) << saved.error().ToString();
  EXPECT_FALSE(*saved);
  ASSERT_TRUE(fs::exists(ws() / "build-cmd.md"));
  Result<Memory> got = s.Get("build-cmd");
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  EXPECT_TRUE(got->SameContent(m));
  m.body = "changed";
  EXPECT_TRUE(*s.Save(m));
  EXPECT_EQ(s.Get("build-cmd")->body, "changed");
  EXPECT_EQ(s.Get("nope").error().code(), Code::kNotFound);
}

TEST_F(MemoryTest, ParsesAHandWrittenFile) {
  testing::WriteFile(user() / "editor.md",
                     "---\nname: editor\ntype: preference\ndescription: 'Prefers vim'\n"
                     "tags: [tools, \"vim\"]\n---\n\nUses vim keybindings.\n");
  Result<Memory> m = store().Get("editor");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(m->scope, Scope::kUser);
  EXPECT_EQ(m->description, "Prefers vim");
  EXPECT_EQ(m->tags, (std::vector<std::string>{"tools", "vim"}));
  EXPECT_EQ(m->body, "Uses vim keybindings.");
}

TEST_F(MemoryTest, ListSkipsBrokenFilesWithWarnings) {
  MemoryStore s = store();
  ASSERT_TRUE(s.Save(Make("a", "A", "a")).ok());
  testing::WriteFile(ws() / "broken.md", "no front matter");
  testing::WriteFile(ws() / "other.md",
                     "---\nname: mismatch\ntype: fact\ndescription: d\n---\nb\n");
  std::vector<std::string> warnings;
  auto list = s.List(&warnings);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "a");
  EXPECT_EQ(warnings.size(), 2u);
}

TEST_F(MemoryTest, WorkspaceShadowsUserOnGetAndDeleteIsScoped) {
  MemoryStore s = store();
  ASSERT_TRUE(s.Save(Make("x", "user one", "u", Scope::kUser)).ok());
  ASSERT_TRUE(s.Save(Make("x", "ws one", "w", Scope::kWorkspace)).ok());
  EXPECT_EQ(s.Get("x")->description, "ws one");
  EXPECT_EQ(s.Get("x", Scope::kUser)->description, "user one");
  ASSERT_TRUE(s.Delete("x", Scope::kWorkspace).ok());
  EXPECT_EQ(s.Get("x")->description, "user one");
  EXPECT_EQ(s.Delete("x", Scope::kWorkspace).code(), Code::kNotFound);
  EXPECT_EQ(s.Delete("../x", Scope::kUser).code(), Code::kInvalidArgument);
}

TEST_F(MemoryTest, SearchRanksNameTagsDescriptionBody) {
  MemoryStore s = store();
  Memory by_name = Make("deploy-steps", "Shipping", "scp then restart");
  Memory by_tag = Make("ship", "Shipping notes", "nothing");
  by_tag.tags = {"deploy"};
  Memory by_desc = Make("notes", "How we deploy", "x");
  Memory by_body = Make("misc", "Misc", "never deploy on friday");
  Memory none = Make("other", "Unrelated", "y");
  for (const auto& m : {by_name, by_tag, by_desc, by_body, none}) ASSERT_TRUE(s.Save(m).ok());
  auto hits = s.Search("deploy", 10);
  ASSERT_EQ(hits.size(), 4u);
  EXPECT_EQ(hits[0].memory.name, "deploy-steps");
  EXPECT_EQ(hits[1].memory.name, "ship");
  EXPECT_EQ(hits[2].memory.name, "notes");
  EXPECT_EQ(hits[3].memory.name, "misc");
  EXPECT_EQ(s.Search("deploy", 2).size(), 2u);
  EXPECT_TRUE(s.Search("   ", 5).empty());
  EXPECT_TRUE(s.Search("zebra", 5).empty());
}

TEST_F(MemoryTest, IndexIsBoundedAndSanitised) {
  MemoryStore s = store();
  EXPECT_EQ(s.Index(1000), "");
  ASSERT_TRUE(s.Save(Make("alpha", "First </system> note", "a")).ok());
  ASSERT_TRUE(
      s.Save(Make("beta", "Second note, long enough to be cut", "b", Scope::kUser, "preference"))
          .ok());
  std::string header =
      "Memories (saved notes; load one with memory_search {\"name\": \"<name>\"}):\n";
  std::string l1 = "- alpha [fact, workspace]: First &lt;/system> note\n";
  std::string l2 = "- beta [preference, user]: Second note, long enough to be cut\n";
  EXPECT_EQ(s.Index(10000), header + l1 + l2);
  std::string more = "- … 1 more (memory_search finds them)\n";
  ASSERT_GT(l2.size(), more.size());
  EXPECT_EQ(s.Index(header.size() + l1.size() + more.size()), header + l1 + more);
  EXPECT_EQ(s.Index(header.size() + l1.size()), header + l1);
  EXPECT_EQ(s.Index(header.size() + 5), "");
  // Usage reorders: the most used first.
  ASSERT_TRUE(RecordUseIn(user(), "beta", "t1", 1000).ok());
  EXPECT_EQ(s.Index(10000), header + l2 + l1);
}

ToolContext Context(const fs::path& ws) {
  ToolContext ctx;
  ctx.workspace = ws;
  return ctx;
}

TEST_F(MemoryTest, ToolsSaveSearchDelete) {
  LearningDirs dirs;
  dirs.user_memory = user();
  auto tools = MakeLearningTools(dirs);
  ASSERT_EQ(tools.size(), 5u);
  Tool& save = *tools[0];
  Tool& search = *tools[1];
  Tool& del = *tools[2];
  EXPECT_TRUE(save.spec().mutates);
  EXPECT_FALSE(search.spec().mutates);
  EXPECT_TRUE(del.spec().mutates);
  ToolContext ctx = Context(tmp_.path() / "ws");

  Json in = {{"name", "test-cmd"},
             {"type", "project"},
             {"description", "How to run tests"},
             {"body", "ctest --output-on-failure"},
             {"tags", {"test"}}};
  ASSERT_TRUE(ValidateAgainstSchema(in, save.spec().input_schema).ok());
  auto out = save.Run({"c1", "memory_save", in}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->is_error) << out->content;
  EXPECT_EQ(out->content, "Saved workspace memory \"test-cmd\".");
  EXPECT_TRUE(fs::exists(ws() / "test-cmd.md"));

  // Preferences default to the user scope.
  Json pref = {{"name", "tabs"},
               {"type", "preference"},
               {"description", "Tabs not spaces"},
               {"body", "Always indent with tabs."}};
  out = save.Run({"c2", "memory_save", pref}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(fs::exists(user() / "tabs.md"));

  Json bad = in;
  bad["name"] = "Bad Name";
  out = save.Run({"c3", "memory_save", bad}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->is_error);
  EXPECT_TRUE(out->content.starts_with("Error: name:")) << out->content;

  out = search.Run({"c4", "memory_search", Json{{"query", "tests"}}}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->is_error);
  EXPECT_NE(out->content.find("ctest --output-on-failure"), std::string::npos);
  ASSERT_TRUE(out->details.contains(kUseDetailsKey));
  EXPECT_EQ(out->details[kUseDetailsKey][0]["name"], "test-cmd");

  out = search.Run({"c5", "memory_search", Json{{"name", "tabs"}}}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->content,
            "## tabs [preference, user]\nTabs not spaces\n\nAlways indent with tabs.\n");
  out = search.Run({"c6", "memory_search", Json::object()}, ctx);
  EXPECT_TRUE(out->is_error);
  out = search.Run({"c7", "memory_search", Json{{"query", "zebra"}}}, ctx);
  EXPECT_FALSE(out->is_error);
  EXPECT_EQ(out->content, "No memories match \"zebra\".");

  out = del.Run({"c8", "memory_delete", Json{{"name", "tabs"}}}, ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->content, "Deleted user memory \"tabs\".");
  EXPECT_FALSE(fs::exists(user() / "tabs.md"));
  out = del.Run({"c9", "memory_delete", Json{{"name", "tabs"}}}, ctx);
  EXPECT_TRUE(out->is_error);
}

TEST_F(MemoryTest, PromptSectionCombinesMemoryAndSkills) {
  LearningDirs dirs;
  dirs.user_memory = user();
  dirs.user_skills = tmp_.path() / "cfg" / "skills";
  fs::path ws_root = tmp_.path() / "ws";
  EXPECT_EQ(LearningPromptSection(dirs, ws_root), "");
  ASSERT_TRUE(store().Save(Make("a", "A note", "a")).ok());
  testing::WriteFile(dirs.user_skills / "s" / "SKILL.md",
                     "---\nname: s\ndescription: Does s\n---\nbody\n");
  EXPECT_EQ(LearningPromptSection(dirs, ws_root),
            "Memories (saved notes; load one with memory_search {\"name\": \"<name>\"}):\n"
            "- a [fact, workspace]: A note\n\nAvailable skills:\n- s: Does s\n");
}

// A server's tenants each get a user scope of their own: what one tenant's
// session saves in the user scope (a memory, a skill) reaches that tenant's
// later prompts only, neither another tenant's nor the user's own scope.
TEST_F(MemoryTest, ATenantsUserScopeReachesOnlyThatTenantsPrompt) {
  const fs::path data = tmp_.path() / "data";
  const fs::path config = tmp_.path() / "cfg";
  const fs::path ws_root = tmp_.path() / "ws";
  const LearningDirs shared = MakeLearningDirs(data, config, ws_root);
  LearningDirs acme = shared;
  ASSERT_TRUE(UseTenantUserScope(acme, data, "acme").ok());
  LearningDirs other = shared;
  ASSERT_TRUE(UseTenantUserScope(other, data, "other").ok());
  EXPECT_EQ(acme.user_memory, data / "tenants" / "acme" / "memory");
  EXPECT_EQ(acme.user_skills, data / "tenants" / "acme" / "skills");
  EXPECT_EQ(acme.workspace_memory, shared.workspace_memory);

  auto tools = MakeLearningTools(acme);
  Tool& save = *tools[0];
  Tool& synthesize = *tools[4];
  ToolContext ctx = Context(ws_root);
  auto out = save.Run({"c1",
                       "memory_save",
                       {{"name", "acme-secret"},
                        {"type", "fact"},
                        {"description", "Acme deploys from the blue cluster"},
                        {"body", "blue"},
                        {"scope", "user"}}},
                      ctx);
  ASSERT_TRUE(out.ok());
  ASSERT_FALSE(out->is_error) << out->content;
  out = synthesize.Run({"c2",
                        "synthesize_skill",
                        {{"name", "acme-deploy"},
                         {"description", "Deploy the acme way"},
                         {"body", "curl acme | sh"},
                         {"scope", "user"}}},
                       ctx);
  ASSERT_TRUE(out.ok());
  ASSERT_FALSE(out->is_error) << out->content;

  const std::string own = LearningPromptSection(acme, ws_root);
  EXPECT_NE(own.find("acme-secret"), std::string::npos) << own;
  EXPECT_NE(own.find("acme-deploy"), std::string::npos) << own;
  EXPECT_EQ(LearningPromptSection(other, ws_root), "");
  EXPECT_EQ(LearningPromptSection(shared, ws_root), "");
  EXPECT_FALSE(fs::exists(shared.user_memory));

  // The user's own scope is not a tenant's either.
  ASSERT_TRUE(MemoryStore(shared.user_memory, {})
                  .Save(Make("mine", "The user's own note", "x", Scope::kUser))
                  .ok());
  EXPECT_EQ(LearningPromptSection(other, ws_root), "");
  EXPECT_EQ(LearningPromptSection(acme, ws_root).find("mine"), std::string::npos);

  // A session no tenant owns has no user scope at all.
  LearningDirs nobody = shared;
  ASSERT_TRUE(UseTenantUserScope(nobody, data, "").ok());
  EXPECT_TRUE(nobody.user_memory.empty());
  EXPECT_TRUE(nobody.user_skills.empty());
  EXPECT_EQ(LearningPromptSection(nobody, ws_root), "");
}

TEST_F(MemoryTest, ATenantNameThatCouldLeaveItsFolderIsRefused) {
  const fs::path data = tmp_.path() / "data";
  for (const char* bad : {".", "..", "../acme", "a/b", "/abs", "Acme", "a b", "a\\b"}) {
    LearningDirs dirs = MakeLearningDirs(data, tmp_.path() / "cfg", {});
    Status s = UseTenantUserScope(dirs, data, bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(dirs.user_memory, data / "memory") << bad;  // unchanged
  }
  LearningDirs dirs;
  EXPECT_EQ(UseTenantUserScope(dirs, data, std::string(65, 'a')).code(), Code::kInvalidArgument);
  EXPECT_TRUE(UseTenantUserScope(dirs, data, "acme-2.prod_x").ok());
}

// ---- usage ----------------------------------------------------------------

TEST_F(MemoryTest, UsageCountsUsesAndOutcomes) {
  int64_t now = 1'700'000'000'000;
  UsageTracker tracker([&] { return now; });
  ASSERT_TRUE(tracker.RecordUse(UsageKind::kMemory, ws(), "a", "s1", "t1").ok());
  now += 1000;
  ASSERT_TRUE(tracker.RecordUse(UsageKind::kMemory, ws(), "a", "s1", "t2").ok());
  ASSERT_TRUE(tracker.RecordUse(UsageKind::kMemory, ws(), "b", "s1", "t2").ok());
  ASSERT_TRUE(tracker.RecordTurnOutcome("t1", true).ok());
  ASSERT_TRUE(tracker.RecordTurnOutcome("t2", false).ok());
  ASSERT_TRUE(tracker.RecordTurnOutcome("t2", true).ok());  // already counted: no-op
  UsageMap u = LoadUsage(ws());
  EXPECT_EQ(u["a"].uses, 2);
  EXPECT_EQ(u["a"].last_used_ms, now);
  EXPECT_EQ(u["a"].completed, 1);
  EXPECT_EQ(u["a"].not_completed, 1);
  EXPECT_TRUE(u["a"].open_turns.empty());
  EXPECT_EQ(u["b"].uses, 1);
  EXPECT_EQ(u["b"].not_completed, 1);
}

TEST_F(MemoryTest, UsageHookRecordsFromToolDetails) {
  auto tracker = std::make_shared<UsageTracker>([] { return int64_t{5000}; });
  UsageHook hook(tracker);
  HookContext ctx;
  ctx.session_id = "s";
  ctx.turn_id = "t";
  ToolOutput out = ToolOutput::Ok("body");
  out.details =
      Json{{std::string(kUseDetailsKey), Json::array({UseDetail(UsageKind::kSkill, ws(), "x")})}};
  hook.AfterToolResult(ctx, ToolCall{"c", "skill", Json::object()}, out);
  TurnEndInfo paused;
  paused.stop = StopReason::kPendingApproval;
  hook.OnTurnEnd(ctx, paused);  // paused: outcome comes later
  EXPECT_EQ(LoadUsage(ws())["x"].completed, 0);
  TurnEndInfo done;
  done.stop = StopReason::kCompleted;
  hook.OnTurnEnd(ctx, done);
  UsageMap u = LoadUsage(ws());
  EXPECT_EQ(u["x"].uses, 1);
  EXPECT_EQ(u["x"].completed, 1);
}

TEST_F(MemoryTest, CorruptUsageFileReadsAsEmptyAndIsRewritten) {
  testing::WriteFile(ws() / "usage.json", "{not json");
  EXPECT_TRUE(LoadUsage(ws()).empty());
  ASSERT_TRUE(RecordUseIn(ws(), "a", "t", 1).ok());
  EXPECT_EQ(LoadUsage(ws())["a"].uses, 1);
}

TEST_F(MemoryTest, ListingRowsAndTable) {
  MemoryStore s = store();
  EXPECT_EQ(FormatUsageRows(MemoryRows(s), "memory"), "No memories.\n");
  ASSERT_TRUE(s.Save(Make("build-cmd", "How to build", "b")).ok());
  ASSERT_TRUE(s.Save(Make("unused", "Never used", "u", Scope::kUser)).ok());
  ASSERT_TRUE(RecordUseIn(ws(), "build-cmd", "t1", 1714564800000).ok());  // 2024-05-01 12:00 UTC
  ASSERT_TRUE(RecordUseIn(ws(), "build-cmd", "t2", 1714564800000).ok());
  ASSERT_TRUE(RecordUseIn(ws(), "build-cmd", "t3", 1714564800000).ok());
  ASSERT_TRUE(RecordOutcomeIn(ws(), "build-cmd", "t1", true).ok());
  ASSERT_TRUE(RecordOutcomeIn(ws(), "build-cmd", "t2", true).ok());
  ASSERT_TRUE(RecordOutcomeIn(ws(), "build-cmd", "t3", false).ok());
  auto rows = MemoryRows(s);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].uses, 3);
  EXPECT_NEAR(*rows[0].CompletionRate(), 2.0 / 3.0, 1e-9);
  EXPECT_FALSE(rows[1].CompletionRate().has_value());
  EXPECT_EQ(FormatUsageRows(rows, "memory"),
            "NAME      SCOPE      USES LAST USED        COMPLETED  DESCRIPTION\n"
            "build-cmd workspace     3 2024-05-01 12:00 2/3 67%    How to build\n"
            "unused    user          0 never            -          Never used\n");
}

TEST(FrontMatterTest, BlockScalarsAndErrors) {
  auto fm = ParseFrontMatter(
      "---\nname: x\ndescription: >\n  folded\n  text\nkeep: |\n  a\n  b\n---\nbody");
  ASSERT_TRUE(fm.ok());
  EXPECT_EQ(fm->Get("description"), "folded text");
  EXPECT_EQ(fm->Get("keep"), "a\nb");
  EXPECT_EQ(fm->body, "body");
  EXPECT_FALSE(ParseFrontMatter("name: x\n").ok());
  EXPECT_FALSE(ParseFrontMatter("---\nname: x\n").ok());
  EXPECT_FALSE(ParseFrontMatter("---\njust text\n---\n").ok());
}

}  // namespace
}  // namespace agentloop::learning
