#include "providers/http_provider.h"

#include "base/strings.h"

namespace agentloop {
namespace {

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
  cache_.AppendMessages(
      request, [this](const Message& m) { return format_->SerializeMessage(m); }, &out, &comma,
      suffix.size());
  out += suffix;
  return out;
}

Result<ModelResponse> HttpProvider::Attempt(const std::string& body, StreamSink& sink,
                                            const std::stop_token& stop, AttemptError* err) {
  HttpRequest req;
  req.method = "POST";
  req.url = url_;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  format_->AddAuthHeaders(options_.api_key, &req.headers);
  for (const auto& h : options_.extra_headers) req.headers.push_back(h);
  req.body = body;
  req.connect_timeout = options_.connect_timeout;
  req.idle_timeout = options_.idle_timeout;

  std::unique_ptr<StreamDecoder> decoder = format_->NewDecoder(sink);
  StreamHandler handler(*decoder);
  Status st = client_->Fetch(std::move(req), handler, stop);
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
  Result<ModelResponse> r = decoder->Finish(cut);
  if (!r.ok()) {
    return Status(r.error().code(), std::string(format_->name()) + ": " + r.error().message());
  }
  return r;
}

Result<ModelResponse> HttpProvider::Complete(const ModelRequest& request, StreamSink& sink,
                                             std::stop_token stop) {
  const std::string body = BuildBody(request);
  return RunWithRetry<ModelResponse>(
      options_.retry, stop, [&](AttemptError* err) { return Attempt(body, sink, stop, err); },
      [&](const RetryData& retry) { sink.OnRetry(retry); });
}

}  // namespace agentloop
