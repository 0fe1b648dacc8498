// Replay and CrashRepair without a database.
#include "store/replay.h"

#include <gtest/gtest.h>

#include "agentloop/event_data.h"

#include "protocol/codec.h"

namespace agentloop::store {
namespace {

StoredEvent Row(uint64_t seq, std::string type, Json j, std::string turn = "t") {
  j["type"] = type;
  j["seq"] = seq;
  return {seq, std::move(type), std::move(turn), DumpJson(j), 0};
}

StoredEvent Msg(uint64_t seq, const Message& m, std::string turn = "t") {
  return Row(seq, "message", Json{{"message", ToJson(m)}}, std::move(turn));
}

TEST(ReplayTest, EmptyLog) {
  auto r = Replay({});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->messages.empty());
  EXPECT_EQ(r->last_seq, 0u);
  EXPECT_FALSE(CrashRepair(*r, std::nullopt).has_value());
}

TEST(ReplayTest, UnknownTypesAreIgnored) {
  std::vector<StoredEvent> rows{Msg(1, Message::User("a")), Row(2, "future_event", Json{{"x", 1}})};
  auto r = Replay(rows);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->messages.size(), 1u);
  EXPECT_EQ(r->last_seq, 2u);
  EXPECT_TRUE(r->warnings.empty());
}

TEST(ReplayTest, NewestTurnEndWins) {
  std::vector<StoredEvent> rows{
      Row(1, "turn_end", Json{{"stop", "completed"}, {"final_text", "one"}}, "t1"),
      Row(2, "turn_end", Json{{"stop", "pending_approval"}, {"reason", "waiting"}}, "t2"),
  };
  auto r = Replay(rows);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->last_turn_end.has_value());
  EXPECT_EQ(r->last_turn_end->turn_id, "t2");
  EXPECT_EQ(r->last_turn_end->stop, StopReason::kPendingApproval);
  EXPECT_EQ(r->last_turn_end->reason, "waiting");
}

TEST(ReplayTest, MessageRowWithBadBlockIsDataLoss) {
  std::vector<StoredEvent> rows{
      Row(7, "message", Json{{"message", {{"role", "user"}, {"content", {{{"type", "bogus"}}}}}}})};
  auto r = Replay(rows);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDataLoss);
  EXPECT_NE(r.error().message().find("seq 7"), std::string::npos);
}

TEST(ReplayTest, TheLastContextMeasurementIsFound) {
  StepEndData reported;
  reported.has_usage = true;
  reported.usage.input_tokens = 6000;
  reported.usage.cache_read_tokens = 1000;
  reported.usage.output_tokens = 30;
  StepEndData unreported;  // a provider that reports no usage
  std::vector<StoredEvent> rows{
      Msg(1, Message::User("q1")),
      Row(2, "step_end", reported.ToJson()),
      Msg(3, Message::Assistant("a1")),
      Msg(4, Message::User("q2")),
      Row(5, "step_end", unreported.ToJson()),
      Msg(6, Message::Assistant("a2")),
  };
  auto r = Replay(rows);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->context_mark.has_value());
  EXPECT_EQ(r->context_mark->tokens, 7000);  // uncached + cache read
  EXPECT_EQ(r->context_mark->messages, 1u);  // measured before the answer

  // A compaction changes the view: its estimate after is the new mark.
  Message summary = Message::User("[compacted 2 earlier message(s)]\nsummary");
  summary.tag = "compaction-summary";
  rows.push_back(Row(7, "compaction",
                     Json{{"from", 4},
                          {"to", 3},
                          {"attempt", 0},
                          {"drop_prefix", 2},
                          {"summary", ToJson(summary)},
                          {"trigger", "threshold"},
                          {"tokens_before", 7100},
                          {"tokens_after", 900}}));
  r = Replay(rows);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->context_mark.has_value());
  EXPECT_EQ(r->context_mark->tokens, 900);
  EXPECT_EQ(r->context_mark->messages, 3u);

  // A compaction that does not say its tokens leaves no mark.
  rows.push_back(
      Row(8, "compaction",
          Json{{"from", 3}, {"to", 2}, {"attempt", 1}, {"drop_prefix", 1}, {"summary", nullptr}}));
  r = Replay(rows);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->context_mark.has_value());
}

TEST(CrashRepairTest, AnsweredHistoryNeedsNoRepair) {
  Message asst;
  asst.role = Role::kAssistant;
  asst.content.push_back(ContentBlock::ToolUse("x", "read", Json::object()));
  Message res;
  res.role = Role::kUser;
  res.content.push_back(ContentBlock::ToolResult("x", "ok", false));
  std::vector<StoredEvent> rows{Msg(1, Message::User("a")), Msg(2, asst), Msg(3, res)};
  auto r = Replay(rows);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(CrashRepair(*r, std::nullopt).has_value());
  // A plain assistant text answer needs none either.
  rows.push_back(Msg(4, Message::Assistant("done")));
  EXPECT_FALSE(CrashRepair(*Replay(rows), std::nullopt).has_value());
}

TEST(CrashRepairTest, StaleCheckpointDoesNotCover) {
  Message asst;
  asst.role = Role::kAssistant;
  asst.content.push_back(ContentBlock::ToolUse("new", "read", Json::object()));
  std::vector<StoredEvent> rows{Msg(1, asst)};
  Checkpoint old;
  old.tool_use_ids = {"old"};
  auto repair = CrashRepair(*Replay(rows), old);
  ASSERT_TRUE(repair.has_value());
  EXPECT_EQ(repair->content[0].tool_use_id, "new");
}

}  // namespace
}  // namespace agentloop::store
