#include "base/glob.h"

#include <cstring>

namespace agentloop {
namespace {

constexpr size_t kMaxAlternatives = 1024;

// The index of the first brace at or after `from` that is neither escaped
// nor inside a character class ([...], where `]` first or after `!`/`^` is
// literal), or npos.
size_t NextBrace(std::string_view p, size_t from) {
  bool in_class = false;
  for (size_t i = from; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[') {
      in_class = true;
      if (i + 1 < p.size() && (p[i + 1] == '!' || p[i + 1] == '^')) ++i;
      if (i + 1 < p.size() && p[i + 1] == ']') ++i;
    } else if (c == '{' || c == '}') {
      return i;
    }
  }
  return std::string_view::npos;
}

// Index of the '}' matching the '{' at `open`, or npos.
size_t MatchingBrace(std::string_view p, size_t open) {
  int depth = 0;
  for (size_t i = NextBrace(p, open); i != std::string_view::npos; i = NextBrace(p, i + 1)) {
    if (p[i] == '{') {
      ++depth;
    } else if (--depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

Status ExpandBraces(std::string_view p, std::vector<std::string>& out) {
  // First unescaped '{' outside a class.
  size_t open = NextBrace(p, 0);
  if (open != std::string_view::npos && p[open] == '}') {
    return InvalidArgument("unmatched '}' in glob pattern");
  }
  if (open == std::string_view::npos) {
    if (out.size() >= kMaxAlternatives) {
      return InvalidArgument("glob pattern expands to too many alternatives");
    }
    out.emplace_back(p);
    return Status::Ok();
  }
  size_t close = MatchingBrace(p, open);
  if (close == std::string_view::npos) return InvalidArgument("unmatched '{' in glob pattern");
  std::string_view prefix = p.substr(0, open);
  std::string_view body = p.substr(open + 1, close - open - 1);
  std::string_view suffix = p.substr(close + 1);
  // Split the body at top-level commas.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size()) {
      char c = body[i];
      if (c == '\\') {
        ++i;
        continue;
      }
      if (c == '{') ++depth;
      if (c == '}') --depth;
      if (c != ',' || depth != 0) continue;
    }
    std::string joined(prefix);
    joined += body.substr(start, i - start);
    joined += suffix;
    AL_RETURN_IF_ERROR(ExpandBraces(joined, out));
    start = i + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<GlobPattern> GlobPattern::Compile(std::string_view pattern, GlobMode mode, bool braces) {
  std::vector<std::string> expanded;
  if (braces) {
    AL_RETURN_IF_ERROR(ExpandBraces(pattern, expanded));
  } else {
    expanded.emplace_back(pattern);
  }
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 == pattern.size()) {
      return InvalidArgument("glob pattern ends with a lone '\\'");
    }
    if (pattern[i] == '\\') ++i;
  }
  const bool path = mode == GlobMode::kPath;
  GlobPattern g;
  g.mode_ = mode;
  // `a/**` also matches `a` itself (`**` matches zero segments): one more
  // alternative, which plays no part in the walking hints below.
  const size_t primary = expanded.size();
  if (path) {
    for (size_t k = 0; k < primary; ++k) {
      const std::string& p = expanded[k];
      if (p.size() > 3 && p.ends_with("/**") && p[p.size() - 4] != '\\') {
        expanded.push_back(p.substr(0, p.size() - 3));
      }
    }
  }
  int max_depth = 0;
  bool first = true;
  for (size_t ai = 0; ai < expanded.size(); ++ai) {
    const std::string& p = expanded[ai];
    const bool hints = ai < primary;
    Alt alt;
    int segments = 1;
    size_t n = p.size();
    for (size_t i = 0; i < n; ++i) {
      char c = p[i];
      bool seg_start = i == 0 || p[i - 1] == '/';
      if (path && c == '*' && i + 1 < n && p[i + 1] == '*' &&
          !(seg_start && (i + 2 == n || p[i + 2] == '/'))) {
        g.partial_double_star_ = true;
      }
      if (path && c == '*' && i + 1 < n && p[i + 1] == '*' && seg_start &&
          (i + 2 == n || p[i + 2] == '/')) {
        g.recursive_ = true;
        if (i + 2 < n) {
          alt.tokens.push_back({Kind::kDirPrefix});
          i += 2;  // skip "*/"
        } else {
          alt.tokens.push_back({Kind::kDStar});
          i += 1;
        }
        continue;
      }
      if (c == '*') {
        if (alt.tokens.empty() || alt.tokens.back().kind != Kind::kStar) {
          alt.tokens.push_back({Kind::kStar});
        }
        continue;
      }
      if (c == '?') {
        alt.tokens.push_back({Kind::kAny});
        continue;
      }
      if (c == '[') {
        std::vector<bool> set(256, false);
        size_t j = i + 1;
        bool negate = false;
        if (j < n && (p[j] == '!' || p[j] == '^')) {
          negate = true;
          ++j;
        }
        bool closed = false;
        bool first_in_class = true;
        while (j < n) {
          unsigned char lo = static_cast<unsigned char>(p[j]);
          if (lo == ']' && !first_in_class) {
            closed = true;
            break;
          }
          first_in_class = false;
          if (lo == '\\' && j + 1 < n) lo = static_cast<unsigned char>(p[++j]);
          unsigned char hi = lo;
          if (j + 2 < n && p[j + 1] == '-' && p[j + 2] != ']') {
            hi = static_cast<unsigned char>(p[j + 2]);
            if (hi == '\\' && j + 3 < n) {
              hi = static_cast<unsigned char>(p[j + 3]);
              ++j;
            }
            j += 2;
          }
          for (unsigned v = lo; v <= hi; ++v) set[v] = true;
          ++j;
        }
        if (!closed) return InvalidArgument("unmatched '[' in glob pattern");
        if (negate) set.flip();
        if (path) set['/'] = false;
        g.classes_.push_back(std::move(set));
        Token t{Kind::kClass};
        t.cls = static_cast<uint16_t>(g.classes_.size() - 1);
        alt.tokens.push_back(t);
        i = j;
        continue;
      }
      if (c == '\\' && i + 1 < n) c = p[++i];
      if (c == '/') {
        g.has_slash_ = true;
        ++segments;
      }
      Token t{Kind::kLit};
      t.lit = static_cast<uint8_t>(c);
      alt.tokens.push_back(t);
    }
    if (hints) max_depth = std::max(max_depth, segments);

    // Fast shapes.
    auto lits_from = [&](size_t from, std::string* lit) {
      for (size_t k = from; k < alt.tokens.size(); ++k) {
        if (alt.tokens[k].kind != Kind::kLit) return false;
        lit->push_back(static_cast<char>(alt.tokens[k].lit));
      }
      return true;
    };
    const auto& tk = alt.tokens;
    std::string lit;
    if (lits_from(0, &lit)) {
      alt.fast = Fast::kExact;
    } else if (path && !tk.empty() && tk[0].kind == Kind::kStar && lits_from(1, &lit) &&
               lit.find('/') == std::string::npos) {
      alt.fast = Fast::kStarSuffix;
    } else if (tk.size() >= 2 && tk[0].kind == Kind::kDirPrefix && tk[1].kind == Kind::kStar &&
               lits_from(2, &lit) && lit.find('/') == std::string::npos) {
      alt.fast = Fast::kAnyDirStarSuffix;
    } else if (!tk.empty() && tk[0].kind == Kind::kDirPrefix && lits_from(1, &lit)) {
      alt.fast = Fast::kAnyDirExact;
    } else {
      lit.clear();
    }
    alt.literal = std::move(lit);

    // Leading literal directories.
    std::string prefix;
    std::string seg;
    for (const Token& t : tk) {
      if (t.kind != Kind::kLit) break;
      if (t.lit == '/') {
        if (!prefix.empty()) prefix += '/';
        prefix += seg;
        seg.clear();
      } else {
        seg.push_back(static_cast<char>(t.lit));
      }
    }
    if (hints) {
      if (first) {
        g.literal_prefix_ = prefix;
      } else if (g.literal_prefix_ != prefix) {
        g.literal_prefix_.clear();
      }
      first = false;
    }
    for (const Token& t : tk) {
      if (t.kind == Kind::kDirPrefix) g.has_slash_ = true;
    }
    g.alts_.push_back(std::move(alt));
  }
  for (const Alt& alt : g.alts_) {
    bool everything = !alt.tokens.empty();
    for (const Token& t : alt.tokens) {
      bool all = t.kind == Kind::kDStar || (t.kind == Kind::kStar && (!path || !g.has_slash_));
      if (!all) everything = false;
    }
    if (everything) g.matches_everything_ = true;
  }
  g.fixed_depth_ = g.recursive_ ? -1 : max_depth;
  g.literal_ = g.alts_.size() == 1 && g.alts_[0].fast == Fast::kExact;
  if (!path) g.has_slash_ = false;
  return g;
}

bool GlobPattern::Match(std::string_view path) const {
  for (const Alt& alt : alts_) {
    if (MatchAlt(alt, path)) return true;
  }
  return false;
}

bool GlobPattern::MatchAlt(const Alt& alt, std::string_view text) const {
  const std::string& lit = alt.literal;
  switch (alt.fast) {
    case Fast::kExact:
      return text == lit;
    case Fast::kStarSuffix:
      return text.size() >= lit.size() &&
             text.compare(text.size() - lit.size(), lit.size(), lit) == 0 &&
             std::memchr(text.data(), '/', text.size() - lit.size()) == nullptr;
    case Fast::kAnyDirStarSuffix: {
      size_t slash = text.rfind('/');
      std::string_view base = slash == std::string_view::npos ? text : text.substr(slash + 1);
      return base.size() >= lit.size() &&
             base.compare(base.size() - lit.size(), lit.size(), lit) == 0;
    }
    case Fast::kAnyDirExact:
      return text.size() >= lit.size() &&
             text.compare(text.size() - lit.size(), lit.size(), lit) == 0 &&
             (text.size() == lit.size() || text[text.size() - lit.size() - 1] == '/');
    case Fast::kNone:
      break;
  }

  const bool path = mode_ == GlobMode::kPath;
  const auto& tk = alt.tokens;
  const size_t n = tk.size();
  uint8_t stack_buf[256];
  std::vector<uint8_t> heap_buf;
  uint8_t* cur = stack_buf;
  if (2 * (n + 1) > sizeof stack_buf) {
    heap_buf.resize(2 * (n + 1));
    cur = heap_buf.data();
  }
  uint8_t* nxt = cur + n + 1;
  // State values: bit 0 = active, bit 1 = just entered from the previous
  // token. `**/` may only be skipped when entered: once it has consumed
  // characters it must end with a '/'.
  auto close = [&](uint8_t* s) {
    for (size_t i = 0; i < n; ++i) {
      if (!s[i]) continue;
      Kind k = tk[i].kind;
      if (k == Kind::kStar || k == Kind::kDStar || (k == Kind::kDirPrefix && (s[i] & 2))) {
        s[i + 1] = 3;
      }
    }
  };
  std::memset(cur, 0, n + 1);
  cur[0] = 3;
  close(cur);
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    std::memset(nxt, 0, n + 1);
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      if (!cur[i]) continue;
      const Token& t = tk[i];
      switch (t.kind) {
        case Kind::kLit:
          if (c == t.lit) nxt[i + 1] = 3, any = true;
          break;
        case Kind::kAny:
          if (c != '/' || !path) nxt[i + 1] = 3, any = true;
          break;
        case Kind::kClass:
          if (classes_[t.cls][c]) nxt[i + 1] = 3, any = true;
          break;
        case Kind::kStar:
          if (c != '/' || !path) nxt[i] |= 1, any = true;
          break;
        case Kind::kDStar:
          nxt[i] |= 1, any = true;
          break;
        case Kind::kDirPrefix:
          nxt[i] |= 1, any = true;
          if (c == '/') nxt[i + 1] = 3;
          break;
      }
    }
    if (!any) return false;
    close(nxt);
    std::swap(cur, nxt);
  }
  return cur[n] != 0;
}

}  // namespace agentloop
