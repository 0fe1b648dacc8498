// Test doubles for the core: a queue-driven ModelProvider that records the
// requests it gets, simple tools, an approver with scripted answers, an
// event sink that collects events, and a gate threads wait on. For tests
// only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "agentloop/events.h"
#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"

namespace agentloop::testing {

struct SeenRequest {
  std::string system;
  size_t messages = 0;
  std::vector<Message> all;  // full copy (tests only)
  std::vector<std::string> tools;
  uint64_t tools_uid = 0;
  int64_t max_output_tokens = 0;
};

class FakeProvider : public ModelProvider {
 public:
  std::string_view name() const override { return "fake"; }

  FakeProvider& Push(Result<ModelResponse> r) {
    queue_.push_back(std::move(r));
    return *this;
  }
  FakeProvider& Text(std::string text, int64_t tokens = 10) {
    ModelResponse r;
    r.content.push_back(ContentBlock::Text(std::move(text)));
    r.finish = FinishReason::kStop;
    r.usage.output_tokens = tokens;
    r.has_usage = tokens > 0;
    r.has_cache_usage = r.has_usage;  // nothing cached: the budget counts its usage
    return Push(std::move(r));
  }
  FakeProvider& Calls(std::vector<ContentBlock> calls, int64_t tokens = 10) {
    ModelResponse r;
    r.content = std::move(calls);
    r.finish = FinishReason::kToolUse;
    r.usage.output_tokens = tokens;
    r.has_usage = tokens > 0;
    r.has_cache_usage = r.has_usage;
    return Push(std::move(r));
  }
  // When the queue is empty, this generator answers (e.g. "always call a tool").
  std::function<Result<ModelResponse>(int call_index)> fallback;

  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink& sink,
                                 std::stop_token stop) override {
    SeenRequest seen;
    seen.system = request.system;
    seen.messages = request.message_count();
    request.ForEachMessage([&](const Message& m) { seen.all.push_back(m); });
    for (const auto& t : request.tools) seen.tools.push_back(t.name);
    seen.tools_uid = request.tools_uid;
    seen.max_output_tokens = request.max_output_tokens;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(std::move(seen));
    }
    if (stop.stop_requested()) return Cancelled("cancelled");
    int index = calls_++;
    if (queue_.empty()) {
      if (fallback) return fallback(index);
      return FailedPrecondition("fake provider exhausted");
    }
    Result<ModelResponse> r = std::move(queue_.front());
    queue_.pop_front();
    if (r.ok()) {
      for (const auto& b : r->content) {
        if (b.type == BlockType::kText) sink.OnTextDelta(b.text);
      }
    }
    return r;
  }

  std::vector<SeenRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int calls() const { return calls_; }

 private:
  mutable std::mutex mu_;
  std::deque<Result<ModelResponse>> queue_;
  std::vector<SeenRequest> requests_;
  int calls_ = 0;
};

inline Json ObjectSchema(std::vector<std::string> required_strings) {
  Json props = Json::object();
  Json req = Json::array();
  for (const auto& r : required_strings) {
    props[r] = Json{{"type", "string"}};
    req.push_back(r);
  }
  return Json{{"type", "object"}, {"properties", props}, {"required", req}};
}

// A test tool's spec: `name`, a schema requiring the string fields `req`.
inline ToolSpec Spec(std::string name, bool mutates, bool parallel,
                     std::vector<std::string> req = {"x"}) {
  ToolSpec s;
  s.name = std::move(name);
  s.description = "test tool";
  s.input_schema = ObjectSchema(std::move(req));
  s.mutates = mutates;
  s.parallel_safe = parallel;
  return s;
}

// How long a test waits for an event it expects before failing.
inline constexpr std::chrono::seconds kTimeout{30};

// A tool whose behaviour is a function; counts its runs.
class FnTool : public Tool {
 public:
  FnTool(ToolSpec spec, std::function<Result<ToolOutput>(const ToolCall&, ToolContext&)> fn)
      : spec_(std::move(spec)), fn_(std::move(fn)) {}
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override {
    runs_++;
    return fn_(call, ctx);
  }
  int runs() const { return runs_.load(); }

 private:
  ToolSpec spec_;
  std::function<Result<ToolOutput>(const ToolCall&, ToolContext&)> fn_;
  std::atomic<int> runs_{0};
};

class ScriptedApprover : public Approver {
 public:
  std::deque<ApprovalDecision> answers;
  std::vector<ApprovalRequest> seen;
  ApprovalDecision Decide(const ApprovalRequest& request, std::stop_token) override {
    seen.push_back(request);
    if (answers.empty()) return ApprovalDecision::Deny("no scripted answer", "test");
    ApprovalDecision d = answers.front();
    answers.pop_front();
    return d;
  }
};

class CollectingSink : public EventSink {
 public:
  std::vector<Event> events;
  std::function<Status(const Event&)> fail;
  Status OnEvent(const Event& e) override {
    events.push_back(e);
    if (fail) return fail(e);
    return Status::Ok();
  }
  std::vector<Event> OfType(EventType t) const {
    std::vector<Event> out;
    for (const auto& e : events) {
      if (e.type == t) out.push_back(e);
    }
    return out;
  }
};

// A latch the test opens; waiting on it is bounded.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // False when `timeout` passed before Open().
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

inline ContentBlock Call(std::string id, std::string name, Json input) {
  return ContentBlock::ToolUse(std::move(id), std::move(name), std::move(input));
}

}  // namespace agentloop::testing
