// File helpers at the OS boundary: whole-file reads and atomic replacement.
//
// Thread-safety: free functions with no shared state.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "agentloop/status.h"

namespace agentloop {

// Reads the whole file. kNotFound when it does not exist; kFailedPrecondition
// when it is not a regular file or larger than `max_bytes`.
Result<std::string> ReadFileToString(const std::filesystem::path& path,
                                     size_t max_bytes = size_t{1} << 32);

// Replaces (or creates) `path` with `content` atomically: the bytes go to a
// temporary file in the same directory, which is fsync'ed and renamed over
// `path`; then the directory is fsync'ed. An existing file keeps its mode
// (and, when permitted, its owner); a new file gets 0666 minus the umask.
// The parent directory must exist. Readers see the old or the new content,
// never a mix.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content);

}  // namespace agentloop
