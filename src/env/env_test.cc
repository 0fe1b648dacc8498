#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "env/files.h"
#include "env/process.h"

namespace agentloop {
namespace {

ProcessOptions Bash(std::string command) {
  ProcessOptions o;
  o.argv = {"/bin/bash", "-c", std::move(command)};
  o.env = {"PATH=/usr/bin:/bin", "MARK=1"};
  return o;
}

TEST(RunProcessTest, ReportsExitCodeAndCombinedOutput) {
  auto r = RunProcess(Bash("echo out; echo err >&2; exit 3"), {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->outcome, ProcessResult::Outcome::kExited);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "out\nerr\n");
  EXPECT_FALSE(r->output_truncated);
}

TEST(RunProcessTest, StdinIsClosedAndEnvIsExactlyTheGivenOne) {
  auto r = RunProcess(Bash("cat; echo \"[$MARK][${HOME-unset}]\""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "[1][unset]\n");
}

TEST(RunProcessTest, CapsOutputKeepingHeadAndTail) {
  ProcessOptions o = Bash("echo HEAD; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo TAIL");
  o.output_cap = 1000;
  auto r = RunProcess(o, {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->output_truncated);
  EXPECT_EQ(r->total_output_bytes, 5000000u + 11u);
  EXPECT_EQ(r->output.rfind("HEAD\n", 0), 0u);
  EXPECT_NE(r->output.find("bytes of output omitted"), std::string::npos);
  EXPECT_EQ(r->output.substr(r->output.size() - 5), "TAIL\n");
  EXPECT_LT(r->output.size(), 1200u);
}

TEST(RunProcessTest, TimeoutKillsTheWholeGroup) {
  ProcessOptions o = Bash("sleep 300 & echo $!; sleep 300");
  o.timeout = std::chrono::milliseconds(300);
  auto r = RunProcess(o, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, ProcessResult::Outcome::kTimedOut);
  // The background child was killed with the group: wait for its exit as
  // an event (pidfd), not with a timer loop.
  int child = std::atoi(r->output.c_str());
  ASSERT_GT(child, 0);
  int fd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 10000), 1) << "background child still running";
    close(fd);
  } else {
    EXPECT_EQ(errno, ESRCH);
  }
}

TEST(RunProcessTest, CancellationIsEventDriven) {
  std::stop_source src;
  std::thread canceller;
  ProcessOptions o = Bash("echo started; exec sleep 300");
  o.timeout = std::chrono::milliseconds(0);
  // Cancel from another thread once the process exists: the request is
  // processed by the stop_callback, whatever the ordering.
  canceller = std::thread([&] { src.request_stop(); });
  auto r = RunProcess(o, src.get_token());
  canceller.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, ProcessResult::Outcome::kCancelled);
}

TEST(RunProcessTest, MissingProgramIsAnError) {
  ProcessOptions o;
  o.argv = {"/nonexistent/program"};
  auto r = RunProcess(o, {});
  EXPECT_FALSE(r.ok());
}

// Reads `fd` until `want` has been seen or EOF, waiting at most 20 s per
// read; returns what was read.
std::string ReadUntil(int fd, const std::string& want) {
  std::string got;
  char buf[4096];
  while (got.find(want) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20000) <= 0) break;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

SpawnOptions BashChild(std::string command) {
  SpawnOptions o;
  o.argv = {"/bin/bash", "-c", std::move(command)};
  o.env = {"PATH=/usr/bin:/bin", "MARK=1"};
  o.stdin_pipe = true;
  o.separate_stderr = true;
  return o;
}

