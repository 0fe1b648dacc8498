// OpenAI Responses (what Codex speaks): POST {base}/responses, stream: true,
// store: false, reasoning carried as encrypted_content.
#include <map>

#include "providers/http_provider.h"
#include "providers/wire_util.h"

namespace agentloop {
namespace {

using wire::Quote;

class ResponsesDecoder : public StreamDecoder {
 public:
  explicit ResponsesDecoder(StreamSink& sink) : sink_(sink) {}

  Status OnEvent(const SseEvent& ev) override {
    if (completed_) return Status::Ok();
    AL_ASSIGN_OR_RETURN(Json j, wire::ParseEventJson(ev.data, ev.event));
    std::string type = wire::Str(j, "type");
    if (type.empty()) type = std::string(ev.event);
    if (type == "error") {
      std::string code = wire::Str(j, "code");
      std::string msg = wire::Str(j, "message");
      if (const Json* e = wire::Obj(j, "error")) {
        code = wire::Str(*e, "code").empty() ? wire::Str(*e, "type") : wire::Str(*e, "code");
        msg = wire::Str(*e, "message");
      }
      return ClassifyStreamError(code, msg);
    }
    if (type == "response.failed") {
      std::string code, msg = "response failed";
      if (const Json* r = wire::Obj(j, "response")) {
        if (const Json* e = wire::Obj(*r, "error")) {
          code = wire::Str(*e, "code");
          msg = wire::Str(*e, "message");
        }
      }
      return ClassifyStreamError(code, msg);
    }
    if (type == "response.output_item.added" || type == "response.output_item.done") {
      const Json* item = wire::Obj(j, "item");
      if (item == nullptr) return DataLoss(type + " without an item");
      Item& it = items_[wire::Int(j, "output_index")];
      it.item = *item;
      it.done = type == "response.output_item.done";
      return Status::Ok();
    }
    if (type == "response.output_text.delta") {
      std::string d = wire::Str(j, "delta");
      items_[wire::Int(j, "output_index")].text += d;
      sink_.OnTextDelta(d);
      return Status::Ok();
    }
    if (type == "response.reasoning_summary_text.delta" ||
        type == "response.reasoning_text.delta") {
      std::string d = wire::Str(j, "delta");
      items_[wire::Int(j, "output_index")].text += d;
      sink_.OnThinkingDelta(d);
      return Status::Ok();
    }
    if (type == "response.function_call_arguments.delta") {
      items_[wire::Int(j, "output_index")].args += wire::Str(j, "delta");
      return Status::Ok();
    }
    if (type == "response.completed" || type == "response.incomplete") {
      const Json* r = wire::Obj(j, "response");
      if (r == nullptr) return DataLoss(type + " without a response");
      model_ = wire::Str(*r, "model");
      if (const Json* u = wire::Obj(*r, "usage")) {
        has_usage_ = true;
        int64_t cached = 0;
        if (const Json* d = wire::Obj(*u, "input_tokens_details");
            d && d->contains("cached_tokens")) {
          cached = wire::Int(*d, "cached_tokens");
          has_cache_usage_ = true;
        }
        usage_.cache_read_tokens = cached;
        usage_.input_tokens = wire::Int(*u, "input_tokens") - cached;
        usage_.output_tokens = wire::Int(*u, "output_tokens");
        if (const Json* d = wire::Obj(*u, "output_tokens_details")) {
          usage_.reasoning_tokens = wire::Int(*d, "reasoning_tokens");
        }
      }
      if (type == "response.incomplete") {
        incomplete_ = true;
        if (const Json* d = wire::Obj(*r, "incomplete_details")) {
          incomplete_reason_ = wire::Str(*d, "reason");
        }
      }
      completed_ = true;
      return Status::Ok();
    }
    return Status::Ok();  // created, in_progress, content_part.*, *.done text events
  }

