#include "agentloop/json.h"

#include "base/strings.h"

namespace agentloop {

Result<Json> ParseJson(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgument(std::string("invalid JSON at byte ") + std::to_string(e.byte) + ": " +
                           e.what());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("invalid JSON: ") + e.what());
  }
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace agentloop
