// FakeModelServer: a real HTTP/1.1 server on 127.0.0.1 (ephemeral port) that
// replays a script in the wire format chosen by the request path:
// /chat/completions (OpenAI Chat), /v1/messages (Anthropic), /responses
// (OpenAI Responses). Items are served in order across all connections and
// every request (method, path, headers, body) is recorded.
//
// The script format is the ScriptedProvider's (providers/script.h), plus keys
// only the server understands (docs/providers.md):
//   "http_status": N, "body": <string|json>, "headers": {"retry-after": "1"}
//       answer with this status and body instead of a stream
//   "chunk_size": N      split the stream into writes of N bytes (default: one
//                        write per event)
//   "latency_ms": N      wait between writes; "delay_ms": N before the head
//   "drop_after_bytes": N close the connection after N body bytes
//   "stream_error": {"type": "overloaded_error", "message": "..."}
//                        an in-stream error after the content
//   "truncate": true     end the body without the terminal event(s)
//   "raw_sse": "..."     send this body verbatim
//   "match": "TEXT"      serve this item only to a request whose body holds TEXT
//                        (requests take the first unused item they match)
// Error items ({"error": {...}}) become HTTP errors: unavailable 503,
// resource_exhausted 429, prompt_too_long 400 "prompt is too long",
// permission_denied 401, invalid_argument 400, deadline_exceeded 408,
// other 500.
//
// Thread-safety: all methods are thread-safe. One thread per connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/status.h"

#include "providers/http_client.h"
#include "providers/script.h"

namespace agentloop::testing {

struct RecordedHttpRequest {
  std::string method;
  std::string path;
  HttpHeaders headers;
  std::string body;
};

// Renders one script item as the SSE body of `path`'s wire format, as a list
// of events (each a complete "event:/data:" block ending in a blank line).
// Errors: kInvalidArgument for an unknown path.
Result<std::vector<std::string>> RenderStream(const ScriptItem& item, std::string_view path);

class FakeModelServer {
 public:
  struct Options {
    int port = 0;
    // Called (on a connection thread) for each request as it is recorded.
    std::function<void(const RecordedHttpRequest&)> on_request;
    // A model with this context window (0: unlimited): a request whose
    // tokens (body bytes / 4) plus its output cap exceed it is rejected with
    // HTTP 400 and the wire format's real error body (no item consumed);
    // an accepted request's usage reports input_tokens = body bytes / 4.
    int64_t context_window = 0;
    // A request asking for a compaction summary (its body holds the
    // engine's summary instruction) is answered with a fixed summary text
    // without consuming an item.
    bool auto_summary = false;
    // A wait before answering a summary request (cancelled by Stop).
    int summary_delay_ms = 0;
  };

  // Parses the script and starts listening.
  static Result<std::unique_ptr<FakeModelServer>> Start(const Json& script, Options options);
  static Result<std::unique_ptr<FakeModelServer>> Start(const Json& script) {
    return Start(script, Options());
  }
  ~FakeModelServer();

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<RecordedHttpRequest> requests() const;
  // Requests rejected for exceeding the context window, and summary
  // requests answered (Options).
  size_t rejections() const { return rejections_.load(); }
  size_t summaries() const { return summaries_.load(); }
  // Waits until at least `n` requests were recorded; false on timeout.
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;
  size_t connections_accepted() const { return connections_.load(); }
  // Waits until at least `n` connections were accepted; false on timeout.
  bool WaitForConnections(size_t n, std::chrono::milliseconds timeout) const;
  // Appends items to the script.
  Status Append(const Json& items);
  void Stop();

 private:
  FakeModelServer() = default;
  void AcceptLoop();
  void Serve(int fd);
  // Returns false when the connection must close.
  bool Respond(int fd, const RecordedHttpRequest& req);
  bool Sleep(int ms);

  Options options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> connections_{0};
  std::atomic<size_t> rejections_{0};
  std::atomic<size_t> summaries_{0};

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<ScriptItem> items_;
  size_t next_ = 0;         // the first item not yet served
  std::vector<bool> used_;  // by item ("match" items may be served out of order)
  std::vector<RecordedHttpRequest> requests_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> conn_threads_;
};

}  // namespace agentloop::testing
