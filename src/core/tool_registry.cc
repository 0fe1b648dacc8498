#include <map>
#include <mutex>

#include "agentloop/permission.h"
#include "agentloop/tool.h"

namespace agentloop {
namespace {

// The spec lists of this process, by the specs they hold. An entry keeps
// its specs alive (so their addresses are not reused while they key it)
// and the list weakly; entries whose list has gone are dropped on insert.
struct SharedLists {
  struct Entry {
    std::vector<std::shared_ptr<const ToolSpec>> specs;
    ToolSpecList::Weak list;
  };
  std::mutex mu;
  std::map<std::vector<const ToolSpec*>, Entry> by_specs;  // Guarded by mu.
};

SharedLists& Lists() {
  static SharedLists* lists = new SharedLists();  // never destroyed: used from any thread
  return *lists;
}

}  // namespace

void ToolRegistry::Add(std::shared_ptr<Tool> tool) {
  for (auto& existing : tools_) {
    if (existing->spec().name == tool->spec().name) {
      existing = std::move(tool);  // the later definition wins, at the earlier position
      return;
    }
  }
  tools_.push_back(std::move(tool));
}

Tool* ToolRegistry::Find(std::string_view name) const {
  for (const auto& t : tools_) {
    if (t->spec().name == name) return t.get();
  }
  return nullptr;
}

void ToolRegistry::Retain(const std::function<bool(const ToolSpec&)>& keep) {
  std::erase_if(tools_, [&](const std::shared_ptr<Tool>& t) { return !keep(t->spec()); });
}

std::vector<ToolSpec> ToolRegistry::Specs() const {
  std::vector<ToolSpec> out;
  out.reserve(tools_.size());
  for (const auto& t : tools_) out.push_back(t->spec());
  return out;
}

ToolSpecList ToolRegistry::SpecList() const {
  std::vector<std::shared_ptr<const ToolSpec>> specs;
  std::vector<const ToolSpec*> key;
  specs.reserve(tools_.size());
  key.reserve(tools_.size());
  for (const auto& t : tools_) {
    std::shared_ptr<const ToolSpec> s = t->shared_spec();
    if (!s || s.get() != &t->spec()) return ToolSpecList(Specs());
    key.push_back(s.get());
    specs.push_back(std::move(s));
  }
  SharedLists& lists = Lists();
  std::lock_guard<std::mutex> lock(lists.mu);
  auto it = lists.by_specs.find(key);
  if (it != lists.by_specs.end()) {
    if (ToolSpecList list = it->second.list.lock(); !list.empty()) return list;
  }
  std::erase_if(lists.by_specs, [](const auto& kv) { return kv.second.list.expired(); });
  std::vector<ToolSpec> copy;
  copy.reserve(specs.size());
  for (const auto& s : specs) copy.push_back(*s);
  ToolSpecList list(std::move(copy));
  SharedLists::Entry& e = lists.by_specs[key];
  e.specs = std::move(specs);
  e.list = ToolSpecList::Weak(list);
  return list;
}

PolicyVerdict DefaultPermissionPolicy::Evaluate(const ToolSpec& spec, const ToolCall& call) const {
  (void)call;
  if (spec.mutates) {
    return {Decision::kAsk, "no rule matched: default ask for mutating tool '" + spec.name + "'",
            ""};
  }
  return {Decision::kAllow, "no rule matched: default allow for read-only tool '" + spec.name + "'",
          ""};
}

}  // namespace agentloop
