// Plain fuzz driver for compilers without libFuzzer (GCC): runs the entry
// point over seed streams rendered in all three formats, the files of an
// optional corpus directory, and a bounded number of random mutations of
// them (deterministic seed), so CI runs it in bounded time.
//   al_fuzz_provider_stream_driver [--iterations N] [--seed S] [corpus_dir]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fake_model_server.h"
#include "provider_stream_fuzz.h"

namespace {

std::vector<std::string> Seeds() {
  using agentloop::Json;
  std::vector<std::string> out;
  const char* items[] = {
      R"({"text": "hello", "usage": {"input_tokens": 1, "output_tokens": 2}})",
      R"({"thinking": "t", "thinking_signature": "s", "tool_calls": [{"id": "a", "name": "read",
          "input": {"path": "x"}}, {"id": "b", "name": "bash", "arguments": "{bad"}]})",
      R"({"text": "x", "stream_error": {"type": "overloaded_error", "message": "o"}})",
      R"({"text": "cut", "finish": "length", "truncate": true})",
  };
  for (const char* item : items) {
    auto si = agentloop::ParseScriptItem(Json::parse(item), 0);
    if (!si.ok()) continue;
    int selector = 0;
    for (const char* path : {"/chat/completions", "/v1/messages", "/responses"}) {
      auto ev = agentloop::testing::RenderStream(*si, path);
      if (!ev.ok()) continue;
      std::string s(1, static_cast<char>(selector++));
      s.push_back(static_cast<char>(7));
      for (auto& e : *ev) s += e;
      out.push_back(std::move(s));
    }
  }
  return out;
}

void Run(const std::string& s) {
  agentloop::FuzzProviderStream(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 20000;
  uint64_t seed = 12345;
  std::string corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) {
      iterations = std::atol(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      corpus = a;
    }
  }
  std::vector<std::string> pool = Seeds();
  if (!corpus.empty() && std::filesystem::is_directory(corpus)) {
    for (const auto& e : std::filesystem::directory_iterator(corpus)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      pool.push_back(ss.str());
    }
  }
  for (const std::string& s : pool) Run(s);
  std::mt19937_64 rng(seed);
  const char kTokens[][24] = {"\n",
                              "\r\n",
                              "\r",
                              "data: ",
                              "event: ",
                              ":",
                              "{",
                              "}",
                              "\"",
                              "[DONE]",
                              "null",
                              "\"index\":",
                              "\"type\":\"error\"",
                              "\xff\xfe"};
  for (long it = 0; it < iterations; ++it) {
    std::string s = pool[rng() % pool.size()];
    int mutations = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < mutations && !s.empty(); ++m) {
      size_t pos = rng() % s.size();
      switch (rng() % 5) {
        case 0:
          s[pos] = static_cast<char>(rng());
          break;
        case 1:
          s.erase(pos, 1 + rng() % 16);
          break;
        case 2:
          s.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]);
          break;
        case 3:
          s.resize(pos);
          break;
        case 4: {
          const std::string& other = pool[rng() % pool.size()];
          size_t from = rng() % other.size();
          s.insert(pos, other.substr(from, rng() % 64));
          break;
        }
      }
    }
    if (s.size() >= 2 && rng() % 4 == 0) s[1] = static_cast<char>(1 + rng() % 16);
    Run(s);
  }
  std::printf("fuzz driver: %zu seeds, %ld mutated inputs, no crash\n", pool.size(), iterations);
  return 0;
}
