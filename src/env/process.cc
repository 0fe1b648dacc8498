#include "env/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <utility>

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char** environ;

namespace agentloop {
namespace {

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Keeps the first `head_cap` and the last `tail_cap` bytes of a stream.
class HeadTail {
 public:
  explicit HeadTail(size_t cap) : head_cap_(cap / 2), tail_cap_(cap - cap / 2) {}

  void Append(const char* data, size_t n) {
    total_ += n;
    if (head_.size() < head_cap_) {
      size_t take = std::min(n, head_cap_ - head_.size());
      head_.append(data, take);
      data += take;
      n -= take;
    }
    if (n == 0 || tail_cap_ == 0) return;
    if (n >= tail_cap_) {
      tail_.assign(data + n - tail_cap_, tail_cap_);
      return;
    }
    tail_.append(data, n);
    if (tail_.size() > 2 * tail_cap_) tail_.erase(0, tail_.size() - tail_cap_);
  }

  uint64_t total() const { return total_; }
  bool truncated() const { return total_ > head_.size() + std::min(tail_.size(), tail_cap_); }

  std::string Take() {
    if (tail_.size() > tail_cap_) tail_.erase(0, tail_.size() - tail_cap_);
    if (!truncated()) return head_ + tail_;
    // Keep UTF-8 sequences whole at the cut points.
    size_t h = head_.size();
    size_t back = 0;
    while (back < 4 && back < h && (static_cast<unsigned char>(head_[h - 1 - back]) & 0xC0) == 0x80)
      ++back;
    if (back < h && back < 4) {
      unsigned char lead = static_cast<unsigned char>(head_[h - 1 - back]);
      size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      if (need > back + 1) h -= back + 1;
    }
    size_t t = 0;
    while (t < 3 && t < tail_.size() && (static_cast<unsigned char>(tail_[t]) & 0xC0) == 0x80) ++t;
    uint64_t omitted = total_ - h - (tail_.size() - t);
    std::string out = head_.substr(0, h);
    out += "\n\n... [" + std::to_string(omitted) + " bytes of output omitted] ...\n\n";
    out.append(tail_, t, std::string::npos);
    return out;
  }

