// ModelProvider: one model API behind one interface (OpenAI Chat Completions,
// OpenAI Responses, Anthropic Messages, the scripted provider for tests).
//
// A request is the system text, a view of the session's history (not a copy:
// the engine must not copy the history each step), an owned tail of
// transient messages that are sent but never stored (e.g. the todo loop's
// open-task block), the tools offered, and the output-token cap.
//
// Thread-safety: Complete() and CompleteAsync() may be called concurrently
// for different requests (many sessions share one provider). Implementations
// keep per-request state on the stack (or in the asynchronous call's state).
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

// The model APIs the engine speaks. The names are what configuration files,
// flags and the settings pinned to a session spell.
enum class ProviderKind {
  kOpenAI,           // "openai": Chat Completions (also llama.cpp, vLLM, Ollama, ...)
  kAnthropic,        // "anthropic": Messages
  kOpenAIResponses,  // "openai-responses": Responses
  kScript,           // "script": replays a scripted conversation, offline
};

inline std::string_view ProviderKindName(ProviderKind k) {
  switch (k) {
    case ProviderKind::kOpenAI:
      return "openai";
    case ProviderKind::kAnthropic:
      return "anthropic";
    case ProviderKind::kOpenAIResponses:
      return "openai-responses";
    case ProviderKind::kScript:
      return "script";
  }
  return "openai";
}

// Errors: kInvalidArgument naming the value and the known names.
inline Result<ProviderKind> ParseProviderKind(std::string_view name) {
  for (ProviderKind k : {ProviderKind::kOpenAI, ProviderKind::kAnthropic,
                         ProviderKind::kOpenAIResponses, ProviderKind::kScript}) {
    if (ProviderKindName(k) == name) return k;
  }
  return InvalidArgument("unknown provider '" + std::string(name) +
                         "': expected openai, anthropic, openai-responses or script");
}

// Whether the provider talks to a model server over HTTP.
inline bool IsRemoteProvider(ProviderKind k) { return k != ProviderKind::kScript; }

struct ModelRequest {
  std::string model;
  std::string system;
  // The stored history, oldest first. A view into the session's transcript,
  // valid for the duration of Complete().
  std::span<const Message> history;
  // Sent after `history`, never stored. A hook that must change the last
  // stored message (merge text into it) moves a changed copy of it here and
  // shortens `history` by one.
  std::vector<Message> tail;
  std::span<const ToolSpec> tools;
  // Identity of `tools` for per-request caches (a format's serialized tool
  // list): requests with the same non-zero tools_uid offer identical tools.
  // 0: compare the tools themselves. Whoever changes `tools` sets it to 0.
  uint64_t tools_uid = 0;
  int64_t max_output_tokens = 4096;
  // Identity for the provider's prompt cache (the session id): requests
  // with the same key share cached prefixes where the API supports a key
  // (OpenAI's prompt_cache_key). Empty: none sent.
  std::string cache_key;
  // A bound on the whole call, retries and their waits included (0: none
  // beyond the provider's own timeouts). When it passes, the call ends with
  // kDeadlineExceeded (the HTTP providers; a provider without a server to
  // wait for may ignore it). The engine sets it on side requests (a compaction
  // summary) that must not hold a turn up for minutes.
  std::chrono::milliseconds timeout{0};
  // At most this many attempts (0: the provider's own retry policy; a
  // smaller value of the two wins).
  int max_attempts = 0;

  // Calls `fn(const Message&)` for history then tail, in order.
  template <typename Fn>
  void ForEachMessage(Fn&& fn) const {
    for (const Message& m : history) fn(m);
    for (const Message& m : tail) fn(m);
  }
  size_t message_count() const { return history.size() + tail.size(); }
};

enum class FinishReason {
  kStop,     // the model finished (end_turn / stop)
  kToolUse,  // the model asked for tools
  kLength,   // cut off by the output-token limit
  kRefused,  // the model or the provider's filter refused (Anthropic stop_reason
             // "refusal", OpenAI finish_reason / incomplete reason "content_filter")
};
std::string_view FinishReasonName(FinishReason reason);

