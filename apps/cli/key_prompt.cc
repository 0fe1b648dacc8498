#include "key_prompt.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <ostream>
#include <string>

namespace agentloop::cli {
namespace {

using permissions::ConsoleRead;

// How long a byte after Esc may take to arrive and still belong to an
// escape sequence (a key's sequence arrives in one write).
constexpr int kEscapeSequenceMs = 50;

// Restores the terminal's settings when the read ends.
class KeyMode {
 public:
  explicit KeyMode(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  ~KeyMode() {
    if (active_) tcsetattr(fd_, TCSANOW, &saved_);
  }
  KeyMode(const KeyMode&) = delete;
  KeyMode& operator=(const KeyMode&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

// A pipe that a requested stop writes to, so poll() wakes.
class StopPipe {
 public:
  StopPipe() {
    if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) fds_[0] = fds_[1] = -1;
  }
  ~StopPipe() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  StopPipe(const StopPipe&) = delete;
  StopPipe& operator=(const StopPipe&) = delete;
  int read_end() const { return fds_[0]; }
  void Wake() const {
    if (fds_[1] < 0) return;
    char b = 1;
    ssize_t ignored = write(fds_[1], &b, 1);
    (void)ignored;
  }

 private:
  int fds_[2] = {-1, -1};
};

enum class Wait { kByte, kStopped, kEnd, kTimeout };

// Waits up to `timeout_ms` (-1: no limit) for a byte of `fd`.
Wait ReadByte(int fd, const StopPipe& stop_pipe, int timeout_ms, unsigned char* c) {
  while (true) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_pipe.read_end(), POLLIN, 0}};
    int n = poll(fds, stop_pipe.read_end() >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Wait::kEnd;
    if (n == 0) return Wait::kTimeout;
    if (fds[1].revents != 0) return Wait::kStopped;
    ssize_t got = read(fd, c, 1);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return got == 1 ? Wait::kByte : Wait::kEnd;
  }
}

}  // namespace

ConsoleRead ReadKeysLine(int fd, std::ostream& echo, std::string_view prompt,
                         const std::stop_token& stop) {
  using Kind = ConsoleRead::Kind;
  StopPipe stop_pipe;
  std::stop_callback wake(stop, [&stop_pipe] { stop_pipe.Wake(); });
  KeyMode mode(fd);
  echo << prompt;
  echo.flush();
  std::string line;
  auto finish = [&](const char* shown) {
    echo << shown;
    echo.flush();
  };
  while (true) {
    unsigned char c = 0;
    Wait w = ReadByte(fd, stop_pipe, -1, &c);
    if (w == Wait::kStopped || stop.stop_requested()) {
      finish("\n");
      return {Kind::kEnd, ""};
    }
    if (w != Wait::kByte) {
      finish("\n");
      return {Kind::kEnd, ""};
    }
    if (c == '\r' || c == '\n') {
      finish("\n");
      return {Kind::kLine, std::move(line)};
    }
    if (c == 0x03) {  // Ctrl-C
      finish("^C\n");
      return {Kind::kCancelled, ""};
    }
    if (c == 0x1b) {  // Esc, or the start of a key's escape sequence
      unsigned char next = 0;
      Wait more = ReadByte(fd, stop_pipe, kEscapeSequenceMs, &next);
      if (more == Wait::kTimeout) {
        finish("(Esc)\n");
        return {Kind::kCancelled, ""};
      }
      if (more != Wait::kByte) continue;
      if (next == '[' || next == 'O') {
        // CSI or SS3: parameter bytes, then one final byte in 0x40..0x7e.
        unsigned char b = 0;
        while (ReadByte(fd, stop_pipe, kEscapeSequenceMs, &b) == Wait::kByte &&
               !(b >= 0x40 && b <= 0x7e)) {
        }
      }
      continue;
    }
    if (c == 0x04) {  // Ctrl-D
      if (line.empty()) {
        finish("\n");
        return {Kind::kEnd, ""};
      }
      continue;
    }
    if (c == 0x7f || c == 0x08) {  // Backspace: one character (UTF-8 aware)
      if (line.empty()) continue;
      while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xc0) == 0x80) {
        line.pop_back();
      }
      if (!line.empty()) line.pop_back();
      finish("\b \b");
      continue;
    }
    if (c == 0x15) {  // Ctrl-U: the whole line
      for (size_t i = 0; i < line.size(); ++i) {
        if ((static_cast<unsigned char>(line[i]) & 0xc0) != 0x80) echo << "\b \b";
      }
      line.clear();
      echo.flush();
      continue;
    }
    if (c < 0x20) continue;  // other control keys
    line.push_back(static_cast<char>(c));
    echo.put(static_cast<char>(c));
    echo.flush();
  }
}

}  // namespace agentloop::cli
