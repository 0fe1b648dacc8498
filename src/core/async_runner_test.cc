// RunTurnAsync against RunTurn: the same script, tools and approver give the
// same event log and transcript, whether the model call is native
// asynchronous (answered from another thread) or the blocking default run
// as a tool-pool call; steps never overlap, nothing runs while the model
// call is outstanding, and `done` comes exactly once.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "agentloop/event_data.h"
#include "agentloop/runner.h"

#include "core/testing/fakes.h"

namespace agentloop {
namespace {

using testing::Call;
using testing::CollectingSink;
using testing::FakeProvider;
using testing::FnTool;
using testing::ObjectSchema;
using testing::ScriptedApprover;

using testing::kTimeout;

using testing::Spec;

// An executor the test pumps on its own thread: nothing runs unless the
// test says so, and what is queued can be inspected.
class ManualExecutor : public TurnExecutor {
 public:
  void Post(const std::string& key, std::function<void()> fn) override {
    std::lock_guard lock(mu_);
    keys_.push_back(key);
    steps_.push_back(std::move(fn));
  }
  void PostTool(const std::string& key, std::function<void()> fn) override {
    std::lock_guard lock(mu_);
    keys_.push_back(key);
    tools_.push_back(std::move(fn));
    max_tools_queued_ = std::max(max_tools_queued_, tools_.size());
  }
  // Runs one queued step, else every queued tool call; false when idle.
  bool RunSome() {
    std::function<void()> step;
    std::deque<std::function<void()>> tools;
    {
      std::lock_guard lock(mu_);
      if (!steps_.empty()) {
        step = std::move(steps_.front());
        steps_.pop_front();
      } else {
        tools.swap(tools_);
      }
    }
    if (step) {
      step();
      return true;
    }
    for (auto& t : tools) t();
    return !tools.empty();
  }
  size_t queued_steps() {
    std::lock_guard lock(mu_);
    return steps_.size();
  }
  size_t max_tools_queued() {
    std::lock_guard lock(mu_);
    return max_tools_queued_;
  }
  std::vector<std::string> keys() {
    std::lock_guard lock(mu_);
    return keys_;
  }

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> steps_, tools_;
  size_t max_tools_queued_ = 0;
  std::vector<std::string> keys_;
};

// A FakeProvider with a native asynchronous path: CompleteAsync only records
// the call; the test answers it (from another thread, as an I/O thread
// would).
class AsyncFakeProvider : public FakeProvider {
 public:
  bool CompletesAsync() const override { return true; }
  void CompleteAsync(const ModelRequest& request, StreamSink& sink, std::stop_token stop,
                     CompletionCallback done) override {
    std::lock_guard lock(mu_);
    EXPECT_FALSE(pending_.has_value()) << "two model calls outstanding";
    pending_.emplace(Pending{&request, &sink, std::move(stop), std::move(done)});
  }
  bool outstanding() {
    std::lock_guard lock(mu_);
    return pending_.has_value();
  }
  // Answers the outstanding call on a thread of its own (deltas included).
  void AnswerFromAnotherThread() {
    Pending p;
    {
      std::lock_guard lock(mu_);
      ASSERT_TRUE(pending_.has_value());
      p = std::move(*pending_);
      pending_.reset();
    }
    std::thread io([&] { p.done(Complete(*p.request, *p.sink, p.stop)); });
    io.join();
  }

