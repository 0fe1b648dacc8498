"""End-to-end: subagents (docs/subagents.md) with the scripted provider and the
fake model server: a child that answers, a child that runs out of its share,
the depth cap, two children side by side whose usage sums at the root."""

import json
import os
import time
import unittest

from e2e_util import TIMEOUT, CliTestCase, interrupt, json_lines

ROOT = "You are agentloop, a careful"  # in the root session's built-in prompt only


def definition(name, marker, extra=""):
    return ("---\ndescription: %s helps the caller\n%s---\nYou are %s. Do what you are asked "
            "and answer briefly.\n" % (name, extra, marker))


def usage(inp, out):
    return {"input_tokens": inp, "output_tokens": out}


class SubagentTest(CliTestCase):

    def setUp(self):
        super().setUp()
        self.agents = os.path.join(self.home, ".config", "agentloop", "agents")
        os.makedirs(self.agents)

    def define(self, name, marker, extra=""):
        with open(os.path.join(self.agents, name + ".md"), "w", encoding="utf-8") as f:
            f.write(definition(name, marker, extra))

    def config(self, text):
        with open(os.path.join(self.agents, "..", "config.toml"), "w", encoding="utf-8") as f:
            f.write(text)

    def run_script(self, items, *extra):
        path = self.write("script.json", {"responses": items})
        return self.run_cli("run", "--provider", "script", "--script", path, "-C", self.ws,
                            "--output", "json", *extra, "delegate the review")

    def events(self, sid, kind):
        return [e for e in self.export(sid) if e["type"] == kind]

    def tool_results(self, sid):
        out = []
        for e in self.export(sid):
            if e["type"] != "message":
                continue
            for b in e["message"]["content"]:
                if b.get("type") == "tool_result":
                    out.append(b)
        return out

    def test_child_answers_and_its_usage_is_charged_to_the_parent(self):
        self.define("reviewer", "REVIEWER-AGENT", "tools: [read, grep]\n")
        p = self.run_script([
            {"match": ROOT, "usage": usage(100, 10), "tool_calls": [
                {"id": "c1", "name": "agent__reviewer",
                 "input": {"task": "review stats.py", "context": "it computes a mean"}}]},
            {"match": "REVIEWER-AGENT", "usage": usage(50, 5),
             "tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "stats.py"}}]},
            {"match": "REVIEWER-AGENT", "usage": usage(60, 6), "text": "stats.py divides by n-1"},
            {"match": ROOT, "usage": usage(200, 20), "text": "The reviewer found the bug."},
        ])
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed")
        self.assertEqual(r["final_text"], "The reviewer found the bug.")
        # The parent's own 2 model calls and 1 call, plus the child's 2 and 1.
        self.assertEqual(r["tokens"], 110 + 220 + 55 + 66)
        self.assertEqual(r["tool_calls"], 1 + 1)
        self.assertEqual(r["usage"]["input_tokens"], 100 + 200 + 50 + 60)
        sid = r["session_id"]
        started = self.events(sid, "subagent_started")
        completed = self.events(sid, "subagent_completed")
        self.assertEqual(len(started), 1)
        self.assertEqual(started[0]["path"], "root/reviewer")
        self.assertEqual(completed[0]["stop"], "completed")
        self.assertEqual(completed[0]["counters"]["tokens"], 55 + 66)
        child = completed[0]["child_session_id"]
        self.assertEqual(started[0]["child_session_id"], child)
        # The parent got the child's final text, usage and stop reason.
        result = self.tool_results(sid)[0]
        self.assertFalse(result.get("is_error", False))
        self.assertIn("stopped: completed", result["content"])
        self.assertIn("stats.py divides by n-1", result["content"])
        self.assertIn("1 tool call, 121 tokens, 2 model calls", result["content"])
        # The child is a session of its own, with a fresh history: the task
        # and the context, nothing of the parent's conversation.
        child_messages = [e["message"] for e in self.export(child) if e["type"] == "message"]
        first = child_messages[0]["content"][0]["text"]
        self.assertEqual(first, "review stats.py\n\nContext:\nit computes a mean")
        shown = json.loads(self.run_cli("sessions", "show", child, "--output", "json").stdout)
        self.assertEqual(shown["session"]["parent_id"], sid)
        tree = json.loads(self.run_cli("sessions", "show", sid, "--tree", "--output",
                                       "json").stdout)
        self.assertEqual(tree["id"], sid)
        self.assertEqual([c["id"] for c in tree["children"]], [child])
        self.assertEqual(tree["children"][0]["counters"]["tokens"], 55 + 66)
        self.assertEqual(tree["counters"]["tokens"], r["tokens"])
        text = self.run_cli("sessions", "show", sid, "--tree")
        self.assert_code(text, 0)
        self.assertIn("  " + child, text.stdout)

    def test_child_that_exhausts_its_share_reports_it_and_the_parent_continues(self):
        self.define("reviewer", "REVIEWER-AGENT", "max_tool_calls: 1\n")
        p = self.run_script([
            {"match": ROOT, "tool_calls": [
                {"id": "c1", "name": "agent__reviewer", "input": {"task": "read two files"}}]},
            {"match": "REVIEWER-AGENT", "tool_calls": [
                {"id": "r1", "name": "read", "input": {"file_path": "stats.py"}},
                {"id": "r2", "name": "read", "input": {"file_path": "test_stats.py"}}]},
            {"match": ROOT, "text": "The reviewer ran out of budget; I will look myself."},
        ])
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed")
        self.assertIn("look myself", r["final_text"])
        sid = r["session_id"]
        completed = self.events(sid, "subagent_completed")
        self.assertEqual(completed[0]["stop"], "budget_exhausted")
        result = self.tool_results(sid)[0]
        self.assertTrue(result.get("is_error", False))
        self.assertIn("stopped: budget_exhausted", result["content"])
        self.assertEqual(self.events(sid, "subagent_started")[0]["reserved"]["tool_calls"], 1)

    def test_a_child_cannot_spawn_beyond_the_depth_cap(self):
        self.config("[subagents]\nmax_depth = 1\n")
        self.define("helper", "HELPER-AGENT", "tools: [read, agent]\n")
        p = self.run_script([
            {"match": ROOT, "tool_calls": [
                {"id": "c1", "name": "agent__helper", "input": {"task": "help"}}]},
            {"match": "HELPER-AGENT", "tool_calls": [
                {"id": "h1", "name": "agent__helper", "input": {"task": "help more"}}]},
            {"match": "HELPER-AGENT", "text": "I could not delegate."},
            {"match": ROOT, "text": "done"},
        ])
        self.assert_code(p, 0)
        r = self.json_result(p)
        sid = r["session_id"]
        completed = self.events(sid, "subagent_completed")
        self.assertEqual(len(completed), 1)
        self.assertEqual(completed[0]["stop"], "completed")
        child = completed[0]["child_session_id"]
        refused = self.tool_results(child)[0]
        self.assertTrue(refused.get("is_error", False))
        self.assertIn("was not started: subagent depth cap reached", refused["content"])
        # Only the child was started under the root: one session below it.
        self.assertEqual(self.events(child, "subagent_started"), [])

    def test_two_children_run_side_by_side_and_their_usage_sums_at_the_root(self):
        for name in ("alpha", "beta"):
            self.define(name, name.upper() + "-AGENT", "tools: [read, grep]\nparallel: true\n")
        s = self.server([
            {"match": "agent__alpha", "usage": usage(100, 10), "tool_calls": [
                {"id": "c1", "name": "agent__alpha", "input": {"task": "look at stats.py"}},
                {"id": "c2", "name": "agent__beta", "input": {"task": "look at the tests"}}]},
            {"match": "ALPHA-AGENT", "usage": usage(30, 3), "text": "alpha done"},
            {"match": "BETA-AGENT", "usage": usage(40, 4), "text": "beta done"},
            {"match": "agent__alpha", "usage": usage(300, 30), "text": "both reported"},
        ])
        p = self.run_cli("run", "--provider", "openai", "--base-url", s.base_url + "/v1",
                         "--model", "gpt-4.1", "-C", self.ws, "--output", "json",
                         "ask both", env=self.env(OPENAI_API_KEY="sk-test"))
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["final_text"], "both reported")
        self.assertEqual(r["tokens"], 110 + 33 + 44 + 330)
        sid = r["session_id"]
        completed = sorted(self.events(sid, "subagent_completed"), key=lambda e: e["name"])
        self.assertEqual([e["counters"]["tokens"] for e in completed], [33, 44])
        results = self.tool_results(sid)
        self.assertIn("alpha done", results[0]["content"])
        self.assertIn("beta done", results[1]["content"])

    def test_cancelling_the_root_cancels_both_running_children(self):
        for name in ("alpha", "beta"):
            self.define(name, name.upper() + "-AGENT", "tools: [read, grep]\nparallel: true\n")
        s = self.server([
            {"match": "agent__alpha", "tool_calls": [
                {"id": "c1", "name": "agent__alpha", "input": {"task": "slow work"}},
                {"id": "c2", "name": "agent__beta", "input": {"task": "slow work"}}]},
            {"match": "ALPHA-AGENT", "delay_ms": 60000, "text": "never"},
            {"match": "BETA-AGENT", "delay_ms": 60000, "text": "never"},
        ])
        proc = self.spawn("run", "--provider", "openai", "--base-url", s.base_url + "/v1",
                          "--model", "gpt-4.1", "-C", self.ws, "--output", "stream-json",
                          "ask both", env=self.env(OPENAI_API_KEY="sk-test"))
        # Both children have asked their model (the server holds both
        # requests): the root is interrupted while they run.
        deadline = time.monotonic() + TIMEOUT
        while len(s.requests()) < 3:
            self.assertLess(time.monotonic(), deadline, "the children never called the model")
            self.assertIsNone(proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
            time.sleep(0.05)
        interrupt(proc)
        out, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 130, err)
        events = json_lines(out)
        ends = [e for e in events if e["type"] == "turn_end"]
        self.assertEqual([e["stop"] for e in ends], ["aborted"])
        sid = ends[0]["session_id"]
        completed = self.events(sid, "subagent_completed")
        self.assertEqual(sorted(e["stop"] for e in completed), ["aborted", "aborted"])
        tree = json.loads(self.run_cli("sessions", "show", sid, "--tree", "--output",
                                       "json").stdout)
        self.assertEqual([c["status"] for c in tree["children"]], ["aborted", "aborted"])


if __name__ == "__main__":
    unittest.main()
