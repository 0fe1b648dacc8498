// Which options make a command write files or run code, for bash allow rules.
//
// A rule names a command: `bash(git log*)` allows `git log ...`. Some
// commands write files or run other programs through their own options
// (`git log --output=~/.bashrc`, `sed -i`, `find -delete`, `sort -o`); for
// each such command family a small table here lists the options (and for
// sed and awk the script commands) that escalate the command, so that an
// allow rule matching it by name does not apply and the call is asked about.
//
// The check is conservative: an argument that is not a literal word (an
// expansion or a glob, which could turn into an option) escalates a command
// that has an entry, long options also match as GNU-style abbreviations
// (`--out` for `--output`), and option lists are read to the end of the
// command, past `--` (an option taking a value may take `--` as its value:
// `git grep -e -- -O sh`). Interpreters (python, perl, ruby, node, php, lua,
// also under versioned names such as `python3.11` or `perl5.36.0`) are read
// with their own option grammar: code on the command line (`-c`, `-e`), a
// module or library run or preloaded (`-m`, `-M`, `-r`, `--import`), an
// option the reader does not know, and a program read from standard input
// (no script operand, `-`, `/dev/stdin`, a process substitution) escalate.
//
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace agentloop::permissions {

// `words`: the command's words as bash passes them (quotes removed), program
// first without its directory. `exact[i]`: words[i] is known exactly (see
// UnquoteWordExact). Returns "" when the command has no escalating option,
// else why, e.g. "git: '--output' writes a file". `through` (optional): set,
// when escalated, to the index of the last word the escalation depends on
// (`python3 -m pytest -x` -> 2, the module): a rule whose literal beginning
// spells the command out through that word names what runs. Escalations
// that depend on the whole command (its redirections too: `python3 <<<
// CODE`) set it to words.size().
std::string EscalationReason(const std::vector<std::string>& words, const std::vector<bool>& exact,
                             size_t* through = nullptr);

// The family an interpreter or tool name belongs to: `python3.11` and
// `pypy3` -> "python", `perl5.36.0` -> "perl", `nodejs` -> "node"; other
// names unchanged.
std::string RiskFamily(std::string_view program);

// True when the program has an entry (its arguments decide whether it
// writes files or runs code).
bool HasRiskEntry(std::string_view program);

// The programs with an entry, for documentation and tests.
std::vector<std::string> RiskPrograms();

}  // namespace agentloop::permissions
