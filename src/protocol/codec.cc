#include "protocol/codec.h"

#include "protocol/image.h"

namespace agentloop {
namespace {

std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}
int64_t Int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

}  // namespace

Json ToJson(const ContentBlock& b) {
  Json j = Json::object();
  j["type"] = BlockTypeName(b.type);
  switch (b.type) {
    case BlockType::kText:
      j["text"] = b.text;
      break;
    case BlockType::kThinking:
      j["thinking"] = b.text;
      if (!b.signature.empty()) j["signature"] = b.signature;
      break;
    case BlockType::kRedactedThinking:
      j["data"] = b.data;
      break;
    case BlockType::kToolUse:
      j["id"] = b.id;
      j["name"] = b.name;
      j["input"] = b.input;
      if (!b.raw_input.empty()) j["raw_input"] = b.raw_input;
      break;
    case BlockType::kToolResult:
      j["tool_use_id"] = b.tool_use_id;
      j["content"] = b.text;
      if (b.is_error) j["is_error"] = true;
      if (!b.images.empty()) {
        Json images = Json::array();
        for (const auto& image : b.images) images.push_back(ToJson(image));
        j["images"] = std::move(images);
      }
      break;
    case BlockType::kImage:
      j["media_type"] = b.media_type;
      j["data"] = b.data;
      break;
  }
  if (!b.meta.is_null()) j["meta"] = b.meta;
  return j;
}

Result<ContentBlock> ContentBlockFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("content block: expected an object");
  std::string type = Str(j, "type");
  ContentBlock b;
  if (type == "text") {
    b.type = BlockType::kText;
    b.text = Str(j, "text");
  } else if (type == "thinking") {
    b.type = BlockType::kThinking;
    b.text = Str(j, "thinking");
    b.signature = Str(j, "signature");
  } else if (type == "redacted_thinking") {
    b.type = BlockType::kRedactedThinking;
    b.data = Str(j, "data");
  } else if (type == "tool_use") {
    b.type = BlockType::kToolUse;
    b.id = Str(j, "id");
    b.name = Str(j, "name");
    if (b.id.empty() || b.name.empty())
      return InvalidArgument("tool_use block: missing id or name");
    if (j.contains("input")) b.input = j["input"];
    b.raw_input = Str(j, "raw_input");
  } else if (type == "tool_result") {
    b.type = BlockType::kToolResult;
    b.tool_use_id = Str(j, "tool_use_id");
    if (b.tool_use_id.empty()) return InvalidArgument("tool_result block: missing tool_use_id");
    b.text = Str(j, "content");
    b.is_error = j.value("is_error", false);
    if (auto it = j.find("images"); it != j.end()) {
      if (!it->is_array()) return InvalidArgument("tool_result block: images must be an array");
      for (const auto& ij : *it) {
        AL_ASSIGN_OR_RETURN(ContentBlock image, ContentBlockFromJson(ij));
        if (image.type != BlockType::kImage) {
          return InvalidArgument("tool_result block: images holds a block of type '" +
                                 std::string(BlockTypeName(image.type)) + "'");
        }
        b.images.push_back(std::move(image));
      }
    }
  } else if (type == "image") {
    b.type = BlockType::kImage;
    b.media_type = Str(j, "media_type");
    b.data = Str(j, "data");
    Status valid = ValidateImage(b.media_type, b.data);
    if (!valid.ok()) return InvalidArgument("image block: " + valid.message());
  } else {
    return InvalidArgument("content block: unknown type '" + type + "'");
  }
  if (j.contains("meta")) b.meta = j["meta"];
  return b;
}

Json ToJson(const Message& m) {
  Json j = Json::object();
  j["role"] = RoleName(m.role);
  Json content = Json::array();
  for (const auto& b : m.content) content.push_back(ToJson(b));
  j["content"] = std::move(content);
  if (!m.tag.empty()) j["tag"] = m.tag;
  return j;
}

