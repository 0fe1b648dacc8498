// MessageCache: a bounded per-provider cache of each history message's
// serialised wire form, keyed by Message::uid (0 = not cacheable), so that
// building step N's request costs the bytes of the new messages plus one
// memcpy of the cached ones, not a re-serialisation of the whole transcript.
//
// Eviction: least recently used, when the cached bytes exceed `max_bytes`.
//
// Thread-safety: thread-safe (one mutex, taken twice per request build).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "agentloop/provider.h"

namespace agentloop {

class MessageCache {
 public:
  // Serialises one message to its fragment: zero or more comma-separated
  // JSON values (one message may map to several wire items).
  using Serializer = std::function<std::string(const Message&)>;

  explicit MessageCache(size_t max_bytes = 128u << 20) : max_bytes_(max_bytes) {}

  // Appends the fragments of every message of `request` (history then tail),
  // comma-joined, to `out`. `*need_comma` says whether `out` already holds an
  // item; it is updated. `reserve_extra` is how many more bytes the caller
  // will append afterwards (so the buffer grows once).
  // `newest`, when set, serialises the last message of the request instead
  // (uncached: its fragment differs while it is the newest).
  void AppendMessages(const ModelRequest& request, const Serializer& serialize, std::string* out,
                      bool* need_comma, size_t reserve_extra = 0,
                      const Serializer& newest = nullptr);

  size_t hits() const;
  size_t misses() const;
  size_t bytes() const;
  void Clear();

 private:
  using Fragment = std::shared_ptr<const std::string>;
  struct Entry {
    Fragment fragment;
    std::list<uint64_t>::iterator lru;
  };
  void InsertLocked(uint64_t uid, Fragment f);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> map_;
  std::list<uint64_t> lru_;  // front = most recent
  size_t bytes_ = 0;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace agentloop
