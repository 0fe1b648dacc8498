// Running a child process with a deadline, cancellation and bounded output.
//
// RunProcess() spawns the child in its own session and process group
// (setsid), with stdin on /dev/null and stdout+stderr on one pipe. It waits
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
#include <stop_token>
#include <string>
#include <vector>

#include "agentloop/status.h"

namespace agentloop {

struct ProcessOptions {
  // argv[0] is the program: an absolute path or a name looked up in PATH.
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

// The current process environment without the variables named in `remove`
// and without any variable whose name ends in "_API_KEY".
std::vector<std::string> ScrubbedEnvironment(const std::vector<std::string>& remove);

// Searches PATH (of this process) for an executable called `name`; returns
// the absolute path, or empty when not found. A name containing '/' is
// returned as is when it is executable.
std::string FindExecutable(const std::string& name);

}  // namespace agentloop
