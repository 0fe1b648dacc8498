// The escalation tables: simple per-family option lists, plus checkers for
// the families whose grammar needs more (git, sed, tar, awk, xxd, tee, uniq,
// make, npm) and the interpreters' option grammars.
#include "permissions/command_risk.h"

#include <algorithm>
#include <utility>

namespace agentloop::permissions {
namespace {

using Words = std::vector<std::string>;

// A family whose risky options can be listed: short option letters (found
// anywhere in a `-xyz` cluster, so an attached argument that happens to hold
// the letter also escalates: conservative), long option names (matched with
// GNU abbreviations), whole words (single-dash long options such as find's
// `-delete`), or `always`.
struct OptionRisk {
  std::vector<std::string_view> programs;
  std::string_view short_letters;
  std::vector<std::string_view> long_names;
  std::vector<std::string_view> words;
  bool always = false;
  std::string_view why;
  std::vector<std::string_view> word_prefixes = {};  // `of=` for dd
  std::vector<std::string_view> substrings = {};     // anywhere in a word: curl's `%output{`
};

const std::vector<OptionRisk>& Table() {
  static const std::vector<OptionRisk> kTable = {
      {{"find"},
       "",
       {},
       {"-fprint", "-fprint0", "-fprintf", "-fls", "-delete", "-exec", "-execdir", "-ok", "-okdir"},
       false,
       "writes files, deletes or runs commands"},
      {{"sort"}, "o", {"output", "compress-program"}, {}, false, "writes a file or runs a program"},
      {{"sdiff"}, "o", {"output", "diff-program"}, {}, false, "writes a file or runs a program"},
      {{"curl"},
       "oODcK",
       {"output", "remote-name", "remote-name-all", "dump-header", "cookie-jar", "trace",
        "trace-ascii", "stderr", "output-dir", "config", "libcurl", "etag-save", "hsts", "alt-svc",
        "engine", "ntlm-wb", "ssl-sessions"},
       {},
       false,
       "writes a file or loads code",
       {},
       {"%output{"}},
      {{"zip"}, "T", {"test", "unzip-command"}, {}, false, "runs a test command"},
      {{"split"}, "", {"filter"}, {}, false, "runs a shell command"},
      {{"iconv", "shuf"}, "o", {"output"}, {}, false, "writes a file"},
      {{"xmllint"}, "", {"output", "shell"}, {}, false, "writes a file or runs a shell"},
      {{"pandoc"},
       "oFL",
       {"output", "filter", "lua-filter", "pdf-engine", "extract-media", "data-dir"},
       {},
       false,
       "writes files or runs a filter program"},
      {{"ack", "ack-grep"}, "", {"pager", "output"}, {}, false, "runs a pager or Perl code"},
      {{"ag"}, "", {"pager"}, {}, false, "runs a pager program"},
      {{"dc"}, "", {}, {}, true, "runs shell commands ('!')"},
      {{"m4"}, "", {}, {}, true, "runs shell commands (syscmd, esyscmd)"},
      {{"wget"}, "", {}, {}, true, "writes files"},
      {{"rsync"}, "", {}, {}, true, "writes to its destination and may run a remote shell"},
      {{"sponge"}, "", {}, {}, true, "writes a file"},
      {{"less", "more", "most", "pager", "man", "vi", "vim", "nvim", "view", "vimdiff", "emacs",
        "nano", "ed", "ex", "pico", "joe"},
       "",
       {},
       {},
       true,
       "can run shell commands or write files"},
      {{"sqlite3"}, "", {}, {}, true, "writes databases and can run shell commands"},
      // Without -c/-e they read commands, shell escapes included (`\!`),
      // from standard input.
      {{"psql", "mysql", "mariadb"},
       "",
       {},
       {},
       true,
       "runs commands (including shell escapes) from the line or standard input"},
      {{"rg"}, "", {"pre"}, {}, false, "runs a preprocessor program"},
      {{"fd", "fdfind"}, "xX", {"exec", "exec-batch"}, {}, false, "runs commands"},
      {{"yq"}, "i", {"inplace"}, {}, false, "edits files in place"},
      {{"file"}, "C", {"compile"}, {}, false, "writes a file"},
      {{"gpg", "gpg2"}, "o", {"output", "exec-path"}, {}, false, "writes a file or runs a program"},
      {{"openssl"},
       "",
       {},
       {"-out",      "-keyout",   "-engine",        "-writerand", "-sess_out",  "-keylogfile",
        "-signkey",  "-provider", "-provider-path", "-config",    "-outdir",    "-CAcreateserial",
        "-CAserial", "-respout",  "-reqout",        "-certsout",  "-outpubkey", "-msgfile",
        "rehash",    "c_rehash",  "s_server",       "engine"},
       false,
       "writes a file or loads code"},
      {{"tcpdump"}, "wzW", {}, {}, false, "writes a file or runs a program"},
      {{"tree"}, "o", {}, {}, false, "writes a file"},
      {{"ip"}, "b", {"batch"}, {"exec", "-batch"}, false, "runs commands"},
      {{"dd"}, "", {}, {}, false, "writes a file", {"of="}},
  };
  return kTable;
}

// A long option `--name[=v]` matches a listed name when `name` is that name or
// a GNU abbreviation of it.
bool LongMatches(std::string_view word, const std::vector<std::string_view>& names) {
  if (!word.starts_with("--") || word.size() == 2) return false;
  std::string_view name = word.substr(2);
  name = name.substr(0, name.find('='));
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view n) { return n.starts_with(name); });
}

