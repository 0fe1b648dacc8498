#include "engine/system_prompt.h"

#include <fcntl.h>

#include <sstream>

#include "env/files.h"

namespace agentloop {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxAgentsFileBytes = 64 * 1024;

bool IsWithinDir(const fs::path& path, const fs::path& root) {
  std::string p = path.generic_string();
  std::string r = root.generic_string();
  if (r.empty()) return false;
  if (r == "/") return true;
  return p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && p[r.size()] == '/');
}

// Reads `canonical` beneath `root` (both canonical) without following links.
Result<std::string> ReadBeneath(const fs::path& canonical, const fs::path& root, size_t max_bytes) {
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return PermissionDenied("cannot open " + root.string());
  fs::path rel = canonical.lexically_relative(root);
  AL_ASSIGN_OR_RETURN(UniqueFd dir,
                      OpenDirBeneath(root_fd.get(), rel.parent_path().generic_string(), false));
  AL_ASSIGN_OR_RETURN(UniqueFd fd,
                      OpenEntryNoFollow(dir.get(), rel.filename().string(), O_RDONLY | O_NONBLOCK));
  return ReadFdToString(fd.get(), canonical.string(), max_bytes);
}

// AGENTS.md text, cut at 64 KiB; empty when it cannot be read safely.
std::string ReadAgentsFile(const fs::path& canonical, const fs::path& root) {
  auto text = ReadBeneath(canonical, root, size_t{1} << 30);
  if (!text.ok()) return {};
  std::string s = std::move(*text);
  if (s.size() > kMaxAgentsFileBytes) {
    s.resize(kMaxAgentsFileBytes);
    s += "\n[... AGENTS.md cut at 64 KiB]";
  }
  return s;
}

// The directory AGENTS.md files are gathered from: the repository root, or
// the workspace outside a repository.
fs::path AgentsRoot(const fs::path& workspace) {
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(workspace, ec);
  if (ec) dir = workspace;
  for (fs::path d = dir;; d = d.parent_path()) {
    if (fs::exists(d / ".git", ec)) return d;
    if (d == d.parent_path()) break;
  }
  return dir;
}

}  // namespace

Result<std::string> ReadConfinedFile(const fs::path& file, const std::vector<fs::path>& roots,
                                     size_t max_bytes) {
  std::error_code ec;
  fs::path canon = fs::canonical(file, ec);
  if (ec) return NotFound("cannot read " + file.string() + ": " + ec.message());
  std::string where;
  for (const fs::path& r : roots) {
    if (r.empty()) continue;
    fs::path root = fs::canonical(r, ec);
    if (ec) continue;
    where += (where.empty() ? "" : " or ") + root.string();
    if (canon == root || !IsWithinDir(canon, root)) continue;
    auto text = ReadBeneath(canon, root, max_bytes);
    if (!text.ok()) {
      return Status(text.error().code(),
                    "cannot read " + file.string() + ": " + text.error().message());
    }
    return text;
  }
  return PermissionDenied(file.string() + " leads to " + canon.string() + ", which is outside " +
                          (where.empty() ? "every allowed directory" : where) +
                          "; it is only read from inside those");
}

std::vector<std::filesystem::path> FindAgentsFiles(const std::filesystem::path& workspace) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::weakly_canonical(workspace, ec);
  if (ec) dir = workspace;
  // Walk up to the repository root (the first directory holding .git), or
  // only the workspace itself when it is not inside a repository.
  std::vector<std::filesystem::path> chain;
  bool in_repo = false;
  for (std::filesystem::path d = dir;; d = d.parent_path()) {
    chain.push_back(d);
    if (std::filesystem::exists(d / ".git", ec)) {
      in_repo = true;
      break;
    }
    if (d == d.parent_path()) break;
  }
  if (!in_repo) chain.resize(1);
  // Only files whose real location stays inside the tree they came from.
  const std::filesystem::path top = chain.back();
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    // Many repositories carry only CLAUDE.md: it stands in for an absent
    // AGENTS.md (never both from one directory).
    auto f = *it / "AGENTS.md";
    if (!std::filesystem::exists(std::filesystem::symlink_status(f, ec))) f = *it / "CLAUDE.md";
    if (!std::filesystem::is_regular_file(f, ec)) continue;
    auto canon = std::filesystem::canonical(f, ec);
    if (ec || !IsWithinDir(canon, top)) continue;
    found.push_back(canon);
  }
  return found;
}

std::string BuildSystemPrompt(const SystemPromptParts& parts) {
  std::ostringstream out;
  if (parts.base_override) {
    out << *parts.base_override;
  } else {
    out << "You are agentloop, a careful software engineering agent working in the user's "
           "workspace through tools.\n"
        << "- Look before you change: read a file before you edit or overwrite it.\n"
        << "- Prefer small, verified steps; run the project's checks when you can.\n"
        << "- Use the todo tool to plan work of three or more steps; mark a task "
           "in_progress before you start it and completed only once it is verified.\n"
        << "- When the request is ambiguous, ask with ask_user instead of guessing.\n"
        << "- Finish with a short summary of what you did and what is left.\n";
  }
  out << "\nWorkspace: " << parts.workspace.string() << "\n";
  out << "Command: " << CommandKindName(parts.command);
  if (IsReadOnly(parts.command)) {
    out << " (read-only: tools that change files are not available; bash, when offered, runs "
           "in a read-only sandbox without network)";
  }
  out << "\n";
  const fs::path agents_root = AgentsRoot(parts.workspace);
  for (const auto& f : FindAgentsFiles(parts.workspace)) {
    std::string text = ReadAgentsFile(f, agents_root);
    if (text.empty()) continue;
    out << "\n# Instructions from " << f.string() << "\n" << text;
    if (text.back() != '\n') out << "\n";
  }
  for (const auto& extra : parts.extra_sections) {
    if (extra.empty()) continue;
    out << "\n" << extra;
    if (extra.back() != '\n') out << "\n";
  }
  return out.str();
}

}  // namespace agentloop
