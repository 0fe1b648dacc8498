#include "env/files.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "base/ids.h"
#include "base/strings.h"

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

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Result<std::string> ReadFdToString(int fd, std::string_view display, size_t max_bytes) {
  const std::filesystem::path path{std::string(display)};
  struct stat st;
  if (fstat(fd, &st) != 0) return FromErrno("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(path.string() + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
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
      return FromErrno("cannot read", path, errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got > max_bytes) {
      return FailedPrecondition(path.string() + " is larger than " + std::to_string(max_bytes) +
                                " bytes");
    }
  }
  out.resize(got);
  return out;
}

Result<std::string> ReadFileToString(const std::filesystem::path& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FromErrno("cannot open", path, errno);
  UniqueFd owned(fd);
  return ReadFdToString(fd, path.string(), max_bytes);
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return FromErrno("cannot open the directory", dir, errno);
  UniqueFd owned(dfd);
  return WriteFileAtomicAt(dfd, path.filename().string(), content, path.string());
}

Status WriteFileAtomicAt(int dir_fd, std::string_view name_view, std::string_view content,
                         std::string_view display) {
  const std::string name(name_view);
  const std::filesystem::path shown{std::string(display)};
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return InvalidArgument("cannot write " + shown.string() + ": bad file name '" + name + "'");
  }
  struct stat old_st;
  bool existed = fstatat(dir_fd, name.c_str(), &old_st, AT_SYMLINK_NOFOLLOW) == 0;
  if (existed && S_ISLNK(old_st.st_mode)) {
    return PermissionDenied(shown.string() + " is a symbolic link; it is not written through");
  }
  if (existed && !S_ISREG(old_st.st_mode)) {
    return FailedPrecondition(shown.string() + " exists and is not a regular file");
  }

  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = "." + name + ".al-tmp-" + NewId("w").substr(2, 8);
    fd = openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) {
      return FromErrno("cannot create a temporary file for", shown, errno);
    }
  }
  if (fd < 0) return Internal("cannot create a temporary file for " + shown.string());

  auto fail = [&](std::string_view what) {
    int err = errno;
    close(fd);
    unlinkat(dir_fd, tmp.c_str(), 0);
    return FromErrno(what, shown, err);
  };
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (existed) {
    if (fchmod(fd, old_st.st_mode & 07777) != 0) return fail("cannot chmod");
    // Best effort: only privileged processes may give the file away.
    [[maybe_unused]] int ignored = fchown(fd, old_st.st_uid, old_st.st_gid);
  }
  if (fsync(fd) != 0) return fail("cannot fsync");
  if (close(fd) != 0) {
    int err = errno;
    unlinkat(dir_fd, tmp.c_str(), 0);
    return FromErrno("cannot close the temporary file for", shown, err);
  }
  if (renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    int err = errno;
    unlinkat(dir_fd, tmp.c_str(), 0);
    return FromErrno("cannot rename onto", shown, err);
  }
  fsync(dir_fd);
  return Status::Ok();
}

namespace {

std::atomic<int> g_openat2{-1};  // -1 unknown, 0 absent, 1 present

// openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; -1 with errno, and
// errno ENOSYS when the kernel lacks the call.
int Openat2Beneath(int dir_fd, const char* rel, int flags, mode_t mode) {
  if (g_openat2.load(std::memory_order_relaxed) == 0) {
    errno = ENOSYS;
    return -1;
  }
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, dir_fd, rel, &how, sizeof how);
    if (fd >= 0) {
      g_openat2.store(1, std::memory_order_relaxed);
      return static_cast<int>(fd);
    }
    if (errno == ENOSYS) {
      g_openat2.store(0, std::memory_order_relaxed);
      return -1;
    }
    // EAGAIN: a concurrent rename or mount; the kernel asks for a retry.
    if (errno != EAGAIN || attempt >= 8) return -1;
  }
}

Result<std::vector<std::string>> Components(std::string_view rel) {
  std::vector<std::string> out;
  if (!rel.empty() && rel[0] == '/') {
    return InvalidArgument("'" + std::string(rel) + "' is not a relative path");
  }
  for (std::string_view seg : Split(rel, '/')) {
    if (seg.empty() || seg == ".") continue;
    if (seg == "..") return InvalidArgument("'" + std::string(rel) + "' contains '..'");
    out.emplace_back(seg);
  }
  return out;
}

std::string JoinUpTo(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) {
    if (!out.empty()) out += '/';
    out += parts[i];
  }
  return out;
}

Status OpenError(int err, const std::string& where) {
  switch (err) {
    case ELOOP:
    case EXDEV:
      return PermissionDenied(where +
                              " is a symbolic link (or leads through one); it is not "
                              "followed");
    case ENOTDIR:
      return FailedPrecondition(where + " is not a directory");
    default:
      return FromErrno("cannot open", where, err);
  }
}

}  // namespace

void SetOpenat2DisabledForTesting(bool off) { g_openat2.store(off ? 0 : -1); }

bool HaveOpenat2() {
  if (g_openat2.load() < 0) {
    int fd = Openat2Beneath(AT_FDCWD, ".", O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0) close(fd);
  }
  return g_openat2.load() == 1;
}

Result<UniqueFd> OpenEntryNoFollow(int dir_fd, std::string_view name_view, int flags) {
  const std::string name(name_view);
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return InvalidArgument("bad file name '" + name + "'");
  }
  int fd = openat(dir_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return OpenError(errno, name);
  return UniqueFd(fd);
}

Result<UniqueFd> OpenDirBeneath(int root_fd, std::string_view rel, bool create) {
  AL_ASSIGN_OR_RETURN(std::vector<std::string> parts, Components(rel));
  const int dir_flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  if (parts.empty()) {
    int fd = openat(root_fd, ".", dir_flags);
    if (fd < 0) return FromErrno("cannot open", ".", errno);
    return UniqueFd(fd);
  }
  if (!create) {
    std::string joined = JoinUpTo(parts, parts.size());
    int fd = Openat2Beneath(root_fd, joined.c_str(), dir_flags, 0);
    if (fd >= 0) return UniqueFd(fd);
    if (errno != ENOSYS) return OpenError(errno, joined);
  }
  // One component at a time from the root, never following a link.
  UniqueFd cur(openat(root_fd, ".", dir_flags));
  if (!cur.valid()) return FromErrno("cannot open", ".", errno);
  for (size_t i = 0; i < parts.size(); ++i) {
    const char* name = parts[i].c_str();
    int fd = openat(cur.get(), name, dir_flags | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && create) {
      if (mkdirat(cur.get(), name, 0777) != 0 && errno != EEXIST) {
        return FromErrno("cannot create the directory", JoinUpTo(parts, i + 1), errno);
      }
      fd = openat(cur.get(), name, dir_flags | O_NOFOLLOW);
    }
    if (fd < 0) {
      int err = errno;
      // O_DIRECTORY | O_NOFOLLOW on a link answers ENOTDIR, not ELOOP.
      struct stat st;
      if (err == ENOTDIR && fstatat(cur.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        err = ELOOP;
      }
      return OpenError(err, JoinUpTo(parts, i + 1));
    }
    cur = UniqueFd(fd);
  }
  return cur;
}
}  // namespace agentloop
