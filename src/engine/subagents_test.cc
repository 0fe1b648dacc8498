// Subagent definitions and tools: a definition only narrows what its caller
// may do (tools), and the agent tool is mutating unless its child is
// read-only.
#include "engine/subagents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::engine {
namespace {

using Tools = std::optional<std::vector<std::string>>;

SubagentDefinition Def(Tools tools, std::optional<CommandKind> command = std::nullopt) {
  SubagentDefinition d;
  d.name = "helper";
  d.description = "helps";
  d.system_prompt = "You help.";
  d.tools = std::move(tools);
  d.command = command;
  return d;
}

TEST(ChildToolsTest, UnderARootSessionTheDefinitionsListIsTheChildsList) {
  EXPECT_EQ(ChildTools(std::nullopt, std::nullopt), std::nullopt);
  EXPECT_EQ(ChildTools(std::nullopt, Tools({"read", "agent"})), Tools({"read", "agent"}));
}

TEST(ChildToolsTest, AChildsChildNeverGetsToolsItsCallerLacks) {
  // The caller may only read and start subagents; its child's definition
  // omits `tools` (every tool of the caller but the agent tools) or names
  // write and bash: neither widens the caller's list.
  const Tools caller({"read", "agent"});
  EXPECT_EQ(ChildTools(caller, std::nullopt), Tools({"read"}));
  EXPECT_EQ(ChildTools(caller, Tools({"read", "write", "bash"})), Tools({"read"}));
}

TEST(ChildToolsTest, AgentToolsNarrowToTheCallersAgentTools) {
  EXPECT_EQ(ChildTools(Tools({"read", "agent__reviewer"}), Tools({"read", "agent"})),
            Tools({"read", "agent__reviewer"}));
  EXPECT_EQ(ChildTools(Tools({"read"}), Tools({"agent", "agent__reviewer"})),
            Tools(std::vector<std::string>{}));
  EXPECT_EQ(ChildTools(Tools({"agent"}), Tools({"agent__reviewer"})), Tools({"agent__reviewer"}));
}

class NoHost final : public SubagentHost {
 public:
  Result<SubagentRun> RunSubagent(const SubagentRequest&, std::stop_token) override {
    return Internal("not run in this test");
  }
};

TEST(SubagentToolTest, TheAgentToolMutatesUnlessItsChildIsReadOnly) {
  NoHost host;
  // A child that may write changes the workspace through the call: the
  // call is judged as a mutating tool (asked by default), never parallel.
  SubagentDefinition writer = Def(Tools({"read", "write"}));
  writer.parallel = true;
  const bool writer_ro = SubagentIsReadOnly(writer, CommandKind::kCode);
  EXPECT_FALSE(writer_ro);
  SubagentTool w(writer, &host, writer_ro);
  EXPECT_TRUE(w.spec().mutates);
  EXPECT_FALSE(w.spec().parallel_safe);
  // Without a tool list the child has every tool of its caller.
  EXPECT_FALSE(SubagentIsReadOnly(Def(std::nullopt), CommandKind::kCode));
  // Read-only: only read-only tools, a read-only command, or a read-only
  // caller (plan mode passes on).
  SubagentDefinition reader = Def(Tools({"read", "grep"}));
  reader.parallel = true;
  const bool reader_ro = SubagentIsReadOnly(reader, CommandKind::kCode);
  EXPECT_TRUE(reader_ro);
  SubagentTool r(reader, &host, reader_ro);
  EXPECT_FALSE(r.spec().mutates);
  EXPECT_TRUE(r.spec().parallel_safe);
  EXPECT_TRUE(SubagentIsReadOnly(Def(std::nullopt, CommandKind::kPlan), CommandKind::kCode));
  EXPECT_TRUE(SubagentIsReadOnly(Def(Tools({"write"}), CommandKind::kCode), CommandKind::kPlan));
  // The agent tool itself can start anything: not read-only.
  EXPECT_FALSE(SubagentIsReadOnly(Def(Tools({"read", "agent"})), CommandKind::kCode));
}

}  // namespace
}  // namespace agentloop::engine
