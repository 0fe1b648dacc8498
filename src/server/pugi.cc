#include "server/pugi.h"

namespace agentloop::server {

namespace {

Status Bad(std::string what) { return InvalidArgument(std::move(what)); }

ContentBlock TextBlock(const std::string& text) {
  ContentBlock b;
  b.type = BlockType::kText;
  b.text = text;
  return b;
}

bool StringOf(const Json& j, size_t min, size_t max) {
  return j.is_string() && j.get_ref<const std::string&>().size() >= min &&
         j.get_ref<const std::string&>().size() <= max;
}

// {id, name, arguments: JSON text of an object} -> a tool_use block.
Result<ContentBlock> ToolCallBlock(const Json& c, const std::string& where) {
  if (!c.is_object() || !StringOf(c.value("id", Json()), 1, 256) ||
      !StringOf(c.value("name", Json()), 1, 128) || !c.value("arguments", Json()).is_string()) {
    return Bad(where + " must be {id, name, arguments} with non-empty strings");
  }
  ContentBlock b;
  b.type = BlockType::kToolUse;
  b.id = c["id"].get<std::string>();
  b.name = c["name"].get<std::string>();
  const std::string& args = c["arguments"].get_ref<const std::string&>();
  Json input = Json::parse(args.empty() ? std::string("{}") : args, nullptr, false);
  if (!input.is_object()) return Bad(where + ".arguments must be the JSON text of an object");
  b.input = std::move(input);
  return b;
}

}  // namespace

Result<PugiCall> ParsePugiRequest(const Json& body) {
  static const std::set<std::string> kKnown = {"personaSlug", "messages",  "tools",      "command",
                                               "model",       "maxTokens", "temperature"};
  for (const auto& [k, v] : body.items()) {
    if (!kKnown.count(k)) return Bad("unknown field '" + k + "'");
  }
  PugiCall call;
  if (!StringOf(body.value("personaSlug", Json()), 1, 128)) {
    return Bad("personaSlug must be a string of 1 to 128 characters (the agent's name)");
  }
  call.persona = body["personaSlug"].get<std::string>();
  if (body.contains("command")) {
    std::optional<CommandKind> k = body["command"].is_string()
                                       ? ParseCommandKind(body["command"].get<std::string>())
                                       : std::nullopt;
    if (!k) return Bad("command must be one of code, explain, fix, plan, build");
    call.command = k;
  }
  if (body.contains("model")) {
    if (!StringOf(body["model"], 1, 256))
      return Bad("model must be a string of 1 to 256 characters");
    call.model = body["model"].get<std::string>();
  }
  if (body.contains("maxTokens")) {
    const Json& m = body["maxTokens"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > kPugiMaxTokens) {
      return Bad("maxTokens must be an integer from 1 to 200000");
    }
    call.max_tokens = m.get<int64_t>();
  }
  if (body.contains("temperature")) {
    const Json& t = body["temperature"];
    if (!t.is_number() || t.get<double>() < 0 || t.get<double>() > 2) {
      return Bad("temperature must be a number from 0 to 2");
    }
    call.temperature = t.get<double>();
  }

  const Json& tools = body.value("tools", Json());
  if (!tools.is_array()) return Bad("tools must be an array");
  if (tools.size() > kPugiMaxTools) {
    return Bad("tools has " + std::to_string(tools.size()) + " entries; at most 64 are allowed");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !StringOf(t.value("name", Json()), 1, 128) ||
        !StringOf(t.value("description", Json()), 1, 16384)) {
      return Bad(where + " must be {name, description, parameters} with non-empty strings");
    }
    ToolSpec s;
    s.name = t["name"].get<std::string>();
    s.description = t["description"].get<std::string>();
    if (!names.insert(s.name).second) return Bad(where + " repeats the tool '" + s.name + "'");
    const Json& p = t.value("parameters", Json());
    if (!p.is_null() && !p.is_object())
      return Bad(where + ".parameters must be a JSON Schema object");
    s.input_schema = p.is_object() ? p : Json{{"type", "object"}};
    call.tools.push_back(std::move(s));
  }

