#include "provider_stream_fuzz.h"

#include <string_view>

#include "providers/http_provider.h"

namespace agentloop {

int FuzzProviderStream(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const std::unique_ptr<WireFormat> kFormats[] = {
      NewOpenAiChatFormat({}), NewAnthropicFormat({}), NewOpenAiResponsesFormat({})};
  const WireFormat& format = *kFormats[data[0] % 3];
  size_t chunk = data[1] == 0 ? size : data[1];
  std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  StreamSink sink;
  std::unique_ptr<StreamDecoder> decoder = format.NewDecoder(sink);
  SseParser parser(1 << 20);
  Status st;
  for (size_t p = 0; p < body.size() && st.ok(); p += chunk) {
    st = parser.Feed(body.substr(p, chunk), *decoder);
  }
  bool cut = parser.Finish();
  if (st.ok()) {
    Result<ModelResponse> r = decoder->Finish(cut);
    if (r.ok()) {
      // A decoded response must serialise back without throwing.
      Message m;
      m.role = Role::kAssistant;
      m.content = r->content;
      (void)format.SerializeMessage(m);
    }
  }
  return 0;
}

}  // namespace agentloop
