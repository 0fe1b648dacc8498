#include "acp/agent.h"

#include <condition_variable>
#include <mutex>
#include <sstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/ids.h"
#include "base/testing/files.h"
#include "engine/testing/engine.h"

namespace agentloop::acp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kWriteScript = R"({"responses": [
  {"text": "Writing.", "tool_calls": [{"id": "c1", "name": "write", "input": {"file_path": "hello.txt", "content": "hi\n"}}]},
  {"text": "wrote hello.txt"}
]})";

// The client's end: every line the agent wrote, and a way to wait for one.
class FakeClient {
 public:
  void Write(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(Json::parse(line));
    cv_.notify_all();
  }
  // The first message from `from` on that satisfies `pred`; its index in *at.
  Json WaitFor(const std::function<bool(const Json&)>& pred, size_t from = 0,
               size_t* at = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    Json found;
    bool ok = cv_.wait_for(lock, std::chrono::seconds(60), [&] {
      for (size_t i = from; i < lines_.size(); ++i) {
        if (pred(lines_[i])) {
          found = lines_[i];
          if (at != nullptr) *at = i;
          return true;
        }
      }
      return false;
    });
    EXPECT_TRUE(ok) << "no such message; got " << DumpJson(Json(lines_));
    return found;
  }
  Json Response(int id) {
    return WaitFor(
        [id](const Json& j) { return j.contains("id") && j["id"] == id && !j.contains("method"); });
  }
  Json Request(std::string_view method, size_t from = 0) {
    return WaitFor(
        [method](const Json& j) { return j.contains("id") && j.value("method", "") == method; },
        from);
  }
  std::vector<Json> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> lines_;
};

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() {
    ws_ = tmp_.path() / "ws";
    fs::create_directories(ws_);
    auto e = Engine::Create(testing::IsolatedEngineOptions(tmp_.path()));
    EXPECT_TRUE(e.ok()) << e.error().ToString();
    engine_ = std::move(*e);
    script_ = tmp_.path() / "script.json";
    WriteFile(script_, kWriteScript);
    AgentOptions ao;
    ao.version = "test";
    ao.new_session = [this](const fs::path& cwd) -> Result<SessionOptions> {
      SessionOptions o;
      o.workspace = cwd;
      o.provider = ProviderKind::kScript;
      o.script_path = script_.string();
      o.todo_loop = false;
      o.reflector = false;
      if (adjust_) adjust_(o);
      return o;
    };
    ao.load_session = [this](const std::string&, const fs::path& cwd) { return ao_new_(cwd); };
    ao_new_ = ao.new_session;
    agent_ = std::make_unique<Agent>(
        *engine_, ao, [this](const std::string& l) { client_.Write(l); }, log_);
  }
  ~AgentTest() override { agent_->Shutdown(); }

  void Send(const Json& j) { agent_->HandleLine(DumpJson(j)); }
  void Request(int id, std::string_view method, Json params) {
    Send(MakeRequest(id, method, std::move(params)));
  }
  std::string NewSession(int id) {
    Request(id, "session/new", Json{{"cwd", ws_.string()}, {"mcpServers", Json::array()}});
    Json r = client_.Response(id);
    EXPECT_TRUE(r.contains("result")) << DumpJson(r);
    return r["result"].value("sessionId", "");
  }
  void Prompt(int id, const std::string& sid, const std::string& text) {
    Request(id, "session/prompt",
            Json{{"sessionId", sid},
                 {"prompt", Json::array({Json{{"type", "text"}, {"text", text}}})}});
  }
  void Answer(const Json& request, const std::string& option) {
    Json outcome = option.empty() ? Json{{"outcome", "cancelled"}}
                                  : Json{{"outcome", "selected"}, {"optionId", option}};
    Send(MakeResult(request["id"], Json{{"outcome", outcome}}));
  }

  TempDir tmp_;
  fs::path ws_;
  fs::path script_;
  std::unique_ptr<Engine> engine_;
  std::function<Result<SessionOptions>(const fs::path&)> ao_new_;
  std::function<void(SessionOptions&)> adjust_;
  FakeClient client_;
  std::ostringstream log_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, InitializeAnswersTheProtocolVersionAndCapabilities) {
  Request(1, "initialize", Json{{"protocolVersion", 1}, {"clientCapabilities", Json::object()}});
  Json r = client_.Response(1)["result"];
  EXPECT_EQ(r["protocolVersion"], 1);
  EXPECT_EQ(r["agentCapabilities"]["loadSession"], true);
  EXPECT_EQ(r["agentInfo"]["name"], "agentloop");
}

