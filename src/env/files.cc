#include "env/files.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include <sys/stat.h>

#include "base/ids.h"

namespace agentloop {
namespace {

Status FromErrno(std::string_view what, const std::filesystem::path& path, int err) {
  std::string msg = std::string(what) + " " + path.string() + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDenied(msg);
    default:
      return Internal(msg);
  }
}

}  // namespace

Result<std::string> ReadFileToString(const std::filesystem::path& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FromErrno("cannot open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return FromErrno("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return FailedPrecondition(path.string() + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    return FailedPrecondition(path.string() + " is larger than " + std::to_string(max_bytes) +
                              " bytes");
  }
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (true) {
    if (got == out.size()) out.resize(std::max<size_t>(out.size() * 2, 4096));
    ssize_t n = read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return FromErrno("cannot read", path, err);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got > max_bytes) {
      close(fd);
      return FailedPrecondition(path.string() + " is larger than " + std::to_string(max_bytes) +
                                " bytes");
    }
  }
  close(fd);
  out.resize(got);
  return out;
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  struct stat old_st;
  bool existed = stat(path.c_str(), &old_st) == 0;
  if (existed && !S_ISREG(old_st.st_mode)) {
    return FailedPrecondition(path.string() + " exists and is not a regular file");
  }

  std::filesystem::path tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = dir / ("." + path.filename().string() + ".al-tmp-" + NewId("w").substr(2, 8));
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return FromErrno("cannot create", tmp, errno);
  }
  if (fd < 0) return Internal("cannot create a temporary file in " + dir.string());

  auto fail = [&](std::string_view what, const std::filesystem::path& p) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return FromErrno(what, p, err);
  };
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write", tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (existed) {
    if (fchmod(fd, old_st.st_mode & 07777) != 0) return fail("cannot chmod", tmp);
    // Best effort: only privileged processes may give the file away.
    [[maybe_unused]] int ignored = fchown(fd, old_st.st_uid, old_st.st_gid);
  }
  if (fsync(fd) != 0) return fail("cannot fsync", tmp);
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return FromErrno("cannot close", tmp, err);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return FromErrno("cannot rename onto", path, err);
  }
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return Status::Ok();
}

}  // namespace agentloop