bool ShortHas(std::string_view word, std::string_view letters) {
  if (letters.empty() || word.size() < 2 || word[0] != '-' || word[1] == '-') return false;
  return word.find_first_of(letters, 1) != std::string_view::npos;
}

std::string CheckTable(const OptionRisk& r, const Words& w) {
  std::string prog = w[0];
  if (r.always) return prog + ": " + std::string(r.why);
  // Every word is read, past `--` too: an option taking a value may have
  // taken `--` as its value (`sort -t -- -o f`), and a word after a real `--`
  // that looks like an option only makes the check ask more.
  for (size_t i = 1; i < w.size(); ++i) {
    const std::string& a = w[i];
    bool prefixed = std::any_of(r.word_prefixes.begin(), r.word_prefixes.end(),
                                [&](std::string_view p) { return a.starts_with(p); });
    bool inside = std::any_of(r.substrings.begin(), r.substrings.end(),
                              [&](std::string_view p) { return a.find(p) != std::string::npos; });
    // Single-dash long options (find, openssl) are also accepted with two.
    std::string_view single = a.starts_with("--") ? std::string_view(a).substr(1) : a;
    if (prefixed || inside || ShortHas(a, r.short_letters) || LongMatches(a, r.long_names) ||
        std::find(r.words.begin(), r.words.end(), single) != r.words.end()) {
      return prog + ": '" + a + "' " + std::string(r.why);
    }
  }
  return "";
}

// git: global options before the subcommand, subcommands that run programs
// or write outside the repository's normal work, and options (any position)
// that write files or run programs.
std::string CheckGit(const Words& w) {
  static const std::vector<std::string_view> kSafeGlobal = {"--no-pager",
                                                            "-P",
                                                            "-p",
                                                            "--paginate",
                                                            "--no-optional-locks",
                                                            "--no-replace-objects",
                                                            "--literal-pathspecs",
                                                            "--glob-pathspecs",
                                                            "--noglob-pathspecs",
                                                            "--icase-pathspecs",
                                                            "--no-advice",
                                                            "--version",
                                                            "--help",
                                                            "-h"};
  static const std::vector<std::string_view> kRiskySub = {
      "difftool",   "mergetool",    "bisect",    "submodule",   "filter-branch", "filter-repo",
      "send-email", "format-patch", "daemon",    "instaweb",    "web--browse",   "p4",
      "svn",        "cvsimport",    "cvsserver", "shell",       "upload-pack",   "receive-pack",
      "credential", "hook",         "imap-send", "request-pull"};
  static const std::vector<std::string_view> kRiskyLong = {"output",
                                                           "ext-diff",
                                                           "exec",
                                                           "exec-path",
                                                           "upload-pack",
                                                           "receive-pack",
                                                           "open-files-in-pager",
                                                           "template",
                                                           "config",
                                                           "config-env",
                                                           "separate-git-dir"};
  size_t i = 1;
  for (; i < w.size(); ++i) {
    const std::string& a = w[i];
    if (a.empty() || a[0] != '-') break;
    if (std::find(kSafeGlobal.begin(), kSafeGlobal.end(), a) == kSafeGlobal.end()) {
      return "git: global option '" + a +
             "' changes the configuration, repository or programs git "
             "runs";
    }
  }
  if (i >= w.size()) return "";
  const std::string& sub = w[i];
  if (std::find(kRiskySub.begin(), kRiskySub.end(), sub) != kRiskySub.end()) {
    return "git: '" + sub + "' runs programs or writes files";
  }
  if (sub == "config") {
    static const std::vector<std::string_view> kRead = {
        "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list"};
    bool read = false;
    for (size_t k = i + 1; k < w.size(); ++k) {
      if (std::find(kRead.begin(), kRead.end(), w[k]) != kRead.end()) read = true;
      if (w[k] == "--edit" || w[k] == "-e") read = false;
    }
    if (!read) return "git: 'config' without --get/--list writes the configuration";
    for (size_t k = i + 1; k < w.size(); ++k) {
      if (LongMatches(w[k], {"add", "unset", "unset-all", "replace-all", "rename-section",
                             "remove-section", "edit"}) ||
          w[k] == "set" || w[k] == "unset") {
        return "git: 'config " + w[k] + "' writes the configuration";
      }
    }
  }
  // Read past `--`: an option value may be `--` (`git grep -e -- -O sh`).
  for (size_t k = i + 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (LongMatches(a, kRiskyLong)) return "git: '" + a + "' writes a file or runs a program";
    if ((sub == "rebase" && ShortHas(a, "x")) || (sub == "archive" && ShortHas(a, "o")) ||
        (sub == "grep" && ShortHas(a, "O")) ||
        ((sub == "clone" || sub == "ls-remote") && ShortHas(a, "uc"))) {
      return "git: '" + sub + " " + a + "' writes a file or runs a program";
    }
    if (sub == "archive" && LongMatches(a, {"remote"})) {
      return "git: 'archive " + a + "' runs a remote program";
    }
  }
  return "";
}

