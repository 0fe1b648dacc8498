#include "providers/http_provider.h"

#include <mutex>
#include <optional>

#include "base/strings.h"

namespace agentloop {

// Feeds a 2xx body through SSE into the decoder; buffers an error body.
class StreamHandler : public HttpStreamHandler {
 public:
  explicit StreamHandler(StreamDecoder& decoder) : decoder_(decoder) {}

  Status OnHead(long status, const HttpHeaders& headers) override {
    status_ = status;
    headers_ = headers;
    return Status::Ok();
  }
  Status OnBody(std::string_view bytes) override {
    if (!ok_status()) {
      if (error_body_.size() < (64u << 10)) error_body_.append(bytes);
      return Status::Ok();
    }
    return parser_.Feed(bytes, decoder_);
  }

  bool ok_status() const { return status_ >= 200 && status_ < 300; }
  long status() const { return status_; }
  const HttpHeaders& headers() const { return headers_; }
  const std::string& error_body() const { return error_body_; }
  SseParser& parser() { return parser_; }

 private:
  StreamDecoder& decoder_;
  SseParser parser_;
  long status_ = 0;
  HttpHeaders headers_;
  std::string error_body_;
};

HttpProvider::HttpProvider(std::unique_ptr<WireFormat> format, HttpProviderOptions options,
                           std::shared_ptr<HttpClient> client)
    : format_(std::move(format)),
      options_(std::move(options)),
      client_(client ? std::move(client) : HttpClient::Create()),
      cache_(options_.cache_bytes) {
  std::string base = options_.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  url_ = base + format_->path();
}

void HttpProvider::Warm() { client_->Preconnect(url_, options_.connect_timeout); }

std::string HttpProvider::BuildBody(const ModelRequest& request) {
  const std::string& model = request.model.empty() ? options_.model : request.model;
  bool comma = false;
  std::string out = format_->BodyPrefix(request, model, &comma);
  std::string suffix = format_->BodySuffix(request);
  MessageCache::Serializer newest;
  if (format_->MarksNewest())
    newest = [this](const Message& m) { return format_->SerializeNewest(m); };
  cache_.AppendMessages(
      request, [this](const Message& m) { return format_->SerializeMessage(m); }, &out, &comma,
      suffix.size(), newest);
  out += suffix;
  return out;
}

HttpRequest HttpProvider::MakeRequest(std::string body) const {
  HttpRequest req;
  req.method = "POST";
  req.url = url_;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  format_->AddAuthHeaders(options_.api_key, &req.headers);
  for (const auto& h : options_.extra_headers) req.headers.push_back(h);
  req.body = std::move(body);
  req.connect_timeout = options_.connect_timeout;
  req.idle_timeout = options_.idle_timeout;
  return req;
}

Result<ModelResponse> HttpProvider::Conclude(const Status& st, StreamHandler& handler,
                                             StreamDecoder& decoder, const std::stop_token& stop,
                                             AttemptError* err) const {
  if (!st.ok()) {
    if (st.code() == Code::kCancelled || stop.stop_requested()) {
      return Cancelled("model call cancelled");
    }
    // Never echo the key, whatever a library put into a message.
    std::string msg = RedactSecrets(st.message());
    if (!options_.api_key.empty()) {
      for (size_t p; (p = msg.find(options_.api_key)) != std::string::npos;) {
        msg.replace(p, options_.api_key.size(), "[REDACTED]");
      }
    }
    return Status(st.code(), std::string(format_->name()) + ": " + msg);
  }
  if (!handler.ok_status()) {
    err->retry_after = ParseRetryAfter(handler.headers());
    Status s = ClassifyHttpStatus(handler.status(), handler.error_body());
    return Status(s.code(), std::string(format_->name()) + ": " + s.message());
  }
  bool cut = handler.parser().Finish();
  Result<ModelResponse> r = decoder.Finish(cut);
  if (!r.ok()) {
    return Status(r.error().code(), std::string(format_->name()) + ": " + r.error().message());
  }
  return r;
}

Result<ModelResponse> HttpProvider::Attempt(const std::string& body, StreamSink& sink,
                                            const std::stop_token& stop, AttemptError* err) {
  std::unique_ptr<StreamDecoder> decoder = format_->NewDecoder(sink);
  StreamHandler handler(*decoder);
  Status st = client_->Fetch(MakeRequest(body), handler, stop);
  return Conclude(st, handler, *decoder, stop, err);
}

Result<ModelResponse> HttpProvider::Complete(const ModelRequest& request, StreamSink& sink,
                                             std::stop_token stop) {
  const std::string body = BuildBody(request);
  return RunWithRetry<ModelResponse>(
      options_.retry, stop, [&](AttemptError* err) { return Attempt(body, sink, stop, err); },
      [&](const RetryData& retry) { sink.OnRetry(retry); });
}

// One CompleteAsync call: attempts, backoff waits and the stop, as the
// retry loop of RunWithRetry, driven by the client's completions. It owns
// itself through the callbacks pending on it (the transfer's `done`, the
// timer's), so it lives exactly as long as the exchange.
class HttpProvider::AsyncCall : public std::enable_shared_from_this<AsyncCall> {
 public:
  AsyncCall(HttpProvider& provider, std::string body, StreamSink& sink, std::stop_token stop,
            CompletionCallback done)
      : provider_(provider),
        body_(std::move(body)),
        sink_(sink),
        stop_(std::move(stop)),
        done_(std::move(done)) {}

