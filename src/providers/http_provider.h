// HttpProvider: the ModelProvider behind the three HTTP wire formats. It
// builds the request body (with the per-message cache), streams the answer
// through the SSE parser into the format's StreamDecoder, classifies
// failures and retries the whole request (retry.h). Nothing partial is
// returned: a failed attempt's content is dropped.
//
// Complete() streams on the calling thread (HttpClient::Fetch) and waits
// between attempts with RetryPolicy::wait. CompleteAsync() builds the body
// on the calling thread, then everything runs on the HTTP client's event
// thread: the stream is decoded and the deltas reported there, the backoff
// between attempts is an Asio timer (HttpClient::Wait), a stop aborts the
// exchange (or the wait) at once, and `done` is called there. No thread
// blocks while the model streams. The body is not kept once it is sent (a
// call in flight holds no copy of it): a retry builds it again, on the
// event thread, from the request (which stays valid until `done`).
//
// Thread-safety: Complete() and CompleteAsync() may run concurrently;
// per-request state lives on the stack or in the call's own state; the
// message cache and the HTTP client are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "agentloop/provider.h"

#include "providers/http_client.h"
#include "providers/message_cache.h"
#include "providers/retry.h"
#include "providers/sse_parser.h"

namespace agentloop {

class StreamHandler;  // one attempt's HTTP handler (http_provider.cc)

// Turns one stream's SSE events into a ModelResponse, reporting deltas to the
// sink. Errors: the classified in-stream error, or kDataLoss naming what was
// malformed or missing.
class StreamDecoder : public SseHandler {
 public:
  // Called at end of stream. `cut_mid_event` is true when the stream ended
  // inside an event.
  virtual Result<ModelResponse> Finish(bool cut_mid_event) = 0;
};

struct WireOptions {
  // Chat Completions: send `max_tokens` instead of `max_completion_tokens`.
  bool use_max_tokens_field = false;
  // OpenAI formats: send the request's cache_key as `prompt_cache_key`
  // (the factory sets it for api.openai.com; other servers may refuse
  // fields they do not know).
  bool prompt_cache_key = false;
  // The model accepts images (LookupModelLimits(model).images, or the
  // configured provider.images): kImage blocks and the images of tool
  // results are sent as the format's image parts. Otherwise each is sent as
  // a line describing it (protocol/image.h's DescribeImage), never dropped.
  bool images = false;
};

// One wire format: request mapping and stream decoding. Stateless.
class WireFormat {
 public:
  virtual ~WireFormat() = default;
  virtual std::string_view name() const = 0;  // "openai", "anthropic", "openai-responses"
  virtual std::string path() const = 0;       // appended to the base URL
  virtual void AddAuthHeaders(const std::string& api_key, HttpHeaders* headers) const = 0;
  // Fragment for one message: zero or more comma-separated JSON values.
  virtual std::string SerializeMessage(const Message& m) const = 0;
  // Fragment for the newest message of a request (the last of history and
  // tail), never cached: a format that marks it (Anthropic's moving cache
  // breakpoint) overrides this. Default: SerializeMessage.
  virtual std::string SerializeNewest(const Message& m) const { return SerializeMessage(m); }
  // Whether SerializeNewest differs from SerializeMessage.
  virtual bool MarksNewest() const { return false; }
  // The body is BodyPrefix + comma-joined message fragments + BodySuffix, so
  // it is assembled in one buffer with one copy of each cached fragment.
  // `*has_item` says whether the prefix already holds a list item (then the
  // first fragment needs a comma).
  virtual std::string BodyPrefix(const ModelRequest& request, const std::string& model,
                                 bool* has_item) const = 0;
  virtual std::string BodySuffix(const ModelRequest& request) const = 0;
  virtual std::unique_ptr<StreamDecoder> NewDecoder(StreamSink& sink) const = 0;
};

std::unique_ptr<WireFormat> NewOpenAiChatFormat(WireOptions options);
std::unique_ptr<WireFormat> NewAnthropicFormat(WireOptions options);
std::unique_ptr<WireFormat> NewOpenAiResponsesFormat(WireOptions options);

struct HttpProviderOptions {
  std::string model;     // used when the request names none
  std::string base_url;  // e.g. "https://api.openai.com/v1"
  std::string api_key;   // never logged
  HttpHeaders extra_headers;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds idle_timeout{120000};
  RetryPolicy retry;
  size_t cache_bytes = 128u << 20;
};

class HttpProvider : public ModelProvider {
 public:
  HttpProvider(std::unique_ptr<WireFormat> format, HttpProviderOptions options,
               std::shared_ptr<HttpClient> client);

  std::string_view name() const override { return format_->name(); }
  Result<ModelResponse> Complete(const ModelRequest& request, StreamSink& sink,
                                 std::stop_token stop) override;
  void CompleteAsync(const ModelRequest& request, StreamSink& sink, std::stop_token stop,
                     CompletionCallback done) override;
  bool CompletesAsync() const override { return true; }
  // Preconnects the client to the endpoint's origin.
  void Warm() override;

  // The request body Complete() would send (uses and fills the cache).
  std::string BuildBody(const ModelRequest& request);
  const MessageCache& cache() const { return cache_; }
  MessageCache& mutable_cache() { return cache_; }
  const WireFormat& format() const { return *format_; }

 private:
  class AsyncCall;
  Result<ModelResponse> Attempt(const std::shared_ptr<const std::string>& body, StreamSink& sink,
                                const std::stop_token& stop, AttemptError* err);
  // The HTTP request of one attempt (its body shared, not copied).
  HttpRequest MakeRequest(std::shared_ptr<const std::string> body) const;
  // The outcome of one attempt from its transport status and what the
  // handler collected.
  Result<ModelResponse> Conclude(const Status& transport, StreamHandler& handler,
                                 StreamDecoder& decoder, const std::stop_token& stop,
                                 AttemptError* err) const;

  std::unique_ptr<WireFormat> format_;
  HttpProviderOptions options_;
  std::shared_ptr<HttpClient> client_;
  MessageCache cache_;
  std::string url_;
};

}  // namespace agentloop
