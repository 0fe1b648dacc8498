#include "acp/jsonrpc.h"

#include <utility>

namespace agentloop::acp {
namespace {

bool ValidId(const Json& id) { return id.is_string() || id.is_number_integer(); }

Json ErrorReply(const Json& id, int code, std::string_view message) {
  return MakeError(id, code, message);
}

}  // namespace

ParsedLine ParseLine(std::string_view line) {
  ParsedLine out;
  if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return out;
  Result<Json> parsed = ParseJson(line);
  if (!parsed.ok()) {
    out.error_reply = ErrorReply(nullptr, kParseError,
                                 "parse error: the line is not JSON: " + parsed.error().message());
    return out;
  }
  const Json& j = *parsed;
  if (j.is_array()) {
    out.error_reply = ErrorReply(nullptr, kInvalidRequest,
                                 "invalid request: batches are not supported; send one message "
                                 "per line");
    return out;
  }
  if (!j.is_object()) {
    out.error_reply =
        ErrorReply(nullptr, kInvalidRequest, "invalid request: a message must be a JSON object");
    return out;
  }
  // The id, when there is a usable one, goes back with any error.
  Json id = nullptr;
  auto id_it = j.find("id");
  const bool has_id = id_it != j.end();
  if (has_id && ValidId(*id_it)) id = *id_it;
  auto invalid = [&](std::string why) {
    out.error_reply = ErrorReply(id, kInvalidRequest, "invalid request: " + why);
    return out;
  };
  auto version = j.find("jsonrpc");
  if (version == j.end() || !version->is_string() || version->get<std::string>() != "2.0") {
    return invalid("\"jsonrpc\" must be \"2.0\"");
  }
  if (has_id && !ValidId(*id_it)) return invalid("\"id\" must be a string or an integer");
  auto method = j.find("method");
  if (method != j.end()) {
    if (!method->is_string() || method->get<std::string>().empty()) {
      return invalid("\"method\" must be a non-empty string");
    }
    Incoming m;
    m.kind = has_id ? Incoming::Kind::kRequest : Incoming::Kind::kNotification;
    m.id = id;
    m.method = method->get<std::string>();
    auto params = j.find("params");
    if (params != j.end()) {
      if (!params->is_object() && !params->is_array() && !params->is_null()) {
        return invalid("\"params\" must be an object or an array");
      }
      m.params = *params;
    }
    out.message = std::move(m);
    return out;
  }
  // A response: an id and exactly one of result and error.
  auto result = j.find("result");
  auto error = j.find("error");
  if (!has_id) return invalid("a message needs a \"method\" (request) or an \"id\" (response)");
  if ((result == j.end()) == (error == j.end())) {
    return invalid("a response needs exactly one of \"result\" and \"error\"");
  }
  Incoming m;
  m.kind = Incoming::Kind::kResponse;
  m.id = id;
  if (error != j.end()) {
    RpcError e;
    if (error->is_object()) {
      auto code = error->find("code");
      auto msg = error->find("message");
      if (code != error->end() && code->is_number_integer()) e.code = code->get<int>();
      if (msg != error->end() && msg->is_string()) e.message = msg->get<std::string>();
    }
    m.error = std::move(e);
  } else {
    m.result = *result;
  }
  out.message = std::move(m);
  return out;
}

Json MakeResult(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json MakeError(const Json& id, int code, std::string_view message) {
  return Json{{"jsonrpc", "2.0"},
              {"id", id},
              {"error", Json{{"code", code}, {"message", std::string(message)}}}};
}

Json MakeRequest(const Json& id, std::string_view method, Json params) {
  return Json{{"jsonrpc", "2.0"},
              {"id", id},
              {"method", std::string(method)},
              {"params", std::move(params)}};
}

Json MakeNotification(std::string_view method, Json params) {
  return Json{{"jsonrpc", "2.0"}, {"method", std::string(method)}, {"params", std::move(params)}};
}

Connection::Connection(std::function<void(const std::string&)> write_line)
    : write_line_(std::move(write_line)) {}

void Connection::Send(const Json& message) {
  std::string line = DumpJson(message);
  std::lock_guard<std::mutex> lock(write_mu_);
  write_line_(line);
}

void Connection::Notify(std::string_view method, Json params) {
  Send(MakeNotification(method, std::move(params)));
}

Result<Json> Connection::Call(std::string_view method, Json params, std::stop_token stop) {
  Waiter waiter;
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Unavailable("the client closed the connection");
    id = next_id_++;
    waiters_[id] = &waiter;
  }
  Send(MakeRequest(id, method, std::move(params)));
  // Registered before the lock is taken: it runs at once when `stop` has
  // already fired, and it takes the lock itself.
  std::stop_callback wake(stop, [this] {
    std::lock_guard<std::mutex> l(mu_);
    cv_.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return waiter.done || closed_ || stop.stop_requested(); });
  waiters_.erase(id);
  if (waiter.done) return std::move(waiter.answer);
  if (closed_) return Unavailable("the client closed the connection");
  return Cancelled("cancelled while waiting for the client's answer to " + std::string(method));
}

bool Connection::Deliver(const Incoming& response) {
  if (!response.id.is_number_integer()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiters_.find(response.id.get<int64_t>());
  if (it == waiters_.end()) return false;
  Waiter& w = *it->second;
  if (response.error) {
    w.answer = Unavailable("the client answered error " + std::to_string(response.error->code) +
                           ": " + response.error->message);
  } else {
    w.answer = response.result;
  }
  w.done = true;
  cv_.notify_all();
  return true;
}

void Connection::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

}  // namespace agentloop::acp
