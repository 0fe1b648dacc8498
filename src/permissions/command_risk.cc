// The escalation tables: simple per-family option lists, plus checkers for
// the families whose grammar needs more (git, sed, tar, awk, xxd, tee).
#include "permissions/command_risk.h"

#include <algorithm>

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
        "trace-ascii", "stderr", "output-dir", "config", "libcurl", "etag-save", "hsts", "alt-svc"},
       {},
       false,
       "writes a file"},
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
      {{"perl"}, "eEi", {}, {}, false, "runs code given on the command line or edits in place"},
      {{"python", "python2", "python3"}, "c", {}, {}, false, "runs code given on the command line"},
      {{"ruby"}, "ei", {}, {}, false, "runs code given on the command line or edits in place"},
      {{"node", "nodejs"},
       "ep",
       {"eval", "print"},
       {},
       false,
       "runs code given on the command line"},
      {{"php"}, "r", {}, {}, false, "runs code given on the command line"},
      {{"lua"}, "e", {}, {}, false, "runs code given on the command line"},
      {{"psql"},
       "cf",
       {"command", "file", "output", "log-file"},
       {},
       false,
       "runs commands (including shell escapes) or writes a file"},
      {{"mysql", "mariadb"},
       "e",
       {"execute", "tee", "pager"},
       {},
       false,
       "runs commands (including shell escapes) or writes a file"},
      {{"rg"}, "", {"pre"}, {}, false, "runs a preprocessor program"},
      {{"fd", "fdfind"}, "xX", {"exec", "exec-batch"}, {}, false, "runs commands"},
      {{"yq"}, "i", {"inplace"}, {}, false, "edits files in place"},
      {{"file"}, "C", {"compile"}, {}, false, "writes a file"},
      {{"gpg", "gpg2"}, "o", {"output", "exec-path"}, {}, false, "writes a file or runs a program"},
      {{"openssl"},
       "",
       {},
       {"-out", "-keyout", "-engine", "-writerand", "-sess_out", "-keylogfile", "-signkey"},
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
  for (size_t i = 1; i < w.size(); ++i) {
    const std::string& a = w[i];
    if (a == "--") break;
    bool prefixed = std::any_of(r.word_prefixes.begin(), r.word_prefixes.end(),
                                [&](std::string_view p) { return a.starts_with(p); });
    if (prefixed || ShortHas(a, r.short_letters) || LongMatches(a, r.long_names) ||
        std::find(r.words.begin(), r.words.end(), a) != r.words.end()) {
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
  for (size_t k = i + 1; k < w.size(); ++k) {
    const std::string& a = w[k];
    if (a == "--") break;
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
// pipes or redirects escalates.
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
  for (std::string_view bad : {"system", "|", ">", "@load", "@include", "getline"}) {
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
  return nullptr;
}

const OptionRisk* FindTable(std::string_view p) {
  for (const auto& r : Table()) {
    if (std::find(r.programs.begin(), r.programs.end(), p) != r.programs.end()) return &r;
  }
  return nullptr;
}

}  // namespace

bool HasRiskEntry(std::string_view program) {
  return FindChecker(program) != nullptr || FindTable(program) != nullptr;
}

std::vector<std::string> RiskPrograms() {
  std::vector<std::string> out = {"git", "sed",  "gsed", "tar",  "gtar", "bsdtar",
                                  "awk", "gawk", "mawk", "nawk", "xxd",  "tee"};
  for (const auto& r : Table()) {
    for (auto p : r.programs) out.emplace_back(p);
  }
  return out;
}

std::string EscalationReason(const std::vector<std::string>& words,
                             const std::vector<bool>& exact) {
  if (words.empty() || !HasRiskEntry(words[0])) return "";
  for (size_t i = 1; i < words.size() && i < exact.size(); ++i) {
    if (!exact[i]) {
      return words[0] + ": argument '" + words[i] +
             "' is not a literal word (it could expand to an option)";
    }
  }
  if (Checker c = FindChecker(words[0])) return c(words);
  return CheckTable(*FindTable(words[0]), words);
}

}  // namespace agentloop::permissions
