// Small string utilities shared by every module.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentloop {

// Replaces invalid UTF-8 sequences with U+FFFD so the text can go into JSON.
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

// Redacts anything that looks like an API key (sk-..., sk-ant-..., long
// bearer tokens) in text destined for logs and errors.
std::string RedactSecrets(std::string_view text);

}  // namespace agentloop
