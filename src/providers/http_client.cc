#include "providers/http_client.h"

#include <strings.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <curl/curl.h>

#include "base/strings.h"
#include "providers/retry.h"

namespace agentloop {

std::string_view FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return {};
}

namespace {

using Clock = std::chrono::steady_clock;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

class CurlClient;

struct Transfer : HttpTransfer {
  std::weak_ptr<CurlClient> client;
  HttpRequest request;
  std::shared_ptr<HttpStreamHandler> handler;
  std::function<void(Status)> done;
  std::atomic<bool> cancelled{false};

  // Event-thread state.
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  bool head_sent = false;
  long status = 0;
  HttpHeaders headers;
  Status handler_error;
  Clock::time_point last_activity;
  curl_off_t last_dl = 0, last_ul = 0;
  char errbuf[CURL_ERROR_SIZE] = {0};

  void Cancel() override;
};

class CurlClient : public HttpClient, public std::enable_shared_from_this<CurlClient> {
 public:
  explicit CurlClient(HttpClientOptions options) : options_(options) {
    GlobalInit();
    multi_ = curl_multi_init();
    if (options_.max_connections_per_host > 0) {
      curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, options_.max_connections_per_host);
    }
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    thread_ = std::thread([this] { Run(); });
  }

  ~CurlClient() override {
    shutdown_.store(true);
    curl_multi_wakeup(multi_);
    thread_.join();
    for (auto& [easy, t] : active_) Finish(t, Cancelled("http client shut down"), false);
    active_.clear();
    std::vector<std::shared_ptr<Transfer>> pending;
    {
      std::lock_guard lock(mu_);
      pending.swap(pending_);
    }
    for (auto& t : pending) t->done(Cancelled("http client shut down"));
    curl_multi_cleanup(multi_);
  }

  std::shared_ptr<HttpTransfer> Start(HttpRequest request,
                                      std::shared_ptr<HttpStreamHandler> handler,
                                      std::function<void(Status)> done) override {
    auto t = std::make_shared<Transfer>();
    t->client = weak_from_this();
    t->request = std::move(request);
    t->handler = std::move(handler);
    t->done = std::move(done);
    {
      std::lock_guard lock(mu_);
      pending_.push_back(t);
    }
    curl_multi_wakeup(multi_);
    return t;
  }

  size_t active_transfers() const override { return active_count_.load(); }

  void Wake() { curl_multi_wakeup(multi_); }

 private:
  static size_t OnWrite(char* ptr, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    size_t len = size * n;
    if (t->cancelled.load(std::memory_order_relaxed)) return 0;
    t->last_activity = Clock::now();
    if (!t->head_sent && !SendHead(t)) return 0;
    Status st = t->handler->OnBody(std::string_view(ptr, len));
    if (!st.ok()) {
      t->handler_error = std::move(st);
      return 0;
    }
    return len;
  }

