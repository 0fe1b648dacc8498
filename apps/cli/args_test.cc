#include "args.h"

#include <gtest/gtest.h>

namespace agentloop::cli {
namespace {

Result<CliArgs> P(std::vector<std::string> v) { return ParseArgs(v); }

TEST(ArgsTest, RunWithFlagsInAnyOrder) {
  auto a = P({"--quiet", "run", "--provider", "script", "--script=s.json", "-C", "/tmp", "fix",
              "the bug", "--allow", "*", "--allow", "bash(make*)", "--max-tool-calls", "7"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(a->subcommand, Subcommand::kRun);
  EXPECT_EQ(a->positionals, (std::vector<std::string>{"fix", "the bug"}));
  EXPECT_TRUE(a->quiet);
  EXPECT_EQ(a->workspace, "/tmp");
  EXPECT_EQ(a->FlagValue("provider.kind"), "script");
  EXPECT_EQ(a->FlagValue("provider.script"), "s.json");
  EXPECT_EQ(a->FlagValue("budget.max_tool_calls"), "7");
  int allows = 0;
  for (const ConfigFlag& f : a->config_flags) {
    if (f.key == "permissions.allow") {
      ++allows;
      EXPECT_EQ(f.flag, "--allow");
    }
  }
  EXPECT_EQ(allows, 2);
}

TEST(ArgsTest, ShortWorkspaceGlued) {
  auto a = P({"run", "-C/work", "hi"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->workspace, "/work");
}

TEST(ArgsTest, DashIsAPositional) {
  auto a = P({"run", "-"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->positionals, std::vector<std::string>{"-"});
}

TEST(ArgsTest, DoubleDashEndsFlags) {
  auto a = P({"run", "--", "--not-a-flag"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->positionals, std::vector<std::string>{"--not-a-flag"});
}

TEST(ArgsTest, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"frobnicate"},
      {"run"},
      {"run", "--model"},
      {"run", "--bogus", "x"},
      {"run", "--output", "xml", "x"},
      {"run", "--provider", "gemini", "x"},
      {"run", "--command", "destroy", "x"},
      {"run", "--max-tool-calls", "0", "x"},
      {"run", "--max-tokens", "12abc", "x"},
      {"run", "--quiet=yes", "x"},
      {"run", "--session", "a", "--continue", "x"},
      {"sessions"},
      {"sessions", "show"},
      {"sessions", "list", "extra"},
      {"sessions", "purge", "x"},
      {"config"},
      {"config", "edit"},
      {"approve"},
      {"approve", "a", "b"},
      {"answer", "id"},
      {"deny", "id", "--args", "{}"},
      {"approve", "id", "--reason", "no"},
      {"permissions", "check", "bash"},
      {"sessions", "list", "--allow", "*"},
      {"pending", "extra"},
      {"help", "nosuch"},
  };
  for (const auto& argv : bad) {
    std::string joined;
    for (const auto& s : argv) joined += s + " ";
    auto a = P(argv);
    EXPECT_FALSE(a.ok()) << joined;
    if (!a.ok()) {
      EXPECT_EQ(a.error().code(), Code::kInvalidArgument) << joined;
      EXPECT_FALSE(a.error().message().empty());
    }
  }
}

TEST(ArgsTest, HelpAndVersionNeedNoSubcommand) {
  auto v = P({"--version"});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->version);
  auto h = P({"run", "--help"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  EXPECT_EQ(h->subcommand, Subcommand::kRun);
}

TEST(ArgsTest, SubcommandsParse) {
  EXPECT_TRUE(P({"sessions", "list"}).ok());
  EXPECT_TRUE(P({"sessions", "show", "abcd"}).ok());
  EXPECT_TRUE(P({"sessions", "export", "abcd"}).ok());
  EXPECT_TRUE(P({"sessions", "rm", "abcd"}).ok());
  EXPECT_TRUE(P({"resume", "abcd"}).ok());
  EXPECT_TRUE(P({"resume", "abcd", "go", "on"}).ok());
  EXPECT_TRUE(P({"config", "show", "--model", "m"}).ok());
  EXPECT_TRUE(P({"pending", "--session", "abcd"}).ok());
  auto ap = P({"approve", "p1", "--args", "{\"a\":1}"});
  ASSERT_TRUE(ap.ok());
  EXPECT_EQ(ap->edited_args, "{\"a\":1}");
  auto dn = P({"deny", "p1", "--reason", "too risky"});
  ASSERT_TRUE(dn.ok());
  EXPECT_EQ(dn->reason, "too risky");
  auto an = P({"answer", "p1", "blue", "please"});
  ASSERT_TRUE(an.ok());
  EXPECT_EQ(an->positionals.size(), 3u);
  auto pc = P({"permissions", "check", "bash", "{\"command\":\"ls\"}", "--deny", "bash"});
  ASSERT_TRUE(pc.ok());
  auto nt = P({"run", "--no-todo-loop", "x"});
  ASSERT_TRUE(nt.ok());
  EXPECT_EQ(nt->FlagValue("todo_loop.enabled"), "false");
  auto sb = P({"run", "--sandbox", "workspace-write", "x"});
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->FlagValue("tools.sandbox"), "workspace-write");
  auto bad_sb = P({"run", "--sandbox", "on", "x"});
  ASSERT_FALSE(bad_sb.ok());
  EXPECT_NE(bad_sb.error().message().find("off read-only workspace-write"), std::string::npos)
      << bad_sb.error().message();
  auto cont = P({"run", "--continue", "more"});
  ASSERT_TRUE(cont.ok());
  EXPECT_TRUE(cont->continue_latest);
}

TEST(ArgsTest, AcpTakesTheSessionFlagsOfChatAndNoPrompt) {
  auto acp = P({"acp", "--provider", "openai", "--model", "m", "--allow", "bash(make)", "--deny",
                "write", "--command", "plan", "--max-tool-calls", "5", "--sandbox", "off"});
  ASSERT_TRUE(acp.ok()) << acp.error().message();
  EXPECT_EQ(acp->subcommand, Subcommand::kAcp);
  EXPECT_EQ(acp->FlagValue("provider.model"), "m");
  EXPECT_EQ(acp->FlagValue("command"), "plan");
  EXPECT_FALSE(P({"acp", "fix the bug"}).ok());       // the editor sends the prompts
  EXPECT_FALSE(P({"acp", "--output", "json"}).ok());  // stdout is the protocol's
  EXPECT_NE(UsageText(Subcommand::kNone).find("acp [FLAGS]"), std::string::npos);
}

TEST(ArgsTest, LaterFlagWins) {
  auto a = P({"run", "--model", "a", "--model=b", "x"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->FlagValue("provider.model"), "b");
}

TEST(ArgsTest, UsageTextListsEveryFlagAndSubcommand) {
  std::string u = UsageText(Subcommand::kNone);
  for (const char* s : {"run",
                        "chat",
                        "sessions",
                        "resume",
                        "config show",
                        "pending",
                        "approve",
                        "deny",
                        "answer",
                        "permissions check",
                        "--provider",
                        "--model",
                        "--base-url",
                        "--script",
                        "--command",
                        "--max-tool-calls",
                        "--max-tokens",
                        "--max-turns",
                        "--workspace",
                        "--session",
                        "--output",
                        "--system-prompt-file",
                        "--quiet",
                        "--version",
                        "--help",
                        "--allow",
                        "--ask",
                        "--deny",
                        "--no-todo-loop",
                        "--sandbox",
                        "--continue"}) {
    EXPECT_NE(u.find(s), std::string::npos) << s;
  }
  std::string run = UsageText(Subcommand::kRun);
  EXPECT_NE(run.find("--max-turns"), std::string::npos);
  EXPECT_EQ(run.find("--reason"), std::string::npos);
}

TEST(ArgsTest, ShortFormsPeopleKnowFromOtherAgents) {
  auto print = P({"-p", "-m", "gpt-4.1", "fix it"});
  ASSERT_TRUE(print.ok()) << print.error().ToString();
  EXPECT_EQ(print->subcommand, Subcommand::kRun);
  EXPECT_EQ(print->positionals, std::vector<std::string>{"fix it"});
  EXPECT_EQ(print->FlagValue("provider.model"), "gpt-4.1");

  auto cont = P({"-c"});
  ASSERT_TRUE(cont.ok()) << cont.error().ToString();
  EXPECT_EQ(cont->subcommand, Subcommand::kChat);
  EXPECT_TRUE(cont->continue_latest);

  auto print_cont = P({"--print", "-c", "and now?"});
  ASSERT_TRUE(print_cont.ok());
  EXPECT_EQ(print_cont->subcommand, Subcommand::kRun);
  EXPECT_TRUE(print_cont->continue_latest);

  auto resume = P({"-r", "abcd1234", "go on"});
  ASSERT_TRUE(resume.ok()) << resume.error().ToString();
  EXPECT_EQ(resume->subcommand, Subcommand::kResume);
  EXPECT_EQ(resume->positionals, (std::vector<std::string>{"abcd1234", "go on"}));

  // `agentloop` alone, with or without flags, is the chat.
  auto bare = P({});
  ASSERT_TRUE(bare.ok()) << bare.error().ToString();
  EXPECT_EQ(bare->subcommand, Subcommand::kChat);
  auto bare_model = P({"-m", "gpt-4.1"});
  ASSERT_TRUE(bare_model.ok()) << bare_model.error().ToString();
  EXPECT_EQ(bare_model->subcommand, Subcommand::kChat);
  EXPECT_FALSE(P({"--older-than", "3d"}).ok());  // not a chat flag

  // Without an id: the picker (commands.cc), of every workspace with --all.
  auto pick = P({"-r", "--all"});
  ASSERT_TRUE(pick.ok()) << pick.error().ToString();
  EXPECT_EQ(pick->subcommand, Subcommand::kResume);
  EXPECT_TRUE(pick->positionals.empty());
  EXPECT_TRUE(pick->all);
}

TEST(ArgsTest, APromptWithoutASubcommandStartsTheChatWithIt) {
  auto bare = P({"fix the failing test"});
  ASSERT_TRUE(bare.ok()) << bare.error().ToString();
  EXPECT_EQ(bare->subcommand, Subcommand::kChat);
  EXPECT_EQ(bare->positionals, std::vector<std::string>{"fix the failing test"});
  auto flags_first = P({"-m", "gpt-4.1", "fix it", "now"});
  ASSERT_TRUE(flags_first.ok()) << flags_first.error().ToString();
  EXPECT_EQ(flags_first->subcommand, Subcommand::kChat);
  EXPECT_EQ(flags_first->positionals, (std::vector<std::string>{"fix it", "now"}));
  auto chat = P({"chat", "fix", "the", "test"});
  ASSERT_TRUE(chat.ok()) << chat.error().ToString();
  EXPECT_EQ(chat->subcommand, Subcommand::kChat);
  EXPECT_EQ(chat->positionals, (std::vector<std::string>{"fix", "the", "test"}));
  // A single unknown word stays an error (a typo must not start a chat),
  // and says how to use it as a prompt.
  auto word = P({"frobnicate"});
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.error().message().find("agentloop chat frobnicate"), std::string::npos)
      << word.error().message();
}

TEST(ArgsTest, OtherAgentsFlagsAndCommandsPointToOurs) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "--output-format", "json", "x"}, "agentloop's is --output"},
      {{"run", "--dangerously-skip-permissions", "x"}, "agentloop's is --yolo"},
      {{"exec", "fix it"}, "agentloop's is `agentloop run PROMPT`"},
  };
  for (const auto& [argv, want] : cases) {
    auto a = P(argv);
    ASSERT_FALSE(a.ok()) << argv[1];
    EXPECT_NE(a.error().message().find(want), std::string::npos) << a.error().message();
  }
  // `echo "prompt" | agentloop -p`: the prompt is read from stdin.
  auto print = P({"-p"});
  ASSERT_TRUE(print.ok()) << print.error().ToString();
  EXPECT_EQ(print->subcommand, Subcommand::kRun);
  EXPECT_EQ(print->positionals, std::vector<std::string>{"-"});
  // The shortcuts are in the help and the completions.
  std::string help = UsageText(Subcommand::kNone);
  EXPECT_NE(help.find("-p, --print PROMPT"), std::string::npos);
  EXPECT_NE(help.find("-r, --resume"), std::string::npos);
  auto bash = CompletionScript("bash");
  ASSERT_TRUE(bash.ok());
  EXPECT_NE(bash->find("--print"), std::string::npos);
  EXPECT_NE(bash->find("--resume"), std::string::npos);
}

TEST(ArgsTest, YoloAllowsEverythingWithAWarning) {
  auto a = P({"run", "--yolo", "x"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(a->FlagValue("permissions.allow"), "*");
  ASSERT_EQ(a->config_flags.size(), 1u);
  EXPECT_EQ(a->config_flags[0].flag, "--yolo");
  ASSERT_EQ(a->warnings.size(), 1u);
  EXPECT_NE(a->warnings[0].find("without asking"), std::string::npos);
  EXPECT_FALSE(P({"sessions", "list", "--yolo"}).ok());
}

TEST(ArgsTest, AMistypedFlagOrSubcommandGetsASuggestion) {
  auto flag = P({"run", "--modle", "x", "hi"});
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.error().message().find("did you mean --model?"), std::string::npos)
      << flag.error().message();
  auto sub = P({"reusme", "abcd"});
  ASSERT_FALSE(sub.ok());
  EXPECT_NE(sub.error().message().find("did you mean `agentloop resume`?"), std::string::npos)
      << sub.error().message();
  // Nothing close: no guess.
  auto far = P({"run", "--zzzzzzzzz", "hi"});
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().message().find("did you mean"), std::string::npos);
}

TEST(ArgsTest, SessionsPruneTakesAnAge) {
  auto a = P({"sessions", "prune", "--older-than", "30d", "--all"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(a->older_than, std::chrono::milliseconds(30LL * 86'400'000));
  EXPECT_TRUE(a->all);
  EXPECT_EQ(*ParseAge("12h"), std::chrono::milliseconds(12LL * 3'600'000));
  EXPECT_EQ(*ParseAge("2w"), std::chrono::milliseconds(14LL * 86'400'000));
  EXPECT_EQ(*ParseAge("90m"), std::chrono::milliseconds(90LL * 60'000));
  for (const char* bad : {"30", "d", "-1d", "3x", "1.5d", "99999999999999999d"}) {
    EXPECT_FALSE(ParseAge(bad).ok()) << bad;
  }
  EXPECT_FALSE(P({"sessions", "prune"}).ok());  // the age is required
  EXPECT_FALSE(P({"run", "--all", "x"}).ok());  // only sessions takes --all
}

TEST(ArgsTest, ShowThinkingAndJsonListings) {
  auto a = P({"chat", "--show-thinking"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_TRUE(a->show_thinking);
  EXPECT_TRUE(P({"memory", "list", "--output", "json"}).ok());
  EXPECT_TRUE(P({"proposals", "list", "--output", "json"}).ok());
}

TEST(CompletionTest, ScriptsAndManPageComeFromTheFlagTable) {
  for (const char* shell : {"bash", "zsh", "fish", "man"}) {
    Result<std::string> s = CompletionScript(shell);
    ASSERT_TRUE(s.ok()) << shell;
    // Every subcommand and every flag of the table appears.
    for (const char* word : {"sessions", "approve", "completion", "acp", "show-thinking",
                             "older-than", "max-tool-calls", "workspace"}) {
      std::string w = word;
      if (std::string_view(shell) == "man") {  // roff writes a hyphen as \-
        w.clear();
        for (char c : std::string_view(word))
          w += c == '-' ? std::string("\\-") : std::string(1, c);
      }
      EXPECT_NE(s->find(w), std::string::npos) << shell << " lacks " << w;
    }
  }
  EXPECT_NE(CompletionScript("bash")->find("--output) COMPREPLY=($(compgen -W \"text json "
                                           "stream-json\""),
            std::string::npos);
  EXPECT_EQ(CompletionScript("man")->rfind(".TH AGENTLOOP 1", 0), 0u);
  EXPECT_NE(CompletionScript("man")->find("\\-\\-max\\-tool\\-calls"), std::string::npos);
  EXPECT_FALSE(CompletionScript("tcsh").ok());
  EXPECT_TRUE(P({"completion", "fish"}).ok());
  EXPECT_FALSE(P({"completion", "tcsh"}).ok());
}

}  // namespace
}  // namespace agentloop::cli
