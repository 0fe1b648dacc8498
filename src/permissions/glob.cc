#include "permissions/glob.h"

namespace agentloop::permissions {

Result<Glob> Glob::Compile(std::string_view pattern, GlobMode mode) {
  Glob g;
  g.pattern_ = std::string(pattern);
  std::vector<std::string> forms = {std::string(pattern)};
  if (mode == GlobMode::kText && pattern.size() >= 2 && pattern.ends_with(":*") &&
      !(pattern.size() >= 3 && pattern[pattern.size() - 3] == '\\')) {
    // `prefix:*` = `prefix` or `prefix <anything>`.
    std::string prefix(pattern.substr(0, pattern.size() - 2));
    forms = {prefix + " *", prefix};
  }
  if (mode == GlobMode::kPath) {
    g.absolute_ = !pattern.empty() && pattern[0] == '/';
    g.basename_only_ = pattern.find('/') == std::string_view::npos;
  }
  for (const std::string& form : forms) {
    auto compiled = GlobPattern::Compile(form, mode);
    if (!compiled.ok()) return compiled.error();
    if (!g.basename_only_ && compiled->has_partial_double_star()) {
      return InvalidArgument(
          "'**' matches across directories only as a whole path segment ('src/**/*.cc'); "
          "elsewhere it would match like '*' (write '*' or '/**/')");
    }
    if (compiled->matches_everything()) g.matches_everything_ = true;
    if (!compiled->literal()) g.literal_ = false;
    g.forms_.push_back(std::move(*compiled));
  }
  if (g.forms_.size() > 1) g.literal_ = false;
  return g;
}

bool Glob::Matches(std::string_view text) const {
  if (basename_only_) {
    size_t slash = text.rfind('/');
    if (slash != std::string_view::npos) text = text.substr(slash + 1);
  }
  for (const GlobPattern& form : forms_) {
    if (form.Match(text)) return true;
  }
  return false;
}

}  // namespace agentloop::permissions
