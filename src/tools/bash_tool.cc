#include <signal.h>
#include <string.h>

#include <map>
#include <mutex>

#include "base/strings.h"
#include "env/process.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

// Whether bubblewrap at `path` can build a sandbox here. Probed once per
// path (running it costs a few milliseconds); empty string when usable.
std::string ProbeBubblewrap(const std::string& path) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(path); it != cache->end()) return it->second;
  ProcessOptions probe;
  probe.argv = {path,
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--unshare-net",
                "--unshare-pid",
                "--die-with-parent",
                "/bin/true"};
  probe.env = ScrubbedEnvironment({});
  probe.timeout = std::chrono::milliseconds(10000);
  probe.output_cap = 2000;
  std::string verdict;
  auto r = RunProcess(probe, {});
  if (!r.ok()) {
    verdict = r.error().message();
  } else if (r->outcome != ProcessResult::Outcome::kExited || r->exit_code != 0) {
    verdict =
        "it failed to create a sandbox here (user namespaces may be disabled in this "
        "container or kernel): " +
        std::string(Trim(SanitizeUtf8(r->output)));
  }
  (*cache)[path] = verdict;
  return verdict;
}

}  // namespace

BashTool::BashTool(BashToolOptions options) : options_(std::move(options)) {
  spec_.name = "bash";
  spec_.description =
      "Run a shell command with /bin/bash -c in the workspace root. stdin is closed (no "
      "interactive commands); stdout and stderr are returned together (long output keeps its "
      "beginning and end) with the exit code. The command and everything it starts are killed "
      "at the timeout (`timeout_ms`, default 120000, max 600000) or when the turn is "
      "cancelled, and background processes do not outlive the command. Prefer the read, grep, "
      "glob and edit tools over cat, grep, find and sed.";
  spec_.input_schema = Json::parse(R"({
    "type": "object",
    "properties": {
      "command": {"type": "string", "description": "The command line to run."},
      "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds (default 120000, max 600000)."},
      "description": {"type": "string", "description": "What the command does, in 5-10 words, for the user."}
    },
    "required": ["command"],
    "additionalProperties": false
  })");
  spec_.input_schema["properties"]["timeout_ms"]["maximum"] = options_.max_timeout_ms;
  spec_.mutates = true;
  spec_.parallel_safe = false;
}

Result<ToolOutput> BashTool::Run(const ToolCall& call, ToolContext& ctx) {
  const std::string command = StringArg(call.input, "command");
  if (Trim(command).empty()) return ToolOutput::Error("command is empty");
  int64_t timeout_ms = IntArg(call.input, "timeout_ms", options_.default_timeout_ms);
  if (timeout_ms <= 0) timeout_ms = options_.default_timeout_ms;
  bool clamped = timeout_ms > options_.max_timeout_ms;
  if (clamped) timeout_ms = options_.max_timeout_ms;

  const std::string ws = ctx.workspace.string();
  ProcessOptions p;
  p.cwd = ctx.workspace;
  EnvPolicy env;
  env.remove = ctx.scrubbed_env;
  p.env = ScrubbedEnvironment(env);
  p.timeout = std::chrono::milliseconds(timeout_ms);
  p.output_cap = options_.output_cap_chars;
  if (options_.sandbox == "off") {
    p.argv = {"/bin/bash", "-c", command};
  } else if (options_.sandbox == "workspace-write" || options_.sandbox == "read-only") {
    std::string bwrap = FindExecutable(options_.bwrap_path.empty() ? "bwrap" : options_.bwrap_path);
    if (bwrap.empty()) {
      return FailedPrecondition(
          "the bash sandbox \"" + options_.sandbox +
          "\" is configured but bubblewrap (bwrap) was not found" +
          (options_.bwrap_path.empty() ? " in PATH" : " at " + options_.bwrap_path) +
          "; install the 'bubblewrap' package or set sandbox = \"off\"");
    }
    std::string why = ProbeBubblewrap(bwrap);
    if (!why.empty()) {
      return FailedPrecondition("the bash sandbox \"" + options_.sandbox +
                                "\" is configured but bubblewrap (" + bwrap +
                                ") is unusable: " + why +
                                "; set sandbox = \"off\" to run "
                                "commands without it");
    }
    p.argv = {bwrap,
              "--ro-bind",
              "/",
              "/",
              "--dev",
              "/dev",
              "--proc",
              "/proc",
              "--tmpfs",
              "/tmp",
              "--unshare-net",
              "--unshare-pid",
              "--die-with-parent",
              options_.sandbox == "workspace-write" ? "--bind" : "--ro-bind",
              ws,
              ws,
              "--chdir",
              ws,
              "/bin/bash",
              "-c",
              command};
  } else {
    return FailedPrecondition("unknown bash sandbox mode \"" + options_.sandbox +
                              "\"; use off, workspace-write or read-only");
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
  out.details = Json{{"exit_code", r.exit_code},
                     {"signal", r.signal},
                     {"timed_out", r.outcome == ProcessResult::Outcome::kTimedOut},
                     {"cancelled", r.outcome == ProcessResult::Outcome::kCancelled},
                     {"output_bytes", r.total_output_bytes},
                     {"truncated", r.output_truncated},
                     {"duration_ms", r.elapsed.count()},
                     {"sandbox", options_.sandbox}};
  if (auto d = call.input.find("description"); d != call.input.end() && d->is_string()) {
    out.details["description"] = *d;
  }
  return out;
}

}  // namespace agentloop::tools
