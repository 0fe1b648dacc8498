#include "engine/system_prompt.h"

#include <fstream>
#include <sstream>

namespace agentloop {
namespace {

constexpr size_t kMaxAgentsFileBytes = 64 * 1024;

std::string ReadSmallFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::string s(kMaxAgentsFileBytes + 1, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  if (s.size() > kMaxAgentsFileBytes) {
    s.resize(kMaxAgentsFileBytes);
    s += "\n[... AGENTS.md cut at 64 KiB]";
  }
  return s;
}

}  // namespace

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
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto f = *it / "AGENTS.md";
    if (std::filesystem::is_regular_file(f, ec)) found.push_back(f);
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
  for (const auto& f : FindAgentsFiles(parts.workspace)) {
    std::string text = ReadSmallFile(f);
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
