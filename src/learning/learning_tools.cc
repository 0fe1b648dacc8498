#include "learning/learning_tools.h"

#include <algorithm>
#include <cctype>
#include <system_error>

#include "learning/memory_store.h"
#include "learning/skills.h"
#include "learning/text.h"
#include "learning/usage.h"

namespace agentloop::learning {
namespace fs = std::filesystem;
namespace {

LearningDirs Resolve(const LearningDirs& dirs, const fs::path& workspace) {
  LearningDirs d = dirs;
  if (!workspace.empty()) {
    if (d.workspace_memory.empty()) d.workspace_memory = WorkspaceMemoryDir(workspace);
    if (d.workspace_skills.empty()) d.workspace_skills = WorkspaceSkillsDir(workspace);
  }
  return d;
}

MemoryStore Memories(const LearningDirs& dirs, const ToolContext& ctx) {
  LearningDirs d = Resolve(dirs, ctx.workspace);
  return MemoryStore(d.user_memory, d.workspace_memory);
}

SkillStore Skills(const LearningDirs& dirs, const ToolContext& ctx) {
  LearningDirs d = Resolve(dirs, ctx.workspace);
  return SkillStore(d.user_skills, d.workspace_skills);
}

std::string Str(const Json& input, const char* key) {
  auto it = input.find(key);
  return it != input.end() && it->is_string() ? it->get<std::string>() : "";
}

bool Has(const Json& input, const char* key) {
  auto it = input.find(key);
  return it != input.end() && !it->is_null();
}

Json ScopeSchema(const char* description) {
  return Json{{"type", "string"}, {"enum", {"user", "workspace"}}, {"description", description}};
}

ToolOutput Error(const std::string& text) { return ToolOutput::Error("Error: " + text); }

// ---------------------------------------------------------------------------

class LearningTool : public Tool {
 public:
  LearningTool(std::shared_ptr<const LearningDirs> dirs, std::shared_ptr<const ToolSpec> spec)
      : dirs_(std::move(dirs)), spec_(std::move(spec)) {}
  const ToolSpec& spec() const override { return *spec_; }
  std::shared_ptr<const ToolSpec> shared_spec() const override { return spec_; }

  // The spec `Make` builds, built once per process and shared by every
  // instance.
  template <ToolSpec (*Make)()>
  static std::shared_ptr<const ToolSpec> Once() {
    static const std::shared_ptr<const ToolSpec> spec = std::make_shared<const ToolSpec>(Make());
    return spec;
  }

 protected:
  // Shared by the learning tools of a session (MakeLearningTools).
  std::shared_ptr<const LearningDirs> dirs_;
  std::shared_ptr<const ToolSpec> spec_;  // immutable, shared
};

class MemorySaveTool : public LearningTool {
 public:
  explicit MemorySaveTool(std::shared_ptr<const LearningDirs> dirs)
      : LearningTool(std::move(dirs), Once<&MakeSpec>()) {}