// Skips an s or y part delimited by `d`; false if unterminated.
bool SkipDelimited(std::string_view s, size_t& i, char d) {
  while (i < s.size() && s[i] != d) {
    if (s[i] == '\\') ++i;
    ++i;
  }
  if (i >= s.size()) return false;
  ++i;
  return true;
}

// A sed script runs commands (`e`, `s///e`) or writes files (`w`, `W`,
// `s///w`); anything this reader cannot follow also counts.
std::string SedScriptRisk(std::string_view s) {
  size_t i = 0;
  auto skip_line = [&] {
    while (i < s.size() && s[i] != '\n') ++i;
  };
  while (true) {
    while (i < s.size() &&
           (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ';' || s[i] == '}'))
      ++i;
    if (i >= s.size()) return "";
    if (s[i] == '#') {
      skip_line();
      continue;
    }
    // Up to two addresses, then `!`.
    for (int n = 0; n < 2 && i < s.size(); ++n) {
      if (s[i] >= '0' && s[i] <= '9') {
        while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '~')) ++i;
      } else if (s[i] == '$') {
        ++i;
      } else if (s[i] == '/' || s[i] == '\\') {
        char d = '/';
        if (s[i] == '\\') {
          if (++i >= s.size()) return "sed: unterminated address";
          d = s[i];
        }
        ++i;
        if (!SkipDelimited(s, i, d)) return "sed: unterminated address";
        while (i < s.size() && (s[i] == 'I' || s[i] == 'M')) ++i;
      } else if (n == 1 && (s[i] == '+' || s[i] == '~')) {
        ++i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      } else {
        break;
      }
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
      if (n == 0 && i < s.size() && s[i] == ',') {
        ++i;
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
      } else {
        break;
      }
    }
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '!')) ++i;
    if (i >= s.size()) return "sed: address without a command";
    char c = s[i++];
    switch (c) {
      case '{':
        break;
      case 'e':
        return "sed: the 'e' command runs a shell command";
      case 'w':
      case 'W':
        return std::string("sed: the '") + c + "' command writes a file";
      case 's': {
        if (i >= s.size() || s[i] == '\n' || s[i] == '\\') return "sed: unreadable 's' command";
        char d = s[i++];
        if (!SkipDelimited(s, i, d) || !SkipDelimited(s, i, d)) {
          return "sed: unterminated 's' command";
        }
        while (i < s.size() &&
               std::string_view("gpiImMe0123456789w").find(s[i]) != std::string_view::npos) {
          if (s[i] == 'e') return "sed: the 's///e' flag runs a shell command";
          if (s[i] == 'w') return "sed: the 's///w' flag writes a file";
          ++i;
        }
        break;
      }
      case 'y': {
        if (i >= s.size() || s[i] == '\n' || s[i] == '\\') return "sed: unreadable 'y' command";
        char d = s[i++];
        if (!SkipDelimited(s, i, d) || !SkipDelimited(s, i, d)) {
          return "sed: unterminated 'y' command";
        }
        break;
      }
      case 'a':
      case 'i':
      case 'c':
        // Text up to the end of the line; a line ending in a backslash goes on.
        while (i < s.size()) {
          if (s[i] == '\\' && i + 1 < s.size()) {
            i += 2;
            continue;
          }
          if (s[i] == '\n') break;
          ++i;
        }
        break;
      case 'r':
      case 'R':
        skip_line();
        break;
      case 'b':
      case 't':
      case 'T':
      case ':':
      case 'v':
        while (i < s.size() && s[i] != ';' && s[i] != '\n') ++i;
        break;
      case 'q':
      case 'Q':
      case 'l':
      case 'L':
        while (i < s.size() && (s[i] == ' ' || (s[i] >= '0' && s[i] <= '9'))) ++i;
        break;
      case 'd':
      case 'D':
      case 'g':
      case 'G':
      case 'h':
      case 'H':
      case 'n':
      case 'N':
      case 'p':
      case 'P':
      case 'x':
      case 'z':
      case '=':
      case 'F':
        break;
      default:
        return std::string("sed: command '") + c + "' is not known to be harmless";
    }
  }
}

