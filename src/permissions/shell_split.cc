// A conservative shell lexer: one pass over the line, recursing into
// subshells and substitutions, collecting simple commands as lists of raw
// words. See shell_split.h for what it recognises.
#include "permissions/shell_split.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "permissions/command_risk.h"

namespace agentloop::permissions {
namespace {

constexpr int kMaxDepth = 32;

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsAssignment(std::string_view w) {
  size_t eq = w.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  size_t end = eq;
  if (w[end - 1] == '+') --end;  // FOO+=x
  if (end == 0) return false;
  for (size_t k = 0; k < end; ++k) {
    char c = w[k];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (k > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsHarmlessTarget(std::string_view t) {
  return t == "/dev/null" || t == "/dev/stdout" || t == "/dev/stderr";
}

bool IsNameChar(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// A character that cannot end a word or start an operator: both sides of a
// line continuation must be one for the reader to join them as bash does.
bool IsPlainWordChar(char c) {
  return IsNameChar(c) || c == '-' || c == '.' || c == '/' || c == ',' || c == ':' || c == '@' ||
         c == '%' || c == '+' || c == '=' || c == ' ' || c == '\t';
}

// `${...}` content bash reads as a plain parameter: a name, digits, or one
// special parameter.
bool IsPlainParameter(std::string_view s) {
  if (s.empty()) return false;
  if (s.size() == 1 && std::string_view("@*#?-$!0123456789").find(s[0]) != std::string_view::npos)
    return true;
  if (AllDigits(s)) return true;
  if (s[0] >= '0' && s[0] <= '9') return false;
  return std::all_of(s.begin(), s.end(), IsNameChar);
}

// Reserved words the reader drops at the start of a command.
bool IsReservedWord(std::string_view w) {
  static const std::set<std::string, std::less<>> kReserved = {
      "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!"};
  return kReserved.count(w) > 0;
}

// Variables that make bash or the dynamic loader run or find other code:
// assigning them makes the reader's program names unreliable.
// `BASH_FUNC_name%%` (set through env) is a function bash imports from its
// environment, replacing the command `name`.
bool IsShellSensitiveVariable(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {"PATH",
                                                            "BASH_ENV",
                                                            "ENV",
                                                            "PS4",
                                                            "PROMPT_COMMAND",
                                                            "SHELLOPTS",
                                                            "BASHOPTS",
                                                            "LD_PRELOAD",
                                                            "LD_LIBRARY_PATH",
                                                            "LD_AUDIT",
                                                            "BASH_LOADABLES_PATH",
                                                            "EXECIGNORE",
                                                            "CDPATH"};
  return name.starts_with("BASH_FUNC_") || kNames.count(name) > 0;
}

// Variables that make a common program run other code (interpreters'
// preloads and library paths, git's helpers and configuration, pagers,
// editors, make's and npm's flags): assigning one for a command escalates
// it, like an option would.
bool IsProgramSensitiveVariable(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {"NODE_OPTIONS",
                                                            "NODE_PATH",
                                                            "PERL5OPT",
                                                            "PERL5LIB",
                                                            "PERLLIB",
                                                            "PERL5DB",
                                                            "PYTHONSTARTUP",
                                                            "PYTHONPATH",
                                                            "PYTHONHOME",
                                                            "PYTHONINSPECT",
                                                            "RUBYOPT",
                                                            "RUBYLIB",
                                                            "GIT_SSH",
                                                            "GIT_SSH_COMMAND",
                                                            "GIT_EXTERNAL_DIFF",
                                                            "GIT_PAGER",
                                                            "GIT_EDITOR",
                                                            "GIT_SEQUENCE_EDITOR",
                                                            "GIT_EXEC_PATH",
                                                            "GIT_DIR",
                                                            "GIT_WORK_TREE",
                                                            "GIT_ASKPASS",
                                                            "GIT_PROXY_COMMAND",
                                                            "GIT_TEMPLATE_DIR",
                                                            "GIT_CONFIG",
                                                            "GIT_CONFIG_GLOBAL",
                                                            "GIT_CONFIG_SYSTEM",
                                                            "GIT_CONFIG_COUNT",
                                                            "GIT_CONFIG_PARAMETERS",
                                                            "PAGER",
                                                            "MANPAGER",
                                                            "EDITOR",
                                                            "VISUAL",
                                                            "LESSOPEN",
                                                            "LESSCLOSE",
                                                            "MAKEFLAGS",
                                                            "MFLAGS",
                                                            "SSH_ASKPASS",
                                                            "BROWSER"};
  if (name.starts_with("GIT_CONFIG_KEY_") || name.starts_with("GIT_CONFIG_VALUE_")) return true;
  // npm reads its configuration (`node-options`, `script-shell`) from
  // npm_config_* variables, in any case.
  std::string lower;
  for (char c : name.substr(0, 11)) lower.push_back(static_cast<char>(std::tolower(c)));
  if (lower == "npm_config_") return true;
  return kNames.count(name) > 0;
}

bool IsSensitiveVariable(std::string_view name) {
  return IsShellSensitiveVariable(name) || IsProgramSensitiveVariable(name);
}

// The name assigned by `name=value` or `name+=value`.
std::string_view AssignedName(std::string_view assignment) {
  std::string_view name = assignment.substr(0, assignment.find('='));
  if (!name.empty() && name.back() == '+') name.remove_suffix(1);
  return name;
}

// An assignment `name=value` that changes what commands run; a pager set to
// a plain pager program (`GIT_PAGER=cat`) does not.
bool IsSensitiveAssignment(std::string_view assignment) {
  size_t eq = assignment.find('=');
  std::string_view name = AssignedName(assignment);
  if (!IsSensitiveVariable(name)) return false;
  std::string_view value = eq == std::string_view::npos ? "" : assignment.substr(eq + 1);
  bool pager = name == "PAGER" || name == "GIT_PAGER" || name == "MANPAGER";
  return !(pager && (value.empty() || value == "cat" || value == "less" || value == "more"));
}

std::string Basename(const std::string& w) {
  size_t slash = w.rfind('/');
  if (slash != std::string::npos && slash + 1 < w.size()) return w.substr(slash + 1);
  return w;
}

std::string Join(const std::vector<std::string>& words, size_t from) {
  std::string out;
  for (size_t k = from; k < words.size(); ++k) {
    if (!out.empty()) out.push_back(' ');
    out += words[k];
  }
  return out;
}

struct Heredoc {
  std::string delim;
  bool strip_tabs = false;
  bool expand = true;
  bool script = false;  // standard input of a shell reading commands
};

// Where a command's standard input comes from, as its redirections say.
struct StdinSource {
  enum Kind { kInherited, kFile, kHereString, kHeredoc, kOther } kind = kInherited;
  std::string word;    // the file or the here-string, as written
  size_t heredoc = 0;  // index in the pending here-documents
};

// A path that is standard input itself.
bool IsStdinPath(std::string_view p) {
  return p == "/dev/stdin" || p == "/dev/fd/0" || p == "/proc/self/fd/0";
}

// A file operand that is a stream rather than a file the reader can name.
bool IsStreamPath(std::string_view p) {
  return p.starts_with("/dev/") || p.starts_with("/proc/") || p.starts_with("<(") ||
         p.starts_with(">(");
}

enum class Pending {
  kNone,
  kOutputTarget,
  kDupTarget,
  kInputTarget,
  kHeredocDelim,
  kHeredocDelimStrip
};

struct Builder {
  std::vector<std::string> words;
  std::vector<bool> redir;  // words[i] is a redirection operator or its target
  std::string word;
  bool in_word = false;
  Pending pending = Pending::kNone;
  bool writes = false;
};

// One wrapper's option grammar (getopt style, stopping at the first operand).
struct WrapperSpec {
  std::string_view name;
  std::string_view short_noarg;
  std::string_view short_arg;
  std::string_view short_optarg;  // takes an argument only when attached (`-i{}`)
  std::string_view short_nocmd;   // the program is not run (`command -v x`)
  std::vector<std::string_view> long_noarg;
  std::vector<std::string_view> long_arg;
  std::vector<std::string_view> long_optarg;  // takes an argument only after '='
  int operands_before_command = 0;            // timeout's duration
  bool assignments = false;                   // NAME=VALUE words before the command (env, sudo)
  bool dash_alone = false;                    // env's `-`
};

const WrapperSpec* FindWrapper(std::string_view name) {
  static const std::vector<WrapperSpec> kSpecs = {
      {"env",
       "i0v",
       "uC",
       "",
       "",
       {"ignore-environment", "null", "debug"},
       {"unset", "chdir"},
       {},
       0,
       true,
       true},
      {"command", "p", "", "", "vV", {}, {}, {}, 0, false, false},
      {"builtin", "", "", "", "", {}, {}, {}, 0, false, false},
      {"exec", "cl", "a", "", "", {}, {}, {}, 0, false, false},
      {"nohup", "", "", "", "", {}, {}, {}, 0, false, false},
      {"nice", "0123456789", "n", "", "", {}, {"adjustment"}, {}, 0, false, false},
      {"timeout",
       "v",
       "ks",
       "",
       "",
       {"preserve-status", "foreground", "verbose"},
       {"kill-after", "signal"},
       {},
       1,
       false,
       false},
      {"stdbuf", "", "ioe", "", "", {}, {"input", "output", "error"}, {}, 0, false, false},
      {"setsid", "cfw", "", "", "", {"ctty", "fork", "wait"}, {}, {}, 0, false, false},
      {"ionice", "t", "cn", "", "", {"ignore"}, {"class", "classdata"}, {}, 0, false, false},
      {"time", "p", "", "", "", {}, {}, {}, 0, false, false},
      {"sudo",
       "ABbEHNnPSk",
       "acCDgprRtTuU",
       "h",
       "",
       {"askpass", "background", "bell", "set-home", "non-interactive", "no-update",
        "preserve-groups", "stdin", "reset-timestamp"},
       {"close-from", "chdir", "group", "prompt", "chroot", "role", "type", "command-timeout",
        "user", "other-user"},
       {"preserve-env", "host"},
       0,
       true,
       false},
      {"doas", "n", "u", "", "", {}, {}, {}, 0, false, false},
      {"xargs",
       "0prtx",
       "aEdILnPs",
       "eil",
       "",
       {"null", "interactive", "no-run-if-empty", "verbose", "exit", "open-tty"},
       {"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"},
       {"replace", "eof", "max-lines"},
       0,
       false,
       false},
  };
  for (const auto& s : kSpecs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool Contains(const std::vector<std::string_view>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Programs that run another command with a grammar this reader does not
// model: a line using them is incomplete.
bool IsOpaqueRunner(std::string_view p) {
  static const std::set<std::string, std::less<>> kRunners = {
      "watch",        "flock",       "chroot",   "unshare",  "nsenter",     "strace",
      "ltrace",       "gdb",         "valgrind", "runuser",  "su",          "script",
      "parallel",     "ssh",         "chrt",     "taskset",  "numactl",     "fakeroot",
      "firejail",     "systemd-run", "pkexec",   "busybox",  "toybox",      "catchsegv",
      "unbuffer",     "proot",       "cgexec",   "torsocks", "proxychains", "proxychains4",
      "sg",           "newgrp",      "coproc",   "sshpass",  "expect",      "nohup.sh",
      "caffeinate",   "retry",       "entr",     "tmux",     "screen",      "dtach",
      "faketime",     "ts",          "pv",       "setpriv",  "capsh",       "bwrap",
      "sandbox-exec", "at",          "batch",    "crontab"};
  return kRunners.count(p) > 0;
}

// Options whose value is a command: long names (`--name=CMD`, `--name CMD`),
// short letters (`-X CMD`, `-XCMD`) and one exact word (zip's `-TT CMD`).
struct CommandOptions {
  std::vector<std::string_view> long_names;
  std::string_view short_letters;
  std::string_view exact;
};

const CommandOptions* FindCommandOptions(std::string_view prog) {
  static const CommandOptions kTar = {{"to-command", "use-compress-program", "checkpoint-action",
                                       "info-script", "new-volume-script", "rsh-command"},
                                      "IF",
                                      ""};
  static const CommandOptions kZip = {{"unzip-command"}, "", "-TT"};
  static const CommandOptions kSort = {{"compress-program"}, "", ""};
  static const CommandOptions kSplit = {{"filter"}, "", ""};
  static const CommandOptions kRg = {{"pre"}, "", ""};
  static const CommandOptions kSdiff = {{"diff-program"}, "", ""};
  if (prog == "tar" || prog == "gtar" || prog == "bsdtar") return &kTar;
  if (prog == "zip") return &kZip;
  if (prog == "sort" || prog == "gsort") return &kSort;
  if (prog == "split" || prog == "gsplit") return &kSplit;
  if (prog == "rg") return &kRg;
  if (prog == "sdiff" || prog == "gsdiff") return &kSdiff;
  return nullptr;
}

// A shell, also under a versioned name (`zsh-5.9`, `ksh93`, `bash5.2`).
bool IsShell(std::string_view p) {
  static const std::set<std::string, std::less<>> kShells = {
      "sh", "bash", "zsh", "dash", "ksh", "mksh", "yash", "rbash", "fish", "ash", "posh"};
  while (!p.empty() && ((p.back() >= '0' && p.back() <= '9') || p.back() == '.'))
    p.remove_suffix(1);
  if (p.ends_with('-') || p.ends_with('_')) p.remove_suffix(1);
  return kShells.count(p) > 0;
}

class Splitter {
 public:
  Splitter(std::string_view s, CommandLine* out, int depth) : s_(s), out_(out), depth_(depth) {}

  void Run() {
    if (depth_ > kMaxDepth) {
      Fail("nesting deeper than 32 levels");
      return;
    }
    for (char c : s_) {
      auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t' && c != '\n') || u == 0x7f) {
        Fail("a control character other than tab and newline");
        break;
      }
    }
    ParseList(0);
    if (!heredocs_.empty()) Fail("here-document without a body");
  }

  // The body of an unquoted here-document: only expansions are parsed.
  void RunHeredocBody() {
    while (i_ < s_.size()) ScanExpansionChar();
  }

 private:
  void Fail(std::string why) {
    if (out_->complete) out_->problem = std::move(why);
    out_->complete = false;
  }

  char Peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  void EndWord(Builder& b) {
    if (!b.in_word) return;
    bool redir = b.pending != Pending::kNone;
    switch (b.pending) {
      case Pending::kNone:
      case Pending::kInputTarget:
        break;
      case Pending::kOutputTarget:
        if (!IsHarmlessTarget(UnquoteWord(b.word))) b.writes = true;
        break;
      case Pending::kDupTarget: {
        std::string t = UnquoteWord(b.word);
        if (!AllDigits(t) && t != "-" && !IsHarmlessTarget(t)) b.writes = true;
        break;
      }
      case Pending::kHeredocDelim:
      case Pending::kHeredocDelimStrip: {
        Heredoc h;
        h.delim = UnquoteWord(b.word);
        h.strip_tabs = b.pending == Pending::kHeredocDelimStrip;
        h.expand = b.word.find_first_of("'\"\\") == std::string::npos;
        if (b.word.find_first_of("$`") != std::string::npos) {
          Fail("a here-document delimiter with '$' or '`'");
        }
        if (nested_lists_ > 0) Fail("a here-document inside a nested command");
        heredocs_.push_back(std::move(h));
        break;
      }
    }
    b.pending = Pending::kNone;
    b.words.push_back(std::move(b.word));
    b.redir.push_back(redir);
    b.word.clear();
    b.in_word = false;
  }

  void Flush(Builder& b) {
    EndWord(b);
    if (b.pending != Pending::kNone) Fail("redirection without a target");
    Emit(std::move(b.words), std::move(b.redir), b.writes);
    b = Builder();
  }

  // Analyses one simple command (words with redirections flagged) and adds
  // it, then what it runs.
  void Emit(std::vector<std::string> words, std::vector<bool> redir, bool writes) {
    static const std::set<std::string, std::less<>> kRefused = {
        "case", "esac", "for", "select", "function", "coproc", "in", "[[", "]]", "let"};
    redir.resize(words.size(), false);
    size_t start = 0;
    while (start < words.size() && !redir[start] && IsReservedWord(words[start])) ++start;
    if (start >= words.size()) return;
    words.erase(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(start));
    redir.erase(redir.begin(), redir.begin() + static_cast<std::ptrdiff_t>(start));
    SimpleCommand cmd;
    cmd.text = Join(words, 0);
    cmd.writes_file = writes;
    // The words bash passes to the program (redirections removed).
    std::vector<size_t> pos;  // index into `words`
    std::vector<std::string> uq;
    std::vector<bool> exact;
    for (size_t k = 0; k < words.size(); ++k) {
      if (redir[k]) continue;
      pos.push_back(k);
      std::string v;
      bool ok = UnquoteWordExact(words[k], &v);
      uq.push_back(ok ? v : UnquoteWord(words[k]));
      exact.push_back(ok);
    }
    size_t n = uq.size();
    if (n > 0 && !redir[pos[0]] && kRefused.count(words[pos[0]])) {
      Fail("'" + words[pos[0]] + "' is not understood");
    }
    // Assignments and wrappers.
    size_t k = 0;
    bool wrapped = false;
    bool via_xargs = false;
    bool wrapper_assignments = false;
    std::string assignment_escalation;  // a variable that makes the program run other code
    size_t assignment_through = 0;
    while (true) {
      while (k < n && (IsAssignment(words[pos[k]]) ||
                       (wrapper_assignments && exact[k] && uq[k].find('=') != std::string::npos &&
                        uq[k][0] != '-'))) {
        std::string_view name = std::string_view(uq[k]).substr(0, uq[k].find('='));
        if (name.find('[') != std::string_view::npos) Fail("an assignment to an array element");
        if (IsShellSensitiveVariable(AssignedName(uq[k]))) {
          Fail("an assignment to " + std::string(AssignedName(uq[k])) +
               ", which changes what commands run");
        } else if (IsSensitiveAssignment(uq[k])) {
          if (assignment_escalation.empty()) {
            assignment_escalation = "an assignment to " + std::string(AssignedName(uq[k])) +
                                    " makes the program run other code";
          }
          assignment_through = k;
        }
        if (name.starts_with("BASH_FUNC_")) {
          // `() { body; }`: the function's commands, for deny rules.
          SplitNested("f" + uq[k].substr(uq[k].find('=') + 1));
        }
        ++k;
      }
      wrapper_assignments = false;
      if (k >= n) break;
      if (!exact[k]) {
        Fail("the program name '" + words[pos[k]] + "' is not a literal word");
        break;
      }
      std::string prog = Basename(uq[k]);
      cmd.programs.push_back(prog);
      const WrapperSpec* spec = FindWrapper(prog);
      if (spec == nullptr) break;
      size_t w0 = k;
      bool nocmd = false;
      ++k;
      if (!ParseWrapperOptions(*spec, uq, exact, k, nocmd)) {
        k = n;
        break;
      }
      for (int o = 0; o < spec->operands_before_command && k < n; ++o, ++k) {
        if (!exact[k]) Fail("an operand of '" + prog + "' is not a literal word");
      }
      if (nocmd || k >= n) {
        k = w0;  // the wrapper itself is the program
        break;
      }
      wrapped = true;
      if (prog == "xargs") via_xargs = true;
      wrapper_assignments = spec->assignments;
    }
    if (wrapped && k < n && !redir[pos[k]] &&
        (kRefused.count(words[pos[k]]) || IsReservedWord(words[pos[k]]) || words[pos[k]] == "((")) {
      Fail("'" + words[pos[k]] + "' after a wrapper is not understood");
    }
    if (k < n) {
      cmd.bare = Basename(uq[k]);
      for (size_t a = k + 1; a < n; ++a) cmd.bare += " " + uq[a];
    } else {
      cmd.bare = cmd.text;
    }
    if (wrapped && k < n) {
      size_t at = 0;
      for (size_t w = 0; w < pos[k]; ++w) at += words[w].size() + 1;
      cmd.inner = Join(words, pos[k]);
      cmd.inner_program_end = at + words[pos[k]].size();
    }
    std::string prog = k < n ? Basename(uq[k]) : "";
    std::vector<std::string> args(uq.begin() + static_cast<std::ptrdiff_t>(std::min(k, n)),
                                  uq.end());
    std::vector<bool> args_exact(exact.begin() + static_cast<std::ptrdiff_t>(std::min(k, n)),
                                 exact.end());
    if (!args.empty()) {
      args[0] = prog;
      size_t through = 0;
      cmd.escalation = EscalationReason(args, args_exact, &through);
      if (!cmd.escalation.empty() && k + through < n) {
        size_t last = pos[k + through];
        for (size_t w = 0; w < last; ++w) cmd.escalation_end += words[w].size() + 1;
        cmd.escalation_end += words[last].size();
      } else if (!cmd.escalation.empty()) {
        cmd.escalation_end = cmd.text.size();
      }
      if (via_xargs) {
        cmd.escalation =
            cmd.escalation.empty()
                ? (HasRiskEntry(prog) ? "xargs: arguments of '" + prog + "' come from its input"
                                      : "")
                : cmd.escalation;
        cmd.escalation_end = cmd.text.size();
        if (IsShell(prog) || prog == "eval" || FindWrapper(prog) != nullptr ||
            IsOpaqueRunner(prog) || HasRiskEntry(prog)) {
          Fail("xargs runs '" + prog + "' with arguments from its input");
        }
      }
    }
    if (!assignment_escalation.empty()) {
      if (k >= n) {
        Fail(assignment_escalation + " (for later commands)");
      } else {
        size_t end = 0;
        for (size_t w = 0; w < pos[assignment_through]; ++w) end += words[w].size() + 1;
        end += words[pos[assignment_through]].size();
        if (cmd.escalation.empty()) cmd.escalation = assignment_escalation;
        cmd.escalation_end = std::max(cmd.escalation_end, end);
      }
    }
    cmd.words = uq;
    out_->commands.push_back(cmd);
    stdin_ = ReadStdinSource(words, redir);
    if (k < n) RunsOtherCommands(prog, uq, exact, k, words, pos);
  }

  // The last redirection of standard input among `words`; here-documents
  // are counted from the end of the pending ones (this command's are the
  // last registered).
  StdinSource ReadStdinSource(const std::vector<std::string>& words,
                              const std::vector<bool>& redir) {
    StdinSource src;
    auto op_kind = [](std::string_view op) {
      size_t digits = 0;
      while (digits < op.size() && op[digits] >= '0' && op[digits] <= '9') ++digits;
      return op.substr(digits);
    };
    size_t docs = 0;
    for (size_t w = 0; w < words.size(); ++w) {
      if (redir[w] && (op_kind(words[w]) == "<<" || op_kind(words[w]) == "<<-")) ++docs;
    }
    size_t doc = 0;
    for (size_t w = 0; w + 1 < words.size(); ++w) {
      if (!redir[w]) continue;
      const std::string& op = words[w];
      size_t digits = 0;
      while (digits < op.size() && op[digits] >= '0' && op[digits] <= '9') ++digits;
      std::string_view kind = std::string_view(op).substr(digits);
      std::string_view fd = std::string_view(op).substr(0, digits);
      bool is_heredoc = kind == "<<" || kind == "<<-";
      size_t this_doc = is_heredoc ? doc++ : 0;
      if (kind.empty() || kind[0] != '<' || (!fd.empty() && fd != "0")) {
        ++w;  // an output redirection and its target
        continue;
      }
      const std::string& target = words[w + 1];
      if (kind == "<<<") {
        src = {StdinSource::kHereString, target, 0};
      } else if (is_heredoc) {
        if (heredocs_.size() >= docs) {
          src = {StdinSource::kHeredoc, target, heredocs_.size() - docs + this_doc};
        } else {
          src = {StdinSource::kOther, target, 0};
        }
      } else if (kind == "<" || kind == "<>") {
        src = {StdinSource::kFile, target, 0};
      } else {
        src = {StdinSource::kOther, target, 0};
      }
      ++w;
    }
    return src;
  }

  // A shell (or `source`) reads its commands from standard input: split
  // them when they are a literal here-string or here-document, name the file
  // they come from, refuse anything else (a pipe, the caller's input).
  void CommandsFromStdin(const std::string& prog) {
    switch (stdin_.kind) {
      case StdinSource::kHereString: {
        std::string script;
        if (!UnquoteWordExact(stdin_.word, &script)) {
          Fail("the commands '" + prog + "' reads from a here-string are not literal");
          SplitNested(UnquoteWord(stdin_.word));
        } else {
          SplitNested(script);
        }
        break;
      }
      case StdinSource::kHeredoc:
        heredocs_[stdin_.heredoc].script = true;
        break;
      case StdinSource::kFile: {
        std::string file;
        if (!UnquoteWordExact(stdin_.word, &file) || IsStreamPath(file)) {
          Fail("'" + prog + "' reads commands from '" + stdin_.word + "'");
        } else {
          out_->commands.back().programs.push_back(Basename(file));
        }
        break;
      }
      case StdinSource::kInherited:
      case StdinSource::kOther:
        Fail("'" + prog + "' reads commands from standard input (a pipe or the caller's input)");
        break;
    }
  }

  // Parses a wrapper's options from uq[k]; leaves k at the first operand.
  bool ParseWrapperOptions(const WrapperSpec& sp, const std::vector<std::string>& uq,
                           const std::vector<bool>& exact, size_t& k, bool& nocmd) {
    size_t n = uq.size();
    auto bad = [&](const std::string& why) {
      Fail(why);
      return false;
    };
    while (k < n) {
      const std::string& w = uq[k];
      if (!exact[k]) return bad("an argument of '" + std::string(sp.name) + "' is not literal");
      if (w == "--") {
        ++k;
        return true;
      }
      if (w == "-" && sp.dash_alone) {
        ++k;
        continue;
      }
      if (w.size() < 2 || w[0] != '-') return true;
      if (w[1] == '-') {
        size_t eq = w.find('=');
        std::string_view name =
            std::string_view(w).substr(2, eq == std::string::npos ? w.npos : eq - 2);
        bool has_eq = eq != std::string::npos;
        if (Contains(sp.long_noarg, name) && !has_eq) {
        } else if (Contains(sp.long_optarg, name)) {
        } else if (Contains(sp.long_arg, name)) {
          if (!has_eq) {
            if (++k >= n) return bad("option '" + w + "' without its argument");
            if (!exact[k])
              return bad("an argument of '" + std::string(sp.name) + "' is not literal");
          }
        } else {
          return bad("'" + std::string(sp.name) + "' option '" + w + "' is not known");
        }
        ++k;
        continue;
      }
      for (size_t j = 1; j < w.size(); ++j) {
        char ch = w[j];
        if (sp.short_nocmd.find(ch) != std::string_view::npos) {
          nocmd = true;
        } else if (sp.short_noarg.find(ch) != std::string_view::npos) {
        } else if (sp.short_optarg.find(ch) != std::string_view::npos) {
          break;
        } else if (sp.short_arg.find(ch) != std::string_view::npos) {
          if (j + 1 == w.size()) {
            if (++k >= n) return bad("option '-" + std::string(1, ch) + "' without its argument");
            if (!exact[k])
              return bad("an argument of '" + std::string(sp.name) + "' is not literal");
          }
          break;
        } else {
          return bad("'" + std::string(sp.name) + "' option '-" + std::string(1, ch) +
                     "' is not known");
        }
      }
      ++k;
    }
    return true;
  }

  // Commands a program runs from its own arguments: scripts of shells,
  // `eval` and `trap`, `find -exec`; refuses programs whose way of running
  // commands is not modelled.
  void RunsOtherCommands(const std::string& prog, const std::vector<std::string>& uq,
                         const std::vector<bool>& exact, size_t k,
                         const std::vector<std::string>& words, const std::vector<size_t>& pos) {
    size_t n = uq.size();
    auto all_exact = [&](size_t from) {
      for (size_t a = from; a < n; ++a) {
        if (!exact[a]) return false;
      }
      return true;
    };
    if (prog == "eval") {
      if (!all_exact(k + 1)) Fail("an argument of 'eval' is not literal");
      std::string script;
      for (size_t a = k + 1; a < n; ++a) script += (a > k + 1 ? " " : "") + uq[a];
      SplitNested(script);
    } else if (IsShell(prog)) {
      ShellScript(prog, uq, exact, k + 1);
    } else if (prog == "source" || prog == ".") {
      // The file is looked up in PATH when it has no '/'.
      if (k + 1 < n) {
        if (!exact[k + 1]) Fail("the file of '" + prog + "' is not literal");
        if (IsStdinPath(uq[k + 1])) {
          CommandsFromStdin(prog);
        } else if (IsStreamPath(uq[k + 1])) {
          Fail("'" + prog + "' reads commands from the stream '" + uq[k + 1] + "'");
        } else {
          out_->commands.back().programs.push_back(Basename(uq[k + 1]));
        }
      }
    } else if (prog == "mapfile" || prog == "readarray" || prog == "compgen" ||
               prog == "complete") {
      // `-C CALLBACK` is run as a command (with arguments from the input);
      // `compgen -F` runs a function.
      for (size_t a = k + 1; a < n; ++a) {
        const std::string& w = uq[a];
        if (w == "--") break;
        if (w.size() < 2 || w[0] != '-') continue;
        size_t c = w.find_first_of("CF");
        bool callback = c != std::string::npos && (w[1 + 0] != '-');
        if (!callback || (prog != "compgen" && prog != "complete" && w[c] == 'F')) continue;
        std::string cb = c + 1 < w.size() ? w.substr(c + 1) : (a + 1 < n ? uq[a + 1] : "");
        Fail("'" + prog + " -" + w[c] + "' runs a callback command");
        SplitNested(cb);
      }
    } else if (prog == "fc") {
      // Anything but listing runs commands from the history.
      for (size_t a = k + 1; a < n; ++a) {
        if (uq[a] != "-l" && uq[a] != "-n" && uq[a] != "-r" && uq[a] != "-ln" && uq[a] != "-nl" &&
            uq[a] != "-lr" && uq[a] != "-rl") {
          Fail("'fc' runs commands from the history");
          break;
        }
      }
      if (k + 1 >= n) Fail("'fc' runs commands from the history");
    } else if (prog == "history") {
      for (size_t a = k + 1; a < n; ++a) {
        const std::string& w = uq[a];
        if (w.size() > 1 && w[0] == '-' && w.find_first_of("srn") != std::string::npos) {
          Fail("'history " + w + "' changes the history that 'fc' runs");
          std::string entry;
          for (size_t e = a + 1; e < n; ++e) entry += (e > a + 1 ? " " : "") + uq[e];
          SplitNested(entry);
          break;
        }
      }
    } else if (prog == "trap") {
      size_t a = k + 1;
      while (a < n && (uq[a] == "-p" || uq[a] == "-l" || uq[a] == "-P")) ++a;
      if (a < n && uq[a] == "--") ++a;
      if (a + 1 < n && uq[a] != "-") {
        if (!exact[a]) Fail("the command of 'trap' is not literal");
        SplitNested(uq[a]);
      }
    } else if (const CommandOptions* opts = FindCommandOptions(prog)) {
      // Options whose value is a command the program runs (through a shell
      // or directly): split it, so the program it runs is named. The
      // command is escalated by its options already (command_risk.h).
      for (size_t a = k + 1; a < n; ++a) {
        const std::string& w = uq[a];
        std::optional<std::string> value;
        if (w.starts_with("--")) {
          size_t eq = w.find('=');
          std::string_view name =
              std::string_view(w).substr(2, eq == std::string::npos ? w.npos : eq - 2);
          if (!Contains(opts->long_names, name)) continue;
          if (eq != std::string::npos) {
            value = w.substr(eq + 1);
          } else if (a + 1 < n) {
            value = uq[++a];
          }
        } else if (w.size() == 2 && w[0] == '-' && opts->short_letters.find(w[1]) != w.npos) {
          if (a + 1 < n) value = uq[++a];
        } else if (w.size() > 2 && w[0] == '-' && w[1] != '-' &&
                   opts->short_letters.find(w[1]) != w.npos) {
          value = w.substr(2);
        } else if (w == opts->exact) {
          if (a + 1 < n) value = uq[++a];
        }
        if (!value) continue;
        // `--checkpoint-action=exec=CMD`
        if (value->starts_with("exec=")) value = value->substr(5);
        if (!value->empty()) SplitNested(*value);
      }
    } else if (prog == "find") {
      for (size_t a = k + 1; a < n; ++a) {
        if (uq[a] != "-exec" && uq[a] != "-execdir" && uq[a] != "-ok" && uq[a] != "-okdir")
          continue;
        size_t e = a + 1;
        while (e < n && uq[e] != ";" && !(uq[e] == "+" && e > a + 1 && uq[e - 1] == "{}")) ++e;
        if (e >= n) {
          Fail("'find " + uq[a] + "' without its terminating ';' or '+'");
          return;
        }
        std::vector<std::string> sub;
        for (size_t w = a + 1; w < e; ++w) sub.push_back(words[pos[w]]);
        if (sub.empty()) Fail("'find " + uq[a] + "' without a command");
        if (!sub.empty() && sub[0] == "{}") Fail("'find " + uq[a] + "' runs the files it finds");
        Emit(std::move(sub), {}, false);
        a = e;
      }
    } else if (IsOpaqueRunner(prog)) {
      Fail("'" + prog + "' runs a command in a way this reader does not model");
    } else if (prog == "alias" || prog == "shopt" || prog == "enable" || prog == "hash") {
      Fail("'" + prog + "' can change what later commands run");
    } else if (prog == "declare" || prog == "typeset" || prog == "local" || prog == "readonly" ||
               prog == "export") {
      for (size_t a = k + 1; a < n; ++a) {
        if (uq[a].size() > 1 && (uq[a][0] == '-' || uq[a][0] == '+') &&
            uq[a].find_first_of("in") != std::string::npos) {
          Fail("'" + prog + " " + uq[a] + "' evaluates values as arithmetic or names");
        }
        std::string name = uq[a].substr(0, uq[a].find('='));
        if (name.find('[') != std::string::npos) Fail("an assignment to an array element");
        if (uq[a].find('=') != std::string::npos && IsSensitiveAssignment(uq[a])) {
          Fail("an assignment to " + name + ", which changes what commands run");
        }
      }
    } else if (prog == "unset" || prog == "read" || prog == "printf" || prog == "mapfile" ||
               prog == "readarray" || prog == "wait" || prog == "getopts" || prog == "test" ||
               prog == "[") {
      // These name variables; a subscript in a name is evaluated as
      // arithmetic, which runs command substitutions in the value. For
      // `test`/`[` only `-v`/`-R` take names.
      bool names = prog != "printf" && prog != "test" && prog != "[";
      for (size_t a = k + 1; a < n; ++a) {
        if ((prog == "printf" && uq[a] == "-v") ||
            ((prog == "test" || prog == "[") && (uq[a] == "-v" || uq[a] == "-R"))) {
          names = true;
          continue;
        }
        if (names && uq[a].find('[') != std::string::npos) {
          Fail("an array subscript (evaluated as arithmetic) in '" + prog + "'");
        }
        if (prog != "test" && prog != "[" && IsSensitiveVariable(uq[a])) {
          Fail("'" + prog + "' sets " + uq[a] + ", which changes what later commands run");
        }
      }
    } else if (prog == "set") {
      for (size_t a = k + 1; a < n; ++a) {
        const std::string& w = uq[a];
        if (w == "--" || w == "-") break;
        if (w == "history" || w == "histexpand" ||
            (w.size() > 1 && (w[0] == '-' || w[0] == '+') && w.find('H') != std::string::npos)) {
          Fail("'set " + w + "' changes how later lines are read");
        }
      }
    }
  }

  // `bash [options] -c SCRIPT [name [args]]`: options in any cluster.
  void ShellScript(const std::string& prog, const std::vector<std::string>& uq,
                   const std::vector<bool>& exact, size_t a) {
    static const std::set<std::string, std::less<>> kLongNoArg = {
        "norc",    "noprofile", "posix",        "login",           "restricted",
        "verbose", "noediting", "dump-strings", "dump-po-strings", "protected"};
    static const std::set<std::string, std::less<>> kLongArg = {"rcfile", "init-file"};
    size_t n = uq.size();
    bool command_mode = false;
    bool read_stdin = false;
    while (a < n) {
      if (!exact[a]) {
        Fail("an argument of '" + prog + "' is not literal");
        return;
      }
      const std::string& w = uq[a];
      if (w == "--" || w == "-") {
        ++a;
        break;
      }
      if (w.starts_with("--")) {
        std::string name = w.substr(2);
        if (kLongArg.count(name)) {
          a += 2;
        } else if (kLongNoArg.count(name)) {
          ++a;
        } else {
          Fail("'" + prog + "' option '" + w + "' is not known");
          return;
        }
        continue;
      }
      if (w.size() < 2 || (w[0] != '-' && w[0] != '+')) break;
      for (size_t j = 1; j < w.size(); ++j) {
        char ch = w[j];
        if (ch == 'c' && w[0] == '-') {
          command_mode = true;
        } else if (ch == 's' && w[0] == '-') {
          read_stdin = true;
        } else if (ch == 'o') {
          ++a;
          if (a >= n || !exact[a] || uq[a] == "history" || uq[a] == "histexpand") {
            Fail("'" + prog + " -o' with an option this reader does not allow");
            return;
          }
        } else if (std::string_view("abefhkmnprstuvxBCEPTlD").find(ch) == std::string_view::npos) {
          Fail("'" + prog + "' option '" + std::string(1, w[0]) + ch + "' is not understood");
          return;
        }
      }
      ++a;
    }
    if (!command_mode) {
      // Commands from standard input: with `-s`, without a script operand,
      // or with the script `/dev/stdin`.
      if (read_stdin || a >= n || IsStdinPath(uq[a])) {
        CommandsFromStdin(prog);
        return;
      }
      // A script file, looked up in PATH when it has no '/': it is the
      // program that runs.
      if (!exact[a]) Fail("the script of '" + prog + "' is not literal");
      if (IsStreamPath(uq[a])) {
        Fail("the script of '" + prog + "' is the stream '" + uq[a] + "'");
      }
      out_->commands.back().programs.push_back(Basename(uq[a]));
      return;
    }
    if (a >= n) {
      Fail("'" + prog + " -c' without a script");
      return;
    }
    if (!exact[a]) Fail("the script of '" + prog + " -c' is not literal");
    SplitNested(uq[a]);
  }

  void SplitNested(const std::string& script) {
    Splitter nested(script, out_, depth_ + 1);
    nested.Run();
  }

  // Parses commands until `term` (')', consumed) or the end (term 0).
  void ParseList(char term) {
    if (++depth_ > kMaxDepth) {
      Fail("nesting deeper than 32 levels");
      i_ = s_.size();
      --depth_;
      return;
    }
    if (term != 0) ++nested_lists_;
    Builder b;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (term != 0 && c == term) {
        Flush(b);
        ++i_;
        --depth_;
        --nested_lists_;
        return;
      }
      switch (c) {
        case ' ':
        case '\t':
          EndWord(b);
          ++i_;
          break;
        case '\n':
          Flush(b);
          ++i_;
          if (!heredocs_.empty()) {
            if (term != 0) Fail("a here-document body inside a nested command");
            ReadHeredocs();
          }
          break;
        case '\\':
          if (Peek(1) == '\n') {
            // Line continuation: bash joins the lines before reading tokens;
            // followed here only between plain word characters.
            char before = i_ > 0 ? s_[i_ - 1] : ' ';
            char after = i_ + 2 < s_.size() ? s_[i_ + 2] : ' ';
            if (!IsPlainWordChar(before) || !IsPlainWordChar(after)) {
              Fail("a line continuation next to an operator or quote");
            }
            i_ += 2;
          } else {
            b.word.append(s_.substr(i_, 2));
            b.in_word = true;
            i_ += 2;
          }
          break;
        case '#':
          if (b.in_word) {
            b.word.push_back(c);
            ++i_;
          } else {
            while (i_ < s_.size() && s_[i_] != '\n') ++i_;
          }
          break;
        case '\'':
          AppendSpan(b, i_, [&] { ReadSingle(/*ansi_c=*/false); });
          break;
        case '"':
          AppendSpan(b, i_, [&] { ReadDouble(); });
          break;
        case '`':
          AppendSpan(b, i_, [&] { ReadBacktick(); });
          break;
        case '$':
          AppendSpan(b, i_, [&] { ReadDollar(); });
          break;
        case '<':
        case '>':
          if (Peek(1) == '(') {
            EndWord(b);
            AppendSpan(b, i_, [&] {
              i_ += 2;
              ParseList(')');
            });
          } else {
            ReadRedirect(b);
          }
          break;
        case '&':
          if (Peek(1) == '>') {
            EndWord(b);
            std::string op = "&>";
            i_ += 2;
            if (Peek() == '>') {
              op.push_back('>');
              ++i_;
            }
            PushOp(b, op, Pending::kOutputTarget);
          } else {
            Flush(b);
            i_ += Peek(1) == '&' ? 2 : 1;
          }
          break;
        case ';':
          if (Peek(1) == ';' || Peek(1) == '&') Fail("a 'case' terminator");
          Flush(b);
          i_ += Peek(1) == ';' ? 2 : 1;
          break;
        case '|':
          Flush(b);
          i_ += (Peek(1) == '|' || Peek(1) == '&') ? 2 : 1;
          break;
        case '(':
          if (b.in_word && !b.word.empty() && b.word.back() == '=' && b.words.empty() &&
              IsAssignment(b.word)) {
            AppendSpan(b, i_, [&] { ReadArray(); });
          } else {
            bool after_word = b.in_word;
            for (size_t w = 0; w < b.words.size(); ++w) {
              if (b.redir[w] || !IsReservedWord(b.words[w])) after_word = true;
            }
            if (after_word) Fail("'(' after a word (a function definition?)");
            if (Peek(1) == '(') {
              Fail("an arithmetic command '((...))'");
              Flush(b);
              ReadBalanced(2, '(', ')', 2, "((...))");
              break;
            }
            Flush(b);
            ++i_;
            ParseList(')');
          }
          break;
        case ')':
          Fail("unbalanced ')'");
          Flush(b);
          ++i_;
          break;
        default:
          b.word.push_back(c);
          b.in_word = true;
          ++i_;
          break;
      }
    }
    Flush(b);
    if (term == ')') Fail("missing ')'");
    if (term != 0) --nested_lists_;
    --depth_;
  }

  template <typename F>
  void AppendSpan(Builder& b, size_t start, F&& read) {
    read();
    size_t end = std::min(i_, s_.size());
    b.word.append(s_.substr(start, end - start));
    b.in_word = true;
  }

  void PushOp(Builder& b, std::string op, Pending pending) {
    if (b.pending != Pending::kNone) Fail("redirection without a target");
    b.words.push_back(std::move(op));
    b.redir.push_back(true);
    b.pending = pending;
  }

  void ReadRedirect(Builder& b) {
    std::string op;
    if (b.in_word && AllDigits(b.word)) {
      op = std::move(b.word);  // fd number: `2>`
      b.word.clear();
      b.in_word = false;
    } else {
      EndWord(b);
    }
    Pending pending = Pending::kInputTarget;
    if (s_[i_] == '>') {
      op.push_back('>');
      ++i_;
      if (Peek() == '>' || Peek() == '|') {
        op.push_back(Peek());
        ++i_;
      }
      if (Peek() == '&') {
        op.push_back('&');
        ++i_;
        pending = Pending::kDupTarget;
      } else {
        pending = Pending::kOutputTarget;
      }
    } else {
      op.push_back('<');
      ++i_;
      if (Peek() == '<') {
        op.push_back('<');
        ++i_;
        if (Peek() == '<') {
          op.push_back('<');  // here-string: the next word is data
          ++i_;
        } else if (Peek() == '-') {
          op.push_back('-');
          ++i_;
          pending = Pending::kHeredocDelimStrip;
        } else {
          pending = Pending::kHeredocDelim;
        }
      } else if (Peek() == '&') {
        op.push_back('&');
        ++i_;
      } else if (Peek() == '>') {
        op.push_back('>');
        ++i_;
        pending = Pending::kOutputTarget;
      }
    }
    PushOp(b, op, pending);
  }

  void NoteNewlineInConstruct(size_t from, size_t to) {
    if (heredocs_.empty()) return;
    if (s_.substr(from, std::min(to, s_.size()) - from).find('\n') != std::string_view::npos) {
      Fail("a here-document pending across a multi-line construct");
    }
  }

  // At a quote; moves past the closing quote.
  void ReadSingle(bool ansi_c) {
    size_t start = i_;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '\'') {
      if (ansi_c && s_[i_] == '\\') ++i_;
      ++i_;
    }
    NoteNewlineInConstruct(start, i_);
    if (i_ >= s_.size()) {
      Fail("unterminated single quote");
      return;
    }
    ++i_;
  }

  // At '"'; moves past the closing quote, parsing substitutions inside.
  void ReadDouble() {
    size_t start = i_;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      ScanExpansionChar();
    }
    NoteNewlineInConstruct(start, i_);
    if (i_ >= s_.size()) {
      Fail("unterminated double quote");
      return;
    }
    ++i_;
  }

  // At '`'. bash ends the substitution at the first unescaped backquote,
  // whatever quotes are inside, then removes the backslashes before `\`, `$`
  // and '`'; a body holding a backslash is refused (nested and escaped
  // backquotes are read differently by each shell).
  void ReadBacktick() {
    size_t start = ++i_;
    std::string body;
    bool backslash = false;
    while (i_ < s_.size() && s_[i_] != '`') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
        backslash = true;
        char e = s_[i_ + 1];
        if (e != '\\' && e != '`' && e != '$') body.push_back('\\');
        body.push_back(e);
        i_ += 2;
        continue;
      }
      body.push_back(s_[i_]);
      ++i_;
    }
    NoteNewlineInConstruct(start, i_);
    if (backslash) Fail("a backslash inside backquotes");
    if (i_ >= s_.size()) {
      Fail("missing closing '`'");
    } else {
      ++i_;
    }
    SplitNested(body);
  }

  // One step inside double quotes or an expanding here-document.
  void ScanExpansionChar() {
    char c = s_[i_];
    if (c == '\\') {
      i_ += 2;
    } else if (c == '`') {
      ReadBacktick();
    } else if (c == '$' && (Peek(1) == '(' || Peek(1) == '{' || Peek(1) == '[')) {
      ReadDollar();
    } else {
      ++i_;
    }
  }

  // At '$'.
  void ReadDollar() {
    char n1 = Peek(1);
    if (n1 == '(' && Peek(2) == '(') {
      Fail("arithmetic expansion '$((...))'");
      ReadBalanced(3, '(', ')', 2, "$((...))");
    } else if (n1 == '(') {
      i_ += 2;
      ParseList(')');
    } else if (n1 == '[') {
      Fail("arithmetic expansion '$[...]'");
      ReadBalanced(2, '[', ']', 1, "$[...]");
    } else if (n1 == '{') {
      size_t close = s_.find('}', i_ + 2);
      if (close != std::string_view::npos && IsPlainParameter(s_.substr(i_ + 2, close - i_ - 2))) {
        i_ = close + 1;
        return;
      }
      Fail("parameter expansion with operators '${...}'");
      ReadBalanced(2, '{', '}', 1, "${...}");
    } else if (n1 == '\'') {
      ++i_;
      ReadSingle(/*ansi_c=*/true);
    } else {
      ++i_;
    }
  }

  // Skips a construct this reader does not parse (the line is already
  // incomplete), still reading substitutions so deny rules see them.
  void ReadBalanced(size_t skip, char open, char close, int depth, const char* what) {
    i_ += skip;
    while (i_ < s_.size() && depth > 0) {
      char c = s_[i_];
      if (c == '\\') {
        i_ += 2;
        continue;
      }
      if (c == '`' || (c == '$' && Peek(1) == '(')) {
        ScanExpansionChar();
        continue;
      }
      if ((c == '<' || c == '>') && Peek(1) == '(') {
        i_ += 2;
        ParseList(')');
        continue;
      }
      if (c == '\'') {
        ReadSingle(/*ansi_c=*/false);
        continue;
      }
      if (c == '"') {
        ReadDouble();
        continue;
      }
      if (c == open) ++depth;
      if (c == close) --depth;
      ++i_;
    }
    if (depth > 0) Fail(std::string("unterminated ") + what);
  }

  // At '(' of `name=(...)`: an array literal, data only.
  void ReadArray() {
    size_t start = i_;
    ++i_;
    while (i_ < s_.size() && s_[i_] != ')') {
      if (s_[i_] == '\'') {
        ReadSingle(/*ansi_c=*/false);
      } else if (s_[i_] == '"') {
        ReadDouble();
      } else if (s_[i_] == '$' || s_[i_] == '`') {
        if (s_[i_] == '$' && Peek(1) == '\'') {
          ++i_;
          ReadSingle(/*ansi_c=*/true);
        } else {
          ScanExpansionChar();
          if (s_[i_ - 1] == '$') ++i_;
        }
      } else if (s_[i_] == '\\') {
        i_ += 2;
      } else if (s_[i_] == '[' || s_[i_] == '(' || s_[i_] == '#') {
        Fail("an array literal with subscripts, comments or '('");
        ++i_;
      } else {
        ++i_;
      }
    }
    NoteNewlineInConstruct(start, i_);
    if (i_ >= s_.size()) {
      Fail("unterminated array");
      return;
    }
    ++i_;
  }

  // After a newline: consumes the bodies of pending here-documents. A line
  // ends one when it equals the delimiter (after leading tabs for `<<-`);
  // in an unquoted here-document a line ending in a backslash is joined
  // with the next by bash, so it is refused here.
  void ReadHeredocs() {
    std::vector<Heredoc> docs = std::move(heredocs_);
    heredocs_.clear();
    for (const auto& h : docs) {
      bool found = false;
      std::string body;
      while (i_ < s_.size()) {
        size_t eol = s_.find('\n', i_);
        if (eol == std::string_view::npos) eol = s_.size();
        std::string joined(s_.substr(i_, eol - i_));
        // bash joins a line ending in a backslash with the next before
        // comparing it with the delimiter; read the same way, but refused.
        while (h.expand && !joined.empty() && joined.back() == '\\' && eol < s_.size()) {
          Fail("a here-document line ending in a backslash");
          joined.pop_back();
          size_t next = s_.find('\n', eol + 1);
          if (next == std::string_view::npos) next = s_.size();
          joined.append(s_.substr(eol + 1, next - eol - 1));
          eol = next;
        }
        std::string_view line = joined;
        std::string_view check = line;
        if (h.strip_tabs) {
          while (!check.empty() && check.front() == '\t') check.remove_prefix(1);
        }
        if (check == h.delim) {
          i_ = eol < s_.size() ? eol + 1 : eol;
          found = true;
          break;
        }
        body.append(line);
        body.push_back('\n');
        i_ = eol < s_.size() ? eol + 1 : eol;
      }
      if (h.expand) {
        Splitter nested(body, out_, depth_ + 1);
        nested.RunHeredocBody();
      }
      if (h.script) {
        // The body is the script of a shell; expanded first when the
        // delimiter is unquoted.
        if (h.expand && body.find_first_of("$`\\") != std::string::npos) {
          Fail("a here-document fed to a shell holds expansions");
        }
        SplitNested(body);
      }
      if (!found) {
        Fail("unterminated here-document '" + h.delim + "'");
        i_ = s_.size();
        return;
      }
    }
  }

  std::string_view s_;
  CommandLine* out_;
  int depth_;
  size_t i_ = 0;
  int nested_lists_ = 0;  // open `( ... )`, `$( ... )`, `<( ... )` lists
  std::vector<Heredoc> heredocs_;
  StdinSource stdin_;  // of the command being analysed (set in Emit)
};

}  // namespace

CommandLine SplitCommandLine(std::string_view line) {
  CommandLine out;
  Splitter splitter(line, &out, 0);
  splitter.Run();
  return out;
}

std::string UnquoteWord(std::string_view w) {
  std::string out;
  out.reserve(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    char c = w[i];
    if (c == '\'') {
      size_t end = w.find('\'', i + 1);
      if (end == std::string_view::npos) end = w.size();
      out.append(w.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '$' && i + 1 < w.size() && w[i + 1] == '\'') {
      for (i += 2; i < w.size() && w[i] != '\''; ++i) {
        if (w[i] == '\\' && i + 1 < w.size()) {
          char e = w[++i];
          out.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
        } else {
          out.push_back(w[i]);
        }
      }
    } else if (c == '"') {
      for (++i; i < w.size() && w[i] != '"'; ++i) {
        if (w[i] == '\\' && i + 1 < w.size() &&
            (w[i + 1] == '"' || w[i + 1] == '\\' || w[i + 1] == '$' || w[i + 1] == '`')) {
          ++i;
        }
        out.push_back(w[i]);
      }
    } else if (c == '\\' && i + 1 < w.size()) {
      out.push_back(w[++i]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool UnquoteWordExact(std::string_view w, std::string* out) {
  out->clear();
  for (size_t i = 0; i < w.size(); ++i) {
    char c = w[i];
    if (c == '\'') {
      size_t end = w.find('\'', i + 1);
      if (end == std::string_view::npos) return false;
      out->append(w.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '$') {
      if (i + 1 == w.size()) {
        out->push_back('$');
      } else if (w[i + 1] == '\'') {
        for (i += 2; i < w.size() && w[i] != '\''; ++i) {
          if (w[i] != '\\') {
            out->push_back(w[i]);
            continue;
          }
          if (++i >= w.size()) return false;
          char e = w[i];
          if (e == 'n') {
            out->push_back('\n');
          } else if (e == 't') {
            out->push_back('\t');
          } else if (e == '\\' || e == '\'' || e == '"') {
            out->push_back(e);
          } else {
            return false;
          }
        }
        if (i >= w.size()) return false;
      } else {
        return false;
      }
    } else if (c == '`') {
      return false;
    } else if (c == '"') {
      for (++i; i < w.size() && w[i] != '"'; ++i) {
        if (w[i] == '\\' && i + 1 < w.size() &&
            (w[i + 1] == '"' || w[i + 1] == '\\' || w[i + 1] == '$' || w[i + 1] == '`')) {
          out->push_back(w[++i]);
        } else if (w[i] == '\\' && i + 1 < w.size() && w[i + 1] == '\n') {
          ++i;
        } else if (w[i] == '`' || (w[i] == '$' && i + 1 < w.size() && w[i + 1] != '"')) {
          return false;
        } else {
          out->push_back(w[i]);
        }
      }
      if (i >= w.size()) return false;
    } else if (c == '\\') {
      if (i + 1 >= w.size()) return false;
      if (w[i + 1] != '\n') out->push_back(w[i + 1]);
      ++i;
    } else if (c == '*' || c == '?' || (c == '~' && i == 0)) {
      return false;
    } else if (c == '[' && w.find(']', i + 1) != std::string_view::npos) {
      return false;
    } else if (c == '{') {
      size_t close = w.find('}', i + 1);
      if (close != std::string_view::npos) {
        std::string_view inside = w.substr(i + 1, close - i - 1);
        if (inside.find(',') != std::string_view::npos ||
            inside.find("..") != std::string_view::npos)
          return false;
      }
      out->push_back(c);
    } else {
      out->push_back(c);
    }
  }
  return true;
}

}  // namespace agentloop::permissions
