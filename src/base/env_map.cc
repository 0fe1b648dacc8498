#include "base/env_map.h"

namespace agentloop {

std::string EnvValue(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

std::optional<std::filesystem::path> XdgUserDir(const EnvMap& env, const std::string& xdg_var,
                                                std::string_view home_relative) {
  if (std::string x = EnvValue(env, xdg_var); !x.empty() && x.front() == '/') {
    return std::filesystem::path(x);
  }
  if (std::string h = EnvValue(env, "HOME"); !h.empty()) {
    return std::filesystem::path(h) / std::filesystem::path(home_relative);
  }
  return std::nullopt;
}

}  // namespace agentloop
