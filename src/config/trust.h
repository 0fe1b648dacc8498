// Trusted workspaces: the person's record of repositories whose
// `.agentloop/config.toml` may set every key and whose `.mcp.json` servers
// may start.
//
// A workspace file is untrusted by default (config.h: only an allow-list of
// harmless keys is read from it). `agentloop trust DIR` records the
// workspace's canonical path together with the hash of its config file and
// its `.mcp.json` as they are at that moment, with the files inside the
// workspace that they name (the programs its MCP servers run;
// WorkspaceTrustHash; null when it has neither). The trust holds only for exactly those bytes: a
// file that changes afterwards (an edit, a `git pull`, the agent itself) is read as untrusted again
// until the person trusts it anew.
//
// The record is a JSON file in the user's data directory, written by
// rename, so a reader sees either the old or the new list:
//   {"version": 1, "workspaces": [{"path": "/abs", "config_sha256": "hex"|null,
//                                  "trusted_at_ms": 1764590000000}]}
//
// Thread-safety: functions over files; concurrent writers of one record
// file can lose an update (the last rename wins), never corrupt it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/status.h"

namespace agentloop {

struct TrustRecord {
  std::filesystem::path workspace;           // canonical
  std::optional<std::string> config_sha256;  // nullopt: trusted while it had no config file
  int64_t trusted_at_ms = 0;
};

// <data_dir>/trusted_workspaces.json
std::filesystem::path TrustStorePath(const std::filesystem::path& data_dir);

// Lower-case hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// <workspace>/.mcp.json: the project's MCP servers (the format other agents
// read).
std::filesystem::path ProjectMcpJsonPath(const std::filesystem::path& workspace);

// The hash a trust record holds of a workspace's files (their texts;
// nullopt: absent). Without a `.mcp.json` it is the SHA-256 of the config
// file alone (nullopt with neither); with one, the SHA-256 of
// "agentloop-trust-v2", the config file's hash (empty when absent) and the
// `.mcp.json`'s hash, NUL-separated, so a change to either file, its
// appearance or its removal ends the trust.
std::optional<std::string> WorkspaceTrustHash(const std::optional<std::string>& config_text,
                                              const std::optional<std::string>& mcp_json_text);

// The files inside `workspace` that its configuration names: every string
// of the config file (TOML) and of `.mcp.json` (JSON) that, as a path
// relative to the workspace or absolute, leads (symbolic links followed) to
// a regular file inside it, such as the program or script an MCP server
// runs. Relative to the workspace, sorted, without duplicates. What those
// programs load in turn (a module, a sourced script) is not named, and not
// covered by trust.
std::vector<std::string> NamedWorkspaceFiles(const std::filesystem::path& workspace,
                                             const std::optional<std::string>& config_text,
                                             const std::optional<std::string>& mcp_json_text);

// The hash a trust record holds of a workspace: WorkspaceTrustHash of its
// two files and, when they name files inside the workspace
// (NamedWorkspaceFiles), the SHA-256 of "agentloop-trust-v3", that hash and
// each named file's path and content hash, NUL-separated, so a change to a
// program the configuration runs ends the trust too. A named file that
// cannot be read counts as empty.
std::optional<std::string> WorkspaceTrustHash(const std::filesystem::path& workspace,
                                              const std::optional<std::string>& config_text,
                                              const std::optional<std::string>& mcp_json_text);

// The records in `store`; a missing file is an empty list. Errors:
// kDataLoss for a file that is not a valid record (named in the message).
Result<std::vector<TrustRecord>> ReadTrustStore(const std::filesystem::path& store);

// The record of `workspace` (compared by canonical path), if any.
Result<std::optional<TrustRecord>> FindTrust(const std::filesystem::path& store,
                                             const std::filesystem::path& workspace);

// Records `workspace` (made canonical; it must be a directory) as trusted
// with the current WorkspaceTrustHash of its files, replacing an earlier
// record.
// Returns the record written.
Result<TrustRecord> TrustWorkspace(const std::filesystem::path& store,
                                   const std::filesystem::path& workspace, int64_t now_ms);

// Removes the record of `workspace`. Returns whether there was one.
Result<bool> RevokeTrust(const std::filesystem::path& store,
                         const std::filesystem::path& workspace);

}  // namespace agentloop