 private:
  struct Pending {
    const ModelRequest* request = nullptr;
    StreamSink* sink = nullptr;
    std::stop_token stop;
    CompletionCallback done;
  };
  std::mutex mu_;
  std::optional<Pending> pending_;
};

// Normalises what differs between two runs by design: pending ids are
// random (they appear in decisions, pending items, checkpoints, turn_end).
std::vector<Json> Log(const std::vector<Event>& events) {
  std::vector<std::string> ids;
  for (const Event& e : events) {
    if (e.ToJson().contains("pending_id"))
      ids.push_back(e.ToJson()["pending_id"].get<std::string>());
  }
  std::vector<Json> out;
  for (const Event& e : events) {
    std::string text = e.ToJson().dump();
    for (const std::string& id : ids) {
      for (size_t p; !id.empty() && (p = text.find(id)) != std::string::npos;) {
        text.replace(p, id.size(), "P");
      }
    }
    out.push_back(Json::parse(text));
  }
  return out;
}

struct Scenario {
  std::string name;
  std::function<void(FakeProvider&)> script;
  std::vector<ApprovalDecision> answers;
};

class AsyncRunnerTest : public ::testing::TestWithParam<bool> {
 protected:
  AsyncRunnerTest() {
    registry_.Add(
        std::make_shared<FnTool>(Spec("echo", false, true), [](const ToolCall& c, ToolContext&) {
          return Result<ToolOutput>(ToolOutput::Ok("echo:" + c.input.value("x", std::string())));
        }));
    registry_.Add(std::make_shared<FnTool>(
        Spec("write", true, false),
        [](const ToolCall&, ToolContext&) { return Result<ToolOutput>(ToolOutput::Ok("wrote")); }));
    // Reports an event about itself while it runs (ToolContext::report).
    registry_.Add(std::make_shared<FnTool>(
        Spec("tell", false, false), [](const ToolCall& c, ToolContext& ctx) {
          if (ctx.report) ctx.report(MakeEvent(NoticeData{"info", "told " + c.id}));
          return Result<ToolOutput>(ToolOutput::Ok("told"));
        }));
    registry_.Add(std::make_shared<FnTool>(Spec("boom", false, false),
                                           [](const ToolCall&, ToolContext&) -> Result<ToolOutput> {
                                             throw std::runtime_error("kaboom");
                                           }));
  }

  TurnConfig Config(CollectingSink& sink) {
    TurnConfig c;
    c.session_id = "sess";
    c.turn_id = "turn";
    c.command = CommandKind::kCode;
    c.budget = DefaultBudget(CommandKind::kCode);
    c.tools = registry_.Specs();
    c.sink = &sink;
    c.system_prompt = "sys";
    c.now_ms = [] { return int64_t{1700000000000}; };
    return c;
  }

  struct Run {
    TurnResult result;
    std::vector<Event> events;
    std::vector<Message> transcript;
  };

  Run Blocking(const Scenario& s) {
    FakeProvider provider;
    s.script(provider);
    ScriptedApprover approver;
    approver.answers.assign(s.answers.begin(), s.answers.end());
    CollectingSink sink;
    Transcript transcript;
    Turn turn(Config(sink), transcript);
    EXPECT_TRUE(turn.Start(TurnInput::User("go")).ok());
    RunnerDeps deps;
    deps.provider = &provider;
    deps.tools = &registry_;
    deps.approver = &approver;
    Run r{RunTurn(turn, deps, {}), sink.events, {}};
    r.transcript.assign(transcript.messages().begin(), transcript.messages().end());
    return r;
  }

  // Pumps the manual executor until `done`; with a native provider, answers
  // each model call from another thread once nothing else can run.
  Run Async(const Scenario& s, bool native, ManualExecutor& ex, std::stop_source* stop = nullptr) {
    AsyncFakeProvider async_provider;
    FakeProvider blocking_provider;
    FakeProvider& provider = native ? async_provider : blocking_provider;
    s.script(provider);
    ScriptedApprover approver;
    approver.answers.assign(s.answers.begin(), s.answers.end());
    CollectingSink sink;
    Transcript transcript;
    Turn turn(Config(sink), transcript);
    EXPECT_TRUE(turn.Start(TurnInput::User("go")).ok());
    RunnerDeps deps;
    deps.provider = &provider;
    deps.tools = &registry_;
    deps.approver = &approver;
    int done_calls = 0;
    std::optional<Result<TurnResult>> result;
    const size_t started_with = sink.events.size();  // Turn::Start's events
    RunTurnAsync(turn, deps, ex, "sess", stop ? stop->get_token() : std::stop_token(),
                 [&](Result<TurnResult> r) {
                   ++done_calls;
                   result.emplace(std::move(r));
                 });
    EXPECT_EQ(ex.queued_steps(), 1u) << "the first step must be posted, not run inline";
    EXPECT_EQ(sink.events.size(), started_with);
    for (int guard = 0; guard < 10000 && !result; ++guard) {
      if (ex.RunSome()) continue;
      if (native && async_provider.outstanding()) {
        // The model call is outstanding: no step may be queued or running.
        EXPECT_EQ(ex.queued_steps(), 0u);
        if (stop != nullptr) stop->request_stop();
        async_provider.AnswerFromAnotherThread();
        continue;
      }
      ADD_FAILURE() << "the turn stalled: nothing queued, nothing outstanding";
      break;
    }
    while (ex.RunSome()) {
    }
    EXPECT_EQ(done_calls, 1);
    Run r;
    if (result && result->ok()) r.result = **result;
    if (result && !result->ok()) ADD_FAILURE() << result->error().ToString();
    r.events = sink.events;
    r.transcript.assign(transcript.messages().begin(), transcript.messages().end());
    return r;
  }

