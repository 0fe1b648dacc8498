#include "tools/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <sys/stat.h>

namespace agentloop::tools {
namespace {

constexpr int kMaxSymlinks = 40;

void PushComponents(std::string_view path, std::vector<std::string>& stack) {
  // Pushed in reverse so that the first component is on top.
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) stack.push_back(std::move(*it));
}

void PopComponent(std::string& cur) {
  size_t slash = cur.rfind('/');
  cur.resize(slash == 0 ? 1 : slash);
}

std::string Join(const std::string& dir, std::string_view name) {
  std::string out = dir;
  if (out.back() != '/') out += '/';
  out += name;
  return out;
}

// Lexical normalisation of an absolute path ("." and ".." folded).
std::string Lexical(std::string_view abs) {
  std::vector<std::string> stack;
  PushComponents(abs, stack);
  std::string cur = "/";
  while (!stack.empty()) {
    std::string c = std::move(stack.back());
    stack.pop_back();
    if (c == ".") continue;
    if (c == "..") {
      PopComponent(cur);
      continue;
    }
    cur = Join(cur, c);
  }
  return cur;
}

}  // namespace

bool IsWithin(std::string_view path, std::string_view root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path.size() >= root.size() && path.compare(0, root.size(), root) == 0 &&
         (path.size() == root.size() || path[root.size()] == '/');
}

std::string DisplayPath(const ToolContext& ctx, std::string_view abs) {
  std::string ws = ctx.workspace.string();
  if (IsWithin(abs, ws)) {
    if (abs.size() == ws.size()) return ".";
    return std::string(abs.substr(ws.size() == 1 ? 1 : ws.size() + 1));
  }
  return std::string(abs);
}

Result<ResolvedPath> ResolvePath(const ToolContext& ctx, std::string_view input, Access access) {
  if (input.empty()) return InvalidArgument("the path is empty");
  if (input.find('\0') != std::string_view::npos) {
    return InvalidArgument("the path contains a NUL byte");
  }
  const std::string ws = ctx.workspace.string();
  std::string joined = input[0] == '/' ? std::string(input) : Join(ws, input);

  auto allowed = [&](const std::string& p) {
    if (IsWithin(p, ws)) return true;
    if (access == Access::kRead) {
      for (const auto& root : ctx.extra_read_roots) {
        if (IsWithin(p, root.string())) return true;
      }
    }
    return false;
  };
  auto outside = [&](const std::string& where) {
    std::string roots = "the workspace (" + ws + ")";
    if (access == Access::kRead && !ctx.extra_read_roots.empty()) {
      roots += " or the extra read directories";
    }
    return where + " is outside " + roots + "; only paths inside it are allowed";
  };

  // Lexical check first, so `..` and foreign absolute paths get a plain reason.
  std::string lexical = Lexical(joined);
  if (!allowed(lexical)) {
    if (input[0] == '/') {
      return PermissionDenied("access denied: " + outside(std::string(input)));
    }
    return PermissionDenied("access denied: '" + std::string(input) +
                            "' escapes the workspace through '..'; " + outside(lexical));
  }

  // Resolve for real, component by component.
  std::vector<std::string> stack;
  PushComponents(joined, stack);
  std::string cur = "/";
  int links = 0;
  bool missing = false;
  std::string via_link;  // last symlink followed, for error messages
  while (!stack.empty()) {
    std::string c = std::move(stack.back());
    stack.pop_back();
    if (c == ".") continue;
    if (c == "..") {
      PopComponent(cur);
      continue;
    }
    std::string next = Join(cur, c);
    if (missing) {
      cur = std::move(next);
      continue;
    }
    struct stat st;
    if (lstat(next.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        missing = true;
        cur = std::move(next);
        continue;
      }
      if (errno == ENOTDIR) {
        std::string msg = "'";
        msg += input;
        msg += "': ";
        msg += DisplayPath(ctx, cur);
        msg += " is not a directory";
        return InvalidArgument(std::move(msg));
      }
      return PermissionDenied("cannot access '" + std::string(input) +
                              "': " + std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxSymlinks) {
        return InvalidArgument("cannot resolve '" + std::string(input) +
                               "': too many levels of symbolic links (a symlink loop at " +
                               DisplayPath(ctx, next) + ")");
      }
      char buf[PATH_MAX];
      ssize_t n = readlink(next.c_str(), buf, sizeof buf - 1);
      if (n < 0) {
        return PermissionDenied("cannot read symlink " + DisplayPath(ctx, next) + ": " +
                                std::strerror(errno));
      }
      std::string_view target(buf, static_cast<size_t>(n));
      via_link = DisplayPath(ctx, next);
      if (!target.empty() && target[0] == '/') cur = "/";
      PushComponents(target, stack);
      continue;
    }
    if (!stack.empty() && !S_ISDIR(st.st_mode)) {
      // More components follow a non-directory.
      bool only_dots = true;
      for (const auto& rest : stack) only_dots = only_dots && rest == ".";
      if (!only_dots) {
        return InvalidArgument("'" + std::string(input) + "': " + DisplayPath(ctx, next) +
                               " is not a directory");
      }
    }
    cur = std::move(next);
  }

  if (!allowed(cur)) {
    return PermissionDenied("access denied: '" + std::string(input) +
                            "' leads through the symbolic link " + via_link + " to " + cur +
                            ", which " + outside("").substr(1));
  }
  ResolvedPath out;
  out.abs = cur;
  out.display = DisplayPath(ctx, cur);
  out.in_workspace = IsWithin(cur, ws);
  out.exists = !missing;
  if (!missing) {
    struct stat st;
    out.is_dir = stat(cur.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  return out;
}

PathRule PathRuleFor(const ToolContext& ctx, std::string_view tool, const std::string& abs) {
  if (!ctx.path_rule) return PathRule::kNone;
  return ctx.path_rule(tool, abs);
}

std::string DeniedByRule(std::string_view tool, std::string_view display) {
  return "access denied: a permission rule denies " + std::string(tool) + " of " +
         std::string(display) + " (the path it really leads to)";
}

Result<OpenedParent> OpenParent(const ToolContext& ctx, const ResolvedPath& rp, Access access,
                                bool create) {
  std::string root = ctx.workspace.string();
  if (!IsWithin(rp.abs, root)) {
    root.clear();
    if (access == Access::kRead) {
      for (const auto& r : ctx.extra_read_roots) {
        if (IsWithin(rp.abs, r.string())) {
          root = r.string();
          break;
        }
      }
    }
    if (root.empty())
      return PermissionDenied("access denied: " + rp.abs + " is outside the workspace");
  }
  if (rp.abs == root) return InvalidArgument(rp.display + " is a directory, not a file");
  std::string rel = rp.abs.substr(root == "/" ? 1 : root.size() + 1);
  size_t slash = rel.rfind('/');
  std::string dir_rel = slash == std::string::npos ? "" : rel.substr(0, slash);
  OpenedParent out;
  out.name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  int root_fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return PermissionDenied("cannot open " + root + ": " + std::strerror(errno));
  }
  UniqueFd root_owned(root_fd);
  auto dir = OpenDirBeneath(root_fd, dir_rel, create);
  if (!dir.ok()) {
    if (dir.error().code() == Code::kPermissionDenied) {
      return PermissionDenied("access denied: " + rp.display +
                              " changed while it was being opened (" + dir.error().message() +
                              "); nothing was done");
    }
    return Status(dir.error().code(),
                  "cannot open the directory of " + rp.display + ": " + dir.error().message());
  }
  out.dir = std::move(*dir);
  return out;
}

}  // namespace agentloop::tools
