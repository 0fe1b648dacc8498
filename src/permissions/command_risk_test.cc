#include "permissions/command_risk.h"

#include <gtest/gtest.h>

#include "permissions/shell_split.h"

namespace agentloop::permissions {
namespace {

// The first escalation among the commands of `line` (the command itself or
// one it runs), as the splitter computes it.
std::string Escalation(const char* line) {
  CommandLine got = SplitCommandLine(line);
  if (got.commands.empty()) return "<no command>";
  for (const auto& c : got.commands) {
    if (!c.escalation.empty()) return c.escalation;
  }
  return "";
}

TEST(CommandRiskTest, EscalatingOptions) {
  for (const char* line : {
           "git log --output=x",
           "git log --output x",
           "git log --out=x",
           "git diff --ext-diff",
           "git -c core.pager=id log",
           "git -c alias.x=!sh x",
           "git --config-env=core.pager=X log",
           "git --exec-path=. status",
           "git -C ../other status",
           "git --git-dir=x status",
           "git config core.fsmonitor x",
           "git config --add core.sshCommand x",
           "git config --get x --unset y",
           "git rebase -x make main",
           "git rebase --exec=make main",
           "git grep -O x",
           "git grep --open-files-in-pager=vim x",
           "git fetch --upload-pack=x origin",
           "git push --receive-pack=x origin",
           "git clone -u x repo",
           "git clone --template=t repo",
           "git archive -o x HEAD",
           "git format-patch HEAD~1",
           "git difftool",
           "git submodule foreach ls",
           "git bisect run make",
           "git log $x",
           "git log *",
           "find . -delete",
           "find . -fprint x",
           "find . -fprint0 x",
           "find . -fprintf x %p",
           "find . -fls x",
           "find . -name x -exec ls {} ;",
           "sed -i s/a/b/ f",
           "sed -ni p f",
           "sed --in-place s/a/b/ f",
           "sed --in=x s/a/b/ f",
           "sed s/a/b/w\\ out f",
           "sed 's/a/b/w out' f",
           "sed 's/a/b/e' f",
           "sed -e p -e 'w out' f",
           "sed '1e id' f",
           "sed -f script f",
           "sed --expression='$ W out' f",
           "sed 's/a/b/' -i f",
           "tar -cf a.tar x",
           "tar -xf a.tar",
           "tar xf a.tar",
           "tar -tf a.tar --to-command=sh",
           "tar -tf a.tar --checkpoint-action=exec=sh",
           "tar -tf a.tar -I sh",
           "tar -tf host:a.tar",
           "rsync a b",
           "sort -o out f",
           "sort -uo out f",
           "sort --output=out f",
           "sort --compress-program=sh f",
           "sort f -o out",
           "awk 'BEGIN{system(\"id\")}'",
           "awk '{print > \"x\"}' f",
           "awk '{print | \"sh\"}' f",
           "awk -f prog.awk f",
           "perl -e 'print 1'",
           "perl -pi -e s/a/b/ f",
           "python3 -c 'print(1)'",
           "node -e 1",
           "tee out",
           "curl -o out https://x",
           "curl -sSLo out https://x",
           "curl --output out https://x",
           "wget https://x",
           "less f",
           "man ls",
           "vi f",
           "xxd -r f out",
           "xxd f out",
           "rg --pre ./x pattern",
           "tree -o out",
           "uniq in out",
           "dd if=a of=b",
           "ip netns exec x ls",
       }) {
    EXPECT_FALSE(Escalation(line).empty()) << line;
  }
}

TEST(CommandRiskTest, HarmlessUses) {
  for (const char* line : {
           "git log --oneline",
           "git log -p -- file",
           "git log -c",
           "git diff --no-ext-diff",
           "git diff --output-indicator-new=+",
           "git status",
           "git --no-pager log",
           "git config --get user.name",
           "git config --list",
           "git grep -n x",
           "git show HEAD:file",
           "find . -name '*.cc' -print",
           "find . -type f",
           "sed s/a/b/ f",
           "sed -n '1,5p' f",
           "sed -e 's/w/e/g' f",
           "sed 's/x/y/g;/^#/d' f",
           "sed -E 's/(a)/\\1/' f",
           "sed '/start/,/end/p' f",
           "tar -tf a.tar",
           "tar tvzf a.tgz",
           "tar --list --file=a.tar",
           "sort -u f",
           "sort -k2 -t, f",
           "awk '{print $1}' f",
           "awk -F: '$3 ~ /x/ {print $1}' f",
           "curl -s https://x",
           "xxd f",
           "tee /dev/null",
           "ls -la",
           "cat f",
           "rg pattern",
           "tree -L 2",
           "uniq -c f",
           "dd if=a",
           "ip addr",
       }) {
    EXPECT_EQ(Escalation(line), "") << line;
  }
}

TEST(CommandRiskTest, NonLiteralArgumentsEscalateOnlyTabledPrograms) {
  EXPECT_NE(EscalationReason({"git", "log", "$x"}, {true, true, false}), "");
  EXPECT_EQ(EscalationReason({"ls", "$x"}, {true, false}), "");
  EXPECT_TRUE(HasRiskEntry("git"));
  EXPECT_FALSE(HasRiskEntry("ls"));
}

}  // namespace
}  // namespace agentloop::permissions
