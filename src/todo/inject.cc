#include "todo/inject.h"

#include <cstdint>
#include <vector>

#include "base/strings.h"

namespace agentloop::todo {
namespace {

constexpr size_t kMaxUnits = 480;
constexpr size_t kMaxCodePoints = 120;

bool IsHigh(uint32_t u) { return u >= 0xD800 && u <= 0xDBFF; }
bool IsLow(uint32_t u) { return u >= 0xDC00 && u <= 0xDFFF; }

bool IsLineTerminator(uint32_t cp) {
  return cp == '\r' || cp == '\n' || cp == '\t' || cp == 0x2028 || cp == 0x2029 || cp == 0x85;
}

bool IsDeleted(uint32_t cp) {
  return cp <= 0x1F || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF;
}

// JavaScript String.prototype.trim() whitespace.
bool IsJsSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

}  // namespace

std::string SanitizeLabel(std::string_view text) {
  // Steps 1-4, streamed: the UTF-16 units of the transformed text, stopping
  // at 480 so a huge input is read only as far as needed.
  std::vector<uint16_t> units;
  units.reserve(kMaxUnits);
  auto emit = [&](uint32_t unit) {
    if (units.size() < kMaxUnits) units.push_back(static_cast<uint16_t>(unit));
  };
  bool in_run = false;
  for (size_t i = 0; i < text.size() && units.size() < kMaxUnits;) {
    Utf8Char d = DecodeWtf8(text, i);
    i += d.size;
    if (!d.valid) continue;  // not representable in a JS string: dropped
    uint32_t cp = d.cp;
    if (IsLineTerminator(cp)) {  // step 1: a run becomes one space
      if (!in_run) emit(' ');
      in_run = true;
      continue;
    }
    in_run = false;
    if (IsDeleted(cp)) continue;  // step 2
    if (cp == '<') {              // step 3
      for (char c : std::string_view("&lt;")) emit(static_cast<unsigned char>(c));
      continue;
    }
    if (cp >= 0x10000) {
      uint32_t v = cp - 0x10000;
      emit(0xD800 + (v >> 10));
      emit(0xDC00 + (v & 0x3FF));
    } else {
      emit(cp);
    }
  }

  // Step 5: the first 120 code points (a lone surrogate counts as one).
  struct Point {
    uint32_t cp;
    bool lone;
  };
  std::vector<Point> points;
  for (size_t k = 0; k < units.size() && points.size() < kMaxCodePoints; ++k) {
    uint32_t u = units[k];
    if (IsHigh(u) && k + 1 < units.size() && IsLow(units[k + 1])) {
      points.push_back({0x10000 + ((u - 0xD800) << 10) + (units[k + 1] - 0xDC00), false});
      ++k;
    } else {
      points.push_back({u, IsHigh(u) || IsLow(u)});
    }
  }
  // Step 6: unpaired surrogates removed, then trim().
  std::erase_if(points, [](const Point& p) { return p.lone; });
  size_t b = 0, e = points.size();
  while (b < e && IsJsSpace(points[b].cp)) ++b;
  while (e > b && IsJsSpace(points[e - 1].cp)) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) AppendUtf8(out, points[k].cp);
  return out;
}

std::string TaskLabel(const SnapshotTask& task) {
  if (task.status == "in_progress" && !task.active_form.empty()) return task.active_form;
  return task.subject.empty() ? "(untitled)" : task.subject;
}

std::string RenderInjection(const TodoSnapshot& snapshot, const LoopConfig& config,
                            bool reconcile) {
  size_t limit = config.max_injected_tasks > 0 ? static_cast<size_t>(config.max_injected_tasks) : 0;
  size_t shown = std::min(limit, snapshot.open.size());
  std::string out;
  out += "<" + std::string(kInjectTag) + ">\n";
  out += std::to_string(snapshot.open.size()) + " tracked task(s) are still open on this branch:\n";
  for (size_t i = 0; i < shown; ++i) {
    const SnapshotTask& t = snapshot.open[i];
    out += "  " + std::to_string(t.id) + ". [" + SanitizeLabel(t.status) + "] " +
           SanitizeLabel(TaskLabel(t)) + "\n";
  }
  if (size_t hidden = snapshot.open.size() - shown; hidden > 0) {
    out += "  ... and " + std::to_string(hidden) + " more\n";
  }
  out +=
      "The human's latest message outranks everything above: if it says to stop, to wait,\n"
      "or limits what to do, do that instead and say so in one line. Otherwise carry on\n"
      "with the open tasks, and move a task to in_progress when you start it and to\n"
      "completed only once it is actually verified \xE2\x80\x94 if a task cannot be verified now,\n"
      "leave it open and say what is blocking it.\n";
  if (reconcile) {
    out +=
        "If this list has drifted from the work, reconcile it now: update statuses,\n"
        "add what is missing, and remove what no longer applies.\n";
  }
  out += "</" + std::string(kInjectTag) + ">";
  return out;
}

bool InjectIntoRequest(ModelRequest& request, const std::string& block) {
  const size_t h = request.history.size();
  const size_t n = h + request.tail.size();
  auto at = [&](size_t i) -> const Message& {
    return i < h ? request.history[i] : request.tail[i - h];
  };
  // Which markers stay: both neighbours exist and neither is user-role.
  // Neighbours are taken from the unfiltered list.
  std::vector<size_t> dropped;
  for (size_t i = 0; i < n; ++i) {
    if (!IsMarker(at(i))) continue;
    bool keep = i > 0 && i + 1 < n && !IsUserRole(at(i - 1)) && !IsUserRole(at(i + 1));
    if (!keep) dropped.push_back(i);
  }
  if (dropped.size() == n) return false;  // nothing left to attach to

  if (!dropped.empty()) {
    size_t first = dropped.front();
    std::vector<Message> new_tail;
    size_t d = 0;
    for (size_t i = first; i < n; ++i) {
      if (d < dropped.size() && dropped[d] == i) {
        ++d;
        continue;
      }
      if (i < h) {
        new_tail.push_back(request.history[i]);
      } else {
        new_tail.push_back(std::move(request.tail[i - h]));
      }
    }
    if (first < h) request.history = request.history.first(first);
    if (first >= h) {
      // Only tail entries change: keep the tail prefix before `first`.
      std::vector<Message> kept(
          std::make_move_iterator(request.tail.begin()),
          std::make_move_iterator(request.tail.begin() + static_cast<std::ptrdiff_t>(first - h)));
      for (Message& m : new_tail) kept.push_back(std::move(m));
      request.tail = std::move(kept);
    } else {
      request.tail = std::move(new_tail);
    }
  }

  ContentBlock text = ContentBlock::Text(block);
  if (!request.tail.empty()) {
    Message& last = request.tail.back();
    if (IsUserRole(last)) {
      last.content.push_back(std::move(text));
      last.uid = 0;
      return true;
    }
  } else if (!request.history.empty() && IsUserRole(request.history.back())) {
    // Merge into the stored last message: a changed copy goes to the tail.
    Message copy = request.history.back();
    copy.content.push_back(std::move(text));
    copy.uid = 0;
    request.history = request.history.first(request.history.size() - 1);
    request.tail.push_back(std::move(copy));
    return true;
  }
  Message m;
  m.role = Role::kUser;
  m.content.push_back(std::move(text));
  request.tail.push_back(std::move(m));
  return true;
}

}  // namespace agentloop::todo
