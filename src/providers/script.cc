#include "providers/script.h"

#include <fstream>
#include <sstream>

namespace agentloop {
namespace {

Result<int64_t> OptInt(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return int64_t{0};
  if (!it->is_number_integer()) {
    return InvalidArgument(where + ": \"" + key + "\" must be an integer");
  }
  return it->get<int64_t>();
}

Result<std::string> OptStr(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return InvalidArgument(where + ": \"" + key + "\" must be a string");
  return it->get<std::string>();
}

}  // namespace

std::optional<Code> ParseCodeName(std::string_view name) {
  static constexpr Code kAll[] = {Code::kOk,
                                  Code::kInvalidArgument,
                                  Code::kNotFound,
                                  Code::kAlreadyExists,
                                  Code::kPermissionDenied,
                                  Code::kFailedPrecondition,
                                  Code::kResourceExhausted,
                                  Code::kDeadlineExceeded,
                                  Code::kCancelled,
                                  Code::kUnavailable,
                                  Code::kDataLoss,
                                  Code::kInternal,
                                  Code::kPromptTooLong,
                                  Code::kBusy,
                                  Code::kLeaseLost};
  for (Code c : kAll) {
    if (CodeName(c) == name) return c;
  }
  return std::nullopt;
}

Result<ScriptItem> ParseScriptItem(const Json& item, size_t index) {
  const std::string where = "script item " + std::to_string(index);
  if (!item.is_object()) return InvalidArgument(where + ": expected an object");
  ScriptItem out;
  out.raw = item;
  AL_ASSIGN_OR_RETURN(int64_t delay, OptInt(item, "delay_ms", where));
  if (delay < 0) return InvalidArgument(where + ": \"delay_ms\" must be >= 0");
  out.delay_ms = static_cast<int>(delay);
  AL_ASSIGN_OR_RETURN(out.match, OptStr(item, "match", where));

  if (auto it = item.find("error"); it != item.end()) {
    if (!it->is_object()) return InvalidArgument(where + ": \"error\" must be an object");
    AL_ASSIGN_OR_RETURN(std::string code_name, OptStr(*it, "code", where + ".error"));
    AL_ASSIGN_OR_RETURN(std::string message, OptStr(*it, "message", where + ".error"));
    if (code_name.empty()) code_name = "unavailable";
    std::optional<Code> code = ParseCodeName(code_name);
    if (!code || *code == Code::kOk) {
      return InvalidArgument(where + ".error: unknown code \"" + code_name + "\"");
    }
    if (message.empty()) message = "scripted " + code_name + " error";
    out.error = Status(*code, message);
    return out;
  }

  ModelResponse& r = out.response;
  AL_ASSIGN_OR_RETURN(std::string thinking, OptStr(item, "thinking", where));
  AL_ASSIGN_OR_RETURN(std::string signature, OptStr(item, "thinking_signature", where));
  AL_ASSIGN_OR_RETURN(std::string text, OptStr(item, "text", where));
  if (!thinking.empty() || !signature.empty()) {
    r.content.push_back(ContentBlock::Thinking(std::move(thinking), std::move(signature)));
  }
  if (!text.empty()) r.content.push_back(ContentBlock::Text(std::move(text)));

  bool has_tools = false;
  if (auto it = item.find("tool_calls"); it != item.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument(where + ": \"tool_calls\" must be an array");
    size_t n = 0;
    for (const Json& call : *it) {
      ++n;
      const std::string cw = where + ".tool_calls[" + std::to_string(n - 1) + "]";
      if (!call.is_object()) return InvalidArgument(cw + ": expected an object");
      AL_ASSIGN_OR_RETURN(std::string id, OptStr(call, "id", cw));
      AL_ASSIGN_OR_RETURN(std::string name, OptStr(call, "name", cw));
      if (name.empty()) return InvalidArgument(cw + ": \"name\" is required");
      if (id.empty()) id = "call_" + std::to_string(n);
      ContentBlock b = ContentBlock::ToolUse(std::move(id), std::move(name), Json::object());
      if (auto a = call.find("arguments"); a != call.end()) {
        if (!a->is_string()) return InvalidArgument(cw + ": \"arguments\" must be a string");
        std::string raw = a->get<std::string>();
        Result<Json> parsed = ParseJson(raw);
        if (parsed.ok() && parsed->is_object()) {
          b.input = std::move(*parsed);
        } else {
          b.input = nullptr;
          b.raw_input = std::move(raw);
        }
      } else if (auto in = call.find("input"); in != call.end()) {
        b.input = *in;
      }
      r.content.push_back(std::move(b));
      has_tools = true;
    }
  }

  AL_ASSIGN_OR_RETURN(std::string finish, OptStr(item, "finish", where));
  if (finish.empty()) {
    r.finish = has_tools ? FinishReason::kToolUse : FinishReason::kStop;
  } else if (finish == "stop") {
    r.finish = FinishReason::kStop;
  } else if (finish == "tool_use") {
    r.finish = FinishReason::kToolUse;
  } else if (finish == "length") {
    r.finish = FinishReason::kLength;
  } else if (finish == "refused") {
    r.finish = FinishReason::kRefused;
  } else {
    return InvalidArgument(where + ": unknown finish \"" + finish + "\"");
  }

  if (auto it = item.find("usage"); it != item.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument(where + ": \"usage\" must be an object");
    const std::string uw = where + ".usage";
    AL_ASSIGN_OR_RETURN(r.usage.input_tokens, OptInt(*it, "input_tokens", uw));
    AL_ASSIGN_OR_RETURN(r.usage.output_tokens, OptInt(*it, "output_tokens", uw));
    AL_ASSIGN_OR_RETURN(r.usage.cache_read_tokens, OptInt(*it, "cache_read_tokens", uw));
    AL_ASSIGN_OR_RETURN(r.usage.cache_write_tokens, OptInt(*it, "cache_write_tokens", uw));
    AL_ASSIGN_OR_RETURN(r.usage.reasoning_tokens, OptInt(*it, "reasoning_tokens", uw));
    r.has_usage = true;
    // Cache figures reported (zero included) only when the item names one:
    // an item without them stands for a server that reports none.
    r.has_cache_usage = it->contains("cache_read_tokens") || it->contains("cache_write_tokens");
  }
  AL_ASSIGN_OR_RETURN(r.model, OptStr(item, "model", where));
  return out;
}

Result<std::vector<ScriptItem>> ParseScript(const Json& script) {
  const Json* items = &script;
  if (script.is_object()) {
    auto it = script.find("responses");
    if (it == script.end()) return InvalidArgument("script: missing \"responses\"");
    items = &*it;
  }
  if (!items->is_array()) return InvalidArgument("script: \"responses\" must be an array");
  std::vector<ScriptItem> out;
  out.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) {
    AL_ASSIGN_OR_RETURN(ScriptItem item, ParseScriptItem((*items)[i], i));
    out.push_back(std::move(item));
  }
  return out;
}

Result<std::vector<ScriptItem>> LoadScriptFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open script file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  Result<Json> j = ParseJson(ss.str());
  if (!j.ok()) return j.error().WithContext("script file " + path);
  Result<std::vector<ScriptItem>> items = ParseScript(*j);
  if (!items.ok()) return items.error().WithContext("script file " + path);
  return items;
}

}  // namespace agentloop
