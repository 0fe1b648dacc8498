#include "providers/scripted_provider.h"

#include <condition_variable>

namespace agentloop {
namespace {

// Splits `text` into up to three chunks on UTF-8 boundaries.
std::vector<std::string_view> Chunks(std::string_view text) {
  std::vector<std::string_view> out;
  if (text.empty()) return out;
  size_t step = text.size() / 3 + 1;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.size(), pos + step);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// Waits `ms` or until `stop` fires. Returns false when cancelled.
bool CancellableWait(int ms, const std::stop_token& stop) {
  if (ms <= 0) return !stop.stop_requested();
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, std::chrono::milliseconds(ms), [] { return false; });
  return !stop.stop_requested();
}

}  // namespace

ScriptedProvider::ScriptedProvider(const Json& script) {
  Result<std::vector<ScriptItem>> items = ParseScript(script);
  if (items.ok()) {
    items_ = std::move(*items);
  } else {
    parse_error_ = items.error();
  }
}

ScriptedProvider::ScriptedProvider(std::vector<ScriptItem> items) : items_(std::move(items)) {}

Result<std::unique_ptr<ScriptedProvider>> ScriptedProvider::FromJson(const Json& script) {
  AL_ASSIGN_OR_RETURN(std::vector<ScriptItem> items, ParseScript(script));
  return std::make_unique<ScriptedProvider>(std::move(items));
}

Result<std::unique_ptr<ScriptedProvider>> ScriptedProvider::FromFile(const std::string& path) {
  AL_ASSIGN_OR_RETURN(std::vector<ScriptItem> items, LoadScriptFile(path));
  return std::make_unique<ScriptedProvider>(std::move(items));
}

Result<ModelResponse> ScriptedProvider::Complete(const ModelRequest& request, StreamSink& sink,
                                                 std::stop_token stop) {
  RecordedRequest rec;
  rec.model = request.model;
  rec.system = request.system;
  rec.message_count = request.message_count();
  if (!request.tail.empty()) {
    rec.last_message = request.tail.back();
  } else if (!request.history.empty()) {
    rec.last_message = request.history.back();
  }
  rec.max_output_tokens = request.max_output_tokens;
  for (const ToolSpec& t : request.tools) rec.tool_names.push_back(t.name);

  const ScriptItem* item = nullptr;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(std::move(rec));
    if (!parse_error_.ok()) return parse_error_;
    std::string text = request.system;
    for (const ToolSpec& t : request.tools) text += "\n" + t.name;
    if (used_.size() != items_.size()) used_.assign(items_.size(), false);
    for (size_t i = 0; i < items_.size() && item == nullptr; ++i) {
      if (used_[i]) continue;
      if (!items_[i].match.empty() && text.find(items_[i].match) == std::string::npos) continue;
      used_[i] = true;
      ++used_count_;
      item = &items_[i];  // items_ is never resized after construction
    }
    if (item == nullptr && used_count_ == items_.size()) {
      return FailedPrecondition("script exhausted after " + std::to_string(items_.size()) +
                                " responses");
    }
    if (item == nullptr) {
      return FailedPrecondition("no unused script item matches this request (" +
                                std::to_string(used_count_) + " of " +
                                std::to_string(items_.size()) + " responses used)");
    }
  }
  if (stop.stop_requested()) return Cancelled("model call cancelled");
  if (!CancellableWait(item->delay_ms, stop)) return Cancelled("model call cancelled");
  if (item->error) return *item->error;

  ModelResponse response = item->response;
  for (const ContentBlock& b : response.content) {
    if (b.type == BlockType::kThinking) {
      for (std::string_view c : Chunks(b.text)) sink.OnThinkingDelta(c);
    } else if (b.type == BlockType::kText) {
      for (std::string_view c : Chunks(b.text)) sink.OnTextDelta(c);
    }
  }
  if (stop.stop_requested()) return Cancelled("model call cancelled");
  return response;
}

const std::vector<RecordedRequest>& ScriptedProvider::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::vector<RecordedRequest> ScriptedProvider::RequestsSnapshot() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t ScriptedProvider::remaining() const {
  std::lock_guard lock(mu_);
  return items_.size() - used_count_;
}

}  // namespace agentloop
