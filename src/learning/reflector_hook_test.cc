#include "learning/reflector_hook.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include <gtest/gtest.h>

#include "base/ids.h"

namespace agentloop::learning {
namespace {

using namespace std::chrono_literals;
constexpr auto kWait = 10s;  // an upper bound for waits on events, never expected

// Records events from several threads, in order.
class Log {
 public:
  void Add(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  bool WaitFor(const std::string& e) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(
        lock, kWait, [&] { return std::find(events_.begin(), events_.end(), e) != events_.end(); });
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  long Index(const std::string& e) const {
    auto ev = events();
    auto it = std::find(ev.begin(), ev.end(), e);
    return it == ev.end() ? -1 : it - ev.begin();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

struct SeenRequest {
  std::string model;
  std::string system;
  std::vector<Message> messages;
  size_t tools = 0;
  int64_t max_output_tokens = 0;
};

// Answers every request with `reply` (or `error`), recording requests.
class ReplyProvider : public ModelProvider {
 public:
  explicit ReplyProvider(std::string reply) : reply_(std::move(reply)) {}
  std::string_view name() const override { return "reply"; }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink& sink,
                                 std::stop_token stop) override {
    (void)sink;
    (void)stop;
    SeenRequest seen{
        request.model, request.system, {}, request.tools.size(), request.max_output_tokens};
    request.ForEachMessage([&](const Message& m) { seen.messages.push_back(m); });
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(std::move(seen));
    if (!error.ok()) return error;
    ModelResponse r;
    r.content.push_back(ContentBlock::Text(reply_));
    return r;
  }
  std::vector<SeenRequest> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  Status error;

 private:
  std::string reply_;
  mutable std::mutex mu_;
  std::vector<SeenRequest> seen_;
};

// Blocks until its stop token fires, logging "provider_entered" and
// "provider_released"; then answers with a valid proposal (which must be
// discarded, since the stop fired).
class BlockingProvider : public ModelProvider {
 public:
  explicit BlockingProvider(Log& log) : log_(log) {}
  std::string_view name() const override { return "blocking"; }
  Result<ModelResponse> Complete(const ModelRequest&, StreamSink&, std::stop_token stop) override {
    log_.Add("provider_entered");
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, stop, [] { return false; });
    log_.Add("provider_released");
    ModelResponse r;
    r.content.push_back(
        ContentBlock::Text(R"([{"kind":"memory","title":"late","nudge":"too late"}])"));
    return r;
  }

 private:
  Log& log_;
};

// A timer the test fires by hand ("30 s have passed").
class ManualTimer {
 public:
  bool Wait(std::stop_token stop) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, stop, [&] { return fired_; });
    return fired_;
  }
  void Fire() {
    std::lock_guard<std::mutex> lock(mu_);
    fired_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool fired_ = false;
};

constexpr const char* kOneProposal =
    R"([{"kind":"memory","title":"Tests need TZ=UTC","nudge":"Consider saving that the tests need TZ=UTC."}])";

// A turn with `results` tool results (one tool call each) and a final answer.
std::vector<Message> BusyHistory(int results, const std::string& prompt = "run the tests") {
  std::vector<Message> h;
  h.push_back(Message::User("earlier"));
  h.push_back(Message::Assistant("earlier answer"));
  h.push_back(Message::User(prompt));
  for (int i = 0; i < results; ++i) {
    Message a;
    a.role = Role::kAssistant;
    std::string id = "call_" + std::to_string(i);
    a.content = {ContentBlock::ToolUse(id, "bash", Json{{"command", "make test"}})};
    h.push_back(a);
    Message r;
    r.role = Role::kUser;
    r.content = {ContentBlock::ToolResult(id, i == 0 ? "FAIL: TZ unset" : "ok", i == 0)};
    h.push_back(r);
  }
  h.push_back(Message::Assistant("All tests pass with TZ=UTC."));
  return h;
}

TurnEndInfo InfoFor(const std::vector<Message>& history, int model_calls) {
  TurnEndInfo info;
  info.history = history;
  info.counters.model_calls = model_calls;
  return info;
}

ReflectorOptions Opts(std::shared_ptr<ModelProvider> provider) {
  ReflectorOptions o;
  o.provider = std::move(provider);
  o.model = "m";
  return o;
}

HookContext Ctx(const std::string& session, const std::string& turn = "turn_1") {
  HookContext c;
  c.session_id = session;
  c.turn_id = turn;
  return c;
}

ModelRequest RequestWithSystem(const std::string& system) {
  ModelRequest r;
  r.system = system;
  return r;
}

TEST(ReflectorHookTest, BusyTurnReflectsOnceAndNudgesTheNextRequestOnce) {
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  ReflectorOptions opt;
  opt.provider = provider;
  opt.model = "gpt-test";
  ReflectorHook hook(opt);

  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(hook.WaitForIdle(kWait));

  auto seen = provider->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].model, "gpt-test");
  EXPECT_EQ(seen[0].system, kReflectSystemPrompt);
  EXPECT_EQ(seen[0].max_output_tokens, 1200);
  EXPECT_EQ(seen[0].tools, 0u);
  ASSERT_EQ(seen[0].messages.size(), 1u);
  EXPECT_EQ(seen[0].messages[0].role, Role::kUser);
  EXPECT_EQ(seen[0].messages[0].JoinedText(),
            "USER: run the tests\nTOOLS: bash×5\nERRORS: FAIL: TZ unset\n"
            "ASSISTANT: All tests pass with TZ=UTC.");

