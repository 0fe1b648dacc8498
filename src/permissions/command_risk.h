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
// that has an entry, and long options also match as GNU-style abbreviations
// (`--out` for `--output`).
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
// else why, e.g. "git: '--output' writes a file".
std::string EscalationReason(const std::vector<std::string>& words, const std::vector<bool>& exact);

// True when the program has an entry (its arguments decide whether it
// writes files or runs code).
bool HasRiskEntry(std::string_view program);

// The programs with an entry, for documentation and tests.
std::vector<std::string> RiskPrograms();

}  // namespace agentloop::permissions
