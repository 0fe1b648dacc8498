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

std::string FindExecutable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
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

Result<ProcessResult> RunProcess(const ProcessOptions& options, std::stop_token stop) {
  if (options.argv.empty()) return InvalidArgument("RunProcess: empty argv");
  const auto start = std::chrono::steady_clock::now();

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(Errno("pipe2"));
  Fd read_end(pipe_fds[0]);
  Fd write_end(pipe_fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
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

  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return FailedPrecondition("cannot start " + options.argv[0] + ": " + std::strerror(rc));
  }
  write_end.Reset();
  fcntl(read_end.get(), F_SETFL, fcntl(read_end.get(), F_GETFL) | O_NONBLOCK);

  ProcessResult result;
  result.pid = pid;
  HeadTail sink(options.output_cap);

  Fd pidfd(PidfdOpen(pid));
  Fd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake.get() < 0) {
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return Internal(Errno("eventfd"));
  }
  std::stop_callback on_stop(stop, [&wake] {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t ignored = write(wake.get(), &one, sizeof one);
  });

  const bool has_deadline = options.timeout.count() > 0;
  const auto deadline = start + options.timeout;
  bool pipe_open = true;
  bool leader_done = false;  // exit noticed; still a zombie, so the group id stays reserved
  auto check_exit = [&] {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      leader_done = true;
    }
  };

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
    if (pidfd.get() < 0 && !leader_done && (timeout_ms < 0 || timeout_ms > 50)) timeout_ms = 50;

    pollfd fds[3];
    int n = 0;
    int pipe_idx = -1;
    int pid_idx = -1;
    if (pipe_open) {
      pipe_idx = n;
      fds[n++] = {read_end.get(), POLLIN, 0};
    }
    if (!leader_done && pidfd.get() >= 0) {
      pid_idx = n;
      fds[n++] = {pidfd.get(), POLLIN, 0};
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
      pipe_open = DrainPipe(read_end.get(), sink);
    }
    if ((pid_idx >= 0 && fds[pid_idx].revents != 0) || (pidfd.get() < 0 && !leader_done)) {
      check_exit();
    }
    if (leader_done && pipe_open && options.kill_group_on_exit) {
      // The direct child is gone but something it started still holds the
      // pipe: take what is there and stop waiting.
      DrainPipe(read_end.get(), sink);
      pipe_open = false;
    }
  }

  // Kill before reaping: while the leader is an unreaped zombie its pid (the
  // group id) cannot be reused, so the signal cannot hit a stranger.
  if (ending != Ending::kNone || options.kill_group_on_exit) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (ending == Ending::kFault) return Internal(fault);
  DrainPipe(read_end.get(), sink);

  if (ending == Ending::kTimeout) {
    result.outcome = ProcessResult::Outcome::kTimedOut;
  } else if (ending == Ending::kCancel) {
    result.outcome = ProcessResult::Outcome::kCancelled;
  } else if (WIFEXITED(status)) {
    result.outcome = ProcessResult::Outcome::kExited;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.outcome = ProcessResult::Outcome::kSignaled;
    result.signal = WTERMSIG(status);
  }

  result.total_output_bytes = sink.total();
  result.output_truncated = sink.truncated();
  result.output = sink.Take();
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

}  // namespace agentloop
