// `agentloop trust`: the person's decision to read a workspace's
// `.agentloop/config.toml` in full (config/trust.h).
#include "config/trust.h"

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/strings.h"
#include "commands.h"
#include "config/config.h"

namespace agentloop::cli {
namespace {

namespace fs = std::filesystem;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Json RecordJson(const TrustRecord& r) {
  return Json{{"workspace", r.workspace.string()},
              {"config_sha256", r.config_sha256 ? Json(*r.config_sha256) : Json(nullptr)},
              {"trusted_at_ms", r.trusted_at_ms}};
}

int TrustError(const CommandEnv& e, bool json, const Status& s) {
  if (json) e.out << DumpJson(Json{{"error", s.message()}}) << "\n";
  e.err << "agentloop: " << s.message() << "\n";
  return s.code() == Code::kInvalidArgument ? kExitUsage : kExitFailed;
}

// The workspace's MCP servers none of whose words (program, arguments)
// names a file of the workspace: they run a program from elsewhere
// (`npx -y pkg`, an absolute path), whose content trust does not pin.
// "NAME: command args" each.
std::vector<std::string> ProgramsNotCovered(const fs::path& dir, const ConfigSources& trusted) {
  std::vector<std::string> out;
  Result<LoadedConfig> after = LoadConfig(trusted);
  if (!after.ok()) return out;
  const std::string config_file = WorkspaceConfigPath(dir).string();
  const std::string mcp_file = ProjectMcpJsonPath(dir).string();
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return out;
  auto in_workspace = [&](const std::string& word) {
    fs::path p(word);
    if (p.is_relative()) p = root / p;
    std::error_code e2;
    const fs::path real = fs::canonical(p, e2);
    if (e2 || !fs::is_regular_file(real, e2)) return false;
    const fs::path rel = real.lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
  };
  for (const McpServerSpec& m : after->config.mcp_servers) {
    const bool of_workspace = m.source.starts_with(config_file) || m.source.starts_with(mcp_file);
    if (!of_workspace || m.command.empty()) continue;
    bool covered = in_workspace(m.command);
    for (const std::string& a : m.args) covered = covered || in_workspace(a);
    if (covered) continue;
    std::string line = m.name + ": " + m.command;
    for (const std::string& a : m.args) line += " " + a;
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace

int CmdTrust(const CommandEnv& e) {
  const auto& p = e.args.positionals;
  bool json = false;
  if (auto o = e.args.FlagValue("output")) json = *o != "text";
  Result<fs::path> data_dir = DefaultDataDir(e.ctx.env);
  if (!data_dir.ok()) return TrustError(e, json, data_dir.error());
  const fs::path store = TrustStorePath(*data_dir);

  if (!p.empty() && p[0] == "list") {
    Result<std::vector<TrustRecord>> records = ReadTrustStore(store);
    if (!records.ok()) return TrustError(e, json, records.error());
    if (json) {
      Json arr = Json::array();
      for (const TrustRecord& r : *records) arr.push_back(RecordJson(r));
      e.out << DumpJson(Json{{"trusted", arr}}) << "\n";
      return kExitOk;
    }
    if (records->empty()) e.err << "no trusted workspaces\n";
    for (const TrustRecord& r : *records) {
      e.out << r.workspace.string() << "  "
            << (r.config_sha256 ? "config sha256 " + r.config_sha256->substr(0, 12)
                                : std::string("no config file"))
            << "  since " << FormatTime(r.trusted_at_ms) << "\n";
    }
    return kExitOk;
  }

  const bool revoke = !p.empty() && p[0] == "revoke";
  const size_t dir_at = revoke ? 1 : 0;
  fs::path dir = p.size() > dir_at ? fs::path(p[dir_at])
                                   : (e.args.workspace ? fs::path(*e.args.workspace) : e.ctx.cwd);
  if (dir.is_relative()) dir = e.ctx.cwd / dir;

  if (revoke) {
    Result<bool> removed = RevokeTrust(store, dir);
    if (!removed.ok()) return TrustError(e, json, removed.error());
    if (json) {
      e.out << DumpJson(Json{{"workspace", dir.string()}, {"revoked", *removed}}) << "\n";
    } else {
      e.err << (*removed ? "no longer trusted: " : "was not trusted: ") << dir.string() << "\n";
    }
    return kExitOk;
  }

  // Show what the file sets that an untrusted read ignores, so the person
  // knows what they are agreeing to.
  ConfigSources sources;
  sources.env = e.ctx.env;
  sources.workspace = dir;
  Result<LoadedConfig> before = LoadConfig(sources);
  Result<TrustRecord> rec = TrustWorkspace(store, dir, NowMs());
  if (!rec.ok()) return TrustError(e, json, rec.error());
  // The files of the workspace its configuration names (the programs its
  // MCP servers run): part of what is trusted.
  auto text_of = [](const std::filesystem::path& file) -> std::optional<std::string> {
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream buf;
    buf << in.rdbuf();
    return buf.str();
  };
  const std::vector<std::string> covered =
      NamedWorkspaceFiles(dir, text_of(WorkspaceConfigPath(dir)), text_of(ProjectMcpJsonPath(dir)));
  ConfigSources trusted = sources;
  trusted.trust_store = store;
  const std::vector<std::string> not_covered = ProgramsNotCovered(dir, trusted);
  if (json) {
    Json j = RecordJson(*rec);
    j["covered_files"] = covered;
    j["programs_not_covered"] = not_covered;
    Json keys = Json::array();
    if (before.ok()) {
      for (const IgnoredSetting& i : before->ignored) keys.push_back(i.key);
    }
    j["now_read"] = keys;
    e.out << DumpJson(j) << "\n";
    return kExitOk;
  }
  e.err << "trusted: " << rec->workspace.string() << "\n";
  if (!rec->config_sha256) {
    e.err << "it has no .agentloop/config.toml; one added later is read as untrusted until "
             "you trust it again\n";
    return kExitOk;
  }
  e.err << "its config file (sha256 " << rec->config_sha256->substr(0, 12)
        << ") is now read in full; any change to it makes it untrusted again\n";
  if (!covered.empty()) {
    e.err << "the trust also covers these files it names (a change to one makes it untrusted "
             "again); what they load in turn is not covered:\n";
    for (const std::string& f : covered) e.err << "  " << f << "\n";
  }
  if (!not_covered.empty()) {
    e.err << "not covered: these MCP servers run a program from outside the workspace, whose "
             "content can change without ending the trust:\n";
    for (const std::string& f : not_covered) e.err << "  " << f << "\n";
  }
  if (before.ok() && !before->ignored.empty()) {
    e.err << "now applied:\n";
    for (const IgnoredSetting& i : before->ignored) {
      e.err << "  " << i.key << " = " << RedactSecrets(DumpJson(i.value)) << "\n";
    }
  }
  return kExitOk;
}

}  // namespace agentloop::cli
