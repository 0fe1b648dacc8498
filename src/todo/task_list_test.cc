#include "todo/task_list.h"

#include <gtest/gtest.h>

#include "agentloop/tool.h"

#include "todo/snapshot.h"
#include "todo/todo_tool.h"

namespace agentloop::todo {
namespace {

// Applies calls in order, each parsed from JSON; returns the last result.
class Session {
 public:
  TodoCallResult Call(const char* json) {
    TodoCallResult r = ApplyTodoCall(list_, Json::parse(json));
    list_ = r.list;
    return r;
  }
  const TaskList& list() const { return list_; }

 private:
  TaskList list_;
};

TEST(TodoReducerTest, CreateAssignsIdsAndSummaries) {
  Session s;
  TodoCallResult r = s.Call(R"({"action":"create","subject":"Write the parser"})");
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.content, "Created #1: Write the parser (pending)");
  r = s.Call(R"({"action":"create","subject":"Test it","description":"all of it",
                 "activeForm":"testing","blockedBy":[1],"owner":"me","metadata":{"k":1}})");
  EXPECT_EQ(r.content, "Created #2: Test it (pending)");
  ASSERT_EQ(s.list().tasks.size(), 2u);
  const Task& t = s.list().tasks[1];
  EXPECT_EQ(t.id, 2);
  EXPECT_EQ(t.status, TaskStatus::kPending);
  EXPECT_EQ(t.description, "all of it");
  EXPECT_EQ(t.active_form, "testing");
  EXPECT_EQ(t.blocked_by, std::vector<int64_t>{1});
  EXPECT_EQ(t.owner, "me");
  EXPECT_EQ(t.metadata, Json::parse(R"({"k":1})"));
  EXPECT_EQ(s.list().next_id, 3);
}

TEST(TodoReducerTest, SnapshotDetailsAreTheFullState) {
  Session s;
  s.Call(R"({"action":"create","subject":"A"})");
  TodoCallResult r = s.Call(R"({"action":"create","subject":"B","blockedBy":[1]})");
  Json want = Json::parse(R"({
    "action":"create",
    "params":{"action":"create","subject":"B","blockedBy":[1]},
    "tasks":[{"id":1,"subject":"A","status":"pending"},
             {"id":2,"subject":"B","status":"pending","blockedBy":[1]}],
    "nextId":3})");
  EXPECT_EQ(r.details, want);
  EXPECT_TRUE(IsSnapshotDetails(r.details));
  EXPECT_EQ(TaskListFromDetails(r.details), s.list());
}

TEST(TodoReducerTest, CreateValidation) {
  Session s;
  s.Call(R"({"action":"create","subject":"A"})");
  s.Call(R"({"action":"delete","id":1})");
  struct Case {
    const char* call;
    const char* error;
  } cases[] = {
      {R"({"action":"create"})", "subject required for create"},
      {R"({"action":"create","subject":"   "})", "subject required for create"},
      {R"({"action":"create","subject":"x","blockedBy":[9]})", "blockedBy: #9 not found"},
      {R"({"action":"create","subject":"x","blockedBy":[1]})", "blockedBy: #1 is deleted"},
      {R"({"action":"create","subject":"x","tasks":[{"subject":"y"}]})",
       "create requires subject or tasks[], not both"},
      {R"({"action":"create","tasks":[]})", "tasks[] must be non-empty"},
      {R"({"action":"create","tasks":[{"subject":"ok"},{"subject":""}]})",
       "tasks[1]: subject required for create"},
      {R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b","blockedBy":[3]}]})",
       "blockedBy: #3 is another item in this batch; create the prerequisite first, then the "
       "dependent with blockedBy"},
  };
  for (const Case& c : cases) {
    TaskList before = s.list();
    TodoCallResult r = s.Call(c.call);
    EXPECT_TRUE(r.is_error) << c.call;
    EXPECT_EQ(r.content, std::string("Error: ") + c.error) << c.call;
    EXPECT_EQ(r.details["error"], c.error);
    EXPECT_EQ(s.list(), before) << "a rejected call leaves the list unchanged: " << c.call;
    EXPECT_EQ(r.details["tasks"].size(), 1u);
  }
}

TEST(TodoReducerTest, BatchCreate) {
  Session s;
  TodoCallResult r =
      s.Call(R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b","owner":"x"}]})");
  EXPECT_EQ(r.content, "Created #1: a (pending)\nCreated #2: b (pending)");
  EXPECT_EQ(s.list().next_id, 3);
}

