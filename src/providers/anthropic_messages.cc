// Anthropic Messages: POST {base}/v1/messages with stream: true.
#include <map>

#include "providers/http_provider.h"
#include "providers/wire_util.h"

namespace agentloop {
namespace {

using wire::Quote;

class AnthropicDecoder : public StreamDecoder {
 public:
  explicit AnthropicDecoder(StreamSink& sink) : sink_(sink) {}

  Status OnEvent(const SseEvent& ev) override {
    if (stopped_) return Status::Ok();
    AL_ASSIGN_OR_RETURN(Json j, wire::ParseEventJson(ev.data, ev.event));
    std::string type = wire::Str(j, "type");
    if (type.empty()) type = std::string(ev.event);
    if (type == "ping") return Status::Ok();
    if (type == "error") {
      const Json* e = wire::Obj(j, "error");
      return ClassifyStreamError(e ? wire::Str(*e, "type") : "", e ? wire::Str(*e, "message") : "");
    }
    if (type == "message_start") {
      const Json* m = wire::Obj(j, "message");
      if (m == nullptr) return DataLoss("message_start without a message");
      model_ = wire::Str(*m, "model");
      if (const Json* u = wire::Obj(*m, "usage")) ReadUsage(*u);
      started_ = true;
      return Status::Ok();
    }
    if (!started_) return DataLoss("event \"" + type + "\" before message_start");
    if (type == "content_block_start") {
      const Json* cb = wire::Obj(j, "content_block");
      if (cb == nullptr) return DataLoss("content_block_start without a content_block");
      Block& b = blocks_[wire::Int(j, "index")];
      std::string bt = wire::Str(*cb, "type");
      if (bt == "text") {
        b.block.type = BlockType::kText;
        b.block.text = wire::Str(*cb, "text");
      } else if (bt == "thinking") {
        b.block.type = BlockType::kThinking;
        b.block.text = wire::Str(*cb, "thinking");
        b.block.signature = wire::Str(*cb, "signature");
      } else if (bt == "redacted_thinking") {
        b.block.type = BlockType::kRedactedThinking;
        b.block.data = wire::Str(*cb, "data");
      } else if (bt == "tool_use" || bt == "server_tool_use") {
        b.block.type = BlockType::kToolUse;
        b.block.id = wire::Str(*cb, "id");
        b.block.name = wire::Str(*cb, "name");
        b.is_tool = true;
      } else {
        b.skip = true;  // unknown block kinds are not part of our model
      }
      b.started = true;
      return Status::Ok();
    }
    if (type == "content_block_delta") {
      auto it = blocks_.find(wire::Int(j, "index"));
      if (it == blocks_.end()) return DataLoss("content_block_delta for an unknown block");
      Block& b = it->second;
      const Json* d = wire::Obj(j, "delta");
      if (d == nullptr) return DataLoss("content_block_delta without a delta");
      std::string dt = wire::Str(*d, "type");
      if (dt == "text_delta") {
        std::string t = wire::Str(*d, "text");
        b.block.text += t;
        sink_.OnTextDelta(t);
      } else if (dt == "thinking_delta") {
        std::string t = wire::Str(*d, "thinking");
        b.block.text += t;
        sink_.OnThinkingDelta(t);
      } else if (dt == "signature_delta") {
        b.block.signature += wire::Str(*d, "signature");
      } else if (dt == "input_json_delta") {
        b.json += wire::Str(*d, "partial_json");
      }
      return Status::Ok();
    }
    if (type == "content_block_stop") {
      auto it = blocks_.find(wire::Int(j, "index"));
      if (it == blocks_.end()) return DataLoss("content_block_stop for an unknown block");
      it->second.stopped = true;
      return Status::Ok();
    }
    if (type == "message_delta") {
      if (const Json* d = wire::Obj(j, "delta")) {
        if (std::string s = wire::Str(*d, "stop_reason"); !s.empty()) stop_reason_ = s;
      }
      if (const Json* u = wire::Obj(j, "usage")) ReadUsage(*u);
      return Status::Ok();
    }
    if (type == "message_stop") {
      stopped_ = true;
      return Status::Ok();
    }
    return Status::Ok();  // unknown events are ignored (forward compatible)
  }

