// Line-based unified diffs (Myers' O(ND) algorithm), for showing people what
// a change to a file does: the approval prompt, tool results, the server.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentloop {

struct UnifiedDiffOptions {
  int context = 3;  // unchanged lines around each change
  // The output is cut at about this many bytes, with a last line saying how
  // many were left out; 0: no limit.
  size_t max_bytes = 0;
  // Above this many changed lines (after the common head and tail are set
  // aside) the middle is shown as removed and re-added as a whole, which
  // bounds time and memory (O(max_edits^2)) for unrelated texts.
  size_t max_edits = 2000;
};

// The unified diff (`diff -u` format: `--- old_label`, `+++ new_label`, then
// `@@ -l,s +l,s @@` hunks) turning `before` into `after`; empty when they are
// equal. Lines end at '\n'; a last line without one is followed by
// `\ No newline at end of file`, as diff and git print it.
std::string UnifiedDiff(std::string_view before, std::string_view after, std::string_view old_label,
                        std::string_view new_label, const UnifiedDiffOptions& options = {});

}  // namespace agentloop
