#include "store/pg_listener.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <libpq-fe.h>
#include <sys/eventfd.h>

namespace agentloop::store {

Result<std::unique_ptr<PgWakeupListener>> PgWakeupListener::Open(std::string url,
                                                                 std::string channel) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return Internal("eventfd failed: " + std::string(std::strerror(errno)));
  std::unique_ptr<PgWakeupListener> l(new PgWakeupListener(std::move(url), std::move(channel), fd));
  // A database that is down now is connected to by a later Wait.
  (void)l->Connect();
  return l;
}

PgWakeupListener::~PgWakeupListener() { close(wake_fd_); }

Status PgWakeupListener::Connect() {
  AL_ASSIGN_OR_RETURN(auto conn, PgConn::Connect(url_));
  AL_RETURN_IF_ERROR(conn->Exec("LISTEN " + channel_).status());
  conn_ = std::move(conn);
  return Status::Ok();
}

bool PgWakeupListener::Drain() {
  bool any = false;
  while (PGnotify* n = PQnotifies(conn_->raw())) {
    any = true;
    PQfreemem(n);
  }
  return any;
}

bool PgWakeupListener::Sleep(std::chrono::milliseconds timeout) {
  pollfd p{wake_fd_, POLLIN, 0};
  int r = poll(&p, 1, static_cast<int>(timeout.count()));
  if (r > 0 && (p.revents & POLLIN) != 0) {
    uint64_t v = 0;
    (void)!read(wake_fd_, &v, sizeof(v));
    return true;
  }
  return false;
}

Result<bool> PgWakeupListener::Wait(std::chrono::milliseconds timeout) {
  if (!conn_) {
    Status s = Connect();
    if (!s.ok()) {
      // Nothing to listen on: wait out the timeout (or a stop), then report.
      Sleep(timeout);
      return s;
    }
  }
  if (Drain()) return true;
  pollfd fds[2] = {{PQsocket(conn_->raw()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  int r = poll(fds, 2, static_cast<int>(timeout.count()));
  if (r < 0) {
    if (errno == EINTR) return false;
    return Internal("poll failed: " + std::string(std::strerror(errno)));
  }
  if ((fds[1].revents & POLLIN) != 0) {
    uint64_t v = 0;
    (void)!read(wake_fd_, &v, sizeof(v));
    return false;
  }
  if (fds[0].revents != 0) {
    if (PQconsumeInput(conn_->raw()) == 0 || PQstatus(conn_->raw()) != CONNECTION_OK) {
      conn_.reset();
      return Unavailable("the wake-up listener's connection to PostgreSQL was lost");
    }
    return Drain();
  }
  return false;
}

void PgWakeupListener::Interrupt() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

}  // namespace agentloop::store
