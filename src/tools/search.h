// The search engine behind the grep tool: pattern matchers and the per-file
// search that formats results.
//
// A pattern without regex metacharacters is searched as a literal: the
// buffer is scanned 16/32 bytes at a time (SSE2/AVX2) for two of the
// needle's rarest bytes at their offsets, and candidates are verified with a
// compare ("packed pair"); ASCII case-insensitive literals fold case in the
// same loop. Everything else goes to RE2, which runs in linear time, so no
// pattern can make the engine backtrack for ever. Matches never span lines
// unless `multiline` (then '.' also matches '\n').
//
// The whole file is searched as one buffer: the matcher finds the next
// match, and only then are the line bounds and the line number (counted
// incrementally with SIMD) computed around it.
//
// Thread-safety: a Matcher is used by one thread at a time; Clone() one per
// worker.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop::tools {

class Matcher {
 public:
  // kInvalidArgument with RE2's message for a bad pattern.
  static Result<std::unique_ptr<Matcher>> Create(const std::string& pattern, bool case_insensitive,
                                                 bool multiline);
  virtual ~Matcher() = default;

  // Leftmost match starting at or after `from` in buf[0, size).
  virtual bool Find(const char* buf, size_t size, size_t from, size_t* begin, size_t* end) = 0;
  // Whether buf holds any match (no position needed: may be faster).
  virtual bool Any(const char* buf, size_t size) {
    size_t b;
    size_t e;
    return Find(buf, size, 0, &b, &e);
  }
  virtual std::unique_ptr<Matcher> Clone() const = 0;
  virtual bool is_literal() const = 0;

  bool multiline() const { return multiline_; }

 protected:
  bool multiline_ = false;
};

enum class OutputMode { kContent, kFilesWithMatches, kCount };

struct SearchOptions {
  OutputMode mode = OutputMode::kFilesWithMatches;
  int before_context = 0;
  int after_context = 0;
  size_t max_line_bytes = 2000;  // longer lines are cut with a marker; 0: no limit
};

// What one file contributed.
struct FileResult {
  std::string path;      // display path
  uint64_t matches = 0;  // matching lines
  uint64_t entries = 0;  // output lines in `text` (content: match + context lines)
  std::string text;      // formatted output, one entry per line
};

// Searches buf[0, size) of the file shown as `display`. Returns false when
// nothing matched.
bool SearchBuffer(Matcher& matcher, const char* buf, size_t size, std::string_view display,
                  const SearchOptions& options, FileResult* out);

// Reads files into a buffer reused across calls; files of `map_threshold`
// bytes or more are mapped instead. Reading is the cheaper path for the
// common small file: an munmap costs a TLB shootdown (~100 us on some VMs),
// a read into a warm buffer costs a copy. One per worker thread.
class FileReader {
 public:
  static constexpr size_t kDefaultMapThreshold = 64u << 20;
  explicit FileReader(size_t map_threshold = kDefaultMapThreshold)
      : map_threshold_(map_threshold) {}
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Reads the regular file at `path`; false when it cannot be read, with the
  // reason in error(). The data stays valid until the next Read.
  bool Read(const char* path, std::string_view* data);
  // Like Read for a file already open as `fd` (open it with O_NONBLOCK so a
  // FIFO cannot block); takes ownership of `fd` and closes it.
  bool ReadFd(int fd, std::string_view* data);
  // Why the last Read failed ("No such file or directory", "not a regular
  // file", ...).
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string reason);
  void Unmap();
  size_t map_threshold_;
  std::string error_;
  std::vector<char> buf_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

// Whether the data looks binary (a NUL byte in its first 64 KiB).
bool LooksBinary(std::string_view data);

// Number of '\n' bytes in [p, p + n).
size_t CountNewlines(const char* p, size_t n);

// How literal patterns are scanned in this build on this machine: "avx2" or
// "sse2" (x86-64), or "portable" (memchr: other architectures, or a build
// with AL_PORTABLE_SEARCH).
std::string_view LiteralScanName();

}  // namespace agentloop::tools
