// Glob compilation and matching. Matching is a bottom-up dynamic programme
// over (token, text offset), O(tokens * text) time and O(text) memory.
#include "permissions/glob.h"

#include <bitset>

namespace agentloop::permissions {

struct Glob::Token {
  enum class Kind { kLiteral, kAny, kStar, kDoubleStar, kDoubleStarSlash, kClass };
  Kind kind = Kind::kLiteral;
  char c = 0;
  bool negated = false;
  std::bitset<256> set;
};

namespace {

using Token = Glob::Token;
using Kind = Glob::Token::Kind;

constexpr size_t kMaxAlternatives = 64;

// Expands one level of `{a,b}` groups (several groups multiply). Escapes are
// kept so the tokenizer sees them.
Result<std::vector<std::string>> ExpandBraces(std::string_view p) {
  std::vector<std::string> out = {""};
  size_t i = 0;
  while (i < p.size()) {
    char ch = p[i];
    if (ch == '\\') {
      if (i + 1 >= p.size()) return InvalidArgument("pattern ends with a lone '\\'");
      for (auto& s : out) s.append(p.substr(i, 2));
      i += 2;
      continue;
    }
    if (ch == '[') {
      // Copy a class verbatim so a `{` inside it is literal.
      size_t j = i + 1;
      if (j < p.size() && (p[j] == '!' || p[j] == '^')) ++j;
      if (j < p.size() && p[j] == ']') ++j;
      while (j < p.size() && p[j] != ']') ++j;
      if (j >= p.size()) return InvalidArgument("unterminated '[' in pattern");
      for (auto& s : out) s.append(p.substr(i, j - i + 1));
      i = j + 1;
      continue;
    }
    if (ch == '{') {
      std::vector<std::string> parts;
      std::string cur;
      size_t j = i + 1;
      bool closed = false;
      for (; j < p.size(); ++j) {
        if (p[j] == '\\' && j + 1 < p.size()) {
          cur.append(p.substr(j, 2));
          ++j;
        } else if (p[j] == ',') {
          parts.push_back(std::move(cur));
          cur.clear();
        } else if (p[j] == '}') {
          parts.push_back(std::move(cur));
          closed = true;
          break;
        } else if (p[j] == '{') {
          return InvalidArgument("nested '{' in pattern is not supported");
        } else {
          cur.push_back(p[j]);
        }
      }
      if (!closed) return InvalidArgument("unterminated '{' in pattern");
      if (out.size() * parts.size() > kMaxAlternatives) {
        return InvalidArgument("too many '{a,b}' alternatives in pattern");
      }
      std::vector<std::string> next;
      for (const auto& s : out) {
        for (const auto& part : parts) next.push_back(s + part);
      }
      out = std::move(next);
      i = j + 1;
      continue;
    }
    for (auto& s : out) s.push_back(ch);
    ++i;
  }
  return out;
}

Result<std::vector<Token>> Tokenize(std::string_view p, GlobMode mode) {
  std::vector<Token> toks;
  for (size_t i = 0; i < p.size(); ++i) {
    char ch = p[i];
    Token t;
    if (ch == '\\') {
      if (i + 1 >= p.size()) return InvalidArgument("pattern ends with a lone '\\'");
      t.c = p[++i];
    } else if (ch == '?') {
      t.kind = Kind::kAny;
    } else if (ch == '*') {
      size_t j = i;
      while (j < p.size() && p[j] == '*') ++j;
      bool dbl = (j - i) >= 2 && mode == GlobMode::kPath;
      i = j - 1;
      if (!dbl) {
        t.kind = Kind::kStar;
      } else if (i + 1 < p.size() && p[i + 1] == '/') {
        t.kind = Kind::kDoubleStarSlash;
        ++i;
      } else {
        t.kind = Kind::kDoubleStar;
      }
    } else if (ch == '[') {
      t.kind = Kind::kClass;
      size_t j = i + 1;
      if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
        t.negated = true;
        ++j;
      }
      bool first = true;
      bool closed = false;
      for (; j < p.size(); ++j) {
        char c = p[j];
        if (c == ']' && !first) {
          closed = true;
          break;
        }
        first = false;
        if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
          auto lo = static_cast<unsigned char>(c);
          auto hi = static_cast<unsigned char>(p[j + 2]);
          if (lo > hi) return InvalidArgument("bad range in '[...]' of pattern");
          for (unsigned v = lo; v <= hi; ++v) t.set.set(v);
          j += 2;
        } else {
          t.set.set(static_cast<unsigned char>(c));
        }
      }
      if (!closed) return InvalidArgument("unterminated '[' in pattern");
      i = j;
    } else {
      t.c = ch;
    }
    // Collapse runs of stars: `**` in command mode is `*`.
    if (!toks.empty() && t.kind == Kind::kStar &&
        (toks.back().kind == Kind::kStar || toks.back().kind == Kind::kDoubleStar)) {
      continue;
    }
    toks.push_back(t);
  }
  return toks;
}

