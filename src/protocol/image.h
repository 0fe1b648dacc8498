// Images in the conversation: the checks an image passes before it becomes
// a kImage block, and the line that stands for an image a model is not
// shown.
//
// An image is accepted when its media type is one every provider that takes
// images documents (PNG, JPEG, GIF, WebP), its data is standard padded
// base64, it decodes to at most kMaxImageBytes, and its first bytes are the
// signature of that media type (a provider refuses a request whose image
// does not match its declared type, which would fail every later request
// of the session).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop {

// Decoded bytes an image may have: Anthropic's documented per-image limit.
inline constexpr size_t kMaxImageBytes = 5u << 20;

// Whether `media_type` is one of image/png, image/jpeg, image/gif, image/webp.
bool IsAcceptedImageType(std::string_view media_type);

// The number of bytes `base64` decodes to. Errors: kInvalidArgument when it
// is not standard base64 with padding (length a multiple of 4, '=' only as
// the last one or two characters, no whitespace).
Result<size_t> Base64DecodedSize(std::string_view base64);

// Checks an image as described in the file comment. Errors:
// kInvalidArgument naming what is wrong ("media type image/bmp is not one
// of ...", "the data is not base64: ...", "5300000 bytes, more than the
// 5242880 an image may have", "the bytes are not a PNG image").
Status ValidateImage(std::string_view media_type, std::string_view base64,
                     size_t max_bytes = kMaxImageBytes);

// The text that stands for an image the model does not see:
// "[image image/png, 1234 bytes, not shown: <why>]". `bytes` is the decoded
// size (an estimate from the base64 length when the data is not valid).
std::string DescribeImage(std::string_view media_type, std::string_view base64,
                          std::string_view why);
std::string DescribeImage(const ContentBlock& image, std::string_view why);

}  // namespace agentloop
