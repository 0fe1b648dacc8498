#include "mcp/stdio_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

namespace agentloop::mcp {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

// Waits up to `limit` for `pid` to exit; reaps it and returns true if it
// did.
bool WaitExit(pid_t pid, int pidfd, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      (void)poll(&p, 1, static_cast<int>(left.count()) + 1);
    } else {
      // Without a pidfd (old kernels) the exit is checked at a coarse
      // interval.
      pollfd none{-1, 0, 0};
      (void)poll(&none, 0, static_cast<int>(std::min<int64_t>(left.count(), 20)));
    }
  }
}

}  // namespace

StdioTransport::StdioTransport(StdioOptions options) : options_(std::move(options)) {}

StdioTransport::~StdioTransport() { Close(); }

Status StdioTransport::Start(Handlers handlers) {
  handlers_ = std::move(handlers);
  if (options_.argv.empty() || options_.argv[0].empty()) {
    return InvalidArgument("MCP server '" + options_.name + "' has no command");
  }
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return Internal(std::string("pipe2: ") + std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return Internal(std::string("pipe2: ") + std::strerror(errno));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    return Internal(std::string("pipe2: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  if (!options_.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options_.cwd.c_str());
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
  for (const auto& a : options_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : options_.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // posix_spawnp looks the program up in this process's PATH; the server's
  // own PATH (from `env`) is what a person configured, so look there.
  std::string program = options_.argv[0];
  if (program.find('/') == std::string::npos) {
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (const auto& e : options_.env) {
      if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
    }
    size_t start = 0;
    while (start <= path.size()) {
      size_t colon = path.find(':', start);
      std::string dir = path.substr(start, colon == std::string::npos ? colon : colon - start);
      if (dir.empty()) dir = ".";
      std::string candidate = dir + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  pid_t pid = 0;
  int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    return FailedPrecondition("cannot start MCP server '" + options_.name + "' (" +
                              options_.argv[0] + "): " + std::strerror(rc));
  }
  pid_ = pid;
  in_fd_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  reader_ = std::thread([this] { ReadLoop(); });
  return Status::Ok();
}

Status StdioTransport::Send(const std::string& message) {
  if (message.find('\n') != std::string::npos) {
    return InvalidArgument("an MCP message may not contain a newline on stdio");
  }
  std::lock_guard<std::mutex> lock(send_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_ || in_fd_ < 0) {
      return Unavailable("MCP server '" + options_.name + "' is not running");
    }
  }
  std::string line = message + "\n";
  // A server that has exited makes the write fail with EPIPE; the SIGPIPE
  // that comes with it is blocked on this thread and consumed, so it never
  // reaches a process that has not ignored it.
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  Status result = Status::Ok();
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = write(in_fd_, line.data() + off, line.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      result = Unavailable("MCP server '" + options_.name +
                           "': writing to its stdin failed: " + std::strerror(errno));
      if (errno == EPIPE && !sigismember(&old_set, SIGPIPE)) {
        timespec zero{0, 0};
        (void)sigtimedwait(&pipe_set, nullptr, &zero);
      }
      break;
    }
    off += static_cast<size_t>(n);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return result;
}

std::vector<std::string> StdioTransport::stderr_tail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {stderr_tail_.begin(), stderr_tail_.end()};
}

std::string StdioTransport::StderrSummary() const {
  std::vector<std::string> tail = stderr_tail();
  if (tail.empty()) return "";
  std::string s;
  size_t from = tail.size() > 3 ? tail.size() - 3 : 0;
  for (size_t i = from; i < tail.size(); ++i) s += (s.empty() ? "" : " | ") + tail[i];
  return "; its stderr ended with: " + s;
}

void StdioTransport::Finish(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
  }
  if (handlers_.on_closed) handlers_.on_closed(why);
}

void StdioTransport::ReadLoop() {
  std::string out_buf;
  std::string err_buf;
  bool out_open = true;
  bool err_open = true;
  auto take_stderr_line = [&](std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (options_.on_stderr) options_.on_stderr(line);
    std::lock_guard<std::mutex> lock(mu_);
    stderr_tail_.push_back(std::move(line));
    while (stderr_tail_.size() > options_.stderr_lines) stderr_tail_.pop_front();
  };
  while (out_open || err_open) {
    pollfd fds[3];
    int n = 0;
    int out_idx = -1, err_idx = -1;
    if (out_open) {
      out_idx = n;
      fds[n++] = {out_fd_, POLLIN, 0};
    }
    if (err_open) {
      err_idx = n;
      fds[n++] = {err_fd_, POLLIN, 0};
    }
    int wake_idx = n;
    fds[n++] = {wake_fd_, POLLIN, 0};
    if (poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      Finish(Internal(std::string("poll: ") + std::strerror(errno)));
      return;
    }
    if (fds[wake_idx].revents != 0) {
      Finish(Unavailable("MCP server '" + options_.name + "' was closed"));
      return;
    }
    char buf[65536];
    if (err_idx >= 0 && fds[err_idx].revents != 0) {
      ssize_t r = read(err_fd_, buf, sizeof buf);
      if (r <= 0 && !(r < 0 && errno == EINTR)) {
        err_open = false;
        if (!err_buf.empty()) take_stderr_line(std::move(err_buf));
        err_buf.clear();
      } else if (r > 0) {
        err_buf.append(buf, static_cast<size_t>(r));
        size_t nl;
        while ((nl = err_buf.find('\n')) != std::string::npos) {
          take_stderr_line(err_buf.substr(0, nl));
          err_buf.erase(0, nl + 1);
        }
        if (err_buf.size() > 64 * 1024) {  // a log line without end: keep its start
          take_stderr_line(err_buf.substr(0, 4096));
          err_buf.clear();
        }
      }
    }
    if (out_idx >= 0 && fds[out_idx].revents != 0) {
      ssize_t r = read(out_fd_, buf, sizeof buf);
      if (r <= 0 && !(r < 0 && errno == EINTR)) {
        out_open = false;
      } else if (r > 0) {
        out_buf.append(buf, static_cast<size_t>(r));
        size_t start = 0;
        size_t nl;
        while ((nl = out_buf.find('\n', start)) != std::string::npos) {
          std::string_view line(out_buf.data() + start, nl - start);
          start = nl + 1;
          if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
          if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
          if (!handlers_.on_message(line)) {
            // Not a message: the stream is broken; the connection is over.
            Finish(Unavailable("MCP server '" + options_.name + "' wrote garbage on stdout"));
            return;
          }
        }
        out_buf.erase(0, start);
        if (out_buf.size() > options_.max_message_bytes) {
          Finish(Unavailable("MCP server '" + options_.name + "' sent a message over " +
                             std::to_string(options_.max_message_bytes) + " bytes"));
          return;
        }
      }
    }
    if (!out_open) {
      // stdout closed: the server is gone (or has stopped talking). Read
      // what stderr still has to say before reporting.
      if (err_open) continue;
      break;
    }
  }
  // Not reaped here (WNOWAIT): Close reaps, so its signals cannot reach a
  // process that reused the pid.
  std::string how = "closed its stdout";
  // A process's files close before its exit can be waited for: give a
  // server that is exiting a moment, so the report says how it ended.
  if (int pidfd = PidfdOpen(pid_); pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    (void)poll(&p, 1, 500);
    close(pidfd);
  }
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid == pid_) {
    if (info.si_code == CLD_EXITED) how = "exited with status " + std::to_string(info.si_status);
    if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
      how = "was killed by signal " + std::to_string(info.si_status);
    }
  }
  Finish(Unavailable("MCP server '" + options_.name + "' " + how + StderrSummary()));
}

void StdioTransport::Close() {
  int pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    pid = pid_;
  }
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    CloseFd(in_fd_);  // the server's cue to exit
  }
  if (pid > 0) {
    // Still not reaped here: its pid (the group id) cannot be reused yet,
    // so the signals cannot hit a stranger.
    int pidfd = PidfdOpen(pid);
    if (!WaitExit(pid, pidfd, options_.grace)) {
      kill(-pid, SIGTERM);
      if (!WaitExit(pid, pidfd, options_.grace)) {
        kill(-pid, SIGKILL);
        (void)WaitExit(pid, pidfd, std::chrono::milliseconds(60000));
      }
    }
    if (pidfd >= 0) close(pidfd);
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t ignored = write(wake_fd_, &one, sizeof one);
  }
  if (reader_.joinable()) reader_.join();
  CloseFd(out_fd_);
  CloseFd(err_fd_);
  CloseFd(wake_fd_);
}

}  // namespace agentloop::mcp
