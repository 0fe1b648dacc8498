"""End-to-end: getting back into a session. `chat --session` on a paused
session replays the conversation and asks the pending items right there;
`resume` without an id offers a picker on a terminal."""

import json
import os
import pty
import re
import shutil
import subprocess

from e2e_util import BIN, BUGGY_LINE, CliTestCase, DEMO, DEMO_SCRIPT, TIMEOUT, run_on_terminal


class ChatPausedTest(CliTestCase):

    def paused_run(self, script=DEMO_SCRIPT, prompt="fix the bug"):
        p = self.script_run("--output", "json", script=script, prompt=prompt)
        self.assert_code(p, 5)
        return self.json_result(p)

    def chat(self, sid, stdin, script=DEMO_SCRIPT):
        return self.run_cli("chat", "--session", sid, "--provider", "script", "--script", script,
                            "-C", self.ws, stdin=stdin)

    def pending(self):
        return json.loads(self.run_cli("pending", "--output", "json").stdout)

    def test_chat_replays_and_answers_the_pause_in_place(self):
        r = self.paused_run()
        sid = r["session_id"]
        # bash, edit, bash: each pause is asked in the chat and its answer
        # continues the turn in this process.
        c = self.chat(sid, "y\ny\ny\n/exit\n")
        self.assert_code(c, 0)
        self.assertIn("› fix the bug", c.stderr)  # the conversation so far
        self.assertIn("→ read  stats.py", c.stderr)
        self.assertEqual(c.stderr.count("Allow? [y] once"), 3, c.stderr)
        self.assertIn("Fixed the bug", c.stdout)
        self.assert_fixed()
        self.assertEqual(self.pending(), [])
        decisions = [e for e in self.export(sid) if e["type"] == "decision" and e["by"] == "cli"]
        self.assertEqual(len(decisions), 3)

    def test_status_counts_a_resumed_turn_once(self):
        r = self.paused_run()
        sid = r["session_id"]
        # Three pauses, each resumed in this process: the turn's counters
        # are counted once, as its final turn_end carries them.
        c = self.chat(sid, "y\ny\ny\n/status\n/cost\n/exit\n")
        self.assert_code(c, 0)
        ends = [e for e in self.export(sid) if e["type"] == "turn_end"]
        final = ends[-1]["counters"]
        self.assertGreater(final["tool_calls"], 1)
        used = re.search(r"used +(\d+) tool calls?, ([\d,]+) tokens?", c.stderr)
        self.assertIsNotNone(used, c.stderr)
        self.assertEqual(int(used.group(1)), final["tool_calls"], c.stderr)
        self.assertEqual(int(used.group(2).replace(",", "")), final["tokens"], c.stderr)
        cost = re.search(r"([\d,]+) tokens \(in .*?\) in (\d+) model calls", c.stderr)
        self.assertIsNotNone(cost, c.stderr)
        self.assertEqual(int(cost.group(1).replace(",", "")), final["tokens"], c.stderr)
        self.assertEqual(int(cost.group(2)), final["model_calls"], c.stderr)

    def test_end_of_input_at_the_prompt_leaves_the_item_pending(self):
        r = self.paused_run()
        item = r["pending"][0]
        c = self.chat(r["session_id"], "")
        self.assert_code(c, 0)
        self.assertIn("left pending", c.stderr)
        self.assertEqual([x["id"] for x in self.pending()], [item["id"]])
        self.assertIn(BUGGY_LINE, self.read_ws())

    def test_deny_in_chat_ends_the_turn_denied(self):
        r = self.paused_run()
        c = self.chat(r["session_id"], "n\nnot now\n/exit\n")
        self.assert_code(c, 0)
        self.assertIn("denied", c.stderr)
        self.assertEqual(self.pending(), [])
        denial = [e for e in self.export(r["session_id"])
                  if e["type"] == "decision" and e["by"] == "cli"]
        self.assertEqual(denial[0]["decision"], "deny")
        self.assertEqual(denial[0]["reason"], "not now")
        self.assertIn(BUGGY_LINE, self.read_ws())

    def test_question_answered_by_number_in_chat(self):
        s = self.write("q.json", [
            {"tool_calls": [{"id": "q1", "name": "ask_user",
                             "input": {"question": "Which file?", "options": ["a.txt", "b.txt"]}}]},
            {"text": "You chose b."}])
        r = self.paused_run(script=s)
        c = self.chat(r["session_id"], "2\n/exit\n", script=s)
        self.assert_code(c, 0)
        self.assertIn("Which file?", c.stderr)
        self.assertIn("You chose b.", c.stdout)
        results = [b for e in self.export(r["session_id"]) if e["type"] == "message"
                   for b in e["message"]["content"] if b.get("type") == "tool_result"]
        self.assertEqual(results[-1]["content"], "b.txt")

    def test_a_message_typed_while_paused_asks_first_then_runs(self):
        s = self.write("two.json", [
            {"tool_calls": [{"id": "w1", "name": "write",
                             "input": {"file_path": "note.txt", "content": "hi\n"}}]},
            {"text": "Wrote it."},
            {"text": "Second answer."}])
        r = self.paused_run(script=s, prompt="write a note")
        # -q: no replay, no banner; the pause is still asked.
        c = self.run_cli("chat", "-q", "--session", r["session_id"], "--provider", "script",
                         "--script", s, "-C", self.ws, stdin="y\nand then?\n")
        self.assert_code(c, 0)
        self.assertNotIn("› write a note", c.stderr)
        self.assertEqual(c.stdout.count("Wrote it."), 1, c.stdout)
        self.assertIn("Second answer.", c.stdout)
        with open(os.path.join(self.ws, "note.txt")) as f:
            self.assertEqual(f.read(), "hi\n")