Result<Message> MessageFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("message: expected an object");
  Message m;
  std::string role = Str(j, "role");
  if (role == "user") {
    m.role = Role::kUser;
  } else if (role == "assistant") {
    m.role = Role::kAssistant;
  } else if (role == "system") {
    m.role = Role::kSystem;
  } else {
    return InvalidArgument("message: unknown role '" + role + "'");
  }
  auto it = j.find("content");
  if (it == j.end() || !it->is_array()) return InvalidArgument("message: content must be an array");
  for (const auto& bj : *it) {
    AL_ASSIGN_OR_RETURN(ContentBlock b, ContentBlockFromJson(bj));
    m.content.push_back(std::move(b));
  }
  m.tag = Str(j, "tag");
  return m;
}

Json ToJson(const Usage& u) {
  return Json{{"input_tokens", u.input_tokens},
              {"output_tokens", u.output_tokens},
              {"cache_read_tokens", u.cache_read_tokens},
              {"cache_write_tokens", u.cache_write_tokens},
              {"reasoning_tokens", u.reasoning_tokens}};
}

Usage UsageFromJson(const Json& j) {
  Usage u;
  if (!j.is_object()) return u;
  u.input_tokens = Int(j, "input_tokens");
  u.output_tokens = Int(j, "output_tokens");
  u.cache_read_tokens = Int(j, "cache_read_tokens");
  u.cache_write_tokens = Int(j, "cache_write_tokens");
  u.reasoning_tokens = Int(j, "reasoning_tokens");
  return u;
}

Json ToJson(const TurnCounters& c) {
  return Json{{"tool_calls", c.tool_calls},
              {"tokens", c.tokens},
              {"model_calls", c.model_calls},
              {"usage", ToJson(c.usage)}};
}

TurnCounters TurnCountersFromJson(const Json& j) {
  TurnCounters c;
  if (!j.is_object()) return c;
  c.tool_calls = static_cast<int>(Int(j, "tool_calls"));
  c.tokens = Int(j, "tokens");
  c.model_calls = static_cast<int>(Int(j, "model_calls"));
  if (j.contains("usage")) c.usage = UsageFromJson(j["usage"]);
  return c;
}

Json ToJson(const PendingItem& p) {
  Json j{{"id", p.id},     {"kind", PendingKindName(p.kind)}, {"tool_use_id", p.tool_use_id},
         {"tool", p.tool}, {"arguments", p.arguments},        {"reason", p.reason}};
  if (!p.child_session_id.empty()) j["child_session_id"] = p.child_session_id;
  if (!p.path.empty()) j["path"] = p.path;
  return j;
}

Result<PendingItem> PendingItemFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("pending item: expected an object");
  PendingItem p;
  p.id = Str(j, "id");
  std::string kind = Str(j, "kind");
  if (kind == "approval") {
    p.kind = PendingKind::kApproval;
  } else if (kind == "question") {
    p.kind = PendingKind::kQuestion;
  } else if (kind == "subagent") {
    p.kind = PendingKind::kSubagent;
  } else {
    return InvalidArgument("pending item: unknown kind '" + kind + "'");
  }
  p.tool_use_id = Str(j, "tool_use_id");
  p.tool = Str(j, "tool");
  if (j.contains("arguments")) p.arguments = j["arguments"];
  p.reason = Str(j, "reason");
  p.child_session_id = Str(j, "child_session_id");
  p.path = Str(j, "path");
  if (p.id.empty() || p.tool_use_id.empty()) return InvalidArgument("pending item: missing id");
  if (p.kind == PendingKind::kSubagent && p.child_session_id.empty()) {
    return InvalidArgument("pending item " + p.id + ": a subagent item names no child session");
  }
  return p;
}

Json ToJson(const BatchDecision& d) {
  Json j{{"item", ToJson(d.item)},
         {"decision", d.decision.kind == ApprovalDecision::Kind::kAllow ? "allow" : "deny"},
         {"reason", d.decision.reason},
         {"by", d.decision.by}};
  if (!d.decision.answer.empty()) j["answer"] = d.decision.answer;
  if (d.decision.edited_input) j["edited_input"] = *d.decision.edited_input;
  if (d.decision.remember_for_session) j["remember"] = true;
  return j;
}

