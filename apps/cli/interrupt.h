// Ctrl-C for the CLI: the first SIGINT asks the running turn to stop
// (request_stop on its std::stop_source, so the turn ends `aborted` and the
// command exits 130); a second SIGINT before the turn ends exits the process
// at once with 130.
//
// The signal handler only counts and writes one byte to a pipe; a watcher
// thread turns that into request_stop (which is not async-signal-safe).
//
// Thread-safety: Install() once, from main, before other threads start.
// Arm()/Disarm() from the thread that runs turns.
#pragma once

#include <stop_token>

namespace agentloop::cli {

class Interrupts {
 public:
  // Installs the SIGINT handler (and a no-op SIGPIPE handler, so a closed
  // stdout never kills a turn) and starts the watcher thread.
  static void Install();

  // A fresh stop token for the next turn; SIGINT count reset to zero.
  static std::stop_token Arm();
  // The turn ended: SIGINT goes back to "count only" (a chat prompt
  // handles it) until the next Arm().
  static void Disarm();

  // SIGINTs received since the last Arm()/Disarm()/Clear().
  static int Count();
  static void Clear();
};

}  // namespace agentloop::cli
