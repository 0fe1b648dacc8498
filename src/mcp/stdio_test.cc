// The stdio transport and server start-up against a real child process:
// tests/e2e/fake_mcp_server.py run by python3.
#include <signal.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "env/process.h"
#include "mcp/servers.h"
#include "mcp/stdio_transport.h"
#include "tools/tools.h"

namespace agentloop::mcp {
namespace {

using namespace std::chrono_literals;

std::string Python() { return FindExecutable("python3"); }

#define REQUIRE_PYTHON()                                            \
  if (Python().empty()) GTEST_SKIP() << "python3 is not installed"; \
  do {                                                              \
  } while (0)

LaunchContext Launch() {
  LaunchContext ctx;
  ctx.workspace = std::filesystem::temp_directory_path();
  ctx.base_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"};
  return ctx;
}

McpServerSpec Fake(std::vector<std::string> extra = {}) {
  McpServerSpec s;
  s.name = "fake";
  s.command = Python();
  s.args = {AL_FAKE_MCP_SERVER};
  s.args.insert(s.args.end(), extra.begin(), extra.end());
  s.startup_timeout_ms = 20000;
  return s;
}

std::shared_ptr<McpClient> Connect(const McpServerSpec& spec, StdioTransport** raw = nullptr) {
  auto t = MakeTransport(spec, Launch());
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return nullptr;
  auto* stdio = static_cast<StdioTransport*>(t->get());
  if (raw) *raw = stdio;
  return std::make_shared<McpClient>(spec.name, std::move(*t));
}

TEST(StdioTransport, HandshakeCallAndStderrNoise) {
  REQUIRE_PYTHON();
  StdioTransport* raw = nullptr;
  auto client = Connect(Fake({"--stderr-noise", "--page-size", "2"}), &raw);
  ASSERT_TRUE(client->Connect(20s).ok());
  EXPECT_EQ(client->tools().size(), 5u);
  CallOptions o;
  auto r = client->CallTool("echo", {{"text", "hi"}}, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->result["content"][0]["text"], "echo: hi");
  // stderr is the server's log, kept and never an error.
  bool logged = false;
  for (const auto& l : raw->stderr_tail()) logged = logged || l == "fake-mcp: got tools/call";
  EXPECT_TRUE(logged);
  EXPECT_TRUE(client->health().ok());
}

TEST(StdioTransport, EnvironmentIsTheGivenOneNotTheProcesses) {
  REQUIRE_PYTHON();
  McpServerSpec spec = Fake();
  spec.env["FAKE_SETTING"] = "42";
  auto client = Connect(spec);
  ASSERT_TRUE(client->Connect(20s).ok());
  auto r = client->CallTool("env", {{"name", "FAKE_SETTING"}}, CallOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result["content"][0]["text"], "FAKE_SETTING=42");
  r = client->CallTool("env", {{"name", "HOME"}}, CallOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result["content"][0]["text"], "HOME=/nonexistent");
}

TEST(StdioTransport, KilledServerFailsTheCallAndSaysSo) {
  REQUIRE_PYTHON();
  StdioTransport* raw = nullptr;
  auto client = Connect(Fake(), &raw);
  ASSERT_TRUE(client->Connect(20s).ok());
  // Killed once the call is in flight: the server reports progress for
  // `slow` only after reading the call.
  std::atomic<bool> progressed{false};
  CallOptions o;
  o.progress = true;
  o.timeout = 60s;
  o.on_progress = [&](const Json&) {
    progressed = true;
    kill(raw->pid(), SIGKILL);
  };
  auto r = client->CallTool("slow", Json::object(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(progressed);
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_NE(r.error().message().find("'fake'"), std::string::npos) << r.error().message();
  EXPECT_FALSE(client->health().ok());
}

TEST(StdioTransport, ServerExitReportsItsStatus) {
  REQUIRE_PYTHON();
  auto client = Connect(Fake({"--stderr-noise"}));
  ASSERT_TRUE(client->Connect(20s).ok());
  auto r = client->CallTool("crash", Json::object(), CallOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("fake-mcp: got tools/call"), std::string::npos)
      << r.error().message();
}

TEST(StdioTransport, GarbageOnStdoutIsAClearError) {
  REQUIRE_PYTHON();
  auto client = Connect(Fake({"--garbage"}));
  Status s = client->Connect(20s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a JSON-RPC message: 'this is not json'"), std::string::npos)
      << s.message();
}

TEST(StdioTransport, ListChangedAfterInitializedListsAgain) {
  REQUIRE_PYTHON();
  auto client = Connect(Fake({"--list-changed"}));
  ASSERT_TRUE(client->Connect(20s).ok());
  EXPECT_TRUE(client->WaitForListGeneration(2, 20s));
}

TEST(StdioTransport, ShutdownEscalatesToSigkill) {
  REQUIRE_PYTHON();
  StdioOptions o;
  o.name = "stubborn";
  o.argv = {Python(), AL_FAKE_MCP_SERVER, "--ignore-eof", "--ignore-term"};
  o.env = {"PATH=/usr/bin:/bin"};
  o.grace = 100ms;
  auto t = std::make_unique<StdioTransport>(std::move(o));
  StdioTransport* raw = t.get();
  McpClient client("stubborn", std::move(t));
  ASSERT_TRUE(client.Connect(20s).ok());
  const int pid = raw->pid();
  client.Shutdown();
  // Reaped: the pid no longer names our child.
  EXPECT_NE(kill(pid, 0), 0);
}

TEST(StdioTransport, MissingProgramIsAStartError) {
  McpServerSpec spec;
  spec.name = "nothere";
  spec.command = "/nonexistent/mcp-server";
  auto started = StartServers({spec}, Launch());
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->servers.size(), 1u);
  EXPECT_EQ(started->servers[0].state, "failed");
  EXPECT_NE(started->servers[0].error.find("/nonexistent/mcp-server"), std::string::npos);
  spec.required = true;
  auto required = StartServers({spec}, Launch());
  ASSERT_FALSE(required.ok());
  EXPECT_NE(required.error().message().find("required MCP server 'nothere'"), std::string::npos);
}

TEST(StartServers, FiltersToolsAndNamesThem) {
  REQUIRE_PYTHON();
  McpServerSpec spec = Fake();
  spec.disabled_tools = {"crash"};
  spec.trusted = true;
  McpServerSpec off = Fake();
  off.name = "off";
  off.enabled = false;
  auto started = StartServers({spec, off}, Launch());
  ASSERT_TRUE(started.ok()) << started.error().message();
  ASSERT_EQ(started->servers.size(), 2u);
  EXPECT_EQ(started->servers[1].state, "disabled");
  const ServerStatus& st = started->servers[0];
  EXPECT_EQ(st.state, "ready");
  EXPECT_EQ(st.protocol_version, "2025-11-25");
  EXPECT_EQ(st.server_info["version"], "1.2.3");
  std::vector<std::string> names;
  for (const auto& t : started->tools) names.push_back(t->spec().name);
  EXPECT_EQ(names, (std::vector<std::string>{"mcp__fake__echo", "mcp__fake__write_note",
                                             "mcp__fake__slow", "mcp__fake__env"}));
  EXPECT_FALSE(started->tools[0]->spec().mutates);  // trusted, readOnlyHint
  EXPECT_TRUE(started->tools[1]->spec().mutates);
}

TEST(StartServers, SandboxedServerOutlivesTheThreadThatStartedIt) {
  REQUIRE_PYTHON();
  const std::string why = tools::SandboxUnavailableReason();
  if (!why.empty()) GTEST_SKIP() << "bubblewrap cannot run here: " << why;
  LaunchContext ctx = Launch();
  ctx.sandbox = SandboxMode::kReadOnly;
  // StartServers hands each server's start to a thread of its own, which
  // ends after the handshake; the server must keep running.
  auto started = StartServers({Fake()}, ctx);
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->servers[0].state, "ready") << started->servers[0].error;
  auto client = started->clients[0];
  for (int i = 0; i < 3; ++i) {
    auto r = client->CallTool("echo", {{"text", "still"}}, CallOptions{});
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->result["content"][0]["text"], "echo: still");
  }
  EXPECT_TRUE(client->health().ok());
}

// A stdio server runs in bash's sandbox: what bash's commands may not
// write, the server may not either. `write_note` writes a file relative to
// the server's working directory, the workspace.
class SandboxedServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Python().empty()) GTEST_SKIP() << "python3 is not installed";
    const std::string why = tools::SandboxUnavailableReason();
    if (!why.empty()) GTEST_SKIP() << "bubblewrap cannot run here: " << why;
    char tmpl[] = "/tmp/al_mcp_sandbox_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    ws_ = tmpl;
    std::filesystem::create_directory(ws_ / ".agentloop");
  }
  void TearDown() override {
    if (!ws_.empty()) std::filesystem::remove_all(ws_);
  }

  // Starts the fake server in `mode` and calls write_note.
  Json WriteNote(SandboxMode mode, const std::string& path) {
    LaunchContext ctx = Launch();
    ctx.workspace = ws_;
    ctx.sandbox = mode;
    auto started = StartServers({Fake()}, ctx);
    EXPECT_TRUE(started.ok());
    if (!started.ok()) return nullptr;
    EXPECT_EQ(started->servers[0].state, "ready") << started->servers[0].error;
    if (started->clients.empty()) return nullptr;
    auto r =
        started->clients[0]->CallTool("write_note", {{"text", "x"}, {"path", path}}, CallOptions{});
    started->clients[0]->Shutdown();
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->result : Json();
  }

  std::filesystem::path ws_;
};

