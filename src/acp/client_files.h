// The files of an ACP session as the editor holds them: read, write and
// edit take and put a file's text through the client's fs/read_text_file
// and fs/write_text_file (so the model sees unsaved buffers and the editor
// sees its changes), when the client offers both (docs/acp.md, "Files").
// The tools call it only after their usual checks of the path
// (FileTextAccess), so confinement, rules and plan mode stay where they are.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>

#include "agentloop/json.h"
#include "agentloop/tool.h"

namespace agentloop::acp {

class ClientFiles final : public FileTextAccess {
 public:
  // `call` sends a request to the client and waits for its answer
  // (Connection::Call).
  using CallFn =
      std::function<Result<Json>(std::string_view method, Json params, std::stop_token stop)>;
  explicit ClientFiles(CallFn call);

  // The session the requests name; set once the session is open, before
  // any of its turns runs.
  void set_session(std::string session_id);

  Result<std::string> ReadText(const std::string& abs, std::stop_token stop) override;
  Status WriteText(const std::string& abs, const std::string& text, std::stop_token stop) override;

 private:
  std::string session() const;

  const CallFn call_;
  mutable std::mutex mu_;
  std::string session_id_;  // Guarded by mu_.
};

}  // namespace agentloop::acp