class ResumePickerTest(CliTestCase):

    def test_resume_without_id_off_a_terminal_is_a_clear_error(self):
        p = self.run_cli("resume", "-C", self.ws)
        self.assert_code(p, 2)
        self.assertIn("resume needs a session ID when stdin is not a terminal", p.stderr)

    def test_resume_without_id_on_a_terminal_picks_a_session(self):
        first = self.script_run("--output", "json", prompt="first task")
        second = self.script_run("--output", "json", prompt="second task")
        self.assert_code(first, 5)
        newest = self.json_result(second)["session_id"]
        oldest = self.json_result(first)["session_id"]
        # A bare chat leaves a session with no turn: the picker leaves it out.
        bare = self.run_cli("chat", "--provider", "script", "--script", DEMO_SCRIPT, "-C",
                            self.ws, stdin="/exit\n")
        self.assert_code(bare, 0)
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen(
                [BIN, "-r", "--provider", "script", "--script", DEMO_SCRIPT, "-C", self.ws],
                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=self.env(), cwd=self.tmp)
            os.close(slave)
            slave = None
            # Pick the second entry (the older session); its pause is then
            # asked in the chat: deny it, then leave.
            os.write(master, b"2\n")
            os.write(master, b"n\n")
            os.write(master, b"\n")
            os.write(master, b"/exit\n")
            out, err = proc.communicate(timeout=TIMEOUT)
        finally:
            os.close(master)
            if slave is not None:
                os.close(slave)
        self.assertEqual(proc.returncode, 0, out + err)
        self.assertIn("1) ", err)
        self.assertNotIn("(untitled)", err)
        self.assertIn(newest[:8], err)
        self.assertIn("› first task", err)  # the picked session's conversation
        decided = [e for e in self.export(oldest) if e["type"] == "decision" and e["by"] == "cli"]
        self.assertEqual([d["decision"] for d in decided], ["deny"])
        self.assertEqual(
            [e for e in self.export(newest) if e["type"] == "decision" and e["by"] == "cli"], [])


