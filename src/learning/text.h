// Small text helpers of the learning module: Unicode-aware clipping (the
// reflector's digest counts characters as code points) and the sanitiser for
// model-authored text that goes into a system prompt.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentloop::learning {

// Number of Unicode code points in `s` (invalid bytes count as one each).
size_t CodePointCount(std::string_view s);

// `s` followed by spaces up to `width` code points (a table column).
std::string PadCodePoints(std::string s, size_t width);

// The first `max` code points of `s` (never splits a sequence).
std::string_view PrefixCodePoints(std::string_view s, size_t max);

// The seed's `clip(t, max)`: trim surrounding whitespace, then, when longer
// than `max` code points, the first `max` code points followed by "…" (so at
// most max + 1 code points).
std::string Clip(std::string_view text, size_t max);

// Model-authored text made safe to put on one line of a system prompt (the
// todo labels' rules, with a caller-chosen cap):
//  1. invalid UTF-8 is replaced by U+FFFD;
//  2. each run of CR, LF, TAB, U+2028, U+2029, U+0085 becomes one space;
//  3. other C0/C1 controls, U+200B-U+200F, U+202A-U+202E, U+2066-U+2069 and
//     U+FEFF are deleted;
//  4. every '<' becomes "&lt;";
//  5. the result is trimmed and cut to `max_code_points` (a cut adds "…").
std::string SanitizeInline(std::string_view text, size_t max_code_points);

// Whether `name` is a slug: ^[a-z0-9][a-z0-9-]*$ and at most `max_len` bytes.
bool IsSlug(std::string_view name, size_t max_len = 64);

// A slug made from free text ("Run the DB migrations!" -> "run-the-db-migrations"),
// cut to `max_len`; "item" when nothing usable is left.
std::string Slugify(std::string_view text, size_t max_len = 48);

}  // namespace agentloop::learning
