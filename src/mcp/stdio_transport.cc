#include "mcp/stdio_transport.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include <sys/eventfd.h>

namespace agentloop::mcp {

StdioTransport::StdioTransport(StdioOptions options) : options_(std::move(options)) {}

StdioTransport::~StdioTransport() { Close(); }

Status StdioTransport::Start(Handlers handlers) {
  handlers_ = std::move(handlers);
  if (options_.argv.empty() || options_.argv[0].empty()) {
    return InvalidArgument("MCP server '" + options_.name + "' has no command");
  }
  SpawnOptions spawn;
  spawn.argv = options_.argv;
  spawn.cwd = options_.cwd;
  spawn.env = options_.env;
  spawn.stdin_pipe = true;
  spawn.separate_stderr = true;
  spawn.label = "MCP server '" + options_.name + "' (" + options_.argv[0] + ")";
  AL_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child, ChildProcess::Spawn(spawn));
  pid_ = child->pid();
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    child_ = std::move(child);
  }
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
    if (closed_ || child_ == nullptr || child_->stdin_fd() < 0) {
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
    ssize_t n = write(child_->stdin_fd(), line.data() + off, line.size() - off);
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
  const int out_fd = child_->stdout_fd();
  const int err_fd = child_->stderr_fd();
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
      fds[n++] = {out_fd, POLLIN, 0};
    }
    if (err_open) {
      err_idx = n;
      fds[n++] = {err_fd, POLLIN, 0};
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
      ssize_t r = read(err_fd, buf, sizeof buf);
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
      ssize_t r = read(out_fd, buf, sizeof buf);
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
  // Not reaped here: Close reaps, so its signals cannot reach a process
  // that reused the pid. A process's files close before its exit can be
  // waited for: give a server that is exiting a moment, so the report says
  // how it ended.
  std::string how = "closed its stdout";
  if (child_->WaitExit(std::chrono::milliseconds(500))) {
    if (std::optional<ChildProcess::Exit> e = child_->Exited()) {
      how = e->signaled ? "was killed by signal " + std::to_string(e->code)
                        : "exited with status " + std::to_string(e->code);
    }
  }
  Finish(Unavailable("MCP server '" + options_.name + "' " + how + StderrSummary()));
}

void StdioTransport::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (child_ != nullptr) child_->CloseStdin();  // the server's cue to exit
  }
  if (child_ != nullptr) child_->Stop(options_.grace);
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t ignored = write(wake_fd_, &one, sizeof one);
  }
  if (reader_.joinable()) reader_.join();
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    child_.reset();  // its pipes
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

}  // namespace agentloop::mcp
