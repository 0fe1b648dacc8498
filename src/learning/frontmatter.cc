#include "learning/frontmatter.h"

#include "agentloop/json.h"

#include "base/strings.h"

namespace agentloop::learning {
namespace {

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      lines.push_back(text.substr(pos));
      break;
    }
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    pos = nl + 1;
  }
  return lines;
}

std::string Unquote(std::string_view v) {
  v = Trim(v);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    Result<Json> j = ParseJson(v);
    if (j.ok() && j->is_string()) return j->get<std::string>();
    return std::string(v.substr(1, v.size() - 2));
  }
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') {
    std::string out;
    std::string_view inner = v.substr(1, v.size() - 2);
    for (size_t i = 0; i < inner.size(); ++i) {
      out.push_back(inner[i]);
      if (inner[i] == '\'' && i + 1 < inner.size() && inner[i + 1] == '\'') ++i;
    }
    return out;
  }
  return std::string(v);
}

std::vector<std::string> ParseList(std::string_view v) {
  std::vector<std::string> out;
  v = Trim(v);
  v = v.substr(1, v.size() - 2);
  // Split on commas outside quotes.
  std::string cur;
  char quote = 0;
  for (char c : v) {
    if (quote) {
      if (c == quote) quote = 0;
      cur.push_back(c);
    } else if (c == '"' || c == '\'') {
      quote = c;
      cur.push_back(c);
    } else if (c == ',') {
      std::string item = Unquote(cur);
      if (!item.empty()) out.push_back(item);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  std::string item = Unquote(cur);
  if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

std::string FrontMatter::Get(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? "" : it->second;
}

Result<FrontMatter> ParseFrontMatter(std::string_view text) {
  if (StartsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);  // BOM
  std::vector<std::string_view> lines = Lines(text);
  if (lines.empty() || Trim(lines[0]) != "---") {
    return InvalidArgument("missing front matter (the file must start with a '---' line)");
  }
  FrontMatter fm;
  size_t i = 1;
  bool closed = false;
  while (i < lines.size()) {
    std::string_view line = lines[i];
    if (Trim(line) == "---") {
      closed = true;
      ++i;
      break;
    }
    std::string_view t = Trim(line);
    if (t.empty() || t.front() == '#') {
      ++i;
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || line.front() == ' ' || line.front() == '\t') {
      return InvalidArgument("front matter line " + std::to_string(i + 1) +
                             ": expected 'key: value'");
    }
    std::string key(Trim(line.substr(0, colon)));
    std::string_view value = Trim(line.substr(colon + 1));
    ++i;
    if (value == ">" || value == "|" || value == ">-" || value == "|-") {
      bool fold = value.front() == '>';
      std::string block;
      while (i < lines.size() &&
             (lines[i].empty() || lines[i].front() == ' ' || lines[i].front() == '\t')) {
        std::string_view part = Trim(lines[i]);
        ++i;
        if (part.empty() && fold) continue;
        if (!block.empty()) block += fold ? " " : "\n";
        block += part;
      }
      fm.fields[key] = block;
    } else if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
      fm.lists[key] = ParseList(value);
    } else {
      fm.fields[key] = Unquote(value);
    }
  }
  if (!closed) return InvalidArgument("front matter is not closed by a '---' line");
  std::string body;
  for (size_t k = i; k < lines.size(); ++k) {
    if (k > i) body += "\n";
    body += lines[k];
  }
  fm.body = body;
  return fm;
}

std::string QuoteScalar(std::string_view value) { return DumpJson(Json(std::string(value))); }

}  // namespace agentloop::learning
