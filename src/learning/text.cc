#include "learning/text.h"

#include <cctype>

#include "base/strings.h"

namespace agentloop::learning {
namespace {

bool IsLineBreakLike(char32_t c) {
  return c == '\r' || c == '\n' || c == '\t' || c == 0x2028 || c == 0x2029 || c == 0x85;
}

bool IsDeleted(char32_t c) {
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F)) return true;
  if (c >= 0x200B && c <= 0x200F) return true;
  if (c >= 0x202A && c <= 0x202E) return true;
  if (c >= 0x2066 && c <= 0x2069) return true;
  return c == 0xFEFF;
}

}  // namespace

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += DecodeUtf8(s, i).size) ++n;
  return n;
}

std::string_view PrefixCodePoints(std::string_view s, size_t max) {
  size_t i = 0;
  for (size_t n = 0; n < max && i < s.size(); ++n) i += DecodeUtf8(s, i).size;
  return s.substr(0, i);
}

std::string Clip(std::string_view text, size_t max) {
  std::string_view t = Trim(text);
  std::string_view head = PrefixCodePoints(t, max);
  if (head.size() == t.size()) return std::string(t);
  return std::string(head) + "…";
}

std::string SanitizeInline(std::string_view text, size_t max_code_points) {
  std::string out;
  out.reserve(text.size());
  bool in_break = false;
  for (size_t i = 0; i < text.size();) {
    Utf8Char d = DecodeUtf8(text, i);  // an invalid byte is U+FFFD
    i += d.size;
    char32_t c = d.cp;
    if (IsLineBreakLike(c)) {
      if (!in_break) out.push_back(' ');
      in_break = true;
      continue;
    }
    in_break = false;
    if (IsDeleted(c)) continue;
    if (c == '<') {
      out += "&lt;";
      continue;
    }
    AppendUtf8(out, c);
  }
  std::string trimmed(Trim(out));
  std::string_view head = PrefixCodePoints(trimmed, max_code_points);
  if (head.size() == trimmed.size()) return trimmed;
  return std::string(Trim(head)) + "…";
}

bool IsSlug(std::string_view name, size_t max_len) {
  if (name.empty() || name.size() > max_len) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(i > 0 && c == '-')) return false;
  }
  return true;
}

std::string Slugify(std::string_view text, size_t max_len) {
  std::string out;
  bool dash = false;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) && c < 0x80) {
      if (dash && !out.empty()) out.push_back('-');
      dash = false;
      out.push_back(static_cast<char>(std::tolower(c)));
      if (out.size() >= max_len) break;
    } else {
      dash = true;
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > max_len) out.resize(max_len);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "item" : out;
}

std::string PadCodePoints(std::string s, size_t width) {
  size_t n = CodePointCount(s);
  if (n < width) s.append(width - n, ' ');
  return s;
}

}  // namespace agentloop::learning
