// Events a running tool call reports about itself (ToolContext::report):
// both drivers hand them to the Turn while the call still runs, between its
// tool_call_begin and its tool_call_end, numbered without gaps; reports of a
// call that has ended, of an unknown call, or of a type that is not
// persisted are dropped.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "agentloop/event_data.h"
#include "agentloop/executor.h"
#include "agentloop/runner.h"

#include "core/testing/fakes.h"

namespace agentloop {
namespace {

using testing::Call;
using testing::FakeProvider;
using testing::FnTool;
using testing::Gate;
using testing::ObjectSchema;

using testing::kTimeout;

ToolSpec Spec(std::string name, bool parallel) {
  ToolSpec s;
  s.name = std::move(name);
  s.description = "test tool";
  s.input_schema = ObjectSchema({"x"});
  s.parallel_safe = parallel;
  return s;
}

// Collects events from whichever thread steps the turn; the test waits for
// one with a timeout.
class WatchingSink final : public EventSink {
 public:
  Status OnEvent(const Event& e) override {
    std::lock_guard lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
    return Status::Ok();
  }
  bool WaitFor(const std::function<bool(const std::vector<Event>&)>& ready) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return ready(events_); });
  }
  std::vector<Event> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

size_t Count(const std::vector<Event>& events, EventType type) {
  size_t n = 0;
  for (const Event& e : events) n += e.type == type ? 1 : 0;
  return n;
}

// Index of the first event of `type` whose data has `key` == `value`.
std::optional<size_t> Find(const std::vector<Event>& events, EventType type, const char* key,
                           const std::string& value) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].type == type && events[i].ToJson().value(key, std::string()) == value) return i;
  }
  return std::nullopt;
}

// A turn offering `tools`' tools, its events going to `sink`.
TurnConfig ConfigFor(const ToolRegistry& tools, EventSink& sink) {
  TurnConfig c;
  c.session_id = "sess";
  c.turn_id = "turn";
  c.tools = tools.Specs();
  c.sink = &sink;
  return c;
}

enum class Driver { kBlocking, kAsync };

// Runs a turn with either driver on another thread than the test's, so
// the test can watch the events while tools run.
class ToolReportTest : public ::testing::TestWithParam<Driver> {
 protected:
  ToolReportTest() {
    // Reports "started <id>" (and a delta, which is never persisted), then
    // waits on the latch, then reports "finished <id>".
    auto reporting = [this](const ToolCall& c, ToolContext& ctx) -> Result<ToolOutput> {
      if (!ctx.report) return ToolOutput::Error("no report function");
      {
        std::lock_guard lock(kept_mu_);
        kept_ = ctx.report;
      }
      ctx.report(MakeEvent(NoticeData{"info", "started " + c.id}));
      ctx.report(MakeEvent(TextDeltaData{"not persisted"}));
      if (!latch_.Wait()) return ToolOutput::Error("never released");
      ctx.report(MakeEvent(NoticeData{"info", "finished " + c.id}));
      return ToolOutput::Ok("ran " + c.id);
    };
    registry_.Add(std::make_shared<FnTool>(Spec("lone", false), reporting));
    registry_.Add(std::make_shared<FnTool>(Spec("side", true), reporting));
  }

  // Starts the turn; Finish() waits for its result.
  void Start(std::vector<ContentBlock> calls) {
    provider_.Calls(std::move(calls)).Text("done");
    turn_.emplace(ConfigFor(registry_, sink_), transcript_);
    ASSERT_TRUE(turn_->Start(TurnInput::User("go")).ok());
    deps_.provider = &provider_;
    deps_.tools = &registry_;
    if (GetParam() == Driver::kBlocking) {
      driver_ = std::jthread([this] { Done(RunTurn(*turn_, deps_, {})); });
    } else {
      RunTurnAsync(*turn_, deps_, pool_, "sess", {}, [this](Result<TurnResult> r) {
        EXPECT_TRUE(r.ok()) << r.error().ToString();
        Done(r.ok() ? std::move(*r) : TurnResult{});
      });
    }
  }

