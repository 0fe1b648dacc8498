#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include <sys/stat.h>

#include "base/strings.h"
#include "env/files.h"
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
// In workspace-write, what git and agentloop run or obey stays read-only, so
// that a command cannot plant code that runs later outside the sandbox:
// `.git/config`, `.git/hooks` (an empty read-only directory when absent) and
// `.git/modules` (submodules' config and hooks), `.agentloop` (also an empty
// read-only directory when absent), `.mcp.json` and `AGENTS.md`. The rest of
// `.git` stays writable, so `git commit` works.
//
// `hidden` paths (the user's configuration and data directories, the trust
// store, a server's state) are replaced by an empty read-only directory (a
// file by /dev/null): a path that contains the workspace before the
// workspace is bound, any other after, so the workspace stays visible and a
// hidden path inside it stays hidden.
std::vector<std::string> SandboxedArgv(const std::string& bwrap, SandboxMode mode, bool network,
                                       const std::string& ws,
                                       const std::vector<std::string>& program,
                                       const std::vector<std::string>& hidden) {
  std::vector<std::string> argv = {bwrap,  "--ro-bind", "/",     "/",       "--dev",
                                   "/dev", "--proc",    "/proc", "--tmpfs", "/tmp"};
  if (!network) argv.push_back("--unshare-net");
  for (const char* a : {"--unshare-pid", "--die-with-parent"}) argv.push_back(a);
  const std::filesystem::path root(ws);
  auto inside = [](const std::filesystem::path& p, const std::filesystem::path& dir) {
    auto rel = p.lexically_relative(dir);
    return !rel.empty() && *rel.begin() != "..";
  };
  auto hide = [&](const std::filesystem::path& p) {
    std::error_code ec;
    auto st = std::filesystem::status(p, ec);
    if (ec || !std::filesystem::exists(st)) return;
    if (std::filesystem::is_directory(st)) {
      for (const char* a : {"--tmpfs", p.c_str(), "--remount-ro", p.c_str()}) argv.push_back(a);
    } else {
      for (const char* a : {"--ro-bind", "/dev/null", p.c_str()}) argv.push_back(a);
    }
  };
  std::vector<std::filesystem::path> hide_after;
  std::vector<std::filesystem::path> around;  // contain the workspace
  for (const std::string& h : hidden) {
    if (h.empty() || h.front() != '/') continue;
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(h, ec);
    if (ec) continue;
    if (inside(root, p)) {
      // Contains the workspace: an empty tmpfs first, the workspace bound
      // into it (its mount point made there), then made read-only.
      if (!std::filesystem::is_directory(p, ec)) continue;
      for (const char* a : {"--tmpfs", p.c_str()}) argv.push_back(a);
      around.push_back(p);
    } else {
      hide_after.push_back(p);
    }
  }
  argv.push_back(mode == SandboxMode::kWorkspaceWrite ? "--bind" : "--ro-bind");
  argv.push_back(ws);
  argv.push_back(ws);
  for (const auto& p : around) {
    for (const char* a : {"--remount-ro", p.c_str()}) argv.push_back(a);
  }
  if (mode == SandboxMode::kWorkspaceWrite) {
    // Through a symlink: its target, when that is inside the workspace
    // (outside it, everything is read-only already).
    auto in_workspace = [&](const std::filesystem::path& rel) -> std::optional<std::string> {
      std::error_code ec;
      std::filesystem::path target = std::filesystem::canonical(root / rel, ec);
      if (ec || !inside(target, root)) return std::nullopt;
      return target.string();
    };
    auto read_only = [&](const std::filesystem::path& rel) {
      if (auto t = in_workspace(rel)) {
        for (const std::string& a : {std::string("--ro-bind"), *t, *t}) argv.push_back(a);
        return true;
      }
      return false;
    };
    // An absent directory is made an empty read-only one, so the command
    // cannot create it either.
    auto read_only_dir = [&](const std::filesystem::path& rel) {
      if (read_only(rel)) return;
      std::error_code ec;
      if (std::filesystem::is_symlink(std::filesystem::symlink_status(root / rel, ec))) return;
      auto parent = in_workspace(rel.parent_path().empty() ? "." : rel.parent_path());
      if (!parent) return;
      const std::string dir = (std::filesystem::path(*parent) / rel.filename()).string();
      for (const std::string& a : {std::string("--tmpfs"), dir, std::string("--remount-ro"), dir}) {
        argv.push_back(a);
      }
    };
    std::error_code ec;
    const bool git_dir = std::filesystem::is_directory(root / ".git", ec);
    if (git_dir) {
      read_only(".git/config");
      read_only(".git/modules");
      read_only_dir(".git/hooks");
    } else {
      read_only(".git");  // a `.git` file names the real git directory
    }
    read_only_dir(".agentloop");
    read_only(".mcp.json");
    read_only("AGENTS.md");
  }
  for (const auto& p : hide_after) hide(p);
  argv.push_back("--chdir");
  argv.push_back(ws);
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

namespace {

std::vector<std::string> SandboxArgv(const std::string& bwrap, SandboxMode mode, bool network,
                                     const std::string& ws, const std::string& command,
                                     const std::vector<std::string>& hidden = {}) {
  return SandboxedArgv(bwrap, mode, network, ws, {"/bin/bash", "-c", command}, hidden);
}

// Whether bubblewrap at `path` can build a sandbox here: empty string when
// usable. Runs it (a few milliseconds, mostly the kernel setting up the
// namespaces).
std::string TryBubblewrap(const std::string& path) {
  ProcessOptions probe;
  // The flags of a real call (a kernel may allow a mount namespace but not
  // a network namespace or a /proc mount).
  probe.argv = SandboxArgv(path, SandboxMode::kReadOnly, /*network=*/false, "/", "true");
  probe.env = ScrubbedEnvironment({});
  probe.timeout = std::chrono::milliseconds(10000);
  probe.output_cap = 2000;
  auto r = RunProcess(probe, {});
  if (!r.ok()) return "bubblewrap (" + path + ") is unusable: " + r.error().message();
  if (r->outcome == ProcessResult::Outcome::kExited && r->exit_code == 0) return "";
  // One line (front ends print the reason as one warning).
  std::string out(Trim(SanitizeUtf8(r->output)));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "bubblewrap (" + path +
         ") is unusable: it failed to create a sandbox here (user namespaces may be "
         "disabled in this container or kernel)" +
         (out.empty() ? "" : ": " + out);
}

// What a usable verdict of TryBubblewrap stands on, as one line: the
// executable (path, inode, size, change time), this boot of the kernel and
// the user. Empty when one of them cannot be read (nothing is remembered).
std::string ProbeKey(const std::string& bwrap) {
  struct stat st {};
  if (::stat(bwrap.c_str(), &st) != 0) return "";
  Result<std::string> boot = ReadFileToString("/proc/sys/kernel/random/boot_id", 4096);
  if (!boot.ok() || Trim(*boot).empty()) return "";
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(bwrap, ec);
  if (ec) return "";
  return "usable: " + canonical.string() + " inode " + std::to_string(st.st_ino) + " size " +
         std::to_string(st.st_size) + " ctime " + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec) + " boot " + std::string(Trim(*boot)) + " uid " +
         std::to_string(::getuid()) + "\n";
}

struct ProbeRequest {
  bool ahead = false;  // on a thread of its own, returning at once
  // A verdict "usable" kept between processes: `remembered` holds `key`
  // while the last probe found bubblewrap usable.
  std::filesystem::path remembered;
  std::string key;
  bool known_usable = false;  // `remembered` holds `key` now
};

// Keeps (or forgets) a usable verdict in `request.remembered`. Best effort.
void Remember(const ProbeRequest& request, const std::string& verdict) {
  if (request.remembered.empty() || request.key.empty()) return;
  std::error_code ec;
  if (!verdict.empty()) {
    std::filesystem::remove(request.remembered, ec);
  } else if (!request.known_usable) {
    (void)WriteFileAtomic(request.remembered, request.key);
  }
}

// TryBubblewrap's verdict, once per path and process: the first asker runs
// it, later askers wait for that verdict. A usable verdict remembered for
// the same key answers at once, and the probe still runs (ahead) to keep
// the file true for the next process. The cache is never destroyed: a tool
// may ask while the process exits.
std::shared_future<std::string> ProbeBubblewrap(const std::string& path,
                                                const ProbeRequest& request) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::shared_future<std::string>>();
  std::unique_lock<std::mutex> lock(mu);
  if (auto it = cache->find(path); it != cache->end()) return it->second;
  std::promise<std::string> promise;
  std::shared_future<std::string> verdict = promise.get_future().share();
  cache->emplace(path, verdict);
  lock.unlock();
  if (request.known_usable) promise.set_value("");
  auto probe = [path, request, promise = std::move(promise)]() mutable {
    std::string found = TryBubblewrap(path);
    Remember(request, found);
    if (!request.known_usable) promise.set_value(std::move(found));
  };
  if (request.ahead) {
    std::thread(std::move(probe)).detach();
  } else {
    probe();
  }
  return verdict;
}

