#include "engine/ask_user.h"

namespace agentloop {
namespace {

class AskUserTool final : public Tool {
 public:
  AskUserTool() {
    spec_.name = "ask_user";
    spec_.description =
        "Ask the human operator a clarifying question before proceeding, when the request is "
        "genuinely ambiguous or a decision needs their judgement. Offer options when there are "
        "a few clear choices. The answer comes back as the tool result.";
    spec_.input_schema = Json::parse(R"({
      "type": "object",
      "properties": {
        "question": {"type": "string", "minLength": 1, "description": "The question to ask."},
        "options": {"type": "array", "items": {"type": "string"},
                    "description": "Optional answers to choose from."}
      },
      "required": ["question"],
      "additionalProperties": false
    })");
    spec_.mutates = false;
    spec_.parallel_safe = false;
  }
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override {
    // Reached only if a front end runs the tool directly.
    return ToolOutput::Error("ask_user needs a person: no one is available to answer");
  }

 private:
  ToolSpec spec_;
};

}  // namespace

std::shared_ptr<Tool> MakeAskUserTool() { return std::make_shared<AskUserTool>(); }

}  // namespace agentloop