  static size_t OnHeader(char* ptr, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    size_t len = size * n;
    t->last_activity = Clock::now();
    std::string_view line(ptr, len);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    if (StartsWith(line, "HTTP/")) {
      t->headers.clear();
      size_t sp = line.find(' ');
      if (sp != std::string_view::npos)
        t->status = std::atol(std::string(line.substr(sp + 1, 3)).c_str());
    } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
      t->headers.emplace_back(std::string(Trim(line.substr(0, colon))),
                              std::string(Trim(line.substr(colon + 1))));
    }
    return len;
  }

  static int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
    auto* t = static_cast<Transfer*>(user);
    if (dlnow != t->last_dl || ulnow != t->last_ul) {
      t->last_dl = dlnow;
      t->last_ul = ulnow;
      t->last_activity = Clock::now();
    }
    return t->cancelled.load(std::memory_order_relaxed) ? 1 : 0;
  }

  // Returns false when the handler refused the head.
  static bool SendHead(Transfer* t) {
    t->head_sent = true;
    long code = 0;
    if (curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code != 0) {
      t->status = code;
    }
    Status st = t->handler->OnHead(t->status, t->headers);
    if (!st.ok()) {
      t->handler_error = std::move(st);
      return false;
    }
    return true;
  }

  Status Setup(Transfer* t) {
    CURL* e = curl_easy_init();
    if (e == nullptr) return Internal("curl_easy_init failed");
    t->easy = e;
    const HttpRequest& r = t->request;
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    if (r.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
    } else if (r.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    if (r.method != "GET") {
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    }
    for (const auto& [k, v] : r.headers) {
      std::string h = k + ": " + v;
      t->header_list = curl_slist_append(t->header_list, h.c_str());
    }
    t->header_list = curl_slist_append(t->header_list, "Expect:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->header_list);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.connect_timeout.count()));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlClient::OnWrite);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &CurlClient::OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, &CurlClient::OnProgress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    t->last_activity = Clock::now();
    if (curl_multi_add_handle(multi_, e) != CURLM_OK)
      return Internal("curl_multi_add_handle failed");
    return Status::Ok();
  }

  // Removes the transfer from curl and reports `status`.
  void Finish(const std::shared_ptr<Transfer>& t, Status status, bool erase) {
    if (t->easy != nullptr) {
      curl_multi_remove_handle(multi_, t->easy);
      curl_easy_cleanup(t->easy);
      t->easy = nullptr;
    }
    curl_slist_free_all(t->header_list);
    t->header_list = nullptr;
    if (erase) active_count_.fetch_sub(1);
    std::function<void(Status)> done = std::move(t->done);
    t->handler.reset();
    if (done) done(std::move(status));
  }

  Status Complete(Transfer* t, CURLcode code) {
    if (!t->handler_error.ok()) return t->handler_error;
    if (t->cancelled.load()) return Cancelled("request cancelled");
    if (code != CURLE_OK) {
      std::string detail = t->errbuf[0] ? t->errbuf : curl_easy_strerror(code);
      return ClassifyTransportError(static_cast<int>(code), RedactSecrets(detail));
    }
    if (!t->head_sent && !SendHead(t)) return t->handler_error;
    return Status::Ok();
  }

  void Run() {
    while (!shutdown_.load()) {
      std::vector<std::shared_ptr<Transfer>> added;
      {
        std::lock_guard lock(mu_);
        added.swap(pending_);
      }
      for (auto& t : added) {
        active_count_.fetch_add(1);
        Status st = Setup(t.get());
        if (!st.ok()) {
          Finish(t, st, true);
          continue;
        }
        active_[t->easy] = t;
      }
      // Cancellations and idle timeouts.
      Clock::time_point now = Clock::now();
      std::vector<std::pair<CURL*, Status>> ended;
      for (auto& [easy, t] : active_) {
        if (t->cancelled.load()) {
          ended.emplace_back(easy, Cancelled("request cancelled"));
        } else if (t->request.idle_timeout.count() > 0 &&
                   now - t->last_activity > t->request.idle_timeout) {
          ended.emplace_back(
              easy, DeadlineExceeded("no data from the server for " +
                                     std::to_string(t->request.idle_timeout.count()) + " ms"));
        }
      }
      for (auto& [easy, st] : ended) End(easy, std::move(st));

      int running = 0;
      curl_multi_perform(multi_, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        auto it = active_.find(msg->easy_handle);
        if (it == active_.end()) continue;
        Status st = Complete(it->second.get(), msg->data.result);
        End(msg->easy_handle, std::move(st));
      }
      int timeout = static_cast<int>(options_.tick.count());
      if (active_.empty()) timeout = 1000;
      curl_multi_poll(multi_, nullptr, 0, timeout, nullptr);
    }
  }

  void End(CURL* easy, Status st) {
    auto it = active_.find(easy);
    if (it == active_.end()) return;
    std::shared_ptr<Transfer> t = std::move(it->second);
    active_.erase(it);
    Finish(t, std::move(st), true);
  }

  HttpClientOptions options_;
  CURLM* multi_ = nullptr;
  std::thread thread_;
  std::atomic<bool> shutdown_{false};
  std::atomic<size_t> active_count_{0};
  std::mutex mu_;
  std::vector<std::shared_ptr<Transfer>> pending_;
  std::unordered_map<CURL*, std::shared_ptr<Transfer>> active_;  // event thread only
};

void Transfer::Cancel() {
  cancelled.store(true);
  if (auto c = client.lock()) c->Wake();
}

// Moves events from the event thread to the thread blocked in Fetch().
struct Bridge : HttpStreamHandler {
  std::mutex mu;
  std::condition_variable_any cv;
  bool head = false;
  long status = 0;
  HttpHeaders headers;
  std::string buf;
  bool done = false;
  Status result;

  Status OnHead(long s, const HttpHeaders& h) override {
    std::lock_guard lock(mu);
    head = true;
    status = s;
    headers = h;
    cv.notify_all();
    return Status::Ok();
  }
  Status OnBody(std::string_view bytes) override {
    std::lock_guard lock(mu);
    buf.append(bytes);
    cv.notify_all();
    return Status::Ok();
  }
  void Done(Status s) {
    std::lock_guard lock(mu);
    done = true;
    result = std::move(s);
    cv.notify_all();
  }
};

struct BufferingHandler : HttpStreamHandler {
  HttpResponse response;
  Status OnHead(long s, const HttpHeaders& h) override {
    response.status = s;
    response.headers = h;
    return Status::Ok();
  }
  Status OnBody(std::string_view bytes) override {
    response.body.append(bytes);
    return Status::Ok();
  }
};

}  // namespace

