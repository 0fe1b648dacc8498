#include "tools/builtin.h"

#include "tools/tools.h"

namespace agentloop {

std::vector<std::shared_ptr<Tool>> MakeBuiltinTools(const BuiltinToolOptions& options) {
  tools::GrepToolOptions grep;
  grep.output_cap_chars = options.output_cap_chars;
  tools::GlobToolOptions glob;
  glob.output_cap_chars = options.output_cap_chars;
  tools::BashToolOptions bash;
  bash.sandbox = options.sandbox;
  bash.network = options.network;
  bash.fallback = options.sandbox_fallback;
  bash.offer_in_read_only = options.bash_in_read_only;
  bash.env_pass = options.env_pass;
  bash.env_set = options.env_set;
  bash.default_timeout_ms = options.bash_default_timeout_ms;
  bash.max_timeout_ms = options.bash_max_timeout_ms;
  bash.output_cap_chars = options.output_cap_chars;
  return {
      std::make_shared<tools::ReadTool>(),
      std::make_shared<tools::WriteTool>(),
      std::make_shared<tools::EditTool>(),
      std::make_shared<tools::GrepTool>(grep),
      std::make_shared<tools::GlobTool>(glob),
      std::make_shared<tools::LsTool>(1000, options.output_cap_chars),
      std::make_shared<tools::BashTool>(bash),
  };
}

std::string BashSandboxUnavailableReason() { return tools::SandboxUnavailableReason(); }

}  // namespace agentloop