TEST_F(AgentTest, BadInputGetsJsonRpcErrors) {
  agent_->HandleLine("{oops");
  Json parse = client_.WaitFor([](const Json& j) { return j.contains("error"); });
  EXPECT_EQ(parse["error"]["code"], kParseError);
  Request(2, "session/fly", Json::object());
  EXPECT_EQ(client_.Response(2)["error"]["code"], kMethodNotFound);
  Request(3, "session/new", Json{{"cwd", "relative/dir"}, {"mcpServers", Json::array()}});
  Json bad = client_.Response(3);
  EXPECT_EQ(bad["error"]["code"], kInvalidParams);
  EXPECT_THAT(bad["error"]["message"].get<std::string>(), HasSubstr("absolute"));
  Prompt(4, "ses_nope", "hi");
  EXPECT_EQ(client_.Response(4)["error"]["code"], -32002);
  Request(5, "session/prompt", Json{{"sessionId", "x"}, {"prompt", "text"}});
  Json p = client_.Response(5);
  EXPECT_EQ(p["error"]["code"], kInvalidParams);
  EXPECT_THAT(p["error"]["message"].get<std::string>(), HasSubstr("\"prompt\""));
  Send(Json{{"jsonrpc", "2.0"}, {"id", 6}, {"method", "initialize"}, {"params", 5}});
  EXPECT_EQ(client_.Response(6)["error"]["code"], kInvalidRequest);
}

TEST_F(AgentTest, AnAllowedWriteRunsAndTheTurnEnds) {
  const std::string sid = NewSession(1);
  ASSERT_FALSE(sid.empty());
  Prompt(2, sid, "create hello.txt");
  Json ask = client_.Request("session/request_permission");
  EXPECT_EQ(ask["params"]["sessionId"], sid);
  EXPECT_EQ(ask["params"]["toolCall"]["toolCallId"], "c1");
  EXPECT_EQ(ask["params"]["toolCall"]["content"][0]["type"], "diff");
  std::vector<std::string> kinds;
  for (const Json& o : ask["params"]["options"]) kinds.push_back(o["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"allow_once", "allow_always", "reject_once",
                                             "reject_always"}));
  EXPECT_FALSE(fs::exists(ws_ / "hello.txt"));
  Answer(ask, "allow_once");
  Json done = client_.Response(2);
  EXPECT_EQ(done["result"]["stopReason"], "end_turn") << DumpJson(done);
  EXPECT_EQ(ReadFile(ws_ / "hello.txt"), "hi\n");
  // Every notification came before the answer and is a session/update.
  bool completed = false;
  for (const Json& j : client_.Lines()) {
    if (j.value("method", "") != "session/update") continue;
    const Json& u = j["params"]["update"];
    if (u["sessionUpdate"] == "tool_call_update" && u.value("status", "") == "completed") {
      completed = true;
    }
  }
  EXPECT_TRUE(completed);
}

TEST_F(AgentTest, ARejectedWriteLeavesTheFileAlone) {
  const std::string sid = NewSession(1);
  Prompt(2, sid, "create hello.txt");
  Answer(client_.Request("session/request_permission"), "reject_once");
  Json done = client_.Response(2);
  EXPECT_EQ(done["result"]["stopReason"], "end_turn");
  EXPECT_FALSE(fs::exists(ws_ / "hello.txt"));
}

TEST_F(AgentTest, ACancelledPermissionRequestDeniesTheCall) {
  const std::string sid = NewSession(1);
  Prompt(2, sid, "create hello.txt");
  Answer(client_.Request("session/request_permission"), "");
  EXPECT_EQ(client_.Response(2)["result"]["stopReason"], "end_turn");
  EXPECT_FALSE(fs::exists(ws_ / "hello.txt"));
}