struct ModelResponse {
  std::vector<ContentBlock> content;  // text, thinking, tool_use blocks in model order
  FinishReason finish = FinishReason::kStop;
  Usage usage;
  bool has_usage = false;  // false when the provider reported none
  // The provider reported cache figures (cached input read or written, zero
  // included), so `usage.input_tokens` is the input it did not read from a
  // cache. False for a server that reports only its prompt's total (a local
  // OpenAI-compatible server): the token budget then estimates what each
  // request of a turn added (docs/protocol.md, "Budgets").
  bool has_cache_usage = false;
  std::string model;  // the model that answered, when reported
};

// Receives deltas while a response streams in, one call at a time: on the
// thread that runs Complete(), or, for CompleteAsync(), on the thread the
// provider streams on (the HTTP providers: the HTTP client's event thread).
// The final ModelResponse is authoritative; deltas are for display only.
struct RetryData;  // event_data.h

class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual void OnTextDelta(std::string_view text) { (void)text; }
  virtual void OnThinkingDelta(std::string_view text) { (void)text; }
  // The request failed with a transient error and is sent again after
  // retry.delay_ms (before the wait starts).
  virtual void OnRetry(const RetryData& retry) { (void)retry; }
};

class ModelProvider {
 public:
  virtual ~ModelProvider() = default;

  // Short kind name for logs and events, e.g. "openai", "anthropic", "script".
  virtual std::string_view name() const = 0;

  // Sends `request` and blocks until the whole response has arrived,
  // reporting deltas to `sink` as they come. Retries transient failures
  // itself (see IsRetryable) before returning an error.
  //
  // Errors: kCancelled when `stop` fired (within 100 ms); kPromptTooLong when
  // the provider rejected the prompt as too long (the engine compacts and
  // retries); kUnavailable / kDeadlineExceeded / kResourceExhausted after
  // retries ran out; kInvalidArgument / kPermissionDenied for 4xx answers;
  // kDataLoss for a malformed or truncated stream; kDeadlineExceeded when
  // request.timeout passed. Nothing partial is returned on error.
  virtual Result<ModelResponse> Complete(const ModelRequest& request, StreamSink& sink,
                                         std::stop_token stop) = 0;

  // What CompleteAsync() reports: exactly once, with what Complete() would
  // have returned.
  using CompletionCallback = std::function<void(Result<ModelResponse>)>;

  // Complete() without blocking: returns at once and calls `done` (exactly
  // once) when the response has arrived or the call failed, with the same
  // results and errors as Complete(). Deltas reach `sink` before `done`, never
  // after it. `request` (and the history it views) and `sink` must stay
  // valid and unchanged until `done` is called. `done` and the sink run on
  // the provider's own thread (the HTTP providers: the HTTP client's event
  // thread), so they must not block.
  //
  // Default, for providers without a native asynchronous path (the scripted
  // provider, an embedder's blocking provider): runs Complete() on the
  // CALLING thread and then calls `done` there, i.e. it blocks. Drivers that
  // must not block ask CompletesAsync() first and call it where blocking is
  // allowed: the asynchronous turn driver (runner.h) runs it as a call on
  // TurnExecutor::PostTool, under the executor's cap on blocking work.
  virtual void CompleteAsync(const ModelRequest& request, StreamSink& sink, std::stop_token stop,
                             CompletionCallback done) {
    done(Complete(request, sink, stop));
  }
  // Whether CompleteAsync() returns without blocking (overridden with it).
  virtual bool CompletesAsync() const { return false; }

  // A hint that Complete() will be called soon: a provider that talks to a
  // server may open its connection now (DNS, TCP, TLS handshake) so the first
  // request does not wait for it. Returns at once; never fails (a failed
  // attempt is dropped and the request reports its own error). Default: no-op.
  virtual void Warm() {}
};

}  // namespace agentloop
