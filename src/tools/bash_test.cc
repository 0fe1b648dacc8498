#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "base/testing/text.h"
#include "env/process.h"
#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

using testing::RunTool;
using testing::TempWorkspace;

using ::agentloop::testing::Has;

// Waits (on an event, not a timer loop) until `pid` has terminated. True
// when it is gone or dead; false if it is still running after 10 s.
bool ProcessTerminates(pid_t pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already reaped
  pollfd p{fd, POLLIN, 0};
  int r = poll(&p, 1, 10000);
  close(fd);
  return r == 1;
}

TEST(BashToolTest, ExitCodeOutputAndWorkingDirectory) {
  TempWorkspace t;
  BashTool bash;
  auto out = RunTool(bash, t.ctx(), Json{{"command", "pwd; echo err >&2; exit 3"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_EQ(out.content, t.ws().string() + "\nerr\n[exit code 3]\n");
  EXPECT_EQ(out.details["exit_code"], 3);
  out = RunTool(bash, t.ctx(), Json{{"command", "true"}, {"description", "nothing"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.content, "(no output)\n");
  out = RunTool(bash, t.ctx(), Json{{"command", "read x; echo \"[$x]\""}});
  EXPECT_EQ(out.content, "[]\n");  // stdin is /dev/null: read gets nothing
}

TEST(BashToolTest, ScrubbedVariablesAreRemoved) {
  TempWorkspace t;
  t.ctx().scrubbed_env = {"HOME"};
  BashTool bash;
  auto out =
      RunTool(bash, t.ctx(), Json{{"command", "echo \"${HOME-unset}\"; env | grep -c _API_KEY="}});
  EXPECT_EQ(out.content.substr(0, out.content.find('\n')), "unset");
  EXPECT_TRUE(Has(out.content, "\n0\n"));
}

TEST(BashToolTest, SecretsStayOutOfTheEnvironmentUnlessPassedOrSet) {
  TempWorkspace t;
  t.ctx().scrubbed_env = {"MY_PROVIDER_VAR"};  // what provider.api_key_env names
  BashToolOptions o;
  o.base_env = std::vector<std::string>{
      "PATH=/usr/bin:/bin", "MY_PROVIDER_VAR=k",   "NPM_TOKEN=n",     "GITHUB_TOKEN=g",
      "db_password=p",      "AWS_ACCESS_KEY_ID=a", "AWS_REGION=eu-1", "CI=false"};
  const std::string show =
      "for v in MY_PROVIDER_VAR NPM_TOKEN GITHUB_TOKEN db_password AWS_ACCESS_KEY_ID AWS_REGION "
      "CI EXTRA; do printf '%s=%s ' $v \"${!v-unset}\"; done";
  BashTool plain(o);
  EXPECT_EQ(RunTool(plain, t.ctx(), Json{{"command", show}}).content,
            "MY_PROVIDER_VAR=unset NPM_TOKEN=unset GITHUB_TOKEN=unset db_password=unset "
            "AWS_ACCESS_KEY_ID=unset AWS_REGION=eu-1 CI=false EXTRA=unset \n");
  o.env_pass = {"GITHUB_TOKEN"};
  o.env_set = {{"CI", "true"}, {"EXTRA", "x y"}};
  BashTool configured(o);
  EXPECT_EQ(RunTool(configured, t.ctx(), Json{{"command", show}}).content,
            "MY_PROVIDER_VAR=unset NPM_TOKEN=unset GITHUB_TOKEN=g db_password=unset "
            "AWS_ACCESS_KEY_ID=unset AWS_REGION=eu-1 CI=true EXTRA=x y \n");
}

TEST(BashToolTest, TimeoutKillsBackgroundChildren) {
  TempWorkspace t;
  BashTool bash;
  auto out = RunTool(bash, t.ctx(),
                     Json{{"command", "sleep 300 & echo $!; sleep 300"}, {"timeout_ms", 300}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "timed out after 300 ms")) << out.content;
  EXPECT_EQ(out.details["timed_out"], true);
  pid_t child = static_cast<pid_t>(std::atoi(out.content.c_str()));
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessTerminates(child));
}

TEST(BashToolTest, TheTurnsWallTimeBudgetStopsTheCommand) {
  TempWorkspace t;
  BashTool bash;
  // The command's own timeout is long; the turn's budget ends it first.
  t.ctx().deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  auto out = RunTool(bash, t.ctx(),
                     Json{{"command", "sleep 600 & echo $!; sleep 600"}, {"timeout_ms", 600000}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "the turn's wall-time budget ran out")) << out.content;
  EXPECT_EQ(out.details["budget_exhausted"], true);
  EXPECT_EQ(out.details["timed_out"], true);
  pid_t child = static_cast<pid_t>(std::atoi(out.content.c_str()));
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessTerminates(child));

  // A command that ends first is not touched by the budget.
  t.ctx().deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  out = RunTool(bash, t.ctx(), Json{{"command", "echo quick"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.details["budget_exhausted"], false);
}

TEST(BashToolTest, BackgroundChildDoesNotOutliveTheCommand) {
  TempWorkspace t;
  BashTool bash;
  auto out =
      RunTool(bash, t.ctx(), Json{{"command", "sleep 300 & echo $!"}, {"timeout_ms", 60000}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(out.details["timed_out"], false);
  pid_t child = static_cast<pid_t>(std::atoi(out.content.c_str()));
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessTerminates(child));
}

TEST(BashToolTest, HundredMegabytesOfOutputAreCapped) {
  TempWorkspace t;
  BashTool bash;
  auto out = RunTool(
      bash, t.ctx(),
      Json{{"command", "echo START; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo END"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_LT(out.content.size(), 31000u);
  EXPECT_EQ(out.content.rfind("START\n", 0), 0u);
  EXPECT_TRUE(Has(out.content, "\nEND\n"));
  EXPECT_TRUE(Has(out.content, "bytes of output omitted"));
  EXPECT_TRUE(Has(out.content, "[output was 100000011 bytes"));
  EXPECT_EQ(out.details["truncated"], true);
}

TEST(BashToolTest, CancellationKillsTheGroup) {
  TempWorkspace t;
  std::string fifo = (t.root() / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::stop_source stop;
  t.ctx().stop = stop.get_token();
  BashTool bash;
  pid_t child = 0;
  // The command reports its background child through the FIFO; once read,
  // the test cancels.
  std::thread canceller([&] {
    int fd = open(fifo.c_str(), O_RDONLY);
    char buf[32] = {};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) child = static_cast<pid_t>(std::atoi(buf));
    stop.request_stop();
  });
  auto out = RunTool(
      bash, t.ctx(),
      Json{{"command", "sleep 300 & echo $! > " + fifo + "; wait"}, {"timeout_ms", 120000}});
  canceller.join();
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "cancelled")) << out.content;
  EXPECT_EQ(out.details["cancelled"], true);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessTerminates(child));

  // Already cancelled before it starts: nothing runs for long.
  auto again = RunTool(bash, t.ctx(), Json{{"command", "sleep 300"}});
  EXPECT_TRUE(again.is_error);
  EXPECT_EQ(again.details["cancelled"], true);
}

TEST(BashToolTest, MissingSandboxIsAClearConfigurationError) {
  TempWorkspace t;
  BashToolOptions o;
  o.sandbox = SandboxMode::kWorkspaceWrite;
  o.bwrap_path = "/nonexistent/bwrap";
  BashTool bash(o);
  ToolCall call{"c", "bash", Json{{"command", "touch ran"}}};
  auto r = bash.Run(call, t.ctx());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Has(r.error().message(), "bubblewrap (bwrap) was not found at /nonexistent/bwrap"))
      << r.error().message();
  EXPECT_TRUE(Has(r.error().message(), "tools.sandbox_fallback")) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "ran"));

  // Found but unable to build a sandbox (this "bwrap" always fails).
  o.bwrap_path = "/bin/false";
  BashTool broken(o);
  r = broken.Run(call, t.ctx());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.error().message(), "bubblewrap (/bin/false) is unusable"))
      << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "ran"));
}

