#include "protocol/image.h"

#include <array>
#include <cstdint>

namespace agentloop {
namespace {

constexpr std::string_view kTypes[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};

// 0..63 for the standard alphabet, -1 otherwise.
constexpr std::array<int8_t, 256> MakeTable() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return t;
}
constexpr std::array<int8_t, 256> kTable = MakeTable();

// The first bytes of `base64` (already checked), at most `n` (a multiple
// of 3) of them.
std::string Head(std::string_view base64, size_t n) {
  std::string out;
  const size_t chars = std::min(base64.size(), n / 3 * 4);
  for (size_t i = 0; i + 4 <= chars; i += 4) {
    uint32_t acc = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = base64[i + k];
      acc <<= 6;
      if (c == '=') {
        ++pad;
      } else {
        acc |= static_cast<uint32_t>(kTable[static_cast<unsigned char>(c)]);
      }
    }
    out += static_cast<char>((acc >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((acc >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(acc & 0xFF);
  }
  return out;
}

bool HasSignature(std::string_view media_type, std::string_view head) {
  if (media_type == "image/png") return head.starts_with("\x89PNG\r\n\x1a\n");
  if (media_type == "image/jpeg") return head.starts_with("\xFF\xD8\xFF");
  if (media_type == "image/gif") return head.starts_with("GIF87a") || head.starts_with("GIF89a");
  if (media_type == "image/webp") {
    return head.size() >= 12 && head.starts_with("RIFF") && head.substr(8, 4) == "WEBP";
  }
  return false;
}

}  // namespace

bool IsAcceptedImageType(std::string_view media_type) {
  for (std::string_view t : kTypes) {
    if (t == media_type) return true;
  }
  return false;
}

Result<size_t> Base64DecodedSize(std::string_view base64) {
  if (base64.size() % 4 != 0) {
    return InvalidArgument("its length " + std::to_string(base64.size()) +
                           " is not a multiple of 4");
  }
  size_t pad = 0;
  if (!base64.empty() && base64.back() == '=') ++pad;
  if (base64.size() >= 2 && base64[base64.size() - 2] == '=') ++pad;
  const size_t body = base64.size() - pad;
  for (size_t i = 0; i < body; ++i) {
    if (kTable[static_cast<unsigned char>(base64[i])] < 0) {
      return InvalidArgument("character " + std::to_string(i) + " is outside its alphabet");
    }
  }
  return base64.size() / 4 * 3 - pad;
}

Status ValidateImage(std::string_view media_type, std::string_view base64, size_t max_bytes) {
  if (!IsAcceptedImageType(media_type)) {
    return InvalidArgument("media type '" + std::string(media_type) +
                           "' is not one of image/png, image/jpeg, image/gif, image/webp");
  }
  Result<size_t> size = Base64DecodedSize(base64);
  if (!size.ok()) return InvalidArgument("the data is not base64: " + size.error().message());
  if (*size == 0) return InvalidArgument("the image is empty");
  if (*size > max_bytes) {
    return InvalidArgument(std::to_string(*size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " an image may have");
  }
  if (!HasSignature(media_type, Head(base64, 12))) {
    return InvalidArgument("the bytes are not a " + std::string(media_type.substr(6)) + " image");
  }
  return Status::Ok();
}

std::string DescribeImage(std::string_view media_type, std::string_view base64,
                          std::string_view why) {
  Result<size_t> size = Base64DecodedSize(base64);
  const size_t bytes = size.ok() ? *size : base64.size() / 4 * 3;
  const std::string type = media_type.empty() ? "(no type)" : std::string(media_type);
  return "[image " + type + ", " + std::to_string(bytes) +
         " bytes, not shown: " + std::string(why) + "]";
}

std::string DescribeImage(const ContentBlock& image, std::string_view why) {
  return DescribeImage(image.media_type, image.data, why);
}

}  // namespace agentloop