  std::string expected_nudge = BuildNudgeBlock(std::vector<Proposal>{
      {"memory", "Tests need TZ=UTC", "Consider saving that the tests need TZ=UTC."}});
  EXPECT_EQ(hook.PendingNudge("s1"), expected_nudge);

  ModelRequest first = RequestWithSystem("SYSTEM");
  hook.BeforeModelCall(Ctx("s1", "turn_2"), first);
  EXPECT_EQ(first.system, "SYSTEM" + expected_nudge);
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);

  ModelRequest second = RequestWithSystem("SYSTEM");
  hook.BeforeModelCall(Ctx("s1", "turn_2"), second);
  EXPECT_EQ(second.system, "SYSTEM");

  // Another session never sees it.
  ModelRequest other = RequestWithSystem("SYSTEM");
  hook.BeforeModelCall(Ctx("s2"), other);
  EXPECT_EQ(other.system, "SYSTEM");
}

TEST(ReflectorHookTest, QuietTurnSpendsNothing) {
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  ReflectorHook hook(Opts(provider));
  auto history = BusyHistory(4);
  // 4 results, but the first is an is_error result: still not an engine error.
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 5));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 0u);
  EXPECT_EQ(hook.ReflectionsUsed("s1"), 0);

  // Eight model calls pass the gate.
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 8));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 1u);
}

TEST(ReflectorHookTest, FailedTurnPassesTheGate) {
  auto provider = std::make_shared<ReplyProvider>("[]");
  ReflectorHook hook(Opts(provider));
  std::vector<Message> history = {Message::User("hi")};
  TurnEndInfo info = InfoFor(history, 1);
  info.stop = StopReason::kFailed;
  info.reason = "unavailable: 503";
  hook.OnTurnEnd(Ctx("s1"), info);
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  ASSERT_EQ(provider->seen().size(), 1u);
  EXPECT_EQ(provider->seen()[0].messages[0].JoinedText(), "USER: hi\nERRORS: unavailable: 503");
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);  // [] -> no nudge
}

TEST(ReflectorHookTest, AtMostOneReflectionPerSession) {
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  ReflectorHook hook(Opts(provider));
  auto history = BusyHistory(6);
  hook.OnTurnEnd(Ctx("s1", "t1"), InfoFor(history, 7));
  hook.OnTurnEnd(Ctx("s1", "t2"), InfoFor(history, 7));  // possibly while t1 is in flight
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  hook.OnTurnEnd(Ctx("s1", "t3"), InfoFor(history, 7));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 1u);
  EXPECT_EQ(hook.ReflectionsUsed("s1"), 1);

  hook.OnTurnEnd(Ctx("s2", "t1"), InfoFor(history, 7));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 2u);
}

TEST(ReflectorHookTest, ProviderErrorMeansNoNudgeButBudgetSpent) {
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  provider->error = Unavailable("503 after retries");
  Status done_status;
  std::mutex mu;
  ReflectorOptions opt = Opts(provider);
  opt.on_done = [&](const std::string&, const std::vector<Proposal>& p, const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(p.empty());
    done_status = s;
  };
  ReflectorHook hook(opt);
  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);
  EXPECT_EQ(hook.ReflectionsUsed("s1"), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(done_status.code(), Code::kUnavailable);
  }
  hook.OnTurnEnd(Ctx("s1", "t2"), InfoFor(history, 6));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 1u);
}

TEST(ReflectorHookTest, HostileReplyGivesNoNudge) {
  std::string hostile =
      "```json\n[{\"kind\":\"exec\",\"title\":\"rm -rf /\",\"nudge\":\"do it\"}]```";
  auto provider = std::make_shared<ReplyProvider>(hostile);
  ReflectorHook hook(Opts(provider));
  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 1u);
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);
}

TEST(ReflectorHookTest, DisabledOrWithoutProviderSpendsNothing) {
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  auto history = BusyHistory(5);
  ReflectorOptions off_opt = Opts(provider);
  off_opt.enabled = false;
  ReflectorHook off(off_opt);
  off.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  EXPECT_TRUE(off.WaitForIdle(kWait));
  EXPECT_EQ(off.ReflectionsUsed("s1"), 0);
  ReflectorHook none(Opts(nullptr));
  none.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  EXPECT_EQ(none.ReflectionsUsed("s1"), 0);
  EXPECT_EQ(provider->seen().size(), 0u);
}

