// Transcript: a session's message history, owned by the session and shared by
// reference with the turn that runs on it.
//
// Appending is O(size of the new message): the transcript keeps a running
// character count (for the chars/4 token estimate) and gives every message a
// uid (for per-message caches), so no step rescans or copies the history.
//
// Thread-safety: not thread-safe; one turn at a time owns a session.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "agentloop/types.h"

namespace agentloop {

// The context as the provider last measured it, carried from turn to turn
// (and rebuilt from the store), so a turn never starts its estimate over:
// `tokens` of input (uncached + cache read + cache write) for a request
// whose history had `history_chars` characters (Transcript::chars()) and
// whose system text and tools had `fixed_chars` (-1: not known). The next
// request is estimated in constant time as `tokens` plus chars / 4 of what
// changed since (docs/protocol.md, "Context budget").
struct ContextMeasure {
  int64_t tokens = 0;
  int64_t history_chars = 0;
  int64_t fixed_chars = -1;
  bool operator==(const ContextMeasure&) const = default;
};

class Transcript {
 public:
  Transcript();
  explicit Transcript(std::vector<Message> messages);

  // Appends and returns a reference valid until the next mutation.
  const Message& Append(Message message);
  // Replaces messages [0, count) with `replacement` (compaction).
  // REQUIRES: count <= size().
  void ReplacePrefix(size_t count, std::vector<Message> replacement);
  // Removes the last message. REQUIRES: !empty().
  void PopBack();

  std::span<const Message> messages() const { return messages_; }
  const Message& back() const { return messages_.back(); }
  size_t size() const { return messages_.size(); }
  bool empty() const { return messages_.empty(); }
  // Characters of text, arguments and results (for the chars/4 estimate).
  int64_t chars() const { return chars_; }

  // Characters a message contributes to chars().
  static int64_t MessageChars(const Message& m);

 private:
  std::vector<Message> messages_;
  int64_t chars_ = 0;
  uint64_t next_uid_;
};

}  // namespace agentloop
