#include "config/trust.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>
#include <toml++/toml.h>

#include "agentloop/json.h"

#include "base/ids.h"
#include "base/strings.h"
#include "config/config.h"

namespace agentloop {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FailedPrecondition("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// The text of `file`, or nullopt when there is none.
Result<std::optional<std::string>> ReadIfThere(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec)) && !fs::exists(file, ec)) {
    return std::optional<std::string>();
  }
  AL_ASSIGN_OR_RETURN(std::string text, ReadAll(file));
  return std::optional<std::string>(std::move(text));
}

// The trust hash of the workspace's files now, or nullopt when it has none.
Result<std::optional<std::string>> ConfigHash(const fs::path& workspace) {
  AL_ASSIGN_OR_RETURN(std::optional<std::string> config,
                      ReadIfThere(WorkspaceConfigPath(workspace)));
  AL_ASSIGN_OR_RETURN(std::optional<std::string> mcp, ReadIfThere(ProjectMcpJsonPath(workspace)));
  return WorkspaceTrustHash(workspace, config, mcp);
}

Result<fs::path> Canonical(const fs::path& workspace) {
  std::error_code ec;
  fs::path canon = fs::canonical(workspace, ec);
  if (ec) return InvalidArgument("cannot trust " + workspace.string() + ": " + ec.message());
  if (!fs::is_directory(canon, ec)) {
    return InvalidArgument("cannot trust " + workspace.string() + ": not a directory");
  }
  return canon;
}

Status WriteStore(const fs::path& store, const std::vector<TrustRecord>& records) {
  Json list = Json::array();
  for (const TrustRecord& r : records) {
    list.push_back(Json{{"path", r.workspace.string()},
                        {"config_sha256", r.config_sha256 ? Json(*r.config_sha256) : Json(nullptr)},
                        {"trusted_at_ms", r.trusted_at_ms}});
  }
  const std::string text = DumpJson(Json{{"version", 1}, {"workspaces", list}}) + "\n";
  std::error_code ec;
  fs::create_directories(store.parent_path(), ec);
  const fs::path tmp = store.string() + ".tmp-" + NewId("t");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return FailedPrecondition("cannot write " + tmp.string() + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return FailedPrecondition("cannot write " + tmp.string() + ": " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return FailedPrecondition("cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), store.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return FailedPrecondition("cannot replace " + store.string() + ": " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace

fs::path TrustStorePath(const fs::path& data_dir) { return data_dir / "trusted_workspaces.json"; }

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), len));
}

fs::path ProjectMcpJsonPath(const fs::path& workspace) { return workspace / ".mcp.json"; }

std::optional<std::string> WorkspaceTrustHash(const std::optional<std::string>& config_text,
                                              const std::optional<std::string>& mcp_json_text) {
  if (!mcp_json_text) {
    if (!config_text) return std::nullopt;
    return Sha256Hex(*config_text);
  }
  std::string joined = "agentloop-trust-v2";
  joined += '\0';
  joined += config_text ? Sha256Hex(*config_text) : std::string();
  joined += '\0';
  joined += Sha256Hex(*mcp_json_text);
  return Sha256Hex(joined);
}

namespace {

void CollectJsonStrings(const Json& j, std::vector<std::string>& out) {
  if (j.is_string()) {
    out.push_back(j.get<std::string>());
  } else if (j.is_array() || j.is_object()) {
    for (const auto& v : j) CollectJsonStrings(v, out);
  }
}

void CollectTomlStrings(const toml::node& n, std::vector<std::string>& out) {
  if (const auto* s = n.as_string()) {
    out.push_back(s->get());
  } else if (const auto* a = n.as_array()) {
    for (const toml::node& v : *a) CollectTomlStrings(v, out);
  } else if (const auto* t = n.as_table()) {
    for (const auto& [k, v] : *t) CollectTomlStrings(v, out);
  }
}

}  // namespace

