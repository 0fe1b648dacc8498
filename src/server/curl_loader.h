// libcurl, loaded when an email channel first sends (docs/notifications.md).
//
// agentloop does not link libcurl: only a server with an email channel maps
// it (and the TLS, SASL and compression libraries it pulls in), so every
// other command, and the statically linked release binary, stays without it.
// SendMail runs one SMTP transfer with libcurl's easy interface: it speaks
// ESMTP, STARTTLS, implicit TLS and the AUTH mechanisms a relay offers, with
// the peer's certificate and name checked.
//
// Thread-safety: SendMail may be called from any thread; each call has its
// own handle. The library is loaded once per process (the first call).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::server {

struct MailTransfer {
  std::string url;          // smtp://host:port | smtps://host:port
  bool require_tls = true;  // smtp://: STARTTLS or fail
  std::string user;         // empty: no AUTH
  std::string password;     // secret: never in an error
  std::string ca_file;      // empty: the system's trust store
  std::string from;
  std::vector<std::string> to;
  std::string message;  // RFC 5322, CRLF line ends
  std::chrono::milliseconds timeout{60'000};
  // Set (any thread): the transfer is abandoned within about a second
  // (kCancelled). May be null.
  const std::atomic<bool>* cancel = nullptr;
};

// Sends `m`. Errors: kUnavailable for every failure of the transfer (the
// relay unreachable, refusing, timing out, TLS or authentication failing),
// naming the relay's last reply code and libcurl's reason, never a
// credential; kUnavailable too when libcurl cannot be loaded (naming the
// Debian package, libcurl4); kCancelled once `cancel` is set.
Status SendMail(const MailTransfer& m);

}  // namespace agentloop::server