TEST_F(AgentTest, OnePromptAtATimePerSession) {
  const std::string sid = NewSession(1);
  Prompt(2, sid, "create hello.txt");
  Json ask = client_.Request("session/request_permission");
  Prompt(3, sid, "and another thing");
  Json busy = client_.Response(3);
  EXPECT_EQ(busy["error"]["code"], kInvalidParams);
  EXPECT_THAT(busy["error"]["message"].get<std::string>(), HasSubstr("already running a prompt"));
  Answer(ask, "allow_once");
  EXPECT_EQ(client_.Response(2)["result"]["stopReason"], "end_turn");
  EXPECT_EQ(ReadFile(ws_ / "hello.txt"), "hi\n");
}

TEST_F(AgentTest, CancelEndsTheTurnCancelled) {
  const std::string sid = NewSession(1);
  Prompt(2, sid, "create hello.txt");
  (void)client_.Request("session/request_permission");
  Send(MakeNotification("session/cancel", Json{{"sessionId", sid}}));
  EXPECT_EQ(client_.Response(2)["result"]["stopReason"], "cancelled");
  EXPECT_FALSE(fs::exists(ws_ / "hello.txt"));
}

int CountRequests(FakeClient& client, std::string_view method) {
  int n = 0;
  for (const Json& j : client.Lines()) n += j.value("method", "") == method;
  return n;
}

// The ACP approver is asked only where the engine's one decision point
// says `ask`: a deny rule and plan mode stop the call before anyone is.
TEST_F(AgentTest, DenyRulesAndPlanModeApplyWithoutAsking) {
  adjust_ = [](SessionOptions& o) { o.deny.push_back({"write", "--deny"}); };
  std::string sid = NewSession(1);
  Prompt(2, sid, "create hello.txt");
  EXPECT_EQ(client_.Response(2)["result"]["stopReason"], "end_turn");
  EXPECT_FALSE(fs::exists(ws_ / "hello.txt"));

  adjust_ = [](SessionOptions& o) { o.command = CommandKind::kPlan; };
  sid = NewSession(3);
  Prompt(4, sid, "create hello.txt");
  EXPECT_EQ(client_.Response(4)["result"]["stopReason"], "end_turn");
  EXPECT_FALSE(fs::exists(ws_ / "hello.txt"));
  EXPECT_EQ(CountRequests(client_, "session/request_permission"), 0);
  // Why each turn stopped was said before its answer.
  std::vector<std::string> notes;
  for (const Json& j : client_.Lines()) {
    if (j.value("method", "") != "session/update") continue;
    const Json& u = j["params"]["update"];
    const std::string text = u["sessionUpdate"] == "agent_message_chunk"
                                 ? u["content"]["text"].get<std::string>()
                                 : std::string();
    if (text.find("(agentloop: ") != std::string::npos) notes.push_back(text);
  }
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_THAT(notes[0], HasSubstr("denied"));
  EXPECT_THAT(notes[1], HasSubstr("PLAN_MODE_REFUSED"));
}

// A client that offers fs/* gets the session's reads and writes; the file
// on disk is its to save.
TEST_F(AgentTest, FilesGoThroughTheClientWhenItOffersThem) {
  WriteFile(ws_ / "hello.txt", "on disk\n");
  WriteFile(script_, R"({"responses": [
    {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "hello.txt"}}]},
    {"tool_calls": [{"id": "w1", "name": "write", "input": {"file_path": "hello.txt", "content": "hi\n"}}]},
    {"text": "done"}
  ]})");
  Request(1, "initialize",
          Json{{"protocolVersion", 1},
               {"clientCapabilities",
                Json{{"fs", Json{{"readTextFile", true}, {"writeTextFile", true}}}}}});
  client_.Response(1);
  const std::string sid = NewSession(2);
  Prompt(3, sid, "rewrite hello.txt");
  const std::string abs = (fs::canonical(ws_) / "hello.txt").string();
  Json read = client_.Request("fs/read_text_file");
  EXPECT_EQ(read["params"], (Json{{"sessionId", sid}, {"path", abs}}));
  Send(MakeResult(read["id"], Json{{"content", "unsaved buffer\n"}}));
  Answer(client_.Request("session/request_permission"), "allow_once");
  // The write reads the buffer for its diff, then writes it.
  Json again = client_.WaitFor([&](const Json& j) {
    return j.value("method", "") == "fs/read_text_file" && j["id"] != read["id"];
  });
  Send(MakeResult(again["id"], Json{{"content", "unsaved buffer\n"}}));
  Json write = client_.Request("fs/write_text_file");
  EXPECT_EQ(write["params"], (Json{{"sessionId", sid}, {"path", abs}, {"content", "hi\n"}}));
  Send(MakeResult(write["id"], nullptr));
  EXPECT_EQ(client_.Response(3)["result"]["stopReason"], "end_turn");
  EXPECT_EQ(ReadFile(ws_ / "hello.txt"), "on disk\n");
  // The model saw the buffer, not the disk.
  bool saw_buffer = false;
  for (const Json& j : client_.Lines()) {
    const std::string line = DumpJson(j);
    saw_buffer = saw_buffer || (line.find("tool_call_update") != std::string::npos &&
                                line.find("unsaved buffer") != std::string::npos);
  }
  EXPECT_TRUE(saw_buffer);
}

