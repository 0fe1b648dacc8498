// The built-in tool classes. Most callers want builtin.h; these are exposed
// for tests, benchmarks and embedders that pick tools one by one.
//
// Thread-safety: each tool is immutable after construction; Run() may be
// called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentloop/tool.h"

namespace agentloop::tools {

// What the permission rules see of a built-in tool's call (ToolSpec::
// pattern_kind and the rest).
enum class RuleTarget {
  kNone,
  kFilePath,    // the file at `file_path` (read, write, edit)
  kSearchPath,  // the file or directory searched or listed under `path`, the
                // workspace root when not given; read rules apply (grep,
                // glob, ls)
  kCommand,     // the command line in `command` (bash)
};

// What a built-in tool's spec is made of (BuiltinSpec); the rest of ToolSpec
// keeps its defaults.
struct BuiltinSpecFields {
  std::string_view name;
  std::string_view description;
  std::string_view schema;  // the input schema, JSON text
  bool mutates = false;
  bool parallel_safe = false;
  RuleTarget target = RuleTarget::kNone;
};
ToolSpec BuiltinSpec(const BuiltinSpecFields& fields);

// A built-in tool: its spec is immutable and shared by every instance
// (Tool::shared_spec), so sessions share one list of specs.
class BuiltinTool : public Tool {
 public:
  const ToolSpec& spec() const final { return *spec_; }
  std::shared_ptr<const ToolSpec> shared_spec() const final { return spec_; }

 protected:
  explicit BuiltinTool(std::shared_ptr<const ToolSpec> spec) : spec_(std::move(spec)) {}

  // The spec `make()` returns, made at the first call and returned by every
  // later one: each lambda has a type of its own, so a tool's constructor
  // builds its spec once per process.
  template <typename Make>
  static std::shared_ptr<const ToolSpec> SpecOnce(Make make) {
    static const std::shared_ptr<const ToolSpec> spec = std::make_shared<const ToolSpec>(make());
    return spec;
  }

 private:
  std::shared_ptr<const ToolSpec> spec_;
};

class ReadTool final : public BuiltinTool {
 public:
  explicit ReadTool(size_t max_output_bytes = 256 * 1024);
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  size_t max_output_bytes_;
};

class WriteTool final : public BuiltinTool {
 public:
  WriteTool();
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;
};

class EditTool final : public BuiltinTool {
 public:
  EditTool();
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;
};

struct GrepToolOptions {
  size_t output_cap_chars = 30000;  // SIZE_MAX: no cap
  int threads = 0;                  // walker threads; 0: hardware concurrency
};

class GrepTool final : public BuiltinTool {
 public:
  explicit GrepTool(GrepToolOptions options = {});
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  GrepToolOptions options_;
};

struct GlobToolOptions {
  size_t max_results = 100;  // 0: no limit
  size_t output_cap_chars = 30000;
  int threads = 0;
};

class GlobTool final : public BuiltinTool {
 public:
  explicit GlobTool(GlobToolOptions options = {});
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  GlobToolOptions options_;
};

class LsTool final : public BuiltinTool {
 public:
  explicit LsTool(size_t max_entries = 1000, size_t output_cap_chars = 30000);
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  size_t max_entries_;
  size_t output_cap_chars_;
};

struct BashToolOptions {
  SandboxMode sandbox = SandboxMode::kOff;
  // Sandboxed commands may use the network (otherwise they get a network
  // namespace of their own with only a loopback device). Never in a
  // read-only command.
  bool network = false;
  // When `sandbox` is not off and bubblewrap cannot run here.
  SandboxFallback fallback = SandboxFallback::kRefuse;
  // Offer the tool in read-only commands (ToolSpec::confined_in_read_only),
  // where every command runs in a read-only sandbox without network. Only
  // takes effect when bubblewrap works here (probed at construction).
  bool offer_in_read_only = false;
  int default_timeout_ms = 120000;
  int max_timeout_ms = 600000;
  size_t output_cap_chars = 30000;
  // bubblewrap executable; empty: "bwrap" looked up in PATH.
  std::string bwrap_path;
  // A call a permission rule allowed (ToolCall::confined) runs in the
  // workspace-write sandbox (or the configured one, when stricter); where
  // bubblewrap cannot run, the spec says so (ToolSpec::
  // confinement_unavailable) and the turn asks about such calls instead.
  bool confine_rule_allowed = true;
  // Absolute paths hidden in every sandbox (an empty read-only directory,
  // /dev/null for a file): the user's configuration and data directories,
  // the trust store, a server's state.
  std::vector<std::string> hidden_paths;
  // The environment: `base_env` (nullopt: this process's) without secrets
  // (IsSecretName, ToolContext::scrubbed_env), keeping `env_pass`, adding
  // `env_set` (env/process.h ChildEnvironment).
  std::optional<std::vector<std::string>> base_env;
  std::vector<std::string> env_pass;
  std::map<std::string, std::string> env_set;
};

class BashTool final : public BuiltinTool {
 public:
  explicit BashTool(BashToolOptions options = {});
  // A sandbox that is required but unavailable (configured with fallback
  // refuse, or any call with ToolContext::read_only) is a
  // kFailedPrecondition Status (a configuration problem the model cannot
  // fix) saying what is missing; nothing is run.
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  static std::shared_ptr<const ToolSpec> SharedSpec(const BashToolOptions& options);

