#include "tools/search.h"

#include <fcntl.h>
#include <unistd.h>

// The literal scan uses SSE2/AVX2 on x86-64; elsewhere (arm64, ...) and when
// AL_PORTABLE_SEARCH is defined (a CMake switch, so x86 tests cover this
// path too) it uses memchr, which the C library vectorises on each
// architecture (NEON on arm64).
#if defined(__x86_64__) && !defined(AL_PORTABLE_SEARCH)
#define AL_SEARCH_X86 1
#include <emmintrin.h>
#include <immintrin.h>
#else
#define AL_SEARCH_X86 0
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <re2/re2.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "base/strings.h"

namespace agentloop::tools {
namespace {

constexpr size_t kBinaryProbe = 64u << 10;

// Rough frequency rank of bytes in source code and prose: higher is more
// common. Used to pick the rarest bytes of a literal to scan for.
int ByteRank(unsigned char c) {
  static const char kCommon[] = " etaoinsrhldcumfpgwybv_.,;()=\n\t\"'k-/:{}0123456789x";
  const char* pos = std::strchr(kCommon, c);
  if (c != 0 && pos != nullptr) return 255 - static_cast<int>(pos - kCommon);
  if (c >= 'A' && c <= 'Z') return 160;
  if (c >= 'a' && c <= 'z') return 150;  // j, q, z
  if (c < 0x20) return 20;
  if (c >= 0x80) return 60;
  return 130;  // other punctuation
}

inline unsigned char Lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
inline bool IsAlpha(unsigned char c) { return Lower(c) >= 'a' && Lower(c) <= 'z'; }

#if AL_SEARCH_X86
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

class LiteralMatcher final : public Matcher {
 public:
  LiteralMatcher(std::string needle, bool ci, bool multiline)
      : needle_(std::move(needle)), ci_(ci) {
    multiline_ = multiline;
    if (ci_) {
      for (char& c : needle_) c = static_cast<char>(Lower(static_cast<unsigned char>(c)));
    }
    auto rank = [&](size_t i) {
      unsigned char c = static_cast<unsigned char>(needle_[i]);
      int r = ByteRank(c);
      if (ci_ && IsAlpha(c)) r = std::max(r, ByteRank(static_cast<unsigned char>(c - 32))) + 20;
      return r;
    };
    size_t n = needle_.size();
    i1_ = 0;
    for (size_t i = 1; i < n; ++i) {
      if (rank(i) < rank(i1_)) i1_ = i;
    }
    i2_ = i1_;
    for (size_t i = 0; i < n; ++i) {
      if (needle_[i] == needle_[i1_]) continue;
      if (i2_ == i1_ || rank(i) < rank(i2_)) i2_ = i;
    }
    if (i2_ == i1_ && n > 1) i2_ = (i1_ == 0) ? n - 1 : 0;
    b1_ = static_cast<unsigned char>(needle_[i1_]);
    b2_ = static_cast<unsigned char>(needle_[i2_]);
    m1_ = ci_ && IsAlpha(b1_) ? 0x20 : 0;
    m2_ = ci_ && IsAlpha(b2_) ? 0x20 : 0;
    reach_ = std::max(i1_, i2_);
  }

