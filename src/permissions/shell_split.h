// Splitting a shell command line into simple commands, for bash permission
// patterns.
//
// A rule like `bash(git status*)` is matched against each simple command of
// the command line, so `git status && rm -rf x` is two commands. This is a
// conservative lexer for the POSIX/bash grammar, not an interpreter:
//  - separators: `;`, `;;`, `&`, `&&`, `|`, `||`, `|&`, newlines;
//  - nested commands: subshells `( ... )`, command substitution `$( ... )`
//    and backticks (also inside double quotes and unquoted here-documents),
//    process substitution `<( ... )` / `>( ... )`, and the string argument of
//    `sh|bash|zsh|dash|ksh -c '...'` and `eval '...'`;
//  - quotes (`'...'`, `"..."`, `$'...'`) and backslash escapes are respected;
//  - `#` comments and here-document bodies are not commands;
//  - leading reserved words (`if`, `then`, `do`, `!`, `{`, ...) are dropped,
//    so `if git diff; then make; fi` yields `git diff` and `make`.
// Anything it cannot follow (an unterminated quote, an unbalanced `)`, a
// substitution hidden in `${...}` or `$((...))`, nesting deeper than 32
// levels) marks the line incomplete: allow rules then never match it.
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
// `a\ b` -> `a b`, `$'a\nb'` -> a, newline, b (only \n, \t, \\, \' decoded).
std::string UnquoteWord(std::string_view word);

}  // namespace agentloop::permissions
