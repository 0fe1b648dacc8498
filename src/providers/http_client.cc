// HttpClient on Boost.Beast/Asio: one io_context, one event thread (the
// client's own, or the caller's with HttpClientOptions::io_context). This
// file drives transfers; the layers it drives live in their own units:
//   http_url       URL parsing, proxy settings, the route and pool key
//   http_dialer    name lookup, address fallback, CONNECT, TLS (and trust)
//   http_pool      idle connections per key, preconnects and their waiters
//   http_exchange  one request on the wire and the response reader
// A transfer's states: begun (URL and route checked, request built) ->
// waiting for a preconnect's connection | taking an idle one | dialling ->
// writing -> reading (head, then body pieces as they arrive) -> finished.
// One steady_timer per transfer enforces the connect timeout and then the
// idle timeout; Cancel() and the destructor abort by cancelling the dialer or
// closing the socket, so whatever operation is pending completes and the
// transfer ends.
//
// Ownership: the state of the client (ClientCore) is shared by every pending
// handler (each holds its transfer, which holds the core), so a handler
// that completes after the HttpClient object is gone (on a caller's
// io_context, which keeps running) still finds it. The HttpClient object
// (BeastClient) only starts and stops the event thread and aborts everything
// when it is destroyed.
#include "providers/http_client.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_set>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "providers/http_dialer.h"
#include "providers/http_exchange.h"
#include "providers/http_pool.h"
#include "providers/http_url.h"

namespace agentloop {

std::string_view FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return {};
}

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIdlePerOrigin = 8;
constexpr auto kIdleLifetime = std::chrono::seconds(60);

using Conn = HttpConnection;

class ClientCore;

struct Transfer : HttpTransfer, PoolWaiter, std::enable_shared_from_this<Transfer> {
  Transfer(std::shared_ptr<ClientCore> c, asio::io_context& ioc) : core(std::move(c)) {
    timer.emplace(ioc);
  }
  void Cancel() override;
  bool Gone() const override { return finished || abort.has_value(); }

  // Kept alive by the transfer: its handlers use the core, and may complete
  // after the HttpClient object is gone.
  std::shared_ptr<ClientCore> core;
  HttpRequest request;
  std::shared_ptr<HttpStreamHandler> handler;
  std::function<void(Status)> done;

  // Event-thread state.
  HttpUrl url;
  HttpRoute route;
  const HttpProxy* proxy = nullptr;  // route.proxy
  std::string key;
  // Destroyed by Finish() on the event thread: the handle may outlive the
  // client, and these must not outlive its io_context.
  std::optional<asio::steady_timer> timer;
  // Opening the transfer's connection (none while it has one).
  std::shared_ptr<HttpDialer> dialer;
  Clock::time_point deadline = Clock::time_point::max();
  Status deadline_status;
  bool timer_armed = false;
  Clock::time_point armed_at;
  std::shared_ptr<Conn> conn;
  bool reused = false, retried = false, finished = false;
  // A Preconnect(): no request; the connection goes to the pool (or to a
  // transfer waiting for it) once it is open.
  bool preconnect = false;
  // Waiting for a preconnect to the same origin (no operation pending).
  bool waiting = false;
  // Set while waiting: when the request's connect timeout ends, so that a
  // request left to connect on its own after a failed preconnect gets only
  // what is left of it.
  Clock::time_point connect_by = Clock::time_point::max();
  std::optional<Status> abort;
  HttpWireRequest req;
  std::optional<HttpResponseReader> reader;
};

// A timer of Wait(): fires once, or is cancelled by its stop token or the
// client's shutdown.
struct Waiter {
  explicit Waiter(asio::io_context& ioc) : timer(ioc) {}
  asio::steady_timer timer;
  std::function<void(bool)> fn;
  bool cancelled = false;
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  explicit ClientCore(HttpClientOptions options)
      : options_(std::move(options)),
        own_ioc_(options_.io_context != nullptr ? nullptr : std::make_unique<asio::io_context>()),
        ioc_(options_.io_context != nullptr ? *options_.io_context : *own_ioc_),
        proxies_(options_.http_proxy, options_.https_proxy, options_.no_proxy,
                 HttpProxyConfig::ProcessEnv()),
        trust_({options_.ca_file, options_.ca_dir, options_.system_ca_dir_for_test,
                options_.system_ca_file_for_test}) {}