  const Json& messages = body.value("messages", Json());
  if (!messages.is_array() || messages.empty()) return Bad("messages must be a non-empty array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.value("content", Json()).is_string()) {
      return Bad(where + " must be an object with a string content");
    }
    const std::string role = m.value("role", "");
    const std::string& text = m["content"].get_ref<const std::string&>();
    if (role == "system") {
      if (!call.system.empty()) call.system += "\n\n";
      call.system += text;
      continue;
    }
    Message msg;
    if (role == "user") {
      msg.role = Role::kUser;
      msg.content.push_back(TextBlock(text));
    } else if (role == "assistant") {
      msg.role = Role::kAssistant;
      if (!text.empty()) msg.content.push_back(TextBlock(text));
      const Json& calls = m.value("toolCalls", Json());
      if (!calls.is_null() && !calls.is_array()) return Bad(where + ".toolCalls must be an array");
      for (size_t k = 0; calls.is_array() && k < calls.size(); ++k) {
        AL_ASSIGN_OR_RETURN(ContentBlock b, ToolCallBlock(calls[k], where + ".toolCalls[" +
                                                                        std::to_string(k) + "]"));
        msg.content.push_back(std::move(b));
      }
      if (msg.content.empty()) return Bad(where + " is an assistant message with nothing in it");
    } else if (role == "tool") {
      if (!StringOf(m.value("toolCallId", Json()), 1, 256)) {
        return Bad(where + " is a tool message without its toolCallId");
      }
      ContentBlock r;
      r.type = BlockType::kToolResult;
      r.tool_use_id = m["toolCallId"].get<std::string>();
      r.text = text;
      r.is_error = text.rfind("error:", 0) == 0;
      // Results of one batch share one user message, as the engine stores them.
      if (!call.messages.empty() && call.messages.back().role == Role::kUser &&
          !call.messages.back().content.empty() &&
          call.messages.back().content.back().type == BlockType::kToolResult) {
        call.messages.back().content.push_back(std::move(r));
        continue;
      }
      msg.role = Role::kUser;
      msg.content.push_back(std::move(r));
    } else {
      return Bad(where + ".role must be system, user, assistant or tool");
    }
    call.messages.push_back(std::move(msg));
  }
  if (call.messages.empty()) return Bad("messages holds only system messages");
  return call;
}

Status CheckPugiPlanTools(const PugiCall& call, const std::set<std::string>& read_only) {
  for (const ToolSpec& t : call.tools) {
    if (!read_only.count(t.name)) {
      std::string allowed;
      for (const auto& n : read_only) allowed += (allowed.empty() ? "" : ", ") + n;
      return PermissionDenied("PLAN_MODE_REFUSED: plan mode offers only read-only tools (" +
                              allowed + "); the request offers '" + t.name + "'");
    }
  }
  return Status::Ok();
}

Json PugiResponse(const ModelResponse& response, const std::string& model) {
  std::string text;
  Json calls = Json::array();
  for (const ContentBlock& b : response.content) {
    if (b.type == BlockType::kText) {
      text += b.text;
    } else if (b.type == BlockType::kToolUse) {
      calls.push_back({{"id", b.id},
                       {"name", b.name},
                       {"arguments", b.input.is_null() ? b.raw_input : b.input.dump()}});
    }
  }
  Json out = {{"stop", response.finish == FinishReason::kLength ? "length"
                       : calls.empty()                          ? "text"
                                                                : "tool_use"},
              {"content", text},
              {"tokensUsed", response.has_usage ? response.usage.Total() : 0},
              {"model", response.model.empty() ? model : response.model}};
  if (!calls.empty()) out["toolCalls"] = std::move(calls);
  return out;
}

}  // namespace agentloop::server