std::string CheckSed(const Words& w) {
  std::vector<std::string> scripts;
  bool script_given = false;
  bool operand_script_taken = false;
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (a == "--") {
      if (!script_given && !operand_script_taken && k + 1 < w.size()) scripts.push_back(w[k + 1]);
      operand_script_taken = true;
      break;
    }
    if (a.starts_with("--")) {
      std::string_view name = std::string_view(a).substr(2);
      size_t eq = name.find('=');
      std::string_view base = name.substr(0, eq);
      if (LongMatches(a, {"in-place", "file"})) return "sed: '" + a + "' writes or reads a script";
      if (std::string_view("expression").starts_with(base)) {
        script_given = true;
        if (eq != std::string_view::npos) {
          scripts.emplace_back(name.substr(eq + 1));
        } else if (k + 1 < w.size()) {
          scripts.push_back(w[++k]);
        }
      } else if (LongMatches(a, {"line-length"}) && eq == std::string_view::npos) {
        ++k;
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      for (size_t j = 1; j < a.size(); ++j) {
        char ch = a[j];
        if (ch == 'i') return "sed: '-i' edits files in place";
        if (ch == 'f') return "sed: '-f' reads a script this reader does not see";
        if (ch == 'e' || ch == 'l') {
          std::string arg = j + 1 < a.size() ? a.substr(j + 1) : (k + 1 < w.size() ? w[++k] : "");
          if (ch == 'e') {
            script_given = true;
            scripts.push_back(arg);
          }
          break;
        }
        if (std::string_view("nsEruzs").find(ch) == std::string_view::npos) {
          return std::string("sed: option '-") + ch + "' is not known to be harmless";
        }
      }
      continue;
    }
    if (!script_given && !operand_script_taken) {
      scripts.push_back(a);
      operand_script_taken = true;
    }
  }
  for (const auto& s : scripts) {
    std::string why = SedScriptRisk(s);
    if (!why.empty()) return why;
  }
  return "";
}

// tar: only listing an archive (`tar -tf x`, `tar tvzf x`, `--list`) is not
// escalated.
std::string CheckTar(const Words& w) {
  static const std::vector<std::string_view> kLong = {"list", "verbose",       "gzip", "bzip2",
                                                      "xz",   "auto-compress", "zstd", "file"};
  bool list = false;
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    bool cluster =
        (k == 1 && !a.empty() && a[0] != '-') || (a.size() > 1 && a[0] == '-' && a[1] != '-');
    if (a.starts_with("--")) {
      std::string_view name = std::string_view(a).substr(2);
      size_t eq = name.find('=');
      std::string_view base = name.substr(0, eq);
      if (std::find(kLong.begin(), kLong.end(), base) == kLong.end()) {
        return "tar: '" + a + "' may write files or run a program";
      }
      if (base == "list") list = true;
      if (base == "file") {
        std::string f = eq != std::string_view::npos ? std::string(name.substr(eq + 1))
                                                     : (k + 1 < w.size() ? w[++k] : "");
        if (f.find(':') != std::string::npos) return "tar: a remote archive runs a remote shell";
      }
    } else if (cluster) {
      bool takes_file = false;
      for (size_t j = a[0] == '-' ? 1 : 0; j < a.size(); ++j) {
        char ch = a[j];
        if (ch == 't') list = true;
        if (ch == 'f') takes_file = true;
        if (std::string_view("tvfzjJa").find(ch) == std::string_view::npos) {
          return std::string("tar: '") + ch + "' creates or extracts files or runs a program";
        }
      }
      if (takes_file && k + 1 < w.size()) {
        if (w[++k].find(':') != std::string::npos) {
          return "tar: a remote archive runs a remote shell";
        }
      }
    }
  }
  return list ? "" : "tar: creates or extracts files";
}

