#include "todo/loop.h"

#include <limits>

#include <gtest/gtest.h>

namespace agentloop::todo {
namespace {

LoopState State(int rounds, int strikes, std::string sig, int stale, std::string anchor) {
  return LoopState{rounds, strikes, std::move(sig), stale, std::move(anchor)};
}

struct DecideCase {
  const char* name;
  DecisionInput input;
  Decision want;
};

DecisionInput In(std::string outcome, int tool_results, std::string sig, int open, int tasks,
                 std::string anchor, LoopState state, LoopConfig config = {}) {
  DecisionInput in;
  in.outcome = std::move(outcome);
  in.tool_result_count = tool_results;
  in.signature = std::move(sig);
  in.open_count = open;
  in.task_count = tasks;
  in.anchor = std::move(anchor);
  in.state = std::move(state);
  in.config = config;
  return in;
}

class DecideTable : public ::testing::TestWithParam<DecideCase> {};

TEST_P(DecideTable, Matches) {
  const DecideCase& c = GetParam();
  Decision got = Decide(c.input);
  EXPECT_EQ(got.continue_turn, c.want.continue_turn);
  EXPECT_EQ(got.reason, c.want.reason);
  EXPECT_EQ(got.next, c.want.next);
}

LoopConfig Config(int rounds, int strikes) {
  LoopConfig c;
  c.max_rounds = rounds;
  c.max_strikes = strikes;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, DecideTable,
    ::testing::Values(
        // First settle after a human message always continues (last signature '').
        DecideCase{"first_settle_continues",
                   In("completed", 0, "1:pending", 1, 1, "a", State(0, 0, "", 0, "a")),
                   {true, State(1, 0, "1:pending", 0, "a"), "continuing: round 1/12, 1 open"}},
        // 1. A new anchor resets every counter before anything else.
        DecideCase{"new_anchor_resets",
                   In("completed", 0, "1:pending", 1, 1, "b", State(12, 1, "1:pending", 5, "a")),
                   {true, State(1, 0, "1:pending", 0, "b"), "continuing: round 1/12, 1 open"}},
        // 2. A non-completed outcome stops, after the anchor reset, keeping counters.
        DecideCase{"outcome_not_completed",
                   In("budget_exhausted", 0, "1:pending", 1, 1, "a", State(3, 1, "x", 1, "a")),
                   {false, State(3, 1, "x", 1, "a"), "stopped: turn outcome was budget_exhausted"}},
        DecideCase{"outcome_stop_after_anchor_reset",
                   In("aborted", 0, "1:pending", 1, 1, "b", State(3, 1, "x", 1, "a")),
                   {false, State(0, 0, "", 0, "b"), "stopped: turn outcome was aborted"}},
        // 3. Nothing open.
        DecideCase{"list_is_clear",
                   In("completed", 0, "1:completed", 0, 1, "a", State(2, 0, "1:pending", 0, "a")),
                   {false, State(2, 0, "1:pending", 0, "a"), "stopped: list is clear"}},
        DecideCase{"no_list",
                   In("completed", 0, "", 0, 0, "a", State(0, 0, "", 0, "a")),
                   {false, State(0, 0, "", 0, "a"), "stopped: no list"}},
        // 4. Progress by a changed signature clears strikes and stale settles.
        DecideCase{"changed_signature_is_progress",
                   In("completed", 0, "1:in_progress", 1, 1, "a", State(1, 1, "1:pending", 1, "a")),
                   {true, State(2, 0, "1:in_progress", 0, "a"), "continuing: round 2/12, 1 open"}},
        DecideCase{"tool_results_are_progress",
                   In("completed", 2, "1:pending", 1, 1, "a", State(1, 1, "1:pending", 1, "a")),
                   {true, State(2, 0, "1:pending", 0, "a"), "continuing: round 2/12, 1 open"}},
        // Unchanged list: one strike, still under the cap -> continue.
        DecideCase{"first_strike_continues",
                   In("completed", 0, "1:pending", 1, 1, "a", State(1, 0, "1:pending", 0, "a")),
                   {true, State(2, 1, "1:pending", 1, "a"), "continuing: round 2/12, 1 open"}},
        // Second unchanged settle reaches the cap -> stop (counters kept).
        DecideCase{"strike_cap_stops",
                   In("completed", 0, "1:pending,2:pending", 2, 3, "a",
                      State(2, 1, "1:pending,2:pending", 1, "a")),
                   {false, State(2, 2, "1:pending,2:pending", 2, "a"),
                    "stopped: 2 consecutive turns with no progress, 2 open"}},
        // Strikes never read above the cap (3/2).
        DecideCase{"strikes_capped",
                   In("completed", 0, "s", 1, 1, "a", State(2, 2, "s", 2, "a")),
                   {false, State(2, 2, "s", 3, "a"),
                    "stopped: 2 consecutive turns with no progress, 1 open"}},
        // 5. Round cap, with and without the stale suffix.
        DecideCase{"round_cap",
                   In("completed", 0, "new", 4, 4, "a", State(12, 0, "old", 0, "a")),
                   {false, State(12, 0, "old", 0, "a"), "stopped: round cap 12 reached, 4 open"}},
        DecideCase{"round_cap_with_stale_suffix",
                   In("completed", 0, "s", 1, 1, "a", State(3, 0, "s", 1, "a"), Config(3, 5)),
                   {false, State(3, 1, "s", 2, "a"),
                    "stopped: round cap 3 reached, 1 open, list unchanged for 2 settles"}},
        DecideCase{"round_cap_stale_one_no_suffix",
                   In("completed", 0, "s", 1, 1, "a", State(3, 0, "s", 0, "a"), Config(3, 5)),
                   {false, State(3, 1, "s", 1, "a"), "stopped: round cap 3 reached, 1 open"}},
        // Custom caps appear in the continue text.
        DecideCase{"custom_caps_in_text",
                   In("completed", 0, "x", 7, 9, "a", State(0, 0, "", 0, "a"), Config(5, 3)),
                   {true, State(1, 0, "x", 0, "a"), "continuing: round 1/5, 7 open"}}),
    [](const ::testing::TestParamInfo<DecideCase>& tp) { return std::string(tp.param.name); });

TEST(DecideTest, TwoUnchangedSettlesStopWithDefaults) {
  LoopState s;
  DecisionInput in = In("completed", 0, "1:pending", 1, 1, "h1", s);
  Decision d1 = Decide(in);
  ASSERT_TRUE(d1.continue_turn);
  in.state = d1.next;
  Decision d2 = Decide(in);
  ASSERT_TRUE(d2.continue_turn);  // strike 1
  in.state = d2.next;
  Decision d3 = Decide(in);
  EXPECT_FALSE(d3.continue_turn);
  EXPECT_EQ(d3.reason, "stopped: 2 consecutive turns with no progress, 1 open");
  // A stop keeps counters: the same anchor does not re-arm the budget.
  in.state = d3.next;
  Decision d4 = Decide(in);
  EXPECT_FALSE(d4.continue_turn);
  // A new human message does.
  in.anchor = "h2";
  EXPECT_TRUE(Decide(in).continue_turn);
}

TEST(DecideTest, RoundCapBoundsAChangingList) {
  DecisionInput in = In("completed", 0, "", 1, 1, "a", LoopState{});
  int continues = 0;
  for (int i = 0; i < 50; ++i) {
    in.signature = "1:pending#" + std::to_string(i);  // changes every settle
    Decision d = Decide(in);
    in.state = d.next;
    if (!d.continue_turn) {
      EXPECT_EQ(d.reason, "stopped: round cap 12 reached, 1 open");
      break;
    }
    ++continues;
  }
  EXPECT_EQ(continues, 12);
}

TEST(ClampConfigTest, DefaultsForNonObjects) {
  EXPECT_EQ(ClampConfig(Json()), LoopConfig{});
  EXPECT_EQ(ClampConfig(Json::array({1, 2})), LoopConfig{});
  EXPECT_EQ(ClampConfig(Json("x")), LoopConfig{});
  LoopConfig d;
  EXPECT_EQ(d.max_rounds, 12);
  EXPECT_EQ(d.max_strikes, 2);
  EXPECT_TRUE(d.inject_state);
  EXPECT_EQ(d.max_injected_tasks, 6);
}

TEST(ClampConfigTest, CeilingsAndFloors) {
  LoopConfig c = ClampConfig(Json::parse(
      R"({"maxRounds": 1e9, "maxStrikes": 1000, "maxInjectedTasks": 51, "injectState": false})"));
  EXPECT_EQ(c.max_rounds, 1000);
  EXPECT_EQ(c.max_strikes, 100);
  EXPECT_EQ(c.max_injected_tasks, 50);
  EXPECT_FALSE(c.inject_state);
  c = ClampConfig(Json::parse(R"({"maxRounds": 3.9, "maxStrikes": 1, "maxInjectedTasks": 1.5})"));
  EXPECT_EQ(c.max_rounds, 3);
  EXPECT_EQ(c.max_strikes, 1);
  EXPECT_EQ(c.max_injected_tasks, 1);
}

TEST(ClampConfigTest, InvalidValuesKeepDefaults) {
  Json raw = Json::object();
  raw["maxRounds"] = 0.5;
  raw["maxStrikes"] = "5";
  raw["maxInjectedTasks"] = -3;
  raw["injectState"] = "false";
  raw["unknown"] = 1;
  EXPECT_EQ(ClampConfig(raw), LoopConfig{});
  raw = Json::object();
  raw["maxRounds"] = std::numeric_limits<double>::infinity();
  raw["maxStrikes"] = true;
  raw["injectState"] = 0;
  raw["maxInjectedTasks"] = nullptr;
  EXPECT_EQ(ClampConfig(raw), LoopConfig{});
}

TEST(ClampConfigTest, SnakeCaseAliasesAndCamelWins) {
  LoopConfig c = ClampConfig(Json::parse(R"({"max_rounds": 4, "maxRounds": 7, "max_strikes": 3})"));
  EXPECT_EQ(c.max_rounds, 7);
  EXPECT_EQ(c.max_strikes, 3);
}

TEST(ClampConfigTest, StructForm) {
  LoopConfig in;
  in.max_rounds = 1'000'000'000;
  in.max_strikes = 0;
  in.max_injected_tasks = 99;
  LoopConfig c = ClampConfig(in);
  EXPECT_EQ(c.max_rounds, 1000);
  EXPECT_EQ(c.max_strikes, 2);
  EXPECT_EQ(c.max_injected_tasks, 50);
}

TEST(LoopStateJsonTest, RoundTripAndLenient) {
  LoopState s = State(3, 1, "1:pending", 2, "4:abc");
  EXPECT_EQ(LoopStateFromJson(LoopStateToJson(s)), s);
  EXPECT_EQ(LoopStateFromJson(Json::parse(R"({"rounds": "x", "anchor": 5})")), LoopState{});
}

}  // namespace
}  // namespace agentloop::todo