  Result<ModelResponse> Finish(bool cut_mid_event) override {
    if (!completed_) {
      if (cut_mid_event) return DataLoss("stream cut in the middle of an event");
      return DataLoss("stream ended without response.completed");
    }
    ModelResponse r;
    bool tools = false;
    for (auto& [index, it] : items_) {
      const Json& item = it.item;
      std::string type = wire::Str(item, "type");
      if (type == "message") {
        std::string text;
        auto content = item.find("content");
        if (it.done && content != item.end() && content->is_array()) {
          for (const Json& part : *content) {
            if (part.is_object() && wire::Str(part, "type") == "output_text") {
              text += wire::Str(part, "text");
            }
          }
        } else {
          text = it.text;
        }
        if (!text.empty()) r.content.push_back(ContentBlock::Text(std::move(text)));
      } else if (type == "reasoning") {
        std::string text;
        auto summary = item.find("summary");
        if (it.done && summary != item.end() && summary->is_array() && !summary->empty()) {
          for (const Json& part : *summary) {
            if (!part.is_object()) continue;
            if (!text.empty()) text += "\n\n";
            text += wire::Str(part, "text");
          }
        } else {
          text = it.text;
        }
        ContentBlock b =
            ContentBlock::Thinking(std::move(text), wire::Str(item, "encrypted_content"));
        b.meta = Json{{"item_id", wire::Str(item, "id")}};
        r.content.push_back(std::move(b));
      } else if (type == "function_call") {
        ContentBlock b;
        b.type = BlockType::kToolUse;
        b.id = wire::Str(item, "call_id");
        b.name = wire::Str(item, "name");
        if (b.id.empty() || b.name.empty()) {
          return DataLoss("function_call item " + std::to_string(index) + " lacks call_id or name");
        }
        std::string args =
            it.done && item.contains("arguments") ? wire::Str(item, "arguments") : it.args;
        wire::SetToolArguments(b, args);
        b.meta = Json{{"item_id", wire::Str(item, "id")}};
        r.content.push_back(std::move(b));
        tools = true;
      }
    }
    if (incomplete_ && incomplete_reason_ == "max_output_tokens") {
      r.finish = FinishReason::kLength;
    } else if (incomplete_ && incomplete_reason_ == "content_filter") {
      r.finish = FinishReason::kRefused;
    } else {
      r.finish = tools ? FinishReason::kToolUse : FinishReason::kStop;
    }
    r.usage = usage_;
    r.has_usage = has_usage_;
    r.has_cache_usage = has_cache_usage_;
    r.model = model_;
    return r;
  }

 private:
  struct Item {
    Json item = Json::object();
    std::string text, args;
    bool done = false;
  };
  StreamSink& sink_;
  std::map<int64_t, Item> items_;
  bool completed_ = false, incomplete_ = false;
  std::string incomplete_reason_, model_;
  Usage usage_;
  bool has_usage_ = false;
  bool has_cache_usage_ = false;
};

Json InputMessage(const char* role, const char* part_type, const std::string& text) {
  return Json{{"type", "message"},
              {"role", role},
              {"content", Json::array({Json{{"type", part_type}, {"text", text}}})}};
}

class ResponsesFormat : public WireFormat {
 public:
  explicit ResponsesFormat(WireOptions o) : options_(o) {}
  std::string_view name() const override { return "openai-responses"; }
  std::string path() const override { return "/responses"; }
  void AddAuthHeaders(const std::string& key, HttpHeaders* h) const override {
    if (!key.empty()) h->emplace_back("Authorization", "Bearer " + key);
  }

