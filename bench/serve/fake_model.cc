// bench_fake_model: an event-driven fake model server for the serve scale
// benchmark (bench/serve/serve_scale.sh, docs/BENCHMARKS.md). One thread,
// one io_context, any number of concurrent streams, on 127.0.0.1 only.
//
// It answers POST .../chat/completions in the OpenAI Chat Completions
// streaming format (chunked `text/event-stream`, `data: {chunk}` events,
// `data: [DONE]`). The answer is chosen by the request's `model`, which
// names the pacing:
//   bench-<tool>-<deltas>-<ms>
// A request whose messages hold no tool result gets <deltas> text deltas
// spread evenly over <ms> milliseconds, then one call of <tool> (`read` of
// `data.txt`, or `write` of `out/<n>.txt`), finish_reason `tool_calls`. A
// request that carries a tool result gets a short final answer at once
// (finish_reason `stop`). Connections are kept alive.
//
//   bench_fake_model [--port N]     prints "PORT <n>" once listening
//
// On SIGINT/SIGTERM it prints its counters (requests, streams, deltas) and
// exits.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>  // before asio: 1.74 uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

struct Counters {
  unsigned long long connections = 0, requests = 0, tool_streams = 0, final_streams = 0, deltas = 0;
} g;
unsigned long long g_write_seq = 0;

struct Plan {
  std::string tool = "read";
  int deltas = 20;
  int ms = 20000;
};

// The string value of `"key":` in a compact JSON text (empty when absent).
std::string_view StringField(std::string_view body, std::string_view key) {
  std::string needle = "\"" + std::string(key) + "\":\"";
  size_t at = body.find(needle);
  if (at == std::string_view::npos) return {};
  at += needle.size();
  size_t end = body.find('"', at);
  if (end == std::string_view::npos) return {};
  return body.substr(at, end - at);
}

Plan PlanFor(std::string_view model) {
  Plan p;
  // bench-<tool>-<deltas>-<ms>
  if (model.rfind("bench-", 0) != 0) return p;
  std::string rest(model.substr(6));
  size_t a = rest.find('-');
  size_t b = a == std::string::npos ? a : rest.find('-', a + 1);
  if (b == std::string::npos) return p;
  p.tool = rest.substr(0, a);
  p.deltas = std::max(0, std::atoi(rest.substr(a + 1, b - a - 1).c_str()));
  p.ms = std::max(0, std::atoi(rest.substr(b + 1).c_str()));
  return p;
}

std::string Chunk(std::string_view sse_event) {
  char head[32];
  int n = std::snprintf(head, sizeof head, "%zx\r\n", sse_event.size());
  std::string out(head, static_cast<size_t>(n));
  out += sse_event;
  out += "\r\n";
  return out;
}

std::string Data(const std::string& json) { return Chunk("data: " + json + "\n\n"); }

std::string ChunkJson(const std::string& delta, const char* finish) {
  std::string f = finish ? std::string("\"") + finish + "\"" : "null";
  return "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"model\":\"bench\","
         "\"choices\":[{\"index\":0,\"delta\":" +
         delta + ",\"finish_reason\":" + f + "}]}";
}

std::string Usage() {
  return "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"model\":\"bench\","
         "\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":40,"
         "\"total_tokens\":140}}";
}

class Conn : public std::enable_shared_from_this<Conn> {
 public:
  explicit Conn(tcp::socket s) : sock_(std::move(s)), timer_(sock_.get_executor()) {}
  void Start() { Read(); }

