// Test helper for HTTP URLs. For tests only.
#pragma once

#include <gtest/gtest.h>

#include "providers/http_url.h"

namespace agentloop::testing {

// The parsed `s`, which a test writes and knows to be valid (a failure to
// parse fails the test and yields an empty URL).
inline HttpUrl Url(const char* s) {
  Result<HttpUrl> u = ParseHttpUrl(s);
  EXPECT_TRUE(u.ok()) << s;
  return u.ok() ? *u : HttpUrl{};
}

}  // namespace agentloop::testing
