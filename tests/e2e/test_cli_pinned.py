"""End-to-end: the settings pinned to a session. A paused turn is resolved,
and a session resumed, from other directories with no provider flags,
against the fake model server on a non-default base URL; flags of a later
process may narrow the pinned settings but never widen them."""

import json
import os
import sqlite3
import unittest

from e2e_util import CliTestCase, run_on_terminal


def bash(call_id, command):
    return {"tool_calls": [{"id": call_id, "name": "bash", "input": {"command": command}}]}


class PinnedSettingsTest(CliTestCase):

    def setUp(self):
        super().setUp()
        # Another directory: no workspace, no configuration, nothing of the run.
        self.elsewhere = os.path.join(self.tmp, "elsewhere")
        os.makedirs(self.elsewhere)

    def start(self, responses, *flags, prompt="fix it", code=5):
        """Runs the first turn against a fake server; returns (server, result)."""
        server = self.server({"responses": responses})
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url + "/v1",
                         "--model", "test-model", "-C", self.ws, "--output", "json", *flags,
                         prompt)
        self.assert_code(p, code)
        return server, self.json_result(p)

    def elsewhere_cli(self, *args):
        """agentloop run from the other directory, with no provider flags."""
        return self.run_cli(*args, "--output", "json", cwd=self.elsewhere)

    def ws_file(self, name):
        return os.path.join(self.ws, name)

    def test_approve_from_another_directory_uses_the_sessions_provider(self):
        server, r = self.start([bash("c1", "echo approved > out.txt"), {"text": "all done"}])
        self.assertEqual(r["status"], "pending_approval")
        a = self.elsewhere_cli("approve", r["pending"][0]["id"])
        self.assert_code(a, 0)
        done = self.json_result(a)
        self.assertEqual(done["final_text"], "all done")
        with open(self.ws_file("out.txt")) as f:
            self.assertEqual(f.read().strip(), "approved")
        self.assertFalse(os.path.exists(os.path.join(self.elsewhere, "out.txt")))
        requests = server.requests()
        self.assertEqual(len(requests), 2)
        self.assertEqual(requests[1]["body"]["model"], "test-model")
        self.assertTrue(requests[1]["path"].startswith("/v1/"), requests[1]["path"])

    def test_deny_from_another_directory(self):
        server, r = self.start([bash("c1", "echo no > out.txt"), {"text": "never"}])
        d = self.elsewhere_cli("deny", r["pending"][0]["id"], "--reason", "not now")
        self.assert_code(d, 4)
        self.assertEqual(self.json_result(d)["status"], "denied")
        self.assertFalse(os.path.exists(self.ws_file("out.txt")))
        self.assertEqual(len(server.requests()), 1)

    def test_answer_from_another_directory(self):
        server, r = self.start([
            {"tool_calls": [{"id": "q1", "name": "ask_user",
                             "input": {"question": "Which file?", "options": ["a", "b"]}}]},
            {"text": "You chose b."}])
        self.assertEqual(r["status"], "pending_question")
        a = self.elsewhere_cli("answer", r["pending"][0]["id"], "b")
        self.assert_code(a, 0)
        self.assertEqual(self.json_result(a)["final_text"], "You chose b.")
        self.assertEqual(len(server.requests()), 2)

    def test_the_runs_deny_flag_still_denies_after_an_approval(self):
        server, r = self.start([bash("c1", "echo ok > out.txt"), bash("c2", "rm -f stats.py"),
                                {"text": "never"}], "--deny", "bash(rm*)")
        a = self.elsewhere_cli("approve", r["pending"][0]["id"])
        self.assert_code(a, 4)  # denied by the pinned rule, not paused for approval
        done = self.json_result(a)
        self.assertEqual(done["status"], "denied")
        self.assertTrue(os.path.exists(self.ws_file("stats.py")))
        decisions = [e for e in self.export(r["session_id"]) if e["type"] == "decision"
                     and e["tool_use_id"] == "c2"]
        self.assertEqual([d["decision"] for d in decisions], ["deny"])

    def test_a_widening_flag_on_approve_is_refused_with_exit_2(self):
        server, r = self.start([bash("c1", "echo ok > out.txt"), {"text": "done"}],
                               "--max-tool-calls", "10")
        item = r["pending"][0]["id"]
        wide = self.elsewhere_cli("approve", item, "--allow", "*")
        self.assert_code(wide, 2)
        self.assertIn("--allow * is not among the pinned allow rules", wide.stderr)
        budget = self.elsewhere_cli("approve", item, "--max-tool-calls", "11")
        self.assert_code(budget, 2)
        self.assertIn("--max-tool-calls 11 is larger than the pinned 10", budget.stderr)
        # Nothing ran and the item still waits.
        self.assertFalse(os.path.exists(self.ws_file("out.txt")))
        listed = json.loads(self.run_cli("pending", "--output", "json").stdout)
        self.assertEqual([x["id"] for x in listed], [item])
        self.assertEqual(len(server.requests()), 1)
        # A narrowing flag is accepted and recorded.
        ok = self.elsewhere_cli("approve", item, "--max-tool-calls", "5")
        self.assert_code(ok, 0)
        changes = [c for e in self.export(r["session_id"]) if e["type"] == "settings"
                   for c in e["changes"]]
        self.assertEqual([(c["key"], c["from"], c["to"], c["source"]) for c in changes],
                         [("budget.max_tool_calls", 10, 5, "--max-tool-calls")])

    def test_run_session_and_chat_refuse_a_widening_flag(self):
        server, r = self.start([{"text": "hello"}], code=0)
        sid = r["session_id"]
        run = self.run_cli("run", "--session", sid, "--allow", "*", "again", cwd=self.elsewhere)
        self.assert_code(run, 2)
        self.assertIn("--allow * is not among the pinned allow rules", run.stderr)
        chat = self.run_cli("chat", "--session", sid, "--allow", "*", stdin="hi\n",
                            cwd=self.elsewhere)
        self.assert_code(chat, 2)
        self.assertIn("--allow * is not among the pinned allow rules", chat.stderr)
        self.assertEqual(len(server.requests()), 1)

    def settings_changes(self, sid):
        return [(c["key"], c["from"], c["to"], c["source"]) for e in self.export(sid)
                if e["type"] == "settings" for c in e["changes"]]

    def test_the_person_at_the_terminal_raises_a_budget_and_resume_continues_the_turn(self):
        server, r = self.start([bash("c1", "echo 1 >> log.txt"), bash("c2", "echo 2 >> log.txt"),
                                bash("c3", "echo 3 >> log.txt"), bash("c4", "echo 3 >> log.txt"),
                                {"text": "all three"}],
                               "--yolo", "--max-tool-calls", "2", code=3)
        self.assertEqual(r["reason"], "tool call budget exhausted (2 >= 2)")
        sid = r["session_id"]
        # Through a pipe (a script, an agent's command): refused, nothing runs.
        piped = self.elsewhere_cli("resume", sid, "--max-tool-calls", "4")
        self.assert_code(piped, 2)
        self.assertIn("--max-tool-calls 4 is larger than the pinned 2", piped.stderr)
        self.assertEqual(len(server.requests()), 3)
        # From the person's own terminal: raised, recorded as theirs, and the
        # turn that ran out continues with its counters.
        code, out, shown = run_on_terminal(["resume", sid, "--max-tool-calls", "4", "--output",
                                            "json"], "", self.env(), self.elsewhere)
        self.assertEqual(code, 0, out + shown)
        done = json.loads(out)
        self.assertEqual(done["final_text"], "all three")
        self.assertEqual(done["tool_calls"], 3)  # the turn's count, carried
        with open(self.ws_file("log.txt")) as f:
            self.assertEqual(f.read().split(), ["1", "2", "3"])
        self.assertEqual(self.settings_changes(sid),
                         [("budget.max_tool_calls", 2, 4,
                           "--max-tool-calls (the person at the terminal)")])

    def test_the_person_at_the_terminal_may_resume_with_yolo(self):
        server, r = self.start([{"text": "hello"}, bash("c1", "echo yes > out.txt"),
                                {"text": "done"}], code=0)
        sid = r["session_id"]
        piped = self.elsewhere_cli("resume", sid, "--yolo", "go on")
        self.assert_code(piped, 2)
        self.assertIn("--yolo * is not among the pinned allow rules", piped.stderr)
        code, out, shown = run_on_terminal(["resume", sid, "--yolo", "go on"], "", self.env(),
                                           self.elsewhere)
        self.assertEqual(code, 0, out + shown)
        self.assertIn("--yolo: every tool call runs without asking", shown)
        with open(self.ws_file("out.txt")) as f:
            self.assertEqual(f.read().strip(), "yes")
        self.assertEqual(self.settings_changes(sid),
                         [("permissions.allow", None, "*", "--yolo (the person at the terminal)")])

    def test_resume_from_another_directory_runs_tools_in_the_sessions_workspace(self):
        server, r = self.start([{"text": "hello"}, bash("c1", "pwd > where.txt"),
                                {"text": "done"}], "--allow", "bash", code=0)
        p = self.run_cli("resume", r["session_id"], "where are you?", "--output", "json",
                         cwd=self.elsewhere)
        self.assert_code(p, 0)
        self.assertFalse(os.path.exists(os.path.join(self.elsewhere, "where.txt")))
        with open(self.ws_file("where.txt")) as f:
            self.assertEqual(os.path.realpath(f.read().strip()), os.path.realpath(self.ws))
        self.assertEqual(len(server.requests()), 3)

    def test_an_explicit_model_for_a_resumed_session_is_recorded(self):
        server, r = self.start([{"text": "hello"}, {"text": "again"}], code=0)
        p = self.run_cli("resume", r["session_id"], "once more", "--model", "other-model",
                         "--output", "json", cwd=self.elsewhere)
        self.assert_code(p, 0)
        self.assertEqual(server.requests()[1]["body"]["model"], "other-model")
        settings = [e for e in self.export(r["session_id"]) if e["type"] == "settings"]
        self.assertEqual(len(settings), 1)
        self.assertEqual(settings[0]["changes"], [{"key": "model", "from": "test-model",
                                                   "to": "other-model", "source": "--model"}])
        show = json.loads(self.run_cli("sessions", "show", r["session_id"], "--output",
                                       "json").stdout)
        self.assertEqual(show["settings"]["provider"]["model"], "other-model")

    def test_a_failed_resumed_turn_is_retried_by_resume(self):
        server, r = self.start([
            bash("c1", "echo once >> out.txt"),
            {"error": {"code": "invalid_argument", "message": "provider says no"}},
            {"text": "done after retry"}])
        a = self.elsewhere_cli("approve", r["pending"][0]["id"])
        self.assert_code(a, 1)
        self.assertEqual(self.json_result(a)["status"], "failed")
        p = self.run_cli("resume", r["session_id"], "--output", "json", cwd=self.elsewhere)
        self.assert_code(p, 0)
        done = self.json_result(p)
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["final_text"], "done after retry")
        with open(self.ws_file("out.txt")) as f:
            self.assertEqual(f.read(), "once\n")  # the approved tool ran once
        requests = server.requests()
        self.assertEqual(len(requests), 3)
        # The retry asked again with the same history: the tool result last.
        self.assertEqual(requests[2]["body"]["messages"], requests[1]["body"]["messages"])
        # Nothing left to retry.
        again = self.run_cli("resume", r["session_id"], "--output", "json", cwd=self.elsewhere)
        self.assert_code(again, 2)

    def test_a_session_without_pinned_settings_runs_with_the_flags_given(self):
        # As a session created before schema version 3 reads: nothing pinned.
        server, r = self.start([bash("c1", "echo legacy > out.txt"), {"text": "done"}])
        db = sqlite3.connect(os.path.join(self.data, "sessions.db"))
        db.execute("UPDATE sessions SET settings = '' WHERE id = ?", (r["session_id"],))
        db.commit()
        db.close()
        show = json.loads(self.run_cli("sessions", "show", r["session_id"], "--output",
                                       "json").stdout)
        self.assertIsNone(show["settings"])
        a = self.run_cli("approve", r["pending"][0]["id"], "--provider", "openai", "--base-url",
                         server.base_url + "/v1", "--output", "json", cwd=self.elsewhere)
        self.assert_code(a, 0)
        self.assertEqual(self.json_result(a)["final_text"], "done")
        with open(self.ws_file("out.txt")) as f:
            self.assertEqual(f.read().strip(), "legacy")

    def test_sessions_show_prints_the_pinned_settings(self):
        server, r = self.start([{"text": "hello"}], "--deny", "bash(rm*)", code=0)
        text = self.run_cli("sessions", "show", r["session_id"])
        self.assert_code(text, 0)
        self.assertIn(server.base_url + "/v1", text.stdout)
        self.assertIn("bash(rm*)  (--deny)", text.stdout)
        self.assertIn("test-model", text.stdout)
        j = json.loads(self.run_cli("sessions", "show", r["session_id"], "--output",
                                    "json").stdout)
        s = j["settings"]
        self.assertEqual(s["provider"]["base_url"], server.base_url + "/v1")
        self.assertEqual(s["permissions"]["deny"], [{"rule": "bash(rm*)", "source": "--deny"}])
        self.assertEqual(os.path.realpath(s["workspace"]), os.path.realpath(self.ws))
        self.assertEqual(s["system_prompt"]["source"], "built-in")


if __name__ == "__main__":
    unittest.main()
