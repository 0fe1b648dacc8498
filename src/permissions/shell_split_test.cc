#include "permissions/shell_split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentloop::permissions {
namespace {

using ::testing::ElementsAreArray;

std::vector<std::string> Texts(const CommandLine& line) {
  std::vector<std::string> out;
  for (const auto& c : line.commands) out.push_back(c.text);
  return out;
}

struct SplitCase {
  const char* line;
  std::vector<std::string> commands;
  bool complete;
};

class SplitTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitTest, Splits) {
  const SplitCase& c = GetParam();
  CommandLine got = SplitCommandLine(c.line);
  EXPECT_THAT(Texts(got), ElementsAreArray(c.commands)) << "line: " << c.line;
  EXPECT_EQ(got.complete, c.complete) << "line: " << c.line << " problem: " << got.problem;
}

INSTANTIATE_TEST_SUITE_P(
    Table, SplitTest,
    ::testing::Values(
        SplitCase{"git status", {"git status"}, true},
        SplitCase{"  git   status  ", {"git status"}, true},
        SplitCase{"git status && rm -rf x", {"git status", "rm -rf x"}, true},
        SplitCase{"a || b; c & d", {"a", "b", "c", "d"}, true},
        SplitCase{"ls | grep x |& tee y", {"ls", "grep x", "tee y"}, true},
        SplitCase{"a\nb\n\nc", {"a", "b", "c"}, true},
        SplitCase{"echo 'a && b; c'", {"echo 'a && b; c'"}, true},
        SplitCase{"echo \"a | b\" && ls", {"echo \"a | b\"", "ls"}, true},
        SplitCase{"echo a\\;b", {"echo a\\;b"}, true},
        SplitCase{"(cd x && make) ; ls", {"cd x", "make", "ls"}, true},
        SplitCase{"echo $(rm -rf /)", {"rm -rf /", "echo $(rm -rf /)"}, true},
        SplitCase{"echo \"$(whoami) is here\"", {"whoami", "echo \"$(whoami) is here\""}, true},
        SplitCase{"echo `id`", {"id", "echo `id`"}, true},
        SplitCase{"echo \"`id`\"", {"id", "echo \"`id`\""}, true},
        SplitCase{"echo $(echo $(id))", {"id", "echo $(id)", "echo $(echo $(id))"}, true},
        SplitCase{"diff <(ls a) <(ls b)", {"ls a", "ls b", "diff <(ls a) <(ls b)"}, true},
        SplitCase{"if git diff; then make; fi", {"git diff", "make"}, true},
        SplitCase{"{ rm x; }", {"rm x"}, true},
        SplitCase{"git status # && rm -rf x", {"git status"}, true},
        SplitCase{"echo a#b", {"echo a#b"}, true},
        SplitCase{"ls 2>&1 | cat", {"ls 2>& 1", "cat"}, true},
        SplitCase{"echo $((1 + 2))", {"echo $((1 + 2))"}, true},
        SplitCase{"echo ${HOME:-x}", {"echo ${HOME:-x}"}, true},
        SplitCase{"arr=(a b) && ls", {"arr=(a b)", "ls"}, true},
        SplitCase{"bash -c 'rm -rf x'", {"bash -c 'rm -rf x'", "rm -rf x"}, true},
        SplitCase{"sh -ec \"a; b\"", {"sh -ec \"a; b\"", "a", "b"}, true},
        SplitCase{"eval 'ls; rm y'", {"eval 'ls; rm y'", "ls", "rm y"}, true},
        SplitCase{"cat <<'EOF' > f.txt\nrm -rf x\nEOF\nls", {"cat << 'EOF' > f.txt", "ls"}, true},
        SplitCase{"cat <<EOF\n$(rm -rf x)\nEOF", {"cat << EOF", "rm -rf x"}, true},
        SplitCase{"cat <<-EOF\n\tdata\n\tEOF\necho done", {"cat <<- EOF", "echo done"}, true},
        SplitCase{"ec\\\nho hi", {"echo hi"}, true}, SplitCase{"", {}, true},
        // Incomplete lines.
        SplitCase{"echo 'unterminated", {"echo 'unterminated"}, false},
        SplitCase{"echo \"unterminated", {"echo \"unterminated"}, false},
        SplitCase{"echo $(ls", {"ls", "echo $(ls"}, false}, SplitCase{"ls )", {"ls"}, false},
        SplitCase{"echo ${x:-$(rm -rf y)}", {"echo ${x:-$(rm -rf y)}"}, false},
        SplitCase{"cat <<EOF\nno end", {"cat << EOF"}, false}));