TEST(TodoReducerTest, Transitions) {
  const char* names[] = {"pending", "in_progress", "completed", "deleted"};
  // allowed[from][to]
  const bool allowed[4][4] = {{true, true, true, true},
                              {true, true, true, true},
                              {false, false, true, true},
                              {false, false, false, true}};
  for (int from = 0; from < 4; ++from) {
    for (int to = 0; to < 4; ++to) {
      EXPECT_EQ(IsTransitionValid(*ParseTaskStatus(names[from]), *ParseTaskStatus(names[to])),
                allowed[from][to])
          << names[from] << " -> " << names[to];
    }
  }
  Session s;
  s.Call(R"({"action":"create","subject":"A"})");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"status":"in_progress"})").content,
            "Updated #1 (pending \xE2\x86\x92 in_progress)");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"status":"completed"})").content,
            "Updated #1 (in_progress \xE2\x86\x92 completed)");
  TodoCallResult r = s.Call(R"({"action":"update","id":1,"status":"in_progress"})");
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content, "Error: illegal transition completed \xE2\x86\x92 in_progress");
  EXPECT_EQ(s.list().tasks[0].status, TaskStatus::kCompleted);
}

TEST(TodoReducerTest, UpdateNoChangeAndFieldUpdates) {
  Session s;
  s.Call(R"({"action":"create","subject":"A"})");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"status":"pending"})").content,
            "No change: #1 already matches the requested values (status: pending)");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"subject":"A"})").content,
            "No change: #1 already matches the requested values (status: pending)");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"subject":"B"})").content, "Updated #1");
  EXPECT_EQ(s.list().tasks[0].subject, "B");
  TodoCallResult r = s.Call(R"({"action":"update","id":1})");
  EXPECT_EQ(r.content,
            "Error: update requires at least one mutable field: subject, description, activeForm, "
            "status, owner, metadata, addBlockedBy, or removeBlockedBy");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"addBlockedBy":[]})").is_error, true);
  EXPECT_EQ(s.Call(R"({"action":"update","subject":"x"})").content,
            "Error: id required for update");
  EXPECT_EQ(s.Call(R"({"action":"update","id":7,"subject":"x"})").content, "Error: #7 not found");
}

TEST(TodoReducerTest, MetadataMergeAndNullDelete) {
  Session s;
  s.Call(R"({"action":"create","subject":"A","metadata":{"a":1,"b":2}})");
  s.Call(R"({"action":"update","id":1,"metadata":{"b":null,"c":3}})");
  EXPECT_EQ(s.list().tasks[0].metadata, Json::parse(R"({"a":1,"c":3})"));
  s.Call(R"({"action":"update","id":1,"metadata":{"a":null,"c":null}})");
  EXPECT_TRUE(s.list().tasks[0].metadata.is_null());
  EXPECT_FALSE(TaskToJson(s.list().tasks[0]).contains("metadata"));
}

TEST(TodoReducerTest, BlockedByEdgesSelfBlockAndCycles) {
  Session s;
  s.Call(R"({"action":"create","tasks":[{"subject":"a"},{"subject":"b"},{"subject":"c"}]})");
  EXPECT_EQ(s.Call(R"({"action":"update","id":2,"addBlockedBy":[1]})").content, "Updated #2");
  EXPECT_EQ(s.Call(R"({"action":"update","id":3,"addBlockedBy":[2, 2]})").content, "Updated #3");
  EXPECT_EQ(s.list().tasks[2].blocked_by, std::vector<int64_t>{2});
  TaskList before = s.list();
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"addBlockedBy":[3]})").content,
            "Error: addBlockedBy would create a cycle in the blockedBy graph");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"addBlockedBy":[1]})").content,
            "Error: cannot block #1 on itself");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"addBlockedBy":[42]})").content,
            "Error: addBlockedBy: #42 not found");
  // Validation before mutation: a status change in the same rejected call is not applied.
  EXPECT_TRUE(
      s.Call(R"({"action":"update","id":1,"status":"in_progress","addBlockedBy":[3]})").is_error);
  EXPECT_EQ(s.list(), before);
  s.Call(R"({"action":"delete","id":3})");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"addBlockedBy":[3]})").content,
            "Error: addBlockedBy: #3 is deleted");
  EXPECT_EQ(s.Call(R"({"action":"update","id":2,"removeBlockedBy":[1]})").content, "Updated #2");
  EXPECT_TRUE(s.list().tasks[1].blocked_by.empty());
  EXPECT_FALSE(TaskToJson(s.list().tasks[1]).contains("blockedBy"));
}

