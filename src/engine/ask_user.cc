#include "engine/ask_user.h"

#include "tools/tools.h"

namespace agentloop {
namespace {

class AskUserTool final : public tools::BuiltinTool {
 public:
  AskUserTool()
      // Built once per process and shared by every instance.
      : BuiltinTool(SpecOnce([] {
          return tools::BuiltinSpec({.name = "ask_user",
                                     .description =
                                         "Ask the human operator a clarifying question before "
                                         "proceeding, when the request is genuinely ambiguous or "
                                         "a decision needs their judgement. Offer options when "
                                         "there are a few clear choices. The answer comes back as "
                                         "the tool result.",
                                     .schema = R"({
        "type": "object",
        "properties": {
          "question": {"type": "string", "minLength": 1, "description": "The question to ask."},
          "options": {"type": "array", "items": {"type": "string"},
                      "description": "Optional answers to choose from."}
        },
        "required": ["question"],
        "additionalProperties": false
      })"});
        })) {}
  Result<ToolOutput> Run(const ToolCall&, ToolContext&) override {
    // Reached only if a front end runs the tool directly.
    return ToolOutput::Error("ask_user needs a person: no one is available to answer");
  }
};

}  // namespace

std::shared_ptr<Tool> MakeAskUserTool() { return std::make_shared<AskUserTool>(); }

}  // namespace agentloop
