#include "acp/client_files.h"

#include <utility>

namespace agentloop::acp {

ClientFiles::ClientFiles(CallFn call) : call_(std::move(call)) {}

void ClientFiles::set_session(std::string session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  session_id_ = std::move(session_id);
}

std::string ClientFiles::session() const {
  std::lock_guard<std::mutex> lock(mu_);
  return session_id_;
}

Result<std::string> ClientFiles::ReadText(const std::string& abs, std::stop_token stop) {
  Result<Json> answer =
      call_("fs/read_text_file", Json{{"sessionId", session()}, {"path", abs}}, std::move(stop));
  if (!answer.ok()) return answer.error().WithContext("the editor's fs/read_text_file");
  auto content = answer->is_object() ? answer->find("content") : answer->end();
  if (!answer->is_object() || content == answer->end() || !content->is_string()) {
    return Unavailable("the editor's fs/read_text_file answered without a string \"content\"");
  }
  return content->get<std::string>();
}

Status ClientFiles::WriteText(const std::string& abs, const std::string& text,
                              std::stop_token stop) {
  Result<Json> answer =
      call_("fs/write_text_file", Json{{"sessionId", session()}, {"path", abs}, {"content", text}},
            std::move(stop));
  if (!answer.ok()) return answer.error().WithContext("the editor's fs/write_text_file");
  return Status::Ok();
}

}  // namespace agentloop::acp
