// From the engine's events to the Agent Client Protocol's `session/update`
// notifications (docs/acp.md): streamed text and thinking as
// agent_message_chunk / agent_thought_chunk, each tool call as `tool_call`
// (pending, when the model asks for it) and `tool_call_update`
// (in_progress when it starts, completed or failed with its result, the
// diff of an edit or write as the protocol's diff content), the todo list
// as `plan`; and a turn's stop as the protocol's stop reason.
//
// Thread-safety: UpdateMapper takes a lock per call: events arrive on the
// thread that steps the turn, deltas on the thread the model streams on.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agentloop/events.h"
#include "agentloop/json.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"
#include "agentloop/turn.h"
#include "agentloop/types.h"

namespace agentloop::acp {

// The protocol's ToolKind of a tool: read, edit, execute, search, think or
// other.
std::string_view ToolKindFor(std::string_view tool);

// How a call is shown: its title, kind, the files it touches (absolute
// paths, relative ones resolved against `workspace`) and, for edit and
// write, the change as diff content ({type: "diff", path, oldText,
// newText}; a write's oldText is the file as it is now when it lies in the
// workspace, null for a new file).
struct ToolPresentation {
  std::string title;
  std::string kind;
  Json locations = Json::array();
  std::optional<Json> diff;
};
ToolPresentation PresentToolCall(std::string_view tool, const Json& input,
                                 const std::filesystem::path& workspace);

// The protocol's stop reason of a turn: end_turn, max_tokens (the answer was
// cut by the output limit, or the token budget ran out), max_turn_requests
// (the model-call, tool-call or wall-time budget, the stuck-loop guard),
// refusal, cancelled (the turn was aborted, or `cancel_requested` and it
// ended otherwise). nullopt for a failed turn: the prompt is answered with
// an error.
std::optional<std::string_view> AcpStopReason(const TurnResult& result, bool cancel_requested);

// A `plan` update from the details a `todo` result carries ({tasks, ...}):
// every task but the deleted ones, in list order. nullopt when `details`
// holds no task list.
std::optional<Json> PlanUpdate(const Json& details);

class UpdateMapper final : public EventSink, public StreamSink {
 public:
  // `emit` gets the `update` object of each session/update notification.
  UpdateMapper(std::filesystem::path workspace, std::function<void(Json)> emit);

  Status OnEvent(const Event& event) override;
  void OnTextDelta(std::string_view text) override;
  void OnThinkingDelta(std::string_view text) override;

  // The `toolCall` of a permission request about `call`, announcing the
  // call first (a `tool_call`, pending) when no event has.
  Json PermissionToolCall(const ToolCall& call);

  // session/load: the stored conversation as the updates a client would
  // have seen (the person's messages as user_message_chunk).
  void Replay(std::span<const Message> history);

 private:
  struct CallState {
    std::string tool;
    Json input;
    std::optional<Json> diff;
    bool final = false;
  };
  void OnMessageLocked(const Message& message, bool replay);
  void AnnounceLocked(const std::string& id, const std::string& tool, const Json& input);
  void EndLocked(const std::string& id, bool is_error);

  const std::filesystem::path workspace_;
  const std::function<void(Json)> emit_;
  std::mutex mu_;
  std::map<std::string, CallState> calls_;  // Guarded by mu_.
  // Text (thinking) of the current model answer already streamed as
  // deltas: its message does not repeat it. Guarded by mu_.
  bool streamed_text_ = false;
  bool streamed_thinking_ = false;
};

}  // namespace agentloop::acp