class ChatUndoPermissionsTest(CliTestCase):

    def chat(self, script, stdin, *extra):
        return self.run_cli("chat", "--provider", "script", "--script", script, "-C", self.ws,
                            *extra, stdin=stdin)

    def user_texts(self):
        sid = json.loads(self.run_cli("sessions", "list", "-C", self.ws, "--output",
                                      "json").stdout)[0]["id"]
        return sid, [b["text"] for e in self.export(sid) if e["type"] == "message"
                     and e["message"]["role"] == "user"
                     for b in e["message"]["content"] if b.get("type") == "text"]

    def test_a_prompt_on_the_command_line_is_the_chats_first_turn(self):
        # `agentloop "fix the bug"` and `agentloop chat fix the bug`, as with
        # claude and codex: the chat starts with that prompt.
        for argv in (["fix the bug"], ["chat", "fix", "the", "bug"]):
            shutil.rmtree(self.ws)
            shutil.copytree(DEMO, self.ws, ignore=shutil.ignore_patterns("__pycache__"))
            c = self.run_cli(*argv, "--provider", "script", "--script", DEMO_SCRIPT, "-C", self.ws,
                             "--yolo", stdin="")
            self.assert_code(c, 0)
            self.assert_fixed()
            sid, texts = self.user_texts()
            self.assertEqual(texts[0], "fix the bug", argv)
            self.run_cli("sessions", "rm", sid)

    def test_undo_reverts_the_newest_change_first_and_tells_the_model(self):
        s = self.write("undo.json", [
            {"tool_calls": [{"id": "w1", "name": "write",
                             "input": {"file_path": "note.txt", "content": "one\n"}}]},
            {"tool_calls": [{"id": "e1", "name": "edit",
                             "input": {"file_path": "note.txt", "old_string": "one",
                                       "new_string": "two"}}]},
            {"text": "Wrote the note."},
            {"text": "Noted."}])
        path = os.path.join(self.ws, "note.txt")
        c = self.chat(s, "make a note\n/undo\n/undo\n/undo\nthanks\n", "--allow", "*")
        self.assert_code(c, 0)
        self.assertIn("reverted the edit of note.txt", c.stderr)
        self.assertIn("reverted the write of note.txt (the file it created is removed)", c.stderr)
        self.assertIn("nothing to undo: every change of this session is undone", c.stderr)
        self.assertFalse(os.path.exists(path))
        _, texts = self.user_texts()
        self.assertIn("the user reverted your edit of note.txt", texts[-1])
        self.assertIn("the user reverted your write of note.txt", texts[-1])
        self.assertTrue(texts[-1].endswith("thanks"), texts[-1])

    def test_undo_refuses_a_file_changed_since(self):
        s = self.write("undo.json", [
            {"tool_calls": [{"id": "w1", "name": "write",
                             "input": {"file_path": "note.txt", "content": "one\n"}}]},
            {"text": "Wrote it."},
            {"tool_calls": [{"id": "b1", "name": "bash",
                             "input": {"command": "echo mine > note.txt"}}]},
            {"text": "Changed by hand."}])
        c = self.chat(s, "write\nchange it\n/undo\n", "--allow", "*")
        self.assert_code(c, 0)
        self.assertIn("cannot undo the write of note.txt", c.stderr)
        self.assertIn("changed since", c.stderr)
        with open(os.path.join(self.ws, "note.txt")) as f:
            self.assertEqual(f.read(), "mine\n")

    def test_permissions_shows_rules_and_adds_session_rules(self):
        s = self.write("perm.json", [
            {"tool_calls": [{"id": "b1", "name": "bash",
                             "input": {"command": "touch first.txt"}}]},
            {"text": "Ran it."},
            {"tool_calls": [{"id": "b2", "name": "bash",
                             "input": {"command": "touch second.txt"}}]},
            {"text": "Tried."}])
        # No rules and no terminal: bash would pause. The person allows it
        # in the chat; then denies it again.
        c = self.chat(s, "/permissions allow bash(touch*)\n/permissions\nfirst\n"
                         "/permissions deny bash\nsecond\n/permissions bogus\n")
        self.assert_code(c, 0)
        self.assertIn("allow bash(touch*) added to session", c.stderr)
        self.assertIn("allow bash(touch*)   (/permissions)", c.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "first.txt")), c.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "second.txt")), c.stderr)
        self.assertIn("usage: /permissions", c.stderr)
        sid, _ = self.user_texts()
        shown = self.run_cli("sessions", "show", sid).stdout
        self.assertIn("bash(touch*)  (/permissions)", shown)
        self.assertIn("bash  (/permissions)", shown)

    def test_a_rule_that_does_not_parse_is_refused_and_the_chat_goes_on(self):
        s = self.write("t.json", [{"text": "hello"}])
        c = self.chat(s, "/permissions deny bash(\nhi\n")
        self.assert_code(c, 0)
        self.assertNotIn("added to session", c.stderr)
        self.assertIn("hello", c.stdout)


if __name__ == "__main__":
    import unittest
    unittest.main()


def bash_call(call_id, command):
    return {"tool_calls": [{"id": call_id, "name": "bash", "input": {"command": command}}]}


