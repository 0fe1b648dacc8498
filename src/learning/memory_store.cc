#include "learning/memory_store.h"

#include <algorithm>
#include <cctype>
#include <system_error>

#include "base/strings.h"
#include "env/files.h"
#include "learning/frontmatter.h"
#include "learning/text.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxMemoryFileBytes = 64 * 1024;

bool IsType(std::string_view t) {
  return t == "fact" || t == "preference" || t == "project" || t == "reference";
}

std::string Lower(std::string_view s) { return ToLower(s); }

std::vector<std::string> Words(std::string_view query) {
  std::vector<std::string> words;
  std::string cur;
  for (char ch : query) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80 || c == '_') {
      cur.push_back(static_cast<char>(std::tolower(c)));
    } else if (!cur.empty()) {
      words.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(cur);
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

}  // namespace

Status ValidateMemory(const Memory& m) {
  if (!IsSlug(m.name, kMaxMemoryName)) {
    return InvalidArgument(
        "name: must be a slug of at most 64 characters (lower-case letters, digits and '-', "
        "starting with a letter or digit), got \"" +
        SanitizeInline(m.name, 80) + "\"");
  }
  if (!IsType(m.type)) {
    return InvalidArgument("type: must be one of fact, preference, project, reference, got \"" +
                           SanitizeInline(m.type, 40) + "\"");
  }
  size_t dlen = CodePointCount(m.description);
  if (Trim(m.description).empty()) return InvalidArgument("description: must not be empty");
  if (dlen > kMaxMemoryDescription) {
    return InvalidArgument("description: at most 280 characters, got " + std::to_string(dlen));
  }
  if (m.description.find_first_of("\r\n") != std::string::npos) {
    return InvalidArgument("description: must be a single line");
  }
  size_t blen = CodePointCount(m.body);
  if (Trim(m.body).empty()) return InvalidArgument("body: must not be empty");
  if (blen > kMaxMemoryBody) {
    return InvalidArgument("body: at most 4000 characters, got " + std::to_string(blen));
  }
  if (m.tags.size() > kMaxMemoryTags) {
    return InvalidArgument("tags: at most 10, got " + std::to_string(m.tags.size()));
  }
  for (const auto& t : m.tags) {
    if (!IsSlug(t, kMaxMemoryTag)) {
      return InvalidArgument("tags: \"" + SanitizeInline(t, 40) +
                             "\" must be a slug of at most 32 characters");
    }
  }
  if (!IsValidUtf8(m.description) || !IsValidUtf8(m.body)) {
    return InvalidArgument("description and body must be valid UTF-8");
  }
  return Status::Ok();
}

std::string RenderMemoryFile(const Memory& m) {
  std::string tags;
  for (size_t i = 0; i < m.tags.size(); ++i) {
    if (i > 0) tags += ", ";
    tags += m.tags[i];
  }
  std::string body(Trim(m.body));
  return "---\nname: " + m.name + "\ntype: " + m.type +
         "\ndescription: " + QuoteScalar(m.description) + "\ntags: [" + tags + "]\n---\n" + body +
         "\n";
}

Result<Memory> ParseMemoryFile(std::string_view text, Scope scope) {
  AL_ASSIGN_OR_RETURN(FrontMatter fm, ParseFrontMatter(text));
  Memory m;
  m.name = fm.Get("name");
  m.type = fm.Get("type");
  m.description = fm.Get("description");
  m.body = std::string(Trim(fm.body));
  if (auto it = fm.lists.find("tags"); it != fm.lists.end()) m.tags = it->second;
  m.scope = scope;
  AL_RETURN_IF_ERROR(ValidateMemory(m));
  return m;
}

MemoryStore::MemoryStore(fs::path user_dir, fs::path workspace_dir)
    : user_dir_(std::move(user_dir)), workspace_dir_(std::move(workspace_dir)) {}

Result<bool> MemoryStore::Save(const Memory& memory) {
  AL_RETURN_IF_ERROR(ValidateMemory(memory));
  const fs::path& d = dir(memory.scope);
  if (d.empty()) {
    return FailedPrecondition(std::string("the ") + std::string(ScopeName(memory.scope)) +
                              " memory scope is not available");
  }
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec) return Internal("cannot create " + d.string() + ": " + ec.message());
  fs::path path = d / (memory.name + ".md");
  bool existed = fs::exists(path, ec);
  AL_RETURN_IF_ERROR(WriteFileAtomic(path, RenderMemoryFile(memory)));
  return existed;
}

