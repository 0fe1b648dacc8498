// The live approver of an ACP session: the engine's one decision point
// (src/core/turn.cc) asks it about every call its rules leave at `ask`, and
// it asks the person in the editor with `session/request_permission`
// (docs/acp.md, "Approvals").
//
// Options: allow_once; allow_always (this exact access for the rest of the
// session: the engine remembers it, as the console's `a`); reject_once;
// reject_always (this exact access is denied without asking again while the
// agent process runs). A `cancelled` outcome, an error answer, a closed
// connection or a cancelled turn deny the call. An ask_user question with
// options is asked the same way, one option each; a question without
// options is denied with a reason the model can act on.
//
// Thread-safety: Decide may be called from several threads.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "agentloop/permission.h"

#include "acp/jsonrpc.h"
#include "acp/updates.h"
#include "permissions/policy.h"

namespace agentloop::acp {

class AcpApprover final : public Approver {
 public:
  // `call` sends a request to the client and waits for its answer
  // (Connection::Call); `mapper` announces the call before it is asked
  // about. Both must outlive the approver.
  using CallFn =
      std::function<Result<Json>(std::string_view method, Json params, std::stop_token stop)>;
  AcpApprover(std::string session_id, std::filesystem::path workspace, UpdateMapper& mapper,
              CallFn call);

  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token stop) override;

 private:
  ApprovalDecision DecideQuestion(const ApprovalRequest& request, const std::stop_token& stop);

  const std::string session_id_;
  UpdateMapper& mapper_;
  const CallFn call_;
  // Accesses answered reject_always.
  permissions::SessionApprovals rejected_;
};

}  // namespace agentloop::acp