TEST(SplitTest, BareFormStripsAssignmentsWrappersAndDirectories) {
  struct Case {
    const char* line;
    const char* bare;
  };
  for (const Case& c : std::vector<Case>{{"FOO=1 rm -rf x", "rm -rf x"},
                                         {"sudo -u root /bin/rm x", "rm x"},
                                         {"env A=b command 'rm' x", "rm x"},
                                         {"timeout 10 rm x", "rm x"},
                                         {"\\rm x", "rm x"},
                                         {"xargs -I{} rm {}", "rm {}"},
                                         {"git status", "git status"}}) {
    CommandLine line = SplitCommandLine(c.line);
    ASSERT_FALSE(line.commands.empty()) << c.line;
    EXPECT_EQ(line.commands[0].bare, c.bare) << c.line;
  }
}

TEST(SplitTest, DetectsOutputRedirection) {
  struct Case {
    const char* line;
    bool writes;
  };
  for (const Case& c : std::vector<Case>{{"git status > out.txt", true},
                                         {"git status>out.txt", true},
                                         {"git log >> log", true},
                                         {"make &> build.log", true},
                                         {"ls 2>/dev/null", false},
                                         {"ls 2>&1", false},
                                         {"ls >&2", false},
                                         {"ls > /dev/null 2>&1", false},
                                         {"cat < in.txt", false},
                                         {"cat <<< 'x'", false},
                                         {"git status", false}}) {
    CommandLine line = SplitCommandLine(c.line);
    ASSERT_EQ(line.commands.size(), 1u) << c.line;
    EXPECT_EQ(line.commands[0].writes_file, c.writes) << c.line;
    EXPECT_TRUE(line.complete) << c.line;
  }
}

TEST(SplitTest, DeepNestingIsIncompleteNotACrash) {
  std::string line;
  for (int i = 0; i < 200; ++i) line += "$(";
  line += "ls";
  for (int i = 0; i < 200; ++i) line += ")";
  CommandLine got = SplitCommandLine(line);
  EXPECT_FALSE(got.complete);
}

TEST(UnquoteWordTest, Table) {
  EXPECT_EQ(UnquoteWord("'a b'"), "a b");
  EXPECT_EQ(UnquoteWord("\"a\\\"b\""), "a\"b");
  EXPECT_EQ(UnquoteWord("a\\ b"), "a b");
  EXPECT_EQ(UnquoteWord("$'a\\nb'"), "a\nb");
  EXPECT_EQ(UnquoteWord("r'm'"), "rm");
}

}  // namespace
}  // namespace agentloop::permissions

namespace agentloop::permissions {
namespace {

// Random lines made of shell metacharacters: the splitter must terminate,
// never produce an empty command, and never read out of bounds (run under
// ASan in CI).
TEST(SplitTest, RandomMetacharacterSoup) {
  const std::string alphabet = "ab $()`'\"\\;&|<>\n#{}=-c\t2*";
  uint64_t state = 42;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  for (int i = 0; i < 3000; ++i) {
    std::string line;
    size_t len = next() % 40;
    for (size_t k = 0; k < len; ++k) line.push_back(alphabet[next() % alphabet.size()]);
    CommandLine got = SplitCommandLine(line);
    for (const auto& c : got.commands) EXPECT_FALSE(c.text.empty()) << line;
    if (!got.complete) {
      EXPECT_FALSE(got.problem.empty()) << line;
    }
  }
}

}  // namespace
}  // namespace agentloop::permissions
