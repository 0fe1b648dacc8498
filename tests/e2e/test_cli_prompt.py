"""End-to-end: the approval prompt on a terminal (a pseudo-terminal that is
the process's controlling terminal). A write or edit is shown as the change
it would make to the file, as `pending` and the server show it; Ctrl-C or
Esc at a live prompt denies the call and returns to the chat's input; at a
paused item's prompt they leave it pending. A subagent's child asks the same
person inline and its tool calls are shown under the call that started it."""

import fcntl
import json
import os
import pty
import select
import subprocess
import termios

from e2e_util import BIN, CliTestCase, TIMEOUT

NOTES = "".join("line %d\n" % i for i in range(1, 9))


class Terminal:
    """agentloop with stdin, stdout and stderr on a pseudo-terminal that is
    its controlling terminal (a new session), so a Ctrl-C typed while the
    terminal is in its normal mode is a SIGINT, as for a person."""

    def __init__(self, argv, env, cwd):
        self.master, slave = pty.openpty()

        def controlling_terminal():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=cwd, start_new_session=True,
                                     preexec_fn=controlling_terminal)
        os.close(slave)
        self.text = ""
        self.pos = 0  # what expect() has consumed

    def _read(self, timeout):
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the process closed the terminal
            data = b""
        if not data:
            return None
        self.text += data.decode("utf-8", "replace")
        return True

    def expect(self, needle):
        """Waits until `needle` appears after what was consumed; returns the
        text up to and including it."""
        while True:
            at = self.text.find(needle, self.pos)
            if at >= 0:
                seen = self.text[self.pos:at + len(needle)]
                self.pos = at + len(needle)
                return seen
            got = self._read(TIMEOUT)
            if not got:
                raise AssertionError("%r never appeared (%s); the terminal showed:\n%s" %
                                     (needle, "timeout" if got is False else "end of output",
                                      self.text))

    def send(self, data):
        os.write(self.master, data)

    def finish(self):
        """Reads to the end of output; returns the exit code."""
        while self._read(TIMEOUT):
            pass
        try:
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            os.close(self.master)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass


class PromptCase(CliTestCase):

    def setUp(self):
        super().setUp()
        with open(os.path.join(self.ws, "notes.txt"), "w") as f:
            f.write(NOTES)
        self.terminals = []

    def tearDown(self):
        for t in self.terminals:
            t.close()
        super().tearDown()

    def script(self, items):
        return self.write("script.json", items)

    def terminal(self, *args):
        t = Terminal([BIN] + list(args), self.env(TERM="dumb"), self.tmp)
        self.terminals.append(t)
        return t

    def chat(self, script, *extra):
        return self.terminal("chat", "--provider", "script", "--script", script, "-C", self.ws,
                             *extra)

    def notes(self):
        with open(os.path.join(self.ws, "notes.txt")) as f:
            return f.read()

    def decisions(self, sid=None):
        if sid is None:
            sid = json.loads(self.run_cli("sessions", "list", "-C", self.ws, "--output",
                                          "json").stdout)[0]["id"]
        return [e for e in self.export(sid)
                if e["type"] == "decision" and e["decision"] in ("approve", "deny")]