  asio::io_context& ioc() { return ioc_; }
  bool external() const { return own_ioc_ == nullptr; }

  // Event thread: aborts every transfer and waiter, closes the idle
  // connections; later requests fail with kCancelled.
  void Shutdown() {
    shutting_down_ = true;
    std::vector<std::shared_ptr<Transfer>> running(active_.begin(), active_.end());
    for (auto& t : running) Abort(t, Cancelled("http client shut down"));
    // A transfer still unfinished is now held only by its pending handlers,
    // which end it when they run. If its io_context is stopped and destroyed
    // instead, they are destroyed unrun, and with them the transfer: the set
    // must not keep it (and through it this core) alive.
    active_.clear();
    pool_.CloseAll();
    std::vector<std::shared_ptr<Waiter>> waiting(waiters_.begin(), waiters_.end());
    for (auto& w : waiting) CancelWaiter(w);
  }

  void Wait(std::chrono::milliseconds delay, std::stop_token stop, std::function<void(bool)> fn) {
    auto w = std::make_shared<Waiter>(ioc_);
    w->fn = std::move(fn);
    asio::post(ioc_, [self = shared_from_this(), w, delay, stop = std::move(stop)] {
      if (self->shutting_down_) return self->FireWaiter(w, false);
      self->waiters_.insert(w);
      w->timer.expires_after(delay);
      w->timer.async_wait([self, w](error_code ec) { self->FireWaiter(w, !ec && !w->cancelled); });
      // Runs at once (here) when the stop was requested already.
      std::weak_ptr<Waiter> weak = w;
      w->on_stop.emplace(stop, std::function<void()>([self, weak] {
                           asio::post(self->ioc_, [self, weak] {
                             if (auto waiter = weak.lock()) self->CancelWaiter(waiter);
                           });
                         }));
    });
  }

  std::shared_ptr<HttpTransfer> Start(HttpRequest request,
                                      std::shared_ptr<HttpStreamHandler> handler,
                                      std::function<void(Status)> done) {
    auto t = std::make_shared<Transfer>(shared_from_this(), ioc_);
    t->request = std::move(request);
    t->handler = std::move(handler);
    t->done = std::move(done);
    active_count_.fetch_add(1);
    asio::post(ioc_, [this, t] {
      // Begin creates the TLS context and the connection objects, which can
      // throw (bad_alloc, system_error from OpenSSL): the transfer then fails
      // instead of never finishing.
      try {
        Begin(t);
      } catch (const std::exception& e) {
        Finish(t, Internal(std::string("http client: ") + e.what()));
      } catch (...) {
        Finish(t, Internal("http client: unknown exception"));
      }
    });
    return t;
  }

  void Preconnect(const std::string& url, std::chrono::milliseconds connect_timeout) {
    auto t = std::make_shared<Transfer>(shared_from_this(), ioc_);
    t->request.method = "GET";
    t->request.url = url;
    t->request.connect_timeout = connect_timeout;
    t->preconnect = true;
    active_count_.fetch_add(1);
    asio::post(ioc_, [this, t] {
      try {
        Begin(t);
      } catch (...) {  // best effort: nothing to report to
        Finish(t, Status::Ok());
      }
    });
  }

  size_t active_transfers() const { return active_count_.load(); }

  void PostAbort(std::shared_ptr<Transfer> t) {
    // The client's own loop has ended: its Shutdown finished every transfer,
    // and a handler posted now would never run, keeping this core (which
    // owns that io_context) alive through its own queue.
    if (loop_ended_.load()) return;
    asio::post(ioc_, [this, t] { Abort(t, Cancelled("request cancelled")); });
  }
  // Called once the client's own event thread has returned.
  void MarkLoopEnded() { loop_ended_.store(true); }

 private:
  using TransferPtr = std::shared_ptr<Transfer>;

  void CancelWaiter(const std::shared_ptr<Waiter>& w) {
    if (w->cancelled || !w->fn) return;
    w->cancelled = true;
    w->timer.cancel();  // its handler reports the wait as cancelled
  }

