#include "base/strings.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

namespace agentloop {
namespace {

Utf8Char Decode(std::string_view s, size_t i, bool surrogates) {
  constexpr Utf8Char kInvalid{0xFFFD, 1, false};
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {c, 1, true};
  size_t n;
  char32_t cp;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return kInvalid;
  }
  if (i + n > s.size()) return kInvalid;
  for (size_t k = 1; k < n; ++k) {
    auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) {
    return kInvalid;
  }
  if (cp > 0x10FFFF || (!surrogates && cp >= 0xD800 && cp <= 0xDFFF)) return kInvalid;
  return {cp, n, true};
}

}  // namespace

Utf8Char DecodeUtf8(std::string_view in, size_t i) { return Decode(in, i, false); }
Utf8Char DecodeWtf8(std::string_view in, size_t i) { return Decode(in, i, true); }

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view in) {
  for (size_t i = 0; i < in.size();) {
    Utf8Char c = DecodeUtf8(in, i);
    if (!c.valid) return false;
    i += c.size;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    Utf8Char c = DecodeUtf8(in, i);
    if (c.valid) {
      out.append(in.substr(i, c.size));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += c.size;
  }
  return out;
}

std::string_view TruncateUtf8(std::string_view in, size_t max_bytes) {
  if (in.size() <= max_bytes) return in;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(in[end]) & 0xC0) == 0x80) --end;
  return in.substr(0, end);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view Trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

namespace {

bool IsKeyChar(char c, bool allow_dot) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
         (allow_dot && c == '.');
}

}  // namespace

std::string RedactSecrets(std::string_view text) {
  // A hand-written scanner (no std::regex: linear, allocation-light, and no
  // library surprises): `sk-` + 8 or more key characters, and `Bearer ` + 12
  // or more token characters, become [REDACTED].
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "sk-") == 0) {
      size_t j = i + 3;
      while (j < text.size() && IsKeyChar(text[j], /*allow_dot=*/false)) ++j;
      if (j - (i + 3) >= 8) {
        out += "[REDACTED]";
        i = j;
        continue;
      }
    }
    if (text.compare(i, 6, "Bearer") == 0) {
      size_t j = i + 6;
      size_t ws = j;
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      size_t start = j;
      while (j < text.size() && IsKeyChar(text[j], /*allow_dot=*/true)) ++j;
      if (j > ws && start > ws && j - start >= 12) {
        out += "[REDACTED]";
        i = j;
        continue;
      }
    }
    out.push_back(text[i]);
    ++i;
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string_view>& candidates,
                         size_t below) {
  std::string best;
  size_t best_d = below;
  for (std::string_view c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best;
}

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kBase64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
}  // namespace

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  return out;
}

std::string Base64Encode(std::string_view in, bool url) {
  const char* alphabet = url ? kBase64Url : kBase64;
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(in[k])); };
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6) out += alphabet[(v >> s) & 63];
  }
  const size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t v = byte(i) << 16;
    if (rest == 2) v |= byte(i + 1) << 8;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    if (rest == 2) out += alphabet[(v >> 6) & 63];
    if (!url) out.append(rest == 1 ? "==" : "=");
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view in, bool url) {
  const char* alphabet = url ? kBase64Url : kBase64;
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return InvalidArgument("base64 text has an impossible length");
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    const char* p = ch == '\0' ? nullptr : std::strchr(alphabet, ch);
    if (p == nullptr) return InvalidArgument("base64 text has a character outside its alphabet");
    acc = (acc << 6) | static_cast<uint32_t>(p - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

std::string HtmlEscape(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char ch : in) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

Status ValidateTenantName(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > 64 || tenant == "." || tenant == ".." ||
      tenant.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-.") !=
          std::string_view::npos) {
    return InvalidArgument("tenant '" + std::string(TruncateUtf8(tenant, 80)) +
                           "' must be 1-64 characters of a-z, 0-9, '_', '-', '.' (not . or ..)");
  }
  return Status::Ok();
}

}  // namespace agentloop
