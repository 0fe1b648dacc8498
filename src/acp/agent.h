// `agentloop acp`: agentloop as an Agent Client Protocol agent (docs/acp.md).
// The editor runs the process and speaks JSON-RPC 2.0 over its stdio, one
// message per line. Agent handles each line the front end reads:
//   initialize          protocol version 1, loadSession, text prompts; the
//                       client's fs capabilities (ClientFiles)
//   authenticate        nothing to do (the provider's key comes from the
//                       configuration)
//   session/new         opens a new engine session whose workspace is `cwd`
//   session/load        opens a stored session, replays its conversation as
//                       session/update notifications, then answers
//   session/prompt      runs a turn (RunBlocking, as `agentloop chat` does)
//                       on a thread of its own and answers with the stop
//                       reason once it has ended
//   session/cancel      (notification) cancels the session's running turn
// Each turn's events become session/update notifications (updates.h) and
// its asks go to the person through session/request_permission
// (approver.h). Everything written to the output is a protocol message.
//
// Thread-safety: HandleLine is called from one reader thread; turns run on
// their own threads.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>

#include "agentloop/engine.h"

#include "acp/approver.h"
#include "acp/client_files.h"
#include "acp/jsonrpc.h"
#include "acp/updates.h"

namespace agentloop::acp {

struct AgentOptions {
  // The options of a new session in the workspace `cwd` (an absolute
  // directory): the front end's configuration layers for that workspace
  // and its flags. Errors are answered as invalid params.
  std::function<Result<SessionOptions>(const std::filesystem::path& cwd)> new_session;
  // The options to open the stored session `id` with, `cwd` being the
  // workspace the client names.
  std::function<Result<SessionOptions>(const std::string& id, const std::filesystem::path& cwd)>
      load_session;
  std::string version;  // agentInfo.version
};

class Agent {
 public:
  // `write_line` writes one message (a line without its newline) to the
  // client; `log` is for diagnostics (stderr), never the protocol stream.
  Agent(Engine& engine, AgentOptions options, std::function<void(const std::string&)> write_line,
        std::ostream& log);
  ~Agent();

  // One line read from the client.
  void HandleLine(std::string_view line);
  // The client closed its end: running turns are cancelled and joined,
  // sessions closed.
  void Shutdown();

 private:
  struct AcpSession;
  void HandleRequest(const Incoming& m);
  void HandleNotification(const Incoming& m);
  Json Initialize(const Json& params);
  Result<Json> NewSession(const Json& params);
  Result<Json> LoadSession(const Json& params);
  // Starts the turn; its answer is sent when it ends. An error is answered
  // at once.
  Status Prompt(const Json& id, const Json& params);
  void Cancel(const Json& params);
  Result<std::shared_ptr<AcpSession>> Attach(std::unique_ptr<Session> session);
  std::shared_ptr<ClientFiles> ClientFilesFor(SessionOptions& options);
  std::shared_ptr<AcpSession> Find(const std::string& id);

  Engine& engine_;
  const AgentOptions options_;
  Connection conn_;
  std::ostream& log_;
  std::mutex log_mu_;
  // The client offers fs/read_text_file and fs/write_text_file: sessions
  // read and write files through it (ClientFiles). Reader thread only.
  bool client_fs_ = false;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<AcpSession>> sessions_;  // Guarded by mu_.
};

}  // namespace agentloop::acp
