#include "permissions/protected_paths.h"

#include "base/strings.h"

namespace agentloop::permissions {
namespace {

namespace fs = std::filesystem;

bool IsProtectedName(const std::string& component, bool last) {
  if (component == ".agentloop" || component == ".git") return true;
  if (!last) return false;
  // The instruction files every later session reads (CLAUDE.md stands in
  // for an absent AGENTS.md) and the MCP server list.
  const std::string lower = ToLower(component);
  return lower == "agents.md" || lower == "claude.md" || component == ".mcp.json";
}

bool IsPureReader(std::string_view program) {
  static constexpr std::string_view kReaders[] = {
      "cat",    "head",    "tail",      "grep",     "egrep",   "fgrep", "rg",
      "wc",     "ls",      "stat",      "file",     "nl",      "diff",  "cmp",
      "md5sum", "sha1sum", "sha256sum", "realpath", "readlink"};
  for (std::string_view r : kReaders) {
    if (program == r) return true;
  }
  return false;
}

bool Under(const fs::path& p, const fs::path& root) {
  auto rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

std::optional<std::string> ProtectedLocation(const fs::path& abs,
                                             const std::vector<fs::path>& roots) {
  std::vector<std::string> parts;
  for (const auto& c : abs) parts.push_back(c.string());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (IsProtectedName(parts[i], i + 1 == parts.size())) {
      return "'" + abs.string() + "' is agentloop or git configuration (" + parts[i] +
             "): a change there could widen what the agent may do, so it is always asked";
    }
  }
  for (const fs::path& r : roots) {
    if (r.empty()) continue;
    const fs::path root = r.lexically_normal();
    if (abs == root || Under(abs, root)) {
      return "'" + abs.string() + "' is under " + root.string() +
             ", which agentloop reads as configuration: always asked";
    }
  }
  return std::nullopt;
}

std::optional<std::string> ProtectedPathReason(const fs::path& path, const fs::path& workspace,
                                               const std::vector<fs::path>& roots) {
  fs::path abs = path.is_absolute() ? path : workspace / path;
  abs = abs.lexically_normal();
  if (auto r = ProtectedLocation(abs, roots)) return r;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(abs, ec);
  if (!ec && resolved != abs) {
    if (auto r = ProtectedLocation(resolved.lexically_normal(), roots)) return r;
  }
  return std::nullopt;
}

std::optional<std::string> SelfRunReason(std::string_view command) {
  const bool proc_exe = [&] {
    for (size_t at = command.find("/proc/"); at != std::string_view::npos;
         at = command.find("/proc/", at + 1)) {
      // The word up to a separator; quotes, escapes, expansions and globs
      // inside it may spell `exe` in pieces (`e''xe`, `e\xe`, `ex?`).
      const size_t end = command.find_first_of(" \t\n;&|<>()`", at);
      std::string_view word = command.substr(at, end == std::string_view::npos ? end : end - at);
      if (word.find("/exe") != std::string_view::npos ||
          word.find_first_of("'\"\\$*?[{") != std::string_view::npos) {
        return true;
      }
    }
    return false;
  }();
  if (proc_exe) {
    return "the command names a process's executable under /proc, which can be agentloop itself "
           "(it can trust workspaces and approve pending calls): always asked";
  }
  if (command.find("PPID") != std::string_view::npos) {
    return "the command names the parent process ($PPID), which can be agentloop itself (it can "
           "trust workspaces and approve pending calls): always asked";
  }
  return std::nullopt;
}

std::optional<std::string> ProtectedCommandReason(const CommandLine& line,
                                                  const fs::path& workspace,
                                                  const std::vector<fs::path>& roots,
                                                  const std::string& home) {
  for (const SimpleCommand& cmd : line.commands) {
    // agentloop itself can trust a workspace, approve a pending call or
    // accept a proposal: the agent must not do that on its own behalf.
    for (const std::string& program : cmd.programs) {
      // `exe`: a process's executable reached from its /proc directory.
      if (program == "agentloop" || program == "exe") {
        return "the command '" + cmd.text +
               "' runs agentloop itself, which can trust workspaces and approve pending calls: "
               "always asked";
      }
    }
    // A program that only reads its operands (`cat AGENTS.md`) cannot change
    // them; for it only the targets of output redirections count.
    const bool reader = !cmd.programs.empty() && IsPureReader(cmd.programs.back());
    bool redirect_target = false;
    for (std::string_view raw : Split(cmd.text, ' ')) {
      const bool after_redirect = redirect_target;
      redirect_target = raw.find('>') != std::string_view::npos &&
                        raw.find_first_not_of("0123456789&>|") == std::string_view::npos;
      if (reader && !after_redirect) continue;
      std::string word = UnquoteWord(raw);
      if (!home.empty()) {
        if (word == "~" || StartsWith(word, "~/")) word = home + word.substr(1);
        for (const char* var : {"${HOME}", "$HOME"}) {
          if (StartsWith(word, var)) word = home + word.substr(std::string_view(var).size());
        }
      }
      // `--output=.git/x`, `-o.git/x`: the path may follow '=' in one word.
      std::vector<std::string> candidates = {word};
      if (size_t eq = word.find('='); eq != std::string::npos) {
        candidates.push_back(word.substr(eq + 1));
      }
      for (const std::string& c : candidates) {
        if (c.empty()) continue;
        // A hidden name written as a glob (`.g*`, `.[a]gentloop`) may expand to one.
        for (std::string_view piece : Split(c, '/')) {
          if (piece.size() > 1 && piece[0] == '.' &&
              piece.find_first_of("*?[") != std::string_view::npos) {
            return "the command '" + cmd.text + "' names '" + c +
                   "', a pattern that can match agentloop or git configuration: always asked";
          }
        }
        fs::path p(c);
        if (!p.is_absolute() && (c.find('/') == std::string::npos) && !IsProtectedName(c, true)) {
          continue;  // a plain word that is no protected name
        }
        if (auto r = ProtectedPathReason(p, workspace, roots)) {
          return "the command '" + cmd.text + "' touches " + *r;
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace agentloop::permissions