// awk: options -F, -v and the program text; a program that calls system(),
// pipes, redirects or makes an indirect call escalates.
std::string CheckAwk(const Words& w) {
  std::string program;
  bool have_program = false;
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (!have_program && a == "--") {
      if (k + 1 < w.size()) program = w[k + 1];
      have_program = true;
      break;
    }
    if (!have_program && a.size() > 1 && a[0] == '-') {
      if (a == "-F" || a == "-v" || a == "--field-separator" || a == "--assign") {
        ++k;
      } else if (!(a.starts_with("-F") || a.starts_with("-v") ||
                   a.starts_with("--field-separator=") || a.starts_with("--assign="))) {
        return w[0] + ": option '" + a + "' may read a program file or write files";
      }
      continue;
    }
    if (!have_program) {
      program = a;
      have_program = true;
    }
  }
  // `@` also covers gawk's indirect calls (`f = "system"; @f("id")`).
  for (std::string_view bad : {"system", "|", ">", "@", "getline"}) {
    if (program.find(bad) != std::string::npos) {
      return w[0] + ": the program uses '" + std::string(bad) +
             "' (runs commands, reads or writes files)";
    }
  }
  return "";
}

std::string CheckXxd(const Words& w) {
  int operands = 0;
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (a.starts_with("-r")) return "xxd: '-r' writes binary data";
    if (a == "-c" || a == "-g" || a == "-l" || a == "-o" || a == "-s" || a == "-n" ||
        a == "-cols" || a == "-groupsize" || a == "-len" || a == "-seek" || a == "-name") {
      ++k;
    } else if (!a.empty() && a[0] != '-') {
      ++operands;
    }
  }
  return operands >= 2 ? "xxd: a second file operand is written" : "";
}

// uniq writes its second file operand.
std::string CheckUniq(const Words& w) {
  int operands = 0;
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (a == "-f" || a == "-s" || a == "-w") {
      ++k;
    } else if (a == "--") {
      operands += static_cast<int>(w.size() - k - 1);
      break;
    } else if (!a.empty() && (a[0] != '-' || a == "-")) {
      ++operands;
    }
  }
  return operands >= 2 ? "uniq: a second file operand is written" : "";
}

std::string CheckTee(const Words& w) {
  for (size_t k = 1; k < w.size(); ++k) {
    if (!w[k].empty() && w[k][0] != '-' && w[k] != "/dev/null") {
      return "tee: writes '" + w[k] + "'";
    }
  }
  return "";
}

// A script operand that is standard input or another stream, not a file:
// the program comes from the command line itself (a here-string, a pipe, a
// process substitution).
bool IsStreamScript(std::string_view s) {
  return s == "-" || s.starts_with("/dev/") || s.starts_with("/proc/") || s.starts_with("<(") ||
         s.starts_with(">(");
}

// An interpreter's option grammar (options come before the script operand;
// what follows the script belongs to the script). Letters and long options
// not listed escalate: the reader cannot know whether they take a value or
// run code.
struct InterpreterSpec {
  std::string_view family;
  std::string_view short_noarg;
  std::string_view short_arg;          // a value: the rest of the cluster or the next word
  std::string_view short_rest;         // an optional value attached to the letter
  std::string_view short_digits;       // optional digits attached (`perl -0777 -l`)
  std::string_view short_info;         // prints and exits: no program is read
  std::string_view short_script;       // the value is the script (`php -f file`)
  std::string_view short_code;         // the value is code or a module to run or preload
  std::string_view short_risky_flags;  // edits in place, debugger, interactive (stdin)
  std::vector<std::string_view> long_noarg;
  std::vector<std::string_view> long_arg;
  std::vector<std::string_view> long_info;
  std::string_view why;
};

const std::vector<InterpreterSpec>& Interpreters() {
  static const std::vector<InterpreterSpec> kSpecs = {
      {"python",
       "bBdEIOPqRsSuvx",
       "WX",
       "",
       "",
       "hV?",
       "",
       "cm",
       "i",
       {},
       {"check-hash-based-pycs"},
       {"help", "version", "help-env", "help-xoptions", "help-all"},
       "runs code from the command line, a module, or standard input"},
      {"perl",
       "acnpsStTuUwWX",
       "I",
       "xDFV",
       "0lC",
       "hv",
       "",
       "eEMm",
       "id",
       {},
       {},
       {},
       "runs code from the command line or a module, or edits in place"},
      {"ruby",
       "acdlnpsSvwyU",
       "CEI",
       "TxF",
       "0WK",
       "h",
       "",
       "er",
       "i",
       {"verbose", "yydebug", "jit", "yjit"},
       {"encoding", "external-encoding", "internal-encoding", "enable", "disable"},
       {"help", "version", "copyright"},
       "runs code from the command line or a library, or edits in place"},
      {"node",
       "c",
       "C",
       "",
       "",
       "hv",
       "",
       "epr",
       "i",
       {"check", "enable-source-maps", "trace-warnings", "no-warnings", "no-deprecation",
        "trace-deprecation", "throw-deprecation", "pending-deprecation", "preserve-symlinks",
        "preserve-symlinks-main", "expose-gc", "abort-on-uncaught-exception",
        "experimental-vm-modules", "trace-uncaught", "watch"},
       {"max-old-space-size", "stack-size", "unhandled-rejections", "title", "disable-warning",
        "test-reporter", "test-name-pattern", "stack-trace-limit", "max-semi-space-size",
        "conditions"},
       {"help", "version", "v8-options", "test"},
       "runs code from the command line, preloads a module, or reads standard input"},
      {"php",
       "nqsleHw",
       "t",
       "",
       "",
       "vhim",
       "f",
       "rBREFcdzS",
       "a",
       {},
       {},
       {"version", "help", "info", "modules", "ini"},
       "runs code from the command line or standard input, or loads settings or extensions"},
      {"lua",
       "EW",
       "",
       "",
       "",
       "v",
       "",
       "el",
       "i",
       {},
       {},
       {},
       "runs code from the command line, a module, or standard input"},
      // Tcl and R: a script operand, or code on the line or from standard
      // input.
      {"tclsh", "", "", "", "", "", "", "", "", {}, {}, {}, "runs code from standard input"},
      {"Rscript",
       "",
       "",
       "",
       "",
       "",
       "",
       "e",
       "",
       {"vanilla", "verbose", "no-environ", "no-site-file", "no-init-file", "restore", "save",
        "no-save", "no-restore"},
       {},
       {"version", "help"},
       "runs code from the command line or standard input"},
  };
  return kSpecs;
}