TEST(TodoReducerTest, ListGetDeleteClear) {
  Session s;
  s.Call(R"({"action":"create","subject":"a"})");
  s.Call(R"({"action":"create","subject":"b","blockedBy":[1],"description":"d","owner":"o"})");
  s.Call(R"({"action":"update","id":2,"status":"in_progress","activeForm":"doing b"})");
  EXPECT_EQ(s.Call(R"({"action":"list"})").content,
            "[pending] #1 a\n[in_progress] #2 b (doing b) \xE2\x9B\x93 #1");
  EXPECT_EQ(s.Call(R"({"action":"list","status":"pending"})").content, "[pending] #1 a");
  EXPECT_EQ(s.Call(R"({"action":"get","id":1})").content, "#1 [pending] a\n  blocks: #2");
  EXPECT_EQ(s.Call(R"({"action":"get","id":2})").content,
            "#2 [in_progress] b\n  description: d\n  activeForm: doing b\n  blockedBy: #1\n"
            "  owner: o");
  EXPECT_EQ(s.Call(R"({"action":"get"})").content, "Error: id required for get");
  EXPECT_EQ(s.Call(R"({"action":"get","id":5})").content, "Error: #5 not found");
  EXPECT_EQ(s.Call(R"({"action":"delete","id":1})").content, "Deleted #1: a");
  EXPECT_EQ(s.list().tasks.size(), 2u) << "delete keeps a tombstone";
  EXPECT_EQ(s.Call(R"({"action":"delete","id":1})").content, "Error: #1 is already deleted");
  EXPECT_EQ(s.Call(R"({"action":"delete"})").content, "Error: id required for delete");
  EXPECT_EQ(s.Call(R"({"action":"delete","id":9})").content, "Error: #9 not found");
  EXPECT_EQ(s.Call(R"({"action":"update","id":1,"status":"pending"})").content,
            "Error: illegal transition deleted \xE2\x86\x92 pending");
  EXPECT_EQ(s.Call(R"({"action":"list"})").content, "[in_progress] #2 b (doing b) \xE2\x9B\x93 #1");
  EXPECT_EQ(s.Call(R"({"action":"list","includeDeleted":true})").content,
            "[deleted] #1 a\n[in_progress] #2 b (doing b) \xE2\x9B\x93 #1");
  EXPECT_EQ(s.Call(R"({"action":"clear"})").content, "Cleared 2 tasks");
  EXPECT_EQ(s.list(), TaskList{});
  EXPECT_EQ(s.Call(R"({"action":"list"})").content, "No tasks");
  EXPECT_EQ(s.Call(R"({"action":"create","subject":"again"})").content,
            "Created #1: again (pending)");
}

TEST(TodoReducerTest, BadArgumentsAreInBand) {
  Session s;
  EXPECT_EQ(s.Call(R"({"action":"explode"})").content,
            "Error: unknown action \"explode\": use create, update, list, get, delete or clear");
  EXPECT_EQ(s.Call(R"({})").is_error, true);
  EXPECT_EQ(s.Call(R"({"action":"get","id":1.5})").content, "Error: id must be an integer");
  EXPECT_EQ(s.Call(R"({"action":"create","subject":"x","blockedBy":["a"]})").content,
            "Error: blockedBy must be an array of task ids");
  // 3.0 is an integer id.
  s.Call(R"({"action":"create","subject":"x"})");
  EXPECT_FALSE(s.Call(R"({"action":"get","id":1.0})").is_error);
}

