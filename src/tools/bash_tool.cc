#include <signal.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "base/strings.h"
#include "env/process.h"
#include "tools/tools.h"

namespace agentloop::tools {

// The bubblewrap command line around `program`: the whole file system
// read-only, a private /dev, /proc (of the new PID namespace) and /tmp, the
// workspace bound read-write or read-only, no network unless `network`, and
// a PID namespace of its own, so that when the shell exits every process it
// started (also one that left the process group with setsid or a double
// fork) is killed by the kernel with the namespace's init.
//
// In workspace-write, the workspace's `.git` and `.agentloop` (what git and
// agentloop run or obey: hooks, config, rules) stay read-only, so that a
// command cannot plant code that runs later outside the sandbox.
std::vector<std::string> SandboxedArgv(const std::string& bwrap, SandboxMode mode, bool network,
                                       const std::string& ws,
                                       const std::vector<std::string>& program) {
  std::vector<std::string> argv = {bwrap,  "--ro-bind", "/",     "/",       "--dev",
                                   "/dev", "--proc",    "/proc", "--tmpfs", "/tmp"};
  if (!network) argv.push_back("--unshare-net");
  for (const char* a : {"--unshare-pid", "--die-with-parent"}) argv.push_back(a);
  argv.push_back(mode == SandboxMode::kWorkspaceWrite ? "--bind" : "--ro-bind");
  argv.push_back(ws);
  argv.push_back(ws);
  if (mode == SandboxMode::kWorkspaceWrite) {
    const std::filesystem::path root(ws);
    for (const char* name : {".git", ".agentloop"}) {
      // Through a symlink: its target, when that is inside the workspace
      // (outside it, everything is read-only already).
      std::error_code ec;
      std::filesystem::path target = std::filesystem::canonical(root / name, ec);
      if (ec) continue;  // absent
      auto rel = target.lexically_relative(root);
      if (rel.empty() || *rel.begin() == "..") continue;
      argv.push_back("--ro-bind");
      argv.push_back(target.string());
      argv.push_back(target.string());
    }
  }
  argv.push_back("--chdir");
  argv.push_back(ws);
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

namespace {

std::vector<std::string> SandboxArgv(const std::string& bwrap, SandboxMode mode, bool network,
                                     const std::string& ws, const std::string& command) {
  return SandboxedArgv(bwrap, mode, network, ws, {"/bin/bash", "-c", command});
}

// Whether bubblewrap at `path` can build a sandbox here. Probed once per
// path (running it costs a few milliseconds); empty string when usable.
std::string ProbeBubblewrap(const std::string& path) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(path); it != cache->end()) return it->second;
  ProcessOptions probe;
  // The flags of a real call (a kernel may allow a mount namespace but not
  // a network namespace or a /proc mount).
  probe.argv = SandboxArgv(path, SandboxMode::kReadOnly, /*network=*/false, "/", "true");
  probe.env = ScrubbedEnvironment({});
  probe.timeout = std::chrono::milliseconds(10000);
  probe.output_cap = 2000;
  std::string verdict;
  auto r = RunProcess(probe, {});
  if (!r.ok()) {
    verdict = "bubblewrap (" + path + ") is unusable: " + r.error().message();
  } else if (r->outcome != ProcessResult::Outcome::kExited || r->exit_code != 0) {
    // One line (front ends print the reason as one warning).
    std::string out(Trim(SanitizeUtf8(r->output)));
    for (char& c : out) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    verdict = "bubblewrap (" + path +
              ") is unusable: it failed to create a sandbox here (user namespaces may be "
              "disabled in this container or kernel)" +
              (out.empty() ? "" : ": " + out);
  }
  (*cache)[path] = verdict;
  return verdict;
}

}  // namespace

std::string SandboxUnavailableReason(const std::string& bwrap_path) {
  std::string bwrap = FindExecutable(bwrap_path.empty() ? "bwrap" : bwrap_path);
  if (bwrap.empty()) {
    return "bubblewrap (bwrap) was not found" +
           (bwrap_path.empty() ? std::string(" in PATH") : " at " + bwrap_path) +
           "; install the 'bubblewrap' package";
  }
  return ProbeBubblewrap(bwrap);
}