  Result<ModelResponse> Finish(bool cut_mid_event) override {
    if (!stopped_) {
      if (cut_mid_event) return DataLoss("stream cut in the middle of an event");
      return DataLoss(started_ ? "stream ended without message_stop"
                               : "stream ended without message_start");
    }
    ModelResponse r;
    bool tools = false;
    for (auto& [index, b] : blocks_) {
      if (b.skip) continue;
      if (!b.stopped) return DataLoss("content block " + std::to_string(index) + " not stopped");
      if (b.is_tool) {
        wire::SetToolArguments(b.block, b.json);
        tools = true;
      }
      r.content.push_back(std::move(b.block));
    }
    if (stop_reason_ == "max_tokens") {
      r.finish = FinishReason::kLength;
    } else if (stop_reason_ == "refusal") {
      r.finish = FinishReason::kRefused;
    } else if (stop_reason_ == "tool_use" || tools) {
      r.finish = tools ? FinishReason::kToolUse : FinishReason::kStop;
    } else {
      r.finish = FinishReason::kStop;
    }
    r.usage = usage_;
    r.has_usage = has_usage_;
    r.has_cache_usage = has_cache_usage_;
    r.model = model_;
    return r;
  }

 private:
  void ReadUsage(const Json& u) {
    has_usage_ = true;
    if (u.contains("input_tokens")) usage_.input_tokens = wire::Int(u, "input_tokens");
    if (u.contains("output_tokens")) usage_.output_tokens = wire::Int(u, "output_tokens");
    if (u.contains("cache_read_input_tokens")) {
      usage_.cache_read_tokens = wire::Int(u, "cache_read_input_tokens");
      has_cache_usage_ = true;
    }
    if (u.contains("cache_creation_input_tokens")) {
      usage_.cache_write_tokens = wire::Int(u, "cache_creation_input_tokens");
      has_cache_usage_ = true;
    }
  }

  struct Block {
    ContentBlock block;
    std::string json;
    bool is_tool = false, skip = false, started = false, stopped = false;
  };
  StreamSink& sink_;
  bool started_ = false, stopped_ = false;
  std::map<int64_t, Block> blocks_;
  std::string stop_reason_, model_;
  Usage usage_;
  bool has_usage_ = false;
  bool has_cache_usage_ = false;
};

class AnthropicFormat : public WireFormat {
 public:
  explicit AnthropicFormat(WireOptions o) : options_(o) {}
  std::string_view name() const override { return "anthropic"; }
  std::string path() const override { return "/v1/messages"; }
  void AddAuthHeaders(const std::string& key, HttpHeaders* h) const override {
    if (!key.empty()) h->emplace_back("x-api-key", key);
    h->emplace_back("anthropic-version", "2023-06-01");
  }

  std::string SerializeMessage(const Message& m) const override { return DumpJson(MessageJson(m)); }

  // The newest message carries the moving cache breakpoint: the prefix up
  // to it is written to the cache, and the next request reads it.
  std::string SerializeNewest(const Message& m) const override {
    Json j = MessageJson(m);
    Json& content = j["content"];
    if (!content.empty()) content.back()["cache_control"] = Json{{"type", "ephemeral"}};
    return DumpJson(j);
  }
  bool MarksNewest() const override { return true; }

  // An image block of the Messages API.
  static Json ImageJson(const ContentBlock& image) {
    return Json{
        {"type", "image"},
        {"source", {{"type", "base64"}, {"media_type", image.media_type}, {"data", image.data}}}};
  }

  // A tool_result's content: its text alone, or (with images the model
  // accepts) the documented array of text and image blocks.
  Json ToolResultContent(const ContentBlock& b) const {
    if (b.images.empty()) return b.text;
    if (!options_.images) return wire::TextWithImagesDescribed(b);
    Json parts = Json::array();
    if (!b.text.empty()) parts.push_back(Json{{"type", "text"}, {"text", b.text}});
    for (const ContentBlock& image : b.images) parts.push_back(ImageJson(image));
    return parts;
  }

