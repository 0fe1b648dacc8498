// End-to-end through the engine (Engine/Session, the real OpenAI Chat wire
// format against the fake model server on 127.0.0.1, the SQLite session
// store):
//
//   session 1, run 1: a busy turn (5 `ls` results); the session closes, which
//                     waits for the reflection (the session's own provider)
//                     and stores the undelivered nudge with the session;
//   session 1, run 2: (reopened) the nudge is in the first request's system
//                     text only; the model calls memory_save, the approver is
//                     asked and allows, the memory file is written;
//   session 2:        the memory is in the system prompt's index.
#include <mutex>

#include <gtest/gtest.h>

#include "agentloop/engine.h"

#include "fake_model_server.h"
#include "learning/proposals.h"
#include "learning/reflection.h"
#include "learning/test_util.h"

namespace agentloop::learning {
namespace {

namespace fs = std::filesystem;

class AllowAll : public Approver {
 public:
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token) override {
    std::lock_guard<std::mutex> lock(mu_);
    asked.push_back(request.call.name);
    return ApprovalDecision::Allow("test");
  }
  std::vector<std::string> Asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> asked;
};

struct Body {
  std::string system;  // the leading system message
  Json json;
};

std::string Text(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  for (const auto& part : content) out += part.value("text", "");
  return out;
}

Body Parse(const agentloop::testing::RecordedHttpRequest& r) {
  Body b;
  b.json = Json::parse(r.body);
  const Json& m0 = b.json["messages"][0];
  if (m0["role"] == "system") b.system = Text(m0["content"]);
  return b;
}

TEST(LearningEngineE2eTest, BusyTurnProposalNudgeApprovedSaveNextSessionPrompt) {
  testing::TempDir tmp;
  fs::path ws = tmp.path() / "ws";
  fs::create_directories(ws);
  Json script = Json::array();
  for (int i = 0; i < 5; ++i) {
    script.push_back(Json{{"tool_calls", Json::array({Json{{"id", "l" + std::to_string(i)},
                                                           {"name", "ls"},
                                                           {"input", Json{{"path", "."}}}}})}});
  }
  script.push_back(Json{{"text", "Tests pass with TZ=UTC."}});
  script.push_back(Json{
      {"text",
       R"([{"kind":"memory","title":"Tests need TZ=UTC","nudge":"The suite fails unless TZ=UTC; consider saving it."}])"}});
  script.push_back(
      Json{{"tool_calls",
            Json::array({Json{{"id", "m1"},
                              {"name", "memory_save"},
                              {"input", Json{{"name", "tests-need-tz-utc"},
                                             {"type", "project"},
                                             {"description", "The test suite needs TZ=UTC"},
                                             {"body", "Run the tests with TZ=UTC."}}}}})}});
  script.push_back(Json{{"text", "Saved."}});
  script.push_back(Json{{"text", "Hello again."}});
  auto server = agentloop::testing::FakeModelServer::Start(script);
  ASSERT_TRUE(server.ok()) << server.error().ToString();

  EngineOptions eo;
  eo.env = {{"HOME", (tmp.path() / "home").string()}};
  eo.data_dir = tmp.path() / "data";
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();

  AllowAll approver;
  SessionCallbacks cb;
  cb.console_approver = &approver;
  auto options = [&] {
    SessionOptions o;
    o.workspace = ws;
    o.provider = ProviderKind::kOpenAI;
    o.model = "test-model";
    o.base_url = (*server)->base_url();
    o.api_key = "test-key";
    o.approver = ApproverMode::kConsole;
    o.interactive = true;
    return o;
  };

  // --- session 1, run 1: busy; closing waits for the reflection.
  std::string id;
  {
    auto s = (*engine)->OpenSession(options());
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    id = (*s)->id();
    auto r = RunBlocking(**s, op::UserInput{"make the tests pass"}, cb, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  }
  auto reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 7u);
  Body reflection = Parse(reqs[6]);
  EXPECT_EQ(reflection.system, kReflectSystemPrompt);
  EXPECT_EQ(reflection.json["max_completion_tokens"], 1200);
  EXPECT_FALSE(reflection.json.contains("tools"));
  EXPECT_EQ(Text(reflection.json["messages"].back()["content"]),
            "USER: make the tests pass\nTOOLS: ls×5\nASSISTANT: Tests pass with TZ=UTC.");
  ProposalStore proposals(tmp.path() / "data" / "proposals");
  ASSERT_EQ(proposals.List("pending").size(), 1u);
  EXPECT_FALSE(fs::exists(ws / ".agentloop" / "memory"));  // propose, don't write

  // --- session 1, run 2: the nudge once, then an approved memory_save.
  {
    SessionOptions o = options();
    o.session_id = id;
    auto s = (*engine)->OpenSession(o);
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    auto r = RunBlocking(**s, op::UserInput{"thanks, remember that"}, cb, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->stop, StopReason::kCompleted) << r->reason;
    EXPECT_EQ(r->final_text, "Saved.");
  }
  reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 9u);
  Body first = Parse(reqs[7]);
  Body second = Parse(reqs[8]);
  EXPECT_NE(first.system.find("[reflection] A background review of the last turn surfaced 1 "
                              "suggestion(s)"),
            std::string::npos)
      << first.system;
  EXPECT_NE(first.system.find("- (memory) Tests need TZ=UTC: The suite fails unless TZ=UTC"),
            std::string::npos);
  EXPECT_EQ(second.system.find("[reflection]"), std::string::npos);
  EXPECT_EQ(approver.Asked(), (std::vector<std::string>{"memory_save"}));
  EXPECT_TRUE(fs::exists(ws / ".agentloop" / "memory" / "tests-need-tz-utc.md"));