  static ToolSpec MakeSpec() {
    ToolSpec s;
    s.name = "memory_save";
    s.description =
        "Save a durable note to long-term memory so future sessions know it: a stable user "
        "preference, a project detail, a hard-won answer, a pointer to a reference. Saving a "
        "name that exists replaces it. Asks the user for permission. Keep it short and "
        "specific; never save secrets or one-off values.";
    Json props = Json::object();
    props["name"] = {{"type", "string"},
                     {"description", "Slug: lower-case letters, digits and '-', e.g. 'test-cmd'"}};
    props["type"] = {{"type", "string"},
                     {"enum", {"fact", "preference", "project", "reference"}},
                     {"description", "What kind of note"}};
    props["description"] = {
        {"type", "string"},
        {"description", "One line, at most 280 characters (shown in the index)"}};
    props["body"] = {{"type", "string"}, {"description", "The note, at most 4000 characters"}};
    props["tags"] = {
        {"type", "array"}, {"items", {{"type", "string"}}}, {"description", "Up to 10 slug tags"}};
    props["scope"] = ScopeSchema(
        "user (all workspaces) or workspace (this one). Default: user for preferences, else "
        "workspace");
    s.input_schema = Json{{"type", "object"},
                          {"properties", props},
                          {"required", {"name", "type", "description", "body"}}};
    s.mutates = true;
    s.always_ask = true;  // later sessions read what it writes
    s.parallel_safe = false;
    return s;
  }

  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override {
    const Json& in = call.input;
    Memory m;
    m.name = Str(in, "name");
    m.type = Str(in, "type");
    m.description = Str(in, "description");
    m.body = Str(in, "body");
    if (auto it = in.find("tags"); it != in.end() && it->is_array()) {
      for (const auto& t : *it) {
        if (!t.is_string()) return Error("tags: every tag must be a string");
        m.tags.push_back(t.get<std::string>());
      }
    }
    std::string scope_name = Str(in, "scope");
    if (scope_name.empty()) scope_name = m.type == "preference" ? "user" : "workspace";
    auto scope = ParseScope(scope_name);
    if (!scope) return Error("scope: must be user or workspace");
    m.scope = *scope;
    MemoryStore store = Memories(*dirs_, ctx);
    Result<bool> saved = store.Save(m);
    if (!saved.ok()) return Error(saved.error().message());
    ToolOutput out =
        ToolOutput::Ok(std::string(*saved ? "Updated" : "Saved") + " " +
                       std::string(ScopeName(m.scope)) + " memory \"" + m.name + "\".");
    out.details = Json{{"name", m.name},
                       {"scope", ScopeName(m.scope)},
                       {"path", (store.dir(m.scope) / (m.name + ".md")).string()},
                       {"replaced", *saved}};
    return out;
  }
};

class MemorySearchTool : public LearningTool {
 public:
  explicit MemorySearchTool(std::shared_ptr<const LearningDirs> dirs)
      : LearningTool(std::move(dirs), Once<&MakeSpec>()) {}

  static ToolSpec MakeSpec() {
    ToolSpec s;
    s.name = "memory_search";
    s.description =
        "Load saved memories. Give `name` to load one memory from the index by its exact name, "
        "or `query` to search names, tags, descriptions and bodies (best matches first).";
    Json props = Json::object();
    props["query"] = {{"type", "string"}, {"description", "Words to search for"}};
    props["name"] = {{"type", "string"}, {"description", "Exact memory name to load"}};
    props["scope"] = ScopeSchema("Only this scope (with name)");
    props["limit"] = {{"type", "integer"},
                      {"minimum", 1},
                      {"maximum", 20},
                      {"description", "Most results to return (default 5)"}};
    s.input_schema = Json{{"type", "object"}, {"properties", props}};
    s.mutates = false;
    s.parallel_safe = true;
    return s;
  }

  static std::string Render(const Memory& m) {
    std::string tags;
    for (const auto& t : m.tags) tags += (tags.empty() ? "" : ", ") + t;
    return "## " + m.name + " [" + m.type + ", " + std::string(ScopeName(m.scope)) + "]" +
           (tags.empty() ? "" : " tags: " + tags) + "\n" + m.description + "\n\n" + m.body + "\n";
  }

  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override {
    const Json& in = call.input;
    MemoryStore store = Memories(*dirs_, ctx);
    std::string name = Str(in, "name");
    std::string query = Str(in, "query");
    Json uses = Json::array();
    if (!name.empty()) {
      std::optional<Scope> scope;
      if (Has(in, "scope")) {
        scope = ParseScope(Str(in, "scope"));
        if (!scope) return Error("scope: must be user or workspace");
      }
      Result<Memory> m = store.Get(name, scope);
      if (!m.ok()) return Error(m.error().message());
      uses.push_back(UseDetail(UsageKind::kMemory, store.dir(m->scope), m->name));
      ToolOutput out = ToolOutput::Ok(Render(*m));
      out.details = Json{{std::string(kUseDetailsKey), uses}};
      return out;
    }
    if (Trim(query).empty()) return Error("give `name` (exact) or a non-empty `query`");
    size_t limit = kDefaultSearchLimit;
    if (auto it = in.find("limit"); it != in.end() && it->is_number_integer()) {
      limit = static_cast<size_t>(std::clamp<int64_t>(it->get<int64_t>(), 1, kMaxSearchLimit));
    }
    std::vector<MemoryHit> hits = store.Search(query, limit);
    if (hits.empty())
      return ToolOutput::Ok("No memories match \"" + SanitizeInline(query, 200) + "\".");
    std::string text;
    Json results = Json::array();
    for (const auto& h : hits) {
      if (!text.empty()) text += "\n";
      text += Render(h.memory);
      uses.push_back(UseDetail(UsageKind::kMemory, store.dir(h.memory.scope), h.memory.name));
      results.push_back(
          Json{{"name", h.memory.name}, {"scope", ScopeName(h.memory.scope)}, {"score", h.score}});
    }
    ToolOutput out = ToolOutput::Ok(text);
    out.details = Json{{std::string(kUseDetailsKey), uses}, {"results", results}};
    return out;
  }