 private:
  size_t head_cap_;
  size_t tail_cap_;
  std::string head_;
  std::string tail_;
  uint64_t total_ = 0;
};

// Reads everything currently available. Returns false at EOF or error.
bool DrainPipe(int fd, HeadTail& sink) {
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      sink.Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

}  // namespace

bool IsSecretName(std::string_view name) {
  static constexpr std::string_view kWords[] = {"KEY",    "SECRET",     "TOKEN",     "PASSWORD",
                                                "PASSWD", "PASSPHRASE", "CREDENTIAL"};
  static constexpr std::string_view kAws[] = {"AWS_ACCESS_KEY_ID",
                                              "AWS_SECRET_ACCESS_KEY",
                                              "AWS_SESSION_TOKEN",
                                              "AWS_SECURITY_TOKEN",
                                              "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                                              "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                              "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                              "AWS_WEB_IDENTITY_TOKEN_FILE",
                                              "AWS_SHARED_CREDENTIALS_FILE"};
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string_view w : kWords) {
    if (upper.find(w) != std::string::npos) return true;
  }
  for (std::string_view a : kAws) {
    if (upper == a) return true;
  }
  return false;
}

std::vector<std::string> ChildEnvironment(const std::vector<std::string>& base,
                                          const EnvPolicy& policy) {
  auto listed = [](const std::vector<std::string>& names, std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> out;
  for (const std::string& entry : base) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string_view name = std::string_view(entry).substr(0, eq);
    if (policy.set.count(std::string(name)) > 0) continue;
    bool drop = IsSecretName(name) || listed(policy.remove, name);
    if (drop && !listed(policy.pass, name)) continue;
    out.push_back(entry);
  }
  for (const auto& [name, value] : policy.set) out.push_back(name + "=" + value);
  return out;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

std::vector<std::string> ScrubbedEnvironment(const EnvPolicy& policy) {
  return ChildEnvironment(CurrentEnvironment(), policy);
}

namespace {

// Looks `name` up in the directories of `path` (colon-separated; an empty
// entry is the current directory).
std::string SearchPath(const std::string& name, std::string_view path) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  std::string_view rest = path;
  while (true) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return {};
}

constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

}  // namespace

std::string FindExecutable(const std::string& name) {
  const char* path = getenv("PATH");
  return SearchPath(name, path != nullptr ? std::string_view(path) : kDefaultPath);
}

std::string FindExecutableIn(const std::string& name, const std::vector<std::string>& env) {
  std::string_view path = kDefaultPath;
  for (const std::string& e : env) {
    if (e.rfind("PATH=", 0) == 0) path = std::string_view(e).substr(5);
  }
  return SearchPath(name, path);
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return InvalidArgument("cannot start a process: empty argv");
  }
  const std::string& label = options.label.empty() ? options.argv[0] : options.label;
  // Our ends and the child's, closed on every path out of here; ours are
  // handed to the ChildProcess at the end.
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  Fd in_r, in_w, out_r, out_w, err_r, err_w;
  if (options.stdin_pipe) {
    if (pipe2(in, O_CLOEXEC) != 0) return Internal(Errno("pipe2"));
    in_r.Reset(in[0]);
    in_w.Reset(in[1]);
  }
  if (pipe2(out, O_CLOEXEC) != 0) return Internal(Errno("pipe2"));
  out_r.Reset(out[0]);
  out_w.Reset(out[1]);
  if (options.separate_stderr) {
    if (pipe2(err, O_CLOEXEC) != 0) return Internal(Errno("pipe2"));
    err_r.Reset(err[0]);
    err_w.Reset(err[1]);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdin_pipe) {
    posix_spawn_file_actions_adddup2(&actions, in_r.get(), 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, options.separate_stderr ? err_w.get() : out_w.get(),
                                   2);
  std::string cwd = options.cwd.string();
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // The child's PATH, not this process's, says where its program is (what
  // posix_spawnp would search is ours).
  std::string program = options.argv[0];
  if (program.find('/') == std::string::npos) {
    std::string found = FindExecutableIn(program, options.env);
    if (!found.empty()) program = std::move(found);
  }

  pid_t pid = 0;
  int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return FailedPrecondition("cannot start " + label + ": " + std::strerror(rc));

  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->stdin_fd_ = in_w.Release();
  child->stdout_fd_ = out_r.Release();
  child->stderr_fd_ = err_r.Release();
  child->pidfd_ = PidfdOpen(pid);
  return child;
}

ChildProcess::~ChildProcess() {
  bool reaped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reaped = reaped_.has_value();
  }
  if (!reaped && pid_ > 0) {
    SignalGroup(SIGKILL);
    Reap();
  }
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_, pidfd_}) {
    if (fd >= 0) close(fd);
  }
}

void ChildProcess::CloseStdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

namespace {

ChildProcess::Exit FromWaitStatus(int status) {
  ChildProcess::Exit e;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.code = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    e.code = WEXITSTATUS(status);
  }
  return e;
}

}  // namespace

std::optional<ChildProcess::Exit> ChildProcess::Exited() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reaped_) return reaped_;
  }
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid == pid_) {
    Exit e;
    e.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    e.code = info.si_status;
    return e;
  }
  const bool gone = errno == ECHILD;
  std::lock_guard<std::mutex> lock(mu_);
  if (reaped_) return reaped_;  // reaped meanwhile by another thread
  // Not this process's child any more (SIGCHLD ignored reaps at once): it
  // has ended, how is unknown.
  if (gone) return Exit{};
  return std::nullopt;
}

bool ChildProcess::WaitExit(std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (Exited()) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      (void)poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    } else {
      // Without a pidfd (old kernels) the exit is checked at a coarse
      // interval.
      (void)poll(nullptr, 0, static_cast<int>(std::min<int64_t>(left.count(), 20)));
    }
  }
}

void ChildProcess::SignalGroup(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  // Before the reap the group id cannot have been reused.
  if (!reaped_ && pid_ > 0) kill(-pid_, sig);
}

ChildProcess::Exit ChildProcess::Reap() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reaped_) return *reaped_;
  }
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  reaped_ = r == pid_ ? FromWaitStatus(status) : Exit{};
  return *reaped_;
}

