#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "env/process.h"
#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

using testing::RunTool;
using testing::TempWorkspace;

bool Has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

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
  o.sandbox = "workspace-write";
  o.bwrap_path = "/nonexistent/bwrap";
  BashTool bash(o);
  ToolCall call{"c", "bash", Json{{"command", "true"}}};
  auto r = bash.Run(call, t.ctx());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Has(r.error().message(), "bubblewrap (bwrap) was not found at /nonexistent/bwrap"))
      << r.error().message();

  o.sandbox = "bogus";
  BashTool bogus(o);
  r = bogus.Run(call, t.ctx());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.error().message(), "unknown bash sandbox mode"));
}

TEST(BashToolTest, SandboxModesWhenBubblewrapWorks) {
  if (FindExecutable("bwrap").empty()) GTEST_SKIP() << "bwrap not installed";
  TempWorkspace t;
  BashToolOptions o;
  o.sandbox = "read-only";
  BashTool ro(o);
  ToolCall call{"c", "bash", Json{{"command", "touch made_ro 2>/dev/null || echo denied"}}};
  auto r = ro.Run(call, t.ctx());
  if (!r.ok()) {
    // Installed but unusable here (no user namespaces): the error says so.
    EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
    EXPECT_TRUE(Has(r.error().message(), "unusable")) << r.error().message();
    return;
  }
  EXPECT_EQ(r->content, "denied\n");
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "made_ro"));

  o.sandbox = "workspace-write";
  BashTool rw(o);
  call.input = Json{{"command", "touch made_rw && (touch " + t.outside().string() +
                                    "/escaped 2>/dev/null || echo outside-denied)"}};
  r = rw.Run(call, t.ctx());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "outside-denied\n");
  EXPECT_TRUE(std::filesystem::exists(t.ws() / "made_rw"));
  EXPECT_FALSE(std::filesystem::exists(t.outside() / "escaped"));
}

}  // namespace
}  // namespace agentloop::tools
