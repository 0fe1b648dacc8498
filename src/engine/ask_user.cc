#include "engine/ask_user.h"

namespace agentloop {
namespace {

class AskUserTool final : public Tool {
 public:
  AskUserTool() {
    // Built once per process and shared by every instance.
    static const std::shared_ptr<const ToolSpec> kSpec = [] {
      ToolSpec s;
      s.name = "ask_user";
      s.description =
          "Ask the human operator a clarifying question before proceeding, when the request is "
          "genuinely ambiguous or a decision needs their judgement. Offer options when there are "
          "a few clear choices. The answer comes back as the tool result.";
      s.input_schema = Json::parse(R"({
        "type": "object",
        "properties": {
          "question": {"type": "string", "minLength": 1, "description": "The question to ask."},
          "options": {"type": "array", "items": {"type": "string"},
                      "description": "Optional answers to choose from."}
        },
        "required": ["question"],
        "additionalProperties": false
      })");
      s.mutates = false;
      s.parallel_safe = false;
      return std::make_shared<const ToolSpec>(std::move(s));
    }();
    spec_ = kSpec;
  }
  const ToolSpec& spec() const override { return *spec_; }
  std::shared_ptr<const ToolSpec> shared_spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override {
    // Reached only if a front end runs the tool directly.
    return ToolOutput::Error("ask_user needs a person: no one is available to answer");
  }

 private:
  std::shared_ptr<const ToolSpec> spec_;  // immutable, shared
};

}  // namespace

std::shared_ptr<Tool> MakeAskUserTool() { return std::make_shared<AskUserTool>(); }

}  // namespace agentloop
