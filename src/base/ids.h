// Identifier generation. Ids are random (not sequential) so that ids from
// different processes and machines never collide.
#pragma once

#include <cstdint>
#include <string>

namespace agentloop {

// A random RFC 4122 version-4 UUID, lower-case, e.g.
// "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c". Thread-safe.
std::string NewUuid();

// A short random id with a prefix, e.g. NewId("turn") -> "turn_5f3a9c0d2b1e4a67".
std::string NewId(std::string_view prefix);

// 64 random bits. Thread-safe.
uint64_t RandomU64();

}  // namespace agentloop