// A usable verdict is kept in the file StartSandboxProbe names and answers
// the next probe of the same bubblewrap at once; an unusable one is never
// kept. "bubblewrap" here is a script that works until `fail` exists; each
// spelling of its path is a probe of its own in this process.
TEST(BashToolTest, AUsableSandboxVerdictIsRememberedBetweenProbes) {
  TempWorkspace t;
  const std::filesystem::path dir = t.ws();
  const std::filesystem::path script = dir / "bw";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\n[ -e '" << (dir / "fail").string() << "' ] && exit 1\nexit 0\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const std::filesystem::path kept = dir / "usable";

  // Nothing kept: the trial runs, finds it usable and keeps that.
  StartSandboxProbe(script.string(), kept);
  EXPECT_EQ(SandboxUnavailableReason(script.string()), "");
  ASSERT_TRUE(std::filesystem::exists(kept));

  // Kept for this executable: answered at once, though the trial now fails.
  { std::ofstream(dir / "fail") << ""; }
  const std::string again = (dir / "." / "bw").string();
  StartSandboxProbe(again, kept);
  EXPECT_EQ(SandboxUnavailableReason(again), "");

  // A failed trial is never kept: the next probe runs the trial and waits.
  const std::string third = (dir / "." / "." / "bw").string();
  std::filesystem::remove(kept);
  StartSandboxProbe(third, kept);
  EXPECT_TRUE(Has(SandboxUnavailableReason(third), "is unusable"));
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(BashToolTest, SandboxFallbackWarnRunsUnsandboxedAndSaysSo) {
  TempWorkspace t;
  BashToolOptions o;
  o.sandbox = SandboxMode::kWorkspaceWrite;
  o.fallback = SandboxFallback::kWarn;
  o.bwrap_path = "/bin/false";
  o.base_env = std::vector<std::string>{"PATH=/usr/bin:/bin"};
  BashTool bash(o);
  auto out =
      RunTool(bash, t.ctx(), Json{{"command", "touch " + (t.outside() / "unconfined").string()}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_TRUE(std::filesystem::exists(t.outside() / "unconfined"));  // really unsandboxed
  EXPECT_EQ(out.details["sandbox"], "off");
  EXPECT_TRUE(Has(out.details.value("sandbox_unavailable", ""), "is unusable"))
      << DumpJson(out.details);
}

TEST(BashToolTest, ReadOnlyCommandNeverRunsBashUnsandboxed) {
  TempWorkspace t;
  BashToolOptions o;
  o.offer_in_read_only = true;
  o.fallback = SandboxFallback::kWarn;  // not for read-only commands
  o.bwrap_path = "/bin/false";
  BashTool bash(o);
  EXPECT_FALSE(bash.spec().confined_in_read_only);  // so plan mode does not offer it
  t.ctx().read_only = true;
  ToolCall call{"c", "bash", Json{{"command", "touch ran"}}};
  auto r = bash.Run(call, t.ctx());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Has(r.error().message(), "read-only command")) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "ran"));
}

