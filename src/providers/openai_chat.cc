// OpenAI Chat Completions (also DeepSeek, OpenRouter, llama.cpp, vLLM,
// Ollama): POST {base}/chat/completions with stream: true.
#include <map>

#include "providers/http_provider.h"
#include "providers/wire_util.h"

namespace agentloop {
namespace {

using wire::Quote;

class ChatDecoder : public StreamDecoder {
 public:
  explicit ChatDecoder(StreamSink& sink) : sink_(sink) {}

  Status OnEvent(const SseEvent& ev) override {
    if (done_) return Status::Ok();
    if (ev.data == "[DONE]") {
      done_ = true;
      return Status::Ok();
    }
    AL_ASSIGN_OR_RETURN(Json j, wire::ParseEventJson(ev.data, "chat completion chunk"));
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
      std::string code, msg;
      if (e->is_object()) {
        code = wire::Str(*e, "code");
        if (code.empty()) code = wire::Str(*e, "type");
        msg = wire::Str(*e, "message");
      } else if (e->is_string()) {
        msg = e->get<std::string>();
      }
      return ClassifyStreamError(code, msg);
    }
    if (std::string m = wire::Str(j, "model"); !m.empty()) model_ = m;
    if (const Json* u = wire::Obj(j, "usage")) {
      has_usage_ = true;
      int64_t prompt = wire::Int(*u, "prompt_tokens");
      int64_t cached = 0;
      if (const Json* d = wire::Obj(*u, "prompt_tokens_details");
          d && d->contains("cached_tokens")) {
        cached = wire::Int(*d, "cached_tokens");
        has_cache_usage_ = true;
      }
      usage_.cache_read_tokens = cached;
      usage_.input_tokens = prompt - cached;
      usage_.output_tokens = wire::Int(*u, "completion_tokens");
      if (const Json* d = wire::Obj(*u, "completion_tokens_details")) {
        usage_.reasoning_tokens = wire::Int(*d, "reasoning_tokens");
      }
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty()) return Status::Ok();
    const Json& c = (*choices)[0];
    if (!c.is_object()) return DataLoss("malformed chat completion chunk: choice is not an object");
    if (const Json* d = wire::Obj(c, "delta")) {
      for (const char* key : {"reasoning_content", "reasoning"}) {
        auto r = d->find(key);
        if (r != d->end() && r->is_string() && !r->get_ref<const std::string&>().empty()) {
          const std::string& t = r->get_ref<const std::string&>();
          thinking_ += t;
          has_thinking_ = true;
          sink_.OnThinkingDelta(t);
          break;
        }
      }
      auto content = d->find("content");
      if (content != d->end() && content->is_string()) {
        const std::string& t = content->get_ref<const std::string&>();
        if (!t.empty()) {
          text_ += t;
          sink_.OnTextDelta(t);
        }
      }
      auto calls = d->find("tool_calls");
      if (calls != d->end() && calls->is_array()) {
        for (const Json& tc : *calls) {
          if (!tc.is_object()) return DataLoss("malformed chat completion chunk: tool call");
          int64_t index =
              tc.contains("index") ? wire::Int(tc, "index") : static_cast<int64_t>(calls_.size());
          Call& call = calls_[index];
          if (std::string id = wire::Str(tc, "id"); !id.empty()) call.id = id;
          if (const Json* f = wire::Obj(tc, "function")) {
            // Only the first piece should carry the name; some servers repeat
            // it whole in every piece, so a repeat is not appended.
            if (std::string n = wire::Str(*f, "name"); !n.empty() && n != call.name) {
              call.name += n;
            }
            call.args += wire::Str(*f, "arguments");
          }
        }
      }
    }
    auto fr = c.find("finish_reason");
    if (fr != c.end() && fr->is_string()) finish_ = fr->get<std::string>();
    return Status::Ok();
  }

