#include "providers/sse_parser.h"

#include <cstring>

namespace agentloop {
namespace {

// First CR or LF in [p, end), or end.
const char* FindEol(const char* p, const char* end) {
  const char* lf = static_cast<const char*>(std::memchr(p, '\n', end - p));
  const char* limit = lf ? lf : end;
  const char* cr = static_cast<const char*>(std::memchr(p, '\r', limit - p));
  return cr ? cr : limit;
}

}  // namespace

Status SseParser::Feed(std::string_view bytes, SseHandler& handler) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  if (p == end) return Status::Ok();
  if (skip_lf_) {
    skip_lf_ = false;
    if (*p == '\n') ++p;
  }
  if (at_start_) {
    // Skip a UTF-8 BOM, which may itself arrive split.
    static constexpr char kBom[] = "\xEF\xBB\xBF";
    size_t have = line_.size();
    while (p < end && have < 3 && *p == kBom[have]) {
      line_.push_back(*p++);
      ++have;
    }
    if (have == 3) {
      line_.clear();
      at_start_ = false;
    } else if (p < end) {
      at_start_ = false;  // not a BOM: what we held back is line content
    } else {
      return Status::Ok();
    }
  }
  while (p < end) {
    const char* eol = FindEol(p, end);
    if (eol == end) {
      if (line_.size() + (end - p) > max_event_bytes_) {
        return DataLoss("SSE line exceeds " + std::to_string(max_event_bytes_) + " bytes");
      }
      line_.append(p, end - p);
      return Status::Ok();
    }
    Status st;
    if (line_.empty()) {
      st = ProcessLine(std::string_view(p, eol - p), handler);
    } else {
      line_.append(p, eol - p);
      st = ProcessLine(line_, handler);
      line_.clear();
    }
    if (!st.ok()) return st;
    p = eol + 1;
    if (*eol == '\r') {
      if (p == end) {
        skip_lf_ = true;
      } else if (*p == '\n') {
        ++p;
      }
    }
  }
  return Status::Ok();
}

Status SseParser::ProcessLine(std::string_view line, SseHandler& handler) {
  if (line.empty()) {
    pending_fields_ = false;
    if (!have_data_) {
      event_type_.clear();
      return Status::Ok();
    }
    SseEvent ev;
    ev.event = event_type_.empty() ? std::string_view("message") : std::string_view(event_type_);
    ev.data = data_;
    ev.id = last_id_;
    ++events_;
    Status st = handler.OnEvent(ev);
    data_.clear();
    event_type_.clear();
    have_data_ = false;
    return st;
  }
  if (line[0] == ':') return Status::Ok();  // comment
  std::string_view name = line, value;
  if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    name = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  pending_fields_ = true;
  if (name == "data") {
    if (data_.size() + value.size() + 1 > max_event_bytes_) {
      return DataLoss("SSE event exceeds " + std::to_string(max_event_bytes_) + " bytes");
    }
    if (have_data_) data_.push_back('\n');
    data_.append(value);
    have_data_ = true;
  } else if (name == "event") {
    event_type_.assign(value);
  } else if (name == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_.assign(value);
  } else if (name == "retry") {
    long v = 0;
    bool digits = !value.empty();
    for (char c : value) {
      if (c < '0' || c > '9' || v > 100000000) {
        digits = false;
        break;
      }
      v = v * 10 + (c - '0');
    }
    if (digits) retry_ms_ = v;
  }
  return Status::Ok();
}

bool SseParser::Finish() {
  bool partial = !line_.empty() || pending_fields_;
  line_.clear();
  data_.clear();
  event_type_.clear();
  have_data_ = false;
  pending_fields_ = false;
  skip_lf_ = false;
  return partial;
}

}  // namespace agentloop
