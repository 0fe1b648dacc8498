// Embeds the agentloop engine: a custom tool and a hook, one turn against
// the scripted provider (offline). Usage: embed WORKSPACE SCRIPT
#include <iostream>
#include <sstream>

#include "agentloop/engine.h"

using namespace agentloop;

// A read-only tool: the default permission rules let it run without asking.
class WordCount final : public Tool {
 public:
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext&) override {
    std::istringstream in(call.input["text"].get<std::string>());
    int n = 0;
    for (std::string word; in >> word;) ++n;
    return ToolOutput::Ok(std::to_string(n) + " words");
  }

 private:
  ToolSpec spec_{"word_count", "Counts the words of a text.",
                 Json::parse(R"({"type": "object", "required": ["text"],
                                 "properties": {"text": {"type": "string"}}})")};
};

// Sees every tool result, the built-in tools' too.
class PrintResults final : public Hook {
 public:
  std::string_view name() const override { return "print_results"; }
  void AfterToolResult(const HookContext&, const ToolCall& call, const ToolOutput& out) override {
    std::cout << "hook: " << call.name << " -> " << out.content.substr(0, out.content.find('\n'))
              << "\n";
  }
};

int main(int argc, char** argv) {
  if (argc != 3) return std::cerr << "usage: embed WORKSPACE SCRIPT\n", 2;
  EngineOptions eo;
  eo.data_dir = std::filesystem::path(argv[1]) / ".agentloop-embed";  // sessions.db
  auto engine = Engine::Create(eo);
  if (!engine.ok()) return std::cerr << engine.error().ToString() << "\n", 1;

  SessionOptions spec;
  spec.workspace = argv[1];
  spec.provider = ProviderKind::kScript;
  spec.script_path = argv[2];
  spec.extensions.tools.push_back(std::make_shared<WordCount>());
  spec.extensions.hooks.push_back(std::make_shared<PrintResults>());
  auto session = (*engine)->OpenSession(spec);
  if (!session.ok()) return std::cerr << session.error().ToString() << "\n", 1;

  auto result = agentloop::RunBlocking(
      **session, agentloop::op::UserInput{"How many words are in notes.txt?"}, {}, {});
  if (!result.ok()) return std::cerr << result.error().ToString() << "\n", 1;
  std::cout << result->final_text << "\n";
  return result->stop == StopReason::kCompleted ? 0 : 1;
}
