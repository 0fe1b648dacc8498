#include <system_error>

#include <sys/stat.h>

#include "agentloop/store.h"

namespace agentloop {
namespace {

std::string Get(const EnvMap& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() ? std::string() : it->second;
}

}  // namespace

Result<std::filesystem::path> DefaultDataDir(const EnvMap& env) {
  if (std::string home = Get(env, "AGENTLOOP_HOME"); !home.empty()) {
    return std::filesystem::path(home);
  }
  // XDG: a relative XDG_DATA_HOME is invalid and must be ignored.
  if (std::string xdg = Get(env, "XDG_DATA_HOME"); !xdg.empty() && xdg.front() == '/') {
    return std::filesystem::path(xdg) / "agentloop";
  }
  if (std::string home = Get(env, "HOME"); !home.empty()) {
    return std::filesystem::path(home) / ".local" / "share" / "agentloop";
  }
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
