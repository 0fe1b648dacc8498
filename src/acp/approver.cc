#include "acp/approver.h"

#include <utility>
#include <vector>

#include "permissions/approvers.h"

namespace agentloop::acp {
namespace {

constexpr std::string_view kBy = "acp";

Json Option(std::string_view id, std::string_view name, std::string_view kind) {
  return Json{
      {"optionId", std::string(id)}, {"name", std::string(name)}, {"kind", std::string(kind)}};
}

// The option the client picked: its id, or nullopt for a cancelled request
// (or an answer that is neither).
std::optional<std::string> Picked(const Json& answer) {
  if (!answer.is_object()) return std::nullopt;
  auto outcome = answer.find("outcome");
  if (outcome == answer.end() || !outcome->is_object()) return std::nullopt;
  auto kind = outcome->find("outcome");
  auto id = outcome->find("optionId");
  if (kind == outcome->end() || *kind != "selected" || id == outcome->end() || !id->is_string()) {
    return std::nullopt;
  }
  return id->get<std::string>();
}

}  // namespace

AcpApprover::AcpApprover(std::string session_id, std::filesystem::path workspace,
                         UpdateMapper& mapper, CallFn call)
    : session_id_(std::move(session_id)),
      mapper_(mapper),
      call_(std::move(call)),
      rejected_(std::move(workspace)) {}

ApprovalDecision AcpApprover::Decide(const ApprovalRequest& request, std::stop_token stop) {
  if (stop.stop_requested()) return ApprovalDecision::Deny("cancelled", std::string(kBy));
  if (request.kind == PendingKind::kQuestion) return DecideQuestion(request, stop);
  if (rejected_.Contains(request.spec, request.call.input)) {
    return ApprovalDecision::Deny("the person rejected this call for the session",
                                  std::string(kBy));
  }
  Json params{{"sessionId", session_id_},
              {"toolCall", mapper_.PermissionToolCall(request.call)},
              {"options",
               Json::array({Option("allow_once", "Allow once", "allow_once"),
                            Option("allow_always", "Allow for this session", "allow_always"),
                            Option("reject_once", "Reject", "reject_once"),
                            Option("reject_always", "Reject for this session", "reject_always")})}};
  Result<Json> answer = call_("session/request_permission", std::move(params), stop);
  if (!answer.ok()) {
    return ApprovalDecision::Deny(
        "no answer to the permission request: " + answer.error().message(), std::string(kBy));
  }
  std::optional<std::string> picked = Picked(*answer);
  if (!picked) {
    return ApprovalDecision::Deny("the permission request was cancelled", std::string(kBy));
  }
  if (*picked == "allow_once" || *picked == "allow_always") {
    ApprovalDecision d = ApprovalDecision::Allow(std::string(kBy));
    d.remember_for_session = *picked == "allow_always";
    return d;
  }
  if (*picked == "reject_always") rejected_.Remember(request.spec, request.call.input);
  if (*picked == "reject_once" || *picked == "reject_always") {
    return ApprovalDecision::Deny("the person rejected this call", std::string(kBy));
  }
  return ApprovalDecision::Deny("the client picked an unknown option '" + *picked + "'",
                                std::string(kBy));
}

ApprovalDecision AcpApprover::DecideQuestion(const ApprovalRequest& request,
                                             const std::stop_token& stop) {
  const std::vector<std::string> options = permissions::QuestionOptions(request.call.input);
  if (options.empty()) {
    return ApprovalDecision::Deny(
        "the editor can only answer questions that offer options; decide yourself and say what "
        "you assumed",
        std::string(kBy));
  }
  Json offered = Json::array();
  for (size_t i = 0; i < options.size(); ++i) {
    offered.push_back(Option("answer_" + std::to_string(i), options[i], "allow_once"));
  }
  offered.push_back(Option("skip", "Do not answer", "reject_once"));
  Json tool_call = mapper_.PermissionToolCall(request.call);
  tool_call["title"] = request.reason.empty() ? std::string("A question") : request.reason;
  Json params{{"sessionId", session_id_}, {"toolCall", std::move(tool_call)}, {"options", offered}};
  Result<Json> answer = call_("session/request_permission", std::move(params), stop);
  if (!answer.ok()) {
    return ApprovalDecision::Deny("no answer to the question: " + answer.error().message(),
                                  std::string(kBy));
  }
  std::optional<std::string> picked = Picked(*answer);
  for (size_t i = 0; picked && i < options.size(); ++i) {
    if (*picked == "answer_" + std::to_string(i)) {
      ApprovalDecision d = ApprovalDecision::Allow(std::string(kBy));
      d.answer = options[i];
      return d;
    }
  }
  return ApprovalDecision::Deny("the person did not answer the question", std::string(kBy));
}

}  // namespace agentloop::acp
