// The HTTP client's connection pool: idle keep-alive connections per pool
// key (an origin, or a proxy that carries any origin; see HttpRoute), and the
// preconnects being opened per key with the requests waiting for them.
// Bookkeeping only: the pool never does I/O. It closes the connections it
// drops (through PooledConnection::Close) and leaves watching an idle
// connection for a close by the server to its owner, which calls Evict()
// when it sees one. Time is passed in, so tests drive it without a clock.
//
// Limits: at most `max_idle_per_key` idle connections per key (the oldest
// goes first); an idle connection older than `idle_lifetime` is dropped
// rather than reused.
//
// Thread-safety: none; the HTTP client uses it on its event thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace agentloop {

class HttpConnectionPool;

// A connection the pool can hold (the client's TCP/TLS connection; a fake in
// tests).
class PooledConnection {
 public:
  virtual ~PooledConnection() = default;
  virtual bool IsOpen() const = 0;
  virtual void Close() = 0;
  // Ends the owner's watch for a close while idle (the connection is taken
  // for a request).
  virtual void StopWatch() = 0;

  // The pool key it belongs under.
  std::string key;

 private:
  friend class HttpConnectionPool;
  std::chrono::steady_clock::time_point idle_since_;
  uint64_t generation_ = 0;  // counts pool entries and exits
  bool in_pool_ = false;
};

// A request waiting for a preconnect's connection.
class PoolWaiter {
 public:
  virtual ~PoolWaiter() = default;
  // Ended (or aborted) meanwhile: it no longer wants the connection.
  virtual bool Gone() const = 0;
};

class HttpConnectionPool {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    size_t max_idle_per_key = 8;
    Clock::duration idle_lifetime = std::chrono::seconds(60);
  };

  explicit HttpConnectionPool(Limits limits);

  // ---- idle connections ----

  // The most recently pooled connection under `key` that is open and not
  // too old (its watch stopped), or null. Stale ones met on the way are
  // closed and dropped.
  std::shared_ptr<PooledConnection> TakeIdle(const std::string& key, Clock::time_point now);
  bool HasIdle(const std::string& key) const;
  // Pools `c` under its key, first closing what the limits drop. Returns the
  // token to pass to Evict() from the owner's watch.
  uint64_t Put(std::shared_ptr<PooledConnection> c, Clock::time_point now);
  // The owner's watch saw `c` close (or become readable) while idle: drops
  // and closes it, unless it left the pool since `token` (then false).
  bool Evict(const std::shared_ptr<PooledConnection>& c, uint64_t token);
  // Closes and drops every idle connection.
  void CloseAll();
  size_t idle_count(const std::string& key) const;
  size_t idle_total() const;

  // ---- preconnects and their waiters ----

  // Whether a preconnect is opening a connection under `key`.
  bool Opening(const std::string& key) const;
  // Records `opener` as opening a connection under `key`; false (nothing
  // recorded) when one is being opened already or an idle one is pooled:
  // the preconnect has nothing to do.
  bool BeginOpening(const std::string& key, const void* opener);
  // `w` waits for the connection being opened under `key`; false when
  // nothing is being opened (it must connect itself).
  bool AddWaiter(const std::string& key, std::shared_ptr<PoolWaiter> w);
  // `w` no longer waits (it ended).
  void RemoveWaiter(const std::string& key, const PoolWaiter* w);
  // Ends `opener`'s claim on `key`: the waiters not gone meanwhile, in the
  // order they came. Empty when `opener` holds no claim there.
  std::vector<std::shared_ptr<PoolWaiter>> EndOpening(const std::string& key, const void* opener);
  size_t waiter_count(const std::string& key) const;

 private:
  void Drop(std::vector<std::shared_ptr<PooledConnection>>& conns, size_t i);

  Limits limits_;
  std::unordered_map<std::string, std::vector<std::shared_ptr<PooledConnection>>> idle_;
  struct Preconnect {
    const void* by = nullptr;
    std::vector<std::shared_ptr<PoolWaiter>> waiters;
  };
  std::unordered_map<std::string, Preconnect> opening_;
};

}  // namespace agentloop
