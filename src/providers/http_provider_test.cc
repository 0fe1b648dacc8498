// HttpProvider::CompleteAsync and the HTTP client on a caller's io_context,
// against the fake model server: the stream is decoded on the event thread,
// a stop aborts the exchange mid-stream, retries wait on the client's timer.
#include "providers/http_provider.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "fake_model_server.h"

namespace agentloop {
namespace {

using testing::FakeModelServer;
constexpr auto kTimeout = std::chrono::seconds(30);

// An io_context run on one thread, as a server runs its I/O thread.
class IoThread {
 public:
  IoThread() : work_(boost::asio::make_work_guard(ioc_)), thread_([this] { ioc_.run(); }) {}
  // Clients on it are destroyed first: their shutdown runs here, and run()
  // returns once their last handler has.
  ~IoThread() {
    work_.reset();
    thread_.join();
  }
  boost::asio::io_context& ioc() { return ioc_; }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

// Collects deltas and the outcome, with the threads they arrived on.
class Outcome : public StreamSink {
 public:
  void OnTextDelta(std::string_view t) override {
    std::lock_guard lock(mu_);
    text_ += t;
    delta_threads_.push_back(std::this_thread::get_id());
    cv_.notify_all();
  }
  ModelProvider::CompletionCallback Callback() {
    return [this](Result<ModelResponse> r) {
      std::lock_guard lock(mu_);
      ++calls_;
      result_.emplace(std::move(r));
      done_thread_ = std::this_thread::get_id();
      cv_.notify_all();
    };
  }
  bool WaitForText(const std::string& want) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return text_.find(want) != std::string::npos; });
  }
  // The result, once `done` was called (nullopt on timeout).
  std::optional<Result<ModelResponse>> Wait() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, kTimeout, [&] { return result_.has_value(); })) return std::nullopt;
    return result_;
  }
  std::string text() {
    std::lock_guard lock(mu_);
    return text_;
  }
  std::vector<std::thread::id> delta_threads() {
    std::lock_guard lock(mu_);
    return delta_threads_;
  }
  std::thread::id done_thread() {
    std::lock_guard lock(mu_);
    return done_thread_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  std::vector<std::thread::id> delta_threads_;
  std::optional<Result<ModelResponse>> result_;
  std::thread::id done_thread_;
  int calls_ = 0;
};

std::shared_ptr<HttpClient> ClientOn(IoThread& io) {
  HttpClientOptions o;
  o.io_context = &io.ioc();
  return HttpClient::Create(std::move(o));
}

HttpProvider ProviderFor(std::unique_ptr<WireFormat> format, const FakeModelServer& server,
                         std::shared_ptr<HttpClient> client,
                         std::chrono::milliseconds backoff = std::chrono::milliseconds(1)) {
  HttpProviderOptions o;
  o.model = "test-model";
  o.base_url = server.base_url() + "/v1";
  o.api_key = "sk-test";
  o.retry.base = backoff;
  o.retry.cap = backoff;
  // The blocking path's wait; CompleteAsync must not use it.
  o.retry.wait = [](std::chrono::milliseconds, const std::stop_token&) -> bool {
    ADD_FAILURE() << "CompleteAsync waited with the blocking RetryPolicy::wait";
    return false;
  };
  return HttpProvider(std::move(format), o, std::move(client));
}

HttpProvider ChatProvider(const FakeModelServer& server, std::shared_ptr<HttpClient> client,
                          std::chrono::milliseconds backoff = std::chrono::milliseconds(1)) {
  return ProviderFor(NewOpenAiChatFormat({}), server, std::move(client), backoff);
}

std::string ChatChunk(const std::string& text) {
  Json chunk{{"id", "c1"},
             {"object", "chat.completion.chunk"},
             {"model", "test-model"},
             {"choices",
              Json::array({Json{
                  {"index", 0}, {"delta", Json{{"content", text}}}, {"finish_reason", nullptr}}})}};
  return "data: " + chunk.dump() + "\n\n";
}

TEST(HttpProviderAsync, StreamsOnTheEventThreadWithoutBlockingTheCaller) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "hello there, world"}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  HttpProvider provider = ChatProvider(**server, ClientOn(io));
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  Outcome out;
  provider.CompleteAsync(req, out, {}, out.Callback());
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value()) << "done was not called";
  ASSERT_TRUE(r->ok()) << r->error().ToString();
  ASSERT_EQ((*r)->content.size(), 1u);
  EXPECT_EQ((*r)->content[0].text, "hello there, world");
  EXPECT_EQ(out.text(), "hello there, world");
  EXPECT_EQ(out.done_thread(), io.id());
  ASSERT_FALSE(out.delta_threads().empty());
  for (auto id : out.delta_threads()) EXPECT_EQ(id, io.id());
  EXPECT_EQ(out.calls(), 1);
}

