#include "base/diff.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace agentloop {
namespace {

// Lines including their '\n' (the last may lack it), so that "x" at the end
// of a file differs from "x\n".
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

enum class Op : uint8_t { kEqual, kDelete, kInsert };

struct Edit {
  Op op;
  size_t a;  // line index in `before` (kEqual, kDelete)
  size_t b;  // line index in `after` (kEqual, kInsert)
};

// Myers' greedy algorithm over a[a0, a1) and b[b0, b1), whose first and last
// lines differ; appends the edit script in order. Gives up (returns false,
// appending nothing) after `max_d` edits.
bool Myers(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
           size_t a0, size_t a1, size_t b0, size_t b1, size_t max_d, std::vector<Edit>& out) {
  const int64_t n = static_cast<int64_t>(a1 - a0);
  const int64_t m = static_cast<int64_t>(b1 - b0);
  const int64_t max = std::min<int64_t>(n + m, static_cast<int64_t>(max_d));
  const int64_t off = max + 1;
  std::vector<int64_t> v(static_cast<size_t>(2 * max + 3), 0);
  // trace[d] holds v[k] for k in [-d-1, d+1] as it was before step d.
  std::vector<std::vector<int64_t>> trace;
  int64_t found = -1;
  for (int64_t d = 0; d <= max && found < 0; ++d) {
    trace.emplace_back(v.begin() + (off - d - 1), v.begin() + (off + d + 2));
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1]
                                                                           : v[off + k - 1] + 1;
      int64_t y = x - k;
      while (x < n && y < m && a[a0 + x] == b[b0 + y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) return false;
  std::vector<Edit> rev;
  int64_t x = n, y = m;
  for (int64_t d = found; d > 0; --d) {
    const std::vector<int64_t>& t = trace[static_cast<size_t>(d)];
    auto at = [&](int64_t k) { return t[static_cast<size_t>(k + d + 1)]; };
    int64_t k = x - y;
    int64_t prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    int64_t prev_x = at(prev_k);
    int64_t prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x, --y;
      rev.push_back({Op::kEqual, a0 + x, b0 + y});
    }
    if (prev_k == k + 1) {
      rev.push_back({Op::kInsert, a0 + x, b0 + prev_y});
    } else {
      rev.push_back({Op::kDelete, a0 + prev_x, b0 + y});
    }
    x = prev_x, y = prev_y;
  }
  while (x > 0 && y > 0) {
    --x, --y;
    rev.push_back({Op::kEqual, a0 + x, b0 + y});
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
  return true;
}

void AppendLine(std::string& out, char mark, std::string_view line) {
  out += mark;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

std::string Range(size_t start, size_t count) {
  // diff -u: a one-line range is shown as its line; an empty range by the
  // line before it.
  if (count == 1) return std::to_string(start + 1);
  return std::to_string(count == 0 ? start : start + 1) + "," + std::to_string(count);
}

}  // namespace

std::string UnifiedDiff(std::string_view before, std::string_view after, std::string_view old_label,
                        std::string_view new_label, const UnifiedDiffOptions& options) {
  if (before == after) return "";
  const std::vector<std::string_view> a = SplitLines(before);
  const std::vector<std::string_view> b = SplitLines(after);
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
    ++tail;
  }
  std::vector<Edit> edits;
  for (size_t i = 0; i < head; ++i) edits.push_back({Op::kEqual, i, i});
  if (!Myers(a, b, head, a.size() - tail, head, b.size() - tail, options.max_edits, edits)) {
    for (size_t i = head; i < a.size() - tail; ++i) edits.push_back({Op::kDelete, i, head});
    for (size_t j = head; j < b.size() - tail; ++j) {
      edits.push_back({Op::kInsert, a.size() - tail, j});
    }
  }
  for (size_t i = 0; i < tail; ++i) {
    edits.push_back({Op::kEqual, a.size() - tail + i, b.size() - tail + i});
  }

  std::string out = "--- " + std::string(old_label) + "\n+++ " + std::string(new_label) + "\n";
  const size_t context = static_cast<size_t>(std::max(options.context, 0));
  size_t i = 0;
  while (i < edits.size()) {
    while (i < edits.size() && edits[i].op == Op::kEqual) ++i;
    if (i == edits.size()) break;
    // A hunk: from `context` lines before this change to `context` lines
    // after the last change that is at most 2*context equal lines away.
    size_t first = i >= context ? i - context : 0;
    size_t last = i;  // one past the last change of the hunk
    size_t j = i;
    while (j < edits.size()) {
      if (edits[j].op != Op::kEqual) {
        last = j + 1;
        ++j;
        continue;
      }
      size_t run = j;
      while (run < edits.size() && edits[run].op == Op::kEqual) ++run;
      if (run == edits.size() || run - j > 2 * context) break;
      j = run;
    }
    size_t end = std::min(edits.size(), last + context);
    size_t a_start = edits[first].a, b_start = edits[first].b, a_count = 0, b_count = 0;
    for (size_t e = first; e < end; ++e) {
      if (edits[e].op != Op::kInsert) ++a_count;
      if (edits[e].op != Op::kDelete) ++b_count;
    }
    out += "@@ -" + Range(a_start, a_count) + " +" + Range(b_start, b_count) + " @@\n";
    for (size_t e = first; e < end; ++e) {
      switch (edits[e].op) {
        case Op::kEqual:
          AppendLine(out, ' ', a[edits[e].a]);
          break;
        case Op::kDelete:
          AppendLine(out, '-', a[edits[e].a]);
          break;
        case Op::kInsert:
          AppendLine(out, '+', b[edits[e].b]);
          break;
      }
    }
    i = end;
  }
  if (options.max_bytes > 0 && out.size() > options.max_bytes) {
    size_t cut = out.rfind('\n', options.max_bytes);
    cut = cut == std::string::npos ? options.max_bytes : cut + 1;
    size_t left = out.size() - cut;
    out.resize(cut);
    out += "... (diff cut: " + std::to_string(left) + " more bytes)\n";
  }
  return out;
}

}  // namespace agentloop