BashTool::BashTool(BashToolOptions options)
    : BuiltinTool(SharedSpec(options)), options_(std::move(options)) {}

// One spec per (max_timeout_ms, confined) in the process, shared by every
// instance with those options.
std::shared_ptr<const ToolSpec> BashTool::SharedSpec(const BashToolOptions& options) {
  const int max_timeout_ms = options.max_timeout_ms;
  const bool confined =
      options.offer_in_read_only && SandboxUnavailableReason(options.bwrap_path).empty();
  static std::mutex mu;
  static auto* specs = new std::map<std::pair<int, bool>, std::shared_ptr<const ToolSpec>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*specs)[{max_timeout_ms, confined}];
  if (slot) return slot;
  ToolSpec s = BuiltinSpec(
      {.name = "bash",
       .description =
           "Run a shell command with /bin/bash -c in the workspace root. stdin is closed (no "
           "interactive commands); stdout and stderr are returned together (long output keeps its "
           "beginning and end) with the exit code. The command and everything it starts are "
           "killed at the timeout (`timeout_ms`, default 120000, max 600000) or when the turn is "
           "cancelled, and background processes do not outlive the command. Prefer the read, "
           "grep, glob and edit tools over cat, grep, find and sed.",
       .schema = R"({
      "type": "object",
      "properties": {
        "command": {"type": "string", "description": "The command line to run."},
        "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds (default 120000, max 600000)."},
        "description": {"type": "string", "description": "What the command does, in 5-10 words, for the user."}
      },
      "required": ["command"],
      "additionalProperties": false
    })",
       .mutates = true,
       .parallel_safe = false,
       .target = RuleTarget::kCommand});
  s.input_schema["properties"]["timeout_ms"]["maximum"] = max_timeout_ms;
  if (confined) {
    s.confined_in_read_only = true;
    s.description +=
        " In a read-only command (plan, explain) commands run in a read-only sandbox without "
        "network: use them to inspect, not to change, the workspace.";
  }
  slot = std::make_shared<const ToolSpec>(std::move(s));
  return slot;
}

