#include "providers/http_pool.h"

#include <algorithm>

namespace agentloop {

HttpConnectionPool::HttpConnectionPool(Limits limits) : limits_(limits) {}

std::shared_ptr<PooledConnection> HttpConnectionPool::TakeIdle(const std::string& key,
                                                               Clock::time_point now) {
  auto it = idle_.find(key);
  if (it == idle_.end()) return nullptr;
  auto& conns = it->second;
  std::shared_ptr<PooledConnection> found;
  while (!conns.empty() && !found) {
    std::shared_ptr<PooledConnection> c = std::move(conns.back());
    conns.pop_back();
    c->in_pool_ = false;
    ++c->generation_;
    c->StopWatch();
    if (now - c->idle_since_ > limits_.idle_lifetime || !c->IsOpen()) {
      c->Close();
    } else {
      found = std::move(c);
    }
  }
  if (conns.empty()) idle_.erase(it);
  return found;
}

bool HttpConnectionPool::HasIdle(const std::string& key) const {
  auto it = idle_.find(key);
  return it != idle_.end() && !it->second.empty();
}

void HttpConnectionPool::Drop(std::vector<std::shared_ptr<PooledConnection>>& conns, size_t i) {
  std::shared_ptr<PooledConnection> c = std::move(conns[i]);
  conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
  c->in_pool_ = false;
  ++c->generation_;
  c->Close();
}

uint64_t HttpConnectionPool::Put(std::shared_ptr<PooledConnection> c, Clock::time_point now) {
  auto& conns = idle_[c->key];
  while (!conns.empty() && (conns.size() >= limits_.max_idle_per_key ||
                            now - conns.front()->idle_since_ > limits_.idle_lifetime)) {
    Drop(conns, 0);
  }
  c->in_pool_ = true;
  c->idle_since_ = now;
  uint64_t token = ++c->generation_;
  conns.push_back(std::move(c));
  return token;
}

bool HttpConnectionPool::Evict(const std::shared_ptr<PooledConnection>& c, uint64_t token) {
  if (!c->in_pool_ || c->generation_ != token) return false;
  auto it = idle_.find(c->key);
  if (it != idle_.end()) {
    auto& v = it->second;
    auto pos = std::find(v.begin(), v.end(), c);
    const bool found = pos != v.end();
    if (found) Drop(v, static_cast<size_t>(pos - v.begin()));
    if (v.empty()) idle_.erase(it);
    if (found) return true;
  }
  c->in_pool_ = false;
  ++c->generation_;
  c->Close();
  return true;
}

void HttpConnectionPool::CloseAll() {
  for (auto& [key, conns] : idle_) {
    for (auto& c : conns) {
      c->in_pool_ = false;
      ++c->generation_;
      c->Close();
    }
  }
  idle_.clear();
}

size_t HttpConnectionPool::idle_count(const std::string& key) const {
  auto it = idle_.find(key);
  return it == idle_.end() ? 0 : it->second.size();
}

size_t HttpConnectionPool::idle_total() const {
  size_t n = 0;
  for (const auto& [key, conns] : idle_) n += conns.size();
  return n;
}

bool HttpConnectionPool::Opening(const std::string& key) const { return opening_.count(key) != 0; }

bool HttpConnectionPool::BeginOpening(const std::string& key, const void* opener) {
  if (Opening(key) || HasIdle(key)) return false;
  opening_[key].by = opener;
  return true;
}

bool HttpConnectionPool::AddWaiter(const std::string& key, std::shared_ptr<PoolWaiter> w) {
  auto it = opening_.find(key);
  if (it == opening_.end()) return false;
  it->second.waiters.push_back(std::move(w));
  return true;
}

void HttpConnectionPool::RemoveWaiter(const std::string& key, const PoolWaiter* w) {
  auto it = opening_.find(key);
  if (it == opening_.end()) return;
  auto& v = it->second.waiters;
  v.erase(std::remove_if(v.begin(), v.end(), [w](const auto& p) { return p.get() == w; }), v.end());
}

std::vector<std::shared_ptr<PoolWaiter>> HttpConnectionPool::EndOpening(const std::string& key,
                                                                        const void* opener) {
  std::vector<std::shared_ptr<PoolWaiter>> live;
  auto it = opening_.find(key);
  if (it == opening_.end() || it->second.by != opener) return live;
  for (auto& w : it->second.waiters) {
    if (!w->Gone()) live.push_back(std::move(w));
  }
  opening_.erase(it);
  return live;
}

size_t HttpConnectionPool::waiter_count(const std::string& key) const {
  auto it = opening_.find(key);
  return it == opening_.end() ? 0 : it->second.waiters.size();
}

}  // namespace agentloop
