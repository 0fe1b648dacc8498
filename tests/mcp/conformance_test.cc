// Conformance of the MCP client against the pinned reference servers
// (tests/mcp/package.json: @modelcontextprotocol/server-everything and
// server-filesystem), installed by `npm ci` into AL_MCP_NPM_DIR by the
// mcp_npm_ci test, run by Debian's node over stdio and streamable HTTP on
// 127.0.0.1. Without node or the installed packages each test skips, naming
// what is missing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "env/process.h"
#include "mcp/http_transport.h"
#include "mcp/servers.h"
#include "mcp/stdio_transport.h"
#include "mcp/tool.h"

namespace agentloop::mcp {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const fs::path kNpm = AL_MCP_NPM_DIR;
fs::path Everything() {
  return kNpm / "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
}
fs::path Filesystem() {
  return kNpm / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
}

std::string Node() { return FindExecutable("node"); }

// Skips the test when node or the packages are not there.
#define REQUIRE_SERVERS()                                                                  \
  do {                                                                                     \
    if (Node().empty()) GTEST_SKIP() << "node is not installed (scripts/install-deps.sh)"; \
    if (!fs::exists(Everything()) || !fs::exists(Filesystem())) {                          \
      GTEST_SKIP() << "the reference servers are not installed in " << kNpm.string()       \
                   << " (ctest runs mcp_npm_ci first: npm ci of tests/mcp)";               \
    }                                                                                      \
  } while (0)

// Node 18 (Debian 12) has Web Crypto only behind this flag; the servers'
// HTTP transport needs it. Later versions accept it as a no-op.
const char* kWebCrypto = "--experimental-global-webcrypto";

LaunchContext Launch(const fs::path& workspace) {
  LaunchContext ctx;
  ctx.workspace = workspace;
  ctx.base_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"};
  return ctx;
}

McpServerSpec Stdio(const std::string& name, std::vector<std::string> args) {
  McpServerSpec s;
  s.name = name;
  s.command = Node();
  s.args = std::move(args);
  s.startup_timeout_ms = 60000;
  return s;
}

McpServerSpec EverythingStdio(const std::string& name = "everything") {
  return Stdio(name, {Everything().string(), "stdio"});
}

struct Started {
  StartedServers s;
  std::shared_ptr<Tool> Find(const std::string& name) const {
    for (const auto& t : s.tools) {
      if (t->spec().name == name) return t;
    }
    return nullptr;
  }
};

Started Start(const McpServerSpec& spec, const fs::path& ws = fs::temp_directory_path()) {
  auto r = StartServers({spec}, Launch(ws));
  EXPECT_TRUE(r.ok()) << r.error().message();
  Started out;
  if (r.ok()) out.s = std::move(*r);
  EXPECT_EQ(out.s.servers.size(), 1u);
  if (!out.s.servers.empty()) {
    EXPECT_EQ(out.s.servers[0].state, "ready") << out.s.servers[0].error;
  }
  return out;
}

ToolOutput Call(const std::shared_ptr<Tool>& tool, const Json& input, std::stop_token stop = {}) {
  EXPECT_TRUE(tool);
  if (!tool) return ToolOutput::Error("no tool");
  ToolCall call;
  call.id = "c1";
  call.name = tool->spec().name;
  call.input = input;
  ToolContext ctx;
  ctx.workspace = fs::temp_directory_path();
  ctx.stop = stop;
  auto r = tool->Run(call, ctx);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : ToolOutput::Error(r.error().message());
}

std::shared_ptr<McpClient> EverythingClient(StdioTransport** raw = nullptr) {
  auto t = MakeTransport(EverythingStdio(), Launch(fs::temp_directory_path()));
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return nullptr;
  if (raw) *raw = static_cast<StdioTransport*>(t->get());
  return std::make_shared<McpClient>("everything", std::move(*t));
}

// ---------------------------------------------------------------- stdio ----

TEST(Conformance, HandshakeToolsListChangedAndStderr) {
  REQUIRE_SERVERS();
  StdioTransport* raw = nullptr;
  auto client = EverythingClient(&raw);
  ASSERT_TRUE(client->Connect(60s).ok());
  EXPECT_EQ(client->protocol_version(), "2025-11-25");
  EXPECT_EQ(client->server_info()["name"], "mcp-servers/everything");
  EXPECT_FALSE(client->instructions().empty());
  std::vector<std::string> names;
  for (const auto& t : client->tools()) names.push_back(t.name);
  EXPECT_THAT(
      names, ::testing::IsSupersetOf({"echo", "get-sum", "get-tiny-image", "get-resource-links",
                                      "get-structured-content", "trigger-long-running-operation"}));
  // The server announces a changed list right after the handshake: the
  // client lists again.
  EXPECT_TRUE(client->WaitForListGeneration(2, 60s));
  // Its stderr is a log, never an error.
  bool logged = false;
  for (const auto& l : raw->stderr_tail()) logged = logged || !l.empty();
  EXPECT_TRUE(logged);
  EXPECT_TRUE(client->health().ok());
  EXPECT_TRUE(client->Ping(30s).ok());
}

TEST(Conformance, EveryResultTypeMapsToWhatTheModelSees) {
  REQUIRE_SERVERS();
  Started st = Start(EverythingStdio());
  ToolOutput echo = Call(st.Find("mcp__everything__echo"), {{"message", "hi there"}});
  EXPECT_FALSE(echo.is_error) << echo.content;
  EXPECT_THAT(echo.content, HasSubstr("hi there"));
  ToolOutput sum = Call(st.Find("mcp__everything__get-sum"), {{"a", 2}, {"b", 40}});
  EXPECT_THAT(sum.content, HasSubstr("42"));
  ToolOutput image = Call(st.Find("mcp__everything__get-tiny-image"), Json::object());
  EXPECT_FALSE(image.is_error);
  // The text parts stay text; the PNG is an image block for the model.
  EXPECT_EQ(image.content, "Here's the image you requested:\nThe image above is the MCP logo.");
  ASSERT_EQ(image.images.size(), 1u);
  EXPECT_EQ(image.images[0].type, BlockType::kImage);
  EXPECT_EQ(image.images[0].media_type, "image/png");
  EXPECT_TRUE(image.images[0].data.starts_with("iVBORw0KGgo"))
      << image.images[0].data.substr(0, 20);
  ToolOutput links = Call(st.Find("mcp__everything__get-resource-links"), {{"count", 2}});
  EXPECT_THAT(links.content, HasSubstr("[resource link: "));
  EXPECT_THAT(links.content, HasSubstr("<demo://resource/"));
  ToolOutput embedded = Call(st.Find("mcp__everything__get-resource-reference"),
                             {{"resourceType", "Text"}, {"resourceId", 1}});
  EXPECT_THAT(embedded.content,
              HasSubstr("[resource <demo://resource/dynamic/text/1> text/plain]"));
  ToolOutput structured =
      Call(st.Find("mcp__everything__get-structured-content"), {{"location", "Chicago"}});
  EXPECT_FALSE(structured.is_error) << structured.content;
  EXPECT_THAT(structured.content, HasSubstr("temperature"));
  ToolOutput annotated =
      Call(st.Find("mcp__everything__get-annotated-message"), {{"messageType", "success"}});
  EXPECT_FALSE(annotated.is_error);
  EXPECT_FALSE(annotated.content.empty());
  // A call the server rejects (arguments that fail its schema) is an error
  // result the model sees, and the server stays up.
  ToolOutput bad = Call(st.Find("mcp__everything__get-sum"), {{"a", "two"}});
  EXPECT_TRUE(bad.is_error);
  EXPECT_TRUE(st.s.clients[0]->health().ok());
}

TEST(Conformance, ProgressExtendsTheTimeoutButTheMaximumHolds) {
  REQUIRE_SERVERS();
  auto client = EverythingClient();
  ASSERT_TRUE(client->Connect(60s).ok());
  // 3 seconds in 6 steps: a progress notification every half second keeps
  // a 2-second timeout alive.
  std::atomic<int> progress{0};
  CallOptions o;
  o.timeout = 2000ms;
  o.max_timeout = 60000ms;
  o.progress = true;
  o.on_progress = [&](const Json&) { ++progress; };
  auto r = client->CallTool("trigger-long-running-operation", {{"duration", 3}, {"steps", 6}}, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->error.has_value());
  EXPECT_GE(progress.load(), 2);
  // The hard maximum ends a call that keeps reporting progress.
  CallOptions capped = o;
  capped.max_timeout = 1500ms;
  auto late =
      client->CallTool("trigger-long-running-operation", {{"duration", 30}, {"steps", 60}}, capped);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), Code::kDeadlineExceeded);
  // The connection is still good; whatever the server sends later for the
  // abandoned call is dropped.
  auto after = client->CallTool("echo", {{"message", "after"}}, CallOptions{});
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(after->result.dump(), HasSubstr("after"));
}