 private:
  static std::string_view Trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
  }
};

class MemoryDeleteTool : public LearningTool {
 public:
  explicit MemoryDeleteTool(std::shared_ptr<const LearningDirs> dirs)
      : LearningTool(std::move(dirs), Once<&MakeSpec>()) {}

  static ToolSpec MakeSpec() {
    ToolSpec s;
    s.name = "memory_delete";
    s.description =
        "Delete a saved memory that is wrong or stale. Asks the user for permission. Without "
        "`scope` the workspace memory is deleted when it exists, else the user memory.";
    Json props = Json::object();
    props["name"] = {{"type", "string"}, {"description", "Memory name"}};
    props["scope"] = ScopeSchema("Which scope to delete from");
    s.input_schema = Json{{"type", "object"}, {"properties", props}, {"required", {"name"}}};
    s.mutates = true;
    s.always_ask = true;  // later sessions read what it writes
    s.parallel_safe = false;
    return s;
  }

  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override {
    MemoryStore store = Memories(*dirs_, ctx);
    std::string name = Str(call.input, "name");
    std::optional<Scope> scope;
    if (Has(call.input, "scope")) {
      scope = ParseScope(Str(call.input, "scope"));
      if (!scope) return Error("scope: must be user or workspace");
    } else {
      Result<Memory> m = store.Get(name);
      if (!m.ok()) return Error(m.error().message());
      scope = m->scope;
    }
    Status s = store.Delete(name, *scope);
    if (!s.ok()) return Error(s.message());
    ToolOutput out =
        ToolOutput::Ok("Deleted " + std::string(ScopeName(*scope)) + " memory \"" + name + "\".");
    out.details = Json{{"name", name}, {"scope", ScopeName(*scope)}};
    return out;
  }
};

class SkillTool : public LearningTool {
 public:
  explicit SkillTool(std::shared_ptr<const LearningDirs> dirs)
      : LearningTool(std::move(dirs), Once<&MakeSpec>()) {}

  static ToolSpec MakeSpec() {
    ToolSpec s;
    s.name = "skill";
    s.description =
        "Load a skill from the 'Available skills' list: returns its instructions (with `args` "
        "substituted for $ARGUMENTS, $1, $2, ...). Follow them to do the task.";
    Json props = Json::object();
    props["skill"] = {{"type", "string"}, {"description", "Skill name"}};
    props["args"] = {{"type", "string"}, {"description", "Arguments for the skill"}};
    s.input_schema = Json{{"type", "object"}, {"properties", props}, {"required", {"skill"}}};
    s.mutates = false;
    s.parallel_safe = true;
    return s;
  }

  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override {
    SkillStore store = Skills(*dirs_, ctx);
    std::string name = Str(call.input, "skill");
    Result<Skill> skill = store.Get(name);
    if (!skill.ok()) {
      std::string names;
      for (const auto& s : store.List()) names += (names.empty() ? "" : ", ") + s.name;
      return Error(skill.error().message() +
                   (names.empty() ? "; no skills are installed" : "; available: " + names));
    }
    std::string text = SubstituteArguments(skill->body, Str(call.input, "args"));
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(skill->dir, ec)) {
      if (!e.is_regular_file(ec)) continue;
      fs::path rel = fs::relative(e.path(), skill->dir, ec);
      if (rel == kSkillFileName) continue;
      files.push_back(rel.string());
      if (files.size() >= 50) break;
    }
    std::sort(files.begin(), files.end());
    if (!files.empty()) {
      text += "\n\n(Skill folder: " + skill->dir.string() + "; files:";
      for (const auto& f : files) text += " " + f;
      text += ")";
    }
    ToolOutput out = ToolOutput::Ok(text);
    out.details =
        Json{{std::string(kUseDetailsKey),
              Json::array({UseDetail(UsageKind::kSkill, store.dir(skill->scope), skill->name)})},
             {"dir", skill->dir.string()}};
    return out;
  }
};

class SynthesizeSkillTool : public LearningTool {
 public:
  explicit SynthesizeSkillTool(std::shared_ptr<const LearningDirs> dirs)
      : LearningTool(std::move(dirs), Once<&MakeSpec>()) {}

