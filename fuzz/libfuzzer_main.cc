// libFuzzer target (clang only): fuzz/CMakeLists.txt builds it with
// -fsanitize=fuzzer. Run: ./al_fuzz_provider_stream -max_total_time=60 corpus/
#include "provider_stream_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return agentloop::FuzzProviderStream(data, size);
}
