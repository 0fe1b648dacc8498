// End-to-end on the real turn state machine (agentloop::Turn + RunTurn),
// composed the way the engine composes a session: the learning tools in the
// registry, UsageHook and ReflectorHook in the hooks, the memory index in the
// system prompt, one scripted model serving both the session and the
// reflection (the session's own provider).
//
//   session 1, turn 1: a busy turn (5 tool results) -> reflection -> a
//                      proposal (stored for review) and a pending nudge;
//   session 1, turn 2: the nudge is in the first request's system text only;
//                      the model calls memory_save, the approver is asked and
//                      allows, the memory file is written;
//   session 2:         the memory is in the system prompt's index; the model
//                      loads its body with memory_search; the use and the
//                      turn's completion are counted.
#include <functional>
#include <memory>
#include <mutex>

#include <gtest/gtest.h>

#include "agentloop/runner.h"
#include "agentloop/transcript.h"
#include "agentloop/turn.h"

#include "learning/learning_tools.h"
#include "learning/listing.h"
#include "learning/proposals.h"
#include "learning/reflector_hook.h"
#include "learning/test_util.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Sent {
  std::string system;
  std::vector<Message> messages;
  std::vector<std::string> tools;
};

// The session's steps in order; reflection requests (recognised by their
// system text) get `reflection_reply` and do not consume a step.
class ScriptModel : public ModelProvider {
 public:
  using Step = std::function<ModelResponse()>;
  std::string_view name() const override { return "e2e"; }

  void Push(Step s) {
    std::lock_guard<std::mutex> lock(mu_);
    steps_.push_back(std::move(s));
  }
  std::string reflection_reply;

  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink&,
                                 std::stop_token) override {
    Sent sent{request.system, {}, {}};
    request.ForEachMessage([&](const Message& m) { sent.messages.push_back(m); });
    for (const auto& t : request.tools) sent.tools.push_back(t.name);
    std::lock_guard<std::mutex> lock(mu_);
    if (request.system == kReflectSystemPrompt) {
      reflections_.push_back(std::move(sent));
      ModelResponse r;
      r.content.push_back(ContentBlock::Text(reflection_reply));
      return r;
    }
    session_.push_back(std::move(sent));
    if (next_ >= steps_.size()) return FailedPrecondition("script exhausted");
    return steps_[next_++]();
  }
  std::vector<Sent> session() const {
    std::lock_guard<std::mutex> lock(mu_);
    return session_;
  }
  std::vector<Sent> reflections() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reflections_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Step> steps_;
  size_t next_ = 0;
  std::vector<Sent> session_;
  std::vector<Sent> reflections_;
};

ScriptModel::Step Say(std::string text) {
  return [text] {
    ModelResponse r;
    r.content.push_back(ContentBlock::Text(text));
    r.finish = FinishReason::kStop;
    return r;
  };
}

ScriptModel::Step CallTool(std::string id, std::string tool, Json input) {
  return [=] {
    ModelResponse r;
    r.content.push_back(ContentBlock::ToolUse(id, tool, input));
    r.finish = FinishReason::kToolUse;
    return r;
  };
}

// A read-only tool the busy turn calls.
class ProbeTool : public Tool {
 public:
  ProbeTool() {
    spec_.name = "probe";
    spec_.description = "probe";
    spec_.input_schema = Json{{"type", "object"}};
  }
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override {
    return ToolOutput::Ok("TZ must be UTC");
  }

 private:
  ToolSpec spec_;
};

class RecordingApprover : public Approver {
 public:
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token) override {
    std::lock_guard<std::mutex> lock(mu_);
    asked.push_back(request.call.name);
    return ApprovalDecision::Allow("test");
  }
  std::mutex mu_;
  std::vector<std::string> asked;
};

constexpr const char* kProposal =
    R"(```json
