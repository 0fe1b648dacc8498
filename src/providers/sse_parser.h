// Incremental Server-Sent Events parser (WHATWG HTML "event stream
// interpretation"): bytes may be split at any boundary; CR, LF and CRLF end
// lines; `data:` lines are joined with "\n"; `event:` names the event
// (default "message"); `id:` sets the last event id; comment lines (":...")
// are ignored; a blank line dispatches. An event with no data is not
// dispatched. A leading UTF-8 BOM is skipped. An unterminated event at end of
// stream is discarded (Finish() reports whether one was pending).
//
// Hot path: lines are located with memchr and fields are appended as whole
// slices; nothing is copied per byte.
//
// Thread-safety: one parser per stream; not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "agentloop/status.h"

namespace agentloop {

struct SseEvent {
  std::string_view event;  // "message" when the stream named none
  std::string_view data;   // data lines joined with '\n' (no trailing '\n')
  std::string_view id;     // the last event id seen so far (may be empty)
};

class SseHandler {
 public:
  virtual ~SseHandler() = default;
  // A non-OK status stops parsing; Feed() returns it.
  virtual Status OnEvent(const SseEvent& event) = 0;
};

class SseParser {
 public:
  // `max_event_bytes` bounds one event (and one line): a larger one fails the
  // stream with kDataLoss instead of growing without limit.
  explicit SseParser(size_t max_event_bytes = 64u << 20) : max_event_bytes_(max_event_bytes) {}

  // Feeds the next bytes; calls `handler` for each complete event.
  Status Feed(std::string_view bytes, SseHandler& handler);

  // End of stream. Returns true when a partial (undispatched) event or line
  // was pending, i.e. the stream was cut mid-event.
  bool Finish();

  // The `retry:` value in ms, or -1 if none was sent.
  long retry_ms() const { return retry_ms_; }
  size_t events_dispatched() const { return events_; }

 private:
  Status ProcessLine(std::string_view line, SseHandler& handler);

  size_t max_event_bytes_;
  std::string line_;        // a partial line carried across Feed() calls
  std::string data_;        // data of the event being built
  std::string event_type_;  // event: of the event being built
  std::string last_id_;
  bool have_data_ = false;
  bool pending_fields_ = false;  // any field line seen since the last dispatch
  bool skip_lf_ = false;         // the previous chunk ended with CR
  bool at_start_ = true;         // BOM check
  long retry_ms_ = -1;
  size_t events_ = 0;
};

}  // namespace agentloop