// The bubblewrap executable `bwrap_path` names (empty: "bwrap" in PATH);
// empty when there is none.
std::string BubblewrapPath(const std::string& bwrap_path) {
  return FindExecutable(bwrap_path.empty() ? "bwrap" : bwrap_path);
}

}  // namespace

void StartSandboxProbe(const std::string& bwrap_path, const std::filesystem::path& remembered) {
  const std::string bwrap = BubblewrapPath(bwrap_path);
  if (bwrap.empty()) return;
  ProbeRequest request;
  request.ahead = true;
  if (!remembered.empty()) {
    request.remembered = remembered;
    request.key = ProbeKey(bwrap);
    Result<std::string> kept = ReadFileToString(remembered, 4096);
    request.known_usable = !request.key.empty() && kept.ok() && *kept == request.key;
  }
  (void)ProbeBubblewrap(bwrap, request);
}

std::string SandboxUnavailableReason(const std::string& bwrap_path) {
  std::string bwrap = BubblewrapPath(bwrap_path);
  if (bwrap.empty()) {
    return "bubblewrap (bwrap) was not found" +
           (bwrap_path.empty() ? std::string(" in PATH") : " at " + bwrap_path) +
           "; install the 'bubblewrap' package";
  }
  return ProbeBubblewrap(bwrap, ProbeRequest{}).get();
}

