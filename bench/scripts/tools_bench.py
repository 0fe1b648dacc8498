#!/usr/bin/env python3
"""Benchmark the grep and glob tools against ripgrep on a generated tree.

Generates (into a temporary directory under /tmp, deleted afterwards) a tree
of >= 50,000 files and >= 500 MB with .gitignore/.ignore files that exclude a
part of it, hidden files and binary files; then, for each case, runs
bench/grep_cli (the grep/glob tool called directly) and `rg` alternately
several times, checks that both report the same matches, and prints median
wall times and the ratio.

usage: tools_bench.py --cli build/rel/bench/grep_cli [--runs 5] [--files 50000]
                      [--keep DIR]
"""
import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("alpha beta gamma delta epsilon value result index count buffer stream "
         "reader writer socket handle parse format render update config option "
         "request response client server thread worker queue cache token session "
         "return if else for while match let const var fn def class struct impl "
         "self this new delete true false none null error warn info debug trace").split()
PUNCT = ["(", ")", "{", "}", ";", ",", ".", " = ", " + ", " -> ", "::", "[", "]"]


def make_line(rng):
    n = rng.randint(3, 10)
    parts = []
    for _ in range(n):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.15:
            w = w + "_" + rng.choice(WORDS)
        elif r < 0.2:
            w = w.capitalize()
        elif r < 0.25:
            w = w + str(rng.randint(0, 99))
        parts.append(w)
        parts.append(rng.choice(PUNCT) if rng.random() < 0.3 else " ")
    return "    " * rng.randint(0, 3) + "".join(parts).rstrip() + "\n"


