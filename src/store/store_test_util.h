// Shared fixtures of the store tests: a temporary database and a manual clock.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agentloop/store.h"

#include "base/ids.h"
#include "protocol/codec.h"
#include "store/sqlite_store.h"

namespace agentloop::store {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "al_store_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p != nullptr ? std::filesystem::path(p) : std::filesystem::path(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class StoreTest : public ::testing::Test {
 protected:
  SqliteStoreOptions Options() {
    SqliteStoreOptions o;
    o.now_ms = [this] { return clock_ms_.load(); };
    o.lock_heartbeat = false;
    return o;
  }
  std::unique_ptr<SqliteStore> OpenStore() {
    auto s = SqliteStore::Open(db_path(), Options());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void SetUp() override { store_ = OpenStore(); }
  std::filesystem::path db_path() const { return dir_.path() / "sessions.db"; }

  std::string NewSession(std::string workspace = "/work/ws") {
    NewSessionParams p;
    p.workspace = workspace;
    p.provider = "script";
    p.model = "m1";
    auto info = store_->CreateSession(p);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->id : std::string();
  }

  // 2026-01-01T00:00:00Z: the events' ts (the test events' seq is added).
  static constexpr int64_t kTestTs = 1767225600000;

  static Event MessageEvent(uint64_t seq, const Message& m, std::string turn = "turn_1") {
    Event e;
    e.type = EventType::kMessage;
    e.turn_id = std::move(turn);
    e.seq = seq;
    e.ts = kTestTs + static_cast<int64_t>(seq);
    e.data = Json{{"message", ToJson(m)}};
    return e;
  }
  static Event MakeEvent(EventType type, uint64_t seq, Json data, std::string turn = "turn_1") {
    Event e;
    e.type = type;
    e.turn_id = std::move(turn);
    e.seq = seq;
    e.ts = kTestTs + static_cast<int64_t>(seq);
    e.data = std::move(data);
    return e;
  }
  static Message AssistantWithTools(std::vector<std::string> ids) {
    Message m;
    m.role = Role::kAssistant;
    m.content.push_back(ContentBlock::Text("let me look"));
    for (auto& id : ids) {
      m.content.push_back(ContentBlock::ToolUse(id, "read", Json{{"path", "a.txt"}}));
    }
    return m;
  }

  TempDir dir_;
  std::atomic<int64_t> clock_ms_{1'700'000'000'000};
  std::unique_ptr<SqliteStore> store_;
};

}  // namespace agentloop::store