const InterpreterSpec* FindInterpreter(std::string_view family) {
  for (const auto& s : Interpreters()) {
    if (s.family == family) return &s;
  }
  return nullptr;
}

bool In(std::string_view letters, char c) { return letters.find(c) != std::string_view::npos; }

bool Listed(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Escalates an interpreter that does not simply run a script file: code or
// a module named on the line, preloaded code, editing in place, an option
// not known, a stream as the script, or no script (standard input).
// `through`: the last word the escalation depends on.
std::string CheckInterpreter(const InterpreterSpec& sp, const Words& w, size_t* through) {
  const std::string& prog = w[0];
  const size_t end = w.size();  // the whole command, redirections included
  std::string why;
  size_t last = 0;
  auto risk = [&](size_t at, const std::string& what) {
    if (why.empty()) why = prog + ": " + what;
    last = std::max(last, at);
  };
  auto done = [&] {
    *through = last;
    return why;
  };
  bool info = false;
  bool code = false;  // the program is given by options: operands are its arguments
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (a == "--" || a.size() < 2 || a[0] != '-') {
      size_t s = a == "--" ? k + 1 : k;
      if (code) return done();
      if (s >= w.size()) break;
      if (IsStreamScript(w[s])) {
        risk(end,
             "the script '" + w[s] + "' is a stream, not a file (" + std::string(sp.why) + ")");
      }
      return done();
    }
    if (a[1] == '-') {
      size_t eq = a.find('=');
      std::string_view name =
          std::string_view(a).substr(2, eq == std::string::npos ? a.npos : eq - 2);
      if (Listed(sp.long_info, name)) {
        info = true;
      } else if (eq == std::string::npos && Listed(sp.long_noarg, name)) {
      } else if (Listed(sp.long_arg, name)) {
        if (eq == std::string::npos) ++k;
      } else {
        // Unknown: it may run code (`--import`, `--eval`) or take the next
        // word, which then cannot be read.
        risk(end, "option '" + a + "' is not known to be harmless (" + std::string(sp.why) + ")");
        return done();
      }
      continue;
    }
    for (size_t j = 1; j < a.size(); ++j) {
      char ch = a[j];
      if (In(sp.short_code, ch)) {
        size_t at = k;
        if (j + 1 == a.size() && k + 1 < w.size()) at = ++k;
        risk(at, "'-" + std::string(1, ch) + "' " + std::string(sp.why));
        code = true;
        // `-c CODE` and `-m MODULE` end python's options.
        if (sp.family == "python") return done();
        break;
      }
      if (In(sp.short_risky_flags, ch)) {
        risk(k, "'-" + std::string(1, ch) + "' " + std::string(sp.why));
        if (sp.family == "perl") break;  // `-i.bak`, `-d:Module`
        continue;
      }
      if (In(sp.short_info, ch)) {
        info = true;
        if (sp.family == "perl" && ch == 'V') break;  // `-V:name`
        continue;
      }
      if (In(sp.short_noarg, ch)) continue;
      if (In(sp.short_digits, ch)) {
        // perl: `-0[octal]`, `-0xHEX`, `-l[octal]`, `-C[number or IOEioSDALa]`;
        // ruby: `-0[octal]`, `-W[level]`, `-Kcode` (one letter). What
        // follows is the next option (`-0e CODE`, `-lne CODE`).
        std::string_view allowed = ch == 'C' ? "0123456789IOEioSDALa" : "01234567";
        size_t most = std::string::npos;
        if (ch == '0' && j + 1 < a.size() && a[j + 1] == 'x') {
          ++j;
          allowed = "0123456789abcdefABCDEF";
        } else if (ch == 'W') {
          if (j + 1 < a.size() && a[j + 1] == ':') break;  // `-W:category`
          allowed = "0123456789";
        } else if (ch == 'K') {
          allowed = "eEnNsSuUaA";
          most = 1;
        }
        for (size_t taken = 0; taken < most && j + 1 < a.size() && In(allowed, a[j + 1]); ++taken)
          ++j;
        continue;
      }
      if (In(sp.short_rest, ch)) break;
      if (In(sp.short_arg, ch)) {
        if (j + 1 == a.size()) ++k;
        break;
      }
      if (In(sp.short_script, ch)) {
        std::string file = j + 1 < a.size() ? a.substr(j + 1) : (k + 1 < w.size() ? w[k + 1] : "");
        if (file.empty() || IsStreamScript(file)) {
          risk(end,
               "the script '" + file + "' is a stream, not a file (" + std::string(sp.why) + ")");
        }
        return done();
      }
      risk(end, "option '-" + std::string(1, ch) + "' is not known to be harmless (" +
                    std::string(sp.why) + ")");
      return done();
    }
  }
  if (!code && !info) {
    risk(end, "no script file: the program is read from standard input");
  }
  return done();
}

