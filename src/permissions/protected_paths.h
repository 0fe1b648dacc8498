// Paths the engine reads as configuration, which the agent may never change
// without a person: a write there could raise its own permissions (a rule in
// `.agentloop/config.toml`, a git hook or `core.fsmonitor` in `.git/config`,
// instructions in `AGENTS.md`).
//
// Protected, wherever they appear (inside the workspace or in a parent):
//  - any path with a component `.agentloop` or `.git` (also a `.git` file);
//  - files named `AGENTS.md` (any case) and `.mcp.json`;
//  - everything under the extra roots the session names (the user's config
//    directory, the data directory, a system prompt file).
// Both the path as written and its resolved form (symlinks of the existing
// prefix followed) are checked: a link `src/gen -> ../.git` protects
// `src/gen/config`.
//
// RulesPolicy turns an `allow` for such an access into `ask` (never into
// allow, whatever the rules: `write(**)` and `*` included). For bash, a line
// whose words name such a path (`cp x .git/hooks/pre-commit`) is `ask` too.
//
// Thread-safety: pure functions (they read the file system's symlinks).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "permissions/shell_split.h"

namespace agentloop::permissions {

// Why writing the absolute, normalised path `abs` is protected, as written
// (no symbolic link is followed), or nullopt when it is not.
std::optional<std::string> ProtectedLocation(const std::filesystem::path& abs,
                                             const std::vector<std::filesystem::path>& roots);

// Why writing `path` (absolute, or relative to `workspace`) is protected, as
// written or with the symbolic links of its existing prefix followed, or
// nullopt when it is not.
std::optional<std::string> ProtectedPathReason(const std::filesystem::path& path,
                                               const std::filesystem::path& workspace,
                                               const std::vector<std::filesystem::path>& roots);

// Why a bash line, read as raw text (also one the shell reader does not
// understand), may run the agentloop binary under another name: it names a
// process's executable (`/proc/self/exe`, `/proc/$PPID/exe`, `/proc/*/exe`)
// or the parent process (`$PPID`). nullopt when it does neither.
std::optional<std::string> SelfRunReason(std::string_view command);

// Why a bash line touches a protected path: a word of one of its commands
// (`~` and `$HOME` expanded) names one, or it runs `agentloop` itself (which
// can trust a workspace or approve a pending call). nullopt when neither.
std::optional<std::string> ProtectedCommandReason(const CommandLine& line,
                                                  const std::filesystem::path& workspace,
                                                  const std::vector<std::filesystem::path>& roots,
                                                  const std::string& home);

}  // namespace agentloop::permissions
