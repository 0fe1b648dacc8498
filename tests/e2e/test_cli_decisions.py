"""End-to-end: one decision path for paused turns. Approvals come from
other processes and directories with no provider flags; an approved tool
runs at most once, whether its approver is killed mid-run or two approvers
race on the same item."""

import os
import subprocess
import time
import unittest

from e2e_util import BIN, TIMEOUT, CliTestCase


def bash(call_id, command):
    return {"tool_calls": [{"id": call_id, "name": "bash", "input": {"command": command}}]}


def wait_for(predicate, what, timeout=TIMEOUT):
    """Polls `predicate` until it holds; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


class DecisionPathTest(CliTestCase):

    def start(self, responses, *flags):
        server = self.server({"responses": responses})
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url + "/v1",
                         "--model", "test-model", "-C", self.ws, "--output", "json", *flags,
                         "go")
        self.assert_code(p, 5)
        return server, self.json_result(p)

    def directory(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        return path

    def ws_lines(self, name):
        path = os.path.join(self.ws, name)
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()

    def test_three_pauses_resolved_from_three_processes_and_directories(self):
        server, r = self.start([
            bash("c1", "echo one >> steps.txt"),
            bash("c2", "echo two >> steps.txt"),
            {"tool_calls": [{"id": "q1", "name": "ask_user",
                             "input": {"question": "Last step?", "options": ["three", "stop"]}}]},
            bash("c3", "echo three >> steps.txt"),
            {"text": "all three"}])
        sid = r["session_id"]
        verbs = [("approve",), ("approve",), ("answer", "three"), ("approve",)]
        for i, verb in enumerate(verbs):
            item = r["pending"][0]
            cwd = self.directory("elsewhere_%d" % i)
            p = self.run_cli(verb[0], item["id"], *verb[1:], "--output", "json", cwd=cwd)
            r = self.json_result(p)
            self.assertEqual(r["session_id"], sid)
            if i < len(verbs) - 1:
                self.assert_code(p, 5)
            else:
                self.assert_code(p, 0)
        self.assertEqual(r["final_text"], "all three")
        self.assertEqual(self.ws_lines("steps.txt"), ["one", "two", "three"])
        for i in range(len(verbs)):
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "elsewhere_%d" % i,
                                                         "steps.txt")))
        # Every request went to the session's own server and model.
        requests = server.requests()
        self.assertEqual(len(requests), 5)
        self.assertTrue(all(q["body"]["model"] == "test-model" for q in requests))
        # Each approved call was recorded as begun before it ended.
        events = self.export(sid)
        for call in ("c1", "c2", "c3"):
            kinds = [e["type"] for e in events
                     if e["type"] in ("tool_call_begin", "tool_call_end") and e.get("id") == call]
            self.assertEqual(kinds, ["tool_call_begin", "tool_call_end"], call)

    def test_sigkill_while_the_approved_tool_runs_then_a_second_approve(self):
        release = os.path.join(self.tmp, "release")
        server, r = self.start([
            bash("c1", "echo run >> ran.txt; while [ ! -e %s ]; do sleep 0.02; done" % release),
            {"text": "never reached"}])
        sid = r["session_id"]
        item = r["pending"][0]["id"]
        approver = subprocess.Popen([BIN, "approve", item, "--output", "json"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=self.env(), cwd=self.tmp,
                                    start_new_session=True)
        try:
            wait_for(lambda: self.ws_lines("ran.txt") == ["run"], "the approved tool to start")
        finally:
            # The approver and the tool it started (its process group).
            os.killpg(approver.pid, 9)
            approver.communicate()
        self.assertEqual(approver.returncode, -9)
        with open(release, "w"):
            pass

        again = self.run_cli("approve", item, "--output", "json")
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("already resolved", again.stdout + again.stderr)
        self.assertEqual(self.ws_lines("ran.txt"), ["run"])

        # The session loads with the call answered as begun, result unknown,
        # and is never run again.
        show = self.run_cli("sessions", "show", sid, "--output", "json")
        self.assert_code(show, 0)
        resumed = self.run_cli("resume", sid, "--output", "json")
        self.assertEqual(self.ws_lines("ran.txt"), ["run"])
        events = self.export(sid)
        repairs = [e for e in events if e["type"] == "message"
                   and e["message"].get("tag") == "crash-recovery"]
        self.assertEqual(len(repairs), 1, [e["type"] for e in events])
        result = repairs[0]["message"]["content"][0]
        self.assertTrue(result["is_error"])
        self.assertIn("started but the process stopped before it finished", result["content"])
        self.assertEqual(len([e for e in events if e["type"] == "tool_call_begin"]), 1)
        self.assert_code(resumed, 0)
        self.assertEqual(self.json_result(resumed)["final_text"], "never reached")
        self.assertEqual(len(server.requests()), 2)

    def test_two_concurrent_approvers_run_the_tool_once(self):
        server, r = self.start([bash("c1", "echo run >> ran.txt"), {"text": "done"}])
        item = r["pending"][0]["id"]
        procs = [subprocess.Popen([BIN, "approve", item], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=self.env(), cwd=self.directory("approver_%d" % i))
                 for i in range(2)]
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
        # Exactly one decision is recorded: the other approver says so,
        # whichever of the two then runs the turn (the one holding the session).
        already = ["already resolved" in err for _, err in outs]
        self.assertEqual(already.count(True), 1, outs)
        self.assertEqual([out.strip() for out, _ in outs].count("done"), 1, outs)
        self.assertIn(0, [p.returncode for p in procs], outs)
        self.assertEqual(self.ws_lines("ran.txt"), ["run"])
        self.assertEqual(len(server.requests()), 2)


if __name__ == "__main__":
    unittest.main()