class ChatBudgetTest(CliTestCase):

    def script(self):
        return self.write("budget.json", [
            bash_call("c1", "echo 1 >> log.txt"), bash_call("c2", "echo 2 >> log.txt"),
            bash_call("c3", "echo 3 >> log.txt"), bash_call("c4", "echo 3 >> log.txt"),
            {"text": "Logged three."}])

    def settings_changes(self, sid):
        return [(c["key"], c["from"], c["to"], c["source"]) for e in self.export(sid)
                if e["type"] == "settings" for c in e["changes"]]

    def newest_session(self):
        return json.loads(self.run_cli("sessions", "list", "-C", self.ws, "--output",
                                       "json").stdout)[0]["id"]

    def test_a_turn_out_of_budget_asks_to_continue_and_yes_continues_it(self):
        code, out, shown = run_on_terminal(
            ["chat", "--provider", "script", "--script", self.script(), "-C", self.ws,
             "--yolo", "--max-tool-calls", "2"],
            "log three lines\ny\n/budget\n/exit\n", self.env(), self.tmp, stdout_too=True)
        self.assertEqual(code, 0, out + shown)
        self.assertIn("budget reached (2 tool calls): continue with 2 more? [y/N]", out + shown)
        self.assertIn("Logged three.", out + shown)
        self.assertIn("budget per turn: 4 tool calls", shown)  # /budget
        with open(os.path.join(self.ws, "log.txt")) as f:
            self.assertEqual(f.read().split(), ["1", "2", "3"])
        sid = self.newest_session()
        self.assertEqual(self.settings_changes(sid),
                         [("budget.max_tool_calls", 2, 4,
                           "the budget question (the person at the terminal)")])
        # The same turn went on: one turn id, its counters carried.
        ends = [e for e in self.export(sid) if e["type"] == "turn_end"]
        self.assertEqual(len({e["turn_id"] for e in ends}), 1)
        self.assertEqual(ends[-1]["counters"]["tool_calls"], 3)

    def test_no_leaves_the_turn_as_it_ended(self):
        code, out, shown = run_on_terminal(
            ["chat", "--provider", "script", "--script", self.script(), "-C", self.ws,
             "--yolo", "--max-tool-calls", "2"],
            "log three lines\nn\n/exit\n", self.env(), self.tmp, stdout_too=True)
        self.assertEqual(code, 0, out + shown)
        self.assertIn("continue with 2 more? [y/N]", out + shown)
        self.assertNotIn("Logged three.", out + shown)
        self.assertEqual(self.settings_changes(self.newest_session()), [])

    def test_budget_command_shows_and_sets_and_a_pipe_cannot_raise(self):
        s = self.write("hello.json", [{"text": "hello"}, {"text": "again"}])
        c = self.run_cli("chat", "--provider", "script", "--script", s, "-C", self.ws,
                         stdin="hi\n/budget\n/budget tool_calls 40\n/budget tool_calls 5\n"
                               "/budget tokens\n/budget\nagain\n/exit\n")
        self.assert_code(c, 0)
        self.assertIn("budget per turn: 20 tool calls, 50,000 tokens, 25 model calls", c.stderr)
        self.assertIn("/budget 40 is larger than the pinned 20", c.stderr)
        self.assertIn("budget per turn: 5 tool calls", c.stderr)
        self.assertIn("usage: /budget [tool_calls|tokens|model_calls N]", c.stderr)
        self.assertEqual(self.settings_changes(self.newest_session()),
                         [("budget.max_tool_calls", 20, 5, "/budget")])
        # At the terminal a larger value is the person's decision.
        code, out, shown = run_on_terminal(
            ["chat", "--provider", "script", "--script", s, "-C", self.ws, "-c"],
            "/budget tokens 200000\n/exit\n", self.env(), self.tmp)
        self.assertEqual(code, 0, out + shown)
        self.assertIn("budget per turn: 5 tool calls, 200,000 tokens", shown)


class ContinueTest(CliTestCase):

    def test_continue_passes_over_empty_sessions_or_says_there_is_none(self):
        s = self.write("hello.json", [{"text": "hello"}, {"text": "again"}])
        chat = ["chat", "--provider", "script", "--script", s, "-C", self.ws]
        bare = self.run_cli(*chat, stdin="/exit\n")
        self.assert_code(bare, 0)
        none = self.run_cli("-c", "--provider", "script", "--script", s, "-C", self.ws,
                            stdin="/exit\n")
        self.assert_code(none, 2)
        self.assertIn("no session with a turn in", none.stderr)
        run = self.run_cli("run", "-c", "--provider", "script", "--script", s, "-C", self.ws,
                           "go on")
        self.assert_code(run, 2)
        self.assertIn("no session with a turn in", run.stderr)
        # A session with a turn, then a newer empty one: -c takes the first.
        first = self.run_cli(*chat, stdin="hi\n/exit\n")
        self.assert_code(first, 0)
        sid = re.search(r"session ([0-9a-f-]{36})", first.stderr).group(1)
        self.assert_code(self.run_cli(*chat, stdin="/exit\n"), 0)
        again = self.run_cli("-c", "--provider", "script", "--script", s, "-C", self.ws,
                             stdin="/exit\n")
        self.assert_code(again, 0)
        self.assertIn("session " + sid, again.stderr)
        self.assertIn("› hi", again.stderr)