// The tests below run bubblewrap for real; each skips with the reason when
// it cannot run here (CI installs it and runs them as root).
#define SKIP_WITHOUT_BUBBLEWRAP() \
  if (std::string why = SandboxUnavailableReason(); !why.empty()) GTEST_SKIP() << why

// A directory outside the workspace and outside /tmp (which the sandbox
// replaces with a private one), so that a write there reaches the real file
// system unless the sandbox refuses it.
class OutsideDir {
 public:
  OutsideDir() {
    char tmpl[] = "/var/tmp/al_sandbox_XXXXXX";
    char* made = mkdtemp(tmpl);
    EXPECT_NE(made, nullptr);
    if (made != nullptr) path_ = made;
  }
  ~OutsideDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(BashToolTest, SandboxModesWhenBubblewrapWorks) {
  SKIP_WITHOUT_BUBBLEWRAP();
  TempWorkspace t;
  OutsideDir outside;
  const std::string escaped = (outside.path() / "escaped").string();
  BashToolOptions o;
  o.sandbox = SandboxMode::kReadOnly;
  BashTool ro(o);
  auto out = RunTool(ro, t.ctx(),
                     Json{{"command", "touch made_ro 2>/dev/null || echo ws-denied; touch " +
                                          escaped + " 2>&1 | grep -c 'Read-only file system'"}});
  EXPECT_EQ(out.content, "ws-denied\n1\n");
  EXPECT_EQ(out.details["sandbox"], "read-only");
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "made_ro"));
  EXPECT_FALSE(std::filesystem::exists(escaped));

  o.sandbox = SandboxMode::kWorkspaceWrite;
  BashTool rw(o);
  // What git and agentloop obey stays read-only (code planted there would
  // run later, outside the sandbox); the rest of the workspace is writable.
  t.Write(".git/config", "[core]\n");
  t.Write("real-agentloop/config.toml", "");  // also through a symlink
  std::filesystem::create_directory_symlink("real-agentloop", t.ws() / ".agentloop");
  out = RunTool(rw, t.ctx(),
                Json{{"command",
                      "for f in .git/config .git/hooks/pre-commit .agentloop/config.toml; do "
                      "(echo x >> $f) 2>/dev/null && echo wrote-$f; done; echo x > .git/HEAD-x && "
                      "echo checked"}});
  EXPECT_EQ(out.content, "checked\n");
  EXPECT_EQ(t.Slurp(".git/config"), "[core]\n");
  EXPECT_FALSE(std::filesystem::exists(t.ws() / ".git/hooks/pre-commit"));
  EXPECT_EQ(t.Slurp(".git/HEAD-x"), "x\n");  // the rest of .git is writable
  EXPECT_EQ(t.Slurp("real-agentloop/config.toml"), "");
  const std::string private_tmp = "/tmp/" + t.root().filename().string() + "_private";
  out = RunTool(rw, t.ctx(),
                Json{{"command", "touch made_rw && echo x > " + private_tmp + " && touch " +
                                     escaped + " 2>&1 | grep -c 'Read-only file system'"}});
  EXPECT_EQ(out.content, "1\n");
  EXPECT_EQ(out.details["sandbox"], "workspace-write");
  EXPECT_TRUE(std::filesystem::exists(t.ws() / "made_rw"));
  EXPECT_FALSE(std::filesystem::exists(escaped));
  EXPECT_FALSE(std::filesystem::exists(private_tmp));  // /tmp in the sandbox is its own
}

