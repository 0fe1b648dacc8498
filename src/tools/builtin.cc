#include "tools/builtin.h"

#include <map>

#include "tools/paths.h"
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
  bash.confine_rule_allowed = options.confine_rule_allowed;
  bash.hidden_paths = options.hidden_paths;
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

void StartBashSandboxProbe(const std::filesystem::path& remembered) {
  tools::StartSandboxProbe("", remembered);
}

void ReplayReadLedger(std::span<const Message> history, const ToolContext& ctx,
                      ReadLedger& ledger) {
  std::map<std::string, const ContentBlock*> calls;
  for (const auto& m : history) {
    for (const auto& b : m.content) {
      if (b.type == BlockType::kToolUse) {
        calls[b.id] = &b;
        continue;
      }
      if (b.type != BlockType::kToolResult || b.is_error) continue;
      auto it = calls.find(b.tool_use_id);
      if (it == calls.end()) continue;
      const ContentBlock& use = *it->second;
      if (use.name != "read" && use.name != "write" && use.name != "edit") continue;
      if (!use.input.is_object() || !use.input.contains("file_path") ||
          !use.input["file_path"].is_string()) {
        continue;
      }
      auto rp =
          tools::ResolvePath(ctx, use.input["file_path"].get<std::string>(), tools::Access::kRead);
      if (rp.ok() && rp->exists) ledger.MarkRead(rp->abs);
    }
  }
}

}  // namespace agentloop
