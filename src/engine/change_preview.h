// The change a pending or asked `write` or `edit` call would make, shown to
// a person before the decision, with the session's read rules applied: the
// one computation behind the terminal's approval prompt, `agentloop
// pending`, the chat and the server's `GET /v1/approvals/{id}/diff`.
//
// Thread-safety: as Engine::Evaluate (any thread).
#pragma once

#include <filesystem>
#include <string>

#include "agentloop/engine.h"
#include "agentloop/types.h"

#include "tools/change_preview.h"

namespace agentloop::engine {

// The change the call `tool` with `args` of session `options.session_id`
// would make to the file in `workspace` as it is now
// (tools::PreviewChange). The file's current content is shown only to the
// extent the session may read it: a file its rules keep from the model
// (`deny read(.env)`) is not read, and the preview says so instead.
// Errors: as tools::PreviewChange, and Engine::Evaluate's.
Result<tools::ChangePreview> PreviewCallChange(Engine& engine, const SessionOptions& options,
                                               const std::filesystem::path& workspace,
                                               const std::string& tool, const Json& args,
                                               const tools::ChangePreviewOptions& preview = {});

// PreviewCallChange for a pending item; kInvalidArgument naming the item
// when it is not an approval of a write or edit.
Result<tools::ChangePreview> PreviewPendingChange(Engine& engine, const SessionOptions& options,
                                                  const std::filesystem::path& workspace,
                                                  const PendingItem& item,
                                                  const tools::ChangePreviewOptions& preview = {});

}  // namespace agentloop::engine
