// agentloop-fake-server: serves a script (docs/providers.md) on 127.0.0.1.
//   agentloop-fake-server --port 0 --script FILE [--record FILE]
// Prints "PORT <n>" on stdout once listening; runs until SIGINT/SIGTERM or
// until stdin reaches EOF when --exit-on-stdin-eof is given. With --record,
// each request is appended to FILE as one JSON line
// {"method", "path", "headers": {...}, "body": <json or string>}.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "fake_model_server.h"

using agentloop::Json;

int main(int argc, char** argv) {
  int port = 0;
  std::string script_path, record_path;
  bool exit_on_eof = false;
  int64_t context_window = 0;
  bool auto_summary = false;
  int summary_delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--port") {
      port = std::atoi(next().c_str());
    } else if (a == "--script") {
      script_path = next();
    } else if (a == "--record") {
      record_path = next();
    } else if (a == "--exit-on-stdin-eof") {
      exit_on_eof = true;
    } else if (a == "--context-window") {
      context_window = std::atoll(next().c_str());
    } else if (a == "--auto-summary") {
      auto_summary = true;
    } else if (a == "--summary-delay-ms") {
      summary_delay_ms = std::atoi(next().c_str());
    } else {
      std::cerr << "usage: agentloop-fake-server --port N --script FILE [--record FILE] "
                   "[--context-window N] [--auto-summary] [--summary-delay-ms N] "
                   "[--exit-on-stdin-eof]\n";
      return 2;
    }
  }
  if (script_path.empty()) {
    std::cerr << "agentloop-fake-server: --script is required\n";
    return 2;
  }
  std::ifstream in(script_path);
  std::stringstream ss;
  ss << in.rdbuf();
  agentloop::Result<Json> script = agentloop::ParseJson(ss.str());
  if (!in || !script.ok()) {
    std::cerr << "agentloop-fake-server: cannot read script " << script_path << "\n";
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by server threads

  std::mutex record_mu;
  std::ofstream record;
  if (!record_path.empty()) record.open(record_path, std::ios::app);
  agentloop::testing::FakeModelServer::Options opts;
  opts.port = port;
  opts.context_window = context_window;
  opts.auto_summary = auto_summary;
  opts.summary_delay_ms = summary_delay_ms;
  if (record.is_open()) {
    opts.on_request = [&](const agentloop::testing::RecordedHttpRequest& r) {
      Json headers = Json::object();
      for (const auto& [k, v] : r.headers) headers[k] = v;
      agentloop::Result<Json> body = agentloop::ParseJson(r.body);
      Json line{{"method", r.method},
                {"path", r.path},
                {"headers", headers},
                {"body", body.ok() ? *body : Json(r.body)}};
      std::lock_guard lock(record_mu);
      record << agentloop::DumpJson(line) << "\n";
      record.flush();
    };
  }
  auto server = agentloop::testing::FakeModelServer::Start(*script, opts);
  if (!server.ok()) {
    std::cerr << "agentloop-fake-server: " << server.error().ToString() << "\n";
    return 1;
  }
  std::printf("PORT %d\n", (*server)->port());
  std::fflush(stdout);
  if (exit_on_eof) {
    std::thread([] {
      std::string line;
      while (std::getline(std::cin, line)) {
      }
      kill(getpid(), SIGTERM);
    }).detach();
  }
  int sig = 0;
  sigwait(&set, &sig);
  (*server)->Stop();
  return 0;
}
