// The PostgreSQL client library, loaded when a PostgreSQL URL is first used.
//
// agentloop does not link libpq: a command on the SQLite store maps no
// PostgreSQL, Kerberos, LDAP or TLS-client library of libpq's. This module
// defines the libpq functions the store calls (the declarations of
// <libpq-fe.h>), each forwarding to the same function of `libpq.so.5`, which
// LoadLibpq opens with dlopen and resolves once per process.
//
// Thread-safety: LoadLibpq may be called from any thread, any number of
// times; the first call loads, later calls return the first call's status.
// REQUIRES: LoadLibpq() returned OK before any libpq function is called
// (PgConn::Connect calls it); calling one before aborts the process.
#pragma once

#include "agentloop/status.h"

namespace agentloop::store {

// Loads libpq.so.5 and resolves every function the store uses. Errors:
// kUnavailable naming the Debian package to install (libpq5) and dlerror's
// reason, when the library or one of its functions is missing.
Status LoadLibpq();

// What LoadLibpq would answer for the library `soname`, without making it the
// one the store calls (tests: the error of a missing or foreign library).
Status CheckLibpqForTest(const char* soname);

}  // namespace agentloop::store
