// grep_cli: runs the grep or glob tool directly, with no output cap, and
// prints what the model would see. Used by bench/scripts/tools_bench.py.
//
//   grep_cli grep <workspace> <pattern> [-i] [-l|-c|-n] [-C N] [-U] [--glob G] [--type T]
//   grep_cli glob <workspace> <pattern>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "tools/tools.h"

using agentloop::Json;
using agentloop::ToolCall;
using agentloop::ToolContext;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s grep|glob <workspace> <pattern> [options]\n", argv[0]);
    return 2;
  }
  std::string cmd = argv[1];
  std::error_code ec;
  ToolContext ctx;
  ctx.workspace = std::filesystem::canonical(argv[2], ec);
  if (ec) {
    std::fprintf(stderr, "bad workspace: %s\n", ec.message().c_str());
    return 2;
  }
  Json input{{"pattern", argv[3]}};
  agentloop::Result<agentloop::ToolOutput> out = agentloop::Internal("unset");
  if (cmd == "grep") {
    for (int i = 4; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "-i") input["case_insensitive"] = true;
      if (a == "-l") input["output_mode"] = "files_with_matches";
      if (a == "-c") input["output_mode"] = "count";
      if (a == "-n") input["output_mode"] = "content";
      if (a == "-U") input["multiline"] = true;
      if (a == "-C" && i + 1 < argc) input["context"] = std::atoi(argv[++i]);
      if (a == "--glob" && i + 1 < argc) input["glob"] = argv[++i];
      if (a == "--type" && i + 1 < argc) input["type"] = argv[++i];
    }
    agentloop::tools::GrepToolOptions o;
    o.output_cap_chars = SIZE_MAX;
    agentloop::tools::GrepTool tool(o);
    out = tool.Run(ToolCall{"cli", "grep", input}, ctx);
  } else if (cmd == "glob") {
    agentloop::tools::GlobToolOptions o;
    o.max_results = 0;
    o.output_cap_chars = SIZE_MAX;
    agentloop::tools::GlobTool tool(o);
    out = tool.Run(ToolCall{"cli", "glob", input}, ctx);
  } else {
    std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
    return 2;
  }
  if (!out.ok()) {
    std::fprintf(stderr, "engine error: %s\n", out.error().ToString().c_str());
    return 2;
  }
  std::fwrite(out->content.data(), 1, out->content.size(), stdout);
  return out->is_error ? 1 : 0;
}
