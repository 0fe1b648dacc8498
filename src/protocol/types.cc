#include "agentloop/types.h"

#include <algorithm>

#include "agentloop/events.h"
#include "agentloop/provider.h"

#include "base/ids.h"

namespace agentloop {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
  }
  return "user";
}

std::string_view BlockTypeName(BlockType type) {
  switch (type) {
    case BlockType::kText:
      return "text";
    case BlockType::kThinking:
      return "thinking";
    case BlockType::kRedactedThinking:
      return "redacted_thinking";
    case BlockType::kToolUse:
      return "tool_use";
    case BlockType::kToolResult:
      return "tool_result";
    case BlockType::kImage:
      return "image";
  }
  return "text";
}

ContentBlock ContentBlock::Text(std::string text) {
  ContentBlock b;
  b.type = BlockType::kText;
  b.text = std::move(text);
  return b;
}
ContentBlock ContentBlock::Thinking(std::string text, std::string signature) {
  ContentBlock b;
  b.type = BlockType::kThinking;
  b.text = std::move(text);
  b.signature = std::move(signature);
  return b;
}
ContentBlock ContentBlock::RedactedThinking(std::string data) {
  ContentBlock b;
  b.type = BlockType::kRedactedThinking;
  b.data = std::move(data);
  return b;
}
ContentBlock ContentBlock::ToolUse(std::string id, std::string name, Json input) {
  ContentBlock b;
  b.type = BlockType::kToolUse;
  b.id = std::move(id);
  b.name = std::move(name);
  b.input = std::move(input);
  return b;
}
ContentBlock ContentBlock::ToolResult(std::string tool_use_id, std::string content, bool is_error) {
  ContentBlock b;
  b.type = BlockType::kToolResult;
  b.tool_use_id = std::move(tool_use_id);
  b.text = std::move(content);
  b.is_error = is_error;
  return b;
}

ContentBlock ContentBlock::Image(std::string media_type, std::string base64_data) {
  ContentBlock b;
  b.type = BlockType::kImage;
  b.media_type = std::move(media_type);
  b.data = std::move(base64_data);
  return b;
}

Message Message::User(std::string text) {
  Message m;
  m.role = Role::kUser;
  m.content.push_back(ContentBlock::Text(std::move(text)));
  return m;
}
Message Message::Assistant(std::string text) {
  Message m;
  m.role = Role::kAssistant;
  m.content.push_back(ContentBlock::Text(std::move(text)));
  return m;
}

std::string Message::JoinedText() const {
  std::string out;
  for (const auto& b : content) {
    if (b.type == BlockType::kText) out += b.text;
  }
  return out;
}

bool Message::HasToolUse() const {
  for (const auto& b : content) {
    if (b.type == BlockType::kToolUse) return true;
  }
  return false;
}

Usage& Usage::operator+=(const Usage& o) {
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  cache_read_tokens += o.cache_read_tokens;
  cache_write_tokens += o.cache_write_tokens;
  reasoning_tokens += o.reasoning_tokens;
  return *this;
}

std::string_view CommandKindName(CommandKind kind) {
  switch (kind) {
    case CommandKind::kCode:
      return "code";
    case CommandKind::kExplain:
      return "explain";
    case CommandKind::kFix:
      return "fix";
    case CommandKind::kPlan:
      return "plan";
    case CommandKind::kBuild:
      return "build";
  }
  return "code";
}

std::optional<CommandKind> ParseCommandKind(std::string_view name) {
  for (CommandKind k : {CommandKind::kCode, CommandKind::kExplain, CommandKind::kFix,
                        CommandKind::kPlan, CommandKind::kBuild}) {
    if (CommandKindName(k) == name) return k;
  }
  return std::nullopt;
}

bool IsReadOnly(CommandKind kind) {
  switch (kind) {
    case CommandKind::kPlan:
    case CommandKind::kExplain:
      return true;
    case CommandKind::kCode:
    case CommandKind::kFix:
    case CommandKind::kBuild:
      return false;
  }
  return false;
}

