#include "server/http_server.h"

#include <set>

#include <gtest/gtest.h>

#include "agentloop/json.h"

#include "server/server.h"

namespace agentloop::server {
namespace {

TEST(PercentDecode, DecodesAndRefusesMalformedEscapes) {
  EXPECT_EQ(*PercentDecode("/v1/a%20b", false), "/v1/a b");
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_EQ(*PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(*PercentDecode("%41%42", false), "AB");
  EXPECT_EQ(PercentDecode("%4", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PercentDecode("%", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PercentDecode("%zz", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PercentDecode("a%00b", true).status().code(), Code::kInvalidArgument);
}

TEST(ParseListenAddress, AcceptsHostPortAndRefusesNames) {
  auto a = ParseListenAddress("127.0.0.1:7878");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port(), 7878);
  EXPECT_TRUE(a->address().is_loopback());
  EXPECT_TRUE(ParseListenAddress(":0")->address().is_loopback());
  EXPECT_TRUE(ParseListenAddress("localhost:1")->address().is_loopback());
  EXPECT_TRUE(ParseListenAddress("[::1]:9")->address().is_v6());
  EXPECT_FALSE(ParseListenAddress("0.0.0.0:80")->address().is_loopback());
  EXPECT_EQ(ParseListenAddress("127.0.0.1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseListenAddress("127.0.0.1:99999").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseListenAddress("example.com:80").status().code(), Code::kInvalidArgument);
}

TEST(Problem, IsProblemJsonWithAStableCode) {
  Response r = Problem(409, "session_busy", "busy", "req_1");
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.content_type, "application/problem+json");
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["code"], "session_busy");
  EXPECT_EQ(j["status"], 409);
  EXPECT_EQ(j["title"], "Conflict");
  EXPECT_EQ(j["detail"], "busy");
  EXPECT_EQ(j["request_id"], "req_1");
  EXPECT_EQ(j["type"], "urn:agentloop:problem:session_busy");
}

TEST(ParseTokenGrant, NeedsAHashATenantAndKnownScopes) {
  std::string hash(64, 'a');
  auto g = ParseTokenGrant(hash + ":acme:read,approve");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tenant, "acme");
  EXPECT_EQ(g->scopes, unsigned{kScopeRead | kScopeApprove});
  EXPECT_EQ(ParseTokenGrant("secret-token:acme:read").status().code(), Code::kInvalidArgument);
  EXPECT_NE(ParseTokenGrant("secret:acme:read").status().message().find("SHA-256"),
            std::string::npos);
  EXPECT_EQ(ParseTokenGrant(hash + ":acme:root").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":Acme Corp:read").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":acme:").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseTokenGrant(hash + ":acme").status().code(), Code::kInvalidArgument);
}

// The checked-in description and the route table agree, both ways.
TEST(OpenApi, DescribesExactlyTheRoutes) {
  Json spec = Json::parse(OpenApiSpec(), nullptr, false);
  ASSERT_FALSE(spec.is_discarded());
  EXPECT_EQ(spec["openapi"], "3.1.0");
  std::set<std::pair<std::string, std::string>> described, routed;
  for (const auto& [path, ops] : spec["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string m = method;
      for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      described.emplace(m, path);
      EXPECT_TRUE(op.contains("responses")) << m << " " << path;
    }
  }
  for (const auto& r : RouteTable()) routed.insert(r);
  EXPECT_EQ(described, routed);
  EXPECT_GE(routed.size(), 25u);
}

}  // namespace
}  // namespace agentloop::server