Result<BatchDecision> BatchDecisionFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("decision: expected an object");
  BatchDecision d;
  if (!j.contains("item")) return InvalidArgument("decision: missing item");
  AL_ASSIGN_OR_RETURN(d.item, PendingItemFromJson(j["item"]));
  const std::string kind = Str(j, "decision");
  if (kind == "allow") {
    d.decision.kind = ApprovalDecision::Kind::kAllow;
  } else if (kind == "deny") {
    d.decision.kind = ApprovalDecision::Kind::kDeny;
  } else {
    return InvalidArgument("decision: 'decision' must be \"allow\" or \"deny\", not \"" + kind +
                           "\"");
  }
  d.decision.reason = Str(j, "reason");
  d.decision.by = Str(j, "by");
  d.decision.answer = Str(j, "answer");
  if (j.contains("edited_input")) {
    if (!j["edited_input"].is_object()) {
      return InvalidArgument("decision: 'edited_input' must be an object");
    }
    d.decision.edited_input = j["edited_input"];
  }
  d.decision.remember_for_session = j.value("remember", false);
  return d;
}

Json ToJson(const Checkpoint& c) {
  Json results = Json::array();
  for (const auto& b : c.results_so_far) results.push_back(ToJson(b));
  Json outstanding = Json::array();
  for (const auto& p : c.outstanding) outstanding.push_back(ToJson(p));
  Json j{{"session_id", c.session_id},
         {"turn_id", c.turn_id},
         {"tool_use_ids", c.tool_use_ids},
         {"results_so_far", std::move(results)},
         {"outstanding", std::move(outstanding)},
         {"counters", ToJson(c.counters)},
         {"command", CommandKindName(c.command)}};
  if (!c.decisions.empty()) {
    Json decisions = Json::array();
    for (const auto& d : c.decisions) decisions.push_back(ToJson(d));
    j["decisions"] = std::move(decisions);
  }
  if (!c.recent_calls.empty()) j["recent_calls"] = c.recent_calls;
  return j;
}

Result<Checkpoint> CheckpointFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("checkpoint: expected an object");
  Checkpoint c;
  c.session_id = Str(j, "session_id");
  c.turn_id = Str(j, "turn_id");
  if (j.contains("tool_use_ids") && j["tool_use_ids"].is_array()) {
    for (const auto& id : j["tool_use_ids"]) {
      if (id.is_string()) c.tool_use_ids.push_back(id.get<std::string>());
    }
  }
  if (j.contains("results_so_far") && j["results_so_far"].is_array()) {
    for (const auto& bj : j["results_so_far"]) {
      AL_ASSIGN_OR_RETURN(ContentBlock b, ContentBlockFromJson(bj));
      c.results_so_far.push_back(std::move(b));
    }
  }
  if (j.contains("outstanding") && j["outstanding"].is_array()) {
    for (const auto& pj : j["outstanding"]) {
      AL_ASSIGN_OR_RETURN(PendingItem p, PendingItemFromJson(pj));
      c.outstanding.push_back(std::move(p));
    }
  }
  if (j.contains("decisions") && j["decisions"].is_array()) {
    for (const auto& dj : j["decisions"]) {
      AL_ASSIGN_OR_RETURN(BatchDecision d, BatchDecisionFromJson(dj));
      c.decisions.push_back(std::move(d));
    }
  }
  if (j.contains("recent_calls") && j["recent_calls"].is_array()) {
    for (const auto& k : j["recent_calls"]) {
      if (k.is_string()) c.recent_calls.push_back(k.get<std::string>());
    }
  }
  if (j.contains("counters")) c.counters = TurnCountersFromJson(j["counters"]);
  c.command = ParseCommandKind(Str(j, "command")).value_or(CommandKind::kCode);
  return c;
}

Json ToJson(const Budget& b) {
  Json j{{"max_tool_calls", b.max_tool_calls},
         {"max_tokens", b.max_tokens},
         {"max_turns", b.max_turns}};
  if (b.max_wall_time) j["max_wall_time_ms"] = b.max_wall_time->count();
  return j;
}

}  // namespace agentloop
