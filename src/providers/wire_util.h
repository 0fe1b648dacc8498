// Helpers shared by the wire formats (internal to src/providers).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
//
// A request with a tools_uid (a turn's shared list, ToolSpecList::uid) is
// looked up by that uid in a process-wide table per `Entry` type (one per
// wire format; the last kSharedLists lists used): the sessions that offer
// the same list share one serialized copy, and no copy of the specs is kept.
// A request without one is compared with a copy of the last specs.
// Thread-safe (a format may serve several sessions at once).
class ToolsJsonCache {
 public:
  static constexpr size_t kSharedLists = 32;

  // Appends the wire JSON array of r.tools to `out`. `entry` maps one
  // ToolSpec to its wire JSON; it must depend only on the spec (the cache is
  // keyed by the specs, and shared by every cache with the same Entry type).
  // A request carrying the tools_uid of a cached list is a hit without
  // comparing the specs (a deep compare of every schema cost ~75 k
  // instructions per request).
  template <typename Entry>
  void AppendTo(std::string& out, const ModelRequest& r, Entry&& entry) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.tools_uid != 0) {
      if (uid_ != r.tools_uid || !json_) {
        json_ = SharedJson<std::decay_t<Entry>>(r, entry);
        uid_ = r.tools_uid;
        key_.clear();
        key_valid_ = false;
      }
      out += *json_;
      return;
    }
    const bool same =
        key_valid_ && json_ && std::equal(r.tools.begin(), r.tools.end(), key_.begin(), key_.end());
    if (!same) {
      json_ = std::make_shared<const std::string>(Serialize(r.tools, entry));
      key_.assign(r.tools.begin(), r.tools.end());
      key_valid_ = true;
    }
    uid_ = 0;
    out += *json_;
  }

 private:
  template <typename Entry>
  static std::string Serialize(std::span<const ToolSpec> tools, const Entry& entry) {
    Json all = Json::array();
    for (const ToolSpec& t : tools) all.push_back(entry(t));
    return DumpJson(all);
  }

  // The serialized list of r.tools_uid from the table of Entry's format,
  // made and added (dropping the least recently used) when missing.
  template <typename Entry>
  static std::shared_ptr<const std::string> SharedJson(const ModelRequest& r, const Entry& entry) {
    using Slot = std::pair<uint64_t, std::shared_ptr<const std::string>>;
    static std::mutex table_mu;
    static auto* table = new std::vector<Slot>();  // most recent first; Guarded by table_mu
    std::lock_guard<std::mutex> lock(table_mu);
    for (size_t i = 0; i < table->size(); ++i) {
      if ((*table)[i].first == r.tools_uid) {
        std::rotate(table->begin(), table->begin() + static_cast<std::ptrdiff_t>(i),
                    table->begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return table->front().second;
      }
    }
    auto json = std::make_shared<const std::string>(Serialize(r.tools, entry));
    table->insert(table->begin(), Slot{r.tools_uid, json});
    if (table->size() > kSharedLists) table->pop_back();
    return json;
  }

  mutable std::mutex mu_;
  mutable std::vector<ToolSpec> key_;  // Guarded by mu_: the specs of json_ when uid_ is 0.
  mutable bool key_valid_ = false;     // Guarded by mu_.
  mutable uint64_t uid_ = 0;           // Guarded by mu_: tools_uid of json_, 0 none.
  mutable std::shared_ptr<const std::string> json_;  // Guarded by mu_.
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