  void Start() {
    // A stop cancels the attempt in flight; the transfer then ends with
    // kCancelled (a wait between attempts watches the token itself).
    on_stop_.emplace(stop_, std::function<void()>([weak = weak_from_this()] {
                       if (auto self = weak.lock()) self->CancelTransfer();
                     }));
    Attempt();
  }

 private:
  void Attempt() {
    if (stop_.stop_requested()) return Finish(Cancelled("model call cancelled"));
    ++attempts_;
    decoder_ = provider_.format_->NewDecoder(sink_);
    auto handler = std::make_shared<StreamHandler>(*decoder_);
    handler_ = handler;
    std::shared_ptr<HttpTransfer> transfer = provider_.client_->Start(
        provider_.MakeRequest(body_), std::move(handler),
        [self = shared_from_this()](Status st) { self->OnAttemptDone(st); });
    {
      std::lock_guard lock(mu_);
      transfer_ = transfer;
    }
    // A stop between the check above and the handle being stored found no
    // transfer to cancel.
    if (stop_.stop_requested()) transfer->Cancel();
  }

  void CancelTransfer() {
    std::shared_ptr<HttpTransfer> t;
    {
      std::lock_guard lock(mu_);
      t = transfer_;
    }
    if (t) t->Cancel();
  }

  // On the event thread.
  void OnAttemptDone(const Status& st) {
    {
      std::lock_guard lock(mu_);
      transfer_.reset();
    }
    AttemptError err;
    Result<ModelResponse> r = provider_.Conclude(st, *handler_, *decoder_, stop_, &err);
    handler_.reset();
    decoder_.reset();
    if (r.ok()) return Finish(std::move(r));
    if (stop_.stop_requested()) return Finish(Cancelled("model call cancelled"));
    err.status = r.error();
    RetryStep next = NextRetry(provider_.options_.retry, attempts_, err);
    if (!next.retry) return Finish(std::move(next.final));
    sink_.OnRetry(*next.retry);
    provider_.client_->Wait(std::chrono::milliseconds(next.retry->delay_ms), stop_,
                            [self = shared_from_this()](bool waited) {
                              if (!waited) return self->Finish(Cancelled("model call cancelled"));
                              self->Attempt();
                            });
  }

  void Finish(Result<ModelResponse> r) {
    on_stop_.reset();
    CompletionCallback done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(r));
  }

  HttpProvider& provider_;
  const std::string body_;
  StreamSink& sink_;
  const std::stop_token stop_;
  CompletionCallback done_;
  int attempts_ = 0;
  std::unique_ptr<StreamDecoder> decoder_;
  std::shared_ptr<StreamHandler> handler_;
  std::mutex mu_;
  std::shared_ptr<HttpTransfer> transfer_;  // Guarded by mu_.
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

void HttpProvider::CompleteAsync(const ModelRequest& request, StreamSink& sink,
                                 std::stop_token stop, CompletionCallback done) {
  auto call = std::make_shared<AsyncCall>(*this, BuildBody(request), sink, std::move(stop),
                                          std::move(done));
  call->Start();
}

}  // namespace agentloop