// A line a permission rule allowed (ToolCall::confined) runs in the
// workspace-write sandbox although none is configured; `git commit` works
// there, while git's config and hooks, .agentloop and the hidden paths stay
// out of reach. The same line approved by a person runs as configured.
TEST(BashToolTest, RuleAllowedLineRunsInTheWorkspaceWriteSandbox) {
  SKIP_WITHOUT_BUBBLEWRAP();
  if (FindExecutable("git").empty()) GTEST_SKIP() << "git is not installed";
  TempWorkspace t;
  OutsideDir hidden;
  t.Write(hidden.path() / "secret", "s3cret");
  const std::string escaped = (t.outside() / "escaped").string();
  BashToolOptions o;  // tools.sandbox = off
  o.hidden_paths = {hidden.path().string()};
  BashTool bash(o);
  EXPECT_TRUE(bash.spec().confines_rule_allowed);
  EXPECT_EQ(bash.spec().confinement_unavailable, "");
  auto setup = RunTool(bash, t.ctx(), Json{{"command", "git init -q . && echo ok"}});
  ASSERT_EQ(setup.content, "ok\n");
  const std::string config_before = t.Slurp(".git/config");

  const std::string line =
      "echo hi > f && git add f && git -c user.name=t -c user.email=t@e commit -qm m && "
      "echo committed; for f in .git/config .git/hooks/pre-commit .agentloop/config.toml " +
      escaped + "; do (echo x >> $f) 2>/dev/null && echo wrote-$f; done; cat " +
      (hidden.path() / "secret").string() + " 2>/dev/null || echo hidden";
  ToolCall call{"c1", "bash", Json{{"command", line}}, /*confined=*/true};
  auto r = bash.Run(call, t.ctx());
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->content, "committed\nhidden\n");
  EXPECT_EQ(r->details["sandbox"], "workspace-write");
  EXPECT_EQ(r->details["network"], false);
  EXPECT_EQ(r->details["rule_allowed"], true);
  EXPECT_EQ(t.Slurp(".git/config"), config_before);
  EXPECT_FALSE(std::filesystem::exists(t.ws() / ".git/hooks/pre-commit"));
  EXPECT_FALSE(std::filesystem::exists(t.ws() / ".agentloop/config.toml"));
  EXPECT_FALSE(std::filesystem::exists(escaped));

  // Approved by a person: as configured (off), so git's config is writable.
  auto approved = RunTool(bash, t.ctx(), Json{{"command", "echo '# x' >> .git/config && echo w"}});
  EXPECT_EQ(approved.content, "w\n");
  EXPECT_EQ(approved.details["sandbox"], "off");
}

