"""End-to-end: durable approvals and questions across processes, and plan
mode against forged mutating calls."""

import hashlib
import json
import os
import unittest

from e2e_util import BUGGY_LINE, CliTestCase, DEMO_SCRIPT, load_demo_script


def tree_digest(root):
    """Paths and contents of every file under `root` (to prove nothing changed)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                h.update(f.read())
        h.update(b"/" + os.path.relpath(dirpath, root).encode())
    return h.hexdigest()


class ApprovalTest(CliTestCase):

    def resolve(self, *args):
        return self.run_cli(*args, "--provider", "script", "--script", DEMO_SCRIPT, "--output",
                            "json")

    def test_run_pauses_then_other_processes_approve_until_done(self):
        p = self.script_run("--output", "json")  # no rules: bash and edit need approval
        self.assert_code(p, 5)
        r = self.json_result(p)
        sid = r["session_id"]
        approved_tools = []
        for _ in range(5):  # bash, edit, bash: three pauses
            self.assertEqual(r["status"], "pending_approval")
            item = r["pending"][0]
            listed = json.loads(self.run_cli("pending", "--output", "json").stdout)
            self.assertEqual([x["id"] for x in listed], [item["id"]])
            self.assertEqual(listed[0]["session_id"], sid)
            text = self.run_cli("pending", "--session", sid)
            self.assertIn("agentloop approve " + item["id"], text.stdout)
            approved_tools.append(item["tool"])
            a = self.resolve("approve", item["id"])
            r = self.json_result(a)
            self.assertEqual(r["session_id"], sid)
            if a.returncode == 0:
                break
            self.assert_code(a, 5)
        self.assertEqual(r["status"], "completed")
        self.assertEqual(approved_tools, ["bash", "edit", "bash"])
        self.assertIn("Fixed the bug", r["final_text"])
        self.assert_fixed()
        self.assertEqual(json.loads(self.run_cli("pending", "--output", "json").stdout), [])
        # Every decision by a person is in the event log.
        decisions = [e for e in self.export(sid) if e["type"] == "decision" and e["by"] == "cli"]
        self.assertEqual(len(decisions), 3)

    def test_approve_with_edited_arguments(self):
        p = self.script_run("--output", "json")
        item = self.json_result(p)["pending"][0]
        a = self.run_cli("approve", item["id"], "--args", '{"command": "echo edited > marker"}',
                         "--provider", "script", "--script", DEMO_SCRIPT, "--output", "json")
        self.assertIn(a.returncode, (0, 5), a.stderr)
        with open(os.path.join(self.ws, "marker")) as f:
            self.assertEqual(f.read().strip(), "edited")

    def test_invalid_edit_is_refused_and_stays_pending(self):
        p = self.script_run("--output", "json")
        item = self.json_result(p)["pending"][0]
        a = self.run_cli("approve", item["id"], "--args", '{"cmd": 1}', "--provider", "script",
                         "--script", DEMO_SCRIPT)
        self.assert_code(a, 2)
        listed = json.loads(self.run_cli("pending", "--output", "json").stdout)
        self.assertEqual([x["id"] for x in listed], [item["id"]])

    def test_deny_then_already_resolved(self):
        p = self.script_run("--output", "json")
        item = self.json_result(p)["pending"][0]
        d = self.run_cli("deny", item["id"], "--reason", "not now", "--provider", "script",
                         "--script", DEMO_SCRIPT, "--output", "json")
        self.assert_code(d, 4)
        self.assertEqual(self.json_result(d)["status"], "denied")
        self.assertIn(BUGGY_LINE, self.read_ws())
        again = self.run_cli("approve", item["id"], "--provider", "script", "--script",
                             DEMO_SCRIPT)
        self.assert_code(again, 1)
        self.assertIn("already resolved", again.stderr)

    def test_pending_ids_are_typed_and_a_unique_prefix_resolves(self):
        p = self.script_run("--output", "json")
        item = self.json_result(p)["pending"][0]
        self.assertRegex(item["id"], r"^apr_[0-9a-f]{16}$")
        a = self.resolve("approve", item["id"][:8])
        self.assertIn(a.returncode, (0, 5), a.stderr)
        decided = [e["pending_id"] for e in self.export(self.json_result(p)["session_id"])
                   if e["type"] == "decision" and e["by"] == "cli"]
        self.assertEqual(decided, [item["id"]])

    def test_unknown_pending_id_exits_2(self):
        for bad in ("apr_ffff", "nope-nope"):
            u = self.resolve("approve", bad)
            self.assert_code(u, 2)
            self.assertIn("no pending item '" + bad + "'", u.stderr)
            self.assertIn("error", json.loads(u.stdout))
        short = self.resolve("deny", "ap")
        self.assert_code(short, 2)
        self.assertIn("too short", short.stderr)

    def test_question_options_are_listed_and_answered_by_number(self):
        s = self.write("q.json", [
            {"tool_calls": [{"id": "q1", "name": "ask_user",
                             "input": {"question": "Which file?", "options": ["a.txt", "b.txt"]}}]},
            {"text": "ok"}])
        p = self.script_run("--output", "json", script=s)
        self.assert_code(p, 5)
        qid = self.json_result(p)["pending"][0]["id"]
        self.assertRegex(qid, r"^q_[0-9a-f]{16}$")
        listed = self.run_cli("pending")
        self.assertIn("1) a.txt", listed.stdout)
        self.assertIn("2) b.txt", listed.stdout)
        a = self.run_cli("answer", qid[:6], "2", "--provider", "script", "--script", s,
                         "--output", "json")
        self.assert_code(a, 0)
        results = [b for e in self.export(self.json_result(p)["session_id"])
                   if e["type"] == "message"
                   for b in e["message"]["content"] if b.get("type") == "tool_result"]
        self.assertEqual(results[-1]["content"], "b.txt")

    def test_question_is_answered_from_another_process(self):
        s = self.write("q.json", [
            {"tool_calls": [{"id": "q1", "name": "ask_user",
                             "input": {"question": "Which file?", "options": ["a", "b"]}}]},
            {"text": "You chose b."}])
        p = self.script_run("--output", "json", script=s)
        self.assert_code(p, 5)
        r = self.json_result(p)
        self.assertEqual(r["status"], "pending_question")
        qid = r["pending"][0]["id"]
        self.assertIn("agentloop answer " + qid, p.stderr)
        a = self.run_cli("answer", qid, "b", "--provider", "script", "--script", s, "--output",
                         "json")
        self.assert_code(a, 0)
        self.assertEqual(self.json_result(a)["final_text"], "You chose b.")
        results = [b for e in self.export(r["session_id"]) if e["type"] == "message"
                   for b in e["message"]["content"] if b.get("type") == "tool_result"]
        self.assertEqual(results[-1]["content"], "b")


class PlanModeTest(CliTestCase):

    FORGED = [
        {"name": "write", "input": {"file_path": "new.txt", "content": "x"}},
        {"name": "write", "input": {"file_path": "stats.py", "content": "gone"}},
        {"name": "edit", "input": {"file_path": "stats.py", "old_string": "def mean",
                                   "new_string": "def average"}},
        {"name": "bash", "input": {"command": "echo pwned > pwned.txt"}},
        {"name": "bash", "input": {"command": "rm -f stats.py"}},
        {"name": "bash", "input": {"command": "cat stats.py | tee copy.py"}},
        {"name": "bash", "input": {"command": "sed -i s/mean/avg/ stats.py"}},
        {"name": "todo", "input": {"action": "list"}},
    ]

    def test_forged_mutating_calls_change_nothing(self):
        before = tree_digest(self.ws)
        for i, call in enumerate(self.FORGED):
            script = self.write("plan%d.json" % i, [
                {"tool_calls": [dict(call, id="f%d" % i)]},
                {"text": "done"}, {"text": "done"}, {"text": "done"}])
            p = self.script_run("--command", "plan", "--allow", "*", "--output", "json",
                                script=script)
            self.assertIn(p.returncode, (0, 4), p.stdout + p.stderr)
            self.assertEqual(tree_digest(self.ws), before, "changed by %s" % call)


if __name__ == "__main__":
    unittest.main()
