"""Every `agentloop ...` command shown in a code block of README.md or
docs/*.md runs against the fake model server without a usage error, so an
example that drifts from the command line (a renamed flag, a removed
subcommand, a wrong argument count) fails CI.

An example line may show alternatives (`list | show ID`), optional parts
(`[--args JSON]`) and placeholders (ID, FILE, "..."); each alternative is run
on its own, optional parts are left out, and placeholders are replaced by a
real session id, pending id, proposal id or file of this test's own
workspace.

Every shell block (```sh, bash, shell, console) is one of three kinds, said
by an HTML comment on the line before its fence:
- `<!-- example: run -->`: the whole block runs in bash from the source tree
  (DocsBlocksTest), its paths under /tmp and its port moved into the test's
  own directory and a free port;
- `<!-- example: illustrative (why) -->`: shown, not run (it installs,
  builds, or needs a real model or a service);
- no comment: every command line is `agentloop ...` (run above) or `export
  VAR=...` (the environment the test gives).
A block of none of these kinds fails the test."""

import glob
import json
import os
import re
import shlex
import socket
import subprocess
import unittest

from e2e_util import BIN, CliTestCase, DEMO_SCRIPT, TIMEOUT

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
USAGE_MARKERS = ("unknown flag", "unknown subcommand", "usage:", "is not accepted by",
                 "must be one of", "needs a positive integer")


def example_commands():
    """(file, line number, command text) of each example in a code block."""
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                             "*.md")))
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        in_block = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith("```"):
                in_block = not in_block
                i += 1
                continue
            text = line.strip()
            if text.startswith("$ "):
                text = text[2:]
            if in_block and text.startswith("agentloop "):
                start = i
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text[:-1] + " " + lines[i].strip()
                out.append((os.path.relpath(path, ROOT), start + 1, text))
            i += 1
    return out


SHELL_FENCE = re.compile(r"^```(sh|bash|shell|console)\s*$")
MARKER = re.compile(r"^<!--\s*example:\s*(run|illustrative)\b.*-->\s*$")


def shell_blocks():
    """(file, line number of the fence, kind, lines) of each shell block;
    kind is "run", "illustrative" or None (no marker)."""
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                             "*.md")))
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("```"):
                start = i
                is_shell = SHELL_FENCE.match(lines[i]) is not None
                i += 1
                body = []
                while i < len(lines) and not lines[i].startswith("```"):
                    body.append(lines[i])
                    i += 1
                if is_shell:
                    m = MARKER.match(lines[start - 1]) if start > 0 else None
                    out.append((os.path.relpath(path, ROOT), start + 1,
                                m.group(1) if m else None, body))
            i += 1
    return out


def command_lines(body):
    """The block's commands: comments and blank lines dropped, continued lines joined."""
    out = []
    pending = ""
    for line in body:
        text = line.strip()
        if not pending and (not text or text.startswith("#")):
            continue
        pending += text
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        out.append(pending)
        pending = ""
    return out


def alternatives(text):
    """Splits `agentloop a X | b Y` into commands; drops comments and [optional] parts."""
    text = re.sub(r"\s+#\s.*$", "", text)
    text = re.sub(r"\s*\[[^\]]*\]", "", text)
    pieces = [p.strip() for p in re.split(r"\s\|\s", text)]
    first = shlex.split(pieces[0])
    commands = [first]
    for p in pieces[1:]:
        words = shlex.split(p)
        if words and words[0] == "agentloop":
            commands.append(words)
        elif len(first) > 2 and words and words[0] not in ("list", "show", "export", "rm",
                                                            "prune", "accept", "reject",
                                                            "revoke") and first[1] != words[0]:
            commands.append(["agentloop"] + words)  # `approve ID | deny ID`: subcommands
        else:
            commands.append(first[:2] + words)  # `sessions list | show ID`: verbs
    return commands