  TurnResult Finish() {
    std::unique_lock lock(done_mu_);
    EXPECT_TRUE(done_cv_.wait_for(lock, kTimeout, [&] { return result_.has_value(); }));
    return result_.value_or(TurnResult{});
  }

  // Waits until a notice with each of `texts` is in the log.
  bool WaitForNotices(const std::vector<std::string>& texts) {
    return sink_.WaitFor([&](const std::vector<Event>& ev) {
      for (const std::string& text : texts) {
        if (!Find(ev, EventType::kNotice, "text", text)) return false;
      }
      return true;
    });
  }

  // The calls are blocked: none has ended yet. Releases them, and returns
  // the log of the completed turn (checked gap-free).
  std::vector<Event> ReleaseAndFinish() {
    EXPECT_EQ(Count(sink_.events(), EventType::kToolCallEnd), 0u);
    latch_.Open();
    TurnResult r = Finish();
    EXPECT_EQ(r.stop, StopReason::kCompleted) << r.reason;
    std::vector<Event> events = sink_.events();
    ExpectGapFree(events);
    EXPECT_EQ(r.next_seq, events.back().seq + 1);
    return events;
  }

  ~ToolReportTest() override {
    latch_.Open();
    if (driver_.joinable()) driver_.join();
    pool_.Shutdown();
  }

  void Done(TurnResult r) {
    std::lock_guard lock(done_mu_);
    result_.emplace(std::move(r));
    done_cv_.notify_all();
  }

  // The persisted events carry seq 1, 2, ... without a gap, and no delta
  // was emitted (the tools' reported delta is dropped; the fake provider's
  // answer "done" is the only delta).
  static void ExpectGapFree(const std::vector<Event>& events) {
    uint64_t next = 1;
    for (const Event& e : events) {
      if (ShouldPersist(e.type)) {
        EXPECT_EQ(e.seq, next++) << EventTypeName(e.type);
      }
      if (e.type == EventType::kTextDelta) {
        EXPECT_EQ(e.ToJson().value("text", ""), "done");
      }
    }
  }

  // started <id> lies between the call's tool_call_begin and its
  // tool_call_end, finished <id> after started and before the end too.
  static void ExpectInsideTheCall(const std::vector<Event>& events, const std::string& id) {
    SCOPED_TRACE(id);
    auto begin = Find(events, EventType::kToolCallBegin, "id", id);
    auto started = Find(events, EventType::kNotice, "text", "started " + id);
    auto finished = Find(events, EventType::kNotice, "text", "finished " + id);
    auto end = Find(events, EventType::kToolCallEnd, "id", id);
    ASSERT_TRUE(begin && started && finished && end);
    EXPECT_LT(*begin, *started);
    EXPECT_LT(*started, *finished);
    EXPECT_LT(*finished, *end);
  }

  ToolRegistry registry_;
  FakeProvider provider_;
  WatchingSink sink_;
  Transcript transcript_;
  std::optional<Turn> turn_;
  RunnerDeps deps_;
  Gate latch_;
  std::mutex kept_mu_;
  std::function<void(Event)> kept_;  // a report function kept past its call
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::optional<TurnResult> result_;
  ThreadPoolExecutor pool_{ThreadPoolExecutorOptions{.step_threads = 2, .max_tool_calls = 4}};
  std::jthread driver_;
};

TEST_P(ToolReportTest, ALoneCallsReportIsEmittedWhileItStillRuns) {
  Start({Call("a", "lone", {{"x", "1"}})});
  // The tool is blocked on the latch: its report is in the log already.
  ASSERT_TRUE(WaitForNotices({"started a"})) << "the report did not arrive while the call ran";
  std::vector<Event> events = ReleaseAndFinish();
  ExpectInsideTheCall(events, "a");
}

