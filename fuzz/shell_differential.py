#!/usr/bin/env python3
"""Differential fuzzer for the shell reader (src/permissions/shell_split.h).

Command lines (the corpus, lines built from a small bash grammar, and random
mutations of both) are run by real bash inside a bubblewrap sandbox: the root
file system read-only, no network, a fresh working directory per line, `env -i`
with PATH set to a directory of stub programs that log their name (wrappers
such as env, timeout, xargs, find and bash log and then run the real program).
The reader (al_shell_split_cli) must name every program bash ran, call the
line incomplete, or escalate one of its commands (an option that runs code or
writes files: allow rules naming the program do not apply). A line where it
does none of these is a differential: printed, exit 1. Interpreters and build
tools (python3, perl, make, awk) run for real, so code they are handed on the
line (`python3 - <<< ...`, `make --eval=...`) runs the stubs too.

  shell_differential.py --cli PATH [--corpus DIR] [--seed N] [--count N]
                        [--timeout SECONDS] [--save-failures DIR]

Exit codes: 0 no differential, 1 differentials found, 2 usage or harness
error, 77 bubblewrap cannot run here (the test is skipped).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile

# Programs bash may run: each gets a logging stub. PASSTHROUGH ones then run
# the real program, so what they run in turn is logged too.
STUBS = ["ls", "rm", "git", "cat", "x", "y", "sed", "sort", "tee", "grep", "wc"]
PASSTHROUGH = ["env", "timeout", "nice", "nohup", "stdbuf", "setsid", "xargs", "find",
               "bash", "sh", "python3", "perl", "make", "awk"]

WORDS = ["a", "b", "-l", "--x", "'q w'", "\"d e\"", "$'s\\tt'", "\\;", "{a,b}", "*", "?",
         "~", "$x", "${x}", "\"$x\"", "$1", "x=1", "{}", "[", "]", "!", "%", "+", "-", "--",
         "=", ":", "@"]
PROGRAMS = ["ls", "rm", "git", "cat", "x", "y", "grep a", "sed p", "sort", "wc -l"]
WRAPPERS = ["env", "env -i", "env a=b", "timeout 1", "timeout -s 9 1", "nice", "nice -n 1",
            "nohup", "stdbuf -oL", "setsid", "xargs", "xargs -I{}", "command", "command -p",
            "builtin", "exec", "time", "time -p", "eval", "bash -c", "sh -c", "bash -xc",
            "bash -c --", "sh -ec", "find . -exec", "trap"]
SEPARATORS = [" ; ", " && ", " || ", " | ", " |& ", " & ", "\n", ";", "&&", "|"]
PUNCT = list(" ;&|<>()$`'\"\\{}#\n\r\t*?[]!=~-,.:%^+0123456789")


class Gen:
    def __init__(self, rng):
        self.rng = rng

    def word(self, depth):
        r = self.rng.random()
        if depth < 3 and r < 0.12:
            return "$(" + self.line(depth + 1) + ")"
        if depth < 3 and r < 0.18:
            return "`" + self.line(depth + 1).replace("`", "") + "`"
        if depth < 3 and r < 0.22:
            return "<(" + self.line(depth + 1) + ")"
        if depth < 3 and r < 0.25:
            return "\"$(" + self.line(depth + 1) + ")\""
        if r < 0.30:
            return self.rng.choice(["${x:-", "${x:=", "${x#", "${x/a/"]) + \
                self.rng.choice(["a", "\"}\"", "$(ls)", "<(rm)", "'}'"]) + "}"
        if r < 0.34:
            return self.rng.choice(["$[1<<2]", "$((1<<2))", "$((x))", "$[x]"])
        return self.rng.choice(WORDS)

    def simple(self, depth):
        parts = []
        if self.rng.random() < 0.15:
            parts.append(self.rng.choice(["a=1", "x=$(ls)", "a=(b c)"]))
        if self.rng.random() < 0.35:
            w = self.rng.choice(WRAPPERS)
            if w in ("eval", "bash -c", "sh -c", "bash -xc", "bash -c --", "sh -ec", "trap"):
                inner = self.line(depth + 1) if depth < 3 else self.rng.choice(PROGRAMS)
                q = self.rng.choice(["'", "\""])
                inner = inner.replace(q, "")
                parts.append(w + " " + q + inner + q + (" EXIT" if w == "trap" else ""))
                return " ".join(parts)
            parts.append(w)
            if w == "find . -exec":
                parts.append(self.rng.choice(PROGRAMS) + " {} " + self.rng.choice(["\\;", "+", "';'"]))
                return " ".join(parts)
        parts.append(self.rng.choice(PROGRAMS))
        for _ in range(self.rng.randrange(3)):
            parts.append(self.word(depth))
        r = self.rng.random()
        if r < 0.1:
            parts.append(self.rng.choice([">f", "2>&1", ">|f", "<>f", "&>f", "<f", ">&2"]))
        elif r < 0.15:
            parts.append("<<< " + self.word(depth))
        elif r < 0.2:
            parts.append("#" + self.rng.choice(["c", " ; rm", "\r; rm"]))
        return " ".join(parts)

    def compound(self, depth):
        r = self.rng.random()
        body = self.line(depth + 1) if depth < 3 else self.simple(depth)
        if r < 0.15:
            return "(" + body + ")"
        if r < 0.25:
            return "{ " + body + "; }"
        if r < 0.32:
            return "if " + self.simple(depth) + "; then " + body + "; fi"
        if r < 0.36:
            return "while " + self.simple(depth) + "; do " + body + "; break; done"
        if r < 0.40:
            return "for i in a; do " + body + "; done"
        if r < 0.44:
            return "case a in a) " + body + ";; esac"
        if r < 0.48:
            return "((x<<1))"
        if r < 0.52:
            return "[[ a " + self.rng.choice(["<", "==", "=~"]) + " " + self.word(depth) + " ]]"
        if r < 0.62:
            delim = self.rng.choice(["EOF", "'EOF'", "\"EOF\"", "E\\OF"])
            op = self.rng.choice(["<<", "<<-"])
            lines = [self.rng.choice(["$(rm)", "`rm`", "rm", "EO\\", "F", "\tEOF", "a \\"])
                     for _ in range(self.rng.randrange(3))]
            return "cat " + op + delim + "\n" + "\n".join(lines + ["EOF"]) + "\n" + body
        return self.simple(depth)

    def line(self, depth=0):
        n = 1 + self.rng.randrange(3)
        out = []
        for i in range(n):
            out.append(self.compound(depth) if self.rng.random() < 0.35 else self.simple(depth))
            if i + 1 < n:
                out.append(self.rng.choice(SEPARATORS))
        return "".join(out)


def mutate(rng, line, pool):
    for _ in range(1 + rng.randrange(3)):
        r = rng.random()
        pos = rng.randrange(len(line) + 1)
        if r < 0.4:
            line = line[:pos] + rng.choice(PUNCT) + line[pos:]
        elif r < 0.6 and line:
            line = line[:pos] + line[pos + 1:]
        elif r < 0.75:
            other = rng.choice(pool)
            cut = rng.randrange(len(other) + 1)
            line = line[:pos] + other[cut:]
        elif r < 0.85:
            line = line[:pos] + "\\\n" + line[pos:]
        else:
            line = line[:pos] + rng.choice(["rm", " rm ", ";rm", "\nrm\n", "$(rm)", "`rm`"]) + \
                line[pos:]
    return line


def safe(line):
    # Defence in depth on top of the sandbox: no paths out of the working
    # directory (standard input and /dev/null aside), and nothing that makes
    # a function (recursion).
    if "kill" in line or "function" in line:
        return False
    if "/" in line.replace("/dev/stdin", "").replace("/dev/null", ""):
        return False
    import re
    return re.search(r"[\w:.-]\s*\(\s*\)", line) is None


def write_stubs(work):
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    stray = os.path.join(work, "stray.log")
    clean_path = "/usr/local/bin:/usr/bin:/bin"
    for name in STUBS + PASSTHROUGH:
        real = shutil.which(name, path=clean_path) if name in PASSTHROUGH else None
        with open(os.path.join(bindir, name), "w") as f:
            f.write("#!/bin/sh\n")
            f.write("echo %s >> \"${AL_FUZZ_LOG:-%s}\"\n" % (name, stray))
            # Run as a program (found in PATH, so $0 is its full path) a
            # passthrough stub runs the real one; read as a script (`. nice`,
            # `bash nice`) it stops: the reader names the script itself.
            if real:
                f.write("case \"$0\" in %s) exec %s \"$@\";; esac\n" %
                        (os.path.join(bindir, name), real))
            f.write("return 0 2>/dev/null || exit 0\n")
        os.chmod(os.path.join(bindir, name), 0o755)
    return bindir


def run_inner(work, timeout):
    """Runs inside the sandbox: executes each line of lines.json."""
    with open(os.path.join(work, "lines.json")) as f:
        lines = json.load(f)
    bindir = os.path.join(work, "bin")
    stray = os.path.join(work, "stray.log")
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    timed_out = []
    for i, line in enumerate(lines):
        cwd = os.path.join(work, "cwd")
        shutil.rmtree(cwd, ignore_errors=True)
        os.makedirs(cwd)
        # One log per line: a background program that outlives its line
        # still logs to the right one.
        env = {"PATH": bindir, "AL_FUZZ_LOG": os.path.join(logs, str(i))}
        proc = subprocess.Popen(["/bin/bash", "-c", line], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            timed_out.append(False)
        except subprocess.TimeoutExpired:
            timed_out.append(True)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    results = []
    for i in range(len(lines)):
        ran = set()
        p = os.path.join(logs, str(i))
        if os.path.exists(p):
            with open(p, errors="replace") as f:
                ran.update(x.strip() for x in f if x.strip())
        results.append({"ran": sorted(ran), "timed_out": timed_out[i]})
    if os.path.exists(stray):
        with open(stray, errors="replace") as f:
            stray_names = sorted(set(x.strip() for x in f if x.strip()))
        if stray_names:
            # A line cleared the environment (`env -i`): which line is not
            # known, so every line is charged with these names.
            for r in results:
                r["stray"] = stray_names
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f)


def sandbox_cmd(work, script_args):
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--bind", work, work, "--unshare-all", "--die-with-parent",
            "--new-session", "--chdir", work] + script_args


def load_corpus(path):
    out = []
    if path and os.path.isdir(path):
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.isfile(full):
                with open(full, encoding="utf-8", errors="surrogateescape") as f:
                    out.append(f.read())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli")
    ap.add_argument("--corpus")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=1.0)
    ap.add_argument("--save-failures")
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        run_inner(args.inner, args.timeout)
        return 0
    if not args.cli:
        print("shell_differential: --cli is required", file=sys.stderr)
        return 2
    if shutil.which("bwrap") is None:
        print("shell_differential: skipped: bubblewrap (bwrap) is not installed")
        return 77
    probe = subprocess.run(sandbox_cmd("/tmp", ["/bin/true"]), capture_output=True)
    if probe.returncode != 0:
        print("shell_differential: skipped: bubblewrap cannot run here: " +
              probe.stderr.decode(errors="replace").strip())
        return 77

    rng = random.Random(args.seed)
    corpus = load_corpus(args.corpus)
    gen = Gen(rng)
    lines = [c for c in corpus if safe(c)]
    pool = list(lines) or ["ls"]
    while len(lines) < args.count:
        r = rng.random()
        line = gen.line() if r < 0.5 else mutate(rng, rng.choice(pool + [gen.line()]), pool)
        if safe(line):
            lines.append(line)
            if r < 0.5 and len(pool) < 500:
                pool.append(line)

    proc = subprocess.run([args.cli], input=json.dumps(lines).encode(), capture_output=True)
    if proc.returncode != 0:
        print("shell_differential: the reader failed: " + proc.stderr.decode(errors="replace"))
        return 2
    verdicts = json.loads(proc.stdout)

    work = tempfile.mkdtemp(prefix="al-shell-fuzz-")
    try:
        write_stubs(work)
        with open(os.path.join(work, "lines.json"), "w") as f:
            json.dump(lines, f)
        script = os.path.abspath(__file__)
        inner = subprocess.run(sandbox_cmd(work, [sys.executable, script, "--inner", work,
                                                  "--timeout", str(args.timeout)]))
        if inner.returncode != 0:
            print("shell_differential: the sandboxed runner failed (exit %d)" % inner.returncode)
            return 2
        with open(os.path.join(work, "results.json")) as f:
            results = json.load(f)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    complete = 0
    escalated = 0
    ran_any = 0
    timeouts = 0
    failures = []
    for line, verdict, result in zip(lines, verdicts, results):
        ran = set(result["ran"])
        if "env" in line:
            ran.update(result.get("stray", []))
        if ran:
            ran_any += 1
        if result["timed_out"]:
            timeouts += 1
        if not verdict["complete"]:
            continue
        complete += 1
        if verdict.get("escalated"):
            escalated += 1
            continue
        missing = ran - set(verdict["programs"])
        if missing:
            failures.append((line, sorted(missing), verdict["programs"]))
    print("shell_differential: %d lines (%d from the corpus), %d ran a stub, %d complete "
          "(%d of them escalated), %d incomplete, %d timed out, %d differentials" %
          (len(lines), len(corpus), ran_any, complete, escalated, len(lines) - complete,
           timeouts, len(failures)))
    for line, missing, named in failures[:20]:
        print("DIFFERENTIAL: %r: bash ran %s, the reader named %s" % (line, missing, named))
    if failures and args.save_failures:
        os.makedirs(args.save_failures, exist_ok=True)
        for k, (line, _, _) in enumerate(failures):
            with open(os.path.join(args.save_failures, "diff-%04d.txt" % k), "w") as f:
                f.write(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
