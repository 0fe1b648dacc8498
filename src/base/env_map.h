// Directories the environment names for the user (XDG base directories).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "agentloop/env.h"

namespace agentloop {

// A per-user base directory: $`xdg_var` when it is absolute (the XDG spec
// says a relative value is invalid and must be ignored), else
// $HOME/`home_relative`; nullopt when neither is set. E.g.
// ("XDG_CONFIG_HOME", ".config") or ("XDG_DATA_HOME", ".local/share").
std::optional<std::filesystem::path> XdgUserDir(const EnvMap& env, const std::string& xdg_var,
                                                std::string_view home_relative);

}  // namespace agentloop
