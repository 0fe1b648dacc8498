#include "providers/http_provider.h"

#include <atomic>
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

namespace {

// A call's own deadline (ModelRequest::timeout): the call watches `token()`,
// which stops when the caller's token does or when a timer on the client's
// event thread expires. Disarm() ends the timer once the call is over.
class CallDeadline {
 public:
  static std::shared_ptr<CallDeadline> Arm(HttpClient& client, std::chrono::milliseconds timeout,
                                           const std::stop_token& outer) {
    auto d = std::make_shared<CallDeadline>(outer, timeout);
    client.Wait(timeout, d->source_.get_token(), [d](bool waited) {
      if (!waited) return;
      d->expired_.store(true);
      d->source_.request_stop();
    });
    return d;
  }

  CallDeadline(const std::stop_token& outer, std::chrono::milliseconds timeout)
      : outer_(outer),
        timeout_(timeout),
        forward_(outer, std::function<void()>([this] { source_.request_stop(); })) {}

  std::stop_token token() const { return source_.get_token(); }
  void Disarm() { source_.request_stop(); }

  // `r` with the deadline's verdict: a call cut off by the deadline (not
  // by the caller) is kDeadlineExceeded.
  Result<ModelResponse> Verdict(Result<ModelResponse> r, std::string_view format) const {
    if (r.ok() || !expired_.load() || outer_.stop_requested()) return r;
    if (r.error().code() != Code::kCancelled) return r;
    return DeadlineExceeded(std::string(format) + ": no answer within " +
                            std::to_string(timeout_.count()) + " ms (the request's timeout)");
  }

 private:
  std::stop_source source_;
  std::atomic<bool> expired_{false};
  const std::stop_token outer_;
  const std::chrono::milliseconds timeout_;
  std::stop_callback<std::function<void()>> forward_;  // after source_: destroyed first
};

// The retry policy of one request: the provider's, with at most
// request.max_attempts attempts when it is set.
RetryPolicy RequestPolicy(const RetryPolicy& base, const ModelRequest& request) {
  RetryPolicy p = base;
  if (request.max_attempts > 0) p.max_attempts = std::min(p.max_attempts, request.max_attempts);
  return p;
}

}  // namespace

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

HttpRequest HttpProvider::MakeRequest(std::shared_ptr<const std::string> body) const {
  HttpRequest req;
  req.method = "POST";
  req.url = url_;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  format_->AddAuthHeaders(options_.api_key, &req.headers);
  for (const auto& h : options_.extra_headers) req.headers.push_back(h);
  req.shared_body = std::move(body);
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

Result<ModelResponse> HttpProvider::Attempt(const std::shared_ptr<const std::string>& body,
                                            StreamSink& sink, const std::stop_token& stop,
                                            AttemptError* err) {
  std::unique_ptr<StreamDecoder> decoder = format_->NewDecoder(sink);
  StreamHandler handler(*decoder);
  Status st = client_->Fetch(MakeRequest(body), handler, stop);
  return Conclude(st, handler, *decoder, stop, err);
}

Result<ModelResponse> HttpProvider::Complete(const ModelRequest& request, StreamSink& sink,
                                             std::stop_token stop) {
  const auto body = std::make_shared<const std::string>(BuildBody(request));
  const RetryPolicy policy = RequestPolicy(options_.retry, request);
  std::shared_ptr<CallDeadline> deadline;
  if (request.timeout.count() > 0) deadline = CallDeadline::Arm(*client_, request.timeout, stop);
  const std::stop_token watched = deadline ? deadline->token() : stop;
  Result<ModelResponse> r = RunWithRetry<ModelResponse>(
      policy, watched, [&](AttemptError* err) { return Attempt(body, sink, watched, err); },
      [&](const RetryData& retry) { sink.OnRetry(retry); });
  if (!deadline) return r;
  deadline->Disarm();
  return deadline->Verdict(std::move(r), format_->name());
}

// One CompleteAsync call: attempts, backoff waits and the stop, as the
// retry loop of RunWithRetry, driven by the client's completions. It owns
// itself through the callbacks pending on it (the transfer's `done`, the
// timer's), so it lives exactly as long as the exchange.
class HttpProvider::AsyncCall : public std::enable_shared_from_this<AsyncCall> {
 public:
  AsyncCall(HttpProvider& provider, const ModelRequest& request,
            std::shared_ptr<const std::string> body, StreamSink& sink, std::stop_token stop,
            RetryPolicy policy, std::shared_ptr<CallDeadline> deadline, CompletionCallback done)
      : provider_(provider),
        request_(request),
        first_body_(std::move(body)),
        sink_(sink),
        stop_(deadline ? deadline->token() : std::move(stop)),
        policy_(std::move(policy)),
        deadline_(std::move(deadline)),
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
    HttpRequest request = provider_.MakeRequest(TakeBody());
    // A retry of the client's own (a reused connection the server closed)
    // builds the body again too, so the transfer drops it once written.
    request.body_source = [weak = weak_from_this()]() -> std::shared_ptr<const std::string> {
      auto self = weak.lock();
      return self ? self->TakeBody() : nullptr;
    };
    std::shared_ptr<HttpTransfer> transfer = provider_.client_->Start(
        std::move(request), std::move(handler),
        [self = shared_from_this()](Status st) { self->OnAttemptDone(st); });
    {
      std::lock_guard lock(mu_);
      transfer_ = transfer;
    }
    // A stop between the check above and the handle being stored found no
    // transfer to cancel.
    if (stop_.stop_requested()) transfer->Cancel();
  }

  // The body of this attempt (or of the client's retry of it). The call
  // keeps none: the transfer holds the body until it is written, so a call
  // waiting on the model holds no copy, and a retry builds it again from
  // the request (the message cache makes that cheap, and the bytes are the
  // same).
  std::shared_ptr<const std::string> TakeBody() {
    if (first_body_) return std::move(first_body_);
    return std::make_shared<const std::string>(provider_.BuildBody(request_));
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
    RetryStep next = NextRetry(policy_, attempts_, err);
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
    if (deadline_) {
      deadline_->Disarm();
      r = deadline_->Verdict(std::move(r), provider_.format_->name());
    }
    CompletionCallback done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(r));
  }

  HttpProvider& provider_;
  // Valid and unchanged until done_ is called (CompleteAsync's contract).
  const ModelRequest& request_;
  // The first attempt's body, built by CompleteAsync; handed to the
  // transfer.
  std::shared_ptr<const std::string> first_body_;
  StreamSink& sink_;
  const std::stop_token stop_;  // the deadline's token when there is one
  const RetryPolicy policy_;
  const std::shared_ptr<CallDeadline> deadline_;
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
  std::shared_ptr<CallDeadline> deadline;
  if (request.timeout.count() > 0) deadline = CallDeadline::Arm(*client_, request.timeout, stop);
  auto call = std::make_shared<AsyncCall>(
      *this, request, std::make_shared<const std::string>(BuildBody(request)), sink,
      std::move(stop), RequestPolicy(options_.retry, request), std::move(deadline),
      std::move(done));
  call->Start();
}

}  // namespace agentloop