class PromptTest(PromptCase):

    READ = {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "notes.txt"}}]}
    WRITE_THEN_EDIT = [
        READ,
        {"tool_calls": [{"id": "w1", "name": "write",
                         "input": {"file_path": "notes.txt",
                                   "content": "line 1\nline 2\nline THREE\n"}}]},
        {"tool_calls": [{"id": "e1", "name": "edit",
                         "input": {"file_path": "stats.py", "old_string": "def mean",
                                   "new_string": "def average"}}]},
        {"text": "Both done."},
    ]

    def test_the_prompt_shows_the_change_a_write_or_edit_would_make(self):
        t = self.chat(self.script(self.WRITE_THEN_EDIT), "go")
        shown = t.expect("Allow?")
        self.assertIn("Permission needed: write", shown)
        self.assertIn("file: notes.txt  replaces the whole file (8 lines) with 3 lines", shown)
        self.assertIn("--- a/notes.txt", shown)
        self.assertIn("-line 3", shown)
        self.assertIn("+line THREE", shown)
        self.assertIn(" line 2", shown)  # a context line
        self.assertNotIn("content:", shown)
        t.send(b"y\r")
        shown = t.expect("Allow?")
        self.assertIn("Permission needed: edit", shown)
        self.assertIn("file: stats.py", shown)
        self.assertIn("--- a/stats.py", shown)
        self.assertIn("-def mean", shown)
        self.assertIn("+def average", shown)
        self.assertNotIn("No newline at end of file", shown)
        t.send(b"y\r")
        t.expect("Both done.")
        t.expect("\u203a ")
        t.send(b"/exit\r")
        self.assertEqual(t.finish(), 0, t.text)
        self.assertEqual(self.notes(), "line 1\nline 2\nline THREE\n")

    def paused(self, *extra, script=None):
        p = self.run_cli("run", "--provider", "script", "--script",
                         self.script(script or self.WRITE_THEN_EDIT), "-C", self.ws,
                         "--output", "json", *extra, "go")
        self.assert_code(p, 5)
        return json.loads(p.stdout)["session_id"]

    def test_pending_shows_the_change_of_a_paused_write(self):
        listed = self.run_cli("pending", "--session", self.paused()).stdout
        self.assertIn("file: notes.txt  replaces the whole file (8 lines) with 3 lines", listed)
        self.assertIn("+line THREE", listed)
        self.assertIn("agentloop approve", listed)
        # A file the session may not read is not shown.
        listed = self.run_cli("pending", "--session",
                              self.paused("--deny", "read(notes.txt)",
                                          script=self.WRITE_THEN_EDIT[1:])).stdout
        self.assertIn("is not shown: the session may not read it", listed)
        self.assertNotIn("line 8", listed)

    def cancel_at_live_prompt(self, key):
        t = self.chat(self.script([
            self.READ,
            {"tool_calls": [{"id": "w1", "name": "write",
                             "input": {"file_path": "notes.txt", "content": "gone\n"}}]},
            {"text": "Second answer."}]), "go")
        t.expect("Allow?")
        t.send(key)
        # Back at the chat's input, which still works.
        t.expect("\u203a ")
        t.send(b"hello\r")
        t.expect("Second answer.")
        t.expect("\u203a ")
        t.send(b"/exit\r")
        self.assertEqual(t.finish(), 0, t.text)
        self.assertEqual(self.notes(), NOTES)
        [d] = self.decisions()
        self.assertEqual(d["decision"], "deny")
        self.assertIn("cancelled the approval prompt", d["reason"])

    def test_ctrl_c_at_a_live_prompt_denies_and_returns_to_the_input(self):
        self.cancel_at_live_prompt(b"\x03")

    def test_esc_at_a_live_prompt_denies_and_returns_to_the_input(self):
        self.cancel_at_live_prompt(b"\x1b")

    def test_an_arrow_key_at_the_prompt_is_ignored(self):
        t = self.chat(self.script([
            self.READ,
            {"tool_calls": [{"id": "w1", "name": "write",
                             "input": {"file_path": "notes.txt", "content": "kept\n"}}]},
            {"text": "Wrote it."}]), "go")
        t.expect("Allow?")
        t.send(b"\x1b[Ay\r")
        t.expect("Wrote it.")
        t.expect("\u203a ")
        t.send(b"/exit\r")
        self.assertEqual(t.finish(), 0, t.text)
        self.assertEqual(self.notes(), "kept\n")

    def test_ctrl_c_at_a_paused_items_prompt_leaves_it_pending(self):
        sid = self.paused()
        t = self.terminal("chat", "--session", sid, "--provider", "script", "--script",
                          self.script(self.WRITE_THEN_EDIT), "-C", self.ws)
        shown = t.expect("Allow?")
        self.assertIn("replaces the whole file (8 lines)", shown)
        t.send(b"\x03")
        t.expect("left pending")
        t.expect("\u203a ")
        t.send(b"/exit\r")
        self.assertEqual(t.finish(), 0, t.text)
        self.assertEqual(self.notes(), NOTES)
        self.assertEqual(self.decisions(sid), [])
        pending = json.loads(self.run_cli("pending", "--output", "json").stdout)
        self.assertEqual([i["tool"] for i in pending], ["write"])


ROOT = "You are agentloop, a careful"  # in the root session's built-in prompt only


class SubagentPromptTest(PromptCase):
    """A subagent's child on a terminal: its tool calls are shown under the
    call that started it, and its asks are put to the person at once."""

    def define_writer(self):
        agents = os.path.join(self.home, ".config", "agentloop", "agents")
        os.makedirs(agents)
        with open(os.path.join(agents, "writer.md"), "w", encoding="utf-8") as f:
            f.write("---\ndescription: writer helps the caller\ntools: [read, write]\n---\n"
                    "You are WRITER-AGENT. Do what you are asked.\n")
        return self.write("script.json", {"responses": [
            {"match": ROOT, "tool_calls": [
                {"id": "c1", "name": "agent__writer", "input": {"task": "write child.txt"}}]},
            {"match": "WRITER-AGENT", "tool_calls": [
                {"id": "w1", "name": "write",
                 "input": {"file_path": "child.txt", "content": "hello\n"}}]},
            {"match": "WRITER-AGENT", "text": "wrote child.txt"},
            {"match": ROOT, "text": "The writer is done."}]})

    def test_a_childs_approval_is_asked_inline_and_its_calls_shown(self):
        script = self.define_writer()
        t = self.terminal("run", "--provider", "script", "--script", script, "-C", self.ws,
                          "--allow", "agent__writer", "delegate")
        shown = t.expect("Allow?")
        self.assertIn("\u2192 agent__writer", shown)
        self.assertIn("Permission needed: write", shown)
        self.assertIn("reason: subagent root/writer asks: ", shown)
        self.assertIn("file: child.txt  (new file, 1 line)", shown)
        t.send(b"y\r")
        shown = t.expect("The writer is done.")
        self.assertIn("\n    \u2192 write  child.txt", shown)  # the child's call, indented
        self.assertEqual(t.finish(), 0, t.text)
        with open(os.path.join(self.ws, "child.txt")) as f:
            self.assertEqual(f.read(), "hello\n")
        self.assertEqual(json.loads(self.run_cli("pending", "--output", "json").stdout), [])

    def test_a_childs_approval_cancelled_denies_the_childs_call(self):
        script = self.define_writer()
        t = self.terminal("run", "--provider", "script", "--script", script, "-C", self.ws,
                          "--allow", "agent__writer", "delegate")
        t.expect("Allow?")
        t.send(b"\x1b")
        t.expect("The writer is done.")
        self.assertEqual(t.finish(), 0, t.text)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "child.txt")))
        self.assertIn("    \u2717 denied write", t.text)


if __name__ == "__main__":
    import unittest
    unittest.main()
