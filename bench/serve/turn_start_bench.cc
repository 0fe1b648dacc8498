// What a turn in flight costs a server: memory per turn while its model call
// is outstanding, and CPU per turn start (open the session, start the turn,
// build and send its first model request). The engine is driven as
// `agentloop serve` drives it: Engine::OpenSession (the SQLite store with
// store.sync = normal, a durable approver, the `openai` provider) and
// Session::StartRun on a ThreadPoolExecutor, the HTTP client on the caller's
// io_context. The model is an in-process listener on 127.0.0.1 that reads
// each request whole and never answers, so every turn stays in flight.
//
// Google Benchmark, one iteration per run (Iterations(1)) of N turns:
//   cpu_ms_per_start   process CPU (all threads) from before the first open to
//                      the last request received, per turn
//   kb_per_turn        heap in use (mallinfo2 uordblks + hblkhd) with the N
//                      turns in flight, minus before, per turn
//   rss_kb_per_turn    the same for the resident set (VmRSS)
// The sessions are created (and their store rows written) before the
// measurement, as the server's load client creates them before it starts
// turns. docs/BENCHMARKS.md, "Turn start and turn in flight".
#include <malloc.h>
#include <time.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/asio.hpp>

#include "agentloop/engine.h"
#include "agentloop/executor.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace agentloop;

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

size_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

size_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Accepts connections, reads each request (head and Content-Length body)
// and counts it; never answers.
class SilentModel {
 public:
  SilentModel() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SilentModel() {
    io_.stop();
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  // Waits until `n` requests were received in all (false after 120 s).
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(120), [&] { return received_ >= n; });
  }
  // Closes every connection (the turns' model calls fail).
  void DropAll() {
    asio::post(io_, [this] { conns_.clear(); });
  }

 private:
  struct Conn {
    explicit Conn(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::string buf;
  };

  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      auto c = std::make_shared<Conn>(std::move(s));
      conns_.push_back(c);
      Read(c);
      Accept();
    });
  }

  void Read(const std::shared_ptr<Conn>& c) {
    // Small buffers: the model runs in this process, so its memory per
    // connection counts in kb_per_turn (about 4 KB).
    auto chunk = std::make_shared<std::array<char, 4096>>();
    c->socket.async_read_some(asio::buffer(*chunk),
                              [this, c, chunk](boost::system::error_code ec, size_t n) {
                                if (ec) return;
                                c->buf.append(chunk->data(), n);
                                for (;;) {
                                  size_t head_end = c->buf.find("\r\n\r\n");
                                  if (head_end == std::string::npos) break;
                                  size_t len = 0;
                                  size_t p = c->buf.find("Content-Length:");
                                  if (p == std::string::npos) p = c->buf.find("content-length:");
                                  if (p != std::string::npos && p < head_end)
                                    len = std::strtoul(c->buf.c_str() + p + 15, nullptr, 10);
                                  if (c->buf.size() < head_end + 4 + len) break;
                                  c->buf.erase(0, head_end + 4 + len);
                                  std::lock_guard<std::mutex> lock(mu_);
                                  ++received_;
                                  cv_.notify_all();
                                }
                                c->buf.shrink_to_fit();
                                Read(c);
                              });
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<Conn>> conns_;  // io thread only
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t received_ = 0;  // Guarded by mu_.
};

void BM_TurnStartInFlight(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("turn_start_bench." + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "ws");
  std::filesystem::create_directories(dir / "home");
  { std::ofstream(dir / "ws" / "data.txt") << "a line of the file the model reads\n"; }

  SilentModel model;
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });

  EngineOptions eo;
  eo.env = {{"HOME", (dir / "home").string()}, {"OPENAI_API_KEY", "bench"}};
  eo.data_dir = dir / "data";
  eo.store_sync = StoreSync::kNormal;
  eo.io_context = &io;
  auto engine = Engine::Create(std::move(eo));
  if (!engine.ok()) {
    state.SkipWithError(engine.error().ToString().c_str());
    guard.reset();
    io_thread.join();
    return;
  }
  ThreadPoolExecutor executor;

  SessionOptions base;
  base.workspace = dir / "ws";
  base.provider = ProviderKind::kOpenAI;
  base.model = "bench-model";
  base.base_url = "http://127.0.0.1:" + std::to_string(model.port()) + "/v1";
  base.approver = ApproverMode::kDurable;
  base.allow = {{"read", "bench"}};
  base.agent = "reader";

  // The sessions exist before the measurement (rows only).
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) {
    auto s = (*engine)->OpenSession(base);
    if (!s.ok()) {
      state.SkipWithError(s.error().ToString().c_str());
      break;
    }
    ids.push_back((*s)->id());
  }

  std::vector<std::unique_ptr<Session>> sessions;
  sessions.reserve(n);
  std::stop_source stop;
  std::atomic<size_t> done{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
  for (auto _ : state) {
    if (ids.size() != n) break;
    malloc_trim(0);
    const size_t heap0 = HeapInUse();
    const size_t rss0 = RssBytes();
    const double cpu0 = ProcessCpuSeconds();
    for (const std::string& id : ids) {
      SessionOptions o = base;
      o.session_id = id;
      auto s = (*engine)->OpenSession(o);
      if (!s.ok()) {
        state.SkipWithError(s.error().ToString().c_str());
        break;
      }
      AsyncTurnCallbacks cb;
      cb.done = [&](Result<TurnResult>) {
        std::lock_guard<std::mutex> lock(done_mu);
        done.fetch_add(1);
        done_cv.notify_all();
      };
      (*s)->Submit(op::UserInput{"read data.txt"}, executor, std::move(cb), stop.get_token());
      sessions.push_back(std::move(*s));
    }
    if (!model.WaitFor(sessions.size())) state.SkipWithError("the requests did not all arrive");
    const double cpu1 = ProcessCpuSeconds();
    const size_t heap1 = HeapInUse();
    const size_t rss1 = RssBytes();
    const double turns = static_cast<double>(sessions.size());
    state.counters["cpu_ms_per_start"] = (cpu1 - cpu0) * 1e3 / turns;
    state.counters["kb_per_turn"] =
        (static_cast<double>(heap1) - static_cast<double>(heap0)) / 1024.0 / turns;
    state.counters["rss_kb_per_turn"] =
        (static_cast<double>(rss1) - static_cast<double>(rss0)) / 1024.0 / turns;
  }

  // Tear down: cancel the turns, let their model calls fail, wait for done.
  stop.request_stop();
  model.DropAll();
  {
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait_for(lock, std::chrono::seconds(120),
                     [&] { return done.load() >= sessions.size(); });
  }
  executor.Shutdown();
  sessions.clear();
  engine->reset();
  guard.reset();
  io_thread.join();
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_TurnStartInFlight)->Arg(100)->Arg(500)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
