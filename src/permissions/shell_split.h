// Splitting a shell command line into simple commands, for bash permission
// patterns.
//
// A rule like `bash(git status*)` is matched against each simple command of
// the command line, so `git status && rm -rf x` is two commands. This is a
// conservative reader of the bash grammar, not an interpreter. Its contract:
// when `complete` is true, every program bash would run for the line is the
// program of one of `commands` (or of their `inner` form); when it cannot be
// sure of that, `complete` is false and allow rules never match the line.
//
// Understood:
//  - separators `;`, `&`, `&&`, `|`, `||`, `|&`, newlines;
//  - subshells `( ... )`, command substitution `$( ... )` and backticks
//    without backslashes inside (also inside double quotes and unquoted
//    here-documents), process substitution `<( ... )` / `>( ... )`;
//  - quotes (`'...'`, `"..."`, `$'...'`), backslash escapes, `#` comments,
//    line continuations between word characters;
//  - here-documents whose delimiter is a literal word, outside nested
//    constructs, with no body line ending in a backslash (unquoted form);
//  - `${name}` without operators, `$name`, `$1`, `$?` and the like;
//  - leading reserved words `if then else elif fi do done while until { } !`;
//  - wrappers, each with its own option grammar (see Unwrap in the .cc):
//    env, command, builtin, exec, nohup, nice, timeout, stdbuf, setsid,
//    ionice, time, sudo, doas, xargs; the scripts of `bash|sh|... -c`,
//    `eval` and `trap`; the commands of `find -exec/-execdir/-ok/-okdir`;
//    the command values of `tar --to-command/--use-compress-program/-I/...`,
//    `zip -TT/--unzip-command`, `sort --compress-program`, `split --filter`,
//    `rg --pre`, `sdiff --diff-program` (those commands are escalated too);
//    a shell or `source` reading its commands from standard input when that
//    is a literal here-string or here-document (its text is split), or a
//    file (`bash < script.sh`: the file is the program).
// Refused (the line is incomplete; the commands found are still listed so
// deny and ask rules can catch them): unterminated quotes or constructs,
// arithmetic (`$((..))`, `((..))`, `$[..]`, `let`), parameter expansion with
// operators, `case`, `for`, `select`, `function`, `coproc`, `[[`, a `(`
// after a word, control characters other than tab and newline, a program
// name that is an expansion, a glob or a brace expansion, a wrapper option
// it does not know, programs that run other programs with a grammar it does
// not model (`watch`, `ssh`, `su`, ...), `alias`, `shopt`, `enable`,
// assignments to array elements, a shell or `source` reading commands from a
// pipe, the caller's input or another stream (`echo x | sh`, `bash -s`,
// `source <(..)`), callbacks (`mapfile -C`, `compgen -C/-F`), the history
// (`fc`, `history -s/-r/-n`), exported functions (`env 'BASH_FUNC_x%%=..'`),
// assignments to variables that make programs run other code (`PATH`,
// `BASH_ENV`, `LD_PRELOAD`, `NODE_OPTIONS`, `PERL5OPT`, `GIT_SSH_COMMAND`,
// ...), and nesting deeper than 32 levels.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentloop::permissions {

struct SimpleCommand {
  // The command as written, normalised: words (quotes kept) separated by one
  // space, redirection operators as separate words.
  std::string text;
  // The command with leading `VAR=value` assignments, wrappers (`sudo`,
  // `env`, `command`, `exec`, `nohup`, `nice`, `time`, `xargs` and their
  // `-options`), quotes and a directory on the program name removed:
  // `FOO=1 sudo /bin/'rm' -rf x` -> `rm -rf x`. Used by deny and ask rules
  // only (it widens what they catch; allow rules match `text`).
  std::string bare;
  // Has an output redirection to a file other than /dev/null, /dev/stdout,
  // /dev/stderr (e.g. `> out.txt`, `>> log`, `&> f`, `tee` is not detected).
  bool writes_file = false;
  // When the command is run by wrappers (`timeout 5 ls -l`, `sudo -u x ls`,
  // `xargs grep x`): the innermost command as written (`ls -l`, `grep x`),
  // and the offset in `text` just past its program word. Empty otherwise.
  std::string inner;
  size_t inner_program_end = 0;
  // The programs the command runs, without directories: wrappers in order,
  // then the program they run (`{"timeout", "ls"}`); empty for a command of
  // assignments only.
  std::vector<std::string> programs;
  // The words bash passes to the program, quotes removed (best effort: an
  // expansion stays as written), redirections left out.
  std::vector<std::string> words;
  // Non-empty: why options of the (innermost) program make it write files or
  // run code (command_risk.h), e.g. "git: --output writes a file".
  std::string escalation;
  // When escalated: the offset in `text` just past the last word the
  // escalation depends on (`python3 -m pytest -x` -> past `pytest`). An allow
  // rule whose literal beginning reaches it names what runs.
  size_t escalation_end = 0;

  bool operator==(const SimpleCommand&) const = default;
};

struct CommandLine {
  // In source order; a nested command comes before the command holding it.
  std::vector<SimpleCommand> commands;
  bool complete = true;  // false: see the file comment
  std::string problem;   // why it is incomplete
};

CommandLine SplitCommandLine(std::string_view line);

// Removes shell quoting from one word: `'a b'` -> `a b`, `"a\"b"` -> `a"b`,
// `a\ b` -> `a b`, `$'a\nb'` -> a, newline, b (only \n, \t, \\, \', \"
// decoded). Best effort: expansions are left as written.
std::string UnquoteWord(std::string_view word);

// The value bash gives the word, when it is certain: false if the word holds
// an expansion (`$x`, `$(..)`, backticks), an unquoted glob character
// (`*`, `?`, `[`), an unquoted `{` or a leading `~`, or a `$'...'` escape
// other than \n, \t, \\, \', \".
bool UnquoteWordExact(std::string_view word, std::string* out);

}  // namespace agentloop::permissions
