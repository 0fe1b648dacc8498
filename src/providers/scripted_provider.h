// ScriptedProvider: a ModelProvider that replays a JSON script (see
// providers/script.h and docs/providers.md for the format), for tests and the
// offline demo. Each Complete() call consumes the next item: a response is
// streamed to the sink (thinking, then text in a few chunks) and returned; an
// error item is returned as its Status (no retry). Running past the end
// returns kFailedPrecondition "script exhausted after N responses".
//
// Every request is recorded (requests()) so tests can assert what the engine
// sent.
//
// Thread-safety: Complete() may be called concurrently; items are handed out
// in call order under a mutex. requests() returns a reference to state
// guarded by that mutex: read it only while no Complete() is running (or use
// RequestsSnapshot()).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentloop/provider.h"

#include "providers/script.h"

namespace agentloop {

struct RecordedRequest {
  std::string model;
  std::string system;
  size_t message_count = 0;
  Message last_message;  // empty user message when there were none
  int64_t max_output_tokens = 0;
  std::vector<std::string> tool_names;
};

class ScriptedProvider : public ModelProvider {
 public:
  // `script` is `{"responses": [...]}` or a bare array. An invalid script is
  // reported by the first Complete() call (kInvalidArgument); use
  // FromJson/FromFile to get the error up front.
  explicit ScriptedProvider(const Json& script);
  explicit ScriptedProvider(std::vector<ScriptItem> items);

  static Result<std::unique_ptr<ScriptedProvider>> FromJson(const Json& script);
  static Result<std::unique_ptr<ScriptedProvider>> FromFile(const std::string& path);

  std::string_view name() const override { return "script"; }

  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink& sink,
                                 std::stop_token stop) override;

  const std::vector<RecordedRequest>& requests() const;
  std::vector<RecordedRequest> RequestsSnapshot() const;
  // Responses not yet consumed.
  size_t remaining() const;

 private:
  mutable std::mutex mu_;
  Status parse_error_;
  std::vector<ScriptItem> items_;
  std::vector<bool> used_;  // by item
  size_t used_count_ = 0;
  std::vector<RecordedRequest> requests_;
};

}  // namespace agentloop