class DocsExamplesTest(CliTestCase):

    def setUp(self):
        super().setUp()
        self.server_ = self.server({"responses": [{"text": "Done."}] * 200})

    def env_(self):
        return self.env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=self.server_.base_url,
                        ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=self.server_.base_url)

    def paused(self, script):
        p = self.run_cli("run", "--provider", "script", "--script", script, "-C", self.ws,
                         "--output", "json", "go")
        self.assert_code(p, 5)
        return json.loads(p.stdout)

    def fixtures(self):
        approval = self.paused(DEMO_SCRIPT)
        q_script = self.write("q.json", [
            {"tool_calls": [{"id": "q1", "name": "ask_user",
                             "input": {"question": "Which?", "options": ["a", "b"]}}]},
            {"text": "ok"}])
        question = self.paused(q_script)
        spare = self.paused(DEMO_SCRIPT)
        d = os.path.join(self.data, "proposals")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "prop_docs0001.json"), "w", encoding="utf-8") as f:
            json.dump({"id": "prop_docs0001", "kind": "memory", "title": "t", "content": "c",
                       "session": "s", "created_ms": 1, "status": "pending", "decided_ms": 0,
                       "written": ""}, f)
        # An agent for the examples of docs/agents.md (NAME, rev).
        agent_dir = os.path.join(self.home, ".config", "agentloop", "agents", "rev")
        os.makedirs(agent_dir, exist_ok=True)
        os.makedirs(os.path.join(self.tmp, "reviews"), exist_ok=True)
        with open(os.path.join(agent_dir, "agent.toml"), "w", encoding="utf-8") as f:
            f.write('[agent]\ndescription = "reviews"\nworkspace_root = "%s"\n'
                    'create_workspace = true\n\n[provider]\nkind = "openai"\nmodel = "m"\n'
                    % os.path.join(self.tmp, "reviews"))
        return {"session": approval["session_id"], "spare_session": spare["session_id"], "approval": approval["pending"][0]["id"],
                "question": question["pending"][0]["id"], "proposal": "prop_docs0001"}

    def substitute(self, words, ids):
        out = []
        sub = words[1] if len(words) > 1 else ""
        for i, w in enumerate(words):
            if w == "NAME" and (words[i - 1] == "--agent" or sub == "agents"):
                w = "rev"
            elif w == "...":
                w = "say done"
            elif w == "ID" or re.fullmatch(r"(apr|q)_[0-9a-f.…]+", w) or w.endswith("..."):
                if sub in ("approve", "deny"):
                    w = ids["approval"]
                elif sub == "answer":
                    w = ids["question"]
                elif sub == "proposals":
                    w = ids["proposal"]
                elif "rm" in words:
                    w = ids["spare_session"]  # removed: the others stay for later examples
                else:
                    w = ids["session"]
            elif w == "FILE":
                w = DEMO_SCRIPT
            elif w == "DIR" or w.startswith("/tmp/"):
                w = self.ws
            elif w.startswith("examples/"):
                w = os.path.join(ROOT, w)
            out.append(w)
        return out

    def test_every_documented_command_is_accepted(self):
        examples = example_commands()
        self.assertGreater(len(examples), 10)
        ids = self.fixtures()
        ran = 0
        for path, lineno, text in examples:
            for words in alternatives(text):
                words = self.substitute(words, ids)
                args = words[1:]
                if args and args[0] == "serve":
                    continue  # runs until stopped: tests/e2e/test_cli_serve.py covers it
                with self.subTest(example="%s:%d: %s" % (path, lineno, " ".join(words))):
                    p = self.run_cli(*args, env=self.env_(), cwd=self.ws)
                    ran += 1
                    err = p.stderr.lower()
                    for marker in USAGE_MARKERS:
                        self.assertNotIn(marker, err, p.stderr)
                    self.assertNotEqual(p.returncode, 2, p.stderr)
        self.assertGreater(ran, 10)


class DocsBlocksTest(CliTestCase):

    def test_every_shell_block_is_run_or_marked_illustrative(self):
        blocks = shell_blocks()
        self.assertGreater(len(blocks), 5)
        for path, lineno, kind, body in blocks:
            if kind is not None:
                continue
            for cmd in command_lines(body):
                with self.subTest(block="%s:%d" % (path, lineno), line=cmd):
                    self.assertTrue(
                        cmd.startswith("agentloop ") or cmd.startswith("export "),
                        "%s:%d: a shell block whose lines are not all `agentloop ...` needs "
                        "<!-- example: run --> (and must pass here) or <!-- example: "
                        "illustrative (why) --> on the line before its fence" % (path, lineno))

    def test_the_agent_toml_example_loads_as_copied(self):
        with open(os.path.join(ROOT, "docs", "agents.md"), encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("## agent.toml"):]
        example = section[section.index("```toml\n") + 8:]
        example = example[:example.index("```")]
        example = example.replace("/srv/agentloop/reviews", os.path.join(self.tmp, "reviews"))
        d = os.path.join(self.home, ".config", "agentloop", "agents", "example")
        os.makedirs(d)
        with open(os.path.join(d, "agent.toml"), "w", encoding="utf-8") as f:
            f.write(example)
        p = self.run_cli("agents", "show", "example", env=self.env(ANTHROPIC_API_KEY="sk-ant-x"))
        self.assert_code(p, 0)
        self.assertNotIn("unknown key", p.stderr)
        self.assertIn("plan", p.stdout)

    def free_port(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def test_the_blocks_marked_run_run_as_pasted(self):
        blocks = [b for b in shell_blocks() if b[2] == "run"]
        self.assertGreaterEqual(len(blocks), 2)  # README's serve, docs/cli.md's demo
        for path, lineno, _, body in blocks:
            text = "\n".join(body)
            # The test's own directory, a free port, and only 127.0.0.1.
            text = text.replace("/tmp/", self.tmp + "/")
            text = text.replace("7878", str(self.free_port()))
            text = text.replace("localhost:", "127.0.0.1:")
            env = self.env()
            del env["AGENTLOOP_HOME"]  # the default data directory, as a reader has it
            env["PATH"] = os.path.dirname(os.path.abspath(BIN)) + os.pathsep + env["PATH"]
            # A server the block starts never outlives it.
            script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + text
            with self.subTest(block="%s:%d" % (path, lineno)):
                p = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=TIMEOUT * 2,
                                   start_new_session=True)
                self.assertEqual(p.returncode, 0, "%s:%d\nstdout:\n%s\nstderr:\n%s" %
                                 (path, lineno, p.stdout, p.stderr))
                if "serve" in text:
                    self.assertIn('"stop":"completed"', p.stdout.replace(" ", ""))
                    with open(os.path.join(self.tmp, "agentloop-hello", "hello.txt")) as f:
                        self.assertEqual(f.read(), "hello\n")


if __name__ == "__main__":
    unittest.main()