TEST_P(ToolReportTest, TheCallsOfAParallelLaneReportWhileTheyAllRun) {
  Start({Call("a", "side", {{"x", "1"}}), Call("b", "side", {{"x", "2"}})});
  // Both calls run at once, both blocked: both reports arrive, in either
  // order.
  ASSERT_TRUE(WaitForNotices({"started a", "started b"}))
      << "the reports did not arrive while the lane ran";
  std::vector<Event> events = ReleaseAndFinish();
  ExpectInsideTheCall(events, "a");
  ExpectInsideTheCall(events, "b");
}

TEST_P(ToolReportTest, AReportAfterTheCallHasEndedIsDropped) {
  Start({Call("a", "lone", {{"x", "1"}})});
  latch_.Open();
  TurnResult r = Finish();
  ASSERT_EQ(r.stop, StopReason::kCompleted) << r.reason;
  if (driver_.joinable()) driver_.join();
  const size_t before = sink_.events().size();
  std::function<void(Event)> kept;
  {
    std::lock_guard lock(kept_mu_);
    kept = kept_;
  }
  ASSERT_TRUE(kept);
  // The turn is gone: a late report touches nothing (ASan would see it).
  turn_.reset();
  kept(MakeEvent(NoticeData{"info", "too late"}));
  pool_.Shutdown();  // runs whatever the report posted
  EXPECT_EQ(sink_.events().size(), before);
}

INSTANTIATE_TEST_SUITE_P(Drivers, ToolReportTest,
                         ::testing::Values(Driver::kBlocking, Driver::kAsync),
                         [](const ::testing::TestParamInfo<Driver>& p) {
                           return p.param == Driver::kBlocking ? std::string("RunTurn")
                                                               : std::string("RunTurnAsync");
                         });

// The Turn itself: only a call of the batch it waits for, only until that
// call's output is fed back, only persisted types.
TEST(TurnOnToolEvent, OnlyARunningCallsPersistedEventsAreEmitted) {
  testing::CollectingSink sink;
  Transcript transcript;
  ToolRegistry registry;
  registry.Add(std::make_shared<FnTool>(Spec("lone", false), [](const ToolCall&, ToolContext&) {
    return Result<ToolOutput>(ToolOutput::Ok("ok"));
  }));
  Turn turn(ConfigFor(registry, sink), transcript);
  ASSERT_TRUE(turn.Start(TurnInput::User("go")).ok());
  auto notice = [](const char* text) { return MakeEvent(NoticeData{"info", text}); };
  ASSERT_TRUE(std::holds_alternative<turn_action::CallModel>(turn.Next({})));
  turn.OnToolEvent("a", notice("before the batch"));
  ModelResponse resp;
  resp.content.push_back(Call("a", "lone", {{"x", "1"}}));
  resp.finish = FinishReason::kToolUse;
  turn.OnModelResult(std::move(resp));
  ASSERT_TRUE(std::holds_alternative<turn_action::RunTools>(turn.Next({})));
  turn.OnToolEvent("a", notice("running"));
  turn.OnToolEvent("zz", notice("another call"));
  turn.OnToolEvent("a", MakeEvent(TextDeltaData{"delta"}));
  std::vector<Result<ToolOutput>> outs;
  outs.emplace_back(ToolOutput::Ok("ok"));
  turn.OnToolResults(std::move(outs));
  turn.OnToolEvent("a", notice("after its end"));
  std::vector<std::string> notices;
  for (const Event& e : sink.OfType(EventType::kNotice)) {
    notices.push_back(e.ToJson().value("text", ""));
  }
  EXPECT_EQ(notices, std::vector<std::string>{"running"});
  EXPECT_TRUE(sink.OfType(EventType::kTextDelta).empty());
  auto running = sink.OfType(EventType::kNotice).at(0);
  auto end = sink.OfType(EventType::kToolCallEnd).at(0);
  EXPECT_EQ(running.seq + 1, end.seq);
}

}  // namespace
}  // namespace agentloop