// A served session's layout: the agent's workspace root is hidden, so the
// session's own workspace (inside it) stays visible and writable while its
// neighbours (other sessions' workspaces) and the server's state are gone.
TEST(BashToolTest, HiddenPathsAroundTheWorkspaceLeaveOnlyTheWorkspace) {
  SKIP_WITHOUT_BUBBLEWRAP();
  OutsideDir root;  // the agent's workspace root
  const auto mine = root.path() / "pr-1";
  const auto theirs = root.path() / "pr-2";
  std::filesystem::create_directories(mine);
  std::filesystem::create_directories(theirs);
  {
    std::ofstream(theirs / "prompt.txt") << "tenant A's file";
    std::ofstream(mine / "own.txt") << "mine";
  }
  OutsideDir state;  // the server's data directory
  { std::ofstream(state.path() / "token") << "secret"; }
  ToolContext ctx;
  ctx.workspace = std::filesystem::canonical(mine);
  BashToolOptions o;
  o.sandbox = SandboxMode::kWorkspaceWrite;
  o.hidden_paths = {root.path().string(), state.path().string()};
  BashTool bash(o);
  auto out = RunTool(
      bash, ctx,
      Json{{"command", "cat own.txt; echo; touch made && echo made; cat " +
                           (theirs / "prompt.txt").string() + " " +
                           (state.path() / "token").string() + " 2>/dev/null || echo hidden; ls " +
                           root.path().string() + "; touch ../pr-3 2>/dev/null || echo root-ro"}});
  EXPECT_EQ(out.content, "mine\nmade\nhidden\npr-1\nroot-ro\n");
  EXPECT_FALSE(std::filesystem::exists(root.path() / "pr-3"));
  EXPECT_TRUE(std::filesystem::exists(mine / "made"));
}

// Where bubblewrap cannot run, the spec says why rule-allowed lines are
// asked, and a confined call never runs unsandboxed.
TEST(BashToolTest, RuleAllowedLineNeverRunsWithoutTheSandbox) {
  TempWorkspace t;
  BashToolOptions o;
  o.bwrap_path = (t.root() / "no-such-bwrap").string();
  BashTool bash(o);
  EXPECT_FALSE(bash.spec().confines_rule_allowed);
  EXPECT_TRUE(Has(bash.spec().confinement_unavailable, "bash sandbox cannot run here"))
      << bash.spec().confinement_unavailable;
  ToolCall call{"c1", "bash", Json{{"command", "touch ran"}}, /*confined=*/true};
  auto r = bash.Run(call, t.ctx());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_error);
  EXPECT_TRUE(Has(r->content, "not run")) << r->content;
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "ran"));
  // tools.sandbox_fallback = "warn": run unsandboxed, and said so.
  o.fallback = SandboxFallback::kWarn;
  BashTool warned(o);
  EXPECT_EQ(warned.spec().confinement_unavailable, "");
  r = warned.Run(call, t.ctx());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->is_error) << r->content;
  EXPECT_EQ(r->details["sandbox"], "off");
  EXPECT_TRUE(r->details.contains("sandbox_unavailable"));
  EXPECT_TRUE(std::filesystem::exists(t.ws() / "ran"));
  // Without the default (an embedder's choice), nothing is confined.
  o.fallback = SandboxFallback::kRefuse;
  o.confine_rule_allowed = false;
  BashTool plain(o);
  EXPECT_FALSE(plain.spec().confines_rule_allowed);
  EXPECT_EQ(plain.spec().confinement_unavailable, "");
}