  std::string SerializeMessage(const Message& m) const override {
    std::string out;
    auto add = [&out](const Json& j) {
      if (!out.empty()) out.push_back(',');
      out += DumpJson(j);
    };
    if (m.role == Role::kSystem) {
      add(InputMessage("developer", "input_text", wire::JoinText(m)));
      return out;
    }
    if (m.role == Role::kUser) {
      bool has_text = false, has_image = false;
      for (const auto& b : m.content) {
        if (b.type == BlockType::kToolResult) {
          add(Json{{"type", "function_call_output"},
                   {"call_id", b.tool_use_id},
                   {"output", FunctionOutput(b)}});
        } else if (b.type == BlockType::kText) {
          has_text = true;
        } else if (b.type == BlockType::kImage) {
          has_image = true;
        }
      }
      if (has_image) {
        // The person's own images: input_text and input_image parts in order.
        Json parts = Json::array();
        for (const auto& b : m.content) {
          if (b.type == BlockType::kText && !b.text.empty()) {
            parts.push_back(Json{{"type", "input_text"}, {"text", b.text}});
          } else if (b.type == BlockType::kImage) {
            parts.push_back(options_.images ? ImagePart(b)
                                            : Json{{"type", "input_text"},
                                                   {"text", DescribeImage(b, wire::kNoImages)}});
          }
        }
        add(Json{{"type", "message"}, {"role", "user"}, {"content", std::move(parts)}});
      } else if (has_text || out.empty()) {
        add(InputMessage("user", "input_text", wire::JoinText(m)));
      }
      return out;
    }
    // Assistant: items in model order; consecutive text blocks form one message.
    std::string text;
    auto flush_text = [&] {
      if (!text.empty()) add(InputMessage("assistant", "output_text", text));
      text.clear();
    };
    for (const auto& b : m.content) {
      switch (b.type) {
        case BlockType::kText:
          text += b.text;
          break;
        case BlockType::kThinking: {
          flush_text();
          // Only reasoning the API produced (encrypted) can be sent back.
          if (b.signature.empty()) break;
          Json summary = Json::array();
          if (!b.text.empty()) summary.push_back(Json{{"type", "summary_text"}, {"text", b.text}});
          Json item{
              {"type", "reasoning"}, {"summary", summary}, {"encrypted_content", b.signature}};
          add(item);
          break;
        }
        case BlockType::kToolUse:
          flush_text();
          add(Json{{"type", "function_call"},
                   {"call_id", b.id},
                   {"name", b.name},
                   {"arguments", wire::ToolArguments(b)}});
          break;
        case BlockType::kRedactedThinking:
        case BlockType::kToolResult:
        case BlockType::kImage:
          break;
      }
    }
    flush_text();
    return out;
  }

  static Json ImagePart(const ContentBlock& image) {
    return Json{{"type", "input_image"}, {"image_url", wire::DataUrl(image)}, {"detail", "auto"}};
  }

  // A function_call_output's output: the text, or (with images the model
  // accepts) the list of input_text and input_image parts the API accepts
  // there.
  Json FunctionOutput(const ContentBlock& b) const {
    if (b.images.empty()) return b.text;
    if (!options_.images) return wire::TextWithImagesDescribed(b);
    Json parts = Json::array();
    if (!b.text.empty()) parts.push_back(Json{{"type", "input_text"}, {"text", b.text}});
    for (const ContentBlock& image : b.images) parts.push_back(ImagePart(image));
    return parts;
  }

  std::string BodyPrefix(const ModelRequest& r, const std::string& model,
                         bool* has_item) const override {
    std::string out = "{\"model\":" + Quote(model);
    if (!r.system.empty()) out += ",\"instructions\":" + Quote(r.system);
    out += ",\"input\":[";
    *has_item = false;
    return out;
  }

  std::string BodySuffix(const ModelRequest& r) const override {
    std::string out = "]";
    if (!r.tools.empty()) {
      out += ",\"tools\":";
      tools_.AppendTo(out, r, [](const ToolSpec& t) {
        return Json{{"type", "function"},
                    {"name", t.name},
                    {"description", t.description},
                    {"parameters", t.input_schema}};
      });
    }
    out += ",\"max_output_tokens\":" + std::to_string(r.max_output_tokens);
    if (options_.prompt_cache_key && !r.cache_key.empty()) {
      out += ",\"prompt_cache_key\":" + Quote(r.cache_key);
    }
    out += ",\"stream\":true,\"store\":false,\"include\":[\"reasoning.encrypted_content\"]}";
    return out;
  }

  std::unique_ptr<StreamDecoder> NewDecoder(StreamSink& sink) const override {
    return std::make_unique<ResponsesDecoder>(sink);
  }

 private:
  WireOptions options_;
  wire::ToolsJsonCache tools_;
};

}  // namespace

std::unique_ptr<WireFormat> NewOpenAiResponsesFormat(WireOptions options) {
  return std::make_unique<ResponsesFormat>(options);
}

}  // namespace agentloop
