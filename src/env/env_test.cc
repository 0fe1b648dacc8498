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

}  // namespace
}  // namespace agentloop
