#include "core/compaction.h"

#include <gtest/gtest.h>

namespace agentloop {
namespace {

Message ToolUseMsg(const std::string& id) {
  Message m;
  m.role = Role::kAssistant;
  m.content.push_back(ContentBlock::ToolUse(id, "read", Json{{"file_path", "a"}}));
  return m;
}
Message ToolResultMsg(const std::string& id) {
  Message m;
  m.role = Role::kUser;
  m.content.push_back(ContentBlock::ToolResult(id, "content", false));
  return m;
}

TEST(CompactionTest, NothingToCompactWhenOnlyTheTailIsPrior) {
  Transcript t;
  for (int i = 0; i < 4; ++i) t.Append(Message::User("m"));
  t.Append(Message::User("current"));
  EXPECT_FALSE(CompactPriorHistory(t, 4, 1).has_value());
}

TEST(CompactionTest, FirstAttemptDropsOldestHalfOfHead) {
  Transcript t;
  for (int i = 0; i < 10; ++i) t.Append(Message::User("m" + std::to_string(i)));
  t.Append(Message::User("current"));
  auto r = CompactPriorHistory(t, 10, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->dropped, 3u);  // head = 6, ceil(6/2) = 3
  EXPECT_FALSE(r->summary.has_value());
  EXPECT_EQ(t.size(), 8u);
  EXPECT_EQ(t.messages()[0].JoinedText(), "m3");
  EXPECT_EQ(t.back().JoinedText(), "current");
}

TEST(CompactionTest, LaterAttemptSummarisesTheHead) {
  Transcript t;
  for (int i = 0; i < 10; ++i) t.Append(Message::User("m" + std::to_string(i)));
  t.Append(Message::User("current"));
  auto r = CompactPriorHistory(t, 10, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->dropped, 6u);
  ASSERT_TRUE(r->summary.has_value());
  EXPECT_EQ(t.messages()[0].tag, "compaction-summary");
  EXPECT_EQ(t.messages()[0].JoinedText().rfind("[compacted 6 earlier message(s)]\n", 0), 0u);
  EXPECT_EQ(t.size(), 6u);  // summary + 4 tail + current
}

TEST(CompactionTest, NeverOrphansToolResults) {
  Transcript t;
  t.Append(Message::User("q"));
  t.Append(ToolUseMsg("a"));
  t.Append(ToolResultMsg("a"));
  t.Append(ToolUseMsg("b"));
  t.Append(ToolResultMsg("b"));
  for (int i = 0; i < 4; ++i) t.Append(Message::User("tail"));
  t.Append(Message::User("current"));
  // head = 5: half = 3 would start at ToolUse b? index 3 is ToolUseMsg("b"): fine.
  // Force a cut at a tool result: cut 2 would land on ToolResultMsg("a") and move on.
  auto r = CompactPriorHistory(t, 9, 1);
  ASSERT_TRUE(r.has_value());
  auto first = t.messages()[0];
  for (const auto& b : first.content) EXPECT_NE(b.type, BlockType::kToolResult);
}

}  // namespace
}  // namespace agentloop

namespace agentloop {
namespace {

// [user request, (tool_use, tool_result) x pairs, ...]
Transcript LongTurn(int pairs) {
  Transcript t;
  t.Append(Message::User("earlier"));
  t.Append(Message::Assistant("earlier answer"));
  t.Append(Message::User("the request"));
  for (int i = 0; i < pairs; ++i) {
    t.Append(ToolUseMsg("c" + std::to_string(i)));
    t.Append(ToolResultMsg("c" + std::to_string(i)));
  }
  return t;
}

bool PairsIntact(std::span<const Message> msgs) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    bool result = !msgs[i].content.empty() && msgs[i].content[0].type == BlockType::kToolResult;
    if (!result) continue;
    if (i == 0 || !msgs[i - 1].HasToolUse()) return false;
    if (msgs[i - 1].content[0].id != msgs[i].content[0].tool_use_id) return false;
  }
  return true;
}

TEST(CompactionPlanTest, TailStartKeepsAToolResultWithItsCall) {
  Transcript t = LongTurn(3);  // 3 + 6 = 9 messages
  // size - 4 = 5 is a tool_use (index 3,5,7 are uses): no move needed.
  EXPECT_EQ(TailStart(t.messages()), 5u);
  t.Append(Message::User("x"));  // 10: size-4 = 6 is a result -> back to 5
  EXPECT_EQ(TailStart(t.messages()), 5u);
  Transcript small;
  small.Append(Message::User("a"));
  EXPECT_EQ(TailStart(small.messages()), 0u);
}