TEST_F(AgentTest, TheTodoListIsSentAsAPlan) {
  WriteFile(script_, R"({"responses": [
    {"tool_calls": [{"id": "t1", "name": "todo", "input": {"action": "create", "tasks": [{"subject": "read"}, {"subject": "fix"}]}}]},
    {"text": "planned"}
  ]})");
  const std::string sid = NewSession(1);
  Prompt(2, sid, "plan it");
  EXPECT_EQ(client_.Response(2)["result"]["stopReason"], "end_turn");
  Json plan = client_.WaitFor([](const Json& j) {
    return j.value("method", "") == "session/update" &&
           j["params"]["update"]["sessionUpdate"] == "plan";
  });
  EXPECT_EQ(plan["params"]["update"]["entries"],
            Json::parse(R"([{"content": "read", "priority": "medium", "status": "pending"},
                            {"content": "fix", "priority": "medium", "status": "pending"}])"));
}

TEST_F(AgentTest, AllowAlwaysIsNotAskedAgainAndLoadReplays) {
  WriteFile(script_, R"({"responses": [
    {"tool_calls": [{"id": "c1", "name": "write", "input": {"file_path": "a.txt", "content": "1"}}]},
    {"text": "one"},
    {"tool_calls": [{"id": "c2", "name": "write", "input": {"file_path": "a.txt", "content": "1"}}]},
    {"text": "two"}
  ]})");
  const std::string sid = NewSession(1);
  Prompt(2, sid, "write a");
  Answer(client_.Request("session/request_permission"), "allow_always");
  EXPECT_EQ(client_.Response(2)["result"]["stopReason"], "end_turn");
  Prompt(3, sid, "again");
  EXPECT_EQ(client_.Response(3)["result"]["stopReason"], "end_turn");
  int asked = 0;
  for (const Json& j : client_.Lines())
    asked += j.value("method", "") == "session/request_permission";
  EXPECT_EQ(asked, 1);

  // Another agent process loads the stored session.
  agent_->Shutdown();
  agent_.reset();
  FakeClient other;
  AgentOptions ao;
  ao.new_session = ao_new_;
  ao.load_session = [this](const std::string&, const fs::path& cwd) { return ao_new_(cwd); };
  Agent loader(
      *engine_, ao, [&](const std::string& l) { other.Write(l); }, log_);
  loader.HandleLine(DumpJson(
      MakeRequest(9, "session/load",
                  Json{{"sessionId", sid}, {"cwd", ws_.string()}, {"mcpServers", Json::array()}})));
  size_t answer_at = 0;
  other.WaitFor([](const Json& j) { return j.contains("id") && j["id"] == 9; }, 0, &answer_at);
  std::vector<std::string> texts;
  const std::vector<Json> lines = other.Lines();
  for (size_t i = 0; i < answer_at; ++i) {
    ASSERT_EQ(lines[i].value("method", ""), "session/update") << DumpJson(lines[i]);
    const Json& u = lines[i]["params"]["update"];
    if (u["sessionUpdate"] == "user_message_chunk") texts.push_back(u["content"]["text"]);
  }
  EXPECT_EQ(lines[answer_at]["result"], Json::object()) << DumpJson(lines[answer_at]);
  EXPECT_EQ(texts, (std::vector<std::string>{"write a", "again"}));
  loader.Shutdown();
  agent_ = std::make_unique<Agent>(
      *engine_, ao, [](const std::string&) {}, log_);
}

}  // namespace
}  // namespace agentloop::acp
