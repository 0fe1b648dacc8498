#include "learning/proposals.h"

#include <gtest/gtest.h>

#include "learning/test_util.h"

namespace agentloop::learning {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

class ProposalsTest : public ::testing::Test {
 protected:
  ProposalsTest()
      : store_(tmp_.path() / "proposals", [this] { return now_; }),
        memories_(tmp_.path() / "memory", tmp_.path() / "ws-memory"),
        skills_(tmp_.path() / "skills", tmp_.path() / "ws-skills") {}
  TempDir tmp_;
  int64_t now_ = 1714564800000;
  ProposalStore store_;
  MemoryStore memories_;
  SkillStore skills_;
};

TEST_F(ProposalsTest, AddListAndFormat) {
  EXPECT_EQ(FormatProposals(store_.List()), "No proposals.\n");
  auto a = store_.Add({"memory", "Tests need TZ=UTC", "Save that tests need TZ=UTC."}, "s1");
  ASSERT_TRUE(a.ok());
  now_ += 1;
  auto b = store_.Add({"skill", "Release steps", "1. tag\n2. push"}, "s1");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(a->id.starts_with("prop_"));
  auto list = store_.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, a->id);
  EXPECT_EQ(list[1].id, b->id);
  EXPECT_EQ(FormatProposals(list),
            "ID                     KIND    STATUS    CREATED           TITLE\n" + a->id +
                "  memory  pending   2024-05-01 12:00  Tests need TZ=UTC\n" + b->id +
                "  skill   pending   2024-05-01 12:00  Release steps\n");
  EXPECT_FALSE(store_.Add({"command", "x", "y"}, "s1").ok());
}

TEST_F(ProposalsTest, AcceptMemoryWritesTheMemory) {
  auto p = store_.Add({"memory", "Tests need TZ=UTC", "The test suite needs TZ=UTC."}, "s1");
  ASSERT_TRUE(p.ok());
  auto accepted = store_.Accept(p->id, memories_, skills_);
  ASSERT_TRUE(accepted.ok()) << accepted.error().ToString();
  EXPECT_EQ(accepted->status, "accepted");
  Result<Memory> m = memories_.Get("tests-need-tz-utc", Scope::kUser);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(m->type, "fact");
  EXPECT_EQ(m->description, "Tests need TZ=UTC");
  EXPECT_EQ(m->body, "The test suite needs TZ=UTC.");
  EXPECT_EQ(accepted->written, (tmp_.path() / "memory" / "tests-need-tz-utc.md").string());
  EXPECT_EQ(store_.Get(p->id)->status, "accepted");
  // Twice: refused, nothing changes.
  auto again = store_.Accept(p->id, memories_, skills_);
  EXPECT_EQ(again.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_.Reject(p->id).error().code(), Code::kFailedPrecondition);
}

TEST_F(ProposalsTest, AcceptNeverOverwritesAndSkillsGoToTheSkillStore) {
  Memory existing;
  existing.name = "build";
  existing.type = "fact";
  existing.description = "Mine";
  existing.body = "keep me";
  existing.scope = Scope::kWorkspace;
  ASSERT_TRUE(memories_.Save(existing).ok());
  auto p = store_.Add({"memory", "Build", "new content"}, "s1");
  auto accepted = store_.Accept(p->id, memories_, skills_, Scope::kWorkspace);
  ASSERT_TRUE(accepted.ok());
  EXPECT_EQ(memories_.Get("build", Scope::kWorkspace)->body, "keep me");
  EXPECT_EQ(memories_.Get("build-2", Scope::kWorkspace)->body, "new content");

  auto s = store_.Add({"skill", "Cut a release", "1. tag\n2. push"}, "s1");
  ASSERT_TRUE(store_.Accept(s->id.substr(5, 6), memories_, skills_).ok());  // unique prefix
  Result<Skill> skill = skills_.Get("cut-a-release");
  ASSERT_TRUE(skill.ok());
  EXPECT_EQ(skill->scope, Scope::kUser);
  EXPECT_EQ(skill->body, "1. tag\n2. push");
}

TEST_F(ProposalsTest, RejectAndLookupErrors) {
  auto p = store_.Add({"memory", "x", "y"}, "s1");
  auto r = store_.Reject(p->id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, "rejected");
  EXPECT_EQ(store_.List("pending").size(), 0u);
  EXPECT_EQ(store_.List("rejected").size(), 1u);
  EXPECT_FALSE(fs::exists(tmp_.path() / "memory"));
  EXPECT_EQ(store_.Get("prop_ffffffffffffffff").error().code(), Code::kNotFound);
  EXPECT_EQ(store_.Get("ab").error().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace agentloop::learning