  bool Find(const char* buf, size_t size, size_t from, size_t* begin, size_t* end) override {
    const size_t n = needle_.size();
    if (n == 0) {
      if (from > size) return false;
      *begin = *end = from;
      return true;
    }
    if (size < n || from > size - n) return false;
    size_t last = size - n;  // last candidate start
    size_t p = from;
    size_t hit;
#if AL_SEARCH_X86
    bool found =
        HasAvx2() ? ScanAvx2(buf, size, last, &p, &hit) : ScanSse2(buf, size, last, &p, &hit);
#else
    bool found = ScanPortable(buf, last, &p, &hit);
#endif
    if (!found) {
      // Scalar tail.
      found = false;
      for (; p <= last; ++p) {
        if ((static_cast<unsigned char>(buf[p + i1_]) | m1_) == b1_ &&
            (static_cast<unsigned char>(buf[p + i2_]) | m2_) == b2_ && Verify(buf + p)) {
          hit = p;
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    *begin = hit;
    *end = hit + n;
    return true;
  }

  std::unique_ptr<Matcher> Clone() const override {
    return std::make_unique<LiteralMatcher>(*this);
  }
  bool is_literal() const override { return true; }

 private:
  bool Verify(const char* p) const {
    if (!ci_) return std::memcmp(p, needle_.data(), needle_.size()) == 0;
    for (size_t i = 0; i < needle_.size(); ++i) {
      if (Lower(static_cast<unsigned char>(p[i])) != static_cast<unsigned char>(needle_[i])) {
        return false;
      }
    }
    return true;
  }

#if !AL_SEARCH_X86
  // Finds candidates by the first chosen byte with memchr (when it is not a
  // case-folded letter); on return *p is where the scalar tail continues.
  bool ScanPortable(const char* buf, size_t last, size_t* p, size_t* hit) const {
    if (m1_ != 0) return false;  // the scalar tail folds case
    size_t i = *p;
    while (i <= last) {
      const void* q = std::memchr(buf + i + i1_, b1_, last - i + 1);
      if (q == nullptr) {
        *p = last + 1;
        return false;
      }
      size_t c = static_cast<size_t>(static_cast<const char*>(q) - buf) - i1_;
      if ((static_cast<unsigned char>(buf[c + i2_]) | m2_) == b2_ && Verify(buf + c)) {
        *hit = c;
        return true;
      }
      i = c + 1;
    }
    *p = i;
    return false;
  }
#else
  // Scans blocks while a whole block fits; on return *p is where the scalar
  // tail continues (when nothing was found).
  bool ScanSse2(const char* buf, size_t size, size_t last, size_t* p, size_t* hit) const {
    const __m128i v1 = _mm_set1_epi8(static_cast<char>(b1_));
    const __m128i v2 = _mm_set1_epi8(static_cast<char>(b2_));
    const __m128i o1 = _mm_set1_epi8(static_cast<char>(m1_));
    const __m128i o2 = _mm_set1_epi8(static_cast<char>(m2_));
    size_t i = *p;
    while (i + reach_ + 16 <= size) {
      __m128i a =
          _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + i + i1_)), o1);
      __m128i b =
          _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + i + i2_)), o2);
      unsigned mask = static_cast<unsigned>(
          _mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, v1), _mm_cmpeq_epi8(b, v2))));
      while (mask != 0) {
        size_t c = i + static_cast<size_t>(__builtin_ctz(mask));
        if (c > last) break;
        if (Verify(buf + c)) {
          *hit = c;
          return true;
        }
        mask &= mask - 1;
      }
      i += 16;
    }
    *p = i;
    return false;
  }

  __attribute__((target("avx2"))) bool ScanAvx2(const char* buf, size_t size, size_t last,
                                                size_t* p, size_t* hit) const {
    const __m256i v1 = _mm256_set1_epi8(static_cast<char>(b1_));
    const __m256i v2 = _mm256_set1_epi8(static_cast<char>(b2_));
    const __m256i o1 = _mm256_set1_epi8(static_cast<char>(m1_));
    const __m256i o2 = _mm256_set1_epi8(static_cast<char>(m2_));
    size_t i = *p;
    while (i + reach_ + 32 <= size) {
      __m256i a =
          _mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(buf + i + i1_)), o1);
      __m256i b =
          _mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(buf + i + i2_)), o2);
      unsigned mask = static_cast<unsigned>(_mm256_movemask_epi8(
          _mm256_and_si256(_mm256_cmpeq_epi8(a, v1), _mm256_cmpeq_epi8(b, v2))));
      while (mask != 0) {
        size_t c = i + static_cast<size_t>(__builtin_ctz(mask));
        if (c > last) break;
        if (Verify(buf + c)) {
          *hit = c;
          return true;
        }
        mask &= mask - 1;
      }
      i += 32;
    }
    *p = i;
    return ScanSse2(buf, size, last, p, hit);
  }
