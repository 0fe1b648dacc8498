#include "acp/jsonrpc.h"

#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::acp {
namespace {

using ::testing::HasSubstr;

Json ErrorOf(std::string_view line) {
  ParsedLine p = ParseLine(line);
  EXPECT_FALSE(p.message.has_value()) << line;
  EXPECT_TRUE(p.error_reply.has_value()) << line;
  return p.error_reply.value_or(Json());
}

TEST(JsonRpcParse, ClassifiesRequestsNotificationsAndResponses) {
  ParsedLine r = ParseLine(R"({"jsonrpc":"2.0","id":7,"method":"initialize","params":{"a":1}})");
  ASSERT_TRUE(r.message);
  EXPECT_EQ(r.message->kind, Incoming::Kind::kRequest);
  EXPECT_EQ(r.message->id, 7);
  EXPECT_EQ(r.message->method, "initialize");
  EXPECT_EQ(r.message->params["a"], 1);

  ParsedLine n = ParseLine(R"({"jsonrpc":"2.0","method":"session/cancel","params":{}})");
  ASSERT_TRUE(n.message);
  EXPECT_EQ(n.message->kind, Incoming::Kind::kNotification);

  ParsedLine ok = ParseLine(R"({"jsonrpc":"2.0","id":"x","result":{"outcome":1}})");
  ASSERT_TRUE(ok.message);
  EXPECT_EQ(ok.message->kind, Incoming::Kind::kResponse);
  EXPECT_EQ(ok.message->id, "x");
  EXPECT_FALSE(ok.message->error);

  ParsedLine err = ParseLine(R"({"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"no"}})");
  ASSERT_TRUE(err.message);
  ASSERT_TRUE(err.message->error);
  EXPECT_EQ(err.message->error->code, -32000);
  EXPECT_EQ(err.message->error->message, "no");

  ParsedLine blank = ParseLine("  \r");
  EXPECT_FALSE(blank.message);
  EXPECT_FALSE(blank.error_reply);
}

TEST(JsonRpcParse, ErrorsSayWhatWasWrong) {
  Json e = ErrorOf("{not json");
  EXPECT_EQ(e["error"]["code"], kParseError);
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("not JSON"));

  e = ErrorOf(R"([{"jsonrpc":"2.0","id":1,"method":"x"}])");
  EXPECT_EQ(e["error"]["code"], kInvalidRequest);
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("batches"));

  e = ErrorOf(R"({"id":4,"method":"initialize"})");
  EXPECT_EQ(e["error"]["code"], kInvalidRequest);
  EXPECT_EQ(e["id"], 4);  // the id is answered when it could be read
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("\"jsonrpc\" must be \"2.0\""));

  e = ErrorOf(R"({"jsonrpc":"2.0","id":{"x":1},"method":"initialize"})");
  EXPECT_EQ(e["error"]["code"], kInvalidRequest);
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("\"id\""));

  e = ErrorOf(R"({"jsonrpc":"2.0","id":5,"method":12})");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("\"method\""));

  e = ErrorOf(R"({"jsonrpc":"2.0","id":5,"method":"m","params":3})");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("\"params\""));

  e = ErrorOf(R"({"jsonrpc":"2.0","id":5})");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("exactly one of"));

  e = ErrorOf(R"({"jsonrpc":"2.0"})");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("needs a \"method\""));

  e = ErrorOf("42");
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("JSON object"));
}

TEST(JsonRpcBuild, MessagesAreJsonRpc2) {
  EXPECT_EQ(MakeResult(1, Json{{"a", 1}}),
            Json::parse(R"({"jsonrpc":"2.0","id":1,"result":{"a":1}})"));
  EXPECT_EQ(
      MakeError("i", kMethodNotFound, "method not found: 'x'"),
      Json::parse(
          R"({"jsonrpc":"2.0","id":"i","error":{"code":-32601,"message":"method not found: 'x'"}})"));
  EXPECT_EQ(MakeNotification("session/update", Json::object()),
            Json::parse(R"({"jsonrpc":"2.0","method":"session/update","params":{}})"));
}

// A Connection whose written lines a test reads.
struct Wire {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> lines;
  Connection conn{[this](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(l);
    cv.notify_all();
  }};
  Json WaitLine(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return lines.size() > n; }));
    return lines.size() > n ? Json::parse(lines[n]) : Json();
  }
};

TEST(JsonRpcConnection, CallWaitsForItsResponse) {
  Wire w;
  Result<Json> got = Json();
  std::thread caller([&] { got = w.conn.Call("session/request_permission", Json{{"q", 1}}, {}); });
  Json req = w.WaitLine(0);
  EXPECT_EQ(req["method"], "session/request_permission");
  EXPECT_EQ(req["params"]["q"], 1);
  // An answer to another id is not this call's.
  ParsedLine other = ParseLine(R"({"jsonrpc":"2.0","id":999,"result":{}})");
  EXPECT_FALSE(w.conn.Deliver(*other.message));
  Json resp = MakeResult(req["id"], Json{{"ok", true}});
  ParsedLine p = ParseLine(DumpJson(resp));
  EXPECT_TRUE(w.conn.Deliver(*p.message));
  caller.join();
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  EXPECT_EQ((*got)["ok"], true);
}

TEST(JsonRpcConnection, ErrorAnswerStopAndCloseEndACall) {
  Wire w;
  Result<Json> got = Json();
  std::thread caller([&] { got = w.conn.Call("m", Json::object(), {}); });
  Json req = w.WaitLine(0);
  ParsedLine p = ParseLine(DumpJson(MakeError(req["id"], -32000, "nope")));
  EXPECT_TRUE(w.conn.Deliver(*p.message));
  caller.join();
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.error().message(), HasSubstr("nope"));

  std::stop_source stop;
  std::thread stopped([&] { got = w.conn.Call("m", Json::object(), stop.get_token()); });
  w.WaitLine(1);
  stop.request_stop();
  stopped.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), Code::kCancelled);

  std::thread closed([&] { got = w.conn.Call("m", Json::object(), {}); });
  w.WaitLine(2);
  w.conn.Close();
  closed.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), Code::kUnavailable);
  // Later calls fail at once.
  EXPECT_FALSE(w.conn.Call("m", Json::object(), {}).ok());
}

}  // namespace
}  // namespace agentloop::acp