Result<Memory> MemoryStore::Get(const std::string& name, std::optional<Scope> scope) const {
  if (!IsSlug(name, kMaxMemoryName)) return InvalidArgument("name: not a valid memory name");
  std::vector<Scope> order =
      scope ? std::vector<Scope>{*scope} : std::vector<Scope>{Scope::kWorkspace, Scope::kUser};
  for (Scope s : order) {
    const fs::path& d = dir(s);
    if (d.empty()) continue;
    fs::path path = d / (name + ".md");
    Result<std::string> text = ReadFileToString(path, kMaxMemoryFileBytes);
    if (!text.ok()) {
      if (text.error().code() == Code::kNotFound) continue;
      return text.error();
    }
    Result<Memory> m = ParseMemoryFile(*text, s);
    if (!m.ok()) return m.error().WithContext(path.string());
    m->path = path;
    return m;
  }
  return NotFound("no memory named \"" + name + "\"");
}

Status MemoryStore::Delete(const std::string& name, Scope scope) {
  if (!IsSlug(name, kMaxMemoryName)) return InvalidArgument("name: not a valid memory name");
  const fs::path& d = dir(scope);
  if (d.empty()) return NotFound("no " + std::string(ScopeName(scope)) + " memory scope");
  std::error_code ec;
  fs::path path = d / (name + ".md");
  if (!fs::remove(path, ec)) {
    if (ec) return Internal("cannot remove " + path.string() + ": " + ec.message());
    return NotFound("no " + std::string(ScopeName(scope)) + " memory named \"" + name + "\"");
  }
  (void)ForgetUsageIn(d, name);
  return Status::Ok();
}

std::vector<Memory> MemoryStore::List(std::vector<std::string>* warnings) const {
  std::vector<Memory> out;
  for (Scope s : {Scope::kWorkspace, Scope::kUser}) {
    const fs::path& d = dir(s);
    std::error_code ec;
    if (d.empty() || !fs::is_directory(d, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      if (entry.path().extension() == ".md" && entry.is_regular_file(ec)) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      Result<std::string> text = ReadFileToString(f, kMaxMemoryFileBytes);
      Result<Memory> m = text.ok() ? ParseMemoryFile(*text, s) : Result<Memory>(text.error());
      if (!m.ok()) {
        if (warnings) warnings->push_back(f.string() + ": " + m.error().message());
        continue;
      }
      if (m->name + ".md" != f.filename().string()) {
        if (warnings) warnings->push_back(f.string() + ": name does not match the file name");
        continue;
      }
      m->path = f;
      out.push_back(std::move(*m));
    }
  }
  return out;
}

std::vector<MemoryHit> MemoryStore::Search(const std::string& query, size_t limit) const {
  std::vector<std::string> words = Words(query);
  std::string phrase = Lower(Trim(query));
  std::vector<MemoryHit> hits;
  if (words.empty()) return hits;
  for (Memory& m : List()) {
    std::string desc = Lower(m.description);
    std::string body = Lower(m.body);
    double score = 0;
    for (const auto& w : words) {
      if (m.name.find(w) != std::string::npos) score += 8;
      if (std::find(m.tags.begin(), m.tags.end(), w) != m.tags.end()) score += 6;
      if (desc.find(w) != std::string::npos) score += 3;
      if (body.find(w) != std::string::npos) score += 1;
    }
    if (score > 0 && !phrase.empty() &&
        (desc.find(phrase) != std::string::npos || body.find(phrase) != std::string::npos)) {
      score += 2;
    }
    if (score > 0) hits.push_back({std::move(m), score});
  }
  // List() is already workspace first, then by name: a stable sort keeps that for ties.
  std::stable_sort(hits.begin(), hits.end(),
                   [](const MemoryHit& a, const MemoryHit& b) { return a.score > b.score; });
  if (hits.size() > limit) hits.resize(limit);
  return hits;
}

std::string MemoryStore::Index(size_t budget_chars) const {
  std::vector<Memory> all = List();
  if (all.empty()) return "";
  UsageMap usage[2] = {LoadUsage(workspace_dir_), LoadUsage(user_dir_)};
  auto uses = [&](const Memory& m) {
    const UsageMap& u = usage[m.scope == Scope::kWorkspace ? 0 : 1];
    auto it = u.find(m.name);
    return it == u.end() ? int64_t{0} : it->second.uses;
  };
  std::stable_sort(all.begin(), all.end(),
                   [&](const Memory& a, const Memory& b) { return uses(a) > uses(b); });
  std::string out = "Memories (saved notes; load one with memory_search {\"name\": \"<name>\"}):\n";
  size_t shown = 0;
  for (const Memory& m : all) {
    std::string line = "- " + m.name + " [" + m.type + ", " + std::string(ScopeName(m.scope)) +
                       "]: " + SanitizeInline(m.description, kMaxMemoryDescription) + "\n";
    if (out.size() + line.size() > budget_chars) break;
    out += line;
    ++shown;
  }
  if (shown == 0) return "";
  if (shown < all.size()) {
    std::string more =
        "- … " + std::to_string(all.size() - shown) + " more (memory_search finds them)\n";
    if (out.size() + more.size() <= budget_chars) out += more;
  }
  return out;
}

}  // namespace agentloop::learning
