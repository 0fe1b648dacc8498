// A throwaway PostgreSQL cluster for tests: initdb into a temporary
// directory, a postmaster on a free 127.0.0.1 port and a Unix socket in that
// directory, removed (stopped and deleted) when the object dies. When the
// process runs as root the server programs run as the `postgres` user
// (initdb refuses root). Nothing of the process environment is read or
// changed: the programs get an environment of their own.
//
// Test-only: linked into test binaries, never into the product.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::store {

class PgTestCluster {
 public:
  // Starts a cluster. Errors: kFailedPrecondition naming what is missing
  // (no server programs, no unprivileged user to run them as) or what
  // failed (initdb, pg_ctl start; with the end of the server's log).
  // `durable`: fsync and synchronous commit on, as a production server
  // runs (benchmarks); off by default (tests: faster, and a crash of the
  // machine loses nothing that matters).
  static Result<std::unique_ptr<PgTestCluster>> Start(bool durable = false);
  // The cluster the tests of this process share, each in schemas of its
  // own: the one a CTest fixture started for the whole test run when the
  // build defines AL_PG_TEST_CLUSTER_FILE and that file names a cluster that
  // answers (Detach), else one this process starts on first call and stops
  // at exit. The error of that one attempt on every later call. A test that
  // restarts or stops the server, or counts its connections, uses Own().
  static Result<PgTestCluster*> Shared();
  // A cluster only this process uses, started on first call and stopped at
  // exit; the error of that one attempt on every later call.
  static Result<PgTestCluster*> Own();

  // Writes where this cluster is to `file` and gives the server up: it
  // keeps running after this object dies, for Attach, until StopDetached.
  Status Detach(const std::filesystem::path& file);
  // The cluster `file` names, not owned (its destruction leaves the server
  // running). Errors: kUnavailable when there is no such file or the server
  // does not answer.
  static Result<std::unique_ptr<PgTestCluster>> Attach(const std::filesystem::path& file);
  // Stops the server `file` names and deletes its directory and `file`; OK
  // when there is no such file.
  static Status StopDetached(const std::filesystem::path& file);

  ~PgTestCluster();
  PgTestCluster(const PgTestCluster&) = delete;
  PgTestCluster& operator=(const PgTestCluster&) = delete;

  int port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_; }
  // A URL to the `postgres` database as the superuser, over TCP.
  std::string AdminUrl() const;
  // A new empty schema, and a URL whose connections use it (search_path), so
  // each test gets a database of its own without the cost of CREATE DATABASE.
  Result<std::string> NewSchemaUrl();
  // `pg_ctl restart -m fast`: every connection is cut.
  Status Restart();
  // Stops the server (`pg_ctl stop -m fast`) and starts it again later with
  // StartAgain(); for tests of what a store does while the database is down.
  Status Stop();
  Status StartAgain();

 private:
  PgTestCluster() = default;
  Status RunPgCtl(const std::vector<std::string>& args);

  std::filesystem::path bindir_;
  std::filesystem::path dir_;  // holds data/, the socket and the log
  int port_ = 0;
  int schemas_ = 0;
  bool running_ = false;
  bool durable_ = false;
  bool owned_ = true;  // false when attached: the destructor leaves it alone
};

// Runs one SQL string on `url` (no result). For test fixtures.
Status PgExecForTest(const std::string& url, const std::string& sql);
// The first column of the first row of `sql` as an integer; -1 when there is
// no row or it is NULL.
Result<int64_t> PgQueryIntForTest(const std::string& url, const std::string& sql);

}  // namespace agentloop::store