TEST(HttpProviderAsync, StopMidStreamAbortsTheExchange) {
  // One delta, then the server stalls (for ten minutes) before the rest.
  const std::string first = ChatChunk("hel");
  Json item{{"raw_sse", first + ChatChunk("lo") + "data: [DONE]\n\n"},
            {"chunk_size", first.size()},
            {"latency_ms", 600000}};
  auto server = FakeModelServer::Start(Json::array({item}));
  ASSERT_TRUE(server.ok());
  IoThread io;
  auto client = ClientOn(io);
  HttpProvider provider = ChatProvider(**server, client);
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  Outcome out;
  std::stop_source stop;
  provider.CompleteAsync(req, out, stop.get_token(), out.Callback());
  ASSERT_TRUE(out.WaitForText("hel"));
  stop.request_stop();
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value()) << "a stop mid-stream did not end the call";
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code(), Code::kCancelled);
  EXPECT_EQ(out.text(), "hel");
  EXPECT_EQ(out.calls(), 1);
  EXPECT_EQ(server.value()->requests().size(), 1u);  // no retry after a stop
}

TEST(HttpProviderAsync, RetriesAfterAFailedAttemptOnTheClientsTimer) {
  auto server = FakeModelServer::Start(Json::parse(R"([
      {"error": {"code": "unavailable", "message": "try later"}},
      {"text": "second time lucky"}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  HttpProvider provider = ChatProvider(**server, ClientOn(io));
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  Outcome out;
  provider.CompleteAsync(req, out, {}, out.Callback());
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->error().ToString();
  EXPECT_EQ((*r)->content[0].text, "second time lucky");
  auto requests = server.value()->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].body, requests[1].body);
  EXPECT_EQ(out.calls(), 1);
}

TEST(HttpProviderAsync, ARetryRebuildsTheIdenticalBodyInEveryFormat) {
  // The call keeps no copy of the body once it is sent: the retry's body is
  // built again from the request, and must be the same bytes (history,
  // tail, tools, and the format's marking of the newest message).
  ToolSpec tool;
  tool.name = "read";
  tool.description = "Reads a file.";
  tool.input_schema = Json::parse(R"({"type":"object","properties":{"path":{"type":"string"}}})");
  const std::vector<ToolSpec> tools{tool};
  std::vector<Message> history{Message::User("read a.txt"), Message::Assistant("reading"),
                               Message::User("and b.txt")};
  // Cacheable: the retry takes these fragments from the message cache.
  for (size_t i = 0; i < history.size(); ++i) history[i].uid = 100 + i;
  for (int f = 0; f < 3; ++f) {
    auto server = FakeModelServer::Start(Json::parse(R"([
        {"error": {"code": "unavailable", "message": "try later"}},
        {"text": "done"}])"));
    ASSERT_TRUE(server.ok());
    IoThread io;
    std::unique_ptr<WireFormat> format = f == 0   ? NewOpenAiChatFormat({})
                                         : f == 1 ? NewAnthropicFormat({})
                                                  : NewOpenAiResponsesFormat({});
    HttpProvider provider = ProviderFor(std::move(format), **server, ClientOn(io));
    ModelRequest req;
    req.system = "You are terse.";
    req.history = history;
    req.tail.push_back(Message::User("open tasks: none"));
    req.tools = tools;
    Outcome out;
    provider.CompleteAsync(req, out, {}, out.Callback());
    std::optional<Result<ModelResponse>> r = out.Wait();
    ASSERT_TRUE(r.has_value()) << f;
    ASSERT_TRUE(r->ok()) << f << ": " << r->error().ToString();
    auto requests = server.value()->requests();
    ASSERT_EQ(requests.size(), 2u) << f;
    EXPECT_FALSE(requests[0].body.empty()) << f;
    EXPECT_EQ(requests[0].body, requests[1].body) << f;
    EXPECT_EQ(requests[1].body, provider.BuildBody(req)) << f;
  }
}

TEST(HttpProviderAsync, ErrorThatIsNotRetryableEndsTheCall) {
  auto server = FakeModelServer::Start(Json::parse(
      R"([{"error": {"code": "invalid_argument", "message": "bad field"}}, {"text": "never"}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  HttpProvider provider = ChatProvider(**server, ClientOn(io));
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  Outcome out;
  provider.CompleteAsync(req, out, {}, out.Callback());
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value());
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code(), Code::kInvalidArgument);
  EXPECT_NE(r->error().message().find("bad field"), std::string::npos);
  EXPECT_EQ(server.value()->requests().size(), 1u);
}

TEST(HttpClientOnCallersIoContext, WaitFiresOrEndsOnStop) {
  IoThread io;
  auto client = ClientOn(io);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<bool> short_wait, long_wait;
  std::thread::id fired_on;
  client->Wait(std::chrono::milliseconds(1), {}, [&](bool fired) {
    std::lock_guard lock(mu);
    short_wait = fired;
    fired_on = std::this_thread::get_id();
    cv.notify_all();
  });
  std::stop_source stop;
  client->Wait(std::chrono::hours(1), stop.get_token(), [&](bool fired) {
    std::lock_guard lock(mu);
    long_wait = fired;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return short_wait.has_value(); }));
  }
  EXPECT_TRUE(*short_wait);
  EXPECT_EQ(fired_on, io.id());
  stop.request_stop();
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return long_wait.has_value(); }));
  EXPECT_FALSE(*long_wait);
}

