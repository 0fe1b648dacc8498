// SSE parsing throughput (target >= 500 MB/s): the parser alone, and the
// parser plus the Chat Completions / Anthropic decoders, over realistic
// streams fed in 16 KiB reads.
#include <string>

#include <benchmark/benchmark.h>

#include "providers/http_provider.h"
#include "providers/sse_parser.h"

namespace agentloop {
namespace {

struct Null : SseHandler {
  size_t n = 0;
  Status OnEvent(const SseEvent& e) override {
    n += e.data.size();
    return Status::Ok();
  }
};

// ~`bytes` of Chat Completions chunks, each carrying `piece` bytes of text.
std::string ChatStream(size_t bytes, size_t piece) {
  std::string text(piece, 'x');
  std::string ev =
      "data: {\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":1,"
      "\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" +
      text + "\"},\"finish_reason\":null}]}\n\n";
  std::string out;
  while (out.size() < bytes) out += ev;
  return out;
}

std::string AnthropicStream(size_t bytes) {
  std::string out =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\n"
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
      "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
  std::string ev =
      "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, some tokens\"}}\r\n\r\n";
  while (out.size() < bytes) out += ev;
  return out;
}

void Feed(benchmark::State& state, const std::string& s, SseHandler& h, SseParser& p) {
  constexpr size_t kRead = 16 << 10;
  for (size_t i = 0; i < s.size(); i += kRead) {
    Status st = p.Feed(std::string_view(s).substr(i, kRead), h);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
}

void BM_SseParserOnly(benchmark::State& state) {
  std::string s = ChatStream(4 << 20, static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    SseParser p;
    Null h;
    Feed(state, s, h, p);
    benchmark::DoNotOptimize(h.n);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.size()));
}
BENCHMARK(BM_SseParserOnly)->Arg(8)->Arg(64)->Arg(4096);

void BM_SseParserCrlf(benchmark::State& state) {
  std::string s = AnthropicStream(4 << 20);
  for (auto _ : state) {
    SseParser p;
    Null h;
    Feed(state, s, h, p);
    benchmark::DoNotOptimize(h.n);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.size()));
}
BENCHMARK(BM_SseParserCrlf);

void BM_SseParserPlusChatDecoder(benchmark::State& state) {
  std::string s = ChatStream(1 << 20, 8) + "data: [DONE]\n\n";
  auto format = NewOpenAiChatFormat({});
  for (auto _ : state) {
    StreamSink sink;
    auto dec = format->NewDecoder(sink);
    SseParser p;
    Feed(state, s, *dec, p);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.size()));
}
BENCHMARK(BM_SseParserPlusChatDecoder);

}  // namespace
}  // namespace agentloop

BENCHMARK_MAIN();
