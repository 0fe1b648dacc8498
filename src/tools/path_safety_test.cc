// The file tools against symbolic links and permission rules on the real
// path: race-free opens, and what grep, glob and ls leave out.
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "base/testing/text.h"
#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

using testing::RunTool;
using testing::TempWorkspace;

using ::agentloop::testing::Has;

// Entries below `dir`, directories included.
size_t CountEntries(const std::filesystem::path& dir) {
  size_t n = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    ++n;
  }
  return n;
}

// Until `done` (at most two million steps, no sleeps): the directory `dir`
// is parked at `parked` and replaced by a symbolic link to `target`, then
// put back, so that half the time `dir` is a link out of the workspace.
// Leaves `dir` a real directory.
void SwapLoop(const std::string& dir, const std::string& parked, const std::string& target,
              const std::atomic<bool>& done, std::atomic<long>& swaps) {
  bool linked = false;
  for (long i = 0; i < 2'000'000 && !done.load(); ++i) {
    if (!linked) {
      if (rename(dir.c_str(), parked.c_str()) != 0) continue;
      if (symlink(target.c_str(), dir.c_str()) != 0) {
        rename(parked.c_str(), dir.c_str());
        continue;
      }
      linked = true;
    } else {
      unlink(dir.c_str());
      rename(parked.c_str(), dir.c_str());
      linked = false;
    }
    swaps.fetch_add(1);
  }
  if (linked) {
    unlink(dir.c_str());
    rename(parked.c_str(), dir.c_str());
  }
}

// A path_rule that denies (or asks for) reading one file, as the session's
// rules would for `deny read(secret.txt)`.
void DenyReadOf(ToolContext& ctx, const std::filesystem::path& file, PathRule rule) {
  ctx.path_rule = [file = file.string(), rule](std::string_view, const std::string& abs) {
    return abs == file ? rule : PathRule::kNone;
  };
}

TEST(PathSafetyTest, WritesNeverLandOutsideWhileADirectoryIsSwappedForALink) {
  TempWorkspace t;
  t.ctx().ledger = nullptr;  // overwrites need no prior read here
  std::filesystem::create_directories(t.ws() / "d");
  const std::string d = (t.ws() / "d").string();
  const std::string parked = (t.ws() / "d.real").string();
  const std::string target = t.outside().string();
  std::atomic<bool> done{false};
  std::atomic<long> swaps{0};
  // Swaps ws/d between a real directory and a symbolic link to `outside`
  // until the writer is done (bounded, no sleeps).
  std::thread swapper([&] { SwapLoop(d, parked, target, done, swaps); });
  WriteTool write;
  EditTool edit;
  int written = 0;
  for (int i = 0; i < 400; ++i) {
    // Mostly files directly in d (the link's target has no subdirectories
    // for a path-based write to fail on), some in directories made on the way.
    std::string name = i % 4 == 0 ? "d/sub" + std::to_string(i % 3) + "/f.txt"
                                  : "d/f" + std::to_string(i % 13) + ".txt";
    auto out = RunTool(write, t.ctx(), Json{{"file_path", name}, {"content", "x"}});
    if (!out.is_error) ++written;
    RunTool(edit, t.ctx(), Json{{"file_path", name}, {"old_string", "x"}, {"new_string", "y"}});
  }
  done.store(true);
  swapper.join();
  EXPECT_GT(swaps.load(), 0);
  EXPECT_GT(written, 0);
  EXPECT_EQ(CountEntries(t.outside()), 0u) << "a write followed the swapped-in link";
}

TEST(PathSafetyTest, ReadsNeverFollowALinkSwappedIn) {
  TempWorkspace t;
  t.Write("d/f.txt", "inside\n");
  t.Write(t.outside() / "f.txt", "OUTSIDE-SECRET\n");
  const std::string d = (t.ws() / "d").string();
  const std::string parked = (t.ws() / "d.real").string();
  std::atomic<bool> done{false};
  std::atomic<long> swaps{0};
  std::thread swapper([&] { SwapLoop(d, parked, t.outside().string(), done, swaps); });
  ReadTool read;
  bool leaked = false;
  for (int i = 0; i < 3000 && !leaked; ++i) {
    auto out = RunTool(read, t.ctx(), Json{{"file_path", "d/f.txt"}});
    leaked = Has(out.content, "OUTSIDE-SECRET");
  }
  done.store(true);
  swapper.join();
  EXPECT_FALSE(leaked);
}

TEST(PathSafetyTest, InWorkspaceLinksAreStillFollowedAndWrittenAtTheirTarget) {
  TempWorkspace t;
  t.ctx().ledger = nullptr;
  t.Write("real/a.txt", "one\n");
  std::filesystem::create_symlink("real", t.ws() / "alias");
  ReadTool read;
  auto r = RunTool(read, t.ctx(), Json{{"file_path", "alias/a.txt"}});
  EXPECT_FALSE(r.is_error) << r.content;
  EXPECT_TRUE(Has(r.content, "one"));
  WriteTool write;
  auto w = RunTool(write, t.ctx(), Json{{"file_path", "alias/new/b.txt"}, {"content", "two"}});
  EXPECT_FALSE(w.is_error) << w.content;
  EXPECT_EQ(t.Slurp("real/new/b.txt"), "two");
  EXPECT_TRUE(std::filesystem::is_symlink(t.ws() / "alias"));
}

