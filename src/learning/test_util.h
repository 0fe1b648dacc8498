// Test helpers: a fresh temporary directory per test.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "base/ids.h"

namespace agentloop::learning::testing {

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("al_learning_" + NewId("t"))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
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

}  // namespace agentloop::learning::testing
