#include "learning/proposals.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <system_error>

#include "agentloop/events.h"

#include "base/ids.h"
#include "base/strings.h"
#include "env/files.h"
#include "learning/text.h"

namespace agentloop::learning {
namespace fs = std::filesystem;
namespace {}  // namespace

Json ProposalRecord::ToJson() const {
  return Json{{"id", id},           {"kind", kind},
              {"title", title},     {"content", content},
              {"session", session}, {"created_ms", created_ms},
              {"status", status},   {"decided_ms", decided_ms},
              {"written", written}};
}

Result<ProposalRecord> ProposalRecord::FromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("proposal: not an object");
  ProposalRecord r;
  auto str = [&](const char* key, std::string& out) -> bool {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return false;
    out = it->get<std::string>();
    return true;
  };
  if (!str("id", r.id) || !str("kind", r.kind) || !str("title", r.title) ||
      !str("content", r.content) || !str("status", r.status)) {
    return InvalidArgument("proposal: missing id, kind, title, content or status");
  }
  (void)str("session", r.session);
  (void)str("written", r.written);
  r.created_ms = j.value("created_ms", int64_t{0});
  r.decided_ms = j.value("decided_ms", int64_t{0});
  return r;
}

ProposalStore::ProposalStore(fs::path dir, std::function<int64_t()> now_ms)
    : dir_(std::move(dir)), now_ms_(std::move(now_ms)) {
  if (!now_ms_) now_ms_ = SystemNowMs;
}

Status ProposalStore::Write(const ProposalRecord& record) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Internal("cannot create " + dir_.string() + ": " + ec.message());
  return WriteFileAtomic(dir_ / (record.id + ".json"), record.ToJson().dump(2) + "\n");
}

Result<ProposalRecord> ProposalStore::Add(const Proposal& proposal, const std::string& session_id) {
  if (proposal.kind != "memory" && proposal.kind != "skill") {
    return InvalidArgument("proposal kind must be memory or skill");
  }
  ProposalRecord r;
  r.id = NewId("prop");
  r.kind = proposal.kind;
  r.title = proposal.title;
  r.content = proposal.nudge;
  r.session = session_id;
  r.created_ms = now_ms_();
  AL_RETURN_IF_ERROR(Write(r));
  return r;
}

std::vector<ProposalRecord> ProposalStore::List(std::optional<std::string> status) const {
  std::vector<ProposalRecord> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.path().extension() != ".json") continue;
    Result<std::string> text = ReadFileToString(entry.path(), 1 << 20);
    if (!text.ok()) continue;
    Result<Json> j = ParseJson(*text);
    if (!j.ok()) continue;
    Result<ProposalRecord> r = ProposalRecord::FromJson(*j);
    if (!r.ok()) continue;
    if (status && r->status != *status) continue;
    out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const ProposalRecord& a, const ProposalRecord& b) {
    return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.id < b.id;
  });
  return out;
}

Result<ProposalRecord> ProposalStore::Get(const std::string& id_or_prefix) const {
  std::string want = id_or_prefix;
  if (!StartsWith(want, "prop_")) want = "prop_" + want;
  if (want.size() < 9) return InvalidArgument("proposal id prefix too short (4+ characters)");
  std::vector<ProposalRecord> matches;
  for (auto& r : List()) {
    if (r.id == want) return r;
    if (StartsWith(r.id, want)) matches.push_back(std::move(r));
  }
  if (matches.empty()) return NotFound("no proposal " + id_or_prefix);
  if (matches.size() > 1) return InvalidArgument("proposal id " + id_or_prefix + " is ambiguous");
  return matches.front();
}

Result<ProposalRecord> ProposalStore::Accept(const std::string& id_or_prefix, MemoryStore& memories,
                                             SkillStore& skills, Scope scope) {
  AL_ASSIGN_OR_RETURN(ProposalRecord r, Get(id_or_prefix));
  if (r.status != "pending") {
    return FailedPrecondition("proposal " + r.id + " is already " + r.status);
  }
  std::string base = Slugify(r.title);
  std::string written;
  for (int n = 1; n <= 100 && written.empty(); ++n) {
    std::string name = n == 1 ? base : base + "-" + std::to_string(n);
    if (r.kind == "memory") {
      std::error_code ec;
      if (fs::exists(memories.dir(scope) / (name + ".md"), ec)) continue;
      Memory m;
      m.name = name;
      m.type = "fact";
      m.description = SanitizeInline(r.title, kMaxMemoryDescription - 1);
      m.body = r.content;
      m.scope = scope;
      AL_ASSIGN_OR_RETURN(bool replaced, memories.Save(m));
      (void)replaced;
      written = (memories.dir(scope) / (name + ".md")).string();
    } else {
      Skill s;
      s.name = name;
      s.description = SanitizeInline(r.title, kMaxSkillDescription - 1);
      s.body = r.content;
      s.scope = scope;
      Result<fs::path> path = skills.Write(s, /*overwrite=*/false);
      if (!path.ok() && path.error().code() == Code::kAlreadyExists) continue;
      if (!path.ok()) return path.error();
      written = path->string();
    }
  }
  if (written.empty()) return FailedPrecondition("no free name for \"" + base + "\"");
  r.status = "accepted";
  r.decided_ms = now_ms_();
  r.written = written;
  AL_RETURN_IF_ERROR(Write(r));
  return r;
}

Result<ProposalRecord> ProposalStore::Reject(const std::string& id_or_prefix) {
  AL_ASSIGN_OR_RETURN(ProposalRecord r, Get(id_or_prefix));
  if (r.status != "pending") {
    return FailedPrecondition("proposal " + r.id + " is already " + r.status);
  }
  r.status = "rejected";
  r.decided_ms = now_ms_();
  AL_RETURN_IF_ERROR(Write(r));
  return r;
}

std::string FormatTimeMs(int64_t ms) {
  if (ms <= 0) return "never";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string FormatProposals(const std::vector<ProposalRecord>& records) {
  if (records.empty()) return "No proposals.\n";
  std::string out = PadCodePoints("ID", 23) + PadCodePoints("KIND", 8) +
                    PadCodePoints("STATUS", 10) + PadCodePoints("CREATED", 18) + "TITLE\n";
  for (const auto& r : records) {
    out += PadCodePoints(r.id, 23) + PadCodePoints(r.kind, 8) + PadCodePoints(r.status, 10) +
           PadCodePoints(FormatTimeMs(r.created_ms), 18) + SanitizeInline(r.title, 80) + "\n";
  }
  return out;
}

}  // namespace agentloop::learning
