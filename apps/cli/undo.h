// `/undo` in chat: the file changes a session's write and edit calls
// reported (their results' details: path, created, diff) and the reversal
// of one of them from its unified diff.
//
// Thread-safety: pure functions over values, except RevertChange (files).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"
#include "agentloop/types.h"

namespace agentloop::cli {

// One change to a file, as its tool result reported it.
struct FileChange {
  std::string tool_use_id;
  std::string tool;  // write or edit
  std::string path;  // as reported: relative to the workspace, or absolute
  bool created = false;
  std::string diff;  // unified diff, before -> after
};

// The changes in `history`, oldest first (results without a diff are left out).
std::vector<FileChange> FileChanges(std::span<const Message> history);

// The text `current` had before the change `diff` (a unified diff whose
// `+` and context lines `current` holds at the hunks' positions) was made.
// kFailedPrecondition when `current` does not hold them (the file changed
// since), or the diff cannot be reversed exactly (it was cut, or bytes in it
// were replaced to make it valid UTF-8); kInvalidArgument for a malformed
// diff.
Result<std::string> ReverseDiff(std::string_view current, std::string_view diff);

// Puts the file of `change` (inside `workspace`) back as it was before the
// change: a created file is removed, another one rewritten. Returns the
// diff of the reversion (current -> restored) for showing. Errors: the file
// is outside the workspace (kPermissionDenied), missing or changed since
// (kFailedPrecondition), or cannot be written.
Result<std::string> RevertChange(const FileChange& change, const std::filesystem::path& workspace);

}  // namespace agentloop::cli