  void FireWaiter(const std::shared_ptr<Waiter>& w, bool fired) {
    waiters_.erase(w);
    std::function<void(bool)> fn = std::move(w->fn);
    w->fn = nullptr;
    if (!fn) return;
    try {
      fn(fired);
    } catch (...) {  // a throwing callback must not kill the event thread
    }
  }

  // ---- lifecycle ----

  void Begin(const TransferPtr& t) {
    active_.insert(t);
    if (shutting_down_) return Finish(t, Cancelled("http client shut down"));
    Result<HttpUrl> u = ParseHttpUrl(t->request.url);
    if (!u.ok()) return Finish(t, u.error());
    if (!u->userinfo.empty()) {
      return Finish(t, InvalidArgument("bad URL: credentials in the URL are not supported"));
    }
    t->url = std::move(*u);
    Result<HttpRoute> route = proxies_.Route(t->url);
    if (!route.ok()) return Finish(t, route.error());
    t->route = std::move(*route);
    t->proxy = t->route.proxy;
    t->key = t->route.pool_key;
    if (t->url.https) {
      Status st = trust_.Ensure();
      if (!st.ok()) return Finish(t, st);
    }
    if (t->preconnect) {
      if (!pool_.BeginOpening(t->key, t.get())) return Finish(t, Status::Ok());
      return Connect(t);
    }
    Status st = BuildHttpRequest(t->request, t->url, t->route, t->req);
    if (!st.ok()) return Finish(t, st);
    if (auto c = std::static_pointer_cast<Conn>(pool_.TakeIdle(t->key, Clock::now()))) {
      t->conn = std::move(c);
      t->reused = true;
      Send(t);
    } else if (pool_.Opening(t->key)) {
      // The connection being opened for this origin is this transfer's;
      // its own connect timeout runs meanwhile.
      t->waiting = true;
      pool_.AddWaiter(t->key, t);
      if (t->request.connect_timeout.count() > 0) {
        t->connect_by = Clock::now() + t->request.connect_timeout;
        SetDeadline(t, t->connect_by, ConnectTimedOut(*t, DialName(*t)));
      }
    } else {
      Connect(t);
    }
  }

  // A preconnect's connection is open: the first transfer still waiting for
  // it gets it, else the pool does.
  void Preconnected(const TransferPtr& t) {
    std::shared_ptr<Conn> c = std::move(t->conn);
    std::vector<TransferPtr> waiters = TakeWaiters(t);
    Finish(t, Status::Ok());
    for (const TransferPtr& w : waiters) {
      if (c) {
        w->conn = std::move(c);
        Guarded(w, [&] { Send(w); });
      } else {
        Guarded(w, [&] { Connect(w); });
      }
    }
    if (c) Release(std::move(c));
  }

  // Runs a step of waiter `w` from another transfer's completion handler: an
  // exception (allocation, OpenSSL) fails `w` instead of escaping.
  template <typename F>
  void Guarded(const TransferPtr& w, F&& step) {
    try {
      step();
    } catch (const std::exception& e) {
      Fail(w, Internal(std::string("http client: ") + e.what()));
    } catch (...) {
      Fail(w, Internal("http client: unknown exception"));
    }
  }

  // Ends `t`'s claim on its origin; the transfers that were waiting for its
  // connection and have not ended since.
  std::vector<TransferPtr> TakeWaiters(const TransferPtr& t) {
    std::vector<TransferPtr> live;
    for (auto& w : pool_.EndOpening(t->key, t.get())) {
      auto waiter = std::static_pointer_cast<Transfer>(std::move(w));
      waiter->waiting = false;
      live.push_back(std::move(waiter));
    }
    return live;
  }

  // What a transfer connects to, for messages: the proxy or the origin.
  static std::string DialName(const Transfer& t) { return t.route.dial_name; }