  Json MessageJson(const Message& m) const {
    Json content = Json::array();
    if (m.role == Role::kAssistant) {
      // Thinking blocks go first, unchanged (the API verifies signatures).
      for (const auto& b : m.content) {
        if (b.type == BlockType::kThinking) {
          content.push_back(
              Json{{"type", "thinking"}, {"thinking", b.text}, {"signature", b.signature}});
        } else if (b.type == BlockType::kRedactedThinking) {
          content.push_back(Json{{"type", "redacted_thinking"}, {"data", b.data}});
        }
      }
      for (const auto& b : m.content) {
        if (b.type == BlockType::kText && !b.text.empty()) {
          content.push_back(Json{{"type", "text"}, {"text", b.text}});
        } else if (b.type == BlockType::kToolUse) {
          Json input = b.input.is_object() ? b.input : Json::object();
          content.push_back(
              Json{{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", input}});
        }
      }
    } else {
      // Tool results first: the API wants them at the start of the user turn.
      for (const auto& b : m.content) {
        if (b.type != BlockType::kToolResult) continue;
        Json r{{"type", "tool_result"},
               {"tool_use_id", b.tool_use_id},
               {"content", ToolResultContent(b)}};
        if (b.is_error) r["is_error"] = true;
        content.push_back(std::move(r));
      }
      for (const auto& b : m.content) {
        if (b.type == BlockType::kText && !b.text.empty()) {
          content.push_back(Json{{"type", "text"}, {"text", b.text}});
        } else if (b.type == BlockType::kImage) {
          content.push_back(options_.images ? ImageJson(b)
                                            : Json{{"type", "text"},
                                                   {"text", DescribeImage(b, wire::kNoImages)}});
        }
      }
    }
    if (content.empty()) content.push_back(Json{{"type", "text"}, {"text", "(empty)"}});
    return Json{{"role", m.role == Role::kAssistant ? "assistant" : "user"},
                {"content", std::move(content)}};
  }

  std::string BodyPrefix(const ModelRequest& r, const std::string& model,
                         bool* has_item) const override {
    std::string out =
        "{\"model\":" + Quote(model) + ",\"max_tokens\":" + std::to_string(r.max_output_tokens);
    // Cache breakpoint on the system text (tools and system are the stable
    // prefix of every request of a session).
    if (!r.system.empty()) {
      out += ",\"system\":[{\"type\":\"text\",\"text\":" + Quote(r.system) +
             ",\"cache_control\":{\"type\":\"ephemeral\"}}]";
    }
    out += ",\"messages\":[";
    *has_item = false;
    return out;
  }

  std::string BodySuffix(const ModelRequest& r) const override {
    std::string out = "]";
    if (!r.tools.empty()) {
      out += ",\"tools\":";
      tools_.AppendTo(out, r, [](const ToolSpec& t) {
        return Json{
            {"name", t.name}, {"description", t.description}, {"input_schema", t.input_schema}};
      });
      // Cache breakpoint on the last tool: "...}]" becomes
      // "...,"cache_control":{...}}]".
      if (out.size() >= 2 && out.compare(out.size() - 2, 2, "}]") == 0) {
        out.insert(out.size() - 2, ",\"cache_control\":{\"type\":\"ephemeral\"}");
      }
    }
    out += ",\"stream\":true}";
    return out;
  }

  std::unique_ptr<StreamDecoder> NewDecoder(StreamSink& sink) const override {
    return std::make_unique<AnthropicDecoder>(sink);
  }

 private:
  WireOptions options_;
  wire::ToolsJsonCache tools_;
};

}  // namespace

std::unique_ptr<WireFormat> NewAnthropicFormat(WireOptions options) {
  return std::make_unique<AnthropicFormat>(options);
}

}  // namespace agentloop
