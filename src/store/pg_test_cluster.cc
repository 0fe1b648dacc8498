#include "store/pg_test_cluster.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store/libpq_loader.h"

namespace agentloop::store {
namespace {

// The newest /usr/lib/postgresql/<major>/bin holding initdb.
std::filesystem::path FindBindir() {
  std::error_code ec;
  std::filesystem::path best;
  int best_major = -1;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    int major = std::atoi(e.path().filename().c_str());
    if (major > best_major && std::filesystem::exists(e.path() / "bin" / "initdb", ec)) {
      best_major = major;
      best = e.path() / "bin";
    }
  }
  return best;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Runs argv with a fixed environment, as `as`, output appended to `log`.
// Returns the exit status (-1 when it could not run).
int Run(const std::vector<std::string>& argv, const RunAs& as, const std::filesystem::path& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  static char env_path[] = "PATH=/usr/bin:/bin";
  static char env_lc[] = "LC_ALL=C";
  static char env_tz[] = "TZ=UTC";
  char* envp[] = {env_path, env_lc, env_tz, nullptr};
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    if (as.drop) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0) {
        _exit(126);
      }
    }
    // The server must not inherit the test's descriptors (sockets of other
    // fixtures): close everything above stderr.
    for (int i = 3; i < 1024; ++i) ::close(i);
    ::execve(args[0], args.data(), envp);
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Tail(const std::filesystem::path& p, size_t max = 2000) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max ? s.substr(s.size() - max) : s;
}

RunAs Account() {
  RunAs as;
  if (::geteuid() != 0) return as;
  if (passwd* pw = ::getpwnam("postgres"); pw != nullptr) {
    as.drop = true;
    as.uid = pw->pw_uid;
    as.gid = pw->pw_gid;
  }
  return as;
}

}  // namespace

Result<std::unique_ptr<PgTestCluster>> PgTestCluster::Start(bool durable) {
  std::unique_ptr<PgTestCluster> c(new PgTestCluster());
  c->durable_ = durable;
  c->bindir_ = FindBindir();
  if (c->bindir_.empty()) {
    return FailedPrecondition(
        "no PostgreSQL server programs under /usr/lib/postgresql/*/bin (install postgresql-15: "
        "scripts/install-deps.sh)");
  }
  const RunAs as = Account();
  if (::geteuid() == 0 && !as.drop) {
    return FailedPrecondition(
        "running as root and there is no `postgres` user to run initdb as (initdb refuses root)");
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "al_pg_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return FailedPrecondition(std::string("mkdtemp: ") + std::strerror(errno));
  }
  c->dir_ = tmpl;
  if (as.drop && ::chown(c->dir_.c_str(), as.uid, as.gid) != 0) {
    return FailedPrecondition("chown " + c->dir_.string() + ": " + std::strerror(errno));
  }
  const auto log = c->dir_ / "setup.log";
  int rc = Run({(c->bindir_ / "initdb").string(), "-D", (c->dir_ / "data").string(), "-A", "trust",
                "-U", "agentloop", "-E", "UTF8", "--no-sync", "--no-instructions"},
               as, log);
  if (rc != 0) {
    return FailedPrecondition("initdb failed (exit " + std::to_string(rc) + "): " + Tail(log));
  }
  // A free port can be taken between the probe and the start: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    c->port_ = FreePort();
    Status s = c->StartAgain();
    if (s.ok()) return c;
    if (attempt == 4) return s;
  }
  return FailedPrecondition("unreachable");
}

