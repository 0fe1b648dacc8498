#include "base/ids.h"

#include <iterator>
#include <random>

#include <sys/random.h>

namespace agentloop {

uint64_t RandomU64() {
  // One generator per thread, seeded from the OS: no shared state, no lock.
  // getrandom(2) is one system call; std::random_device would first probe
  // the CPU with CPUID, which a virtual machine traps (~8 us each).
  thread_local std::mt19937_64 gen([] {
    uint32_t seed[4];
    if (getrandom(seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
      std::random_device rd;
      for (uint32_t& s : seed) s = rd();
    }
    std::seed_seq seq(std::begin(seed), std::end(seed));
    return std::mt19937_64(seq);
  }());
  return gen();
}

std::string NewUuid() {
  uint64_t hi = RandomU64();
  uint64_t lo = RandomU64();
  hi = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant 10
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  auto put = [&](uint64_t v, int nibbles) {
    for (int i = nibbles - 1; i >= 0; --i) out.push_back(kHex[(v >> (i * 4)) & 0xF]);
  };
  put(hi >> 32, 8);
  out.push_back('-');
  put((hi >> 16) & 0xFFFF, 4);
  out.push_back('-');
  put(hi & 0xFFFF, 4);
  out.push_back('-');
  put(lo >> 48, 4);
  out.push_back('-');
  put(lo & 0xFFFFFFFFFFFFULL, 12);
  return out;
}

std::string NewId(std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  out.push_back('_');
  uint64_t v = RandomU64();
  for (int i = 15; i >= 0; --i) out.push_back(kHex[(v >> (i * 4)) & 0xF]);
  return out;
}

}  // namespace agentloop