TEST(ChildProcessTest, TalksOverSeparatePipesAndEndsWhenStdinCloses) {
  auto child = ChildProcess::Spawn(
      BashChild("read line; echo \"out:$line:$MARK\"; echo err >&2; cat >/dev/null; exit 4"));
  ASSERT_TRUE(child.ok()) << child.error().ToString();
  ChildProcess& c = **child;
  ASSERT_GE(c.stdin_fd(), 0);
  ASSERT_EQ(write(c.stdin_fd(), "hello\n", 6), 6);
  EXPECT_EQ(ReadUntil(c.stdout_fd(), "\n"), "out:hello:1\n");
  EXPECT_EQ(ReadUntil(c.stderr_fd(), "\n"), "err\n");
  EXPECT_FALSE(c.Exited().has_value());  // still in cat
  // Closing stdin is enough: no signal is needed.
  ChildProcess::Exit e = c.Stop(std::chrono::seconds(20));
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.code, 4);
  EXPECT_EQ(c.stdin_fd(), -1);
}

TEST(ChildProcessTest, StopSendsSigtermToTheGroup) {
  // Ignores its stdin; a background job in its group holds nothing open.
  auto child = ChildProcess::Spawn(BashChild("sleep 300 & echo $!; exec sleep 300"));
  ASSERT_TRUE(child.ok());
  ChildProcess& c = **child;
  std::string bg = ReadUntil(c.stdout_fd(), "\n");
  ASSERT_FALSE(bg.empty());
  ChildProcess::Exit e = c.Stop(std::chrono::milliseconds(100));
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.code, SIGTERM);
  // The background job, in the same group, got it too.
  pid_t job = std::stoi(bg);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, job, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 20000), 1) << "the background job is still running";
    close(pidfd);
  }
}

TEST(ChildProcessTest, StopKillsAChildThatIgnoresSigterm) {
  auto child = ChildProcess::Spawn(BashChild("trap '' TERM; echo ready; exec sleep 300"));
  ASSERT_TRUE(child.ok());
  ChildProcess& c = **child;
  ASSERT_EQ(ReadUntil(c.stdout_fd(), "ready\n"), "ready\n");
  ChildProcess::Exit e = c.Stop(std::chrono::milliseconds(100));
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.code, SIGKILL);
}

TEST(ChildProcessTest, TheProgramIsLookedUpInTheChildsPath) {
  char tmpl[] = "/tmp/al_env_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::filesystem::path dir(tmpl);
  ASSERT_TRUE(WriteFileAtomic(dir / "al-test-prog", "#!/bin/sh\necho found \"$1\"\n").ok());
  chmod((dir / "al-test-prog").c_str(), 0755);
  const std::vector<std::string> env = {"PATH=/nonexistent:" + dir.string()};
  EXPECT_EQ(FindExecutableIn("al-test-prog", env), (dir / "al-test-prog").string());
  EXPECT_EQ(FindExecutableIn("al-test-prog", {"PATH=/usr/bin:/bin"}), "");
  EXPECT_EQ(FindExecutable("al-test-prog"), "");  // not in this process's PATH

  SpawnOptions o;
  o.argv = {"al-test-prog", "it"};
  o.env = env;
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.error().ToString();
  EXPECT_EQ(ReadUntil((*child)->stdout_fd(), "\n"), "found it\n");
  EXPECT_EQ((*child)->stdin_fd(), -1);   // /dev/null
  EXPECT_EQ((*child)->stderr_fd(), -1);  // on stdout's pipe
  ChildProcess::Exit e = (*child)->Reap();
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.code, 0);

  ProcessOptions run;
  run.argv = {"al-test-prog", "again"};
  run.env = env;
  auto r = RunProcess(run, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->output, "found again\n");
  std::filesystem::remove_all(dir);
}

TEST(ChildProcessTest, AProgramThatCannotStartIsNamedByItsLabel) {
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  o.label = "server 'x' (/nonexistent/program)";
  auto child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(child.error().message(),
            "cannot start server 'x' (/nonexistent/program): No such file or directory");
  EXPECT_EQ(ChildProcess::Spawn(SpawnOptions{}).error().code(), Code::kInvalidArgument);
}

std::vector<std::string> Names(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (const auto& e : env) out.push_back(e.substr(0, e.find('=')));
  return out;
}

