// Test helpers for the tools module: a temporary workspace and a runner.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agentloop/tool.h"

namespace agentloop::tools::testing {

// /tmp/al_tools_XXXXXX/{ws,outside}; removed on destruction.
class TempWorkspace {
 public:
  TempWorkspace() {
    char tmpl[] = "/tmp/al_tools_XXXXXX";
    char* made = mkdtemp(tmpl);
    EXPECT_NE(made, nullptr);
    root_ = std::filesystem::canonical(made);
    std::filesystem::create_directories(root_ / "ws");
    std::filesystem::create_directories(root_ / "outside");
    ctx_.workspace = root_ / "ws";
    ctx_.ledger = std::make_shared<ReadLedger>();
    ctx_.session_id = "test";
  }
  ~TempWorkspace() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path ws() const { return root_ / "ws"; }
  std::filesystem::path outside() const { return root_ / "outside"; }
  ToolContext& ctx() { return ctx_; }

  // Writes a file (relative to ws unless absolute), creating directories.
  void Write(const std::filesystem::path& rel, const std::string& content) {
    std::filesystem::path p = rel.is_absolute() ? rel : ws() / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary);
    f << content;
  }
  std::string Slurp(const std::filesystem::path& rel) {
    std::filesystem::path p = rel.is_absolute() ? rel : ws() / rel;
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::filesystem::path root_;
  ToolContext ctx_;
};

// Runs `tool` with `input`; fails the test on an engine fault.
inline ToolOutput RunTool(Tool& tool, ToolContext& ctx, Json input) {
  ToolCall call{"call_1", tool.spec().name, std::move(input)};
  Status valid = ValidateAgainstSchema(call.input, tool.spec().input_schema);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  auto r = tool.Run(call, ctx);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  if (!r.ok()) return ToolOutput::Error("engine fault: " + r.error().ToString());
  return std::move(r).value();
}

}  // namespace agentloop::tools::testing