#endif

  std::string needle_;  // lower-cased when ci_
  bool ci_;
  size_t i1_ = 0;
  size_t i2_ = 0;
  size_t reach_ = 0;
  unsigned char b1_ = 0;
  unsigned char b2_ = 0;
  unsigned char m1_ = 0;  // 0x20 when the byte is a letter folded for ci
  unsigned char m2_ = 0;
};

class RegexMatcher final : public Matcher {
 public:
  RegexMatcher(std::string pattern, const RE2::Options& opts, bool multiline)
      : pattern_(std::move(pattern)), opts_(opts), re_(std::make_unique<RE2>(pattern_, opts_)) {
    multiline_ = multiline;
  }
  const RE2& re() const { return *re_; }

  bool Find(const char* buf, size_t size, size_t from, size_t* begin, size_t* end) override {
    re2::StringPiece text(buf, size);
    re2::StringPiece m;
    if (from > size || !re_->Match(text, from, size, RE2::UNANCHORED, &m, 1)) return false;
    *begin = static_cast<size_t>(m.data() - buf);
    *end = *begin + m.size();
    return true;
  }
  bool Any(const char* buf, size_t size) override {
    return re_->Match(re2::StringPiece(buf, size), 0, size, RE2::UNANCHORED, nullptr, 0);
  }
  std::unique_ptr<Matcher> Clone() const override {
    return std::make_unique<RegexMatcher>(pattern_, opts_, multiline_);
  }
  bool is_literal() const override { return false; }

 private:
  std::string pattern_;
  RE2::Options opts_;
  std::unique_ptr<RE2> re_;
};

// The literal a pattern stands for, or false when it uses regex syntax.
bool AsLiteral(const std::string& pattern, std::string* out) {
  static const std::string_view kMeta = "\\^$.|?*+()[]{}";
  out->clear();
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return false;
      char e = pattern[i + 1];
      if (std::isalnum(static_cast<unsigned char>(e)) || static_cast<unsigned char>(e) >= 0x80) {
        return false;  // \d, \w, \x41, ...
      }
      out->push_back(e);
      ++i;
      continue;
    }
    if (kMeta.find(c) != std::string_view::npos) return false;
    out->push_back(c);
  }
  return true;
}

void AppendLine(std::string& out, std::string_view display, uint64_t lineno, char sep,
                const char* b, const char* e, size_t max_bytes) {
  if (e > b && e[-1] == '\r') --e;
  out.append(display);
  out.push_back(sep);
  char num[24];
  int len = 0;
  uint64_t v = lineno;
  do {
    num[len++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (len > 0) out.push_back(num[--len]);
  out.push_back(sep);
  size_t n = static_cast<size_t>(e - b);
  if (max_bytes != 0 && n > max_bytes) {
    size_t cut = TruncateUtf8(std::string_view(b, n), max_bytes).size();
    out.append(b, cut);
    out += " [... line truncated, ";
    out += std::to_string(n - cut);
    out += " more bytes]";
  } else {
    out.append(b, n);
  }
  out.push_back('\n');
}

struct LineRef {
  size_t start;
  size_t end;  // exclusive, before '\n'
  uint64_t lineno;
};

}  // namespace

size_t CountNewlines(const char* p, size_t n) {
  size_t count = 0;
  size_t i = 0;
#if AL_SEARCH_X86
  const __m128i nl = _mm_set1_epi8('\n');
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    count += static_cast<size_t>(
        __builtin_popcount(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)))));
  }
#endif
  for (; i < n; ++i) count += p[i] == '\n';
  return count;
}

std::string_view LiteralScanName() {
#if AL_SEARCH_X86
  return HasAvx2() ? "avx2" : "sse2";
#else
  return "portable";
#endif
}

bool LooksBinary(std::string_view data) {
  return std::memchr(data.data(), 0, std::min(data.size(), kBinaryProbe)) != nullptr;
}