  static ToolSpec MakeSpec() {
    ToolSpec s;
    s.name = "synthesize_skill";
    s.description =
        "Capture a repeatable multi-step procedure as a reusable skill (a SKILL.md folder). "
        "Asks the user for permission. The body holds the instructions; $ARGUMENTS, $1, $2 are "
        "replaced by the arguments when the skill is loaded.";
    Json props = Json::object();
    props["name"] = {{"type", "string"}, {"description", "Slug: lower-case letters, digits, '-'"}};
    props["description"] = {{"type", "string"},
                            {"description", "One line: what the skill does and when to use it"}};
    props["body"] = {{"type", "string"}, {"description", "The instructions (Markdown)"}};
    props["scope"] = ScopeSchema("user (default, all workspaces) or workspace");
    props["overwrite"] = {{"type", "boolean"},
                          {"description", "Replace an existing skill of that name"}};
    s.input_schema = Json{
        {"type", "object"}, {"properties", props}, {"required", {"name", "description", "body"}}};
    s.mutates = true;
    s.always_ask = true;  // later sessions read what it writes
    s.parallel_safe = false;
    return s;
  }

  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override {
    const Json& in = call.input;
    Skill skill;
    skill.name = Str(in, "name");
    skill.description = Str(in, "description");
    skill.body = Str(in, "body");
    if (skill.description.find_first_of("\r\n") != std::string::npos) {
      return Error("description: must be a single line");
    }
    std::string scope_name = Str(in, "scope");
    auto scope = ParseScope(scope_name.empty() ? "user" : scope_name);
    if (!scope) return Error("scope: must be user or workspace");
    skill.scope = *scope;
    bool overwrite =
        in.contains("overwrite") && in["overwrite"].is_boolean() && in["overwrite"].get<bool>();
    SkillStore store = Skills(*dirs_, ctx);
    Result<fs::path> dir = store.Write(skill, overwrite);
    if (!dir.ok()) return Error(dir.error().message());
    ToolOutput out = ToolOutput::Ok("Wrote " + std::string(ScopeName(skill.scope)) + " skill \"" +
                                    skill.name + "\" to " + (*dir / kSkillFileName).string() + ".");
    out.details =
        Json{{"name", skill.name}, {"scope", ScopeName(skill.scope)}, {"dir", dir->string()}};
    return out;
  }
};

}  // namespace

std::shared_ptr<Tool> MakeMemorySaveTool(const LearningDirs& d) {
  return std::make_shared<MemorySaveTool>(std::make_shared<const LearningDirs>(d));
}
std::shared_ptr<Tool> MakeMemorySearchTool(const LearningDirs& d) {
  return std::make_shared<MemorySearchTool>(std::make_shared<const LearningDirs>(d));
}
std::shared_ptr<Tool> MakeMemoryDeleteTool(const LearningDirs& d) {
  return std::make_shared<MemoryDeleteTool>(std::make_shared<const LearningDirs>(d));
}
std::shared_ptr<Tool> MakeSkillTool(const LearningDirs& d) {
  return std::make_shared<SkillTool>(std::make_shared<const LearningDirs>(d));
}
std::shared_ptr<Tool> MakeSynthesizeSkillTool(const LearningDirs& d) {
  return std::make_shared<SynthesizeSkillTool>(std::make_shared<const LearningDirs>(d));
}

std::vector<std::shared_ptr<Tool>> MakeLearningTools(const LearningDirs& d) {
  // One copy of the directories for the five tools.
  auto dirs = std::make_shared<const LearningDirs>(d);
  return {std::make_shared<MemorySaveTool>(dirs), std::make_shared<MemorySearchTool>(dirs),
          std::make_shared<MemoryDeleteTool>(dirs), std::make_shared<SkillTool>(dirs),
          std::make_shared<SynthesizeSkillTool>(dirs)};
}

std::string LearningPromptSection(const LearningDirs& dirs, const fs::path& workspace,
                                  size_t memory_budget_chars, int skill_budget_tokens) {
  LearningDirs d = Resolve(dirs, workspace);
  std::string memory = MemoryStore(d.user_memory, d.workspace_memory).Index(memory_budget_chars);
  std::string skills = SkillStore(d.user_skills, d.workspace_skills).Index(skill_budget_tokens);
  if (memory.empty()) return skills;
  if (skills.empty()) return memory;
  return memory + "\n" + skills;
}

}  // namespace agentloop::learning
