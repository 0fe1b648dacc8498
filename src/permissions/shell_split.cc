// A conservative shell lexer: one pass over the line, recursing into
// subshells and substitutions, collecting simple commands as lists of raw
// words. See shell_split.h for what it recognises.
#include "permissions/shell_split.h"

#include <set>

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
};

enum class Pending { kNone, kOutputTarget, kDupTarget, kHeredocDelim, kHeredocDelimStrip };

struct Builder {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  Pending pending = Pending::kNone;
  bool writes = false;
};

class Splitter {
 public:
  Splitter(std::string_view s, CommandLine* out, int depth) : s_(s), out_(out), depth_(depth) {}

  void Run() {
    if (depth_ > kMaxDepth) {
      Fail("nesting deeper than 32 levels");
      return;
    }
    ParseList(0);
    if (!heredocs_.empty()) Fail("here-document without a body");
  }

 private:
  void Fail(std::string why) {
    if (out_->complete) out_->problem = std::move(why);
    out_->complete = false;
  }

  char Peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  void EndWord(Builder& b) {
    if (!b.in_word) return;
    switch (b.pending) {
      case Pending::kNone:
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
        heredocs_.push_back(std::move(h));
        break;
      }
    }
    b.pending = Pending::kNone;
    b.words.push_back(std::move(b.word));
    b.word.clear();
    b.in_word = false;
  }

  void Flush(Builder& b) {
    EndWord(b);
    if (b.pending != Pending::kNone) Fail("redirection without a target");
    Emit(std::move(b.words), b.writes);
    b = Builder();
  }

  void Emit(std::vector<std::string> words, bool writes) {
    static const std::set<std::string, std::less<>> kReserved = {
        "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!"};
    size_t start = 0;
    while (start < words.size() && kReserved.count(words[start])) ++start;
    if (start >= words.size()) return;
    words.erase(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(start));
    SimpleCommand cmd;
    cmd.text = Join(words, 0);
    cmd.writes_file = writes;
    std::vector<std::string> uq;
    uq.reserve(words.size());
    for (const auto& w : words) uq.push_back(UnquoteWord(w));
    size_t k = StripWrappers(uq);
    if (k < uq.size()) {
      size_t slash = uq[k].rfind('/');
      if (slash != std::string::npos && slash + 1 < uq[k].size()) uq[k] = uq[k].substr(slash + 1);
    }
    cmd.bare = Join(uq, k);
    out_->commands.push_back(cmd);
    // A script passed as a string: `bash -c '...'`, `eval '...'`.
    if (k < uq.size()) {
      static const std::set<std::string, std::less<>> kShells = {"sh",   "bash", "zsh",
                                                                 "dash", "ksh",  "fish"};
      const std::string& prog = uq[k];
      if (prog == "eval") {
        SplitNested(Join(uq, k + 1));
      } else if (kShells.count(prog)) {
        for (size_t a = k + 1; a + 1 < uq.size(); ++a) {
          const std::string& opt = uq[a];
          if (opt.size() >= 2 && opt[0] == '-' && opt[1] != '-' && opt.back() == 'c') {
            SplitNested(uq[a + 1]);
            break;
          }
        }
      }
    }
  }

  // Skips assignments and wrapper programs with their options; returns the
  // index of the real program.
  static size_t StripWrappers(const std::vector<std::string>& w) {
    static const std::set<std::string, std::less<>> kWrappers = {
        "sudo", "doas", "env",     "command", "builtin", "exec",   "nohup",
        "nice", "time", "timeout", "xargs",   "stdbuf",  "ionice", "setsid"};
    static const std::set<std::string, std::less<>> kArgOptions = {
        "-u", "-g", "-n", "-p", "-C", "-D", "-U", "-r", "-t", "-h", "-s", "-k", "-I", "-L"};
    size_t k = 0;
    while (true) {
      while (k < w.size() && IsAssignment(w[k])) ++k;
      if (k >= w.size() || !kWrappers.count(w[k])) break;
      bool is_timeout = w[k] == "timeout";
      ++k;
      while (k < w.size() && w[k].size() > 1 && w[k][0] == '-') {
        if (w[k] == "--") {
          ++k;
          break;
        }
        bool takes_arg = kArgOptions.count(w[k]) > 0;
        ++k;
        if (takes_arg && k < w.size()) ++k;
      }
      if (is_timeout && k < w.size()) ++k;  // the duration
    }
    return k;
  }

  void SplitNested(const std::string& script) {
    // `script` must outlive the nested splitter's string_view only for the
    // duration of this call.
    Splitter nested(script, out_, depth_ + 1);
    nested.Run();
  }

  // Parses commands until `term` (')' or '`', consumed) or the end (term 0).
  void ParseList(char term) {
    if (++depth_ > kMaxDepth) {
      Fail("nesting deeper than 32 levels");
      i_ = s_.size();
      --depth_;
      return;
    }
    Builder b;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (term != 0 && c == term) {
        Flush(b);
        ++i_;
        --depth_;
        return;
      }
      switch (c) {
        case ' ':
        case '\t':
        case '\r':
          EndWord(b);
          ++i_;
          break;
        case '\n':
          Flush(b);
          ++i_;
          ReadHeredocs();
          break;
        case '\\':
          if (Peek(1) == '\n') {
            i_ += 2;  // line continuation
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
          AppendSpan(b, i_, [&] {
            ++i_;
            ParseList('`');
          });
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
          Flush(b);
          i_ += Peek(1) == ';' ? 2 : 1;
          break;
        case '|':
          Flush(b);
          i_ += (Peek(1) == '|' || Peek(1) == '&') ? 2 : 1;
          break;
        case '(':
          if (b.in_word && !b.word.empty() && b.word.back() == '=') {
            AppendSpan(b, i_, [&] { ReadArray(); });
          } else {
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
    if (term == '`') Fail("missing closing '`'");
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
    Pending pending = Pending::kNone;
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

  // At a quote; moves past the closing quote.
  void ReadSingle(bool ansi_c) {
    ++i_;
    while (i_ < s_.size() && s_[i_] != '\'') {
      if (ansi_c && s_[i_] == '\\') ++i_;
      ++i_;
    }
    if (i_ >= s_.size()) {
      Fail("unterminated single quote");
      return;
    }
    ++i_;
  }

  // At '"'; moves past the closing quote, parsing substitutions inside.
  void ReadDouble() {
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      ScanExpansionChar();
    }
    if (i_ >= s_.size()) {
      Fail("unterminated double quote");
      return;
    }
    ++i_;
  }

  // One step inside double quotes or an expanding here-document.
  void ScanExpansionChar() {
    char c = s_[i_];
    if (c == '\\') {
      i_ += 2;
    } else if (c == '`') {
      ++i_;
      ParseList('`');
    } else if (c == '$' && (Peek(1) == '(' || Peek(1) == '{')) {
      ReadDollar();
    } else {
      ++i_;
    }
  }

  // At '$'.
  void ReadDollar() {
    char n1 = Peek(1);
    if (n1 == '(' && Peek(2) == '(') {
      ReadBalanced(3, '(', ')', 2, "$((...))");
    } else if (n1 == '(') {
      i_ += 2;
      ParseList(')');
    } else if (n1 == '{') {
      ReadBalanced(2, '{', '}', 1, "${...}");
    } else if (n1 == '\'') {
      ++i_;
      ReadSingle(/*ansi_c=*/true);
    } else {
      ++i_;
    }
  }

  // Skips a balanced construct whose content is not parsed; a command
  // substitution inside it makes the line incomplete.
  void ReadBalanced(size_t skip, char open, char close, int depth, const char* what) {
    i_ += skip;
    while (i_ < s_.size() && depth > 0) {
      char c = s_[i_];
      if (c == '\\') {
        i_ += 2;
        continue;
      }
      if (c == '`' || (c == '$' && Peek(1) == '(' && open == '{')) {
        Fail(std::string("command substitution inside ") + what);
      }
      if (c == '$' && Peek(1) == '(' && open == '(') {
        Fail(std::string("command substitution inside ") + what);
      }
      if (c == '\'' && open == '{') {
        ReadSingle(/*ansi_c=*/false);
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
    ++i_;
    while (i_ < s_.size() && s_[i_] != ')') {
      if (s_[i_] == '\'') {
        ReadSingle(/*ansi_c=*/false);
      } else if (s_[i_] == '"') {
        ReadDouble();
      } else if (s_[i_] == '$' || s_[i_] == '`') {
        ScanExpansionChar();
      } else {
        ++i_;
      }
    }
    if (i_ >= s_.size()) {
      Fail("unterminated array");
      return;
    }
    ++i_;
  }

  // After a newline: consumes the bodies of pending here-documents.
  void ReadHeredocs() {
    std::vector<Heredoc> docs = std::move(heredocs_);
    heredocs_.clear();
    for (const auto& h : docs) {
      bool found = false;
      while (i_ < s_.size()) {
        size_t eol = s_.find('\n', i_);
        if (eol == std::string_view::npos) eol = s_.size();
        std::string_view line = s_.substr(i_, eol - i_);
        std::string_view check = line;
        if (!check.empty() && check.back() == '\r') check.remove_suffix(1);
        if (h.strip_tabs) {
          while (!check.empty() && check.front() == '\t') check.remove_prefix(1);
        }
        if (check == h.delim) {
          i_ = eol < s_.size() ? eol + 1 : eol;
          found = true;
          break;
        }
        if (h.expand) {
          while (i_ < eol) ScanExpansionChar();
          if (i_ > eol) eol = i_ - 1;  // a substitution spanned lines
        }
        i_ = eol + 1;
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
  std::vector<Heredoc> heredocs_;
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

}  // namespace agentloop::permissions
