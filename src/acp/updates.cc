#include "acp/updates.h"

#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "agentloop/event_data.h"

#include "base/strings.h"

namespace agentloop::acp {
namespace fs = std::filesystem;
namespace {

// A write's file is read for its diff only up to this size.
constexpr uintmax_t kMaxDiffFileBytes = 1 << 20;
// A tool result's text is sent to the client up to this size.
constexpr size_t kMaxResultChars = 16 * 1024;

std::string StringArg(const Json& input, const char* key) {
  if (!input.is_object()) return "";
  auto it = input.find(key);
  return it != input.end() && it->is_string() ? it->get<std::string>() : std::string();
}

fs::path Resolve(const fs::path& workspace, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) p = workspace / p;
  return p.lexically_normal();
}

// Whether `p` lies in `workspace`, links resolved as far as they exist.
bool InWorkspace(const fs::path& workspace, const fs::path& p) {
  std::error_code ec;
  fs::path root = fs::weakly_canonical(workspace, ec);
  if (ec) return false;
  fs::path full = fs::weakly_canonical(p, ec);
  if (ec) return false;
  auto r = root.begin();
  auto f = full.begin();
  for (; r != root.end(); ++r, ++f) {
    if (f == full.end() || *r != *f) return false;
  }
  return true;
}

// The file as it is now, for a write's diff: nullopt when it does not exist
// (a new file), lies outside the workspace, or is too large or unreadable.
std::optional<std::string> CurrentText(const fs::path& workspace, const fs::path& p) {
  if (!InWorkspace(workspace, p)) return std::nullopt;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > kMaxDiffFileBytes || ec) {
    return std::nullopt;
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string FirstLine(std::string_view s, size_t max_chars) {
  size_t nl = s.find('\n');
  std::string_view line = s.substr(0, nl);
  std::string out(TruncateUtf8(line, max_chars));
  if (out.size() < line.size() || nl != std::string_view::npos) out += "…";
  return out;
}

Json TextContent(std::string_view text) {
  return Json{{"type", "content"},
              {"content", Json{{"type", "text"}, {"text", std::string(text)}}}};
}

Json Chunk(std::string_view kind, std::string_view text) {
  return Json{{"sessionUpdate", std::string(kind)},
              {"content", Json{{"type", "text"}, {"text", std::string(text)}}}};
}

}  // namespace

std::string_view ToolKindFor(std::string_view tool) {
  if (tool == "read" || tool == "ls") return "read";
  if (tool == "write" || tool == "edit") return "edit";
  if (tool == "bash") return "execute";
  if (tool == "grep" || tool == "glob") return "search";
  if (tool == "todo") return "think";
  return "other";
}

ToolPresentation PresentToolCall(std::string_view tool, const Json& input,
                                 const fs::path& workspace) {
  ToolPresentation p;
  p.kind = std::string(ToolKindFor(tool));
  const std::string file = StringArg(input, "file_path");
  const std::string path = StringArg(input, "path");
  auto locate = [&](const std::string& where) {
    if (!where.empty()) p.locations.push_back(Json{{"path", Resolve(workspace, where).string()}});
  };
  if (tool == "read" || tool == "write" || tool == "edit") {
    locate(file);
    const std::string verb = tool == "read" ? "Read " : tool == "write" ? "Write " : "Edit ";
    p.title = verb + (file.empty() ? std::string("a file") : file);
    if (tool != "read" && !file.empty()) {
      const fs::path abs = Resolve(workspace, file);
      Json diff{{"type", "diff"}, {"path", abs.string()}};
      if (tool == "edit") {
        diff["oldText"] = StringArg(input, "old_string");
        diff["newText"] = StringArg(input, "new_string");
      } else {
        std::optional<std::string> now = CurrentText(workspace, abs);
        diff["oldText"] = now ? Json(*now) : Json(nullptr);
        diff["newText"] = StringArg(input, "content");
      }
      p.diff = std::move(diff);
    }
  } else if (tool == "bash") {
    p.title = "Run " + FirstLine(StringArg(input, "command"), 120);
  } else if (tool == "grep" || tool == "glob") {
    locate(path);
    p.title = std::string(tool == "grep" ? "Search for " : "Find ") +
              FirstLine(StringArg(input, "pattern"), 120) + (path.empty() ? "" : " in " + path);
  } else if (tool == "ls") {
    locate(path.empty() ? std::string(".") : path);
    p.title = "List " + (path.empty() ? std::string(".") : path);
  } else if (tool == "todo") {
    p.title = "Update the todo list";
  } else {
    p.title = std::string(tool);
  }
  return p;
}

std::optional<std::string_view> AcpStopReason(const TurnResult& result, bool cancel_requested) {
  if (cancel_requested || result.stop == StopReason::kAborted) return "cancelled";
  switch (result.stop) {
    case StopReason::kCompleted:
      return result.truncated ? "max_tokens" : "end_turn";
    case StopReason::kBudgetExhausted:
      return result.reason.starts_with("token budget") ? "max_tokens" : "max_turn_requests";
    case StopReason::kMaxTurns:
      return "max_turn_requests";
    case StopReason::kRefused:
      return "refusal";
    case StopReason::kToolRefused:
    case StopReason::kDenied:
    case StopReason::kPendingApproval:
    case StopReason::kPendingQuestion:
      return "end_turn";
    case StopReason::kAborted:
      return "cancelled";
    case StopReason::kFailed:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Json> PlanUpdate(const Json& details) {
  if (!details.is_object()) return std::nullopt;
  auto tasks = details.find("tasks");
  if (tasks == details.end() || !tasks->is_array()) return std::nullopt;
  Json entries = Json::array();
  for (const Json& t : *tasks) {
    if (!t.is_object()) continue;
    const std::string status = StringArg(t, "status");
    if (status != "pending" && status != "in_progress" && status != "completed") continue;
    std::string content = StringArg(t, "subject");
    if (status == "in_progress") {
      if (std::string active = StringArg(t, "activeForm"); !active.empty()) content = active;
    }
    entries.push_back(Json{{"content", content}, {"priority", "medium"}, {"status", status}});
  }
  return Json{{"sessionUpdate", "plan"}, {"entries", std::move(entries)}};
}

UpdateMapper::UpdateMapper(fs::path workspace, std::function<void(Json)> emit)
    : workspace_(std::move(workspace)), emit_(std::move(emit)) {}

void UpdateMapper::OnTextDelta(std::string_view text) {
  if (text.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  streamed_text_ = true;
  emit_(Chunk("agent_message_chunk", text));
}

void UpdateMapper::OnThinkingDelta(std::string_view text) {
  if (text.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  streamed_thinking_ = true;
  emit_(Chunk("agent_thought_chunk", text));
}

void UpdateMapper::AnnounceLocked(const std::string& id, const std::string& tool,
                                  const Json& input) {
  if (calls_.count(id) != 0) return;
  ToolPresentation p = PresentToolCall(tool, input, workspace_);
  CallState& st = calls_[id];
  st.tool = tool;
  st.input = input;
  st.diff = p.diff;
  Json update{{"sessionUpdate", "tool_call"},
              {"toolCallId", id},
              {"title", p.title},
              {"kind", p.kind},
              {"status", "pending"},
              {"locations", p.locations},
              {"rawInput", input.is_null() ? Json::object() : input}};
  if (p.diff) update["content"] = Json::array({*p.diff});
  emit_(std::move(update));
}

Json UpdateMapper::PermissionToolCall(const ToolCall& call) {
  std::lock_guard<std::mutex> lock(mu_);
  AnnounceLocked(call.id, call.name, call.input);
  ToolPresentation p = PresentToolCall(call.name, call.input, workspace_);
  Json tc{
      {"toolCallId", call.id},    {"title", p.title},
      {"kind", p.kind},           {"status", "pending"},
      {"locations", p.locations}, {"rawInput", call.input.is_null() ? Json::object() : call.input}};
  if (p.diff) tc["content"] = Json::array({*p.diff});
  return tc;
}

void UpdateMapper::EndLocked(const std::string& id, bool is_error) {
  auto it = calls_.find(id);
  if (it == calls_.end() || it->second.final) return;
  it->second.final = true;
  Json update{{"sessionUpdate", "tool_call_update"},
              {"toolCallId", id},
              {"status", is_error ? "failed" : "completed"}};
  if (!is_error && it->second.diff) update["content"] = Json::array({*it->second.diff});
  emit_(std::move(update));
}

void UpdateMapper::OnMessageLocked(const Message& m, bool replay) {
  if (m.role == Role::kAssistant) {
    for (const ContentBlock& b : m.content) {
      if (b.type == BlockType::kThinking && !b.text.empty() && (replay || !streamed_thinking_)) {
        emit_(Chunk("agent_thought_chunk", b.text));
      } else if (b.type == BlockType::kText && !b.text.empty() && (replay || !streamed_text_)) {
        emit_(Chunk("agent_message_chunk", b.text));
      } else if (b.type == BlockType::kToolUse) {
        AnnounceLocked(b.id, b.name, b.input);
      }
    }
    streamed_text_ = false;
    streamed_thinking_ = false;
    return;
  }
  if (m.role != Role::kUser) return;
  bool results = false;
  for (const ContentBlock& b : m.content) {
    if (b.type != BlockType::kToolResult) continue;
    results = true;
    auto it = calls_.find(b.tool_use_id);
    if (it == calls_.end()) continue;
    CallState& st = it->second;
    Json content = Json::array();
    if (st.diff && !b.is_error) content.push_back(*st.diff);
    if (!b.text.empty()) content.push_back(TextContent(TruncateUtf8(b.text, kMaxResultChars)));
    Json update{{"sessionUpdate", "tool_call_update"},
                {"toolCallId", b.tool_use_id},
                {"content", std::move(content)}};
    if (!st.final) {
      update["status"] = b.is_error ? "failed" : "completed";
      st.final = true;
    }
    emit_(std::move(update));
    if (st.tool == "todo" && !b.is_error && b.meta.is_object()) {
      auto details = b.meta.find("details");
      if (details != b.meta.end()) {
        if (std::optional<Json> plan = PlanUpdate(*details)) emit_(std::move(*plan));
      }
    }
  }
  // The person's own words, shown again only when a stored session is
  // loaded (a live prompt is the client's own).
  if (replay && !results && m.tag.empty()) {
    for (const ContentBlock& b : m.content) {
      if (b.type == BlockType::kText && !b.text.empty()) {
        emit_(Chunk("user_message_chunk", b.text));
      }
    }
  }
}

Status UpdateMapper::OnEvent(const Event& event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto* m = event.As<MessageData>()) {
    OnMessageLocked(m->message, /*replay=*/false);
  } else if (const auto* b = event.As<ToolCallBeginData>()) {
    AnnounceLocked(b->id, b->tool, b->input);
    emit_(Json{
        {"sessionUpdate", "tool_call_update"}, {"toolCallId", b->id}, {"status", "in_progress"}});
  } else if (const auto* e = event.As<ToolCallEndData>()) {
    EndLocked(e->id, e->is_error);
  }
  return Status::Ok();
}

void UpdateMapper::Replay(std::span<const Message> history) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Message& m : history) OnMessageLocked(m, /*replay=*/true);
}

}  // namespace agentloop::acp