TEST(PathSafetyTest, AFileThatIsALinkIsReplacedNotWrittenThrough) {
  TempWorkspace t;
  t.ctx().ledger = nullptr;
  t.Write(t.outside() / "victim.txt", "keep\n");
  // A link out of the workspace is refused by ResolvePath already.
  std::filesystem::create_symlink(t.outside() / "victim.txt", t.ws() / "out.txt");
  WriteTool write;
  auto w = RunTool(write, t.ctx(), Json{{"file_path", "out.txt"}, {"content", "x"}});
  EXPECT_TRUE(w.is_error);
  EXPECT_EQ(t.Slurp(t.outside() / "victim.txt"), "keep\n");
}

TEST(PathSafetyTest, GrepLeavesOutFilesARuleKeepsFromReading) {
  TempWorkspace t;
  t.Write("secret.txt", "TOKEN=hunter2\n");
  t.Write("src/a.txt", "TOKEN=public\n");
  GrepTool grep;
  Json in{{"pattern", "TOKEN"}, {"output_mode", "content"}};
  auto open = RunTool(grep, t.ctx(), in);
  ASSERT_TRUE(Has(open.content, "hunter2"));  // the test can fail
  for (PathRule rule : {PathRule::kDeny, PathRule::kAsk}) {
    DenyReadOf(t.ctx(), t.ws() / "secret.txt", rule);
    auto out = RunTool(grep, t.ctx(), in);
    EXPECT_FALSE(out.is_error);
    EXPECT_FALSE(Has(out.content, "hunter2")) << out.content;
    EXPECT_TRUE(Has(out.content, "public"));
    EXPECT_TRUE(Has(out.content, "1 file was not searched")) << out.content;
    auto files = RunTool(grep, t.ctx(), Json{{"pattern", "hunter2"}});
    EXPECT_FALSE(Has(files.content, "secret.txt")) << files.content;
  }
  // The file itself, named directly, is refused under a deny.
  DenyReadOf(t.ctx(), t.ws() / "secret.txt", PathRule::kDeny);
  auto direct = RunTool(grep, t.ctx(), Json{{"pattern", "TOKEN"}, {"path", "secret.txt"}});
  EXPECT_TRUE(direct.is_error);
  EXPECT_FALSE(Has(direct.content, "hunter2"));
}

TEST(PathSafetyTest, ANamedLinkToADeniedFileIsRefusedWhereItLeads) {
  TempWorkspace t;
  t.ctx().ledger = nullptr;
  t.Write("secret.txt", "TOKEN=hunter2\n");
  std::filesystem::create_directories(t.ws() / "docs");
  std::filesystem::create_symlink("../secret.txt", t.ws() / "docs" / "notes.md");
  DenyReadOf(t.ctx(), t.ws() / "secret.txt", PathRule::kDeny);
  ReadTool read;
  auto r = RunTool(read, t.ctx(), Json{{"file_path", "docs/notes.md"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_FALSE(Has(r.content, "hunter2"));
  GrepTool grep;
  auto g =
      RunTool(grep, t.ctx(),
              Json{{"pattern", "TOKEN"}, {"path", "docs/notes.md"}, {"output_mode", "content"}});
  EXPECT_TRUE(g.is_error);
  EXPECT_FALSE(Has(g.content, "hunter2"));
  WriteTool write;
  EditTool edit;
  t.ctx().path_rule = [&](std::string_view tool, const std::string& abs) {
    return tool != "read" && abs == (t.ws() / "secret.txt").string() ? PathRule::kDeny
                                                                     : PathRule::kNone;
  };
  EXPECT_TRUE(
      RunTool(write, t.ctx(), Json{{"file_path", "docs/notes.md"}, {"content", "x"}}).is_error);
  EXPECT_TRUE(
      RunTool(edit, t.ctx(),
              Json{{"file_path", "docs/notes.md"}, {"old_string", "TOKEN"}, {"new_string", "X"}})
          .is_error);
  EXPECT_EQ(t.Slurp("secret.txt"), "TOKEN=hunter2\n");
}

TEST(PathSafetyTest, GlobAndLsLeaveOutWhatARuleKeepsFromReading) {
  TempWorkspace t;
  t.Write("secret.txt", "x");
  t.Write("keys/id.txt", "x");
  t.Write("src/a.txt", "x");
  GlobTool glob;
  LsTool ls;
  ASSERT_TRUE(Has(RunTool(glob, t.ctx(), Json{{"pattern", "**/*.txt"}}).content, "secret.txt"));
  ASSERT_TRUE(Has(RunTool(ls, t.ctx(), Json::object()).content, "keys/"));
  const std::string secret = (t.ws() / "secret.txt").string();
  const std::string keys = (t.ws() / "keys").string();
  t.ctx().path_rule = [&](std::string_view, const std::string& abs) {
    return abs == secret || abs == keys || abs.starts_with(keys + "/") ? PathRule::kDeny
                                                                       : PathRule::kNone;
  };
  auto g = RunTool(glob, t.ctx(), Json{{"pattern", "**/*.txt"}});
  EXPECT_FALSE(Has(g.content, "secret.txt")) << g.content;
  EXPECT_FALSE(Has(g.content, "id.txt")) << g.content;
  EXPECT_TRUE(Has(g.content, "src/a.txt"));
  auto l = RunTool(ls, t.ctx(), Json::object());
  EXPECT_FALSE(Has(l.content, "secret.txt")) << l.content;
  EXPECT_FALSE(Has(l.content, "keys")) << l.content;
  EXPECT_TRUE(Has(l.content, "src/"));
}

}  // namespace
}  // namespace agentloop::tools