  static Status ConnectTimedOut(const Transfer& t, const std::string& what) {
    return DeadlineExceeded("cannot connect to " + what + ": no answer within " +
                            std::to_string(t.request.connect_timeout.count()) +
                            " ms (the connect timeout)");
  }
  void Connect(const TransferPtr& t) {
    t->reused = false;
    if (t->request.connect_timeout.count() > 0) {
      Clock::time_point by = std::min(Clock::now() + t->request.connect_timeout, t->connect_by);
      t->connect_by = Clock::time_point::max();
      SetDeadline(t, by, ConnectTimedOut(*t, DialName(*t)));
    } else {
      SetDeadline(t, Clock::time_point::max(), Status::Ok());
    }
    auto dialer = std::make_shared<HttpDialer>(
        ioc_, &trust_,
        HttpDialer::Options{options_.connect_attempt_delay, options_.resolve_for_test});
    t->dialer = dialer;
    dialer->Dial(t->url, t->route, [this, t](Status st, std::shared_ptr<HttpConnection> c) {
      if (Aborted(t)) {
        if (c) c->Close();
        return;
      }
      t->dialer.reset();
      if (!st.ok()) return Fail(t, st);
      t->conn = std::move(c);
      Send(t);
    });
  }

  void Send(const TransferPtr& t) {
    if (t->preconnect) return Preconnected(t);
    t->conn->carried = true;
    SetIdleDeadline(t);
    t->conn->With([&](auto& stream) {
      http::async_write(stream, t->req, [this, t](error_code ec, size_t) {
        if (Aborted(t)) return;
        if (ec) {
          if (CanRetry(t, ec)) return Retry(t);
          return Fail(t, TransportError(t->url.Authority(), ec));
        }
        Touch(t);
        // Written on a connection that no retry can replace, or a retry
        // can build it again: the body is not needed any more.
        if (!t->reused || t->retried || t->request.body_source) DropBody(t);
        t->reader.emplace(t->req.method() == http::verb::head);
        Read(t);
      });
    });
  }

  // Reads what the server sends and hands it to the reader; the head and
  // the body bytes decoded from each read go to the handler at once. A
  // plain connection first waits until the socket is readable, so that the
  // read buffer exists only from then until its bytes are parsed (a turn
  // waiting on a model holds none); a TLS stream is read directly.
  void Read(const TransferPtr& t) {
    if (t->conn->tls) return ReadSome(t);
    t->conn->sock.async_wait(tcp::socket::wait_read, [this, t](error_code ec) {
      if (Aborted(t)) return;
      if (ec) {
        if (CanRetry(t, ec)) return Retry(t);
        return Fail(t, TransportError(t->url.Authority(), ec));
      }
      ReadSome(t);
    });
  }

  void ReadSome(const TransferPtr& t) {
    t->conn->With([&](auto& stream) {
      stream.async_read_some(t->conn->buf.prepare(HttpConnection::kReadBuffer),
                             [this, t](error_code ec, size_t n) {
                               if (Aborted(t)) return;
                               t->conn->buf.commit(n);
                               OnRead(t, ec);
                             });
    });
  }

  void OnRead(const TransferPtr& t, error_code read_error) {
    if (t->conn->buf.size() > 0) Touch(t);
    std::string body;
    error_code ec = t->reader->Feed(t->conn->buf, body);
    // What is left unparsed (a partial line) keeps only its own bytes.
    if (!t->conn->tls) t->conn->buf.shrink_to_fit();
    // A response has begun: the request will not be sent again.
    if (t->reader->got_some()) DropBody(t);
    if (!ec && read_error == asio::error::eof) {
      ec = t->reader->FeedEof();
    } else if (!ec) {
      ec = read_error;
    }
    long status = 0;
    HttpHeaders headers;
    if (t->reader->TakeHead(status, headers)) {
      Status st = CallHandler(t, [&] { return t->handler->OnHead(status, headers); });
      if (!st.ok()) return Fail(t, st);
    }
    if (!body.empty()) {
      Status st = CallHandler(t, [&] { return t->handler->OnBody(body); });
      if (!st.ok()) return Fail(t, st);
    }
    if (ec) {
      if (CanRetry(t, ec)) return Retry(t);
      return Fail(t, TransportError(t->url.Authority(), ec));
    }
    if (t->reader->state() == HttpResponseReader::State::kDone) return Complete(t);
    // An abort (Cancel() posts one) is seen here only once it has run; one
    // delivered from inside OnBody ends the transfer here.
    if (Aborted(t)) return;
    Read(t);
  }