TEST_F(SandboxedServer, ReadOnlyRefusesWritesToTheWorkspace) {
  Json r = WriteNote(SandboxMode::kReadOnly, "NOTE.txt");
  EXPECT_EQ(r["isError"], true) << r.dump();
  EXPECT_NE(r.dump().find("Read-only file system"), std::string::npos) << r.dump();
  EXPECT_FALSE(std::filesystem::exists(ws_ / "NOTE.txt"));
  // The same server without the sandbox writes it.
  r = WriteNote(SandboxMode::kOff, "NOTE.txt");
  EXPECT_EQ(r["isError"], false) << r.dump();
  EXPECT_TRUE(std::filesystem::exists(ws_ / "NOTE.txt"));
}

TEST_F(SandboxedServer, WorkspaceWriteKeepsWhatAgentloopObeysReadOnly) {
  Json r = WriteNote(SandboxMode::kWorkspaceWrite, "NOTE.txt");
  EXPECT_EQ(r["isError"], false) << r.dump();
  EXPECT_TRUE(std::filesystem::exists(ws_ / "NOTE.txt"));
  // As for bash: .agentloop stays read-only inside the writable workspace.
  r = WriteNote(SandboxMode::kWorkspaceWrite, ".agentloop/config.toml");
  EXPECT_EQ(r["isError"], true) << r.dump();
  EXPECT_FALSE(std::filesystem::exists(ws_ / ".agentloop" / "config.toml"));
  r = WriteNote(SandboxMode::kOff, ".agentloop/config.toml");
  EXPECT_EQ(r["isError"], false) << r.dump();
}

}  // namespace
}  // namespace agentloop::mcp
