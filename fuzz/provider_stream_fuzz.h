// The fuzz entry point for the SSE parser and the three stream decoders.
#pragma once

#include <cstddef>
#include <cstdint>

namespace agentloop {
// Input layout: byte 0 selects the decoder (mod 3) and byte 1 the feed chunk
// size; the rest is the stream body. Never crashes, never leaks; any
// Status is fine.
int FuzzProviderStream(const uint8_t* data, size_t size);
}  // namespace agentloop
