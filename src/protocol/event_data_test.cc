// The typed event data against docs/protocol.md: the "Types" table of the
// docs is parsed here (not copied), so a field added to a struct and not to
// the docs, or the other way round, fails this test.
#include "agentloop/event_data.h"

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "agentloop/events.h"

namespace agentloop {
namespace {

struct DocRow {
  bool persisted = false;
  bool commits = false;  // "yes, commits": a commit boundary
  std::set<std::string> required;
  std::set<std::string> optional;  // marked `name`?
};

std::vector<std::string> SplitCells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  cells.push_back(cell);
  return cells;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(' ');
  size_t e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The top-level field names of a "fields" cell: `name` or `name`?, outside
// any (...), {...} or [...] (those describe values, not fields).
DocRow ParseFields(const std::string& cell) {
  DocRow row;
  std::string top;
  int depth = 0;
  for (char c : cell) {
    if (c == '(' || c == '{' || c == '[') ++depth;
    if (depth == 0) top += c;
    if ((c == ')' || c == '}' || c == ']') && depth > 0) --depth;
  }
  for (size_t i = top.find('`'); i != std::string::npos; i = top.find('`', i)) {
    size_t end = top.find('`', i + 1);
    if (end == std::string::npos) break;
    std::string name = top.substr(i + 1, end - i - 1);
    bool optional = end + 1 < top.size() && top[end + 1] == '?';
    (optional ? row.optional : row.required).insert(name);
    i = end + 1;
  }
  return row;
}

std::map<std::string, DocRow> ReadTypesTable() {
  std::ifstream in(std::string(AL_DOCS_DIR) + "/protocol.md");
  EXPECT_TRUE(in.good()) << "cannot read " << AL_DOCS_DIR << "/protocol.md";
  std::map<std::string, DocRow> rows;
  std::string line;
  bool in_types = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_types = line == "## Types";
    if (!in_types || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells = SplitCells(line);
    // "", type, persisted, fields, ""
    EXPECT_EQ(cells.size(), 5u) << line;
    if (cells.size() != 5) continue;
    std::string type = Trim(cells[1]);
    type = type.substr(1, type.size() - 2);  // `name`
    DocRow row = ParseFields(cells[3]);
    const std::string persisted = Trim(cells[2]);
    EXPECT_TRUE(persisted == "yes" || persisted == "yes, commits" || persisted == "no") << line;
    row.persisted = persisted != "no";
    row.commits = persisted == "yes, commits";
    EXPECT_TRUE(rows.emplace(type, row).second) << "two rows for " << type;
  }
  return rows;
}

std::set<std::string> Keys(const Json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

// One sample per event type: every field set (`full`) and only what is
// always there (`minimal`).
struct Sample {
  EventType type;
  Json full;
  Json minimal;
  std::function<Status(const Json&)> parse;  // FromJson, for the round trip
  std::function<Json(const Json&)> reparse;  // ToJson(FromJson(j))
};

template <typename D>
Sample Make(const D& full, const D& minimal) {
  return Sample{D::kType, full.ToJson(), minimal.ToJson(),
                [](const Json& j) {
                  auto r = D::FromJson(j);
                  return r.ok() ? Status::Ok() : r.error();
                },
                [](const Json& j) {
                  auto r = D::FromJson(j);
                  return r.ok() ? r->ToJson() : Json();
                }};
}

std::vector<Sample> Samples() {
  PendingItem item{"pend-1",
                   PendingKind::kApproval,
                   "call-1",
                   "write",
                   Json{{"file_path", "a.txt"}},
                   "write is asked",
                   "",
                   ""};
  Checkpoint cp;
  cp.session_id = "s1";
  cp.turn_id = "t1";
  cp.tool_use_ids = {"call-1"};
  cp.outstanding = {item};
  Budget wall;
  wall.max_wall_time = std::chrono::milliseconds(5000);
  Message msg = Message::User("hi");
  msg.tag = "todo-loop:continue";
  // Designated initializers would leave fields out: -Wmissing-field-initializers.
  TurnBeginData begin;
  begin.input = "user";
  begin.command = CommandKind::kFix;
  begin.budget = wall;
  TurnBeginData begin_min;
  begin_min.input = "resume";
  BudgetCheckData check;
  check.tool_calls = 1;
  check.max_tokens = 9;
  check.ok = true;
  check.context_tokens = 12'000;
  check.context_window = 16'384;
  check.band = "nudge";
  StepBeginData step_begin;
  step_begin.step = 2;
  step_begin.max_output_tokens = 1024;
  step_begin.messages = 3;
  StepEndData step_end;
  step_end.step = 1;
  step_end.finish = FinishReason::kToolUse;
  step_end.has_usage = true;
  step_end.tokens = 5;
  DecisionData asked;
  asked.tool_use_id = "call-1";
  asked.tool = "write";
  asked.decision = Decision::kAsk;
  asked.by = "durable";
  asked.pending_id = "pend-1";
  DecisionData allowed;
  allowed.tool_use_id = "call-1";
  allowed.tool = "read";
  allowed.decision = Decision::kAllow;
  ToolCallBeginData call_begin;
  call_begin.id = "call-1";
  call_begin.tool = "read";
  call_begin.input = Json{{"file_path", "a"}};
  ToolCallBeginData call_begin_min = call_begin;
  call_begin_min.input = Json::object();
  ToolCallEndData call_end;
  call_end.id = "call-1";
  call_end.tool = "read";
  call_end.content_bytes = 3;
  call_end.summary = "x";
  call_end.diff = "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n";
  call_end.exit_code = 2;
  call_end.cancelled = true;
  PendingData pending;
  pending.items = {item};
  pending.checkpoint = cp;
  CompactionData compaction;
  compaction.from = 10;
  compaction.to = 6;
  compaction.attempt = 2;
  compaction.drop_prefix = 5;
  compaction.summary = msg;
  CompactionData compaction_min = compaction;
  compaction_min.summary.reset();
  compaction.kept = {Message::User("the request")};
  compaction.trigger = "threshold";
  compaction.summary_source = "model";
  compaction.tokens_before = 12'000;
  compaction.tokens_after = 3'000;
  ContinuationData continued;
  continued.by = "todo-loop";
  continued.continue_turn = true;
  continued.reason = "continuing: round 1/12, 2 open";
  continued.entries = 1;
  continued.model_calls = 2;
  continued.details = Json{{"round", 1}};
  ContinuationData continued_min;
  continued_min.by = "mine";
  SettingsData settings;
  settings.changes = {{"model", "a", "b", "--model"}};
  settings.settings = Json{{"model", "b"}};
  SettingsData settings_min;
  settings_min.settings = Json::object();
  SubagentStartedData sub_started{.tool_use_id = "call-1",
                                  .name = "reviewer",
                                  .path = "root/reviewer",
                                  .child_session_id = "s2",
                                  .reserved_tool_calls = 5,
                                  .reserved_tokens = 1000,
                                  .reserved_wall_time_ms = 60000};
  SubagentCompletedData sub_completed{
      .tool_use_id = "call-1",
      .name = "reviewer",
      .path = "root/reviewer",
      .child_session_id = "s2",
      .stop = "completed",
      .reason = "",
      .counters = TurnCounters{.tool_calls = 2, .tokens = 300, .model_calls = 0, .usage = {}}};
  TurnEndData end;
  end.stop = StopReason::kPendingApproval;
  end.pending = {item};
  return {
      Make(begin, begin_min),
      Make(check, BudgetCheckData{}),
      Make(step_begin, StepBeginData{}),
      Make(TextDeltaData{"a"}, TextDeltaData{}),
      Make(ThinkingDeltaData{"b"}, ThinkingDeltaData{}),
      Make(RetryData{.attempt = 2, .max_attempts = 6, .delay_ms = 2000, .reason = "HTTP 429"},
           RetryData{}),
      Make(step_end, StepEndData{}),
      Make(MessageData{msg}, MessageData{Message::Assistant("ok")}),
      Make(asked, allowed),
      Make(call_begin, call_begin_min),
      Make(call_end, ToolCallEndData{}),
      Make(pending, PendingData{}),
      Make(compaction, compaction_min),
      Make(HookErrorData{"h", "turn_end", "timed out"}, HookErrorData{}),
      Make(NoticeData{"warning", "careful"}, NoticeData{}),
      Make(continued, continued_min),
      Make(settings, settings_min),
      Make(sub_started, SubagentStartedData{}),
      Make(sub_completed, SubagentCompletedData{}),
      Make(end, TurnEndData{}),
  };
}

TEST(EventDataTest, EveryTypeIsDocumentedWithTheFieldsItsStructWrites) {
  std::map<std::string, DocRow> docs = ReadTypesTable();
  std::vector<Sample> samples = Samples();
  std::set<std::string> covered;
  for (const Sample& s : samples) {
    std::string name(EventTypeName(s.type));
    SCOPED_TRACE(name);
    covered.insert(name);
    auto row = docs.find(name);
    ASSERT_NE(row, docs.end()) << "no row in docs/protocol.md";
    EXPECT_EQ(row->second.persisted, ShouldPersist(s.type));
    EXPECT_EQ(row->second.commits, IsCommitBoundary(s.type));
    std::set<std::string> all = row->second.required;
    all.insert(row->second.optional.begin(), row->second.optional.end());
    EXPECT_EQ(Keys(s.full), all) << DumpJson(s.full);
    EXPECT_EQ(Keys(s.minimal), row->second.required) << DumpJson(s.minimal);
  }
  for (const auto& [name, row] : docs) {
    EXPECT_TRUE(covered.count(name)) << "documented type without a struct sample: " << name;
    EXPECT_TRUE(ParseEventType(name).has_value()) << "documented type unknown: " << name;
  }
}

TEST(EventDataTest, FromJsonReadsWhatToJsonWrites) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(EventTypeName(s.type));
    for (const Json& j : {s.full, s.minimal}) {
      Status st = s.parse(j);
      ASSERT_TRUE(st.ok()) << st.ToString() << " " << DumpJson(j);
      EXPECT_EQ(s.reparse(j), j);
      Result<EventData> data = EventDataFromJson(s.type, j);
      ASSERT_TRUE(data.ok()) << data.error().ToString();
      EXPECT_EQ(EventTypeOf(*data), s.type);
    }
  }
}

// A documented field missing or of the wrong type is named; unknown fields
// are ignored (additive changes within v1).
TEST(EventDataTest, FromJsonNamesTheFieldThatIsWrong) {
  for (const Sample& s : Samples()) {
    std::string name(EventTypeName(s.type));
    SCOPED_TRACE(name);
    Json extra = s.full;
    extra["added_later"] = 1;
    EXPECT_TRUE(s.parse(extra).ok());
    for (auto it = s.minimal.begin(); it != s.minimal.end(); ++it) {
      Json missing = s.minimal;
      missing.erase(it.key());
      Status st = s.parse(missing);
      ASSERT_FALSE(st.ok()) << it.key();
      EXPECT_EQ(st.code(), Code::kInvalidArgument);
      EXPECT_NE(st.message().find(name + ": field '" + it.key() + "'"), std::string::npos)
          << st.ToString();
    }
  }
  auto bad = StepEndData::FromJson(Json{{"step", "one"},
                                        {"finish", "stop"},
                                        {"usage", Json::object()},
                                        {"has_usage", false},
                                        {"tokens", 1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "step_end: field 'step': expected an integer");
  auto stop = TurnEndData::FromJson(Json{{"stop", "exploded"},
                                         {"reason", ""},
                                         {"final_text", ""},
                                         {"truncated", false},
                                         {"counters", Json::object()},
                                         {"pending", Json::array()}});
  ASSERT_FALSE(stop.ok());
  EXPECT_EQ(stop.error().message(), "turn_end: field 'stop': unknown value 'exploded'");
}

}  // namespace
}  // namespace agentloop
