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
        SplitCase{
            "echo $HOME ${HOME} $1 ${10} $? ${#}", {"echo $HOME ${HOME} $1 ${10} $? ${#}"}, true},
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
        SplitCase{"echo ${x:-$(rm -rf y)}", {"rm -rf y", "echo ${x:-$(rm -rf y)}"}, false},
        SplitCase{"echo $((1 + 2))", {"echo $((1 + 2))"}, false},
        SplitCase{"echo $((1<<2))\nrm x\n2))", {"echo $((1<<2))", "rm x", "2"}, false},
        SplitCase{"echo ${HOME:-x}", {"echo ${HOME:-x}"}, false},
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

namespace agentloop::permissions {
namespace {

bool Names(const CommandLine& line, const std::string& program) {
  for (const auto& c : line.commands) {
    for (const auto& p : c.programs) {
      if (p == program) return true;
    }
  }
  return false;
}

// Lines where bash runs `rm` (checked with bash 5.2): the reader must either
// name `rm` or call the line incomplete. Each of these hid `rm` from an
// earlier version of the reader, or is a sample of such a class.
TEST(SplitTest, LinesThatSmuggleACommandAreIncompleteOrNamed) {
  for (const char* line : {
           "ls \r#; rm -rf x",                            // CR is a word character
           "echo ${x:-\"}\"} ; rm -rf x\necho \"",        // quote inside ${...}
           "echo ${x:-<(rm -rf y)}",                      // process substitution in ${...}
           "echo `echo \\`rm -rf x\\``",                  // escaped backquotes nested
           "echo $[1<<2]\nrm -rf x\n2]",                  // $[...] holding <<
           "((x<<EOF))\nrm -rf x\nEOF",                   // ((...)) holding <<
           "cat <<EOF\nEO\\\nF\nrm -rf x\nEOF",           // delimiter line continued
           "echo $((1<<2))\nrm -rf x\n2))",               // $((...)) holding <<
           "ls `echo '`rm x`'`",                          // backquote ends at the first one
           "eval $'ls\\x3brm x'",                         // ... passed to eval
           "bash -c $'ls\\x3b rm x'",                     // ... passed to bash -c
           "x=rm; $x -rf y",                              // program is an expansion
           "/bin/r? -rf y",                               // program is a glob
           "{rm,-rf,y}",                                  // brace expansion
           "timeout {1,rm} y",                            // brace expansion as an operand
           "f() { rm -rf y; }; f",                        // function definition
           "case x in x) rm -rf y;; esac",                // case
           "for i in 1; do rm -rf y; done",               // for
           "coproc rm -rf y",                             // coproc
           "[[ -n $(rm -rf y) ]]",                        // [[ ]]
           "let 'x=a[$(rm -rf y)]'",                      // arithmetic in let
           "a[$x]=1 ls",                                  // array subscript
           "shopt -s expand_aliases\nalias ls=rm\nls x",  // aliases
           "command -p rm x",                             // wrapper options
           "env -S 'rm x'",                               // env -S
           "env -i A=b rm x",                             //
           "sudo -u root -- rm x",                        //
           "exec -a name rm x",                           //
           "nice -n 5 rm x",                              //
           "timeout -s KILL 5 rm x",                      //
           "stdbuf -oL rm x",                             //
           "time -p rm x",                                //
           "xargs -I{} rm {}",                            //
           "bash -xc 'rm x'",                             // option clusters
           "bash -c -- 'rm x'",                           //
           "sh -o errexit -c 'rm x'",                     //
           "bash --norc -c 'rm x'",                       //
           "find . -exec rm {} ;",                        // find -exec
           "find . -execdir rm {} +",                     //
           "trap 'rm x' EXIT",                            // trap
           "watch rm x",                                  // unmodelled runners
           "ls >(rm x)",                                  //
           "ls > >(rm x)",                                //
           "cat <<< $(rm x)",                             // here-string
           "cat <<EOF\n$(rm x)\nEOF",                     // expanding here-document
           "echo \"$(echo \")\"; rm x)\"",                // nested quotes in $(...)
           "ls &\\\n& rm x",                              // continuation between operators
           "ls |& rm x",                                  //
           "ls\x01; rm x",                                // control character
           "bash -m rm",                                  // a script found in PATH
           "source rm",                                   //
           ". rm",                                        //
           "setsid -f rm x",                              // outlives its line
       }) {
    CommandLine got = SplitCommandLine(line);
    EXPECT_TRUE(!got.complete || Names(got, "rm")) << "line: " << line;
  }
}

TEST(SplitTest, RefusedConstructsAreIncomplete) {
  for (const char* line : {
           "ls \r",
           "echo $((1))",
           "echo $[1]",
           "((x=1))",
           "echo ${x:-y}",
           "echo ${#x}",
           "echo ${x/a/b}",
           "echo `ls \\`x\\``",
           "x=rm; $x y",
           "/bin/r? x",
           "{ls,x}",
           "f() { ls; }",
           "function f { ls; }",
           "case x in *) ls;; esac",
           "for i in a; do ls; done",
           "select x in a; do ls; done",
           "coproc ls",
           "[[ a < b ]]",
           "let x=1",
           "a[1]=2",
           "declare -i x=y",
           "alias ls=rm",
           "shopt -s expand_aliases",
           "set -H",
           "bash -ic ls",
           "bash -O extglob -c ls",
           "env -S 'ls'",
           "env --split-string=ls",
           "timeout --bogus 5 ls",
           "sudo -s ls",
           "command -x ls",
           "xargs git log",
           "xargs sh -c ls",
           "ls | xargs -0 sed -n p",
           "ssh host ls",
           "watch ls",
           "flock /tmp/l ls",
           "find . -exec ls {}",
           "find . -exec {} ;",
           "cat <<$x\nls\n$x",
           "$(cat <<EOF\nls\nEOF\n)",
           "cat <<EOF\nls\\\nEOF",
           "ls ;;",
           "eval $x",
           "bash -c \"$x\"",
           "trap \"$x\" EXIT",
           "ls &\\\n& ls",
           "timeout $t ls",
           "ls\x7f",
           "test -v 'a[$(rm x)]'",
           "[ -R 'a[$(rm x)]' ]",
           "printf -v 'a[$(rm x)]' %s 1",
           "read 'a[$(rm x)]'",
           "PATH=. ls",
           "export PATH=.",
           "env PATH=. ls",
           "BASH_ENV=x bash -c ls",
           "PS4='$(rm x)' bash -xc ls",
           "declare LD_PRELOAD=x",
           "read PATH",
           "time for i in a; do ls; done",
           "time case x in x) ls; esac",
           "! time { ls; }",
       }) {
    CommandLine got = SplitCommandLine(line);
    EXPECT_FALSE(got.complete) << "line: " << line;
    EXPECT_FALSE(got.problem.empty()) << "line: " << line;
  }
}

TEST(SplitTest, UnderstoodConstructsStayComplete) {
  for (const char* line : {
           "ls -la",
           "git status && git diff | cat",
           "echo $HOME ${HOME} \"$1\" $?",
           "ls \\\n  -la",
           "cat <<EOF\nhello $USER\nEOF",
           "cat <<'EOF'\n$(x) \\\nEOF",
           "[ -f x ] && ls",
           "test -f x",
           "x=(a b) && ls",
           "FOO=1 ls",
           "if ls; then ls; fi",
           "while ls; do ls; done",
           "{ ls; }",
           "! ls",
           "xargs -I{} grep x {}",
           "xargs -0 wc -l",
           "env A=b ls",
           "timeout 5 ls",
           "bash -c 'ls -la'",
           "sh -ec 'ls; ls'",
           "find . -name x -exec grep -l y {} +",
           "command -v ls",
           "ls $'a\\tb'",
           "set -euo pipefail",
           "trap - EXIT",
           "echo \"a`ls`b\"",
           "if (cd x && ls); then ls; fi",
           "! (ls)",
           "{ (ls); }",
           "while (ls); do (ls); done",
       }) {
    CommandLine got = SplitCommandLine(line);
    EXPECT_TRUE(got.complete) << "line: " << line << " problem: " << got.problem;
  }
}

TEST(SplitTest, WrappersExposeTheProgramTheyRun) {
  struct Case {
    const char* line;
    std::vector<std::string> programs;
    const char* inner;
  };
  for (const Case& c : std::vector<Case>{
           {"command -p rm x", {"command", "rm"}, "rm x"},
           {"env -i -u HOME A=b rm x", {"env", "rm"}, "rm x"},
           {"env - rm x", {"env", "rm"}, "rm x"},
           {"sudo -u x -- rm y", {"sudo", "rm"}, "rm y"},
           {"sudo -E A=1 rm y", {"sudo", "rm"}, "rm y"},
           {"doas -u x rm y", {"doas", "rm"}, "rm y"},
           {"exec -a name rm y", {"exec", "rm"}, "rm y"},
           {"exec -cl rm y", {"exec", "rm"}, "rm y"},
           {"nice -n5 rm y", {"nice", "rm"}, "rm y"},
           {"nice -10 rm y", {"nice", "rm"}, "rm y"},
           {"nohup rm y", {"nohup", "rm"}, "rm y"},
           {"timeout -k 1 --signal=KILL 5 rm y", {"timeout", "rm"}, "rm y"},
           {"stdbuf -o L -eL rm y", {"stdbuf", "rm"}, "rm y"},
           {"setsid -fw rm y", {"setsid", "rm"}, "rm y"},
           {"ionice -c 3 rm y", {"ionice", "rm"}, "rm y"},
           {"time -p rm y", {"time", "rm"}, "rm y"},
           {"builtin command rm y", {"builtin", "command", "rm"}, "rm y"},
           {"nice timeout 5 /bin/rm y", {"nice", "timeout", "rm"}, "/bin/rm y"},
           {"xargs -0 -n1 -I {} rm {}", {"xargs", "rm"}, "rm {}"},
           {"command -v rm", {"command"}, ""},
           {"timeout 5 ls > /dev/null", {"timeout", "ls"}, "ls > /dev/null"},
           {"> out timeout 5 ls", {"timeout", "ls"}, "ls"},
       }) {
    CommandLine got = SplitCommandLine(c.line);
    ASSERT_FALSE(got.commands.empty()) << c.line;
    EXPECT_TRUE(got.complete) << c.line << ": " << got.problem;
    EXPECT_EQ(got.commands[0].programs, c.programs) << c.line;
    EXPECT_EQ(got.commands[0].inner, c.inner) << c.line;
    if (!got.commands[0].inner.empty()) {
      const SimpleCommand& cmd = got.commands[0];
      std::string prog_word = cmd.inner.substr(0, cmd.inner.find(' '));
      EXPECT_EQ(cmd.text.substr(0, cmd.inner_program_end).ends_with(prog_word), true) << c.line;
    }
  }
}

TEST(SplitTest, ShellOptionClustersFindTheScript) {
  for (const char* line :
       {"bash -c 'rm x'", "bash -xc 'rm x'", "bash -cx 'rm x'", "bash -c -- 'rm x'",
        "bash -e -c 'rm x'", "sh -o pipefail -c 'rm x'", "bash --noprofile --norc -c 'rm x'",
        "bash +x -c 'rm x'", "bash -c -x 'rm x'", "dash -c 'rm x' name arg"}) {
    CommandLine got = SplitCommandLine(line);
    EXPECT_TRUE(got.complete) << line << ": " << got.problem;
    EXPECT_TRUE(Names(got, "rm")) << line;
  }
}

// A shell reading its commands from a literal here-string or here-document
// runs them: they are split; from a pipe or the caller's input they cannot
// be read.
TEST(SplitTest, CommandsFedToAShellOnStandardInput) {
  auto programs = [](const char* line) {
    std::vector<std::string> out;
    for (const auto& c : SplitCommandLine(line).commands) {
      out.insert(out.end(), c.programs.begin(), c.programs.end());
    }
    return out;
  };
  EXPECT_THAT(programs("bash <<< 'rm x'"), ElementsAreArray({"bash", "rm"}));
  EXPECT_THAT(programs("sh -s -- a <<< 'rm x'"), ElementsAreArray({"sh", "rm"}));
  EXPECT_THAT(programs("source /dev/stdin <<< 'ls; rm x'"),
              ElementsAreArray({"source", "ls", "rm"}));
  EXPECT_THAT(programs("bash <<'EOF'\nrm x\nEOF\nls"), ElementsAreArray({"bash", "rm", "ls"}));
  EXPECT_THAT(programs("cat <<A; bash <<B\nx\nA\nrm y\nB"),
              ElementsAreArray({"cat", "bash", "rm"}));
  EXPECT_THAT(programs("bash < run.sh"), ElementsAreArray({"bash", "run.sh"}));
  EXPECT_TRUE(SplitCommandLine("bash <<< 'rm x'").complete);
  EXPECT_TRUE(SplitCommandLine("bash 2>&1 <<'EOF'\nrm x\nEOF").complete);
  for (const char* line :
       {"echo rm | sh", "bash", "bash -s", "bash <<< \"$x\"", "bash <<EOF\nrm $x\nEOF",
        "source <(echo rm)", "bash <(echo rm)", "bash 0<&3", ". /dev/fd/3 3<<< rm"}) {
    EXPECT_FALSE(SplitCommandLine(line).complete) << line;
  }
}

TEST(SplitTest, UnquoteWordExact) {
  std::string v;
  EXPECT_TRUE(UnquoteWordExact("'a b'\"c\"\\d$'\\n'", &v));
  EXPECT_EQ(v, "a bcd\n");
  EXPECT_TRUE(UnquoteWordExact("[", &v));
  EXPECT_TRUE(UnquoteWordExact("{}", &v));
  EXPECT_TRUE(UnquoteWordExact("a$", &v));
  for (const char* w : {"$x", "\"$x\"", "`x`", "a*", "a?", "[ab]", "{a,b}", "{1..3}", "~/x",
                        "$'\\x41'", "$\"x\"", "'unterminated", "\"unterminated"}) {
    EXPECT_FALSE(UnquoteWordExact(w, &v)) << w;
  }
}

}  // namespace
}  // namespace agentloop::permissions