  Result<ModelResponse> Finish(bool cut_mid_event) override {
    if (finish_.empty()) {
      if (cut_mid_event) return DataLoss("stream cut in the middle of an event");
      return DataLoss("stream ended without a finish_reason");
    }
    ModelResponse r;
    if (has_thinking_) r.content.push_back(ContentBlock::Thinking(thinking_, ""));
    if (!text_.empty()) r.content.push_back(ContentBlock::Text(text_));
    int n = 0;
    for (auto& [index, call] : calls_) {
      ++n;
      if (call.name.empty()) return DataLoss("tool call " + std::to_string(index) + " has no name");
      ContentBlock b;
      b.type = BlockType::kToolUse;
      b.id = call.id.empty() ? "call_" + std::to_string(n) : call.id;
      b.name = call.name;
      wire::SetToolArguments(b, call.args);
      r.content.push_back(std::move(b));
    }
    if (finish_ == "length") {
      r.finish = FinishReason::kLength;
    } else if (finish_ == "content_filter") {
      r.finish = FinishReason::kRefused;
    } else if (!calls_.empty()) {
      r.finish = FinishReason::kToolUse;  // also when a server says "stop" with tool calls
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
  struct Call {
    std::string id, name, args;
  };
  StreamSink& sink_;
  bool done_ = false;
  std::string text_, thinking_, finish_, model_;
  bool has_thinking_ = false;
  std::map<int64_t, Call> calls_;
  Usage usage_;
  bool has_usage_ = false;
  bool has_cache_usage_ = false;
};

class ChatFormat : public WireFormat {
 public:
  explicit ChatFormat(WireOptions o) : options_(o) {}
  std::string_view name() const override { return "openai"; }
  std::string path() const override { return "/chat/completions"; }
  void AddAuthHeaders(const std::string& key, HttpHeaders* h) const override {
    if (!key.empty()) h->emplace_back("Authorization", "Bearer " + key);
  }

  std::string SerializeMessage(const Message& m) const override {
    std::string out;
    auto add = [&out](const Json& j) {
      if (!out.empty()) out.push_back(',');
      out += DumpJson(j);
    };
    switch (m.role) {
      case Role::kSystem:
        add(Json{{"role", "system"}, {"content", wire::JoinText(m)}});
        break;
      case Role::kUser: {
        bool has_text = false, has_image = false;
        // A tool message's content is text only (the API documents no image
        // part for it), so the images of tool results follow the tool
        // messages in one user message of image_url parts, each announced
        // by a text part naming its call; the tool message says so.
        Json attached = Json::array();
        for (const auto& b : m.content) {
          if (b.type == BlockType::kToolResult) {
            if (b.images.empty() || !options_.images) {
              add(Json{{"role", "tool"},
                       {"tool_call_id", b.tool_use_id},
                       {"content", wire::TextWithImagesDescribed(b)}});
              continue;
            }
            std::string text = b.text;
            for (size_t i = 0; i < b.images.size(); ++i) {
              const std::string label = "image " + std::to_string(i + 1) + " of tool call " +
                                        b.tool_use_id + " (" + b.images[i].media_type + ")";
              if (!text.empty()) text += "\n";
              text += "[" + label + ": in the next user message]";
              attached.push_back(Json{{"type", "text"}, {"text", label + ":"}});
              attached.push_back(ImagePart(b.images[i]));
            }
            add(Json{{"role", "tool"}, {"tool_call_id", b.tool_use_id}, {"content", text}});
          } else if (b.type == BlockType::kText) {
            has_text = true;
          } else if (b.type == BlockType::kImage) {
            has_image = true;
          }
        }
        if (!attached.empty()) add(Json{{"role", "user"}, {"content", std::move(attached)}});
        if (has_image) {
          // The person's own images: text and image_url parts in order.
          Json parts = Json::array();
          for (const auto& b : m.content) {
            if (b.type == BlockType::kText && !b.text.empty()) {
              parts.push_back(Json{{"type", "text"}, {"text", b.text}});
            } else if (b.type == BlockType::kImage) {
              parts.push_back(options_.images ? ImagePart(b)
                                              : Json{{"type", "text"},
                                                     {"text", DescribeImage(b, wire::kNoImages)}});
            }
          }
          add(Json{{"role", "user"}, {"content", std::move(parts)}});
        } else if (has_text || out.empty()) {
          add(Json{{"role", "user"}, {"content", wire::JoinText(m)}});
        }
        break;
      }
      case Role::kAssistant: {
        Json j = Json::object();
        j["role"] = "assistant";
        std::string text = wire::JoinText(m);
        std::string reasoning;
        bool has_reasoning = false;
        Json calls = Json::array();
        for (const auto& b : m.content) {
          if (b.type == BlockType::kThinking) {
            reasoning += b.text;
            has_reasoning = true;
          } else if (b.type == BlockType::kToolUse) {
            calls.push_back(
                Json{{"id", b.id},
                     {"type", "function"},
                     {"function", {{"name", b.name}, {"arguments", wire::ToolArguments(b)}}}});
          }
        }
        if (text.empty() && !calls.empty()) {
          j["content"] = nullptr;
        } else {
          j["content"] = text;
        }
        if (has_reasoning) j["reasoning_content"] = reasoning;
        if (!calls.empty()) j["tool_calls"] = std::move(calls);
        add(j);
        break;
      }
    }
    return out;
  }

  static Json ImagePart(const ContentBlock& image) {
    return Json{{"type", "image_url"}, {"image_url", {{"url", wire::DataUrl(image)}}}};
  }

  std::string BodyPrefix(const ModelRequest& r, const std::string& model,
                         bool* has_item) const override {
    std::string out = "{\"model\":" + Quote(model) + ",\"messages\":[";
    *has_item = false;
    if (!r.system.empty()) {
      out += "{\"role\":\"system\",\"content\":" + Quote(r.system) + "}";
      *has_item = true;
    }
    return out;
  }

  std::string BodySuffix(const ModelRequest& r) const override {
    std::string out = "],\"stream\":true,\"stream_options\":{\"include_usage\":true}";
    out += options_.use_max_tokens_field ? ",\"max_tokens\":" : ",\"max_completion_tokens\":";
    out += std::to_string(r.max_output_tokens);
    if (options_.prompt_cache_key && !r.cache_key.empty()) {
      out += ",\"prompt_cache_key\":" + Quote(r.cache_key);
    }
    if (!r.tools.empty()) {
      out += ",\"tools\":";
      tools_.AppendTo(out, r, [](const ToolSpec& t) {
        return Json{
            {"type", "function"},
            {"function",
             {{"name", t.name}, {"description", t.description}, {"parameters", t.input_schema}}}};
      });
    }
    out += "}";
    return out;
  }

  std::unique_ptr<StreamDecoder> NewDecoder(StreamSink& sink) const override {
    return std::make_unique<ChatDecoder>(sink);
  }

 private:
  WireOptions options_;
  wire::ToolsJsonCache tools_;
};

}  // namespace

std::unique_ptr<WireFormat> NewOpenAiChatFormat(WireOptions options) {
  return std::make_unique<ChatFormat>(options);
}

}  // namespace agentloop
