// Test helpers for files: a temporary directory removed at scope exit, and
// whole-file read/write. For tests only.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "base/ids.h"

namespace agentloop::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "al_test")
      : path_(std::filesystem::temp_directory_path() / (prefix + "_" + NewId("t"))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace agentloop::testing
