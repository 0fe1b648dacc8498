#include <map>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "base/testing/text.h"
#include "tools/builtin.h"
#include "tools/test_util.h"
#include "tools/tools.h"

namespace agentloop::tools {
namespace {

// The permission rules know tools only by this metadata: a built-in tool
// that lost it would silently escape every path or command rule.
// The built-in tools build each spec once per process: every instance
// shares it (sessions' registries then share one list of specs); bash has
// one per maximum timeout.
TEST(BuiltinSpecsTest, InstancesShareOneSpec) {
  auto first = MakeBuiltinTools({});
  auto second = MakeBuiltinTools({});
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_NE(first[i]->shared_spec(), nullptr) << first[i]->spec().name;
    EXPECT_EQ(first[i]->shared_spec(), second[i]->shared_spec()) << first[i]->spec().name;
    EXPECT_EQ(first[i]->shared_spec().get(), &first[i]->spec()) << first[i]->spec().name;
  }
  BashToolOptions longer;
  longer.max_timeout_ms = 900000;
  BashTool a(longer), b(longer), standard;
  EXPECT_EQ(a.shared_spec(), b.shared_spec());
  EXPECT_NE(a.shared_spec(), standard.shared_spec());
  EXPECT_EQ(a.spec().input_schema["properties"]["timeout_ms"]["maximum"], 900000);
  EXPECT_EQ(standard.spec().input_schema["properties"]["timeout_ms"]["maximum"], 600000);
}

TEST(BuiltinSpecsTest, DeclareHowRulePatternsReadTheirCalls) {
  std::map<std::string, ToolSpec> specs;
  for (const auto& t : MakeBuiltinTools(BuiltinToolOptions{})) specs[t->spec().name] = t->spec();
  ASSERT_EQ(specs.count("bash"), 1u);
  EXPECT_EQ(specs["bash"].pattern_kind, RulePatternKind::kCommand);
  EXPECT_EQ(specs["bash"].pattern_args, std::vector<std::string>{"command"});
  for (const char* name : {"read", "write", "edit"}) {
    const ToolSpec& s = specs[name];
    EXPECT_EQ(s.pattern_kind, RulePatternKind::kPath) << name;
    EXPECT_EQ(s.pattern_args, std::vector<std::string>{"file_path"}) << name;
    EXPECT_TRUE(s.default_path.empty()) << name;
    EXPECT_FALSE(s.reads_files) << name;
    EXPECT_TRUE(s.input_schema["properties"].contains("file_path")) << name;
  }
  for (const char* name : {"grep", "glob", "ls"}) {
    const ToolSpec& s = specs[name];
    EXPECT_EQ(s.pattern_kind, RulePatternKind::kPath) << name;
    EXPECT_EQ(s.pattern_args, std::vector<std::string>{"path"}) << name;
    EXPECT_EQ(s.default_path, ".") << name;
    EXPECT_TRUE(s.reads_files) << name;
    EXPECT_TRUE(s.input_schema["properties"].contains("path")) << name;
  }
}

using testing::RunTool;
using testing::TempWorkspace;

using ::agentloop::testing::Has;

TEST(ReadToolTest, NumbersLinesLikeCatN) {
  TempWorkspace t;
  t.Write("f.txt", "alpha\nbeta\ngamma\n");
  ReadTool read;
  auto out = RunTool(read, t.ctx(), Json{{"file_path", "f.txt"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(out.content, "     1\talpha\n     2\tbeta\n     3\tgamma\n");
  EXPECT_TRUE(t.ctx().ledger->WasRead((t.ws() / "f.txt").string()));
}

TEST(ReadLedgerTest, ReplayMarksWhatSuccessfulFileCallsTouched) {
  TempWorkspace t;
  t.Write("read.txt", "r\n");
  t.Write("written.txt", "w\n");
  t.Write("failed.txt", "f\n");
  t.Write("grepped.txt", "g\n");
  Message calls;
  calls.role = Role::kAssistant;
  calls.content = {ContentBlock::ToolUse("a", "read", Json{{"file_path", "read.txt"}}),
                   ContentBlock::ToolUse("b", "write", Json{{"file_path", "written.txt"}}),
                   ContentBlock::ToolUse("c", "edit", Json{{"file_path", "failed.txt"}}),
                   ContentBlock::ToolUse("d", "grep", Json{{"path", "grepped.txt"}}),
                   ContentBlock::ToolUse("e", "read", Json{{"file_path", "gone.txt"}})};
  Message results;
  results.role = Role::kUser;
  results.content = {
      ContentBlock::ToolResult("a", "ok", false), ContentBlock::ToolResult("b", "ok", false),
      ContentBlock::ToolResult("c", "no match", true), ContentBlock::ToolResult("d", "ok", false),
      ContentBlock::ToolResult("e", "ok", false)};
  std::vector<Message> history = {Message::User("go"), calls, results};
  ReadLedger ledger;
  ReplayReadLedger(history, t.ctx(), ledger);
  EXPECT_TRUE(ledger.WasRead((t.ws() / "read.txt").string()));
  EXPECT_TRUE(ledger.WasRead((t.ws() / "written.txt").string()));
  EXPECT_FALSE(ledger.WasRead((t.ws() / "failed.txt").string()));
  EXPECT_FALSE(ledger.WasRead((t.ws() / "grepped.txt").string()));
  EXPECT_FALSE(ledger.WasRead((t.ws() / "gone.txt").string()));
}

TEST(ReadToolTest, OffsetLimitAndMoreRemainsNote) {
  TempWorkspace t;
  std::string text;
  for (int i = 1; i <= 3000; ++i) text += "line " + std::to_string(i) + "\n";
  t.Write("big.txt", text);
  ReadTool read;
  auto out = RunTool(read, t.ctx(), Json{{"file_path", "big.txt"}});
  EXPECT_TRUE(Has(out.content, "  2000\tline 2000\n"));
  EXPECT_FALSE(Has(out.content, "\tline 2001\n"));
  EXPECT_TRUE(Has(out.content, "Showing lines 1-2000 of 3000"))
      << out.content.substr(out.content.size() - 200);
  EXPECT_TRUE(Has(out.content, "offset=2001"));
  out = RunTool(read, t.ctx(), Json{{"file_path", "big.txt"}, {"offset", 2999}, {"limit", 5}});
  EXPECT_EQ(out.content, "  2999\tline 2999\n  3000\tline 3000\n");
  out = RunTool(read, t.ctx(), Json{{"file_path", "big.txt"}, {"offset", 4000}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "has 3000 lines"));
}

TEST(ReadToolTest, HugeFileIsPagedNotLoaded) {
  TempWorkspace t;
  // 200 MB sparse file of zero bytes is binary; a huge text file is paged.
  std::string line(99, 'x');
  line += '\n';
  {
    std::ofstream f(t.ws() / "huge.txt", std::ios::binary);
    for (int i = 0; i < 300000; ++i) f << line;  // 30 MB
  }
  ReadTool read;
  auto out = RunTool(read, t.ctx(), Json{{"file_path", "huge.txt"}, {"offset", 299999}});
  EXPECT_FALSE(out.is_error);
  EXPECT_TRUE(Has(out.content, "299999\t"));
  EXPECT_TRUE(Has(out.content, "300000\t"));
  out = RunTool(read, t.ctx(), Json{{"file_path", "huge.txt"}});
  EXPECT_LE(out.content.size(), 256u * 1024 + 500);
  EXPECT_TRUE(Has(out.content, "of 300000"));
}

TEST(ReadToolTest, LongLinesAreCutWithAMarker) {
  TempWorkspace t;
  t.Write("long.txt", std::string(5000, 'a') + "\nshort\n");
  ReadTool read;
  auto out = RunTool(read, t.ctx(), Json{{"file_path", "long.txt"}});
  EXPECT_TRUE(Has(out.content, "[... line truncated, 3000 more bytes]"));
  EXPECT_TRUE(Has(out.content, "     2\tshort\n"));
  EXPECT_FALSE(Has(out.content, std::string(2001, 'a')));
}

TEST(ReadToolTest, AwkwardFiles) {
  TempWorkspace t;
  t.Write("empty.txt", "");
  t.Write("bin.dat", std::string("\x7f"
                                 "ELF\0\0\0\x01",
                                 8) +
                         std::string(100, '\0'));
  t.Write("crlf.txt", "one\r\ntwo\r\n");
  t.Write("latin1.txt", "caf\xe9\n");
  t.Write("nonl.txt", "no newline");
  std::filesystem::create_directories(t.ws() / "dir");
  ReadTool read;
  auto out = RunTool(read, t.ctx(), Json{{"file_path", "empty.txt"}});
  EXPECT_FALSE(out.is_error);
  EXPECT_TRUE(Has(out.content, "is empty"));
  out = RunTool(read, t.ctx(), Json{{"file_path", "bin.dat"}});
  EXPECT_TRUE(Has(out.content, "binary file"));
  out = RunTool(read, t.ctx(), Json{{"file_path", "crlf.txt"}});
  EXPECT_TRUE(Has(out.content, "     1\tone\n     2\ttwo\n"));
  EXPECT_FALSE(Has(out.content, "\r"));
  EXPECT_TRUE(Has(out.content, "CRLF"));
  out = RunTool(read, t.ctx(), Json{{"file_path", "latin1.txt"}});
  EXPECT_TRUE(Has(out.content, "caf\xef\xbf\xbd"));  // U+FFFD, valid UTF-8 for the model
  out = RunTool(read, t.ctx(), Json{{"file_path", "nonl.txt"}});
  EXPECT_EQ(out.content, "     1\tno newline\n");
  out = RunTool(read, t.ctx(), Json{{"file_path", "dir"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "directory"));
  out = RunTool(read, t.ctx(), Json{{"file_path", "nope.txt"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "not found"));
  // A FIFO with no writer: refused at once, not waited on.
  ASSERT_EQ(mkfifo((t.ws() / "pipe").c_str(), 0600), 0);
  out = RunTool(read, t.ctx(), Json{{"file_path", "pipe"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "not a regular file")) << out.content;
}

// Files under the read tool's map threshold are read, larger ones mapped:
// both paths give the same lines.
TEST(ReadToolTest, SmallAndMappedFilesReadAlike) {
  TempWorkspace t;
  std::string small;
  for (int i = 1; i <= 100; ++i) small += "row " + std::to_string(i) + "\n";
  std::string big = small;
  while (big.size() < (2u << 20)) big += std::string(80, 'y') + "\n";
  t.Write("small.txt", small);
  t.Write("big.txt", big);
  ReadTool read;
  auto a = RunTool(read, t.ctx(), Json{{"file_path", "small.txt"}, {"offset", 40}, {"limit", 3}});
  auto b = RunTool(read, t.ctx(), Json{{"file_path", "big.txt"}, {"offset", 40}, {"limit", 3}});
  const std::string lines = "    40\trow 40\n    41\trow 41\n    42\trow 42\n";
  EXPECT_FALSE(a.is_error);
  EXPECT_FALSE(b.is_error);
  EXPECT_EQ(a.content.substr(0, lines.size()), lines) << a.content;
  EXPECT_EQ(b.content.substr(0, lines.size()), lines) << b.content;
}

TEST(WriteToolTest, CreatesParentsAndRefusesUnreadOverwrite) {
  TempWorkspace t;
  WriteTool write;
  auto out = RunTool(write, t.ctx(), Json{{"file_path", "a/b/c.txt"}, {"content", "hello\n"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(t.Slurp("a/b/c.txt"), "hello\n");

  t.Write("existing.txt", "old");
  out = RunTool(write, t.ctx(), Json{{"file_path", "existing.txt"}, {"content", "new"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "has not been read"));
  EXPECT_EQ(t.Slurp("existing.txt"), "old");

  ReadTool read;
  RunTool(read, t.ctx(), Json{{"file_path", "existing.txt"}});
  out = RunTool(write, t.ctx(), Json{{"file_path", "existing.txt"}, {"content", "new"}});
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(t.Slurp("existing.txt"), "new");

  // A file the session wrote itself may be overwritten again.
  out = RunTool(write, t.ctx(), Json{{"file_path", "a/b/c.txt"}, {"content", "again"}});
  EXPECT_FALSE(out.is_error);
}

TEST(WriteToolTest, KeepsModeAndWorksWithoutLedger) {
  TempWorkspace t;
  t.Write("run.sh", "#!/bin/sh\n");
  chmod((t.ws() / "run.sh").c_str(), 0755);
  t.ctx().ledger = nullptr;
  WriteTool write;
  auto out =
      RunTool(write, t.ctx(), Json{{"file_path", "run.sh"}, {"content", "#!/bin/sh\necho\n"}});
  EXPECT_FALSE(out.is_error) << out.content;
  struct stat st;
  ASSERT_EQ(stat((t.ws() / "run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // No temporary files left behind.
  int n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(t.ws())) ++n;
  EXPECT_EQ(n, 1);
}

class EditToolTest : public ::testing::Test {
 protected:
  ToolOutput Edit(const std::string& file, const std::string& old_s, const std::string& new_s,
                  bool all = false) {
    ReadTool read;
    RunTool(read, t_.ctx(), Json{{"file_path", file}});
    EditTool edit;
    Json in{{"file_path", file}, {"old_string", old_s}, {"new_string", new_s}};
    if (all) in["replace_all"] = true;
    return RunTool(edit, t_.ctx(), in);
  }
  TempWorkspace t_;
};

TEST_F(EditToolTest, ReplacesExactlyOnceAndShowsTheRegion) {
  t_.Write("f.cc", "int a = 1;\nint b = 2;\nint c = 3;\n");
  auto out = Edit("f.cc", "int b = 2;", "int b = 20;\nint bb = 21;");
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(t_.Slurp("f.cc"), "int a = 1;\nint b = 20;\nint bb = 21;\nint c = 3;\n");
  EXPECT_TRUE(Has(out.content, "     2\tint b = 20;\n     3\tint bb = 21;\n"));
  EXPECT_TRUE(Has(out.content, "     1\tint a = 1;"));
}

TEST_F(EditToolTest, DetailsCarryTheChangeAsAUnifiedDiff) {
  t_.Write("f.cc", "int a = 1;\nint b = 2;\nint c = 3;\n");
  auto out = Edit("f.cc", "int b = 2;", "int b = 20;");
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(out.details.value("diff", ""),
            "--- a/f.cc\n+++ b/f.cc\n@@ -1,3 +1,3 @@\n int a = 1;\n-int b = 2;\n+int b = 20;\n"
            " int c = 3;\n");
}

TEST(WriteToolTest, DetailsCarryTheChangeAsAUnifiedDiff) {
  TempWorkspace t;
  WriteTool write;
  auto out = RunTool(write, t.ctx(), Json{{"file_path", "n.txt"}, {"content", "x\n"}});
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(out.details.value("diff", ""), "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+x\n");
  out = RunTool(write, t.ctx(), Json{{"file_path", "n.txt"}, {"content", "y\n"}});
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(out.details.value("diff", ""), "--- a/n.txt\n+++ b/n.txt\n@@ -1 +1 @@\n-x\n+y\n");
  out = RunTool(write, t.ctx(), Json{{"file_path", "n.txt"}, {"content", "y\n"}});
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_FALSE(out.details.contains("diff"));  // nothing changed
}

TEST_F(EditToolTest, TwoMatchesNameTheLinesUnlessReplaceAll) {
  t_.Write("f.txt", "x = 1\ny = 2\nx = 1\n");
  auto out = Edit("f.txt", "x = 1", "x = 9");
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "occurs 2 times"));
  EXPECT_TRUE(Has(out.content, "lines 1, 3"));
  EXPECT_EQ(t_.Slurp("f.txt"), "x = 1\ny = 2\nx = 1\n");
  out = Edit("f.txt", "x = 1", "x = 9", /*all=*/true);
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(t_.Slurp("f.txt"), "x = 9\ny = 2\nx = 9\n");
}

TEST_F(EditToolTest, ZeroMatchesPointAtCandidates) {
  t_.Write("f.py", "def f():\n    return 1\n\ndef g():\n    return 2\n");
  auto out = Edit("f.py", "def g():\n  return 2", "def g():\n  return 3");
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "not found"));
  EXPECT_TRUE(Has(out.content, "line(s) 4"));
}

TEST_F(EditToolTest, PreservesCrlfMissingNewlineAndNonUtf8Bytes) {
  t_.Write("win.txt", "caf\xe9 one\r\ntwo\r\nthree");
  // The model sends LF; the file has CRLF.
  auto out = Edit("win.txt", "one\ntwo", "one\nTWO\nextra");
  EXPECT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(t_.Slurp("win.txt"), "caf\xe9 one\r\nTWO\r\nextra\r\nthree");
  out = Edit("win.txt", "three", "3");
  EXPECT_FALSE(out.is_error);
  EXPECT_EQ(t_.Slurp("win.txt"), "caf\xe9 one\r\nTWO\r\nextra\r\n3");
}

TEST_F(EditToolTest, RequiresAPriorReadAndRejectsNoOps) {
  t_.Write("f.txt", "abc\n");
  EditTool edit;
  auto out = RunTool(edit, t_.ctx(),
                     Json{{"file_path", "f.txt"}, {"old_string", "abc"}, {"new_string", "x"}});
  EXPECT_TRUE(out.is_error);
  EXPECT_TRUE(Has(out.content, "has not been read"));
  EXPECT_EQ(t_.Slurp("f.txt"), "abc\n");
  out = Edit("f.txt", "abc", "abc");
  EXPECT_TRUE(out.is_error);
  out = Edit("f.txt", "", "x");
  EXPECT_TRUE(out.is_error);
  out = Edit("missing.txt", "a", "b");
  EXPECT_TRUE(out.is_error);
}

// A front end's copy of the files (an editor's buffers): what the tools
// read and write through ToolContext::files.
class BufferFiles final : public FileTextAccess {
 public:
  std::map<std::string, std::string> text;
  std::vector<std::string> calls;
  Result<std::string> ReadText(const std::string& abs, std::stop_token) override {
    calls.push_back("read " + abs);
    auto it = text.find(abs);
    if (it == text.end()) return NotFound("no buffer for " + abs);
    return it->second;
  }
  Status WriteText(const std::string& abs, const std::string& t, std::stop_token) override {
    calls.push_back("write " + abs);
    text[abs] = t;
    return Status::Ok();
  }
};

TEST(FileTextAccessTest, ReadWriteAndEditUseTheFrontEndsText) {
  TempWorkspace t;
  t.Write("f.txt", "on disk\n");
  auto files = std::make_shared<BufferFiles>();
  const std::string abs = (t.ws() / "f.txt").string();
  files->text[abs] = "unsaved buffer\n";
  t.ctx().files = files;

  ReadTool read;
  ToolOutput out = RunTool(read, t.ctx(), Json{{"file_path", "f.txt"}});
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(out.content, "     1\tunsaved buffer\n");

  EditTool edit;
  out = RunTool(edit, t.ctx(),
                Json{{"file_path", "f.txt"}, {"old_string", "unsaved"}, {"new_string", "edited"}});
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(files->text[abs], "edited buffer\n");
  EXPECT_NE(out.details["diff"].get<std::string>().find("+edited buffer"), std::string::npos);

  WriteTool write;
  out = RunTool(write, t.ctx(), Json{{"file_path", "new/g.txt"}, {"content", "fresh\n"}});
  ASSERT_FALSE(out.is_error) << out.content;
  EXPECT_EQ(files->text[(t.ws() / "new" / "g.txt").string()], "fresh\n");
  // The files on disk are the front end's to save.
  EXPECT_EQ(t.Slurp("f.txt"), "on disk\n");
  EXPECT_FALSE(std::filesystem::exists(t.ws() / "new" / "g.txt"));
}

// The path is checked as always before the front end is asked: nothing
// outside the workspace, nothing a deny rule covers, no write of an unread
// file.
TEST(FileTextAccessTest, ConfinementAndRulesComeFirst) {
  TempWorkspace t;
  t.Write(t.outside() / "secret.txt", "s\n");
  t.Write("kept.txt", "k\n");
  auto files = std::make_shared<BufferFiles>();
  t.ctx().files = files;
  t.ctx().path_rule = [](std::string_view, const std::string& abs) {
    return abs.ends_with("kept.txt") ? PathRule::kDeny : PathRule::kNone;
  };
  ReadTool read;
  WriteTool write;
  EXPECT_TRUE(
      RunTool(read, t.ctx(), Json{{"file_path", (t.outside() / "secret.txt").string()}}).is_error);
  EXPECT_TRUE(
      RunTool(write, t.ctx(), Json{{"file_path", "../outside/x.txt"}, {"content", "x"}}).is_error);
  EXPECT_TRUE(RunTool(read, t.ctx(), Json{{"file_path", "kept.txt"}}).is_error);
  t.ctx().path_rule = nullptr;
  EXPECT_TRUE(RunTool(write, t.ctx(), Json{{"file_path", "kept.txt"}, {"content", "x"}}).is_error);
  EXPECT_TRUE(files->calls.empty());
}

TEST(ToolSpecsTest, NamesArgumentsAndFlagsAreTheContract) {
  struct Expect {
    std::unique_ptr<Tool> tool;
    const char* name;
    std::vector<std::string> args;
    std::vector<std::string> required;
    bool mutates;
    bool parallel_safe;
  };
  std::vector<Expect> all;
  all.push_back({std::make_unique<ReadTool>(),
                 "read",
                 {"file_path", "offset", "limit"},
                 {"file_path"},
                 false,
                 true});
  all.push_back({std::make_unique<WriteTool>(),
                 "write",
                 {"file_path", "content"},
                 {"file_path", "content"},
                 true,
                 false});
  all.push_back({std::make_unique<EditTool>(),
                 "edit",
                 {"file_path", "old_string", "new_string", "replace_all"},
                 {"file_path", "old_string", "new_string"},
                 true,
                 false});
  all.push_back({std::make_unique<GrepTool>(),
                 "grep",
                 {"pattern", "path", "glob", "type", "output_mode", "case_insensitive", "context",
                  "head_limit", "multiline"},
                 {"pattern"},
                 false,
                 true});
  all.push_back(
      {std::make_unique<GlobTool>(), "glob", {"pattern", "path"}, {"pattern"}, false, true});
  all.push_back({std::make_unique<LsTool>(), "ls", {"path", "ignore"}, {}, false, true});
  all.push_back({std::make_unique<BashTool>(),
                 "bash",
                 {"command", "timeout_ms", "description"},
                 {"command"},
                 true,
                 false});
  for (const auto& e : all) {
    const ToolSpec& s = e.tool->spec();
    EXPECT_EQ(s.name, e.name);
    EXPECT_FALSE(s.description.empty());
    EXPECT_EQ(s.mutates, e.mutates) << e.name;
    EXPECT_EQ(s.parallel_safe, e.parallel_safe) << e.name;
    EXPECT_EQ(s.input_schema["type"], "object");
    EXPECT_EQ(s.input_schema["additionalProperties"], false);
    std::vector<std::string> args;
    for (auto& [k, v] : s.input_schema["properties"].items()) {
      args.push_back(k);
      EXPECT_TRUE(v.contains("type")) << e.name << "." << k;
      EXPECT_TRUE(v.contains("description")) << e.name << "." << k;
    }
    EXPECT_EQ(args, e.args) << e.name;
    std::vector<std::string> required;
    if (s.input_schema.contains("required")) {
      for (auto& r : s.input_schema["required"]) required.push_back(r.get<std::string>());
    }
    EXPECT_EQ(required, e.required) << e.name;
  }
  // Unknown arguments are rejected by the schema.
  Status bad = ValidateAgainstSchema(Json{{"file_path", "x"}, {"path", "y"}},
                                     ReadTool().spec().input_schema);
  EXPECT_FALSE(bad.ok());
  bad = ValidateAgainstSchema(Json{{"pattern", "x"}, {"output_mode", "lines"}},
                              GrepTool().spec().input_schema);
  EXPECT_FALSE(bad.ok());
}

TEST(BuiltinToolsTest, SevenToolsInOrderWithOptionsApplied) {
  BuiltinToolOptions o;
  o.bash_max_timeout_ms = 5000;
  auto tools = MakeBuiltinTools(o);
  std::vector<std::string> names;
  for (const auto& t : tools) names.push_back(t->spec().name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"read", "write", "edit", "grep", "glob", "ls", "bash"}));
  EXPECT_EQ(tools[6]->spec().input_schema["properties"]["timeout_ms"]["maximum"], 5000);
}

}  // namespace
}  // namespace agentloop::tools
