// Lines that run a command the allow rule does not name, class by class:
// each must be asked under the allow rule that matches it by name (or stay
// denied under a deny rule for the hidden command), while the ordinary uses
// of the same programs stay allowed.
#include <gtest/gtest.h>

#include "agentloop/json.h"

#include "permissions/rules.h"
#include "permissions/test_specs.h"

namespace agentloop::permissions {
namespace {

struct LineCase {
  const char* rule;  // `bash(...)`
  const char* line;
};

bool Applies(const char* rule_text, Decision decision, const char* line) {
  auto rule = ParseRule(rule_text, decision, "t");
  EXPECT_TRUE(rule.ok()) << rule_text;
  if (!rule.ok()) return false;
  Json args = Json::object();
  args["command"] = line;
  CallSubject s = DescribeCall(TestSpec("bash"), args, "/ws");
  return RuleApplies(*rule, TestSpec("bash"), args, s, Scope{}, "/home/me");
}

// An option taking a value takes the next word even when it is `--` or
// looks like an option: the rest of the line is still options.
const LineCase kValueTakesDashDash[] = {
    {"bash(git grep*)", "git grep -e -- -O'touch pwned;'"},
    {"bash(git grep*)", "git grep -n -e -- --open-files-in-pager=vim"},
    {"bash(find *)", "find . -name -- -o -fprint pwned"},
    {"bash(find *)", "find -- . -name a.txt -fprint pwned"},
    {"bash(find *)", "find . -name -- -o -delete"},
    {"bash(sort *)", "sort -T -- -o pwned a.txt"},
    {"bash(sort *)", "sort -k1 -- --compress-program=sh a.txt"},
    {"bash(curl *)", "curl -s -H -- -o pwned file:///etc/hostname"},
    {"bash(curl *)", "curl -H -- --output pwned https://example.com"},
    {"bash(python3*)", "python3 -W -- -c 'open(\"pwned\",\"w\")'"},
    {"bash(perl *)", "perl -I -- -e 'open F,\">pwned\"'"},
    {"bash(dd *)", "dd -- of=pwned if=a.txt"},
    {"bash(openssl *)", "openssl enc -base64 -in -- -out pwned"},
    {"bash(openssl *)", "openssl enc -base64 -in a.txt --out pwned"},
    {"bash(git log*)", "git log -- --output=pwned"},
};

// Interpreters reached without `-c`/`-e`: a module, a stream as the script,
// standard input, versioned names, preloaded code, build tools and package
// scripts evaluating code, archivers running a test command.
const LineCase kInterpreters[] = {
    {"bash(python3*)", "python3 -m pip install evil"},
    {"bash(python3*)", "python3 -Im http.server"},
    {"bash(python3 -m pytest*)", "python3 -m pytest_evil"},
    {"bash(timeout 60 python3*)", "timeout 60 python3 -m pip install evil"},
    {"bash(python3*)", "python3 - <<< 'open(\"pwned\",\"w\")'"},
    {"bash(python3*)", "python3 /dev/stdin <<< 'open(\"pwned\",\"w\")'"},
    {"bash(python3*)", "python3 <<< 'open(\"pwned\",\"w\")'"},
    {"bash(python3*)", "python3 -i a.txt <<< 'open(\"pwned\",\"w\")'"},
    {"bash(python3*)", "python3 <(echo 'open(\"pwned\",\"w\")')"},
    {"bash(python3*)", "python3.11 -c 'open(\"pwned\",\"w\")'"},
    {"bash(python3*)", "python3 --unknown-option script.py"},
    {"bash(pypy3*)", "pypy3 -c 'open(\"pwned\",\"w\")'"},
    {"bash(perl*)", "perl5.36.0 -e 'open F,\">pwned\"'"},
    {"bash(perl*)", "perl -M'strict; open F,\">pwned\"' /dev/null"},
    {"bash(perl*)", "perl -Mstrict - <<< 'open F,\">pwned\"'"},
    {"bash(perl*)", "perl <<< 'open F,\">pwned\"'"},
    {"bash(perl*)", "perl -pi.bak -e 's/a/b/' a.txt"},
    {"bash(perl*)", "perl -0e 'system \"touch pwned\"'"},
    {"bash(perl*)", "perl -0777 -l -CSD -e 'system \"touch pwned\"'"},
    {"bash(ruby*)", "ruby -rfileutils -e 'FileUtils.touch(\"pwned\")'"},
    {"bash(ruby*)", "ruby -0e 'system(\"touch pwned\")'"},
    {"bash(ruby*)", "ruby -W0 -Kue 'system(\"touch pwned\")'"},
    {"bash(node *)", "node -r ./p.js app.js"},
    {"bash(node *)", "node --import ./p.mjs app.js"},
    {"bash(node *)", "node --require=./p.js app.js"},
    {"bash(node *)", "node <<< 'require(\"fs\").writeFileSync(\"pwned\",\"\")'"},
    {"bash(node *)", "node - <<< 'require(\"fs\").writeFileSync(\"pwned\",\"\")'"},
    {"bash(nodejs*)", "nodejs --eval=1"},
    {"bash(php *)", "php -d auto_prepend_file=x.php index.php"},
    {"bash(lua*)", "lua5.4 -e 'os.execute(\"touch pwned\")'"},
    {"bash(tclsh*)", "tclsh8.6 <<< 'exec touch pwned'"},
    {"bash(Rscript *)", "Rscript -e 'system(\"touch pwned\")'"},
    {"bash(make*)", "make --eval='x: ; touch pwned' x"},
    {"bash(make*)", "make -E 'x: ; touch pwned' x"},
    {"bash(make*)", "make -f /dev/stdin x <<< 'x: ; touch pwned'"},
    {"bash(make*)", "make -f - x <<< 'x: ; touch pwned'"},
    {"bash(make*)", "make -sf- x <<< 'x: ; touch pwned'"},
    {"bash(make*)", "make CC='touch pwned;'"},
    {"bash(npm test*)", "npm test --node-options='--require ./p.js'"},
    {"bash(npm test*)", "npm test --script-shell=./evil.sh"},
    {"bash(npm test*)", "npm test -- --node_options=--require=./p.js"},
    {"bash(npm test*)", "npm test -- --import=./p.mjs"},
    {"bash(npm test*)", "npm test -- -r ./p.js"},
    {"bash(npx prettier*)", "npx prettier -c 'touch pwned'"},
    {"bash(zip *)", "zip -q z.zip a.txt -T -TT 'touch pwned;'"},
    {"bash(zip *)", "zip -q z.zip a.txt -T --unzip-command 'touch pwned;'"},
    {"bash(tar *)", "tar -tf t.tar --to-command='touch pwned'"},
    {"bash(tar *)", "tar -tf t.tar --use-compress-program='touch pwned'"},
    {"bash(tar *)", "tar -tf t.tar -I 'touch pwned'"},
    {"bash(psql *)", "psql db <<< '\\! touch pwned'"},
    {"bash(awk *)", "awk 'BEGIN{f=\"sys\" \"tem\"; @f(\"touch pwned\")}'"},
};

// Commands fed to a shell indirectly.
const LineCase kShellInput[] = {
    {"bash(bash *)", "bash <<< 'touch pwned'"},
    {"bash(sh *)", "sh -s <<< 'touch pwned'"},
    {"bash(echo *)", "echo 'touch pwned' | sh"},
    {"bash(echo *)", "echo 'touch pwned' | bash -s"},
    {"bash(echo *)", "echo 'touch pwned' | zsh-5.9"},
    {"bash(source *)", "source /dev/stdin <<< 'touch pwned'"},
    {"bash(. *)", ". /dev/stdin <<< 'touch pwned'"},
    {"bash(source *)", "source <(echo 'touch pwned')"},
    {"bash(bash *)", "bash <(echo 'touch pwned')"},
    {"bash(mapfile *)", "mapfile -C 'touch pwned' -c 1 a <<< z"},
    {"bash(readarray *)", "readarray -tC 'touch pwned' -c 1 a <<< z"},
    {"bash(compgen *)", "compgen -C 'touch pwned' w"},
    {"bash(history *)", "history -s 'touch pwned'"},
    {"bash(fc *)", "fc -s"},
    {"bash(env *)", "env 'BASH_FUNC_ls%%=() { touch pwned; }' bash -c ls"},
    {"bash(*)", "env 'BASH_FUNC_ls%%=() { touch pwned; }' bash -c ls"},
    {"bash(*)", "NODE_OPTIONS='--require ./p.js' node app.js"},
    {"bash(*)", "PERL5OPT=-Mevil perl script.pl"},
    {"bash(PYTHONPATH=*)", "PYTHONPATH=evil python3 script.py"},
    {"bash(*)", "NODE_OPTIONS=--require=./p.js; export NODE_OPTIONS; node app.js"},
    {"bash(*)", "GIT_SSH_COMMAND='touch pwned' git fetch"},
    {"bash(*)", "GIT_PAGER='touch pwned;' git -p log"},
    {"bash(*)", "env npm_config_node_options=--require=./p.js npm test"},
    {"bash(*)", "PATH+=:. ls"},
    {"bash(*)", "echo x | at now"},
};

// Writing options of common tools.
const LineCase kWriters[] = {
    {"bash(openssl *)", "openssl genpkey -algorithm ed25519 -outpubkey pub.pem"},
    {"bash(openssl *)", "openssl req -new -config evil.cnf"},
    {"bash(sort *)", "sort -o pwned a.txt"},
    {"bash(curl *)", "curl -O https://example.com/x"},
    {"bash(curl *)", "curl -s -w '%output{pwned}x' https://example.com"},
    {"bash(wget *)", "wget -O pwned https://example.com"},
    {"bash(git log*)", "git log --output=pwned"},
    {"bash(tee *)", "tee pwned"},
    {"bash(dd *)", "dd if=a.txt of=pwned"},
    {"bash(iconv *)", "iconv -f utf-8 -t utf-8 -o pwned a.txt"},
    {"bash(split *)", "split --filter='touch pwned' a.txt"},
    {"bash(shuf *)", "shuf -e a -o pwned"},
    {"bash(gsort *)", "gsort -o pwned a.txt"},
    {"bash(gfind *)", "gfind . -delete"},
};

class HiddenCommandTest : public ::testing::TestWithParam<LineCase> {};

TEST_P(HiddenCommandTest, IsNotAllowedByTheRuleNamingTheProgram) {
  EXPECT_FALSE(Applies(GetParam().rule, Decision::kAllow, GetParam().line))
      << GetParam().rule << " allowed: " << GetParam().line;
}

INSTANTIATE_TEST_SUITE_P(ValueTakesDashDash, HiddenCommandTest,
                         ::testing::ValuesIn(kValueTakesDashDash));
INSTANTIATE_TEST_SUITE_P(Interpreters, HiddenCommandTest, ::testing::ValuesIn(kInterpreters));
INSTANTIATE_TEST_SUITE_P(ShellInput, HiddenCommandTest, ::testing::ValuesIn(kShellInput));
INSTANTIATE_TEST_SUITE_P(Writers, HiddenCommandTest, ::testing::ValuesIn(kWriters));

// The hidden command stays denied by a deny rule naming it: commands fed to
// a shell are split, and an escalated command is tried from each word on
// and by the values of its `--option=value` words.
TEST(HiddenCommandTest, DenyRulesSeeHiddenCommands) {
  for (const char* line : {
           "bash <<< 'rm -rf x'",
           "sh -s <<< 'rm -rf x'",
           "bash -s -- a b <<< 'rm -rf x'",
           "echo 'rm -rf x' | sh",
           "source /dev/stdin <<< 'rm -rf x'",
           ". /dev/stdin <<< 'rm -rf x'",
           "bash /dev/stdin <<< 'rm -rf x'",
           "bash <<'EOF'\nrm -rf x\nEOF",
           "bash <<EOF\nls\nrm -rf x\nEOF",
           "mapfile -C 'rm -rf x' -c 1 a <<< z",
           "readarray -C 'rm -rf x' -c 1 a <<< z",
           "compgen -C 'rm -rf x' w",
           "history -s 'rm -rf x'; fc -s",
           "env 'BASH_FUNC_ls%%=() { rm -rf x; }' bash -c ls",
           "tar -xf a.tar --to-command='rm -rf x'",
           "zip -q z.zip a.txt -T -TT 'rm -rf x'",
           "split --filter='rm -rf x' a.txt",
           "sort --compress-program=rm a.txt",
           "tar -tf a.tar -I 'rm -rf x'",
           "tar -tf a.tar --checkpoint=1 --checkpoint-action=exec='rm -rf x'",
           "zip z.zip a.txt -TT 'rm -rf x'",
           "rg --pre rm pattern",
       }) {
    EXPECT_TRUE(Applies("bash(rm*)", Decision::kDeny, line)) << line;
  }
}

// What a rule naming the program allows stays allowed.
TEST(HiddenCommandTest, OrdinaryUsesStayAllowed) {
  for (LineCase c : std::initializer_list<LineCase>{
           {"bash(git grep*)", "git grep -n foo -- src"},
           {"bash(git grep*)", "git grep -e -- -- src"},
           {"bash(find *)", "find . -name '*.cc'"},
           {"bash(find *)", "find src -type f -newer a.txt -print"},
           {"bash(sort *)", "sort -u a.txt"},
           {"bash(sort *)", "sort -t, -k2 -n a.txt"},
           {"bash(curl *)", "curl -s https://example.com"},
           {"bash(curl *)", "curl -sS -w '%{http_code}' https://example.com"},
           {"bash(python3*)", "python3 script.py"},
           {"bash(python3*)", "python3 -u script.py -c x -m y"},
           {"bash(python3*)", "python3 -W ignore -X dev script.py"},
           {"bash(python3*)", "python3 --version"},
           {"bash(python3*)", "python3.11 script.py < input.txt"},
           {"bash(python3 -m pytest*)", "python3 -m pytest -x tests"},
           {"bash(timeout 60 python3 -m pytest*)", "timeout 60 python3 -m pytest -x"},
           {"bash(perl *)", "perl -w script.pl -e x"},
           {"bash(perl *)", "perl -v"},
           {"bash(perl *)", "perl -0777 -lan script.pl"},
           {"bash(ruby *)", "ruby -W0 -w script.rb"},
           {"bash(node *)", "node app.js --eval"},
           {"bash(node *)", "node --max-old-space-size=4096 app.js"},
           {"bash(node *)", "node --test"},
           {"bash(make*)", "make"},
           {"bash(make*)", "make -j4 test"},
           {"bash(make*)", "make -C build all"},
           {"bash(make*)", "make -f build.mk all"},
           {"bash(npm test*)", "npm test"},
           {"bash(npm test*)", "npm test -- --coverage"},
           {"bash(dd *)", "dd if=a.txt bs=1 count=3"},
           {"bash(zip *)", "zip -r out.zip src"},
           {"bash(openssl *)", "openssl x509 -in cert.pem -noout -text"},
           {"bash(tar *)", "tar -tzf a.tgz"},
           {"bash(bash *)", "bash script.sh"},
           {"bash(bash *)", "bash < script.sh"},
           {"bash(bash *)", "bash -c 'bash -x run.sh'"},
           {"bash(GIT_PAGER=cat git log*)", "GIT_PAGER=cat git log -1"},
           {"bash(PYTHONPATH=src python3 -m pytest*)", "PYTHONPATH=src python3 -m pytest -x"},
           {"bash(PYTHONPATH=src pytest*)", "PYTHONPATH=src pytest tests"},
           {"bash(mapfile *)", "mapfile -t lines < a.txt"},
           {"bash(history*)", "history"},
       }) {
    EXPECT_TRUE(Applies(c.rule, Decision::kAllow, c.line)) << c.rule << " refused: " << c.line;
  }
}

}  // namespace
}  // namespace agentloop::permissions