  void Complete(const TransferPtr& t) {
    std::shared_ptr<Conn> c = std::move(t->conn);
    // The parser's keep_alive(), not the message's: a body that ended with
    // the connection (no Content-Length, not chunked) leaves nothing to reuse.
    if (t->reader->keep_alive() && c->buf.size() == 0 && c->Lowest().is_open()) {
      Release(std::move(c));
    } else {
      c->Close();
    }
    Finish(t, Status::Ok());
  }

  // Releases the transfer's reference to the request body (the caller may
  // hold its own, shared one).
  static void DropBody(const TransferPtr& t) { t->req.body().reset(); }

  // A reused connection the server closed meanwhile: one fresh attempt.
  bool CanRetry(const TransferPtr& t, error_code ec) {
    if (!t->reused || t->retried) return false;
    if (t->reader && t->reader->got_some()) return false;
    return RetryableBeforeResponse(ec);
  }

  void Retry(const TransferPtr& t) {
    t->retried = true;
    t->conn->Close();
    t->conn.reset();
    t->reader.reset();
    if (!t->req.body() && t->request.body_source) {
      std::shared_ptr<const std::string> body;
      try {
        body = t->request.body_source();
      } catch (...) {  // reported below
      }
      if (!body) return Fail(t, Internal("http client: the request body to retry is gone"));
      t->req.content_length(body->size());
      t->req.body() = std::move(body);
    }
    Connect(t);
  }

  template <typename F>
  static Status CallHandler(const TransferPtr&, F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return Internal(std::string("http stream handler threw: ") + e.what());
    } catch (...) {
      return Internal("http stream handler threw");
    }
  }

  // Ends the transfer if it was aborted (or already ended) while an
  // operation was pending; every completion handler starts with this.
  bool Aborted(const TransferPtr& t) {
    if (t->finished) return true;
    if (t->abort) {
      Fail(t, *t->abort);
      return true;
    }
    return false;
  }

  void Abort(const TransferPtr& t, Status why) {
    if (t->finished || t->abort) return;
    t->abort = std::move(why);
    // Nothing is pending for a transfer waiting for a preconnect: it ends now.
    if (t->waiting) return Fail(t, *t->abort);
    if (t->dialer) t->dialer->Cancel();
    if (t->conn) t->conn->Close();
  }

  void Fail(const TransferPtr& t, Status st) {
    if (t->conn) {
      t->conn->Close();
      t->conn.reset();
    }
    Finish(t, std::move(st));
  }

  void Finish(const TransferPtr& t, Status st) {
    if (t->finished) return;
    t->finished = true;
    if (t->waiting) {  // no longer waits: the preconnect lets it go
      t->waiting = false;
      pool_.RemoveWaiter(t->key, t.get());
    }
    // A failed preconnect: whoever waited for it connects on its own (and
    // reports its own failure), once this transfer is cleaned up.
    std::vector<TransferPtr> orphans;
    if (t->preconnect) orphans = TakeWaiters(t);
    t->timer.reset();  // cancels: a pending wait ends with operation_aborted
    if (t->dialer) {
      t->dialer->Cancel();
      t->dialer.reset();
    }
    if (t->conn) {
      t->conn->Close();
      t->conn.reset();
    }
    active_.erase(t);
    active_count_.fetch_sub(1);
    std::function<void(Status)> done = std::move(t->done);
    t->handler.reset();
    t->reader.reset();
    for (const TransferPtr& w : orphans) Guarded(w, [&] { Connect(w); });
    if (!done) return;
    try {
      done(std::move(st));
    } catch (...) {  // a throwing callback must not kill the event thread
    }
  }

  // ---- timeouts ----

  void SetDeadline(const TransferPtr& t, Clock::time_point when, Status why) {
    t->deadline = when;
    t->deadline_status = std::move(why);
    if (when == Clock::time_point::max()) return;
    if (!t->timer_armed || when < t->armed_at) Arm(t);
  }

  void SetIdleDeadline(const TransferPtr& t) {
    auto idle = t->request.idle_timeout;
    if (idle.count() <= 0) return SetDeadline(t, Clock::time_point::max(), Status::Ok());
    SetDeadline(t, Clock::now() + idle,
                DeadlineExceeded("no data from " + t->url.Authority() + " for " +
                                 std::to_string(idle.count()) + " ms"));
  }

  void Touch(const TransferPtr& t) {
    auto idle = t->request.idle_timeout;
    if (idle.count() > 0) t->deadline = Clock::now() + idle;
  }

  void Arm(const TransferPtr& t) {
    t->timer_armed = true;
    t->armed_at = t->deadline;
    t->timer->expires_at(t->deadline);
    t->timer->async_wait([this, t](error_code ec) {
      if (ec == asio::error::operation_aborted || t->finished) return;
      t->timer_armed = false;
      if (t->deadline == Clock::time_point::max()) return;
      if (Clock::now() >= t->deadline) return Abort(t, t->deadline_status);
      Arm(t);
    });
  }

  // ---- idle connection pool ----

  void Release(std::shared_ptr<Conn> c) {
    if (shutting_down_) return c->Close();
    const uint64_t token = pool_.Put(c, Clock::now());
    // Not watched: the server's session tickets would look like a close. A
    // close meanwhile shows when the connection is reused, and a reused
    // connection that fails before any response byte is retried once.
    if (c->tls && !c->carried) return;
    // An idle connection that becomes readable was closed by the server (or
    // sent something unsolicited): drop it.
    c->Lowest().async_wait(tcp::socket::wait_read,
                           [this, self = shared_from_this(), c, token](error_code) {
                             std::shared_ptr<PooledConnection> pooled = c;
                             pool_.Evict(pooled, token);
                           });
  }

  HttpClientOptions options_;
  std::unique_ptr<asio::io_context> own_ioc_;  // null: the caller's
  asio::io_context& ioc_;
  std::atomic<size_t> active_count_{0};
  const HttpProxyConfig proxies_;

  // Event-thread state.
  bool shutting_down_ = false;
  std::atomic<bool> loop_ended_{false};
  HttpTlsTrust trust_;
  std::unordered_set<TransferPtr> active_;
  HttpConnectionPool pool_{{kMaxIdlePerOrigin, kIdleLifetime}};
  std::unordered_set<std::shared_ptr<Waiter>> waiters_;
};