 private:
  void Read() {
    req_.emplace();
    req_->body_limit(64 << 20);
    http::async_read(sock_, buf_, *req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->OnRequest();
    });
  }

  void OnRequest() {
    ++g.requests;
    auto& r = req_->get();
    std::string_view body = r.body();
    keep_alive_ = r.keep_alive();
    if (r.method() != http::verb::post ||
        r.target().find("/chat/completions") == beast::string_view::npos) {
      std::string msg =
          "{\"error\":{\"message\":\"not found\",\"type\":\"invalid_request_error\"}}";
      out_ = "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: " +
             std::to_string(msg.size()) + "\r\n\r\n" + msg;
      return WriteThen([](Conn& c) { c.Read(); });
    }
    plan_ = PlanFor(StringField(body, "model"));
    final_ = body.find("\"role\":\"tool\"") != std::string_view::npos;
    sent_ = 0;
    out_ =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    out_ += Data(ChunkJson("{\"role\":\"assistant\",\"content\":\"\"}", nullptr));
    if (final_) {
      ++g.final_streams;
      out_ += Data(ChunkJson("{\"content\":\"Done: the file was handled.\"}", nullptr));
      ++g.deltas;
      return Finish("stop");
    }
    ++g.tool_streams;
    step_ = plan_.deltas > 0 ? std::chrono::milliseconds(plan_.ms / plan_.deltas)
                             : std::chrono::milliseconds(0);
    WriteThen([](Conn& c) { c.NextDelta(); });
  }

  void NextDelta() {
    if (sent_ >= plan_.deltas) return ToolCall();
    timer_.expires_after(step_);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->Close();
      ++self->sent_;
      ++g.deltas;
      self->out_ = Data(ChunkJson(
          "{\"content\":\"word " + std::to_string(self->sent_) + " of the answer; \"}", nullptr));
      self->WriteThen([](Conn& c) { c.NextDelta(); });
    });
  }

  void ToolCall() {
    std::string args;
    if (plan_.tool == "write") {
      args = "{\\\"file_path\\\":\\\"out/" + std::to_string(++g_write_seq) +
             ".txt\\\",\\\"content\\\":\\\"bench\\\\n\\\"}";
    } else {
      args = "{\\\"file_path\\\":\\\"data.txt\\\"}";
    }
    out_ =
        Data(ChunkJson("{\"tool_calls\":[{\"index\":0,\"id\":\"call_" + std::to_string(g.requests) +
                           "\",\"type\":\"function\",\"function\":{\"name\":\"" + plan_.tool +
                           "\",\"arguments\":\"" + args + "\"}}]}",
                       nullptr));
    Finish("tool_calls");
  }

  void Finish(const char* reason) {
    out_ += Data(ChunkJson("{}", reason));
    out_ += Data(Usage());
    out_ += Chunk("data: [DONE]\n\n");
    out_ += "0\r\n\r\n";
    WriteThen([](Conn& c) {
      if (c.keep_alive_) {
        c.Read();
      } else {
        c.Close();
      }
    });
  }

  template <class Next>
  void WriteThen(Next next) {
    asio::async_write(sock_, asio::buffer(out_),
                      [self = shared_from_this(), next](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        next(*self);
                      });
  }

  void Close() {
    beast::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
  }

  tcp::socket sock_;
  asio::steady_timer timer_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> req_;
  std::string out_;
  Plan plan_;
  bool final_ = false;
  bool keep_alive_ = true;
  int sent_ = 0;
  std::chrono::milliseconds step_{0};
};

void Accept(tcp::acceptor& acc) {
  acc.async_accept([&acc](beast::error_code ec, tcp::socket s) {
    if (!ec) {
      ++g.connections;
      s.set_option(tcp::no_delay(true));
      std::make_shared<Conn>(std::move(s))->Start();
    } else if (ec == asio::error::operation_aborted) {
      return;
    }
    Accept(acc);
  });
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = static_cast<unsigned short>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_fake_model [--port N]\n");
      return 2;
    }
  }
  asio::io_context io(1);
  tcp::acceptor acc(io);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  acc.open(ep.protocol());
  acc.set_option(tcp::acceptor::reuse_address(true));
  acc.bind(ep);
  acc.listen(4096);
  std::printf("PORT %u\n", acc.local_endpoint().port());
  std::fflush(stdout);
  asio::signal_set sigs(io, SIGINT, SIGTERM);
  sigs.async_wait([&](beast::error_code, int) {
    std::fprintf(stderr,
                 "bench_fake_model: connections %llu requests %llu tool_streams %llu "
                 "final_streams %llu deltas %llu\n",
                 g.connections, g.requests, g.tool_streams, g.final_streams, g.deltas);
    io.stop();
  });
  Accept(acc);
  io.run();
  return 0;
}
