// The secrets `agentloop serve` keeps in its data directory (docs/security.md):
// the generated access token used when no `server.tokens` are configured,
// and the key that signs the console's cookies. Each is a file of 64 hex
// digits (32 random bytes) readable only by its owner (0600).
//
// Thread-safety: free functions; concurrent starts agree on one value (the
// file is created whole or not at all, and the first to create it wins).
#pragma once

#include <filesystem>
#include <string>

#include "agentloop/status.h"

namespace agentloop::server {

// File names in the data directory.
inline constexpr const char* kServerTokenFile = "server-token";
inline constexpr const char* kCookieSecretFile = "console-cookie-secret";

// 32 random bytes from the OS's generator, as 64 lower-case hex digits.
// Errors: kInternal when the generator fails.
Result<std::string> RandomSecret();

// The secret in `path`, created (directory 0700 included, file 0600) with
// RandomSecret when missing. An existing file must be a regular file (not a
// symbolic link) owned by this user, readable by nobody else, and hold at
// least 32 characters without white space (a trailing newline is dropped).
// Errors: kPermissionDenied (another owner, group or other bits set: the
// message says to `chmod 600` or delete it), kFailedPrecondition (not a
// regular file, too short), or the error of the failing system call.
Result<std::string> LoadOrCreateSecret(const std::filesystem::path& path);

// Replaces the secret in `path` with a new RandomSecret (0600, atomically)
// and returns it.
Result<std::string> RotateSecret(const std::filesystem::path& path);

}  // namespace agentloop::server
