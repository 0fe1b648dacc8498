// The stdio transport: the server is a child process speaking
// newline-delimited JSON-RPC on its stdin and stdout.
//
// The child is spawned by ChildProcess (env/process.h): without a shell
// (argv as given, the program looked up in the PATH of `env`), in its own
// process group, in `cwd`, with exactly `env`. stderr is the server's log: its lines are kept (the
// last `stderr_lines`) and handed to `on_stderr`, never treated as an error. Close() ends it as the
// MCP lifecycle says: stdin is closed, then after `grace` SIGTERM goes to its process group, then
// after `grace` SIGKILL.
//
// Thread-safety: Send may be called from several threads; one reader
// thread per transport delivers messages and stderr lines.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/process.h"
#include "mcp/jsonrpc.h"

namespace agentloop::mcp {

struct StdioOptions {
  std::string name;  // the configured server name, for messages
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::string> env;  // "NAME=value"
  std::chrono::milliseconds grace{2000};
  size_t stderr_lines = 50;
  // Longest accepted message (a longer line ends the connection).
  size_t max_message_bytes = 16 * 1024 * 1024;
  std::function<void(const std::string& line)> on_stderr;
};

class StdioTransport final : public Transport {
 public:
  explicit StdioTransport(StdioOptions options);
  ~StdioTransport() override;
  Status Start(Handlers handlers) override;
  Status Send(const std::string& message) override;
  void Close() override;

  // The last lines the server wrote to stderr.
  std::vector<std::string> stderr_tail() const;
  int pid() const { return pid_; }

 private:
  void ReadLoop();
  void Finish(const Status& why);
  std::string StderrSummary() const;

  StdioOptions options_;
  Handlers handlers_;
  int pid_ = -1;
  // Set by Start, reset by Close (under send_mu_, which also serialises
  // writes to its stdin with closing it).
  std::unique_ptr<ChildProcess> child_;
  int wake_fd_ = -1;
  std::thread reader_;
  std::mutex send_mu_;
  mutable std::mutex mu_;
  std::deque<std::string> stderr_tail_;  // Guarded by mu_.
  bool finished_ = false;                // Guarded by mu_.
  bool closed_ = false;                  // Guarded by mu_.
};

}  // namespace agentloop::mcp
