// Small string utilities shared by every module.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop {

// UTF-8, one decoder for every module. Valid UTF-8 is the shortest-form
// encoding of a Unicode scalar value: U+0000..U+10FFFF without the surrogates
// U+D800..U+DFFF. Everything else (a stray continuation byte, a bad lead byte,
// a truncated or overlong sequence, an encoded surrogate, a value above
// U+10FFFF) is invalid, one byte at a time: each invalid byte decodes as
// U+FFFD and the next byte is tried as a new start, so a decoder never
// swallows the valid text that follows a bad byte.

// One decoded character.
struct Utf8Char {
  char32_t cp = 0;    // the code point; U+FFFD when !valid
  size_t size = 1;    // bytes it takes: the sequence's length, 1 when invalid
  bool valid = true;  // false: in[i] starts no valid sequence
};

// Decodes the character at in[i]. REQUIRES: i < in.size().
Utf8Char DecodeUtf8(std::string_view in, size_t i);

// As DecodeUtf8, but an encoded surrogate (ED A0..BF xx, as CESU-8 and WTF-8
// write UTF-16 halves) is valid and decodes to its value, the way a
// JavaScript string holds it. For code that must reproduce JavaScript's
// reading of a byte string; everything else uses DecodeUtf8.
Utf8Char DecodeWtf8(std::string_view in, size_t i);

// Appends the UTF-8 encoding of `cp` (REQUIRES: cp <= U+10FFFF; a surrogate
// is written as its three-byte form).
void AppendUtf8(std::string& out, char32_t cp);

// Replaces each invalid byte with U+FFFD so the text can go into JSON.
std::string SanitizeUtf8(std::string_view in);
// Whether `in` is valid UTF-8.
bool IsValidUtf8(std::string_view in);

// Cuts `in` to at most `max_bytes` without splitting a UTF-8 sequence.
std::string_view TruncateUtf8(std::string_view in, size_t max_bytes);

bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
std::string_view Trim(std::string_view s);
std::vector<std::string_view> Split(std::string_view s, char sep);
std::string ToLower(std::string_view s);
// Levenshtein distance (insertions, deletions, substitutions of bytes).
size_t EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `word` when its distance is below `below` (a
// "did you mean" hint); empty when none is that close.
std::string ClosestMatch(std::string_view word, const std::vector<std::string_view>& candidates,
                         size_t below = 4);

// Lowercase hexadecimal, two digits per byte ("\x0f\xa0" -> "0fa0"): the
// form of digests, signatures and generated secrets.
std::string HexEncode(std::string_view bytes);

// Base64 (RFC 4648): the standard alphabet with '=' padding, or with `url`
// the URL-safe alphabet ('-', '_') without padding.
std::string Base64Encode(std::string_view in, bool url = false);
// Decodes what Base64Encode writes (the same `url` choice; padding optional).
// Errors: kInvalidArgument for a character outside the alphabet or a length
// no encoding has.
Result<std::string> Base64Decode(std::string_view in, bool url = false);

// Escapes &, <, >, " and ' for text and attribute values in HTML.
std::string HtmlEscape(std::string_view in);

// Redacts anything that looks like an API key (sk-..., sk-ant-..., long
// bearer tokens) in text destined for logs and errors.
std::string RedactSecrets(std::string_view text);

// A tenant's name (a server's token grant) also names folders: its folder of
// an agent's root of workspaces and its learning folders in the data
// directory. OK for 1-64 characters of a-z, 0-9, '_', '-' and '.', other
// than "." and "..", so a name never leaves its parent folder; otherwise
// kInvalidArgument saying so.
Status ValidateTenantName(std::string_view tenant);

}  // namespace agentloop
