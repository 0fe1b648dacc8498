#include "engine/change_preview.h"

namespace agentloop::engine {

Result<tools::ChangePreview> PreviewCallChange(Engine& engine, const SessionOptions& options,
                                               const std::filesystem::path& workspace,
                                               const std::string& tool, const Json& args,
                                               const tools::ChangePreviewOptions& preview) {
  tools::ChangePreviewOptions o = preview;
  if (tools::HasChangePreview(tool) && args.is_object() && args.contains("file_path") &&
      args["file_path"].is_string()) {
    ToolCall read{"diff", "read", Json{{"file_path", args["file_path"]}}};
    AL_ASSIGN_OR_RETURN(PolicyVerdict v, engine.Evaluate(options, read));
    if (v.decision == Decision::kDeny)
      o.withheld = "the session may not read it (" + v.reason + ")";
  }
  return tools::PreviewChange(tool, args, workspace, o);
}

Result<tools::ChangePreview> PreviewPendingChange(Engine& engine, const SessionOptions& options,
                                                  const std::filesystem::path& workspace,
                                                  const PendingItem& item,
                                                  const tools::ChangePreviewOptions& preview) {
  if (item.kind != PendingKind::kApproval || !tools::HasChangePreview(item.tool)) {
    return InvalidArgument(
        "a diff is shown for a pending write or edit; " + item.id + " is " +
        (item.kind == PendingKind::kQuestion ? "a question" : "a call of '" + item.tool + "'"));
  }
  return PreviewCallChange(engine, options, workspace, item.tool, item.arguments, preview);
}

}  // namespace agentloop::engine