BashTool::BashTool(BashToolOptions options)
    : BuiltinTool(SharedSpec(options)), options_(std::move(options)) {}

// One spec per (max_timeout_ms, confined) in the process, shared by every
// instance with those options.
std::shared_ptr<const ToolSpec> BashTool::SharedSpec(const BashToolOptions& options) {
  const int max_timeout_ms = options.max_timeout_ms;
  const std::string unavailable = options.offer_in_read_only || options.confine_rule_allowed
                                      ? SandboxUnavailableReason(options.bwrap_path)
                                      : std::string();
  const bool confined = options.offer_in_read_only && unavailable.empty();
  // Rule-allowed lines: confined, or (no sandbox here) why they are asked.
  const bool confines_rule_allowed = options.confine_rule_allowed && unavailable.empty();
  // tools.sandbox_fallback = "warn" is a person's choice to run commands
  // unsandboxed where bubblewrap cannot run: rule-allowed lines too.
  const std::string rule_unavailable =
      options.confine_rule_allowed && options.fallback != SandboxFallback::kWarn ? unavailable : "";
  static std::mutex mu;
  static auto* specs =
      new std::map<std::tuple<int, bool, bool, std::string>, std::shared_ptr<const ToolSpec>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*specs)[{max_timeout_ms, confined, confines_rule_allowed, rule_unavailable}];
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
  s.confines_rule_allowed = confines_rule_allowed;
  if (!rule_unavailable.empty()) {
    s.confinement_unavailable = "the bash sandbox cannot run here: " + rule_unavailable +
                                " (a person approving the exact line may run it unsandboxed)";
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
  // A line a rule allowed runs at least in the workspace-write sandbox; it
  // never runs without one (the turn asks about such lines where there is
  // none).
  const bool confine = call.confined && options_.confine_rule_allowed && !ctx.read_only;
  if (confine) {
    if (mode == SandboxMode::kOff) mode = SandboxMode::kWorkspaceWrite;
    if (std::string why = SandboxUnavailableReason(options_.bwrap_path);
        !why.empty() && options_.fallback != SandboxFallback::kWarn) {
      return ToolOutput::Error("not run: a line a rule allows runs only in the bash sandbox, and " +
                               why);
    }
  }
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
    p.argv = SandboxArgv(bwrap, mode, network, ws, command, options_.hidden_paths);
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
  if (confine) out.details["rule_allowed"] = true;
  if (!fallback_reason.empty()) out.details["sandbox_unavailable"] = fallback_reason;
  if (auto d = call.input.find("description"); d != call.input.end() && d->is_string()) {
    out.details["description"] = *d;
  }
  return out;
}

}  // namespace agentloop::tools
