#include "fake_model_server.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "base/strings.h"
#include "providers/retry.h"

namespace agentloop::testing {
namespace {

std::string Event(std::string_view name, const Json& data) {
  std::string out;
  if (!name.empty()) out += "event: " + std::string(name) + "\n";
  out += "data: " + DumpJson(data) + "\n\n";
  return out;
}

// Splits `s` into up to `n` pieces (UTF-8 safe).
std::vector<std::string> Pieces(const std::string& s, size_t n) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t step = std::max<size_t>(1, s.size() / n + (s.size() % n ? 1 : 0));
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = std::min(s.size(), pos + step);
    while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
    out.push_back(s.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

std::string Args(const ContentBlock& b) {
  if (!b.raw_input.empty()) return b.raw_input;
  return DumpJson(b.input.is_null() ? Json::object() : b.input);
}

const Json* StreamError(const ScriptItem& item) {
  auto it = item.raw.find("stream_error");
  return it != item.raw.end() && it->is_object() ? &*it : nullptr;
}
bool Truncate(const ScriptItem& item) { return item.raw.value("truncate", false); }
std::string Model(const ScriptItem& item) {
  return item.response.model.empty() ? "fake-model" : item.response.model;
}

std::vector<std::string> RenderChat(const ScriptItem& item) {
  const ModelResponse& r = item.response;
  std::vector<std::string> ev;
  auto chunk = [&](Json delta, Json finish) {
    return Json{{"id", "chatcmpl-1"},
                {"object", "chat.completion.chunk"},
                {"model", Model(item)},
                {"choices", Json::array({Json{{"index", 0},
                                              {"delta", std::move(delta)},
                                              {"finish_reason", std::move(finish)}}})}};
  };
  ev.push_back(Event("", chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr)));
  int index = 0;
  bool tools = false;
  for (const ContentBlock& b : r.content) {
    if (b.type == BlockType::kThinking) {
      for (auto& p : Pieces(b.text, 2))
        ev.push_back(Event("", chunk(Json{{"reasoning_content", p}}, nullptr)));
    } else if (b.type == BlockType::kText) {
      for (auto& p : Pieces(b.text, 3))
        ev.push_back(Event("", chunk(Json{{"content", p}}, nullptr)));
    } else if (b.type == BlockType::kToolUse) {
      tools = true;
      Json first{{"index", index},
                 {"id", b.id},
                 {"type", "function"},
                 {"function", {{"name", b.name}, {"arguments", ""}}}};
      ev.push_back(Event("", chunk(Json{{"tool_calls", Json::array({first})}}, nullptr)));
      for (auto& p : Pieces(Args(b), 2)) {
        Json d{{"index", index}, {"function", {{"arguments", p}}}};
        ev.push_back(Event("", chunk(Json{{"tool_calls", Json::array({d})}}, nullptr)));
      }
      ++index;
    }
  }
  if (const Json* e = StreamError(item)) {
    ev.push_back(Event("", Json{{"error",
                                 {{"message", e->value("message", "error")},
                                  {"type", e->value("type", "server_error")},
                                  {"code", e->value("type", "server_error")}}}}));
  }
  if (Truncate(item)) return ev;
  const char* fin = r.finish == FinishReason::kLength               ? "length"
                    : r.finish == FinishReason::kRefused            ? "content_filter"
                    : (r.finish == FinishReason::kToolUse || tools) ? "tool_calls"
                                                                    : "stop";
  ev.push_back(Event("", chunk(Json::object(), fin)));
  if (r.has_usage) {
    const Usage& u = r.usage;
    Json usage{{"prompt_tokens", u.input_tokens + u.cache_read_tokens},
               {"completion_tokens", u.output_tokens},
               {"total_tokens", u.input_tokens + u.cache_read_tokens + u.output_tokens},
               {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
    // Cache figures only when the script gives them (a local server reports none).
    if (r.has_cache_usage)
      usage["prompt_tokens_details"] = {{"cached_tokens", u.cache_read_tokens}};
    ev.push_back(Event("", Json{{"id", "chatcmpl-1"},
                                {"object", "chat.completion.chunk"},
                                {"model", Model(item)},
                                {"choices", Json::array()},
                                {"usage", usage}}));
  }
  ev.push_back("data: [DONE]\n\n");
  return ev;
}

std::vector<std::string> RenderAnthropic(const ScriptItem& item) {
  const ModelResponse& r = item.response;
  std::vector<std::string> ev;
  Json msg{{"id", "msg_1"},        {"type", "message"},        {"role", "assistant"},
           {"model", Model(item)}, {"content", Json::array()}, {"stop_reason", nullptr}};
  if (r.has_usage) {
    msg["usage"] = {{"input_tokens", r.usage.input_tokens}, {"output_tokens", 1}};
    if (r.has_cache_usage) {
      msg["usage"]["cache_read_input_tokens"] = r.usage.cache_read_tokens;
      msg["usage"]["cache_creation_input_tokens"] = r.usage.cache_write_tokens;
    }
  }
  ev.push_back(Event("message_start", Json{{"type", "message_start"}, {"message", msg}}));
  ev.push_back(Event("ping", Json{{"type", "ping"}}));
  int index = 0;
  bool tools = false;
  for (const ContentBlock& b : r.content) {
    auto start = [&](Json cb) {
      ev.push_back(Event("content_block_start", Json{{"type", "content_block_start"},
                                                     {"index", index},
                                                     {"content_block", std::move(cb)}}));
    };
    auto delta = [&](Json d) {
      ev.push_back(
          Event("content_block_delta",
                Json{{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(d)}}));
    };
    if (b.type == BlockType::kThinking) {
      start(Json{{"type", "thinking"}, {"thinking", ""}});
      for (auto& p : Pieces(b.text, 2)) delta(Json{{"type", "thinking_delta"}, {"thinking", p}});
      delta(Json{{"type", "signature_delta"}, {"signature", b.signature}});
    } else if (b.type == BlockType::kText) {
      start(Json{{"type", "text"}, {"text", ""}});
      for (auto& p : Pieces(b.text, 3)) delta(Json{{"type", "text_delta"}, {"text", p}});
    } else if (b.type == BlockType::kToolUse) {
      tools = true;
      start(Json{{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", Json::object()}});
      for (auto& p : Pieces(Args(b), 3))
        delta(Json{{"type", "input_json_delta"}, {"partial_json", p}});
    } else {
      continue;
    }
    ev.push_back(
        Event("content_block_stop", Json{{"type", "content_block_stop"}, {"index", index}}));
    ++index;
  }
  if (const Json* e = StreamError(item)) {
    ev.push_back(Event("error", Json{{"type", "error"},
                                     {"error",
                                      {{"type", e->value("type", "overloaded_error")},
                                       {"message", e->value("message", "Overloaded")}}}}));
  }
  if (Truncate(item)) return ev;
  const char* stop = r.finish == FinishReason::kLength               ? "max_tokens"
                     : r.finish == FinishReason::kRefused            ? "refusal"
                     : (r.finish == FinishReason::kToolUse || tools) ? "tool_use"
                                                                     : "end_turn";
  Json md{{"type", "message_delta"},
          {"delta", {{"stop_reason", stop}, {"stop_sequence", nullptr}}}};
  if (r.has_usage) md["usage"] = {{"output_tokens", r.usage.output_tokens}};
  ev.push_back(Event("message_delta", md));
  ev.push_back(Event("message_stop", Json{{"type", "message_stop"}}));
  return ev;
}

std::vector<std::string> RenderResponses(const ScriptItem& item) {
  const ModelResponse& r = item.response;
  std::vector<std::string> ev;
  auto add = [&](const std::string& type, Json j) {
    j["type"] = type;
    Json ordered{{"type", type}};
    for (auto& [k, v] : j.items()) {
      if (k != "type") ordered[k] = v;
    }
    ev.push_back(Event(type, ordered));
  };
  add("response.created", Json{{"response", {{"id", "resp_1"}, {"status", "in_progress"}}}});
  int index = 0, fc = 0, rs = 0;
  for (const ContentBlock& b : r.content) {
    if (b.type == BlockType::kThinking) {
      std::string id = "rs_" + std::to_string(++rs);
      add("response.output_item.added",
          Json{{"output_index", index},
               {"item", {{"type", "reasoning"}, {"id", id}, {"summary", Json::array()}}}});
      for (auto& p : Pieces(b.text, 2)) {
        add("response.reasoning_summary_text.delta",
            Json{{"item_id", id}, {"output_index", index}, {"summary_index", 0}, {"delta", p}});
      }
      Json summary = Json::array();
      if (!b.text.empty()) summary.push_back(Json{{"type", "summary_text"}, {"text", b.text}});
      add("response.output_item.done", Json{{"output_index", index},
                                            {"item",
                                             {{"type", "reasoning"},
                                              {"id", id},
                                              {"summary", summary},
                                              {"encrypted_content", b.signature}}}});
    } else if (b.type == BlockType::kText) {
      add("response.output_item.added", Json{{"output_index", index},
                                             {"item",
                                              {{"type", "message"},
                                               {"id", "msg_1"},
                                               {"role", "assistant"},
                                               {"content", Json::array()}}}});
      for (auto& p : Pieces(b.text, 3)) {
        add("response.output_text.delta",
            Json{
                {"item_id", "msg_1"}, {"output_index", index}, {"content_index", 0}, {"delta", p}});
      }
      add("response.output_item.done",
          Json{{"output_index", index},
               {"item",
                {{"type", "message"},
                 {"id", "msg_1"},
                 {"role", "assistant"},
                 {"content", Json::array({Json{{"type", "output_text"}, {"text", b.text}}})}}}});
    } else if (b.type == BlockType::kToolUse) {
      std::string id = "fc_" + std::to_string(++fc);
      add("response.output_item.added", Json{{"output_index", index},
                                             {"item",
                                              {{"type", "function_call"},
                                               {"id", id},
                                               {"call_id", b.id},
                                               {"name", b.name},
                                               {"arguments", ""}}}});
      for (auto& p : Pieces(Args(b), 2)) {
        add("response.function_call_arguments.delta",
            Json{{"item_id", id}, {"output_index", index}, {"delta", p}});
      }
      add("response.output_item.done", Json{{"output_index", index},
                                            {"item",
                                             {{"type", "function_call"},
                                              {"id", id},
                                              {"call_id", b.id},
                                              {"name", b.name},
                                              {"arguments", Args(b)}}}});
    } else {
      continue;
    }
    ++index;
  }
  if (const Json* e = StreamError(item)) {
    add("response.failed", Json{{"response",
                                 {{"id", "resp_1"},
                                  {"status", "failed"},
                                  {"error",
                                   {{"code", e->value("type", "server_error")},
                                    {"message", e->value("message", "failed")}}}}}});
  }
  if (Truncate(item)) return ev;
  Json resp{{"id", "resp_1"}, {"status", "completed"}, {"model", Model(item)}};
  if (r.has_usage) {
    const Usage& u = r.usage;
    resp["usage"] = {{"input_tokens", u.input_tokens + u.cache_read_tokens},
                     {"output_tokens", u.output_tokens},
                     {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
    if (r.has_cache_usage) {
      resp["usage"]["input_tokens_details"] = {{"cached_tokens", u.cache_read_tokens}};
    }
  }
  if (r.finish == FinishReason::kLength || r.finish == FinishReason::kRefused) {
    resp["status"] = "incomplete";
    resp["incomplete_details"] = {
        {"reason", r.finish == FinishReason::kLength ? "max_output_tokens" : "content_filter"}};
    add("response.incomplete", Json{{"response", resp}});
  } else {
    add("response.completed", Json{{"response", resp}});
  }
  return ev;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

const char* Reason(long status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

Result<std::vector<std::string>> RenderStream(const ScriptItem& item, std::string_view path) {
  if (EndsWith(path, "/chat/completions")) return RenderChat(item);
  if (EndsWith(path, "/messages")) return RenderAnthropic(item);
  if (EndsWith(path, "/responses")) return RenderResponses(item);
  return InvalidArgument("fake server: unknown path " + std::string(path));
}

Result<std::unique_ptr<FakeModelServer>> FakeModelServer::Start(const Json& script,
                                                                Options options) {
  AL_ASSIGN_OR_RETURN(std::vector<ScriptItem> items, ParseScript(script));
  std::unique_ptr<FakeModelServer> s(new FakeModelServer());
  s->options_ = std::move(options);
  s->items_ = std::move(items);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal("fake server: socket failed");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(s->options_.port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
    ::close(fd);
    return Unavailable(std::string("fake server: bind/listen failed: ") + std::strerror(errno));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s->listen_fd_ = fd;
  s->port_ = ntohs(addr.sin_port);
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

FakeModelServer::~FakeModelServer() { Stop(); }

void FakeModelServer::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  {
    std::lock_guard lock(mu_);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(conn_threads_);
  }
  for (auto& t : threads) t.join();
}

void FakeModelServer::AcceptLoop() {
  while (!stopping_.load()) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_.load()) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connections_.fetch_add(1);
    std::lock_guard lock(mu_);
    if (stopping_.load()) {
      ::close(fd);
      return;
    }
    conn_fds_.push_back(fd);
    conn_threads_.emplace_back([this, fd] { Serve(fd); });
    cv_.notify_all();
  }
}

bool FakeModelServer::Sleep(int ms) {
  if (ms <= 0) return !stopping_.load();
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_.load(); });
  return !stopping_.load();
}

void FakeModelServer::Serve(int fd) {
  std::string buf;
  char tmp[65536];
  bool open = true;
  while (open && !stopping_.load()) {
    size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
      if (n <= 0) {
        open = false;
        break;
      }
      buf.append(tmp, static_cast<size_t>(n));
    }
    if (!open) break;
    RecordedHttpRequest req;
    std::string_view head(buf.data(), head_end);
    size_t line_end = head.find("\r\n");
    std::string_view request_line = head.substr(0, line_end);
    std::vector<std::string_view> parts = Split(request_line, ' ');
    if (parts.size() >= 2) {
      req.method = std::string(parts[0]);
      req.path = std::string(parts[1]);
    }
    size_t content_length = 0;
    bool keep_alive = true;
    if (line_end != std::string_view::npos) {
      for (std::string_view line : Split(head.substr(line_end + 2), '\n')) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string name(Trim(line.substr(0, colon)));
        std::string value(Trim(line.substr(colon + 1)));
        std::string lname = ToLower(name);
        if (lname == "content-length") content_length = std::stoul(value);
        if (lname == "connection" && ToLower(value) == "close") keep_alive = false;
        if (lname == "expect" && ToLower(value) == "100-continue") {
          SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n");
        }
        req.headers.emplace_back(std::move(name), std::move(value));
      }
    }
    buf.erase(0, head_end + 4);
    while (buf.size() < content_length) {
      ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
      if (n <= 0) {
        open = false;
        break;
      }
      buf.append(tmp, static_cast<size_t>(n));
    }
    if (!open) break;
    req.body = buf.substr(0, content_length);
    buf.erase(0, content_length);
    open = Respond(fd, req) && keep_alive;
  }
  {
    std::lock_guard lock(mu_);
    conn_fds_.erase(std::remove(conn_fds_.begin(), conn_fds_.end(), fd), conn_fds_.end());
  }
  ::close(fd);
}

bool FakeModelServer::Respond(int fd, const RecordedHttpRequest& req) {
  // The output cap the request asks for, and whether it asks for a summary.
  int64_t input_tokens = static_cast<int64_t>(req.body.size() + 3) / 4;
  int64_t max_output = 0;
  bool summary_request = false;
  if (options_.context_window > 0 || options_.auto_summary) {
    Result<Json> body = ParseJson(req.body);
    if (body.ok() && body->is_object()) {
      for (const char* key : {"max_tokens", "max_completion_tokens", "max_output_tokens"}) {
        if (auto it = body->find(key); it != body->end() && it->is_number_integer()) {
          max_output = it->get<int64_t>();
        }
      }
    }
    summary_request =
        options_.auto_summary &&
        req.body.find("Summarize the conversation above so that") != std::string::npos;
  }
  const bool too_long =
      options_.context_window > 0 && input_tokens + max_output > options_.context_window;
  std::optional<ScriptItem> item;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(req);
    if (!too_long && !summary_request) {
      if (used_.size() != items_.size()) used_.assign(items_.size(), false);
      for (size_t i = next_; i < items_.size(); ++i) {
        if (used_[i]) continue;
        if (!items_[i].match.empty() && req.body.find(items_[i].match) == std::string::npos) {
          continue;
        }
        used_[i] = true;
        item = items_[i];
        break;
      }
      while (next_ < items_.size() && used_[next_]) ++next_;
    }
  }
  cv_.notify_all();
  if (options_.on_request) options_.on_request(req);
  if (too_long) {
    // The bodies and statuses the real APIs answer with.
    ++rejections_;
    const std::string w = std::to_string(options_.context_window);
    const std::string in = std::to_string(input_tokens);
    const std::string out = std::to_string(max_output);
    std::string body;
    if (req.path.ends_with("/messages")) {
      body =
          DumpJson(Json{{"type", "error"},
                        {"error",
                         {{"type", "invalid_request_error"},
                          {"message", "input length and `max_tokens` exceed context limit: " + in +
                                          " + " + out + " > " + w +
                                          ", decrease input length or `max_tokens` and try "
                                          "again"}}}});
    } else if (req.path.ends_with("/responses")) {
      body = DumpJson(
          Json{{"error",
                {{"message",
                  "Your input exceeds the context window of this model. Please adjust your input "
                  "and try again."},
                 {"type", "invalid_request_error"},
                 {"param", "input"},
                 {"code", "context_length_exceeded"}}}});
    } else {
      body = DumpJson(
          Json{{"error",
                {{"message", "This model's maximum context length is " + w +
                                 " tokens. However, you requested " +
                                 std::to_string(input_tokens + max_output) + " tokens (" + in +
                                 " in the messages, " + out +
                                 " in the completion). Please reduce the length of the messages or "
                                 "completion."},
                 {"type", "invalid_request_error"},
                 {"param", "messages"},
                 {"code", "context_length_exceeded"}}}});
    }
    std::string resp =
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    return SendAll(fd, resp);
  }
  if (summary_request) {
    ++summaries_;
    if (!Sleep(options_.summary_delay_ms)) return false;
    Result<ScriptItem> s = ParseScriptItem(
        Json{{"text",
              "1. Goals: the user's task. 2. Decisions: none. 3. Files: read so far. "
              "4. Commands: none. 5. Open todos: continue. 6. Last request: as asked."},
             {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 40}}}},
        0);
    if (s.ok()) item = std::move(*s);
  } else if (item && options_.context_window > 0 && item->response.has_usage) {
    // The model counts what it was sent.
    item->response.usage.input_tokens = input_tokens;
    if (auto u = item->raw.find("usage"); u != item->raw.end() && u->is_object()) {
      (*u)["input_tokens"] = input_tokens;
    }
  }

  auto plain = [&](long status, const std::string& body, const HttpHeaders& extra) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
    out +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [k, v] : extra) out += k + ": " + v + "\r\n";
    out += "\r\n" + body;
    return SendAll(fd, out);
  };
  auto error_body = [](const std::string& type, const std::string& message) {
    return DumpJson(Json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
  };
  if (!item)
    return plain(400, error_body("invalid_request_error", "fake server: script exhausted"), {});
  if (!Sleep(item->delay_ms)) return false;

  const Json& raw = item->raw;
  HttpHeaders extra;
  if (auto h = raw.find("headers"); h != raw.end() && h->is_object()) {
    for (auto& [k, v] : h->items())
      extra.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  }
  if (item->error) {
    long status = 500;
    std::string type = "api_error";
    switch (item->error->code()) {
      case Code::kUnavailable:
        status = 503;
        type = "overloaded_error";
        break;
      case Code::kResourceExhausted:
        status = 429;
        type = "rate_limit_error";
        break;
      case Code::kPromptTooLong:
        status = 400;
        type = "invalid_request_error";
        break;
      case Code::kPermissionDenied:
        status = 401;
        type = "authentication_error";
        break;
      case Code::kInvalidArgument:
        status = 400;
        type = "invalid_request_error";
        break;
      case Code::kDeadlineExceeded:
        status = 408;
        type = "timeout_error";
        break;
      default:
        break;
    }
    std::string msg = item->error->message();
    if (item->error->code() == Code::kPromptTooLong && !LooksLikePromptTooLong("", msg)) {
      msg = "prompt is too long: " + msg;
    }
    return plain(status, error_body(type, msg), extra);
  }
  if (auto st = raw.find("http_status"); st != raw.end() && st->is_number_integer()) {
    std::string body;
    if (auto b = raw.find("body"); b != raw.end())
      body = b->is_string() ? b->get<std::string>() : DumpJson(*b);
    return plain(st->get<long>(), body, extra);
  }

  std::vector<std::string> writes;
  if (auto r = raw.find("raw_sse"); r != raw.end() && r->is_string()) {
    writes.push_back(r->get<std::string>());
  } else {
    Result<std::vector<std::string>> ev = RenderStream(*item, req.path);
    if (!ev.ok()) return plain(404, error_body("not_found_error", ev.error().message()), {});
    writes = std::move(*ev);
  }
  size_t chunk = raw.value("chunk_size", 0);
  if (chunk > 0) {
    std::string all;
    for (auto& w : writes) all += w;
    writes.clear();
    for (size_t p = 0; p < all.size(); p += chunk) writes.push_back(all.substr(p, chunk));
  }
  int latency = raw.value("latency_ms", 0);
  long drop_after = raw.value("drop_after_bytes", -1L);

  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n";
  for (const auto& [k, v] : extra) head += k + ": " + v + "\r\n";
  head += "Transfer-Encoding: chunked\r\n\r\n";
  if (!SendAll(fd, head)) return false;
  long sent = 0;
  for (size_t i = 0; i < writes.size(); ++i) {
    std::string_view w = writes[i];
    if (drop_after >= 0 && sent + static_cast<long>(w.size()) > drop_after) {
      w = w.substr(0, static_cast<size_t>(drop_after - sent));
      if (!w.empty()) {
        char hex[32];
        std::snprintf(hex, sizeof(hex), "%zx\r\n", w.size());
        SendAll(fd, std::string(hex) + std::string(w) + "\r\n");
      }
      return false;  // drop the connection without the terminating chunk
    }
    if (i > 0 && !Sleep(latency)) return false;
    char hex[32];
    std::snprintf(hex, sizeof(hex), "%zx\r\n", w.size());
    if (!SendAll(fd, std::string(hex) + std::string(w) + "\r\n")) return false;
    sent += static_cast<long>(w.size());
  }
  return SendAll(fd, "0\r\n\r\n");
}

std::vector<RecordedHttpRequest> FakeModelServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

bool FakeModelServer::WaitForRequests(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
}

bool FakeModelServer::WaitForConnections(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return connections_.load() >= n; });
}

Status FakeModelServer::Append(const Json& items) {
  AL_ASSIGN_OR_RETURN(std::vector<ScriptItem> parsed, ParseScript(items));
  std::lock_guard lock(mu_);
  for (auto& i : parsed) items_.push_back(std::move(i));
  return Status::Ok();
}

}  // namespace agentloop::testing
