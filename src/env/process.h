// Child processes: spawning one with its standard streams on pipes
// (ChildProcess, for a caller that talks to it while it runs), and running one
// with a deadline, cancellation and bounded output (RunProcess).
//
// Every child is spawned the same way: without a shell, in its own session
// and process group (setsid), with signals at their defaults and unblocked,
// in the given directory, with exactly the given environment.
//
// RunProcess() spawns the child with stdin on /dev/null and stdout+stderr on
// one pipe. It waits
// for events only (poll on the pipe, a pidfd for the child's exit and an
// eventfd signalled by the stop token), never in a sleep loop. On timeout or
// cancellation the whole process group is killed with SIGKILL, grandchildren
// included (a process that created its own session escapes; that is the
// limit of process groups).
//
// Output is captured while streaming: the first half of `output_cap` bytes is
// kept as the head, a rolling window of the last half as the tail, and the
// middle is replaced by a marker, so a command printing 100 MB costs
// O(output_cap) memory.
//
// Thread-safety: RunProcess may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop {

struct SpawnOptions {
  // argv[0] is the program: a path (it contains '/'), or a name looked up in
  // the PATH of `env` (/usr/local/bin:/usr/bin:/bin when `env` has none).
  std::vector<std::string> argv;
  std::filesystem::path cwd;  // empty: inherit
  // The complete environment as "NAME=value" entries.
  std::vector<std::string> env;
  // stdin: a pipe from this process (stdin_fd), else /dev/null.
  bool stdin_pipe = false;
  // stderr: a pipe of its own (stderr_fd), else stdout's.
  bool separate_stderr = false;
  // The program as errors name it ("cannot start LABEL: ..."); empty: argv[0].
  std::string label;
};

// A spawned child (SpawnOptions) and this process's ends of its pipes.
//
// The child is not reaped before Reap, Stop or the destructor: until then its
// pid, which is also its process group's id, cannot be reused, so a signal to
// the group cannot reach a stranger. A process of the group that created its
// own session escapes the group's signals; that is the limit of process
// groups.
//
// Thread-safety: pid, the fd accessors, Exited and WaitExit may be called
// from any thread; CloseStdin, SignalGroup, Reap and Stop from one thread at
// a time (a caller writing to stdin_fd on another thread serialises that
// with CloseStdin).
class ChildProcess {
 public:
  struct Exit {
    bool signaled = false;  // killed by a signal (`code` is the signal), else exited
    int code = 0;           // the exit status, or the signal
  };

  // Errors: kInvalidArgument for an empty argv; kFailedPrecondition when the
  // program cannot be started ("cannot start LABEL: reason"); kInternal when
  // the OS fails (pipes).
  static Result<std::unique_ptr<ChildProcess>> Spawn(const SpawnOptions& options);
  // Kills the group with SIGKILL and reaps, unless reaped already; closes
  // the pipes.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int pid() const { return pid_; }
  int stdin_fd() const { return stdin_fd_; }    // -1 without stdin_pipe, or once closed
  int stdout_fd() const { return stdout_fd_; }  // stdout, and stderr unless separate_stderr
  int stderr_fd() const { return stderr_fd_; }  // -1 without separate_stderr
  // Readable when the child has exited; -1 on kernels without pidfd_open
  // (WaitExit then checks at a coarse interval).
  int pidfd() const { return pidfd_; }

  void CloseStdin();
  // How the child ended, once it has (it stays unreaped); nullopt while it
  // runs.
  std::optional<Exit> Exited() const;
  // Waits up to `limit` for the child to exit; true when it has.
  bool WaitExit(std::chrono::milliseconds limit) const;
  // Sends `sig` to the child's process group (nothing once reaped).
  void SignalGroup(int sig);
  // Waits for the child's exit and reaps it; how it ended.
  Exit Reap();
  // Ends the child as a server is ended: stdin closed, up to `grace` for it
  // to exit, then SIGTERM to its group, up to `grace` more, then SIGKILL;
  // reaped.
  Exit Stop(std::chrono::milliseconds grace);

