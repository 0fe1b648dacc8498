#include "agentloop/permission.h"
#include "agentloop/tool.h"

namespace agentloop {

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
