// The change a `write` or `edit` call would make to a file of the
// workspace, computed from the file as it is now, before the call runs: what
// a person is shown before deciding (the terminal's approval prompt,
// `agentloop pending`, the server's `GET /v1/approvals/{id}/diff`).
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop::tools {

struct ChangePreviewOptions {
  // Not empty: the file's current content must not be shown (the session
  // may not read it), and this says why. Nothing of the file is read; the
  // preview has a note instead of a diff.
  std::string withheld;
  // The diff is cut at about this many bytes, with a last line saying how
  // many were left out (UnifiedDiffOptions::max_bytes); 0: no limit.
  size_t max_diff_bytes = 256 * 1024;
};

struct ChangePreview {
  std::string path;      // as the tools show it (relative to the workspace)
  bool created = false;  // the file does not exist: the call creates it
  // A `write` over an existing file: its whole content is replaced, whatever
  // the diff shows in common.
  bool replaces_file = false;
  size_t old_lines = 0;  // lines of the file as it is now (0 when withheld)
  size_t new_lines = 0;  // lines of the file the call would leave
  // The unified diff (`--- a/PATH`, `+++ b/PATH`, hunks with 3 lines of
  // context); a last line without '\n' is marked `\ No newline at end of
  // file` only when the file really lacks one. Empty when nothing would
  // change, or when `note` says why no diff is shown.
  std::string diff;
  bool truncated = false;  // `diff` was cut at max_diff_bytes
  // Why there is no diff: the file is withheld, is a directory or too large
  // to diff, or an edit's old_string is not found (or found more than once
  // without replace_all). Empty otherwise.
  std::string note;

  // {"path", "created", "diff", "note"?}: the body of the server's diff route.
  Json ToJson() const;
  // One line about the file: "(new file, 3 lines)", "replaces the whole
  // file (12 lines) with 3 lines", "no change", or empty for an edit.
  std::string Summary() const;
};

// Whether `tool` is one PreviewChange describes (write, edit).
bool HasChangePreview(std::string_view tool);

// The change the call `tool` with `args` would make to the file in
// `workspace` as it is now. The path is resolved as the tools resolve it:
// inside the workspace, symbolic links resolved and confined, never
// followed on the way; files larger than 8 MiB are not read.
// Errors: kInvalidArgument for another tool or arguments of the wrong
// shape, kPermissionDenied for a path outside the workspace,
// kFailedPrecondition when the workspace cannot be opened.
Result<ChangePreview> PreviewChange(std::string_view tool, const Json& args,
                                    const std::filesystem::path& workspace,
                                    const ChangePreviewOptions& options = {});

}  // namespace agentloop::tools