 private:
  ChildProcess() = default;
  int pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int pidfd_ = -1;
  mutable std::mutex mu_;
  std::optional<Exit> reaped_;  // Guarded by mu_.
};

struct ProcessOptions {
  // argv[0] is the program: a path, or a name looked up in the PATH of
  // `env` (SpawnOptions).
  std::vector<std::string> argv;
  std::filesystem::path cwd;  // empty: inherit
  // The complete environment as "NAME=value" entries.
  std::vector<std::string> env;
  // Zero or negative: no timeout.
  std::chrono::milliseconds timeout{120000};
  // Bytes of combined stdout+stderr kept (head + tail).
  size_t output_cap = 30000;
  // When the direct child exits, kill what is left of its process group
  // (background jobs still holding the output pipe) instead of waiting for
  // the pipe to close.
  bool kill_group_on_exit = true;
};

struct ProcessResult {
  enum class Outcome { kExited, kSignaled, kTimedOut, kCancelled };
  Outcome outcome = Outcome::kExited;
  int exit_code = -1;  // kExited: the exit status
  int signal = 0;      // kSignaled: the terminating signal
  // Captured output: the whole output when it fit, else head + marker + tail.
  // Raw bytes; may contain invalid UTF-8.
  std::string output;
  uint64_t total_output_bytes = 0;
  bool output_truncated = false;
  int pid = 0;  // also the process group id
  std::chrono::milliseconds elapsed{0};
};

// Runs the process to completion, timeout or cancellation. Errors (non-OK)
// only when the process could not be started or the OS failed; what the
// process did is in ProcessResult.
Result<ProcessResult> RunProcess(const ProcessOptions& options, std::stop_token stop);

// Which variables a child process started for the model (the bash tool)
// inherits. Secrets stay out by name: the model reads whatever a command
// prints, so a variable the command can see is a variable the model can see.
struct EnvPolicy {
  // Removed besides the secret-looking names (IsSecretName): the variables
  // that hold the provider's API key and the approver's secret.
  std::vector<std::string> remove;
  // Kept even when a rule would remove them (a person's explicit choice).
  std::vector<std::string> pass;
  // Added last, replacing an inherited value of the same name.
  std::map<std::string, std::string> set;
};

// Whether a variable of this name is removed by default: the name contains
// KEY, SECRET, TOKEN, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL (in any
// case), or it is one of the AWS variables that hold or locate credentials
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_SECURITY_TOKEN, AWS_CONTAINER_AUTHORIZATION_TOKEN,
// AWS_CONTAINER_CREDENTIALS_FULL_URI, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI,
// AWS_WEB_IDENTITY_TOKEN_FILE, AWS_SHARED_CREDENTIALS_FILE).
bool IsSecretName(std::string_view name);

// `base` ("NAME=value" entries, in order) without the secret-looking names
// and the names in policy.remove, except those in policy.pass, followed by
// policy.set (which replaces entries of the same name). An entry without
// '=' is dropped.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& base,
                                          const EnvPolicy& policy);

// This process's environment as "NAME=value" entries.
std::vector<std::string> CurrentEnvironment();

// ChildEnvironment(CurrentEnvironment(), policy).
std::vector<std::string> ScrubbedEnvironment(const EnvPolicy& policy);

// Searches PATH (of this process) for an executable called `name`; returns
// the absolute path, or empty when not found. A name containing '/' is
// returned as is when it is executable.
std::string FindExecutable(const std::string& name);

// FindExecutable with the PATH of `env` ("NAME=value" entries; the last
// PATH entry counts, /usr/local/bin:/usr/bin:/bin when there is none): where
// a child given that environment finds `name`.
std::string FindExecutableIn(const std::string& name, const std::vector<std::string>& env);

}  // namespace agentloop
