#include "server/secrets.h"

#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "base/testing/files.h"

namespace agentloop::server {
namespace {

namespace fs = std::filesystem;

unsigned ModeOf(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return st.st_mode & 07777;
}

TEST(Secrets, AreCreatedOnceReadableOnlyByTheUserAndKept) {
  agentloop::testing::TempDir tmp;
  const fs::path path = tmp.path() / "data" / kCookieSecretFile;
  Result<std::string> made = LoadOrCreateSecret(path);
  ASSERT_TRUE(made.ok()) << made.error().ToString();
  EXPECT_EQ(made->size(), 64u);
  EXPECT_EQ(ModeOf(path), 0600u);
  Result<std::string> again = LoadOrCreateSecret(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *made);
  Result<std::string> rotated = RotateSecret(path);
  ASSERT_TRUE(rotated.ok());
  EXPECT_NE(*rotated, *made);
  EXPECT_EQ(*LoadOrCreateSecret(path), *rotated);
  EXPECT_EQ(ModeOf(path), 0600u);
  fs::remove(path);
  Result<std::string> fresh = LoadOrCreateSecret(path);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(*fresh, *rotated);
}

TEST(Secrets, AFileOthersCanReadOrALinkIsRefused) {
  agentloop::testing::TempDir tmp;
  const fs::path path = tmp.path() / kServerTokenFile;
  std::ofstream(path) << std::string(64, 'a') << "\n";
  ::chmod(path.c_str(), 0644);
  Result<std::string> open = LoadOrCreateSecret(path);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().code(), Code::kPermissionDenied);
  EXPECT_NE(open.error().message().find("chmod 600"), std::string::npos);
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(*LoadOrCreateSecret(path), std::string(64, 'a'));

  const fs::path link = tmp.path() / "linked";
  fs::create_symlink(path, link);
  EXPECT_EQ(LoadOrCreateSecret(link).error().code(), Code::kFailedPrecondition);
  const fs::path shortfile = tmp.path() / "short";
  std::ofstream(shortfile) << "abc\n";
  ::chmod(shortfile.c_str(), 0600);
  EXPECT_EQ(LoadOrCreateSecret(shortfile).error().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace agentloop::server