TEST(TodoReducerTest, SummariesStripTerminalControls) {
  Session s;
  EXPECT_EQ(s.Call(R"({"action":"create","subject":"a\u001b[31mred\u001b[0m\nb\u202Ec"})").content,
            "Created #1: ared bc (pending)");
  // The stored subject is the model's text as given.
  EXPECT_EQ(s.list().tasks[0].subject,
            "a\x1b[31mred\x1b[0m\nb\xE2\x80\xAE"
            "c");
}

TEST(TodoToolTest, SpecAndSchema) {
  TodoTool tool;
  EXPECT_EQ(tool.spec().name, "todo");
  EXPECT_FALSE(tool.spec().mutates);
  EXPECT_FALSE(tool.spec().parallel_safe);
  const Json& schema = tool.spec().input_schema;
  EXPECT_EQ(schema["required"], Json::array({"action"}));
  EXPECT_EQ(schema["properties"]["action"]["enum"].size(), 6u);
  EXPECT_TRUE(
      ValidateAgainstSchema(Json::parse(R"({"action":"create","subject":"x"})"), schema).ok());
  EXPECT_FALSE(ValidateAgainstSchema(Json::parse(R"({"action":"fly"})"), schema).ok());
  EXPECT_FALSE(ValidateAgainstSchema(Json::parse(R"({"action":"get","id":"1"})"), schema).ok());
}

// A history in which the model called `todo` (and another tool) and the
// engine stored the results with details in meta.
Message Assistant(std::vector<ContentBlock> blocks) {
  Message m;
  m.role = Role::kAssistant;
  m.content = std::move(blocks);
  return m;
}

Message Results(std::vector<ContentBlock> blocks) {
  Message m;
  m.role = Role::kUser;
  m.content = std::move(blocks);
  return m;
}

ContentBlock ResultWithDetails(const std::string& id, const ToolOutput& out) {
  ContentBlock b = ContentBlock::ToolResult(id, out.content, out.is_error);
  if (!out.details.is_null()) b.meta = Json{{"details", out.details}};
  return b;
}

TEST(TodoToolTest, RunKeepsPerSessionStateAndReplays) {
  TodoTool tool;
  ToolContext a;
  a.session_id = "s1";
  ToolContext b;
  b.session_id = "s2";
  auto run = [&](ToolContext& ctx, const char* json) {
    ToolCall call{"c", "todo", Json::parse(json)};
    Result<ToolOutput> r = tool.Run(call, ctx);
    EXPECT_TRUE(r.ok());
    return *r;
  };
  ToolOutput o1 = run(a, R"({"action":"create","subject":"one"})");
  ToolOutput o2 = run(a, R"({"action":"create","subject":"two"})");
  run(b, R"({"action":"create","subject":"other"})");
  EXPECT_EQ(tool.List("s1").tasks.size(), 2u);
  EXPECT_EQ(tool.List("s2").tasks.size(), 1u);
  ToolOutput err = run(a, R"({"action":"get","id":99})");
  EXPECT_TRUE(err.is_error);
  EXPECT_EQ(err.details["error"], "#99 not found");

  // A transcript holding those results; the newest snapshot wins.
  std::vector<Message> history = {
      Message::User("plan it"),
      Assistant({ContentBlock::ToolUse("t1", "todo", Json::object())}),
      Results({ResultWithDetails("t1", o1)}),
      Assistant({ContentBlock::ToolUse("t2", "todo", Json::object()),
                 ContentBlock::ToolUse("r1", "read", Json::object())}),
      Results({ResultWithDetails("t2", o2), ContentBlock::ToolResult("r1", "file", false)}),
  };
  // A restart: a fresh tool learns the list from the history.
  TodoTool fresh;
  EXPECT_FALSE(fresh.Knows("s1"));
  EXPECT_TRUE(fresh.EnsureSeeded("s1", history));
  EXPECT_FALSE(fresh.EnsureSeeded("s1", {}));  // only once
  EXPECT_EQ(fresh.List("s1"), tool.List("s1"));
  ToolContext a2;
  a2.session_id = "s1";
  ToolCall call{"c", "todo", Json::parse(R"({"action":"create","subject":"three"})")};
  Result<ToolOutput> r = fresh.Run(call, a2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "Created #3: three (pending)");

  // Details from a tool that is not `todo` are ignored.
  ToolOutput fake = o1;
  fake.details["tasks"] = Json::array();
  history.push_back(Assistant({ContentBlock::ToolUse("x1", "other", Json::object())}));
  history.push_back(Results({ResultWithDetails("x1", fake)}));
  fresh.ReplayFromHistory("s1", history);
  EXPECT_EQ(fresh.List("s1").tasks.size(), 2u);
  EXPECT_EQ(fresh.List("s1").next_id, 3);

  // No snapshot: an empty list.
  fresh.ReplayFromHistory("s3", std::vector<Message>{Message::User("hi")});
  EXPECT_EQ(fresh.List("s3"), TaskList{});
}

TEST(TodoToolTest, CarriedSnapshotSurvivesCompaction) {
  ToolOutput o;
  TodoCallResult r = ApplyTodoCall(TaskList{}, Json::parse(R"({"action":"create","subject":"x"})"));
  o.details = r.details;
  std::vector<Message> dropped = {
      Assistant({ContentBlock::ToolUse("t1", "todo", Json::object())}),
      Results({ResultWithDetails("t1", o)}),
  };
  auto meta = CarriedSnapshotMeta(dropped);
  ASSERT_TRUE(meta.has_value());
  Message summary = Message::User("summary of earlier work");
  summary.tag = "compaction-summary";
  summary.content[0].meta = *meta;
  std::vector<Message> compacted = {summary, Message::Assistant("ok")};
  EXPECT_EQ(ReplayList(compacted), r.list);
  // An untagged (model- or human-visible) message cannot carry a snapshot.
  compacted[0].tag.clear();
  EXPECT_EQ(ReplayList(compacted), TaskList{});
  EXPECT_FALSE(CarriedSnapshotMeta(std::vector<Message>{Message::User("x")}).has_value());
}

}  // namespace
}  // namespace agentloop::todo
