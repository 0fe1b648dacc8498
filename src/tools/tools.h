// The built-in tool classes. Most callers want builtin.h; these are exposed
// for tests, benchmarks and embedders that pick tools one by one.
//
// Thread-safety: each tool is immutable after construction; Run() may be
// called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agentloop/tool.h"

namespace agentloop::tools {

class ReadTool final : public Tool {
 public:
  explicit ReadTool(size_t max_output_bytes = 256 * 1024);
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
  size_t max_output_bytes_;
};

class WriteTool final : public Tool {
 public:
  WriteTool();
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
};

class EditTool final : public Tool {
 public:
  EditTool();
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
};

struct GrepToolOptions {
  size_t output_cap_chars = 30000;  // SIZE_MAX: no cap
  int threads = 0;                  // walker threads; 0: hardware concurrency
};

class GrepTool final : public Tool {
 public:
  explicit GrepTool(GrepToolOptions options = {});
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
  GrepToolOptions options_;
};

struct GlobToolOptions {
  size_t max_results = 100;  // 0: no limit
  size_t output_cap_chars = 30000;
  int threads = 0;
};

class GlobTool final : public Tool {
 public:
  explicit GlobTool(GlobToolOptions options = {});
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
  GlobToolOptions options_;
};

class LsTool final : public Tool {
 public:
  explicit LsTool(size_t max_entries = 1000, size_t output_cap_chars = 30000);
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
  size_t max_entries_;
  size_t output_cap_chars_;
};

struct BashToolOptions {
  std::string sandbox = "off";  // "off" | "workspace-write" | "read-only"
  int default_timeout_ms = 120000;
  int max_timeout_ms = 600000;
  size_t output_cap_chars = 30000;
  // bubblewrap executable; empty: "bwrap" looked up in PATH.
  std::string bwrap_path;
};

class BashTool final : public Tool {
 public:
  explicit BashTool(BashToolOptions options = {});
  const ToolSpec& spec() const override { return spec_; }
  // A requested sandbox that is unavailable is a kFailedPrecondition Status
  // (a configuration problem the model cannot fix), with a message saying
  // what is missing.
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;

 private:
  ToolSpec spec_;
  BashToolOptions options_;
};

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
