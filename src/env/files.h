// File helpers at the OS boundary: whole-file reads, atomic replacement, and
// opening files beneath a directory without following symbolic links.
//
// Thread-safety: free functions with no shared state.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "agentloop/status.h"

namespace agentloop {

// Reads the whole file. kNotFound when it does not exist; kFailedPrecondition
// when it is not a regular file or larger than `max_bytes`.
Result<std::string> ReadFileToString(const std::filesystem::path& path,
                                     size_t max_bytes = size_t{1} << 32);

// Replaces (or creates) `path` with `content` atomically: the bytes go to a
// temporary file in the same directory, which is fsync'ed and renamed over
// `path`; then the directory is fsync'ed. An existing file keeps its mode
// (and, when permitted, its owner); a new file gets 0666 minus the umask.
// The parent directory must exist. Readers see the old or the new content,
// never a mix. A symbolic link at `path` is refused (kPermissionDenied), not
// replaced or written through; see WriteFileAtomicAt.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content);

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.Release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset();

 private:
  int fd_ = -1;
};

// Opens the directory `rel` beneath the open directory `root_fd` without
// following any symbolic link on the way, so that a concurrent swap of a
// directory for a link can never redirect the open outside `root_fd`.
// `rel` is relative and has no ".." component ("" or "." is the root itself).
// Uses openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) when the kernel has it
// (checked at run time; ENOSYS falls back), else one openat(O_NOFOLLOW |
// O_DIRECTORY) per component. With `create`, missing directories are made
// (mkdirat, mode 0777 minus the umask), always component by component.
// Errors: kPermissionDenied naming the component that is a symbolic link,
// kNotFound, kFailedPrecondition for a component that is not a directory,
// kInvalidArgument for a bad `rel`.
Result<UniqueFd> OpenDirBeneath(int root_fd, std::string_view rel, bool create);

// Opens the entry `name` (one component) of the open directory `dir_fd`
// with O_NOFOLLOW | O_CLOEXEC added to `flags`: a symbolic link is refused
// (kPermissionDenied), as are other errors by errno.
Result<UniqueFd> OpenEntryNoFollow(int dir_fd, std::string_view name, int flags);

// Reads the whole regular file open as `fd` (not closed), like
// ReadFileToString; `display` names it in errors.
Result<std::string> ReadFdToString(int fd, std::string_view display,
                                   size_t max_bytes = size_t{1} << 32);

// WriteFileAtomic within the open directory `dir_fd`: the temporary file is
// created there (O_CREAT | O_EXCL | O_NOFOLLOW), renamed onto `name` with
// renameat in the same directory, and the directory is fsync'ed. An
// existing `name` must be a regular file (a symbolic link is refused, not
// followed). `display` names the file in errors.
Status WriteFileAtomicAt(int dir_fd, std::string_view name, std::string_view content,
                         std::string_view display);

// Whether this kernel serves openat2 (for tests and diagnostics).
bool HaveOpenat2();

// Tests only: makes OpenDirBeneath act as on a kernel without openat2
// (`off` true) or probe the kernel again (`off` false).
void SetOpenat2DisabledForTesting(bool off);

}  // namespace agentloop
