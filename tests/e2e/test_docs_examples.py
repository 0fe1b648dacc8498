"""Every `agentloop ...` command shown in a code block of README.md or
docs/*.md runs against the fake model server without a usage error, so an
example that drifts from the command line (a renamed flag, a removed
subcommand, a wrong argument count) fails CI.

An example line may show alternatives (`list | show ID`), optional parts
(`[--args JSON]`) and placeholders (ID, FILE, "..."); each alternative is run
on its own, optional parts are left out, and placeholders are replaced by a
real session id, pending id, proposal id or file of this test's own
workspace."""

import glob
import json
import os
import re
import shlex
import unittest

from e2e_util import CliTestCase, DEMO_SCRIPT

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


if __name__ == "__main__":
    unittest.main()