Result<std::unique_ptr<Matcher>> Matcher::Create(const std::string& pattern, bool case_insensitive,
                                                 bool multiline) {
  std::string literal;
  if (AsLiteral(pattern, &literal) && (multiline || literal.find('\n') == std::string::npos)) {
    bool ascii = std::all_of(literal.begin(), literal.end(),
                             [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    if (!case_insensitive || ascii) {
      return std::unique_ptr<Matcher>(
          std::make_unique<LiteralMatcher>(literal, case_insensitive, multiline));
    }
  }
  RE2::Options opts;
  opts.set_log_errors(false);
  opts.set_case_sensitive(!case_insensitive);
  opts.set_never_nl(!multiline);
  opts.set_dot_nl(multiline);
  opts.set_max_mem(int64_t{64} << 20);
  auto m = std::make_unique<RegexMatcher>("(?m)" + pattern, opts, multiline);
  if (!m->re().ok()) {
    return InvalidArgument("invalid regular expression: " + m->re().error() +
                           " (RE2 syntax; escape metacharacters like ( [ { . * + ? with \\ for a "
                           "literal search)");
  }
  return std::unique_ptr<Matcher>(std::move(m));
}

bool SearchBuffer(Matcher& matcher, const char* buf, size_t size, std::string_view display,
                  const SearchOptions& options, FileResult* out) {
  if (options.mode == OutputMode::kFilesWithMatches) {
    if (!matcher.Any(buf, size)) return false;
    out->path.assign(display);
    out->matches = 1;
    out->entries = 1;
    out->text.assign(display);
    out->text.push_back('\n');
    return true;
  }

  thread_local std::vector<LineRef> lines;
  lines.clear();
  size_t pos = 0;
  size_t counted_pos = 0;
  uint64_t counted = 0;  // newlines in [0, counted_pos)
  size_t b;
  size_t e;
  while (pos <= size && matcher.Find(buf, size, pos, &b, &e)) {
    if (b == size && size > 0 && buf[size - 1] == '\n') break;  // empty match past the last line
    const char* nl_before = b == 0 ? nullptr : static_cast<const char*>(memrchr(buf, '\n', b));
    size_t ls = nl_before == nullptr ? 0 : static_cast<size_t>(nl_before - buf) + 1;
    size_t last = (matcher.multiline() && e > b) ? e - 1 : b;
    if (last < ls) last = ls;
    const char* nl_after =
        last >= size ? nullptr
                     : static_cast<const char*>(std::memchr(buf + last, '\n', size - last));
    size_t le = nl_after == nullptr ? size : static_cast<size_t>(nl_after - buf);
    if (ls < counted_pos) {  // only possible for overlapping multi-line spans
      ls = counted_pos;
    }
    counted += CountNewlines(buf + counted_pos, ls - counted_pos);
    counted_pos = ls;
    uint64_t lineno = counted + 1;
    if (!lines.empty() && lines.back().lineno >= lineno) {
      // Already recorded (multi-line spans ending on this line).
    } else if (le > ls && std::memchr(buf + ls, '\n', le - ls) != nullptr) {
      // A multi-line match: every line it touches is a match line.
      size_t s = ls;
      while (s <= le) {
        const char* nl = static_cast<const char*>(std::memchr(buf + s, '\n', le - s));
        size_t ee = nl == nullptr ? le : static_cast<size_t>(nl - buf);
        lines.push_back({s, ee, lineno++});
        s = ee + 1;
      }
    } else {
      lines.push_back({ls, le, lineno});
    }
    if (le >= size) break;
    pos = le + 1;
  }
  if (lines.empty()) return false;

  out->path.assign(display);
  out->matches = lines.size();
  if (options.mode == OutputMode::kCount) {
    out->entries = 1;
    out->text.assign(display);
    out->text.push_back(':');
    out->text += std::to_string(lines.size());
    out->text.push_back('\n');
    return true;
  }

  std::string& text = out->text;
  text.clear();
  const int before = options.before_context;
  const int after = options.after_context;
  uint64_t printed = 0;    // last printed line number
  size_t printed_end = 0;  // offset after the last printed line's '\n'
  uint64_t entries = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const LineRef& m = lines[i];
    if (before > 0 || after > 0) {
      uint64_t first_ctx = m.lineno > static_cast<uint64_t>(before) ? m.lineno - before : 1;
      if (first_ctx <= printed) first_ctx = printed + 1;
      if (printed > 0 && first_ctx > printed + 1) text += "--\n";
      // Collect the before-context lines walking backwards.
      LineRef ctx[64];
      int nctx = 0;
      size_t s = m.start;
      for (uint64_t ln = m.lineno; ln > first_ctx && nctx < 64; --ln) {
        size_t pe = s - 1;  // the '\n' ending the previous line
        const char* prev = pe == 0 ? nullptr : static_cast<const char*>(memrchr(buf, '\n', pe));
        size_t ps = prev == nullptr ? 0 : static_cast<size_t>(prev - buf) + 1;
        ctx[nctx++] = {ps, pe, ln - 1};
        s = ps;
      }
      while (nctx > 0) {
        const LineRef& c = ctx[--nctx];
        AppendLine(text, display, c.lineno, '-', buf + c.start, buf + c.end,
                   options.max_line_bytes);
        ++entries;
      }
    }
    AppendLine(text, display, m.lineno, ':', buf + m.start, buf + m.end, options.max_line_bytes);
    ++entries;
    printed = m.lineno;
    printed_end = m.end + 1;
    if (after > 0) {
      uint64_t next_match = i + 1 < lines.size() ? lines[i + 1].lineno : UINT64_MAX;
      size_t s = printed_end;
      for (int k = 1; k <= after && s < size; ++k) {
        uint64_t ln = m.lineno + static_cast<uint64_t>(k);
        if (ln >= next_match) break;
        const char* nl = static_cast<const char*>(std::memchr(buf + s, '\n', size - s));
        size_t ee = nl == nullptr ? size : static_cast<size_t>(nl - buf);
        AppendLine(text, display, ln, '-', buf + s, buf + ee, options.max_line_bytes);
        ++entries;
        printed = ln;
        s = ee + 1;
      }
    }
  }
  out->entries = entries;
  return true;
}

FileReader::~FileReader() { Unmap(); }

void FileReader::Unmap() {
  if (map_ != nullptr) {
    munmap(map_, map_size_);
    map_ = nullptr;
    map_size_ = 0;
  }
}

bool FileReader::Fail(std::string reason) {
  error_ = std::move(reason);
  return false;
}

bool FileReader::Read(const char* path, std::string_view* data) {
  Unmap();
  error_.clear();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
  // below as not a regular file); reads of regular files never block on it.
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return Fail(std::strerror(errno));
  return ReadFd(fd, data);
}

bool FileReader::ReadFd(int fd, std::string_view* data) {
  Unmap();
  error_.clear();
  struct stat st;
  if (fstat(fd, &st) != 0) {
    std::string err = std::strerror(errno);
    close(fd);
    return Fail(std::move(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Fail("not a regular file");
  }
  // Blocking again for the reads: some FUSE and network file systems honour
  // O_NONBLOCK on regular files and would answer EAGAIN.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size_t size = static_cast<size_t>(st.st_size);
  if (size >= map_threshold_) {
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    std::string err = m == MAP_FAILED ? std::strerror(errno) : std::string();
    close(fd);
    if (m == MAP_FAILED) return Fail(std::move(err));
    madvise(m, size, MADV_SEQUENTIAL);
    map_ = m;
    map_size_ = size;
    *data = std::string_view(static_cast<const char*>(m), size);
    return true;
  }
  if (buf_.size() < size + 1) buf_.resize(std::max(size + 1, buf_.size() * 2));
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, buf_.data() + got, size - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      close(fd);
      return Fail(std::move(err));
    }
    if (n == 0) break;  // the file shrank while we read it
    got += static_cast<size_t>(n);
  }
  close(fd);
  *data = std::string_view(buf_.data(), got);
  return true;
}

}  // namespace agentloop::tools