  void ExpectSame(const Scenario& s) {
    SCOPED_TRACE(s.name);
    Run want = Blocking(s);
    ManualExecutor ex;
    Run got = Async(s, GetParam(), ex);
    EXPECT_EQ(got.result.stop, want.result.stop);
    EXPECT_EQ(got.result.reason, want.result.reason);
    EXPECT_EQ(got.result.final_text, want.result.final_text);
    EXPECT_EQ(got.result.next_seq, want.result.next_seq);
    EXPECT_EQ(got.result.pending.size(), want.result.pending.size());
    EXPECT_EQ(got.result.checkpoint.has_value(), want.result.checkpoint.has_value());
    EXPECT_EQ(Log(got.events), Log(want.events));
    EXPECT_EQ(got.transcript.size(), want.transcript.size());
    for (const std::string& key : ex.keys()) EXPECT_EQ(key, "sess");
    last_max_tools_queued_ = ex.max_tools_queued();
  }

  ToolRegistry registry_;
  size_t last_max_tools_queued_ = 0;
};

TEST_P(AsyncRunnerTest, ToolBatchWithAParallelLaneAndAnApprovalGivesTheSameLog) {
  Scenario s{"batch",
             [](FakeProvider& p) {
               p.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "echo", {{"x", "2"}}),
                        Call("c", "write", {{"x", "f"}}), Call("d", "echo", {{"x", "3"}})})
                   .Text("all done");
             },
             {ApprovalDecision::Allow("test")}};
  ExpectSame(s);
  // The parallel lane's two calls were queued together; the lanes after it
  // one at a time (the blocking model call, when not native, is one more).
  EXPECT_EQ(last_max_tools_queued_, 2u);
}

TEST_P(AsyncRunnerTest, EventsToolsReportGiveTheSameLog) {
  Scenario s{"report",
             [](FakeProvider& p) {
               p.Calls({Call("a", "tell", {{"x", "1"}}), Call("b", "echo", {{"x", "2"}}),
                        Call("c", "tell", {{"x", "3"}})})
                   .Text("all told");
             },
             {}};
  ExpectSame(s);
  // Each report is in the log, once (the same in both, as checked above).
  size_t told = 0;
  for (const Event& e : Blocking(s).events) {
    told +=
        e.type == EventType::kNotice && e.ToJson().value("text", "").starts_with("told ") ? 1 : 0;
  }
  EXPECT_EQ(told, 2u);
}

TEST_P(AsyncRunnerTest, DenyGivesTheSameLog) {
  ExpectSame(
      {"deny",
       [](FakeProvider& p) {
         p.Calls({Call("a", "write", {{"x", "f"}}), Call("b", "echo", {{"x", "2"}})}).Text("never");
       },
       {ApprovalDecision::Deny("not today", "test")}});
}

TEST_P(AsyncRunnerTest, PauseGivesTheSameLogAndCheckpoint) {
  ExpectSame({"pause",
              [](FakeProvider& p) {
                p.Calls({Call("a", "echo", {{"x", "1"}}), Call("b", "write", {{"x", "f"}})});
              },
              {ApprovalDecision::Defer("durable")}});
}

TEST_P(AsyncRunnerTest, ThrowingToolUnknownToolAndModelErrorGiveTheSameLog) {
  ExpectSame({"errors",
              [](FakeProvider& p) {
                p.Calls({Call("a", "boom", {{"x", "1"}}), Call("b", "nope", {{"x", "1"}})})
                    .Push(Unavailable("model down"));
              },
              {}});
}

// Only the native path has a call outstanding while nothing runs.
class AsyncRunnerStop : public AsyncRunnerTest {};

TEST_F(AsyncRunnerStop, StopWhileTheModelCallIsOutstandingEndsAbortedOnce) {
  ManualExecutor ex;
  std::stop_source stop;
  Run r = Async({"stop", [](FakeProvider& p) { p.Text("never seen"); }, {}}, /*native=*/true, ex,
                &stop);
  EXPECT_EQ(r.result.stop, StopReason::kAborted) << r.result.reason;
}

