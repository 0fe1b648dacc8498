// The HTTP server's state (ServerStateStore) on both stores: the
// notification outbox, idempotency keys and revoked console sign-ins.
#include "agentloop/server_state.h"

#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

class ServerStateTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    state_ = ServerStateOf(*store_);
    ASSERT_NE(state_, nullptr);
  }
  ServerStateStore* state_ = nullptr;
};
AL_STORE_CONFORMANCE(ServerStateTest);

// A key is claimed once; the same request again finds it in flight, then
// its answer; another request under it is refused; keys are per tenant and
// expire (an unfinished one sooner); a released key can be claimed again.
TEST_P(ServerStateTest, IdempotencyKeysAreClaimedOnceAndExpire) {
  using K = IdempotencyClaim::Kind;
  using std::chrono::hours;
  using std::chrono::minutes;
  auto claim = [&](std::string_view tenant, std::string_view key, std::string_view fp) {
    auto c = state_->ClaimIdempotencyKey(tenant, key, fp, hours(24), minutes(5));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : IdempotencyClaim{};
  };
  EXPECT_EQ(claim("t1", "k", "a").kind, K::kClaimed);
  EXPECT_EQ(claim("t1", "k", "a").kind, K::kInFlight);
  EXPECT_EQ(claim("t1", "k", "b").kind, K::kReused);
  EXPECT_EQ(claim("t2", "k", "b").kind, K::kClaimed);
  ASSERT_TRUE(state_->FinishIdempotencyKey("t1", "k", "{\"status\":202}").ok());
  IdempotencyClaim done = claim("t1", "k", "a");
  EXPECT_EQ(done.kind, K::kDone);
  EXPECT_EQ(done.response, "{\"status\":202}");

  // t2's key is still unfinished after 6 minutes: abandoned, claimable.
  clock_ms_ += 6 * 60 * 1000;
  EXPECT_EQ(claim("t2", "k", "c").kind, K::kClaimed);
  EXPECT_EQ(claim("t1", "k", "a").kind, K::kDone);
  // A day later the finished key is gone too.
  clock_ms_ += 24 * 3600 * 1000;
  EXPECT_EQ(claim("t1", "k", "z").kind, K::kClaimed);
  ASSERT_TRUE(state_->ReleaseIdempotencyKey("t1", "k").ok());
  EXPECT_EQ(claim("t1", "k", "y").kind, K::kClaimed);
}

// The outbox: a notification is added once (by id), is not claimable while
// its adder's lease runs, is then claimed by one caller at a time (a claim
// leases it again), stays due until finished, and is forgotten after
// max_age or with its session.
TEST_P(ServerStateTest, NotificationOutboxDeliversUntilFinished) {
  using std::chrono::hours;
  using std::chrono::minutes;
  std::string id = NewSession();
  auto note = [&](std::string nid, std::string body) {
    return OutboxNotification{std::move(nid),  id, "helper", "approval.requested",
                              std::move(body), 0};
  };
  auto claim = [&] {
    auto c = state_->ClaimNotifications(10, minutes(2), hours(72));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    std::vector<std::string> ids;
    if (c.ok()) {
      for (const OutboxNotification& n : *c) ids.push_back(n.id);
    }
    return ids;
  };
  ASSERT_EQ(*state_->AddNotification(note("dlv_1", "{\"n\":1}"), minutes(2)), true);
  clock_ms_ += 1;
  ASSERT_EQ(*state_->AddNotification(note("dlv_2", "{\"n\":2}"), minutes(2)), true);
  // The same id again adds nothing and keeps the first body.
  EXPECT_EQ(*state_->AddNotification(note("dlv_1", "{\"n\":9}"), minutes(2)), false);
  EXPECT_EQ(state_->AddNotification(note("", "{}"), minutes(2)).status().code(),
            Code::kInvalidArgument);
  OutboxNotification orphan = note("dlv_x", "{}");
  orphan.session_id = "nope";
  EXPECT_EQ(state_->AddNotification(orphan, minutes(2)).status().code(), Code::kNotFound);

  // The adders deliver them meanwhile: nothing is due yet.
  EXPECT_TRUE(claim().empty());
  clock_ms_ += 2 * 60 * 1000;
  auto due = state_->ClaimNotifications(10, minutes(2), hours(72));
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  ASSERT_EQ(due->size(), 2u);
  EXPECT_EQ((*due)[0].id, "dlv_1");
  EXPECT_EQ((*due)[0].body, "{\"n\":1}");
  EXPECT_EQ((*due)[0].session_id, id);
  EXPECT_EQ((*due)[0].agent, "helper");
  EXPECT_EQ((*due)[0].event, "approval.requested");
  EXPECT_EQ((*due)[1].id, "dlv_2");
  // Claimed: leased to the claimer, due again when the lease ends unless
  // finished.
  EXPECT_TRUE(claim().empty());
  ASSERT_TRUE(state_->FinishNotification("dlv_1").ok());
  ASSERT_TRUE(state_->FinishNotification("dlv_unknown").ok());
  clock_ms_ += 2 * 60 * 1000;
  EXPECT_EQ(claim(), std::vector<std::string>{"dlv_2"});
  // A finished one is never due again, and its id adds nothing.
  EXPECT_EQ(*state_->AddNotification(note("dlv_1", "{}"), minutes(2)), false);
  clock_ms_ += 2 * 60 * 1000;
  EXPECT_EQ(claim(), std::vector<std::string>{"dlv_2"});

  // Older than max_age: forgotten, delivered or not (dlv_1 can be added
  // again).
  clock_ms_ += 72 * 3600 * 1000;
  EXPECT_TRUE(claim().empty());
  EXPECT_EQ(*state_->AddNotification(note("dlv_1", "{}"), std::chrono::milliseconds(0)), true);
  // A removed session takes its notifications with it.
  ASSERT_TRUE(store_->RemoveSession(id).ok());
  EXPECT_TRUE(claim().empty());
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM notification_outbox"), 0);
}