TEST(CompactionPlanTest, LatestRequestSkipsToolResultsAndEngineMessages) {
  Transcript t = LongTurn(2);
  EXPECT_EQ(LatestRequest(t.messages(), t.size() - 1), std::optional<size_t>(2));
  Message tagged = Message::User("engine note");
  tagged.tag = "compaction-summary";
  t.Append(tagged);
  EXPECT_EQ(LatestRequest(t.messages(), t.size() - 1), std::optional<size_t>(2));
}

TEST(CompactionPlanTest, StageOneDropsOldestHalfOfThePriorHeadOnly) {
  Transcript t;
  for (int i = 0; i < 6; ++i) t.Append(Message::User("old" + std::to_string(i)));
  t.Append(Message::User("request"));  // 6
  for (int i = 0; i < 4; ++i) {
    t.Append(ToolUseMsg("c" + std::to_string(i)));
    t.Append(ToolResultMsg("c" + std::to_string(i)));
  }
  auto plan = PlanDropOldestHalf(t.messages(), 6);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->drop, 3u);  // ceil(6 / 2)
  EXPECT_FALSE(plan->summarize);
  // No prior head: nothing to drop.
  EXPECT_FALSE(PlanDropOldestHalf(t.messages(), 0).has_value());
}

TEST(CompactionPlanTest, StageTwoSummarisesOlderStepsOfTheRunningTurnAndKeepsTheRequest) {
  Transcript t = LongTurn(10);  // 3 + 20 = 23 messages, request at 2
  auto plan = PlanSummary(t.messages(), 2);
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->summarize);
  EXPECT_EQ(plan->keep_request, std::optional<size_t>(2));
  EXPECT_EQ(plan->drop, TailStart(t.messages()));
  std::vector<Message> last4(t.messages().end() - 4, t.messages().end());
  auto r = ApplyCompaction(
      t, *plan,
      SummaryMessage(plan->drop, TruncatingSummary(t.messages().subspan(0, plan->drop)),
                     std::nullopt));
  ASSERT_GE(t.size(), 6u);
  EXPECT_EQ(t.messages()[0].tag, kCompactionSummaryTag);
  EXPECT_EQ(t.messages()[1].JoinedText(), "the request");
  ASSERT_EQ(r.kept.size(), 1u);
  // The last four messages are untouched.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t.messages()[t.size() - 4 + i].content[0].id, last4[i].content[0].id);
    EXPECT_EQ(t.messages()[t.size() - 4 + i].content[0].tool_use_id,
              last4[i].content[0].tool_use_id);
  }
  EXPECT_TRUE(PairsIntact(t.messages()));
}

TEST(CompactionPlanTest, NoPlanEverSplitsAPair) {
  for (int pairs = 0; pairs < 12; ++pairs) {
    for (int extra = 0; extra < 3; ++extra) {
      Transcript t = LongTurn(pairs);
      for (int e = 0; e < extra; ++e) t.Append(Message::User("more"));
      for (int stage = 1; stage <= 2; ++stage) {
        Transcript copy(std::vector<Message>(t.messages().begin(), t.messages().end()));
        auto request = LatestRequest(copy.messages(), copy.size() - 1);
        auto plan = stage == 1 ? PlanDropOldestHalf(copy.messages(), request)
                               : PlanSummary(copy.messages(), request);
        if (!plan) continue;
        std::optional<Message> summary;
        if (plan->summarize) summary = SummaryMessage(plan->drop, "s", std::nullopt);
        ApplyCompaction(copy, *plan, summary);
        EXPECT_TRUE(PairsIntact(copy.messages())) << pairs << "/" << extra << "/" << stage;
        EXPECT_LE(copy.size(), t.size() + 1);
      }
    }
  }
}

TEST(CompactionPlanTest, SummaryCarriesMeta) {
  Message s = SummaryMessage(3, "text", Json{{"todo_snapshot", Json::object()}});
  EXPECT_EQ(s.tag, kCompactionSummaryTag);
  EXPECT_EQ(s.JoinedText(), "[compacted 3 earlier message(s)]\ntext");
  EXPECT_TRUE(s.content[0].meta.contains("todo_snapshot"));
}

}  // namespace
}  // namespace agentloop