TEST(ChildEnvironmentTest, SecretLookingNamesAreRemovedInAnyCase) {
  const std::vector<std::string> base = {
      "PATH=/usr/bin:/bin", "HOME=/home/u",       "OPENAI_API_KEY=sk-1",
      "my_secret_thing=s",  "GITHUB_TOKEN=ghp_x", "Db_Password=pw",
      "LDAP_PASSWD=pw",     "BORG_PASSPHRASE=pp", "GOOGLE_APPLICATION_CREDENTIALS=/k.json",
      "SSH_KEY_PATH=/k",    "LANG=C.UTF-8",       "TERM=xterm"};
  EXPECT_EQ(Names(ChildEnvironment(base, {})),
            (std::vector<std::string>{"PATH", "HOME", "LANG", "TERM"}));
  EXPECT_TRUE(IsSecretName("apikey"));
  EXPECT_TRUE(IsSecretName("x_credentials_y"));
  EXPECT_FALSE(IsSecretName("PWD"));
  EXPECT_FALSE(IsSecretName("SSH_AUTH_SOCK"));
}

TEST(ChildEnvironmentTest, AwsCredentialsAreRemovedButNotTheRegionOrProfile) {
  const std::vector<std::string> base = {
      "AWS_ACCESS_KEY_ID=AKIA",
      "AWS_SECRET_ACCESS_KEY=s",
      "AWS_SESSION_TOKEN=t",
      "AWS_SECURITY_TOKEN=t",
      "AWS_CONTAINER_AUTHORIZATION_TOKEN=t",
      "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://169.254.170.2/x",
      "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/x",
      "AWS_WEB_IDENTITY_TOKEN_FILE=/t",
      "AWS_SHARED_CREDENTIALS_FILE=/c",
      "AWS_REGION=eu-west-1",
      "AWS_PROFILE=dev"};
  EXPECT_EQ(Names(ChildEnvironment(base, {})),
            (std::vector<std::string>{"AWS_REGION", "AWS_PROFILE"}));
}

TEST(ChildEnvironmentTest, NamedVariablesAreRemovedAndPassKeepsOnPurpose) {
  const std::vector<std::string> base = {"PATH=/bin",      "MY_LLM=k",    "HOOK_HMAC=h",
                                         "GITHUB_TOKEN=g", "NPM_TOKEN=n", "BROKEN_ENTRY"};
  EnvPolicy policy;
  policy.remove = {"MY_LLM", "HOOK_HMAC"};
  EXPECT_EQ(ChildEnvironment(base, policy), (std::vector<std::string>{"PATH=/bin"}));
  policy.pass = {"GITHUB_TOKEN", "HOOK_HMAC"};
  EXPECT_EQ(ChildEnvironment(base, policy),
            (std::vector<std::string>{"PATH=/bin", "HOOK_HMAC=h", "GITHUB_TOKEN=g"}));
}

TEST(ChildEnvironmentTest, SetAddsAndReplacesEvenSecretNames) {
  const std::vector<std::string> base = {"PATH=/bin", "CI=false", "HOME=/h"};
  EnvPolicy policy;
  policy.set = {{"CI", "true"}, {"DEPLOY_TOKEN", "read-only-dummy"}};
  EXPECT_EQ(ChildEnvironment(base, policy),
            (std::vector<std::string>{"PATH=/bin", "HOME=/h", "CI=true",
                                      "DEPLOY_TOKEN=read-only-dummy"}));
}

TEST(ChildEnvironmentTest, ScrubbedEnvironmentHasNoSecretNames) {
  for (const auto& name : Names(ScrubbedEnvironment({}))) {
    EXPECT_FALSE(IsSecretName(name)) << name;
  }
}

