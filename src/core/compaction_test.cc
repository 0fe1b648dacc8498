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
