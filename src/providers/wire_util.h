// Helpers shared by the wire formats (internal to src/providers).
#pragma once

#include <algorithm>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/provider.h"
#include "agentloop/types.h"

#include "protocol/image.h"

namespace agentloop::wire {

// JSON string literal for `s` (quoted, escaped, invalid UTF-8 replaced).
inline std::string Quote(std::string_view s) { return DumpJson(Json(std::string(s))); }

// Sets `b.input` from a model's argument string: the parsed object, or null
// plus `raw_input` when it is not a JSON object. Empty means {}.
inline void SetToolArguments(ContentBlock& b, const std::string& args) {
  if (args.empty()) {
    b.input = Json::object();
    return;
  }
  Result<Json> j = ParseJson(args);
  if (j.ok() && j->is_object()) {
    b.input = std::move(*j);
  } else {
    b.input = nullptr;
    b.raw_input = args;
  }
}

// The argument string to send back for a tool_use block.
inline std::string ToolArguments(const ContentBlock& b) {
  if (!b.raw_input.empty()) return b.raw_input;
  if (b.input.is_null()) return "{}";
  return DumpJson(b.input);
}

inline std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
inline int64_t Int(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}
inline const Json* Obj(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

// Parses an event's data as a JSON object; kDataLoss naming the event.
inline Result<Json> ParseEventJson(std::string_view data, std::string_view what) {
  Result<Json> j = ParseJson(data);
  if (!j.ok()) {
    return DataLoss("malformed " + std::string(what) + " event: " + j.error().message());
  }
  if (!j->is_object()) return DataLoss("malformed " + std::string(what) + " event: not an object");
  return j;
}

// The serialized tool list of a request, rebuilt only when the offered tools
// change. The schemas are the same for every request of a session, and
// serializing them anew was the largest part of building a request body;
// comparing them with the cached copy costs a fraction of that.
// Thread-safe (a format may serve several sessions at once).
class ToolsJsonCache {
 public:
  // Appends the wire JSON array of r.tools to `out`. `entry` maps one
  // ToolSpec to its wire JSON; it must depend only on the spec (the cache is
  // keyed by the specs). A request carrying the tools_uid of the cached list
  // is a hit without comparing the specs (a deep compare of every schema
  // cost ~75 k instructions per request).
  template <typename Entry>
  void AppendTo(std::string& out, const ModelRequest& r, Entry&& entry) const {
    std::lock_guard<std::mutex> lock(mu_);
    const bool same = (r.tools_uid != 0 && r.tools_uid == uid_) ||
                      std::equal(r.tools.begin(), r.tools.end(), key_.begin(), key_.end());
    if (!same) {
      Json all = Json::array();
      for (const ToolSpec& t : r.tools) all.push_back(entry(t));
      json_ = DumpJson(all);
      key_.assign(r.tools.begin(), r.tools.end());
    }
    uid_ = r.tools_uid;
    out += json_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<ToolSpec> key_;  // Guarded by mu_.
  mutable uint64_t uid_ = 0;           // Guarded by mu_: tools_uid of key_, 0 unknown.
  mutable std::string json_;           // Guarded by mu_.
};

// Why an image is described rather than sent.
inline constexpr std::string_view kNoImages = "the model does not accept images";

// A tool result's text followed by a line describing each of its images:
// what a format sends when the model does not accept images.
inline std::string TextWithImagesDescribed(const ContentBlock& result) {
  std::string out = result.text;
  for (const ContentBlock& image : result.images) {
    if (!out.empty()) out += "\n";
    out += DescribeImage(image, kNoImages);
  }
  return out;
}

// An image as a data: URL (the OpenAI formats' image_url).
inline std::string DataUrl(const ContentBlock& image) {
  return "data:" + image.media_type + ";base64," + image.data;
}

// Joins the text blocks of a message.
inline std::string JoinText(const Message& m) {
  std::string out;
  for (const auto& b : m.content) {
    if (b.type == BlockType::kText) out += b.text;
  }
  return out;
}

}  // namespace agentloop::wire