  BashToolOptions options_;
};

// Why bubblewrap (`bwrap_path`, empty: "bwrap" in PATH) cannot build the
// bash sandbox on this machine: not found, or a trial sandbox failed (e.g.
// user namespaces disabled in a container). Empty when it works. The trial
// runs once per path and process.
std::string SandboxUnavailableReason(const std::string& bwrap_path = "");
// Starts that trial on a thread of its own and returns at once, for a
// caller that knows a bash tool is about to be built: the tool's
// SandboxUnavailableReason then waits for this trial instead of running one
// (the trial's few milliseconds overlap the caller's own set-up).
// `remembered` (empty: none) is a file that keeps a usable verdict between
// processes, with what it stands on (the executable's path, inode, size and
// change time, the kernel's boot id, the user): when it holds a usable
// verdict for the same, SandboxUnavailableReason answers at once, and the
// trial still runs to keep the file true for the next process (a failed
// trial removes it). An unusable verdict is never kept: a sandbox that
// works is never skipped because it once did not; a stale usable one makes
// the sandboxed command fail, never run unconfined.
void StartSandboxProbe(const std::string& bwrap_path = "",
                       const std::filesystem::path& remembered = {});

// The bubblewrap command line (`bwrap` is its path) that runs `program`
// (argv) in the workspace `ws` confined as bash's commands are: the whole
// file system read-only, private /dev, /proc and /tmp, the workspace
// writable in kWorkspaceWrite (what git and agentloop run or obey still
// read-only: .git/config, .git/hooks, .git/modules, .agentloop, .mcp.json,
// AGENTS.md), `hidden` paths replaced by empty read-only ones, no network
// unless `network`, a PID namespace of its own. REQUIRES: mode is not kOff.
std::vector<std::string> SandboxedArgv(const std::string& bwrap, SandboxMode mode, bool network,
                                       const std::string& ws,
                                       const std::vector<std::string>& program,
                                       const std::vector<std::string>& hidden = {});

// Shared helpers (tool_util.cc).

// `lines` numbered from `first_lineno` in `cat -n` style ("%6d\t%s").
void AppendNumberedLine(std::string& out, uint64_t lineno, std::string_view line);

// Cuts `text` at a line boundary so that it fits in `cap` characters and
// appends `note` (which should say what was left out) when it did not fit.
// Returns whether it cut.
bool CapAtLine(std::string& text, size_t cap, const std::string& note);

// Reads optional fields of a tool input with defaults.
std::string StringArg(const Json& input, const char* name, std::string def = "");
int64_t IntArg(const Json& input, const char* name, int64_t def);
bool BoolArg(const Json& input, const char* name, bool def);

}  // namespace agentloop::tools