TEST(WriteFileAtomicTest, ReplacesKeepingModeAndLeavesNoTemp) {
  char tmpl[] = "/tmp/al_env_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::filesystem::path dir(tmpl);
  auto file = dir / "f.sh";
  ASSERT_TRUE(WriteFileAtomic(file, "one").ok());
  chmod(file.c_str(), 0751);
  ASSERT_TRUE(WriteFileAtomic(file, "two").ok());
  auto back = ReadFileToString(file);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "two");
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0751u);
  int entries = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(ReadFileToString(dir / "missing").error().code(), Code::kNotFound);
  std::filesystem::remove_all(dir);
}

// ---- Opening beneath a directory -------------------------------------------

class BeneathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    SetOpenat2DisabledForTesting(GetParam());
    char tmpl[] = "/tmp/al_env_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = std::filesystem::canonical(tmpl);
    std::filesystem::create_directories(root_ / "ws/a/b");
    std::filesystem::create_directories(root_ / "outside/b");
    std::filesystem::create_symlink(root_ / "outside", root_ / "ws/link");
    std::filesystem::create_symlink("a", root_ / "ws/inner");
    ws_fd_ = UniqueFd(open((root_ / "ws").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(ws_fd_.valid());
  }
  void TearDown() override {
    SetOpenat2DisabledForTesting(false);
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::filesystem::path root_;
  UniqueFd ws_fd_;
};

TEST_P(BeneathTest, OpensPlainDirectoriesAndRefusesEveryLink) {
  EXPECT_TRUE(OpenDirBeneath(ws_fd_.get(), "a/b", false).ok());
  EXPECT_TRUE(OpenDirBeneath(ws_fd_.get(), "", false).ok());
  for (const char* rel : {"link", "link/b", "inner", "inner/b"}) {
    auto r = OpenDirBeneath(ws_fd_.get(), rel, false);
    ASSERT_FALSE(r.ok()) << rel;
    EXPECT_EQ(r.error().code(), Code::kPermissionDenied) << rel << ": " << r.error().ToString();
    auto c = OpenDirBeneath(ws_fd_.get(), std::string(rel) + "/new", true);
    EXPECT_FALSE(c.ok()) << rel;
  }
  EXPECT_FALSE(std::filesystem::exists(root_ / "outside/new"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "outside/b/new"));
  EXPECT_EQ(OpenDirBeneath(ws_fd_.get(), "../outside", false).error().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(OpenDirBeneath(ws_fd_.get(), "/etc", false).error().code(), Code::kInvalidArgument);
  auto made = OpenDirBeneath(ws_fd_.get(), "x/y/z", true);
  ASSERT_TRUE(made.ok()) << made.error().ToString();
  EXPECT_TRUE(std::filesystem::is_directory(root_ / "ws/x/y/z"));
}

TEST_P(BeneathTest, AtomicWriteStaysInTheOpenedDirectoryAndRefusesALinkName) {
  auto dir = OpenDirBeneath(ws_fd_.get(), "a", false);
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(WriteFileAtomicAt(dir->get(), "f.txt", "hello", "a/f.txt").ok());
  EXPECT_EQ(*ReadFileToString(root_ / "ws/a/f.txt"), "hello");
  std::filesystem::create_symlink(root_ / "outside/victim", root_ / "ws/a/l.txt");
  Status s = WriteFileAtomicAt(dir->get(), "l.txt", "x", "a/l.txt");
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(root_ / "outside/victim"));
  auto e = OpenEntryNoFollow(dir->get(), "l.txt", O_RDONLY);
  EXPECT_EQ(e.error().code(), Code::kPermissionDenied);
  // No temporary files are left behind.
  size_t n = 0;
  for (auto& entry : std::filesystem::directory_iterator(root_ / "ws/a")) {
    n += entry.path().filename().string().find(".al-tmp-") != std::string::npos;
  }
  EXPECT_EQ(n, 0u);
}

INSTANTIATE_TEST_SUITE_P(Openat2AndFallback, BeneathTest, ::testing::Values(false, true),
                         [](const auto& param_info) {
                           return param_info.param ? "fallback" : "openat2";
                         });

}  // namespace
}  // namespace agentloop