Result<ToolOutput> BashTool::Run(const ToolCall& call, ToolContext& ctx) {
  const std::string command = StringArg(call.input, "command");
  if (Trim(command).empty()) return ToolOutput::Error("command is empty");
  int64_t timeout_ms = IntArg(call.input, "timeout_ms", options_.default_timeout_ms);
  if (timeout_ms <= 0) timeout_ms = options_.default_timeout_ms;
  bool clamped = timeout_ms > options_.max_timeout_ms;
  if (clamped) timeout_ms = options_.max_timeout_ms;

  // A read-only command confines every call to a read-only sandbox without
  // network, whatever was configured, and never runs one without it.
  SandboxMode mode = ctx.read_only ? SandboxMode::kReadOnly : options_.sandbox;
  const bool network = options_.network && !ctx.read_only;
  if (ctx.read_only && !spec().confined_in_read_only) {
    return FailedPrecondition(
        "bash is not available in a read-only command here: it runs there only in a read-only "
        "sandbox, and bubblewrap was not found usable when the tool was set up");
  }
  std::string fallback_reason;
  std::string bwrap;
  if (mode != SandboxMode::kOff) {
    std::string why = SandboxUnavailableReason(options_.bwrap_path);
    if (!why.empty() && (ctx.read_only || options_.fallback == SandboxFallback::kRefuse)) {
      std::string fix = ctx.read_only ? "; a read-only command never runs bash without the sandbox"
                                      : "; set tools.sandbox_fallback = \"warn\" to run commands "
                                        "unsandboxed, or tools.sandbox = \"off\"";
      return FailedPrecondition("the bash sandbox \"" + std::string(SandboxModeName(mode)) +
                                "\" is required but " + why + fix);
    }
    if (!why.empty()) {
      fallback_reason = why;
      mode = SandboxMode::kOff;
    } else {
      bwrap = FindExecutable(options_.bwrap_path.empty() ? "bwrap" : options_.bwrap_path);
    }
  }

  const std::string ws = ctx.workspace.string();
  ProcessOptions p;
  p.cwd = ctx.workspace;
  EnvPolicy env;
  env.remove = ctx.scrubbed_env;
  env.pass = options_.env_pass;
  env.set = options_.env_set;
  p.env = ChildEnvironment(options_.base_env ? *options_.base_env : CurrentEnvironment(), env);
  p.timeout = std::chrono::milliseconds(timeout_ms);
  // The turn's wall-time budget ends the command too, when it comes first
  // (at least a millisecond: a zero timeout would mean none).
  bool budget_bound = false;
  if (ctx.deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        *ctx.deadline - std::chrono::steady_clock::now());
    if (left < p.timeout) {
      p.timeout = std::max(left, std::chrono::milliseconds(1));
      budget_bound = true;
    }
  }
  p.output_cap = options_.output_cap_chars;
  if (mode == SandboxMode::kOff) {
    p.argv = {"/bin/bash", "-c", command};
  } else {
    p.argv = SandboxArgv(bwrap, mode, network, ws, command);
  }

  auto run = RunProcess(p, ctx.stop);
  if (!run.ok()) return run.error().WithContext("bash");
  const ProcessResult& r = *run;

  std::string text = SanitizeUtf8(r.output);
  if (text.empty()) text = "(no output)";
  if (text.back() != '\n') text.push_back('\n');
  ToolOutput out;
  switch (r.outcome) {
    case ProcessResult::Outcome::kExited:
      if (r.exit_code != 0) {
        text += "[exit code " + std::to_string(r.exit_code) + "]\n";
        out.is_error = true;
      }
      break;
    case ProcessResult::Outcome::kSignaled:
      text += "[killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")]\n";
      out.is_error = true;
      break;
    case ProcessResult::Outcome::kTimedOut:
      if (budget_bound) {
        text += "[stopped after " + std::to_string(r.elapsed.count()) +
                " ms: the turn's wall-time budget ran out; the command and all processes it "
                "started were killed]\n";
        out.is_error = true;
        break;
      }
      text += "[timed out after " + std::to_string(timeout_ms) +
              " ms; the command and all processes it started were killed. Use a longer "
              "timeout_ms (max " +
              std::to_string(options_.max_timeout_ms) + ") or a faster command.]\n";
      out.is_error = true;
      break;
    case ProcessResult::Outcome::kCancelled:
      text += "[cancelled; the command and all processes it started were killed]\n";
      out.is_error = true;
      break;
  }
  if (clamped) {
    text += "[timeout_ms was reduced to the maximum of " + std::to_string(options_.max_timeout_ms) +
            " ms]\n";
  }
  if (r.output_truncated) {
    text += "[output was " + std::to_string(r.total_output_bytes) +
            " bytes; only its beginning and end are shown]\n";
  }
  out.content = std::move(text);
  out.details =
      Json{{"exit_code", r.exit_code},
           {"signal", r.signal},
           {"timed_out", r.outcome == ProcessResult::Outcome::kTimedOut},
           {"budget_exhausted", budget_bound && r.outcome == ProcessResult::Outcome::kTimedOut},
           {"cancelled", r.outcome == ProcessResult::Outcome::kCancelled},
           {"output_bytes", r.total_output_bytes},
           {"truncated", r.output_truncated},
           {"duration_ms", r.elapsed.count()},
           {"sandbox", SandboxModeName(mode)}};
  if (mode != SandboxMode::kOff) out.details["network"] = network;
  if (!fallback_reason.empty()) out.details["sandbox_unavailable"] = fallback_reason;
  if (auto d = call.input.find("description"); d != call.input.end() && d->is_string()) {
    out.details["description"] = *d;
  }
  return out;
}

}  // namespace agentloop::tools