TEST(HttpClientOnCallersIoContext, DestroyingTheClientAbortsItsTransfersThere) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  auto client = ClientOn(io);
  struct Sink : HttpStreamHandler {
    Status OnHead(long, const HttpHeaders&) override { return Status::Ok(); }
    Status OnBody(std::string_view) override { return Status::Ok(); }
  };
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> result;
  std::thread::id done_on;
  HttpRequest req;
  req.url = server.value()->base_url() + "/v1/chat/completions";
  client->Start(req, std::make_shared<Sink>(), [&](Status s) {
    std::lock_guard lock(mu);
    result = s;
    done_on = std::this_thread::get_id();
    cv.notify_all();
  });
  ASSERT_TRUE(server.value()->WaitForRequests(1, kTimeout));
  bool waited = false;
  client->Wait(std::chrono::hours(1), {}, [&](bool fired) {
    std::lock_guard lock(mu);
    waited = !fired;
    cv.notify_all();
  });
  client.reset();  // returns at once; the abort runs on the I/O thread
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return result.has_value() && waited; }));
  EXPECT_EQ(result->code(), Code::kCancelled);
  EXPECT_EQ(done_on, io.id());
}

// ---- a request's own timeout and attempts (ModelRequest) -------------------

TEST(HttpProviderTimeout, AStalledAnswerEndsAtTheRequestsTimeout) {
  // The answer would come after ten minutes: the request's 200 ms timeout
  // ends the call, once, without a retry.
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  HttpProvider provider = ChatProvider(**server, ClientOn(io));
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  req.timeout = std::chrono::milliseconds(200);
  Outcome out;
  provider.CompleteAsync(req, out, {}, out.Callback());
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value()) << "the request's timeout did not end the call";
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code(), Code::kDeadlineExceeded) << r->error().ToString();
  EXPECT_NE(r->error().message().find("200 ms"), std::string::npos) << r->error().ToString();
  EXPECT_EQ(out.calls(), 1);
  EXPECT_EQ(server.value()->requests().size(), 1u);
}

TEST(HttpProviderTimeout, TheBlockingPathEndsAtTheTimeoutDuringABackoffWait) {
  // A failed attempt, then a backoff of ten minutes (the real interruptible
  // wait): the request's timeout ends the wait and the call.
  auto server = FakeModelServer::Start(Json::parse(R"([
      {"error": {"code": "unavailable", "message": "try later"}}, {"text": "never"}])"));
  ASSERT_TRUE(server.ok());
  HttpProviderOptions o;
  o.model = "test-model";
  o.base_url = server.value()->base_url() + "/v1";
  o.api_key = "sk-test";
  o.retry.base = std::chrono::minutes(10);
  o.retry.cap = std::chrono::minutes(10);
  HttpProvider provider(NewOpenAiChatFormat({}), o, HttpClient::Create());
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  req.timeout = std::chrono::milliseconds(200);
  StreamSink sink;
  Result<ModelResponse> r = provider.Complete(req, sink, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded) << r.error().ToString();
  EXPECT_EQ(server.value()->requests().size(), 1u);
}

TEST(HttpProviderTimeout, ACallersStopIsStillACancellation) {
  auto server = FakeModelServer::Start(Json::parse(R"([{"text": "late", "delay_ms": 600000}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  HttpProvider provider = ChatProvider(**server, ClientOn(io));
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  req.timeout = std::chrono::hours(1);
  Outcome out;
  std::stop_source stop;
  provider.CompleteAsync(req, out, stop.get_token(), out.Callback());
  ASSERT_TRUE(server.value()->WaitForRequests(1, kTimeout));
  stop.request_stop();
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value());
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code(), Code::kCancelled) << r->error().ToString();
}

TEST(HttpProviderTimeout, MaxAttemptsBoundsTheRetries) {
  auto server = FakeModelServer::Start(Json::parse(R"([
      {"error": {"code": "unavailable", "message": "try later"}},
      {"error": {"code": "unavailable", "message": "try later"}},
      {"text": "third time"}])"));
  ASSERT_TRUE(server.ok());
  IoThread io;
  HttpProvider provider = ChatProvider(**server, ClientOn(io));
  std::vector<Message> history{Message::User("hi")};
  ModelRequest req;
  req.history = history;
  req.max_attempts = 2;
  Outcome out;
  provider.CompleteAsync(req, out, {}, out.Callback());
  std::optional<Result<ModelResponse>> r = out.Wait();
  ASSERT_TRUE(r.has_value());
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code(), Code::kUnavailable) << r->error().ToString();
  EXPECT_EQ(server.value()->requests().size(), 2u);
}

}  // namespace
}  // namespace agentloop