[{"kind":"memory","title":"Tests need TZ=UTC","nudge":"The suite fails unless TZ=UTC; consider saving it."}]
```)";

class LearningCoreE2eTest : public ::testing::Test {
 protected:
  LearningCoreE2eTest() {
    dirs_ = MakeLearningDirs(tmp_.path() / "data", tmp_.path() / "config", workspace());
    fs::create_directories(workspace());
    model_ = std::make_shared<ScriptModel>();
    model_->reflection_reply = kProposal;
    for (auto& t : MakeLearningTools(dirs_)) registry_.Add(t);
    registry_.Add(std::make_shared<ProbeTool>());
    proposals_ = std::make_shared<ProposalStore>(dirs_.proposals);
    tracker_ = std::make_shared<UsageTracker>();
  }
  fs::path workspace() const { return tmp_.path() / "ws"; }

  std::shared_ptr<ReflectorHook> NewReflector() {
    ReflectorOptions o;
    o.provider = model_;
    o.model = "test-model";
    o.proposals = proposals_;
    return std::make_shared<ReflectorHook>(o);
  }

  TurnResult Run(const std::string& session, Transcript& transcript, ReflectorHook& reflector,
                 const std::string& prompt) {
    TurnConfig cfg;
    cfg.session_id = session;
    cfg.model = "test-model";
    cfg.system_prompt = "You are a test agent.\n\n" + LearningPromptSection(dirs_, workspace());
    cfg.tools = registry_.Specs();
    cfg.workspace = workspace();
    // Non-owning alias: the hook outlives the turn.
    cfg.hooks = {std::make_shared<UsageHook>(tracker_),
                 std::shared_ptr<Hook>(std::shared_ptr<Hook>(), &reflector)};
    Turn turn(std::move(cfg), transcript);
    EXPECT_TRUE(turn.Start(TurnInput::User(prompt)).ok());
    RunnerDeps deps;
    deps.provider = model_.get();
    deps.tools = &registry_;
    deps.approver = &approver_;
    deps.tool_context.workspace = workspace();
    deps.tool_context.session_id = session;
    return RunTurn(turn, deps, std::stop_token());
  }

  testing::TempDir tmp_;
  LearningDirs dirs_;
  std::shared_ptr<ScriptModel> model_;
  ToolRegistry registry_;
  std::shared_ptr<ProposalStore> proposals_;
  std::shared_ptr<UsageTracker> tracker_;
  RecordingApprover approver_;
};

TEST_F(LearningCoreE2eTest, BusyTurnProposalNudgeApprovedSaveNextSessionPrompt) {
  // --- session 1, turn 1: busy.
  for (int i = 0; i < 5; ++i) {
    model_->Push(CallTool("p" + std::to_string(i), "probe", Json::object()));
  }
  model_->Push(Say("Tests pass with TZ=UTC."));
  auto reflector = NewReflector();
  Transcript s1;
  TurnResult r1 = Run("s1", s1, *reflector, "make the tests pass");
  ASSERT_EQ(r1.stop, StopReason::kCompleted) << r1.reason;
  ASSERT_TRUE(reflector->WaitForIdle(10s));

  ASSERT_EQ(model_->reflections().size(), 1u);
  EXPECT_EQ(model_->reflections()[0].messages[0].JoinedText(),
            "USER: make the tests pass\nTOOLS: probe×5\nASSISTANT: Tests pass with TZ=UTC.");
  auto pending = proposals_->List("pending");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].title, "Tests need TZ=UTC");
  std::optional<std::string> nudge = reflector->PendingNudge("s1");
  ASSERT_TRUE(nudge.has_value());
  EXPECT_NE(nudge->find("- (memory) Tests need TZ=UTC: The suite fails unless TZ=UTC"),
            std::string::npos);
  // Nothing was written by the reflector: propose, don't write.
  EXPECT_FALSE(fs::exists(dirs_.user_memory));
  EXPECT_FALSE(fs::exists(dirs_.workspace_memory));

  // --- session 1, turn 2: the nudge goes out once; the model saves with approval.
  size_t before = model_->session().size();
  model_->Push(CallTool("m1", "memory_save",
                        Json{{"name", "tests-need-tz-utc"},
                             {"type", "project"},
                             {"description", "The test suite needs TZ=UTC"},
                             {"body", "Run the tests with TZ=UTC; other zones fail."},
                             {"tags", {"tests"}}}));
  model_->Push(Say("Saved."));
  TurnResult r2 = Run("s1", s1, *reflector, "thanks");
  ASSERT_EQ(r2.stop, StopReason::kCompleted) << r2.reason;
  auto sent = model_->session();
  ASSERT_EQ(sent.size(), before + 2);
  EXPECT_TRUE(sent[before].system.ends_with(*nudge));
  EXPECT_EQ(sent[before + 1].system.find("[reflection]"), std::string::npos);
  EXPECT_EQ(approver_.asked, (std::vector<std::string>{"memory_save"}));
  EXPECT_TRUE(fs::exists(dirs_.workspace_memory / "tests-need-tz-utc.md"));
  EXPECT_EQ(model_->reflections().size(), 1u);  // turn 2 was quiet, and the budget is spent

  // --- session 2: the index is in the prompt; the body loads on demand.
  before = model_->session().size();
  model_->Push(CallTool("q1", "memory_search", Json{{"name", "tests-need-tz-utc"}}));
  model_->Push(Say("Using TZ=UTC."));
  auto reflector2 = NewReflector();
  Transcript s2;
  TurnResult r3 = Run("s2", s2, *reflector2, "run the tests");
  ASSERT_EQ(r3.stop, StopReason::kCompleted) << r3.reason;
  sent = model_->session();
  EXPECT_NE(sent[before].system.find(
                "- tests-need-tz-utc [project, workspace]: The test suite needs TZ=UTC\n"),
            std::string::npos)
      << sent[before].system;
  const Message& result = sent[before + 1].messages.back();
  ASSERT_EQ(result.content.size(), 1u);
  EXPECT_NE(result.content[0].text.find("Run the tests with TZ=UTC"), std::string::npos);

  auto rows = MemoryRows(MemoryStore(dirs_.user_memory, dirs_.workspace_memory));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].uses, 1);
  EXPECT_EQ(rows[0].completed, 1);
  ASSERT_TRUE(reflector2->WaitForIdle(10s));
}

}  // namespace
}  // namespace agentloop::learning