Budget DefaultBudget(CommandKind kind) {
  Budget b;
  switch (kind) {
    case CommandKind::kCode:
      b.max_tool_calls = 20;
      b.max_tokens = 50'000;
      break;
    case CommandKind::kExplain:
      b.max_tool_calls = 5;
      b.max_tokens = 20'000;
      break;
    case CommandKind::kFix:
      b.max_tool_calls = 20;
      b.max_tokens = 50'000;
      break;
    case CommandKind::kPlan:
      b.max_tool_calls = 8;
      b.max_tokens = 30'000;
      break;
    case CommandKind::kBuild:
      b.max_tool_calls = 30;
      b.max_tokens = 80'000;
      break;
  }
  b.max_turns = 25;
  return b;
}

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kCompleted:
      return "completed";
    case StopReason::kBudgetExhausted:
      return "budget_exhausted";
    case StopReason::kMaxTurns:
      return "max_turns";
    case StopReason::kToolRefused:
      return "tool_refused";
    case StopReason::kDenied:
      return "denied";
    case StopReason::kPendingApproval:
      return "pending_approval";
    case StopReason::kPendingQuestion:
      return "pending_question";
    case StopReason::kAborted:
      return "aborted";
    case StopReason::kFailed:
      return "failed";
    case StopReason::kRefused:
      return "refused";
  }
  return "failed";
}

std::optional<StopReason> ParseStopReason(std::string_view name) {
  for (StopReason r : {StopReason::kCompleted, StopReason::kBudgetExhausted, StopReason::kMaxTurns,
                       StopReason::kToolRefused, StopReason::kDenied, StopReason::kPendingApproval,
                       StopReason::kPendingQuestion, StopReason::kAborted, StopReason::kFailed,
                       StopReason::kRefused}) {
    if (StopReasonName(r) == name) return r;
  }
  return std::nullopt;
}

std::string_view PendingKindName(PendingKind kind) {
  switch (kind) {
    case PendingKind::kApproval:
      return "approval";
    case PendingKind::kQuestion:
      return "question";
    case PendingKind::kSubagent:
      return "subagent";
  }
  return "approval";
}

std::string NewPendingId(PendingKind kind) {
  switch (kind) {
    case PendingKind::kApproval:
      return NewId("apr");
    case PendingKind::kQuestion:
      return NewId("q");
    case PendingKind::kSubagent:
      return NewId("sub");
  }
  return NewId("apr");
}

bool IsWholePendingId(std::string_view id) {
  auto hex = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  for (std::string_view prefix : {"apr_", "q_", "sub_"}) {
    if (id.starts_with(prefix)) {
      std::string_view rest = id.substr(prefix.size());
      return rest.size() == 16 && hex(rest);
    }
  }
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (id[i] == '-')) return false;
    if (!dash && !hex(id.substr(i, 1))) return false;
  }
  return true;
}

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kToolUse:
      return "tool_use";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kRefused:
      return "refused";
  }
  return "stop";
}

ToolSpecList::ToolSpecList(std::vector<ToolSpec> specs) {
  if (specs.empty()) return;
  auto data = std::make_shared<ToolSpecListData>();
  data->uid = RandomU64() | 1;
  for (const ToolSpec& t : specs) {
    data->chars +=
        static_cast<int64_t>(t.name.size() + t.description.size() + t.input_schema.dump().size());
  }
  data->specs = std::move(specs);
  data_ = std::move(data);
}

std::span<const ToolSpec> ToolSpecList::view() const {
  if (!data_) return {};
  return data_->specs;
}

std::shared_ptr<const std::vector<ToolSpec>> ToolSpecList::shared() const {
  if (!data_) return nullptr;
  return std::shared_ptr<const std::vector<ToolSpec>>(data_, &data_->specs);
}

ToolSpecList ToolSpecList::Weak::lock() const {
  ToolSpecList out;
  out.data_ = data_.lock();
  return out;
}

}  // namespace agentloop