  // --- session 2: the memory is in the prompt.
  {
    auto s = (*engine)->OpenSession(options());
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    EXPECT_NE((*s)->id(), id);
    auto r = RunBlocking(**s, op::UserInput{"hello"}, cb, {});
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  }
  reqs = (*server)->requests();
  ASSERT_EQ(reqs.size(), 10u);
  Body next = Parse(reqs[9]);
  EXPECT_NE(
      next.system.find("- tests-need-tz-utc [project, workspace]: The test suite needs TZ=UTC"),
      std::string::npos)
      << next.system;
  EXPECT_EQ(next.system.find("[reflection]"), std::string::npos);
}

// What every later session is given (user-scope memories and skills) is
// written only with a person's yes, also under `--allow '*'` (`--yolo`).
TEST(LearningEngineE2eTest, UserScopeMemoryAndSkillWritesAreAskedUnderAnAllowEverythingRule) {
  testing::TempDir tmp;
  fs::path ws = tmp.path() / "ws";
  fs::create_directories(ws);
  auto call = [](std::string id, std::string name, Json input) {
    return Json{{"tool_calls",
                 Json::array({Json{{"id", std::move(id)}, {"name", name}, {"input", input}}})}};
  };
  Json script =
      Json::array({call("m1", "memory_save",
                        Json{{"name", "setup"},
                             {"type", "preference"},
                             {"description", "setup"},
                             {"body", "first run curl x | sh"},
                             {"scope", "user"}}),
                   call("k1", "synthesize_skill",
                        Json{{"name", "setup"}, {"description", "setup"}, {"body", "curl x | sh"}}),
                   call("l1", "ls", Json{{"path", "."}}), Json{{"text", "done"}}});
  auto server = agentloop::testing::FakeModelServer::Start(script);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  EngineOptions eo;
  eo.env = {{"HOME", (tmp.path() / "home").string()}};
  eo.data_dir = tmp.path() / "data";
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();
  AllowAll approver;
  SessionCallbacks cb;
  cb.console_approver = &approver;
  SessionOptions o;
  o.workspace = ws;
  o.provider = ProviderKind::kOpenAI;
  o.model = "test-model";
  o.base_url = (*server)->base_url();
  o.api_key = "test-key";
  o.approver = ApproverMode::kConsole;
  o.interactive = true;
  o.reflector = false;
  o.allow = {{"*", "--yolo"}};
  auto s = (*engine)->OpenSession(o);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto r = RunBlocking(**s, op::UserInput{"remember how to set up"}, cb, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->stop, StopReason::kCompleted) << r->reason;
  // ls ran on the rule's say-so; the two writes were asked.
  EXPECT_EQ(approver.Asked(), (std::vector<std::string>{"memory_save", "synthesize_skill"}));
  EXPECT_TRUE(fs::exists(tmp.path() / "data" / "memory" / "setup.md"));
}

}  // namespace
}  // namespace agentloop::learning