TEST(ReflectorHookTest, TimeoutNeverDelaysTheTurnAndLeavesNoNudge) {
  Log log;
  ManualTimer timer;
  auto provider = std::make_shared<BlockingProvider>(log);
  Status done_status;
  ReflectorOptions opt = Opts(provider);
  opt.wait_timeout = [&](std::stop_token st, std::chrono::milliseconds timeout) {
    EXPECT_EQ(timeout, std::chrono::milliseconds(30000));
    return timer.Wait(st);
  };
  opt.on_done = [&](const std::string&, const std::vector<Proposal>&, const Status& s) {
    done_status = s;
  };
  ReflectorHook hook(opt);
  auto history = BusyHistory(5);

  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  log.Add("turn_end_returned");
  ASSERT_TRUE(log.WaitFor("provider_entered"));
  EXPECT_EQ(log.Index("provider_released"), -1);  // still blocked: the turn did not wait
  EXPECT_FALSE(hook.WaitForIdle(0ms));

  // The next request of the session goes out without a nudge.
  ModelRequest next = RequestWithSystem("S");
  hook.BeforeModelCall(Ctx("s1", "t2"), next);
  EXPECT_EQ(next.system, "S");

  timer.Fire();  // the 30 s pass
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_LT(log.Index("turn_end_returned"), log.Index("provider_released"));
  EXPECT_EQ(done_status.code(), Code::kCancelled);
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);  // the late answer is discarded
  EXPECT_EQ(hook.ReflectionsUsed("s1"), 1);
}

TEST(ReflectorHookTest, RealTimerTimesOut) {
  Log log;
  auto provider = std::make_shared<BlockingProvider>(log);
  ReflectorOptions opt = Opts(provider);
  opt.timeout = 20ms;
  ReflectorHook hook(opt);
  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_GE(log.Index("provider_released"), 0);
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);
}

TEST(ReflectorHookTest, ShutdownCancelsInFlight) {
  Log log;
  auto provider = std::make_shared<BlockingProvider>(log);
  ReflectorHook hook(Opts(provider));
  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(log.WaitFor("provider_entered"));
  hook.OnShutdown();
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);
}

TEST(ReflectorHookTest, DestructionCancelsAndJoins) {
  Log log;
  auto provider = std::make_shared<BlockingProvider>(log);
  {
    ReflectorHook hook(Opts(provider));
    auto history = BusyHistory(5);
    hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
    ASSERT_TRUE(log.WaitFor("provider_entered"));
  }
  EXPECT_GE(log.Index("provider_released"), 0);
}

TEST(ReflectorHookTest, ForgetSessionCancelsItsReflection) {
  Log log;
  auto provider = std::make_shared<BlockingProvider>(log);
  ReflectorHook hook(Opts(provider));
  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(log.WaitFor("provider_entered"));
  hook.ForgetSession("s1");
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  EXPECT_EQ(hook.ReflectionsUsed("s1"), 0);
  EXPECT_EQ(hook.PendingNudge("s1"), std::nullopt);
}

TEST(ReflectorHookTest, StateSurvivesARestart) {
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  Json state;
  std::string nudge;
  {
    ReflectorHook hook(Opts(provider));
    auto history = BusyHistory(5);
    hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
    ASSERT_TRUE(hook.WaitForIdle(kWait));
    state = hook.ExportState("s1");
    nudge = hook.PendingNudge("s1").value_or("");
  }
  ASSERT_FALSE(nudge.empty());
  EXPECT_EQ(state["reflections"], 1);
  EXPECT_EQ(state["nudge"], nudge);

  ReflectorHook next(Opts(provider));
  ASSERT_TRUE(next.ImportState("s1", state).ok());
  auto history = BusyHistory(5);
  next.OnTurnEnd(Ctx("s1", "t2"), InfoFor(history, 6));  // budget already spent
  ASSERT_TRUE(next.WaitForIdle(kWait));
  EXPECT_EQ(provider->seen().size(), 1u);
  ModelRequest r = RequestWithSystem("S");
  next.BeforeModelCall(Ctx("s1", "t2"), r);
  EXPECT_EQ(r.system, "S" + nudge);
  ModelRequest r2 = RequestWithSystem("S");
  next.BeforeModelCall(Ctx("s1", "t2"), r2);
  EXPECT_EQ(r2.system, "S");

  EXPECT_FALSE(next.ImportState("s1", Json::array()).ok());
  next.RestoreNudge("s3", "\n\n[reflection] restored");
  ModelRequest r3 = RequestWithSystem("S");
  next.BeforeModelCall(Ctx("s3"), r3);
  EXPECT_EQ(r3.system, "S\n\n[reflection] restored");
}

TEST(ReflectorHookTest, ProposalsAreStoredForReview) {
  auto dir = std::filesystem::temp_directory_path() / ("al_learning_" + NewId("p"));
  auto store = std::make_shared<ProposalStore>(dir);
  auto provider = std::make_shared<ReplyProvider>(kOneProposal);
  ReflectorOptions opt = Opts(provider);
  opt.proposals = store;
  ReflectorHook hook(opt);
  auto history = BusyHistory(5);
  hook.OnTurnEnd(Ctx("s1"), InfoFor(history, 6));
  ASSERT_TRUE(hook.WaitForIdle(kWait));
  auto list = store->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].kind, "memory");
  EXPECT_EQ(list[0].title, "Tests need TZ=UTC");
  EXPECT_EQ(list[0].session, "s1");
  EXPECT_EQ(list[0].status, "pending");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace agentloop::learning
