// PgWakeupListener: one dedicated PostgreSQL connection that LISTENs on the
// wake-up channel (SessionStore::ListenForWakeups). Wait polls its socket
// and an eventfd (Interrupt) together, so a waiting thread is woken by a
// notification, its timeout, or a stop, whichever comes first. A lost
// connection is reported once and replaced on the next Wait; what was
// announced meanwhile is found by the caller's poll of the table (NOTIFY is
// only a hint).
#pragma once

#include <memory>
#include <string>

#include "agentloop/store.h"

#include "store/pg_conn.h"

namespace agentloop::store {

class PgWakeupListener final : public WakeupListener {
 public:
  // Connects and LISTENs on `channel` (an SQL identifier of this build);
  // when the database cannot be reached, the first Wait tries again.
  // Errors: kInternal (no eventfd).
  static Result<std::unique_ptr<PgWakeupListener>> Open(std::string url, std::string channel);
  ~PgWakeupListener() override;
  PgWakeupListener(const PgWakeupListener&) = delete;
  PgWakeupListener& operator=(const PgWakeupListener&) = delete;

  Result<bool> Wait(std::chrono::milliseconds timeout) override;
  void Interrupt() override;

 private:
  PgWakeupListener(std::string url, std::string channel, int wake_fd)
      : url_(std::move(url)), channel_(std::move(channel)), wake_fd_(wake_fd) {}
  Status Connect();
  // Takes every notification libpq has buffered; true when there was one.
  bool Drain();
  // Waits for the eventfd alone (no connection): true when interrupted.
  bool Sleep(std::chrono::milliseconds timeout);

  std::string url_;
  std::string channel_;
  int wake_fd_;
  std::unique_ptr<PgConn> conn_;
};

}  // namespace agentloop::store