ChildProcess::Exit ChildProcess::Stop(std::chrono::milliseconds grace) {
  CloseStdin();  // the child's cue to exit
  if (!WaitExit(grace)) {
    SignalGroup(SIGTERM);
    if (!WaitExit(grace)) SignalGroup(SIGKILL);
  }
  return Reap();
}

Result<ProcessResult> RunProcess(const ProcessOptions& options, std::stop_token stop) {
  if (options.argv.empty()) return InvalidArgument("RunProcess: empty argv");
  const auto start = std::chrono::steady_clock::now();

  SpawnOptions spawn;
  spawn.argv = options.argv;
  spawn.cwd = options.cwd;
  spawn.env = options.env;
  AL_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child, ChildProcess::Spawn(spawn));
  const int read_end = child->stdout_fd();
  fcntl(read_end, F_SETFL, fcntl(read_end, F_GETFL) | O_NONBLOCK);

  ProcessResult result;
  result.pid = child->pid();
  HeadTail sink(options.output_cap);

  const int pidfd = child->pidfd();
  Fd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake.get() < 0) return Internal(Errno("eventfd"));  // the child is killed and reaped
  std::stop_callback on_stop(stop, [&wake] {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t ignored = write(wake.get(), &one, sizeof one);
  });

  const bool has_deadline = options.timeout.count() > 0;
  const auto deadline = start + options.timeout;
  bool pipe_open = true;
  bool leader_done = false;  // exit noticed; still a zombie, so the group id stays reserved
  auto check_exit = [&] { leader_done = child->Exited().has_value(); };

  enum class Ending { kNone, kTimeout, kCancel, kFault } ending = Ending::kNone;
  std::string fault;
  while (pipe_open || !leader_done) {
    if (stop.stop_requested()) {
      ending = Ending::kCancel;
      break;
    }
    int timeout_ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ending = Ending::kTimeout;
        break;
      }
      timeout_ms = static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
    }
    // Without a pidfd (old kernels) the exit is noticed by checking waitid at
    // a coarse interval; with one, every wake-up is an event.
    if (pidfd < 0 && !leader_done && (timeout_ms < 0 || timeout_ms > 50)) timeout_ms = 50;

    pollfd fds[3];
    int n = 0;
    int pipe_idx = -1;
    int pid_idx = -1;
    if (pipe_open) {
      pipe_idx = n;
      fds[n++] = {read_end, POLLIN, 0};
    }
    if (!leader_done && pidfd >= 0) {
      pid_idx = n;
      fds[n++] = {pidfd, POLLIN, 0};
    }
    int wake_idx = n;
    fds[n++] = {wake.get(), POLLIN, 0};
    int pr = poll(fds, static_cast<nfds_t>(n), timeout_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      fault = Errno("poll");
      ending = Ending::kFault;
      break;
    }
    if (fds[wake_idx].revents != 0) {
      ending = Ending::kCancel;
      break;
    }
    if (pipe_idx >= 0 && fds[pipe_idx].revents != 0) {
      pipe_open = DrainPipe(read_end, sink);
    }
    if ((pid_idx >= 0 && fds[pid_idx].revents != 0) || (pidfd < 0 && !leader_done)) {
      check_exit();
    }
    if (leader_done && pipe_open && options.kill_group_on_exit) {
      // The direct child is gone but something it started still holds the
      // pipe: take what is there and stop waiting.
      DrainPipe(read_end, sink);
      pipe_open = false;
    }
  }

  // Kill before reaping (ChildProcess): the signal cannot hit a stranger.
  if (ending != Ending::kNone || options.kill_group_on_exit) child->SignalGroup(SIGKILL);
  const ChildProcess::Exit exit = child->Reap();
  if (ending == Ending::kFault) return Internal(fault);
  DrainPipe(read_end, sink);

  if (ending == Ending::kTimeout) {
    result.outcome = ProcessResult::Outcome::kTimedOut;
  } else if (ending == Ending::kCancel) {
    result.outcome = ProcessResult::Outcome::kCancelled;
  } else if (exit.signaled) {
    result.outcome = ProcessResult::Outcome::kSignaled;
    result.signal = exit.code;
  } else {
    result.outcome = ProcessResult::Outcome::kExited;
    result.exit_code = exit.code;
  }

  result.total_output_bytes = sink.total();
  result.output_truncated = sink.truncated();
  result.output = sink.Take();
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

}  // namespace agentloop