// A listener on 127.0.0.1 that accepts connections into its backlog.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(BashToolTest, SandboxHasNoNetworkUnlessEnabled) {
  SKIP_WITHOUT_BUBBLEWRAP();
  TempWorkspace t;
  Listener listener;
  const Json connect = {{"command", "(echo hi > /dev/tcp/127.0.0.1/" +
                                        std::to_string(listener.port()) +
                                        ") 2>/dev/null && echo connected || echo refused"}};
  BashToolOptions o;
  BashTool off(o);  // the listener is reachable at all
  EXPECT_EQ(RunTool(off, t.ctx(), connect).content, "connected\n");
  o.sandbox = SandboxMode::kWorkspaceWrite;
  BashTool isolated(o);
  auto out = RunTool(isolated, t.ctx(), connect);
  EXPECT_EQ(out.content, "refused\n");
  EXPECT_EQ(out.details["network"], false);
  o.network = true;
  BashTool networked(o);
  out = RunTool(networked, t.ctx(), connect);
  EXPECT_EQ(out.content, "connected\n");
  EXPECT_EQ(out.details["network"], true);
}

TEST(BashToolTest, SandboxKillsBackgroundChildrenThatLeftTheProcessGroup) {
  SKIP_WITHOUT_BUBBLEWRAP();
  TempWorkspace t;
  // Every background child holds the write end of this FIFO; the read end
  // reports a hang-up once the last of them is gone.
  const std::string fifo = (t.ws() / "alive").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  BashToolOptions o;
  o.sandbox = SandboxMode::kWorkspaceWrite;
  BashTool bash(o);
  // A new session (setsid) and a double fork: both leave the process group
  // that the unsandboxed tool kills.
  auto out = RunTool(bash, t.ctx(),
                     Json{{"command",
                           "exec 3>alive; setsid sleep 300 >&3 2>&3 </dev/null & "
                           "(setsid sleep 300 >&3 2>&3 </dev/null &); echo started"},
                          {"timeout_ms", 60000}});
  EXPECT_EQ(out.content, "started\n");
  pollfd p{reader, 0, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1) << "a background child outlived the command";
  EXPECT_NE(p.revents & POLLHUP, 0);
  close(reader);
}

TEST(BashToolTest, ReadOnlyCommandConfinesBashWhateverIsConfigured) {
  SKIP_WITHOUT_BUBBLEWRAP();
  TempWorkspace t;
  Listener listener;
  BashToolOptions o;
  o.sandbox = SandboxMode::kOff;  // configured for code commands
  o.network = true;
  o.offer_in_read_only = true;
  BashTool bash(o);
  ASSERT_TRUE(bash.spec().confined_in_read_only);
  t.ctx().read_only = true;
  t.Write("notes.txt", "hello\n");
  auto out = RunTool(
      bash, t.ctx(),
      Json{{"command", "touch made 2>/dev/null || echo write-denied; (echo > /dev/tcp/127.0.0.1/" +
                           std::to_string(listener.port()) +
                           ") 2>/dev/null && echo connected || echo no-network; cat notes.txt"}});
  EXPECT_EQ(out.content, "write-denied\nno-network\nhello\n");
  EXPECT_EQ(out.details["sandbox"], "read-only");
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "made"));
}

}  // namespace
}  // namespace agentloop::tools
