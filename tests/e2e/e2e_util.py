"""Helpers for the end-to-end tests of the `agentloop` binary.

Python 3 standard library only. Every test gets its own temporary directory
with a HOME, an AGENTLOOP_HOME and a copy of the demo workspace; the child
processes get an explicit, minimal environment (no API keys, no user config),
so the tests never touch the real environment or each other.

The binaries are found through environment variables set by CTest
(tests/e2e/CMakeLists.txt): AGENTLOOP_BIN, AGENTLOOP_FAKE_SERVER and
AGENTLOOP_EXAMPLES (the examples/ directory).
"""

import json
import os
import pty
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

BIN = os.environ.get("AGENTLOOP_BIN", "agentloop")
FAKE_SERVER = os.environ.get("AGENTLOOP_FAKE_SERVER", "agentloop-fake-server")
EXAMPLES = os.environ.get(
    "AGENTLOOP_EXAMPLES",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
DEMO = os.path.join(EXAMPLES, "demo")
DEMO_SCRIPT = os.path.join(DEMO, "script.json")

# Generous: only a hung binary ever reaches it (never asserted as a time).
TIMEOUT = 60

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs")


def event_persistence():
    """The "Types" table of docs/protocol.md: {type: "yes" | "yes, commits" | "no"}.

    The engine's own list (include/agentloop/event_type.h) is held against
    the same table by src/protocol/event_data_test.cc."""
    rows = {}
    in_types = False
    with open(os.path.join(DOCS, "protocol.md"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_types = line.strip() == "## Types"
            if not in_types or not line.startswith("| `"):
                continue
            cells = line.replace("\\|", "\0").split("|")
            rows[cells[1].strip().strip("`")] = cells[2].strip()
    return rows


BUGGY_LINE = "return sum(xs) / (len(xs) - 1)"
FIXED_LINE = "return sum(xs) / len(xs)"


def load_demo_script():
    with open(DEMO_SCRIPT, encoding="utf-8") as f:
        return json.load(f)


def json_lines(text):
    """Parses every non-empty line as JSON (fails the test on a bad line)."""
    out = []
    for line in text.splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


class FakeServer:
    """agentloop-fake-server on 127.0.0.1 serving `script` (a JSON value)."""

    def __init__(self, tmp, script, extra_args=()):
        self.script_path = os.path.join(tmp, "server_script_%d.json" % id(self))
        self.record_path = os.path.join(tmp, "server_record_%d.jsonl" % id(self))
        with open(self.script_path, "w", encoding="utf-8") as f:
            json.dump(script, f)
        self.proc = subprocess.Popen(
            [FAKE_SERVER, "--port", "0", "--script", self.script_path, "--record",
             self.record_path, "--exit-on-stdin-eof"] + list(extra_args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError("fake server did not start: %r" % line)
        self.port = int(line.split()[1])
        self.base_url = "http://127.0.0.1:%d" % self.port

    def requests(self):
        if not os.path.exists(self.record_path):
            return []
        with open(self.record_path, encoding="utf-8") as f:
            return json_lines(f.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class CliTestCase(unittest.TestCase):
    """A temporary home, data directory and demo workspace per test."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="al_e2e_")
        self.home = os.path.join(self.tmp, "home")
        self.data = os.path.join(self.tmp, "data")
        self.ws = os.path.join(self.tmp, "ws")
        os.makedirs(self.home)
        shutil.copytree(DEMO, self.ws, ignore=shutil.ignore_patterns("__pycache__"))
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "AGENTLOOP_HOME": self.data,
            "LANG": "C.UTF-8",
        }
        env.update(extra)
        return env

    def write(self, name, value):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            if isinstance(value, str):
                f.write(value)
            else:
                json.dump(value, f)
        return path

    def server(self, script, *extra_args):
        s = FakeServer(self.tmp, script, extra_args)
        self.servers.append(s)
        return s

    def run_cli(self, *args, stdin=None, env=None, cwd=None):
        """Runs agentloop to the end; returns the CompletedProcess (text)."""
        return subprocess.run(
            [BIN] + list(args), input=stdin if stdin is not None else "",
            capture_output=True, text=True, env=env or self.env(), cwd=cwd or self.tmp,
            timeout=TIMEOUT)

    def spawn(self, *args, env=None):
        """Starts agentloop with piped stdout (line-buffered reading)."""
        return subprocess.Popen(
            [BIN] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env or self.env(), cwd=self.tmp)

    def script_run(self, *extra, script=DEMO_SCRIPT, prompt="fix the bug"):
        return self.run_cli("run", "--provider", "script", "--script", script, "-C", self.ws,
                            *extra, prompt)

    def assert_code(self, proc, code):
        self.assertEqual(proc.returncode, code,
                         "exit %d, want %d\nstdout:\n%s\nstderr:\n%s" %
                         (proc.returncode, code, proc.stdout, proc.stderr))

    def read_ws(self, name="stats.py"):
        with open(os.path.join(self.ws, name), encoding="utf-8") as f:
            return f.read()

    def assert_fixed(self):
        text = self.read_ws()
        self.assertIn(FIXED_LINE, text)
        self.assertNotIn(BUGGY_LINE, text)
        check = subprocess.run(["python3", "-B", "test_stats.py"], cwd=self.ws,
                               capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def export(self, session_id):
        p = self.run_cli("sessions", "export", session_id)
        self.assert_code(p, 0)
        return json_lines(p.stdout)

    def json_result(self, proc):
        """The single object of --output json."""
        lines = [l for l in proc.stdout.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
        return json.loads(lines[0])


def interrupt(proc):
    proc.send_signal(signal.SIGINT)


def run_on_terminal(args, typed, env, cwd, stdout_too=False):
    """Runs agentloop as a person at a terminal would: standard input and
    standard error on a pseudo-terminal, standard output piped (or on the
    terminal too with `stdout_too`: libedit shows its prompts only then).
    `typed` (str) is typed ahead. Returns (exit code, stdout, what the
    terminal showed)."""
    master, slave = pty.openpty()
    shown = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: every holder of the terminal closed it
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    try:
        proc = subprocess.Popen([BIN] + list(args), stdin=slave,
                                stdout=slave if stdout_too else subprocess.PIPE, stderr=slave,
                                env=env, cwd=cwd)
        os.close(slave)
        slave = None
        reader.start()
        if typed:
            os.write(master, typed.encode())
        try:
            out, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        reader.join(TIMEOUT)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    return proc.returncode, (out or b"").decode("utf-8", "replace"), b"".join(shown).decode(
        "utf-8", "replace")
