// The PostgreSQL client library is opened at run time: a missing or foreign
// library is a clear error naming the package to install, never a crash.
#include "store/libpq_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::store {
namespace {

using ::testing::HasSubstr;

TEST(LibpqLoaderTest, AMissingLibraryNamesTheDebianPackage) {
  Status s = CheckLibpqForTest("libagentloop-no-such-libpq.so.5");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("libpq5"));
  EXPECT_THAT(s.message(), HasSubstr("libagentloop-no-such-libpq.so.5"));
}

TEST(LibpqLoaderTest, ALibraryWithoutTheFunctionsIsRefusedNamingThem) {
  Status s = CheckLibpqForTest("libc.so.6");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("PQconnectdb"));
  EXPECT_THAT(s.message(), HasSubstr("PQexecParams"));
}

TEST(LibpqLoaderTest, DebiansLibpqHasEveryFunctionTheStoreCalls) {
  Status s = CheckLibpqForTest("libpq.so.5");
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(LoadLibpq().ok());
  // Later calls answer the first call's status.
  EXPECT_TRUE(LoadLibpq().ok());
}

}  // namespace
}  // namespace agentloop::store
