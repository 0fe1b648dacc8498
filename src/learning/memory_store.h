// MemoryStore: durable notes the agent keeps across sessions, one Markdown
// file per memory, per user and per workspace (paths.h).
//
//   ---
//   name: build-command
//   type: project
//   description: "How to build and test this repo"
//   tags: [build, cmake]
//   ---
//   <body>
//
// Rules (ValidateMemory): name a slug ^[a-z0-9][a-z0-9-]*$ of at most 64
// bytes (it is also the file name, <name>.md); type fact | preference |
// project | reference; description 1..280 characters on one line; body
// 1..4000 characters; at most 10 tags, each a slug of at most 32 bytes.
// Characters are Unicode code points.
//
// The index (names and descriptions) goes into the system prompt; bodies
// are loaded on demand with memory_search (by query or by exact name).
//
// Thread-safety: a MemoryStore is a pair of paths; its methods may be called
// concurrently (each write replaces one file atomically; the last writer of
// a name wins).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "agentloop/status.h"

#include "learning/paths.h"

namespace agentloop::learning {

inline constexpr size_t kMaxMemoryName = 64;
inline constexpr size_t kMaxMemoryDescription = 280;
inline constexpr size_t kMaxMemoryBody = 4000;
inline constexpr size_t kMaxMemoryTags = 10;
inline constexpr size_t kMaxMemoryTag = 32;

struct Memory {
  std::string name;
  std::string type;  // fact | preference | project | reference
  std::string description;
  std::string body;
  std::vector<std::string> tags;
  Scope scope = Scope::kWorkspace;
  std::filesystem::path path;  // set by the store

  bool SameContent(const Memory& o) const {
    return name == o.name && type == o.type && description == o.description && body == o.body &&
           tags == o.tags && scope == o.scope;
  }
};

// kInvalidArgument naming the first broken rule, e.g. "name: must be a slug
// (lower-case letters, digits and '-', starting with a letter or digit)".
Status ValidateMemory(const Memory& memory);

// The file text (front matter + body + newline).
std::string RenderMemoryFile(const Memory& memory);
// Parses and validates a memory file. Errors: kInvalidArgument.
Result<Memory> ParseMemoryFile(std::string_view text, Scope scope);

struct MemoryHit {
  Memory memory;
  double score = 0;
};

class MemoryStore {
 public:
  // Either directory may be empty: that scope is then unavailable.
  MemoryStore(std::filesystem::path user_dir, std::filesystem::path workspace_dir);

  const std::filesystem::path& dir(Scope scope) const {
    return scope == Scope::kUser ? user_dir_ : workspace_dir_;
  }

  // Validates and writes <dir>/<name>.md (creating the directory). Returns
  // true when an existing memory was replaced. Errors: kInvalidArgument,
  // kFailedPrecondition (scope unavailable), I/O errors.
  Result<bool> Save(const Memory& memory);
  // The memory `name` in `scope`, or (no scope) workspace first, then user.
  // Errors: kNotFound, kInvalidArgument (bad name or corrupt file).
  Result<Memory> Get(const std::string& name, std::optional<Scope> scope = std::nullopt) const;
  // Removes the file (and its usage entry). Errors: kNotFound.
  Status Delete(const std::string& name, Scope scope);
  // Every readable memory, workspace first, each scope by name. Files that
  // do not parse are skipped and described in `warnings` when given.
  std::vector<Memory> List(std::vector<std::string>* warnings = nullptr) const;

  // Ranked search over names, tags, descriptions and bodies: the query is
  // split into lower-case words; per word a memory scores 8 for a name hit,
  // 6 for an exact tag, 3 for a description hit, 1 for a body hit, plus 2 when
  // the whole query occurs in the description or body. Zero scores are
  // dropped; ties go workspace first, then by name. At most `limit`.
  std::vector<MemoryHit> Search(const std::string& query, size_t limit) const;

  // The system-prompt index within `budget_chars` bytes:
  //   Memories (saved notes; load one with memory_search {"name": "<name>"}):
  //   - <name> [<type>, <scope>]: <description>
  //   - … N more (memory_search finds them)
  // Lines are ordered by uses (usage.json, most used first), then workspace
  // first, then name; descriptions are sanitised (SanitizeInline). Lines
  // that do not fit are counted in the "more" line (left out when that does
  // not fit either). "" when there is no memory or not even one line fits.
  std::string Index(size_t budget_chars) const;

 private:
  std::filesystem::path user_dir_;
  std::filesystem::path workspace_dir_;
};

}  // namespace agentloop::learning
