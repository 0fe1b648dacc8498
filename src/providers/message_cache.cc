#include "providers/message_cache.h"

#include <vector>

namespace agentloop {

void MessageCache::AppendMessages(const ModelRequest& request, const Serializer& serialize,
                                  std::string* out, bool* need_comma, size_t reserve_extra,
                                  const Serializer& newest) {
  // The newest message is the tail's last, or the history's when the tail
  // is empty; with `newest` set it is serialised apart, uncached.
  const bool mark_history_last = newest && request.tail.empty() && !request.history.empty();
  const size_t n = request.history.size() - (mark_history_last ? 1 : 0);
  std::vector<Fragment> frags(n);
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < n; ++i) {
      uint64_t uid = request.history[i].uid;
      if (uid == 0) continue;
      auto it = map_.find(uid);
      if (it == map_.end()) continue;
      frags[i] = it->second.fragment;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++hits_;
    }
  }
  std::vector<std::pair<uint64_t, Fragment>> fresh;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!frags[i]) {
      frags[i] = std::make_shared<const std::string>(serialize(request.history[i]));
      if (request.history[i].uid != 0) fresh.emplace_back(request.history[i].uid, frags[i]);
    }
    total += frags[i]->size() + 1;
  }
  if (!fresh.empty()) {
    std::lock_guard lock(mu_);
    misses_ += fresh.size();
    for (auto& [uid, f] : fresh) InsertLocked(uid, std::move(f));
  }
  std::vector<std::string> tail;
  tail.reserve(request.tail.size() + 1);
  if (mark_history_last) {
    tail.push_back(newest(request.history.back()));
    total += tail.back().size() + 1;
  }
  for (size_t i = 0; i < request.tail.size(); ++i) {
    const bool last = newest && i + 1 == request.tail.size();
    tail.push_back(last ? newest(request.tail[i]) : serialize(request.tail[i]));
    total += tail.back().size() + 1;
  }
  out->reserve(out->size() + total + reserve_extra);
  auto append = [&](const std::string& f) {
    if (f.empty()) return;
    if (*need_comma) out->push_back(',');
    out->append(f);
    *need_comma = true;
  };
  for (const Fragment& f : frags) append(*f);
  for (const std::string& f : tail) append(f);
}

void MessageCache::InsertLocked(uint64_t uid, Fragment f) {
  if (f->size() > max_bytes_) return;
  auto it = map_.find(uid);
  if (it != map_.end()) return;  // another thread won the race; same content
  lru_.push_front(uid);
  bytes_ += f->size();
  map_.emplace(uid, Entry{std::move(f), lru_.begin()});
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    auto victim = map_.find(lru_.back());
    bytes_ -= victim->second.fragment->size();
    map_.erase(victim);
    lru_.pop_back();
  }
}

size_t MessageCache::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}
size_t MessageCache::misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}
size_t MessageCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}
void MessageCache::Clear() {
  std::lock_guard lock(mu_);
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

}  // namespace agentloop
