// The built-in workspace tools: read, write, edit, grep, glob, ls and bash.
//
// Names and argument names are a contract (models are trained on them and
// users script against them); see docs/tools.md.
//
// Thread-safety: the tools keep no per-call state; Run() may be called
// concurrently.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "agentloop/tool.h"
#include "agentloop/types.h"

namespace agentloop {

struct BuiltinToolOptions {
  // The bash sandbox (bubblewrap) and what happens when it cannot run here;
  // see tools/tools.h BashToolOptions and docs/tools.md.
  SandboxMode sandbox = SandboxMode::kOff;
  bool network = false;
  SandboxFallback sandbox_fallback = SandboxFallback::kRefuse;
  // Offer bash in read-only commands, confined to a read-only sandbox (only
  // when bubblewrap works here).
  bool bash_in_read_only = false;
  // Bash runs the lines permission rules allow in the workspace-write
  // sandbox (BashToolOptions::confine_rule_allowed), hiding `hidden_paths`
  // in every sandbox.
  bool confine_rule_allowed = true;
  std::vector<std::string> hidden_paths;
  // Kept in (despite looking like secrets) and added to bash's environment.
  std::vector<std::string> env_pass;
  std::map<std::string, std::string> env_set;
  int bash_default_timeout_ms = 120000;
  int bash_max_timeout_ms = 600000;
  // Cap on what grep, glob, ls and bash return to the model (characters).
  size_t output_cap_chars = 30000;
};

// The seven tools, in the order read, write, edit, grep, glob, ls, bash.
std::vector<std::shared_ptr<Tool>> MakeBuiltinTools(const BuiltinToolOptions& options);

// Adds MakeBuiltinTools(options) to `registry`.
void RegisterBuiltinTools(ToolRegistry& registry, const BuiltinToolOptions& options);

// Marks in `ledger` every file that a successful read, write or edit of
// `history` touched, resolved with `ctx` as the tools resolve it (files that
// no longer exist are skipped): a reopened session remembers what the model
// has already looked at.
void ReplayReadLedger(std::span<const Message> history, const ToolContext& ctx, ReadLedger& ledger);

// Why the bash sandbox cannot run on this machine (bubblewrap missing or
// unable to create a sandbox, e.g. without user namespaces), as one
// sentence; empty when it can. Probes once per process.
std::string BashSandboxUnavailableReason();
// Starts that probe on a thread of its own and returns at once (a session
// with the built-in bash is about to be built: its tool waits for this
// probe instead of running one). `remembered`: the file that keeps a usable
// verdict between processes (tools/tools.h, StartSandboxProbe).
void StartBashSandboxProbe(const std::filesystem::path& remembered = {});

}  // namespace agentloop