TEST(Conformance, CancellationEndsTheCallAndLateOutputIsDropped) {
  REQUIRE_SERVERS();
  auto client = EverythingClient();
  ASSERT_TRUE(client->Connect(60s).ok());
  std::stop_source stop;
  CallOptions o;
  o.stop = stop.get_token();
  o.progress = true;
  o.on_progress = [&](const Json&) { stop.request_stop(); };
  auto r = client->CallTool("trigger-long-running-operation", {{"duration", 4}, {"steps", 8}}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kCancelled);
  for (int i = 0; i < 3; ++i) {
    auto e = client->CallTool("echo", {{"message", "m" + std::to_string(i)}}, CallOptions{});
    ASSERT_TRUE(e.ok());
    EXPECT_THAT(e->result.dump(), HasSubstr("m" + std::to_string(i)));
  }
  EXPECT_TRUE(client->health().ok());
}

TEST(Conformance, KillNineIsReportedAndTheToolsAnswerWithAnError) {
  REQUIRE_SERVERS();
  StdioTransport* raw = nullptr;
  auto client = EverythingClient(&raw);
  ASSERT_TRUE(client->Connect(60s).ok());
  std::shared_ptr<Tool> echo;
  for (const ServerTool& t : client->tools()) {
    if (t.name == "echo") echo = std::make_shared<McpTool>(client, t, McpToolOptions{"everything"});
  }
  ASSERT_TRUE(echo);
  EXPECT_FALSE(Call(echo, {{"message", "alive"}}).is_error);
  // The server and whatever it started (its process group).
  ASSERT_EQ(kill(-raw->pid(), SIGKILL), 0);
  for (int i = 0; i < 600 && client->health().ok(); ++i) {
    client->WaitForListGeneration(UINT64_MAX, 50ms);  // a bounded wait for the exit
  }
  ASSERT_FALSE(client->health().ok());
  EXPECT_THAT(client->health().message(), HasSubstr("killed by signal 9"));
  ToolOutput out = Call(echo, {{"message", "dead"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("is not running"));
  ServerStatus status;
  status.name = "everything";
  status.state = "ready";
  status.client = client;
  EXPECT_EQ(CurrentState(status).state, "disconnected");
}

TEST(Conformance, ANameOverSixtyFourCharactersIsShortenedAndStillCalls) {
  REQUIRE_SERVERS();
  const std::string server = "a-server-whose-name-is-long-enough-to-overflow";
  Started st = Start(EverythingStdio(server));
  const std::string full = "mcp__" + server + "__trigger-long-running-operation";
  ASSERT_GT(full.size(), 64u);
  const std::string name = QualifiedToolName(server, "trigger-long-running-operation");
  EXPECT_EQ(name.size(), 64u);
  EXPECT_EQ(name.substr(0, 53), full.substr(0, 53));
  auto tool = st.Find(name);
  ASSERT_TRUE(tool) << name;
  ToolOutput out = Call(tool, {{"duration", 0.1}, {"steps", 1}});
  EXPECT_FALSE(out.is_error) << out.content;
  // Every name offered fits.
  for (const auto& t : st.s.tools) EXPECT_LE(t->spec().name.size(), 64u) << t->spec().name;
}

TEST(Conformance, FilesystemServerDeniesAPathOutsideItsRoots) {
  REQUIRE_SERVERS();
  std::string tmpl = (fs::temp_directory_path() / "al_mcp_fs_XXXXXX").string();
  const fs::path root = mkdtemp(tmpl.data());
  std::ofstream(root / "inside.txt") << "inside text\n";
  Started st = Start(Stdio("fs", {Filesystem().string(), root.string()}), root);
  ToolOutput in =
      Call(st.Find("mcp__fs__read_text_file"), {{"path", (root / "inside.txt").string()}});
  EXPECT_FALSE(in.is_error) << in.content;
  EXPECT_THAT(in.content, HasSubstr("inside text"));
  ToolOutput out = Call(st.Find("mcp__fs__read_text_file"), {{"path", "/etc/hostname"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_THAT(out.content, HasSubstr("Access denied - path outside allowed directories"));
  st.s.clients.clear();
  st.s.tools.clear();
  fs::remove_all(root);
}

// ---------------------------------------------------------------- HTTP -----

// server-everything's streamable HTTP transport, on a free port.
class HttpEverything {
 public:
  HttpEverything() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    }
    ::close(fd);
    int err[2];
    if (pipe2(err, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    const std::string node = Node();
    const std::string script = Everything().string();
    std::vector<std::string> args = {node, kWebCrypto, script, "streamableHttp"};
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                    "PORT=" + std::to_string(port_)};
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, node.c_str(), &actions, &attr, argv.data(), envp.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(err[1]);
    // Ready when it says it listens (or gone when stderr closes).
    std::string log;
    while (pid_ > 0 && log.find("listening on port") == std::string::npos) {
      pollfd p{err[0], POLLIN, 0};
      if (::poll(&p, 1, 60000) <= 0) break;
      char buf[4096];
      ssize_t n = ::read(err[0], buf, sizeof buf);
      if (n <= 0) break;
      log.append(buf, static_cast<size_t>(n));
    }
    ready_ = log.find("listening on port") != std::string::npos;
    log_ = log;
    err_fd_ = err[0];
  }
  ~HttpEverything() {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  bool ready() const { return ready_; }
  const std::string& log() const { return log_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  int err_fd_ = -1;
  bool ready_ = false;
  std::string log_;
};

std::shared_ptr<McpClient> HttpClientOf(const HttpEverything& server,
                                        StreamableHttpTransport** raw = nullptr) {
  HttpTransportOptions o;
  o.name = "everything";
  o.url = server.url();
  auto t = std::make_unique<StreamableHttpTransport>(std::move(o));
  if (raw) *raw = t.get();
  return std::make_shared<McpClient>("everything", std::move(t));
}

TEST(ConformanceHttp, HandshakeSessionCallsAndResultTypes) {
  REQUIRE_SERVERS();
  HttpEverything server;
  ASSERT_TRUE(server.ready()) << server.log();
  StreamableHttpTransport* raw = nullptr;
  auto client = HttpClientOf(server, &raw);
  ASSERT_TRUE(client->Connect(60s).ok());
  EXPECT_EQ(client->protocol_version(), "2025-11-25");
  EXPECT_FALSE(raw->session_id().empty());
  EXPECT_GE(client->tools().size(), 10u);
  auto echo = client->CallTool("echo", {{"message", "over http"}}, CallOptions{});
  ASSERT_TRUE(echo.ok()) << echo.error().message();
  EXPECT_THAT(MapCallResult(*echo, Json(), 30000).content, HasSubstr("over http"));
  auto image = client->CallTool("get-tiny-image", Json::object(), CallOptions{});
  ASSERT_TRUE(image.ok());
  ToolOutput image_out = MapCallResult(*image, Json(), 30000);
  ASSERT_EQ(image_out.images.size(), 1u);
  EXPECT_EQ(image_out.images[0].media_type, "image/png");
  auto links = client->CallTool("get-resource-links", {{"count", 1}}, CallOptions{});
  ASSERT_TRUE(links.ok());
  EXPECT_THAT(MapCallResult(*links, Json(), 30000).content, HasSubstr("[resource link: "));
  // Two clients, two sessions.
  StreamableHttpTransport* raw2 = nullptr;
  auto second = HttpClientOf(server, &raw2);
  ASSERT_TRUE(second->Connect(60s).ok());
  EXPECT_NE(raw2->session_id(), raw->session_id());
  client->Shutdown();
  second->Shutdown();
}

TEST(ConformanceHttp, ProgressOverTheEventStreamAndCancellation) {
  REQUIRE_SERVERS();
  HttpEverything server;
  ASSERT_TRUE(server.ready()) << server.log();
  auto client = HttpClientOf(server);
  ASSERT_TRUE(client->Connect(60s).ok());
  std::atomic<int> progress{0};
  CallOptions o;
  o.timeout = 2000ms;
  o.progress = true;
  o.on_progress = [&](const Json&) { ++progress; };
  auto r = client->CallTool("trigger-long-running-operation", {{"duration", 2}, {"steps", 4}}, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_GE(progress.load(), 2);

  std::stop_source stop;
  CallOptions c;
  c.stop = stop.get_token();
  c.progress = true;
  c.on_progress = [&](const Json&) { stop.request_stop(); };
  auto cancelled =
      client->CallTool("trigger-long-running-operation", {{"duration", 5}, {"steps", 10}}, c);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code(), Code::kCancelled);
  auto after = client->CallTool("echo", {{"message", "still here"}}, CallOptions{});
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(after->result.dump(), HasSubstr("still here"));
}

TEST(ConformanceHttp, AServerThatDiesFailsTheCallWithAClearError) {
  REQUIRE_SERVERS();
  std::shared_ptr<McpClient> client;
  {
    HttpEverything server;
    ASSERT_TRUE(server.ready()) << server.log();
    client = HttpClientOf(server);
    ASSERT_TRUE(client->Connect(60s).ok());
  }  // kill -9 of the server
  CallOptions o;
  o.timeout = 30000ms;
  auto r = client->CallTool("echo", {{"message", "anyone?"}}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message(), HasSubstr("MCP server 'everything'"));
}

}  // namespace
}  // namespace agentloop::mcp