void Transfer::Cancel() { core->PostAbort(shared_from_this()); }

// The HttpClient object: runs the event thread (unless the caller's
// io_context is used) and shuts the core down when destroyed.
class BeastClient final : public HttpClient {
 public:
  explicit BeastClient(HttpClientOptions options)
      : core_(std::make_shared<ClientCore>(std::move(options))) {
    if (core_->external()) return;
    work_.emplace(asio::make_work_guard(core_->ioc()));
    thread_ = std::thread([ioc = &core_->ioc()] {
      while (true) {
        try {
          ioc->run();
          return;
        } catch (...) {  // handlers catch what they call; keep the thread alive
        }
      }
    });
  }

  ~BeastClient() override {
    // On the caller's io_context this runs there (at once when destroyed on
    // its thread); the core lives on in the handlers still pending.
    asio::dispatch(core_->ioc(), [core = core_] { core->Shutdown(); });
    if (thread_.joinable()) {
      work_.reset();
      thread_.join();
      core_->MarkLoopEnded();
    }
  }

  std::shared_ptr<HttpTransfer> Start(HttpRequest request,
                                      std::shared_ptr<HttpStreamHandler> handler,
                                      std::function<void(Status)> done) override {
    return core_->Start(std::move(request), std::move(handler), std::move(done));
  }
  void Preconnect(const std::string& url, std::chrono::milliseconds connect_timeout) override {
    core_->Preconnect(url, connect_timeout);
  }
  void Wait(std::chrono::milliseconds delay, std::stop_token stop,
            std::function<void(bool)> fn) override {
    core_->Wait(delay, std::move(stop), std::move(fn));
  }
  size_t active_transfers() const override { return core_->active_transfers(); }

 private:
  std::shared_ptr<ClientCore> core_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
};

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
  return std::make_shared<BeastClient>(std::move(options));
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
    // A throwing handler leaves Fetch, but must not leave the transfer
    // running (streaming, buffering, billing) behind it.
    Status st;
    try {
      if (new_head) st = handler.OnHead(status, headers);
      if (st.ok() && !local.empty()) {
        st = handler.OnBody(local);
        local.clear();
      }
    } catch (...) {
      transfer->Cancel();
      throw;
    }
    if (!st.ok()) {
      transfer->Cancel();
      return st;
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