std::shared_ptr<HttpClient> HttpClient::Create(HttpClientOptions options) {
  return std::make_shared<CurlClient>(options);
}

Status HttpClient::Fetch(HttpRequest request, HttpStreamHandler& handler, std::stop_token stop) {
  if (stop.stop_requested()) return Cancelled("request cancelled");
  auto bridge = std::make_shared<Bridge>();
  std::shared_ptr<HttpTransfer> transfer =
      Start(std::move(request), bridge, [bridge](Status s) { bridge->Done(std::move(s)); });
  bool head_delivered = false;
  std::string local;
  while (true) {
    bool new_head = false, finished = false;
    Status result;
    long status = 0;
    HttpHeaders headers;
    {
      std::unique_lock lock(bridge->mu);
      bridge->cv.wait(lock, stop, [&] {
        return bridge->done || (bridge->head && !head_delivered) || !bridge->buf.empty();
      });
      if (stop.stop_requested()) {
        lock.unlock();
        transfer->Cancel();
        return Cancelled("request cancelled");
      }
      if (bridge->head && !head_delivered) {
        new_head = true;
        head_delivered = true;
        status = bridge->status;
        headers = std::move(bridge->headers);
      }
      local.swap(bridge->buf);
      finished = bridge->done;
      result = bridge->result;
    }
    if (new_head) {
      Status st = handler.OnHead(status, headers);
      if (!st.ok()) {
        transfer->Cancel();
        return st;
      }
    }
    if (!local.empty()) {
      Status st = handler.OnBody(local);
      local.clear();
      if (!st.ok()) {
        transfer->Cancel();
        return st;
      }
    }
    if (finished) return result;
  }
}

Result<HttpResponse> HttpClient::Post(const std::string& url, const HttpHeaders& headers,
                                      std::string body, std::stop_token stop) {
  HttpRequest req;
  req.url = url;
  req.headers = headers;
  req.body = std::move(body);
  BufferingHandler h;
  AL_RETURN_IF_ERROR(Fetch(req, h, stop));
  return std::move(h.response);
}

}  // namespace agentloop