bool MatchTokens(const std::vector<Token>& toks, std::string_view text, GlobMode mode) {
  const size_t n = text.size();
  const bool path = mode == GlobMode::kPath;
  std::vector<char> next(n + 1, 0), cur(n + 1, 0);
  next[n] = 1;  // empty pattern matches only the end of the text
  for (size_t ti = toks.size(); ti-- > 0;) {
    const Token& t = toks[ti];
    switch (t.kind) {
      case Kind::kLiteral:
        for (size_t j = 0; j <= n; ++j) cur[j] = j < n && text[j] == t.c && next[j + 1];
        break;
      case Kind::kAny:
        for (size_t j = 0; j <= n; ++j) {
          cur[j] = j < n && !(path && text[j] == '/') && next[j + 1];
        }
        break;
      case Kind::kClass:
        for (size_t j = 0; j <= n; ++j) {
          if (j >= n || (path && text[j] == '/')) {
            cur[j] = 0;
            continue;
          }
          bool in = t.set.test(static_cast<unsigned char>(text[j]));
          cur[j] = (in != t.negated) && next[j + 1];
        }
        break;
      case Kind::kStar:
        cur[n] = next[n];
        for (size_t j = n; j-- > 0;) {
          cur[j] = next[j] || (!(path && text[j] == '/') && cur[j + 1]);
        }
        break;
      case Kind::kDoubleStar:
        cur[n] = next[n];
        for (size_t j = n; j-- > 0;) cur[j] = next[j] || cur[j + 1];
        break;
      case Kind::kDoubleStarSlash: {
        // Matches "" or any string ending in '/'.
        char any = 0;
        cur[n] = next[n];
        for (size_t j = n; j-- > 0;) {
          any = any || (text[j] == '/' && next[j + 1]);
          cur[j] = next[j] || any;
        }
        break;
      }
    }
    std::swap(cur, next);
  }
  return next[0] != 0;
}

}  // namespace

Result<Glob> Glob::Compile(std::string_view pattern, GlobMode mode) {
  Glob g;
  g.pattern_ = std::string(pattern);
  g.mode_ = mode;
  std::string body(pattern);
  std::vector<std::string> extra;
  if (mode == GlobMode::kCommand && body.size() >= 2 && body.ends_with(":*") &&
      !(body.size() >= 3 && body[body.size() - 3] == '\\')) {
    // `prefix:*` = `prefix` or `prefix <anything>`.
    std::string prefix = body.substr(0, body.size() - 2);
    body = prefix + " *";
    extra.push_back(prefix);
  }
  if (mode == GlobMode::kPath) {
    g.absolute_ = !body.empty() && body[0] == '/';
    g.basename_only_ = body.find('/') == std::string::npos;
    if (body.size() > 3 && body.ends_with("/**")) extra.push_back(body.substr(0, body.size() - 3));
  }
  auto alts = std::make_shared<std::vector<std::vector<Token>>>();
  std::vector<std::string> texts;
  {
    auto expanded = ExpandBraces(body);
    if (!expanded.ok()) return expanded.error();
    texts = std::move(*expanded);
  }
  for (const auto& e : extra) {
    auto expanded = ExpandBraces(e);
    if (!expanded.ok()) return expanded.error();
    for (auto& s : *expanded) texts.push_back(std::move(s));
  }
  for (const auto& text : texts) {
    auto toks = Tokenize(text, mode);
    if (!toks.ok()) return toks.error();
    bool all_wild = true;
    for (const auto& t : *toks) {
      if (t.kind != Kind::kLiteral) g.literal_ = false;
      bool wild = t.kind == Kind::kDoubleStar ||
                  (t.kind == Kind::kStar && (mode == GlobMode::kCommand || g.basename_only_));
      if (!wild) all_wild = false;
    }
    if (all_wild && !toks->empty()) g.matches_everything_ = true;
    alts->push_back(std::move(*toks));
  }
  if (texts.size() > 1) g.literal_ = false;
  g.alternatives_ = std::move(alts);
  return g;
}

bool Glob::Matches(std::string_view text) const {
  if (!alternatives_) return false;
  if (basename_only_) {
    size_t slash = text.rfind('/');
    if (slash != std::string_view::npos) text = text.substr(slash + 1);
  }
  for (const auto& toks : *alternatives_) {
    if (MatchTokens(toks, text, mode_)) return true;
  }
  return false;
}

}  // namespace agentloop::permissions
