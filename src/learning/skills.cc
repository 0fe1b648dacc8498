#include "learning/skills.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <system_error>

#include "base/strings.h"
#include "env/files.h"
#include "learning/frontmatter.h"
#include "learning/text.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxSkillFileBytes = 256 * 1024;

std::vector<std::string> SplitArgs(std::string_view args) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  bool has = false;
  for (char c : args) {
    if (c == '"') {
      quoted = !quoted;
      has = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (has) out.push_back(cur);
      cur.clear();
      has = false;
    } else {
      cur.push_back(c);
      has = true;
    }
  }
  if (has) out.push_back(cur);
  return out;
}

Result<Skill> ReadSkill(const fs::path& folder, Scope scope) {
  fs::path file = folder / kSkillFileName;
  AL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file, kMaxSkillFileBytes));
  AL_ASSIGN_OR_RETURN(FrontMatter fm, ParseFrontMatter(text));
  Skill s;
  s.name = fm.Get("name");
  if (s.name.empty()) s.name = folder.filename().string();
  s.description = fm.Get("description");
  s.body = std::string(Trim(fm.body));
  s.scope = scope;
  s.dir = folder;
  AL_RETURN_IF_ERROR(ValidateSkill(s));
  return s;
}

}  // namespace

Status ValidateSkill(const Skill& s) {
  if (!IsSlug(s.name, 64)) {
    return InvalidArgument(
        "name: must be a slug of at most 64 characters (lower-case letters, digits and '-', "
        "starting with a letter or digit), got \"" +
        SanitizeInline(s.name, 80) + "\"");
  }
  if (Trim(s.description).empty()) return InvalidArgument("description: must not be empty");
  size_t dlen = CodePointCount(s.description);
  if (dlen > kMaxSkillDescription) {
    return InvalidArgument("description: at most 1024 characters, got " + std::to_string(dlen));
  }
  if (Trim(s.body).empty()) return InvalidArgument("body: must not be empty");
  size_t blen = CodePointCount(s.body);
  if (blen > kMaxSkillBody) {
    return InvalidArgument("body: at most 20000 characters, got " + std::to_string(blen));
  }
  if (!IsValidUtf8(s.description) || !IsValidUtf8(s.body)) {
    return InvalidArgument("description and body must be valid UTF-8");
  }
  return Status::Ok();
}

std::string RenderSkillFile(const Skill& s) {
  return "---\nname: " + s.name + "\ndescription: " + QuoteScalar(s.description) + "\n---\n" +
         std::string(Trim(s.body)) + "\n";
}

std::string SubstituteArguments(std::string_view body, std::string_view args) {
  std::vector<std::string> words = SplitArgs(args);
  std::string out;
  bool used_arguments = false;  // any placeholder
  for (size_t i = 0; i < body.size();) {
    if (body[i] == '$') {
      if (body.substr(i, 10) == "$ARGUMENTS") {
        out += args;
        used_arguments = true;
        i += 10;
        continue;
      }
      size_t j = i + 1;
      while (j < body.size() && std::isdigit(static_cast<unsigned char>(body[j])) && j - i <= 3) {
        ++j;
      }
      if (j > i + 1 && body[i + 1] != '0') {
        size_t n = std::stoul(std::string(body.substr(i + 1, j - i - 1)));
        if (n <= words.size()) out += words[n - 1];
        used_arguments = true;
        i = j;
        continue;
      }
    }
    out.push_back(body[i]);
    ++i;
  }
  if (!used_arguments && !Trim(args).empty()) {
    out += "\n\nARGUMENTS: ";
    out += args;
  }
  return out;
}

SkillStore::SkillStore(fs::path user_dir, fs::path workspace_dir)
    : user_dir_(std::move(user_dir)), workspace_dir_(std::move(workspace_dir)) {}

std::vector<Skill> SkillStore::List(std::vector<std::string>* warnings) const {
  std::vector<Skill> out;
  std::set<std::string> seen;
  for (Scope scope : {Scope::kWorkspace, Scope::kUser}) {
    const fs::path& d = dir(scope);
    std::error_code ec;
    if (d.empty() || !fs::is_directory(d, ec)) continue;
    std::vector<fs::path> folders;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      if (entry.is_directory(ec) && fs::exists(entry.path() / kSkillFileName, ec)) {
        folders.push_back(entry.path());
      }
    }
    std::sort(folders.begin(), folders.end());
    std::vector<Skill> here;
    for (const auto& f : folders) {
      Result<Skill> s = ReadSkill(f, scope);
      if (!s.ok()) {
        if (warnings)
          warnings->push_back((f / kSkillFileName).string() + ": " + s.error().message());
        continue;
      }
      here.push_back(std::move(*s));
    }
    std::stable_sort(here.begin(), here.end(),
                     [](const Skill& a, const Skill& b) { return a.name < b.name; });
    for (auto& s : here) {
      if (!seen.insert(s.name).second) {
        if (warnings) {
          warnings->push_back(s.dir.string() + ": skill \"" + s.name +
                              "\" is hidden by another skill of the same name");
        }
        continue;
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

Result<Skill> SkillStore::Get(const std::string& name) const {
  for (auto& s : List()) {
    if (s.name == name) return s;
  }
  return NotFound("no skill named \"" + SanitizeInline(name, 80) + "\"");
}

Result<fs::path> SkillStore::Write(const Skill& skill, bool overwrite) {
  AL_RETURN_IF_ERROR(ValidateSkill(skill));
  const fs::path& d = dir(skill.scope);
  if (d.empty()) {
    return FailedPrecondition("the " + std::string(ScopeName(skill.scope)) +
                              " skill scope is not available");
  }
  fs::path folder = d / skill.name;
  std::error_code ec;
  if (fs::exists(folder, ec) && !overwrite) {
    return AlreadyExists("a skill folder \"" + skill.name + "\" already exists in " + d.string());
  }
  fs::create_directories(folder, ec);
  if (ec) return Internal("cannot create " + folder.string() + ": " + ec.message());
  AL_RETURN_IF_ERROR(WriteFileAtomic(folder / kSkillFileName, RenderSkillFile(skill)));
  return folder;
}

std::string SkillStore::Index(int budget_tokens) const {
  std::vector<Skill> all = List();
  if (all.empty() || budget_tokens <= 0) return "";
  std::map<Scope, UsageMap> usage;
  usage[Scope::kWorkspace] = LoadUsage(workspace_dir_);
  usage[Scope::kUser] = LoadUsage(user_dir_);
  auto uses = [&](const Skill& s) {
    const UsageMap& u = usage[s.scope];
    auto it = u.find(s.name);
    return it == u.end() ? int64_t{0} : it->second.uses;
  };
  std::stable_sort(all.begin(), all.end(),
                   [&](const Skill& a, const Skill& b) { return uses(a) > uses(b); });
  size_t budget = static_cast<size_t>(budget_tokens) * 4;
  std::string out = "Available skills:\n";
  size_t shown = 0;
  for (const Skill& s : all) {
    std::string line =
        "- " + s.name + ": " + SanitizeInline(s.description, kMaxSkillDescription) + "\n";
    if (out.size() + line.size() > budget) break;
    out += line;
    ++shown;
  }
  return shown == 0 ? "" : out;
}

}  // namespace agentloop::learning
