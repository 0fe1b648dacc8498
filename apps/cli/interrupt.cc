#include "interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace agentloop::cli {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<int> g_count{0};
std::atomic<bool> g_armed{false};

std::mutex g_mu;
std::stop_source g_source;  // Guarded by g_mu.

void OnSigint(int) {
  int n = g_count.fetch_add(1) + 1;
  if (g_armed.load() && n >= 2) {
    static const char kMsg[] = "\nagentloop: interrupted\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    (void)ignored;
    _exit(130);
  }
  char b = 1;
  ssize_t ignored = write(g_pipe[1], &b, 1);
  (void)ignored;
}

// SIGPIPE (stdout closed by `| head`) must not kill a turn half-way. A
// handler, unlike SIG_IGN, is reset by exec, so tools' children still get
// the default behaviour.
void OnSigpipe(int) {}

void Watch() {
  char b;
  while (true) {
    ssize_t n = read(g_pipe[0], &b, 1);
    if (n < 0) continue;  // EINTR
    if (n == 0) return;
    std::lock_guard lock(g_mu);
    if (g_armed.load()) g_source.request_stop();
  }
}

}  // namespace

void Interrupts::Install() {
  if (pipe(g_pipe) != 0) return;
  fcntl(g_pipe[1], F_SETFL, fcntl(g_pipe[1], F_GETFL) | O_NONBLOCK);
  fcntl(g_pipe[0], F_SETFD, FD_CLOEXEC);
  fcntl(g_pipe[1], F_SETFD, FD_CLOEXEC);
  struct sigaction sa = {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking read at the chat prompt returns EINTR
  sigaction(SIGINT, &sa, nullptr);
  struct sigaction pipe_sa = {};
  pipe_sa.sa_handler = OnSigpipe;
  sigemptyset(&pipe_sa.sa_mask);
  pipe_sa.sa_flags = SA_RESTART;
  sigaction(SIGPIPE, &pipe_sa, nullptr);
  std::thread(Watch).detach();
}

std::stop_token Interrupts::Arm() {
  std::lock_guard lock(g_mu);
  g_source = std::stop_source();
  g_count.store(0);
  g_armed.store(true);
  return g_source.get_token();
}

void Interrupts::Disarm() {
  g_armed.store(false);
  g_count.store(0);
}

int Interrupts::Count() { return g_count.load(); }
void Interrupts::Clear() { g_count.store(0); }

}  // namespace agentloop::cli