// make: `--eval`/`-E` evaluate text as makefile rules, a makefile read from
// a stream (`-f -`, `-f /dev/stdin`) is code on the line, and a variable
// given as an operand (`CC=...`, `SHELL=...`) replaces a program the
// recipes run. Running the workspace's own makefile is what a rule naming
// make allows.
std::string CheckMake(const Words& w) {
  static const std::vector<std::string_view> kLongArg = {
      "directory", "include-dir", "old-file", "assume-old", "new-file", "assume-new", "what-if"};
  auto stream_file = [&](const std::string& f) {
    return IsStreamScript(f) ? "make: the makefile '" + f + "' is a stream (code on the line)"
                             : std::string();
  };
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (a == "--") continue;
    if (a.starts_with("--")) {
      size_t eq = a.find('=');
      if (LongMatches(a, {"eval"})) return "make: '" + a + "' evaluates text as makefile rules";
      if (LongMatches(a, {"file", "makefile"})) {
        std::string f =
            eq != std::string::npos ? a.substr(eq + 1) : (k + 1 < w.size() ? w[++k] : "");
        if (auto why = stream_file(f); !why.empty()) return why;
      } else if (eq == std::string::npos && LongMatches(a, kLongArg)) {
        ++k;
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      for (size_t j = 1; j < a.size(); ++j) {
        char ch = a[j];
        std::string value = j + 1 < a.size() ? a.substr(j + 1) : "";
        if (ch == 'E') return "make: '-E' evaluates text as makefile rules";
        if (ch == 'f') {
          if (value.empty() && k + 1 < w.size()) value = w[++k];
          if (auto why = stream_file(value); !why.empty()) return why;
          break;
        }
        if (In("CIoW", ch)) {
          if (value.empty()) ++k;
          break;
        }
        if (In("jlO", ch)) break;  // optional value, attached or a number after
        if (!In("bBdehikLnpqrRsStvw", ch)) {
          return "make: option '-" + std::string(1, ch) + "' is not known to be harmless";
        }
      }
      continue;
    }
    if (a.find('=') != std::string::npos) {
      return "make: '" + a + "' sets a variable that recipes may run as a program";
    }
  }
  return "";
}

// npm, npx, pnpm, yarn: configuration given on the line that makes scripts
// run other programs or code (`--node-options`, `--script-shell`), or that
// runs a command directly (`--call`, `-c`). Read to the end, past `--`.
std::string CheckNpm(const Words& w) {
  static const std::vector<std::string_view> kRisky = {
      "node-options", "script-shell",  "shell",    "userconfig", "globalconfig",
      "call",         "editor",        "browser",  "viewer",     "git",
      "init-module",  "onload-script", "node-gyp", "package",    "npm-path"};
  // After `--` the words are appended to the script's command: when that is
  // an interpreter (`"test": "node --test"`), these run or preload code.
  static const std::vector<std::string_view> kScriptCode = {
      "eval", "print", "require", "import", "loader", "experimental-loader", "env-file"};
  const bool npx = w[0] == "npx";
  bool to_script = false;
  for (size_t k = 1; k < w.size(); ++k) {
    std::string a = w[k];
    if (a == "--") {
      to_script = true;
      continue;
    }
    if (to_script && (LongMatches(a, kScriptCode) || ShortHas(a, "eprcmM"))) {
      return w[0] + ": '" + a + "' is passed to the script's command, which may run it as code";
    }
    if (a.starts_with("--")) {
      std::replace(a.begin(), a.end(), '_', '-');
      std::string_view name = std::string_view(a).substr(2, a.find('=') - 2);
      if (name == "global" || name.empty()) continue;
      if (LongMatches(a, kRisky) && (npx || name.find("package") == std::string_view::npos)) {
        return w[0] + ": '" + w[k] + "' makes scripts run other programs or code";
      }
    } else if (ShortHas(a, npx ? "cp" : "c")) {
      return w[0] + ": '" + a + "' runs a command";
    }
  }
  return "";
}

