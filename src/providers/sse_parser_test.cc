#include "providers/sse_parser.h"

#include <gtest/gtest.h>

#include "fake_model_server.h"

namespace agentloop {
namespace {

struct Ev {
  std::string event, data, id;
  bool operator==(const Ev&) const = default;
};

struct Collect : SseHandler {
  std::vector<Ev> events;
  Status OnEvent(const SseEvent& e) override {
    events.push_back({std::string(e.event), std::string(e.data), std::string(e.id)});
    return Status::Ok();
  }
};

std::vector<Ev> ParseAll(std::string_view s) {
  SseParser p;
  Collect c;
  EXPECT_TRUE(p.Feed(s, c).ok());
  return c.events;
}

TEST(SseParser, SpecExamples) {
  auto ev = ParseAll(
      ": a comment\n"
      "data: first\n"
      "data:  second has a leading space\n"
      "\n"
      "event: add\r\n"
      "id: 7\r\n"
      "data\r\n"
      "data:x\r\n"
      "\r\n"
      "event: ignored-no-data\r"
      "\r"
      "retry: 1500\n"
      "unknown: field\n"
      "data: third\r"
      "\r");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0], (Ev{"message", "first\n second has a leading space", ""}));
  EXPECT_EQ(ev[1], (Ev{"add", "\nx", "7"}));
  EXPECT_EQ(ev[2], (Ev{"message", "third", "7"}));
}

TEST(SseParser, BomCommentsAndPartialEnd) {
  SseParser p;
  Collect c;
  ASSERT_TRUE(p.Feed("\xEF\xBB", c).ok());
  ASSERT_TRUE(p.Feed("\xBF"
                     "data: a\n\n:ping\n\ndata: partial",
                     c)
                  .ok());
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].data, "a");
  EXPECT_TRUE(p.Finish());  // cut mid-event
  SseParser q;
  ASSERT_TRUE(q.Feed("data: a\n\n", c).ok());
  EXPECT_FALSE(q.Finish());
}

TEST(SseParser, HandlerErrorStopsParsing) {
  struct Fail : SseHandler {
    int n = 0;
    Status OnEvent(const SseEvent&) override {
      ++n;
      return DataLoss("bad");
    }
  } f;
  SseParser p;
  Status st = p.Feed("data: 1\n\ndata: 2\n\n", f);
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_EQ(f.n, 1);
}

TEST(SseParser, OversizedEventIsDataLoss) {
  SseParser p(16);
  Collect c;
  EXPECT_EQ(p.Feed("data: 0123456789abcdefghij\n", c).code(), Code::kDataLoss);
}

// Every split point (two chunks) and byte-at-a-time give the same events as
// one feed, for hand-written and rendered streams in all three formats.
TEST(SseParser, EverySplitPointOfRecordedStreams) {
  std::vector<std::string> streams = {
      "data: a\r\n\r\nevent: e\rdata: b\r\rdata: c\ndata: d\n\n:c\n\n",
  };
  Json item = Json::parse(R"({"thinking": "let me think", "thinking_signature": "sig==",
      "text": "héllo wörld, this is text", "tool_calls": [{"id": "c1", "name": "read",
      "input": {"path": "a.txt"}}], "usage": {"input_tokens": 3, "output_tokens": 4}})");
  ScriptItem si = *ParseScriptItem(item, 0);
  for (const char* path : {"/chat/completions", "/v1/messages", "/responses"}) {
    auto ev = testing::RenderStream(si, path);
    ASSERT_TRUE(ev.ok());
    std::string all;
    for (auto& e : *ev) all += e;
    streams.push_back(all);
  }
  for (const std::string& s : streams) {
    std::vector<Ev> whole = ParseAll(s);
    ASSERT_FALSE(whole.empty());
    for (size_t i = 0; i <= s.size(); ++i) {
      SseParser p;
      Collect c;
      ASSERT_TRUE(p.Feed(std::string_view(s).substr(0, i), c).ok());
      ASSERT_TRUE(p.Feed(std::string_view(s).substr(i), c).ok());
      ASSERT_EQ(c.events, whole) << "split at " << i;
      EXPECT_FALSE(p.Finish());
    }
    SseParser p;
    Collect c;
    for (char ch : s) ASSERT_TRUE(p.Feed(std::string_view(&ch, 1), c).ok());
    EXPECT_EQ(c.events, whole);
  }
}

}  // namespace
}  // namespace agentloop