std::vector<std::string> NamedWorkspaceFiles(const fs::path& workspace,
                                             const std::optional<std::string>& config_text,
                                             const std::optional<std::string>& mcp_json_text) {
  std::vector<std::string> words;
  if (config_text) {
    try {
      toml::table t = toml::parse(*config_text);
      CollectTomlStrings(t, words);
    } catch (const toml::parse_error&) {
      // A file that does not parse names nothing (loading it fails anyway).
    }
  }
  if (mcp_json_text) {
    Json j = Json::parse(*mcp_json_text, nullptr, false);
    if (!j.is_discarded()) CollectJsonStrings(j, words);
  }
  std::error_code ec;
  const fs::path root = fs::canonical(workspace, ec);
  std::vector<std::string> out;
  if (ec) return out;
  for (const std::string& w : words) {
    if (w.empty() || w.size() > 4096 || w.find('\0') != std::string::npos) continue;
    fs::path p(w);
    if (p.is_relative()) p = root / p;
    fs::path real = fs::canonical(p, ec);
    if (ec || !fs::is_regular_file(real, ec)) continue;
    fs::path rel = real.lexically_relative(root);
    if (rel.empty() || *rel.begin() == "..") continue;
    out.push_back(rel.string());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<std::string> WorkspaceTrustHash(const fs::path& workspace,
                                              const std::optional<std::string>& config_text,
                                              const std::optional<std::string>& mcp_json_text) {
  std::optional<std::string> files = WorkspaceTrustHash(config_text, mcp_json_text);
  if (!files) return files;
  const std::vector<std::string> named = NamedWorkspaceFiles(workspace, config_text, mcp_json_text);
  if (named.empty()) return files;
  std::string joined = "agentloop-trust-v3";
  joined += '\0';
  joined += *files;
  for (const std::string& rel : named) {
    Result<std::string> content = ReadAll(workspace / rel);
    joined += '\0';
    joined += rel;
    joined += '\0';
    joined += Sha256Hex(content.ok() ? *content : std::string());
  }
  return Sha256Hex(joined);
}

Result<std::vector<TrustRecord>> ReadTrustStore(const fs::path& store) {
  std::vector<TrustRecord> out;
  std::error_code ec;
  if (!fs::exists(store, ec)) return out;
  AL_ASSIGN_OR_RETURN(std::string text, ReadAll(store));
  auto bad = [&](const std::string& why) {
    return DataLoss(store.string() + " is not a valid list of trusted workspaces: " + why +
                    " (remove it and trust the workspaces again)");
  };
  Result<Json> parsed = ParseJson(text);
  if (!parsed.ok()) return bad(parsed.error().message());
  const Json& j = *parsed;
  if (!j.is_object() || !j.contains("workspaces") || !j["workspaces"].is_array()) {
    return bad("no \"workspaces\" array");
  }
  for (const Json& e : j["workspaces"]) {
    if (!e.is_object() || !e.contains("path") || !e["path"].is_string()) {
      return bad("an entry without a \"path\" string");
    }
    TrustRecord r;
    r.workspace = e["path"].get<std::string>();
    if (!r.workspace.is_absolute()) return bad("a relative path " + r.workspace.string());
    if (e.contains("config_sha256") && e["config_sha256"].is_string()) {
      r.config_sha256 = e["config_sha256"].get<std::string>();
    } else if (e.contains("config_sha256") && !e["config_sha256"].is_null()) {
      return bad("config_sha256 of " + r.workspace.string() + " is neither a string nor null");
    }
    if (e.contains("trusted_at_ms") && e["trusted_at_ms"].is_number_integer()) {
      r.trusted_at_ms = e["trusted_at_ms"].get<int64_t>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::optional<TrustRecord>> FindTrust(const fs::path& store, const fs::path& workspace) {
  AL_ASSIGN_OR_RETURN(std::vector<TrustRecord> records, ReadTrustStore(store));
  std::error_code ec;
  fs::path canon = fs::canonical(workspace, ec);
  if (ec) return std::optional<TrustRecord>();
  for (TrustRecord& r : records) {
    if (r.workspace == canon) return std::optional<TrustRecord>(std::move(r));
  }
  return std::optional<TrustRecord>();
}

Result<TrustRecord> TrustWorkspace(const fs::path& store, const fs::path& workspace,
                                   int64_t now_ms) {
  AL_ASSIGN_OR_RETURN(fs::path canon, Canonical(workspace));
  AL_ASSIGN_OR_RETURN(std::vector<TrustRecord> records, ReadTrustStore(store));
  TrustRecord rec;
  rec.workspace = canon;
  AL_ASSIGN_OR_RETURN(rec.config_sha256, ConfigHash(canon));
  rec.trusted_at_ms = now_ms;
  records.erase(std::remove_if(records.begin(), records.end(),
                               [&](const TrustRecord& r) { return r.workspace == canon; }),
                records.end());
  records.push_back(rec);
  AL_RETURN_IF_ERROR(WriteStore(store, records));
  return rec;
}

Result<bool> RevokeTrust(const fs::path& store, const fs::path& workspace) {
  AL_ASSIGN_OR_RETURN(std::vector<TrustRecord> records, ReadTrustStore(store));
  std::error_code ec;
  fs::path canon = fs::canonical(workspace, ec);
  if (ec) canon = fs::absolute(workspace).lexically_normal();
  size_t before = records.size();
  records.erase(std::remove_if(records.begin(), records.end(),
                               [&](const TrustRecord& r) { return r.workspace == canon; }),
                records.end());
  if (records.size() == before) return false;
  AL_RETURN_IF_ERROR(WriteStore(store, records));
  return true;
}

}  // namespace agentloop
