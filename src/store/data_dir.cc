#include <system_error>

#include <sys/stat.h>

#include "agentloop/store.h"

#include "base/env_map.h"

namespace agentloop {
namespace {}  // namespace

Result<std::filesystem::path> DefaultDataDir(const EnvMap& env) {
  if (std::string home = EnvValue(env, "AGENTLOOP_HOME"); !home.empty()) {
    return std::filesystem::path(home);
  }
  if (auto dir = XdgUserDir(env, "XDG_DATA_HOME", ".local/share")) return *dir / "agentloop";
  return FailedPrecondition(
      "cannot locate the agentloop data directory: set AGENTLOOP_HOME (or HOME)");
}

Result<std::unique_ptr<SessionStore>> OpenDefaultStore(const EnvMap& env,
                                                       SqliteStoreOptions options) {
  AL_ASSIGN_OR_RETURN(std::filesystem::path dir, DefaultDataDir(env));
  std::error_code ec;
  bool created = std::filesystem::create_directories(dir, ec);
  if (ec) {
    return FailedPrecondition("cannot create the data directory " + dir.string() + ": " +
                              ec.message());
  }
  // Sessions hold prompts, file contents and tool output: owner-only.
  if (created) ::chmod(dir.c_str(), 0700);
  return OpenSqliteStore(dir / kSessionsDbName, std::move(options));
}

}  // namespace agentloop
