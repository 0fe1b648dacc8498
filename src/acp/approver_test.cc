#include "acp/approver.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/files.h"

namespace agentloop::acp {
namespace {

using ::testing::HasSubstr;

class ApproverTest : public ::testing::Test {
 protected:
  ApproverTest()
      : mapper_(tmp_.path(), [this](Json u) { updates_.push_back(std::move(u)); }),
        approver_("ses_1", tmp_.path(), mapper_,
                  [this](std::string_view method, Json params, std::stop_token) -> Result<Json> {
                    asked_.push_back(Json{{"method", std::string(method)}, {"params", params}});
                    return answer_;
                  }) {}

  static ApprovalRequest Write(std::string id = "c1") {
    ApprovalRequest r;
    r.session_id = "ses_1";
    r.call = ToolCall{std::move(id), "write", Json{{"file_path", "a.txt"}, {"content", "x"}}};
    r.spec = ToolSpec{"write", "", Json::object(), true, false};
    return r;
  }
  static Json Selected(std::string id) {
    return Json{{"outcome", Json{{"outcome", "selected"}, {"optionId", std::move(id)}}}};
  }

  testing::TempDir tmp_;
  std::vector<Json> updates_;
  std::vector<Json> asked_;
  Result<Json> answer_ = Json();
  UpdateMapper mapper_;
  AcpApprover approver_;
};

TEST_F(ApproverTest, AllowOnceAndAllowAlways) {
  answer_ = Selected("allow_once");
  ApprovalDecision d = approver_.Decide(Write(), {});
  EXPECT_EQ(d.kind, ApprovalDecision::Kind::kAllow);
  EXPECT_FALSE(d.remember_for_session);
  EXPECT_EQ(d.by, "acp");
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0]["method"], "session/request_permission");
  EXPECT_EQ(asked_[0]["params"]["toolCall"]["toolCallId"], "c1");
  // The call was announced before it was asked about.
  ASSERT_EQ(updates_.size(), 1u);
  EXPECT_EQ(updates_[0]["sessionUpdate"], "tool_call");

  answer_ = Selected("allow_always");
  d = approver_.Decide(Write("c2"), {});
  EXPECT_EQ(d.kind, ApprovalDecision::Kind::kAllow);
  // The engine remembers it for the session (RememberingApprover).
  EXPECT_TRUE(d.remember_for_session);
}

TEST_F(ApproverTest, RejectAlwaysIsNotAskedAgain) {
  answer_ = Selected("reject_always");
  EXPECT_EQ(approver_.Decide(Write("c1"), {}).kind, ApprovalDecision::Kind::kDeny);
  ApprovalDecision again = approver_.Decide(Write("c2"), {});
  EXPECT_EQ(again.kind, ApprovalDecision::Kind::kDeny);
  EXPECT_EQ(asked_.size(), 1u);
  // Another access is asked.
  ApprovalRequest other = Write("c3");
  other.call.input["content"] = "y";
  answer_ = Selected("reject_once");
  EXPECT_EQ(approver_.Decide(other, {}).kind, ApprovalDecision::Kind::kDeny);
  EXPECT_EQ(asked_.size(), 2u);
}

TEST_F(ApproverTest, CancelledErrorsAndStopDeny) {
  answer_ = Json{{"outcome", Json{{"outcome", "cancelled"}}}};
  ApprovalDecision d = approver_.Decide(Write(), {});
  EXPECT_EQ(d.kind, ApprovalDecision::Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("cancelled"));

  answer_ = Unavailable("the client closed the connection");
  d = approver_.Decide(Write(), {});
  EXPECT_EQ(d.kind, ApprovalDecision::Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("closed the connection"));

  answer_ = Selected("something_else");
  EXPECT_EQ(approver_.Decide(Write(), {}).kind, ApprovalDecision::Kind::kDeny);

  std::stop_source stop;
  stop.request_stop();
  const size_t before = asked_.size();
  EXPECT_EQ(approver_.Decide(Write(), stop.get_token()).kind, ApprovalDecision::Kind::kDeny);
  EXPECT_EQ(asked_.size(), before);
}

TEST_F(ApproverTest, QuestionsWithOptionsAreAskedAsOptions) {
  ApprovalRequest q;
  q.kind = PendingKind::kQuestion;
  q.reason = "Which colour?";
  q.call = ToolCall{"q1", "ask_user",
                    Json{{"question", "Which colour?"}, {"options", Json::array({"red", "blue"})}}};
  answer_ = Selected("answer_1");
  ApprovalDecision d = approver_.Decide(q, {});
  EXPECT_EQ(d.kind, ApprovalDecision::Kind::kAllow);
  EXPECT_EQ(d.answer, "blue");
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0]["params"]["toolCall"]["title"], "Which colour?");
  EXPECT_EQ(asked_[0]["params"]["options"].size(), 3u);

  ApprovalRequest open = q;
  open.call.input = Json{{"question", "Why?"}};
  d = approver_.Decide(open, {});
  EXPECT_EQ(d.kind, ApprovalDecision::Kind::kDeny);
  EXPECT_THAT(d.reason, HasSubstr("decide yourself"));
  EXPECT_EQ(asked_.size(), 1u);
}

}  // namespace
}  // namespace agentloop::acp