Status PgTestCluster::StartAgain() {
  const std::string opts =
      "-p " + std::to_string(port_) + " -k " + dir_.string() +
      " -c listen_addresses=127.0.0.1 -c max_connections=200" +
      (durable_ ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
  Status s = RunPgCtl({"-o", opts, "-w", "-t", "60", "start"});
  if (s.ok()) running_ = true;
  return s;
}

Status PgTestCluster::RunPgCtl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {(bindir_ / "pg_ctl").string(), "-D", (dir_ / "data").string(),
                                   "-l", (dir_ / "server.log").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto log = dir_ / "pg_ctl.log";
  int rc = Run(argv, Account(), log);
  if (rc != 0) {
    return FailedPrecondition("pg_ctl " + args.back() + " failed (exit " + std::to_string(rc) +
                              "): " + Tail(log) + "\nserver log: " + Tail(dir_ / "server.log"));
  }
  return Status::Ok();
}

Status PgTestCluster::Restart() {
  Status s = RunPgCtl({"-m", "fast", "-w", "-t", "60", "restart"});
  return s;
}

Status PgTestCluster::Stop() {
  Status s = RunPgCtl({"-m", "fast", "-w", "-t", "60", "stop"});
  if (s.ok()) running_ = false;
  return s;
}

PgTestCluster::~PgTestCluster() {
  if (!owned_) return;
  if (running_) (void)RunPgCtl({"-m", "immediate", "-w", "-t", "60", "stop"});
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Result<PgTestCluster*> PgTestCluster::Shared() {
  static std::once_flag once;
  static std::unique_ptr<PgTestCluster> cluster;
  static Status error;
  std::call_once(once, [] {
#ifdef AL_PG_TEST_CLUSTER_FILE
    if (auto attached = Attach(AL_PG_TEST_CLUSTER_FILE); attached.ok()) {
      cluster = std::move(*attached);
      return;
    }
#endif
    auto c = Start();
    if (c.ok()) {
      cluster = std::move(*c);
    } else {
      error = c.error();
    }
  });
  if (!cluster) return error;
  return cluster.get();
}

Result<PgTestCluster*> PgTestCluster::Own() {
  static std::once_flag once;
  static std::unique_ptr<PgTestCluster> cluster;
  static Status error;
  std::call_once(once, [] {
    auto c = Start();
    if (c.ok()) {
      cluster = std::move(*c);
    } else {
      error = c.error();
    }
  });
  if (!cluster) return error;
  return cluster.get();
}

// The file: the port, the directory and the server programs' directory, one a line.
Status PgTestCluster::Detach(const std::filesystem::path& file) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port_ << "\n" << dir_.string() << "\n" << bindir_.string() << "\n";
    if (!out) return Internal("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) return Internal("rename " + tmp.string() + ": " + ec.message());
  owned_ = false;
  return Status::Ok();
}

Result<std::unique_ptr<PgTestCluster>> PgTestCluster::Attach(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::unique_ptr<PgTestCluster> c(new PgTestCluster());
  std::string dir;
  std::string bindir;
  if (!(in >> c->port_) || !(in >> dir) || !(in >> bindir)) {
    return Unavailable("no cluster described in " + file.string());
  }
  c->dir_ = dir;
  c->bindir_ = bindir;
  c->running_ = true;
  c->owned_ = false;
  AL_RETURN_IF_ERROR(PgExecForTest(c->AdminUrl(), "SELECT 1"));
  return c;
}

Status PgTestCluster::StopDetached(const std::filesystem::path& file) {
  auto c = Attach(file);
  std::error_code ec;
  if (!c.ok()) {
    std::ifstream in(file);
    int port = 0;
    std::string dir;
    // A server that no longer answers: its directory may still be there.
    if (in >> port >> dir && dir.find("al_pg_") != std::string::npos) {
      std::filesystem::remove_all(dir, ec);
    }
    std::filesystem::remove(file, ec);
    return Status::Ok();
  }
  (*c)->owned_ = true;  // the destructor stops the server and deletes its directory
  c->reset();
  std::filesystem::remove(file, ec);
  return Status::Ok();
}

std::string PgTestCluster::AdminUrl() const {
  return "postgresql://agentloop@127.0.0.1:" + std::to_string(port_) + "/postgres";
}

Result<std::string> PgTestCluster::NewSchemaUrl() {
  // Unique across the processes that share a cluster: the pid, and the time
  // (a pid can come back in a long run).
  const auto ns = std::chrono::steady_clock::now().time_since_epoch().count();
  std::string schema = "t" + std::to_string(::getpid()) + "_" + std::to_string(ns) + "_" +
                       std::to_string(++schemas_);
  AL_RETURN_IF_ERROR(PgExecForTest(AdminUrl(), "CREATE SCHEMA " + schema));
  return AdminUrl() + "?options=-csearch_path%3D" + schema;
}

Status PgExecForTest(const std::string& url, const std::string& sql) {
  AL_RETURN_IF_ERROR(LoadLibpq());
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return Unavailable("connect " + url + ": " + msg);
  }
  PGresult* r = PQexec(conn, sql.c_str());
  const auto st = PQresultStatus(r);
  Status out = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK
                   ? Status::Ok()
                   : Internal(sql + ": " + PQresultErrorMessage(r));
  PQclear(r);
  PQfinish(conn);
  return out;
}

Result<int64_t> PgQueryIntForTest(const std::string& url, const std::string& sql) {
  AL_RETURN_IF_ERROR(LoadLibpq());
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return Unavailable("connect " + url + ": " + msg);
  }
  PGresult* r = PQexec(conn, sql.c_str());
  Result<int64_t> out = int64_t{-1};
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    out = Internal(sql + ": " + PQresultErrorMessage(r));
  } else if (PQntuples(r) > 0 && PQgetisnull(r, 0, 0) == 0) {
    out = std::strtoll(PQgetvalue(r, 0, 0), nullptr, 10);
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

}  // namespace agentloop::store