INSTANTIATE_TEST_SUITE_P(Paths, AsyncRunnerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? std::string("NativeAsync")
                                              : std::string("BlockingDefault");
                         });

// A provider whose CompleteAsync throws: the turn fails as RunTurn's does,
// and `done` comes once.
class ThrowingProvider : public FakeProvider {
 public:
  bool CompletesAsync() const override { return true; }
  void CompleteAsync(const ModelRequest&, StreamSink&, std::stop_token,
                     CompletionCallback) override {
    throw std::runtime_error("socket exploded");
  }
};

TEST(AsyncRunner, ProviderThatThrowsFailsTheTurn) {
  ToolRegistry registry;
  ThrowingProvider provider;
  CollectingSink sink;
  Transcript transcript;
  TurnConfig cfg;
  cfg.session_id = "s";
  cfg.turn_id = "t";
  cfg.sink = &sink;
  Turn turn(cfg, transcript);
  ASSERT_TRUE(turn.Start(TurnInput::User("go")).ok());
  RunnerDeps deps;
  deps.provider = &provider;
  deps.tools = &registry;
  ManualExecutor ex;
  int calls = 0;
  std::optional<Result<TurnResult>> result;
  RunTurnAsync(turn, deps, ex, "s", {}, [&](Result<TurnResult> r) {
    ++calls;
    result.emplace(std::move(r));
  });
  while (ex.RunSome()) {
  }
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(result->ok()) << result->error().ToString();
  EXPECT_EQ((*result)->stop, StopReason::kFailed);
  EXPECT_NE((*result)->reason.find("socket exploded"), std::string::npos) << (*result)->reason;
}

// On a real pool: steps never overlap (the sink would see two at once), the
// parallel lane's calls do run together, and the log is RunTurn's.
TEST(AsyncRunner, OnAThreadPoolStepsNeverOverlap) {
  ToolRegistry registry;
  // Both calls of the parallel lane must be running at once to finish.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  registry.Add(std::make_shared<FnTool>(
      Spec("meet", false, true), [&](const ToolCall&, ToolContext&) -> Result<ToolOutput> {
        std::unique_lock lock(mu);
        ++arrived;
        cv.notify_all();
        if (!cv.wait_for(lock, kTimeout, [&] { return arrived >= 2; })) {
          return ToolOutput::Error("the other call of the lane never ran alongside");
        }
        return ToolOutput::Ok("met");
      }));
  struct OverlapSink : CollectingSink {
    std::atomic<bool> inside{false};
    std::atomic<int> overlaps{0};
    Status OnEvent(const Event& e) override {
      if (inside.exchange(true)) ++overlaps;
      Status s = CollectingSink::OnEvent(e);
      inside = false;
      return s;
    }
  } sink;
  FakeProvider provider;
  provider.Calls({Call("a", "meet", {{"x", "1"}}), Call("b", "meet", {{"x", "2"}})}).Text("ok");
  Transcript transcript;
  TurnConfig cfg;
  cfg.session_id = "s";
  cfg.turn_id = "t";
  cfg.tools = registry.Specs();
  cfg.sink = &sink;
  Turn turn(cfg, transcript);
  ASSERT_TRUE(turn.Start(TurnInput::User("go")).ok());
  RunnerDeps deps;
  deps.provider = &provider;
  deps.tools = &registry;
  ThreadPoolExecutor pool(ThreadPoolExecutorOptions{.step_threads = 4, .max_tool_calls = 4});
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::optional<Result<TurnResult>> result;
  RunTurnAsync(turn, deps, pool, "s", {}, [&](Result<TurnResult> r) {
    std::lock_guard lock(done_mu);
    result.emplace(std::move(r));
    done_cv.notify_all();
  });
  {
    std::unique_lock lock(done_mu);
    ASSERT_TRUE(done_cv.wait_for(lock, kTimeout, [&] { return result.has_value(); }));
  }
  pool.Shutdown();
  ASSERT_TRUE(result->ok());
  EXPECT_EQ((*result)->stop, StopReason::kCompleted) << (*result)->reason;
  EXPECT_EQ((*result)->final_text, "ok");
  EXPECT_EQ(sink.overlaps.load(), 0);
  auto ends = sink.OfType(EventType::kToolCallEnd);
  ASSERT_EQ(ends.size(), 2u);
  for (const auto& e : ends) EXPECT_FALSE(e.ToJson().value("is_error", true)) << e.ToJson().dump();
}

}  // namespace
}  // namespace agentloop
