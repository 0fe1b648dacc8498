// Building a request from a ~1 MB transcript (target < 1 ms): the first
// build (every message serialised) and the next step's build (all history
// cached, two new messages), for the three wire formats.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "providers/http_provider.h"

namespace agentloop {
namespace {

// ~1 MB: 400 rounds of user/assistant-tool_use/tool_result, ~2.6 KB each.
std::vector<Message> Transcript() {
  std::vector<Message> h;
  uint64_t uid = 1;
  std::string chunk(2000, 'a');
  for (int i = 0; i < 400; ++i) {
    Message a;
    a.role = Role::kAssistant;
    a.content.push_back(ContentBlock::Text("Let me look at file " + std::to_string(i)));
    a.content.push_back(ContentBlock::ToolUse("call_" + std::to_string(i), "read",
                                              Json{{"path", "src/f" + std::to_string(i) + ".cc"}}));
    a.uid = uid++;
    Message r;
    r.role = Role::kUser;
    r.content.push_back(
        ContentBlock::ToolResult("call_" + std::to_string(i), "line \"quoted\"\n" + chunk, false));
    r.uid = uid++;
    if (i == 0) {
      Message u = Message::User("Please refactor the project");
      u.uid = uid++;
      h.push_back(u);
    }
    h.push_back(std::move(a));
    h.push_back(std::move(r));
  }
  return h;
}

std::unique_ptr<WireFormat> Format(int64_t k) {
  if (k == 0) return NewOpenAiChatFormat({});
  if (k == 1) return NewAnthropicFormat({});
  return NewOpenAiResponsesFormat({});
}

std::vector<ToolSpec> Tools() {
  std::vector<ToolSpec> tools;
  for (const char* n : {"read", "write", "edit", "bash", "grep", "glob"}) {
    ToolSpec t;
    t.name = n;
    t.description = "A tool that does things with files and commands, described at length.";
    t.input_schema = Json::parse(
        R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path"]})");
    tools.push_back(t);
  }
  return tools;
}

void BM_FirstBuild(benchmark::State& state) {
  std::vector<Message> h = Transcript();
  std::vector<ToolSpec> tools = Tools();
  HttpProviderOptions o;
  o.model = "m";
  o.base_url = "http://127.0.0.1:1";
  HttpProvider p(Format(state.range(0)), o, nullptr);
  ModelRequest req;
  req.system = "You are an agent.";
  req.history = h;
  req.tools = tools;
  size_t bytes = 0;
  for (auto _ : state) {
    p.mutable_cache().Clear();
    std::string body = p.BuildBody(req);
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_FirstBuild)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

void BM_NextStepBuild(benchmark::State& state) {
  std::vector<Message> h = Transcript();
  std::vector<ToolSpec> tools = Tools();
  HttpProviderOptions o;
  o.model = "m";
  o.base_url = "http://127.0.0.1:1";
  HttpProvider p(Format(state.range(0)), o, nullptr);
  ModelRequest req;
  req.system = "You are an agent.";
  req.history = h;
  req.tools = tools;
  (void)p.BuildBody(req);  // previous step: everything cached
  // This step adds an assistant tool call and its result (not yet cached:
  // uid 0 keeps them uncached on every iteration).
  Message a;
  a.role = Role::kAssistant;
  a.content.push_back(ContentBlock::ToolUse("call_new", "read", Json{{"path", "x"}}));
  Message r;
  r.role = Role::kUser;
  r.content.push_back(ContentBlock::ToolResult("call_new", std::string(2000, 'b'), false));
  h.push_back(a);
  h.push_back(r);
  req.history = h;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string body = p.BuildBody(req);
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_NextStepBuild)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace agentloop

BENCHMARK_MAIN();