def generate(root, nfiles, rng):
    pool = [make_line(rng) for _ in range(20000)]
    exts = [".rs", ".py", ".js", ".c", ".h", ".md", ".txt", ".go"]
    os.makedirs(os.path.join(root, ".git", "info"))
    with open(os.path.join(root, ".git", "info", "exclude"), "w") as f:
        f.write("*.excluded\n")
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("*.log\nbuild/\n/generated/\n")
    total_bytes = 0
    made = 0
    dirs = []
    tops = ["src", "lib", "tests", "docs", "tools", "vendor", "pkg", "app", "core", "generated"]
    for t in tops:
        for i in range(10):
            for j in range(25):
                dirs.append(os.path.join(t, "m%02d" % i, "s%02d" % j))
    # Ignored subtrees inside: build/ dirs and files ignored by nested rules.
    per_dir = max(1, nfiles // len(dirs))
    for di, d in enumerate(dirs):
        full = os.path.join(root, d)
        os.makedirs(full, exist_ok=True)
        if di % 10 == 0:
            with open(os.path.join(full, ".gitignore"), "w") as f:
                f.write("*.tmp\n!keep.tmp\n")
        if di % 37 == 0:
            with open(os.path.join(full, ".ignore"), "w") as f:
                f.write("*.md\n")
        if di % 13 == 0:
            os.makedirs(os.path.join(full, "build"), exist_ok=True)
        if di % 29 == 0:
            os.makedirs(os.path.join(full, ".cache"), exist_ok=True)
        for k in range(per_dir):
            r = rng.random()
            if di % 13 == 0 and k % 4 == 0:
                name = os.path.join("build", "out%d.txt" % k)
            elif di % 29 == 0 and k % 5 == 0:
                name = os.path.join(".cache", "c%d.txt" % k)
            elif r < 0.04:
                name = "trace%d.log" % k
            elif r < 0.06:
                name = "scratch%d.tmp" % k
            elif r < 0.065:
                name = "keep.tmp"
            elif r < 0.07:
                name = "x%d.excluded" % k
            else:
                name = "file%d%s" % (k, rng.choice(exts))
            nlines = rng.randint(80, 340)
            lines = rng.choices(pool, k=nlines)
            q = rng.random()
            if q < 0.02:
                for _ in range(rng.randint(1, 3)):
                    lines.insert(rng.randrange(len(lines)), "    raise Error(ERR_SOCKET_TIMEOUT)\n")
            elif q < 0.03:
                lines.insert(rng.randrange(len(lines)), "  // err_Socket_Timeout again\n")
            if rng.random() < 0.01:
                tok = "%s%03d%s%d" % (chr(65 + rng.randrange(26)), rng.randrange(1000),
                                      "".join(chr(97 + rng.randrange(26)) for _ in range(2)),
                                      rng.randrange(10))
                lines.insert(rng.randrange(len(lines)), "    id = " + tok + ";\n")
            data = "".join(lines)
            mode = "w"
            if rng.random() < 0.002:
                data = "\0\0\0binary" + data
            with open(os.path.join(full, name), mode) as f:
                f.write(data)
            total_bytes += len(data)
            made += 1
    return made, total_bytes


def run(cmd, cwd, capture):
    """Returns (wall seconds, CPU seconds (user+sys), stdout or None)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode not in (0, 1):
        raise RuntimeError("%s failed: %s" % (cmd, p.stderr.decode()))
    return dt, cpu, (p.stdout if capture else None)


def norm(out):
    return sorted(l for l in out.decode("utf-8", "replace").split("\n") if l)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=50000)
    ap.add_argument("--keep", help="use/keep this tree directory instead of a temp one")
    args = ap.parse_args()
    cli = os.path.abspath(args.cli)
    rng = random.Random(42)
    tmp = None
    if args.keep and os.path.isdir(args.keep):
        root = args.keep
        print("reusing tree", root)
    else:
        root = args.keep or tempfile.mkdtemp(prefix="al_tools_bench_", dir="/tmp")
        if not args.keep:
            tmp = root
        t0 = time.time()
        made, size = generate(root, args.files, rng)
        print("generated %d files, %.0f MB in %.0f s" % (made, size / 1e6, time.time() - t0))
    try:
        # Visible (searched) part, as ripgrep sees it.
        files = subprocess.run(["rg", "--files"], cwd=root, stdout=subprocess.PIPE).stdout
        visible = [l for l in files.decode().split("\n") if l]
        vbytes = sum(os.path.getsize(os.path.join(root, f)) for f in visible)
        print("searched after ignore rules: %d files, %.0f MB" % (len(visible), vbytes / 1e6))
        cases = [
            ("literal, files", ["-l", "ERR_SOCKET_TIMEOUT"], ["-l"]),
            ("literal, content", ["-n", "ERR_SOCKET_TIMEOUT"], ["-n"]),
            ("case-insensitive literal, files", ["-l", "-i", "err_socket_timeout"], ["-l", "-i"]),
            ("case-insensitive literal, content", ["-n", "-i", "err_socket_timeout"], ["-n", "-i"]),
            ("regex without literal, files", ["-l", "[A-Z][0-9]{3}[a-z]{2}[0-9]"], ["-l"]),
            ("regex without literal, content", ["-n", "[A-Z][0-9]{3}[a-z]{2}[0-9]"], ["-n"]),
        ]
        rows = []
        for name, rg_args, our_flags in cases:
            pattern = rg_args[-1]
            rg_cmd = ["rg", "--no-heading", "--color", "never"] + rg_args
            if "-n" in rg_args:
                rg_cmd += ["--no-messages"]
            our_cmd = [cli, "grep", root, pattern] + our_flags
            rows.append(bench(name, rg_cmd, our_cmd, root, args.runs))
        rows.append(bench("glob **/*.rs vs rg --files -g '*.rs'",
                          ["rg", "--files", "-g", "*.rs"], [cli, "glob", root, "**/*.rs"], root,
                          args.runs))
        print()
        print("| case | matches | rg wall (ms) | tool wall (ms) | wall ratio "
              "| rg CPU (ms) | tool CPU (ms) | CPU ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |" % r)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def bench(name, rg_cmd, our_cmd, root, runs):
    rg_out = run(rg_cmd, root, True)[2]
    our_out = run(our_cmd, root, True)[2]
    a, b = norm(rg_out), norm(our_out)
    if a != b:
        sa, sb = set(a), set(b)
        print("MISMATCH in %s: rg %d lines, tool %d lines" % (name, len(a), len(b)))
        print("  only rg:", sorted(sa - sb)[:5])
        print("  only tool:", sorted(sb - sa)[:5])
        sys.exit(1)
    rg_t, our_t, rg_c, our_c = [], [], [], []
    for _ in range(runs):
        w, c, _ = run(rg_cmd, root, False)
        rg_t.append(w)
        rg_c.append(c)
        w, c, _ = run(our_cmd, root, False)
        our_t.append(w)
        our_c.append(c)
    rm, om = statistics.median(rg_t) * 1000, statistics.median(our_t) * 1000
    rc, oc = statistics.median(rg_c) * 1000, statistics.median(our_c) * 1000
    print("%-40s matches=%-6d wall rg=%.0f tool=%.0f ms (x%.2f)  cpu rg=%.0f tool=%.0f ms (x%.2f)"
          % (name, len(a), rm, om, om / rm, rc, oc, oc / rc))
    return (name, len(a), rm, om, om / rm, rc, oc, oc / rc)


if __name__ == "__main__":
    main()
