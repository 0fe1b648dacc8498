// `agentloop store migrate`: applies the pending schema migrations of the
// PostgreSQL store named by store.url (AGENTLOOP_STORE_URL), explicitly,
// before instances of a new version are started (docs/storage.md,
// "PostgreSQL"). The SQLite store migrates itself when it is opened.
#include "agentloop/store.h"

#include "commands.h"
#include "config/config.h"

namespace agentloop::cli {

int CmdStore(const CommandEnv& e) {
  Result<CliSettings> s = LoadSettings(e.args, e.ctx);
  if (!s.ok()) {
    e.err << "agentloop: " << s.error().message() << "\n";
    return kExitUsage;
  }
  const std::string& url = s->loaded.config.store.url.value;
  if (url.empty()) {
    e.err << "agentloop: store.url is not set (config key store.url or AGENTLOOP_STORE_URL); "
             "the SQLite store in the data directory migrates itself when opened\n";
    return kExitUsage;
  }
  if (!IsPostgresUrl(url)) {
    e.err << "agentloop: store.url must be a postgresql:// (or postgres://) URL\n";
    return kExitUsage;
  }
  Result<PostgresMigration> m = MigratePostgresStore(url);
  if (!m.ok()) {
    e.err << "agentloop: " << m.error().message() << "\n";
    return kExitFailed;
  }
  if (m->from_version == m->to_version) {
    e.out << "store: schema version " << m->to_version << ", up to date\n";
  } else {
    e.out << "store: schema version " << m->from_version << " -> " << m->to_version << "\n";
  }
  return kExitOk;
}

}  // namespace agentloop::cli