// Two stores (processes) claiming together never get the same notification.
TEST_P(ServerStateTest, NotificationClaimsDoNotOverlap) {
  std::string id = NewSession();
  for (int i = 0; i < 6; ++i) {
    OutboxNotification n{"dlv_" + std::to_string(i), id, "a", "turn.completed", "{}", 0};
    ASSERT_TRUE(state_->AddNotification(n, std::chrono::milliseconds(0)).ok());
  }
  auto other = OpenStore();
  ASSERT_NE(other, nullptr);
  ServerStateStore* other_state = ServerStateOf(*other);
  ASSERT_NE(other_state, nullptr);
  auto first = state_->ClaimNotifications(4, std::chrono::minutes(2), std::chrono::hours(1));
  auto second = other_state->ClaimNotifications(4, std::chrono::minutes(2), std::chrono::hours(1));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->size(), 4u);
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[0].id, "dlv_4");
  EXPECT_EQ((*second)[1].id, "dlv_5");
}

// A revoked credential is listed until it expires, then forgotten; revoking
// it twice lists it once.
TEST_P(ServerStateTest, RevokedCredentialsAreListedUntilTheyExpire) {
  const int64_t now = clock_ms_.load();
  ASSERT_TRUE(state_->RevokeCredential("team", "g1.aaaa", now + 1000).ok());
  ASSERT_TRUE(state_->RevokeCredential("team", "g1.aaaa", now + 1000).ok());
  ASSERT_TRUE(state_->RevokeCredential("other", "g2.bbbb", now + 5000).ok());
  EXPECT_EQ(state_->RevokeCredential("team", "", now + 1000).code(), Code::kInvalidArgument);
  auto listed = state_->ListRevokedCredentials();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, (std::vector<std::string>{"g1.aaaa", "g2.bbbb"}));
  // Another store (process) sees them.
  auto other = OpenStore();
  ASSERT_NE(other, nullptr);
  ServerStateStore* other_state = ServerStateOf(*other);
  ASSERT_NE(other_state, nullptr);
  EXPECT_EQ(*other_state->ListRevokedCredentials(),
            (std::vector<std::string>{"g1.aaaa", "g2.bbbb"}));
  clock_ms_ += 1000;
  EXPECT_EQ(*state_->ListRevokedCredentials(), std::vector<std::string>{"g2.bbbb"});
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM revoked_credentials"), 1);
}

}  // namespace
}  // namespace agentloop::store
