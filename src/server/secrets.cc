#include "server/secrets.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include <openssl/rand.h>
#include <sys/stat.h>

#include "base/ids.h"
#include "base/strings.h"

namespace agentloop::server {
namespace {

namespace fs = std::filesystem;

Status Errno(std::string_view what, const fs::path& path, int err) {
  std::string msg = std::string(what) + " " + path.string() + ": " + std::strerror(err);
  return err == EACCES || err == EPERM ? PermissionDenied(msg) : Internal(msg);
}

// Writes `secret` to a new 0600 file beside `path` and returns its name.
Result<fs::path> WriteTemporary(const fs::path& path, const std::string& secret) {
  std::error_code ec;
  const fs::path dir = path.parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  fs::path tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = path;
    tmp += ".tmp-" + NewId("s").substr(2, 8);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return Errno("cannot create", tmp, errno);
  }
  if (fd < 0) return Internal("cannot create a temporary file beside " + path.string());
  const std::string content = secret + "\n";
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
            ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Errno("cannot write", tmp, err);
  }
  return tmp;
}

Result<std::string> ReadSecret(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) {
      return FailedPrecondition(path.string() + " is a symbolic link; a secret must be a file");
    }
    if (errno == ENOENT) return NotFound(path.string() + " does not exist");
    return Errno("cannot open", path, errno);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Errno("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return FailedPrecondition(path.string() + " is not a regular file");
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return PermissionDenied(path.string() + " (mode " + mode +
                            ") must belong to this user and be readable by nobody else: "
                            "`chmod 600` it, or delete it to have a new one made");
  }
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf);
  const int err = errno;
  ::close(fd);
  if (n < 0) return Errno("cannot read", path, err);
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.size() < 32 || s.find_first_of(" \t\r\n") != std::string::npos) {
    return FailedPrecondition(path.string() +
                              " does not hold a secret (at least 32 characters, no white space); "
                              "delete it to have a new one made");
  }
  return s;
}

}  // namespace

Result<std::string> RandomSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return Internal("the random generator failed to make a secret");
  }
  return HexEncode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

Result<std::string> LoadOrCreateSecret(const fs::path& path) {
  Result<std::string> existing = ReadSecret(path);
  if (existing.ok() || existing.error().code() != Code::kNotFound) return existing;
  AL_ASSIGN_OR_RETURN(std::string secret, RandomSecret());
  AL_ASSIGN_OR_RETURN(fs::path tmp, WriteTemporary(path, secret));
  // link() does not replace: of two starts at once, the first file stays
  // and both use it.
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && err != EEXIST) return Errno("cannot create", path, err);
  return ReadSecret(path);
}

Result<std::string> RotateSecret(const fs::path& path) {
  AL_ASSIGN_OR_RETURN(std::string secret, RandomSecret());
  AL_ASSIGN_OR_RETURN(fs::path tmp, WriteTemporary(path, secret));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Errno("cannot replace", path, err);
  }
  return secret;
}

}  // namespace agentloop::server