using Checker = std::string (*)(const Words&);

Checker FindChecker(std::string_view p) {
  if (p == "git") return CheckGit;
  if (p == "sed" || p == "gsed") return CheckSed;
  if (p == "tar" || p == "gtar" || p == "bsdtar") return CheckTar;
  if (p == "awk" || p == "gawk" || p == "mawk" || p == "nawk" || p == "busybox-awk")
    return CheckAwk;
  if (p == "xxd") return CheckXxd;
  if (p == "tee") return CheckTee;
  if (p == "uniq") return CheckUniq;
  if (p == "make" || p == "gmake") return CheckMake;
  if (p == "npm" || p == "npx" || p == "pnpm" || p == "yarn") return CheckNpm;
  return nullptr;
}

const OptionRisk* FindTable(std::string_view p) {
  for (const auto& r : Table()) {
    if (std::find(r.programs.begin(), r.programs.end(), p) != r.programs.end()) return &r;
  }
  return nullptr;
}

}  // namespace

std::string RiskFamily(std::string_view program) {
  // GNU tools installed with a `g` prefix (`gfind`, `gsort`, `gdd`).
  static const std::vector<std::string_view> kGnu = {"find", "sort",  "dd",   "tee",   "split",
                                                     "shuf", "iconv", "uniq", "sdiff", "xxd"};
  if (program.size() > 1 && program[0] == 'g' &&
      std::find(kGnu.begin(), kGnu.end(), program.substr(1)) != kGnu.end()) {
    return std::string(program.substr(1));
  }
  static const std::vector<std::pair<std::string_view, std::string_view>> kFamilies = {
      {"python", "python"}, {"pypy", "python"}, {"perl", "perl"},  {"ruby", "ruby"},
      {"nodejs", "node"},   {"node", "node"},   {"php", "php"},    {"luajit", "lua"},
      {"lua", "lua"},       {"tclsh", "tclsh"}, {"wish", "tclsh"}, {"Rscript", "Rscript"}};
  for (const auto& [prefix, family] : kFamilies) {
    if (!program.starts_with(prefix)) continue;
    std::string_view rest = program.substr(prefix.size());
    // `python3`, `python3.11`, `perl5.36.0`, `perl5.36-x86_64-linux-gnu`,
    // `pypy3`: a rule `bash(python3*)` matches these names too.
    if (rest.empty() || (rest[0] >= '0' && rest[0] <= '9') || rest[0] == '.' || rest[0] == '-' ||
        rest[0] == '_')
      return std::string(family);
  }
  return std::string(program);
}

bool HasRiskEntry(std::string_view program) {
  std::string family = RiskFamily(program);
  return FindInterpreter(family) != nullptr || FindChecker(family) != nullptr ||
         FindTable(family) != nullptr;
}

std::vector<std::string> RiskPrograms() {
  std::vector<std::string> out = {"git",   "sed",  "gsed", "tar",  "gtar", "bsdtar", "awk",
                                  "gawk",  "mawk", "nawk", "xxd",  "tee",  "uniq",   "make",
                                  "gmake", "npm",  "npx",  "pnpm", "yarn"};
  for (const auto& s : Interpreters()) out.emplace_back(s.family);
  for (const auto& r : Table()) {
    for (auto p : r.programs) out.emplace_back(p);
  }
  return out;
}

std::string EscalationReason(const std::vector<std::string>& words, const std::vector<bool>& exact,
                             size_t* through) {
  size_t ignored = 0;
  if (through == nullptr) through = &ignored;
  *through = words.size();
  if (words.empty() || !HasRiskEntry(words[0])) return "";
  for (size_t i = 1; i < words.size() && i < exact.size(); ++i) {
    if (!exact[i]) {
      return words[0] + ": argument '" + words[i] +
             "' is not a literal word (it could expand to an option)";
    }
  }
  std::string family = RiskFamily(words[0]);
  if (const InterpreterSpec* sp = FindInterpreter(family)) {
    return CheckInterpreter(*sp, words, through);
  }
  if (Checker c = FindChecker(family)) return c(words);
  return CheckTable(*FindTable(family), words);
}

}  // namespace agentloop::permissions
