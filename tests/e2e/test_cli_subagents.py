"""End-to-end: subagents (docs/subagents.md) with the scripted provider and the
fake model server: a child that answers, a child that runs out of its share,
the depth cap, two children side by side whose usage sums at the root, a
child's durable pause that reaches the root and is resolved from another
process, and cancelling the root while two children run."""

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
    # Cache figures reported (none cached): every call's input is charged as
    # reported, so the sums below are exact.
    return {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": 0}


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

    def first_user_text(self, sid):
        for e in self.export(sid):
            if e["type"] == "message" and e["message"]["role"] == "user":
                return "".join(b.get("text", "") for b in e["message"]["content"])
        return ""

    def workspace_definition(self):
        d = os.path.join(self.ws, ".agentloop", "agents")
        os.makedirs(d)
        with open(os.path.join(d, "scout.md"), "w", encoding="utf-8") as f:
            f.write(definition("scout", "SCOUT-AGENT", "tools: [read]\n"))

    def test_an_untrusted_workspaces_definition_is_data_not_the_childs_system_prompt(self):
        self.workspace_definition()
        # The child's system prompt is the caller's (the built-in one), not
        # the definition's body: otherwise no item matches its request.
        p = self.run_script([
            {"match": "agent__scout",
             "tool_calls": [{"id": "c1", "name": "agent__scout", "input": {"task": "look"}}]},
            {"match": ROOT, "text": "looked"},
            {"match": "agent__scout", "text": "done"},
        ])
        self.assert_code(p, 0)
        self.assertEqual(p.stderr.count("the workspace is not trusted"), 1, p.stderr)
        self.assertIn("scout", p.stderr)
        r = self.json_result(p)
        child = self.events(r["session_id"], "subagent_started")[0]["child_session_id"]
        text = self.first_user_text(child)
        self.assertIn("<untrusted-definition>", text)
        self.assertIn("You are SCOUT-AGENT", text)
        self.assertTrue(text.endswith("look"), text)

    def test_a_trusted_workspaces_definition_is_the_childs_system_prompt(self):
        self.workspace_definition()
        self.assert_code(self.run_cli("trust", self.ws), 0)
        p = self.run_script([
            {"match": "agent__scout",
             "tool_calls": [{"id": "c1", "name": "agent__scout", "input": {"task": "look"}}]},
            {"match": "SCOUT-AGENT", "text": "looked"},
            {"match": "agent__scout", "text": "done"},
        ])
        self.assert_code(p, 0)
        self.assertNotIn("not trusted", p.stderr)
        r = self.json_result(p)
        child = self.events(r["session_id"], "subagent_started")[0]["child_session_id"]
        self.assertNotIn("untrusted-definition", self.first_user_text(child))

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
        # The child belongs under its parent: `sessions list` shows the root
        # only, --all shows the child too.
        listed = json.loads(self.run_cli("sessions", "list", "-C", self.ws, "--output",
                                         "json").stdout)
        self.assertEqual([x["id"] for x in listed], [sid])
        every = json.loads(self.run_cli("sessions", "list", "--all", "--output", "json").stdout)
        self.assertEqual(sorted(x["id"] for x in every), sorted([sid, child]))

    def test_child_that_exhausts_its_share_reports_it_and_the_parent_continues(self):
        self.define("reviewer", "REVIEWER-AGENT", "max_tool_calls: 1\n")
        p = self.run_script([
            {"match": ROOT, "tool_calls": [
                {"id": "c1", "name": "agent__reviewer", "input": {"task": "read two files"}}]},
            {"match": "REVIEWER-AGENT", "tool_calls": [
                {"id": "r1", "name": "read", "input": {"file_path": "stats.py"}},
                {"id": "r2", "name": "read", "input": {"file_path": "test_stats.py"}}]},
            {"match": ROOT, "text": "The reviewer ran out of budget; I will look myself."},
        ], "--allow", "agent__reviewer")
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
        ], "--allow", "agent__helper")
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

    def test_a_child_that_can_change_files_is_asked_for_like_a_mutating_tool(self):
        # The reviewer has every tool of its caller: calling it can change
        # the workspace, so by default the call itself waits for approval.
        self.define("reviewer", "REVIEWER-AGENT")
        p = self.run_script([
            {"match": ROOT, "tool_calls": [
                {"id": "c1", "name": "agent__reviewer", "input": {"task": "fix it"}}]},
            {"match": "REVIEWER-AGENT", "text": "fixed"},
            {"match": ROOT, "text": "done"},
        ])
        self.assert_code(p, 5)
        r = self.json_result(p)
        self.assertEqual([(i["tool"], i["path"]) for i in r["pending"]], [("agent__reviewer", "")])
        self.assertEqual(self.events(r["session_id"], "subagent_started"), [])

    def test_a_childs_child_never_gets_a_tool_its_caller_lacks(self):
        # outer may only read and delegate; inner's definition names no tools
        # (every tool of its caller): it must not get write.
        self.define("outer", "OUTER-AGENT", "tools: [read, agent]\n")
        self.define("inner", "INNER-AGENT")
        p = self.run_script([
            {"match": ROOT, "tool_calls": [
                {"id": "c1", "name": "agent__outer", "input": {"task": "delegate"}}]},
            {"match": "OUTER-AGENT", "tool_calls": [
                {"id": "o1", "name": "agent__inner", "input": {"task": "write notes"}}]},
            {"match": "INNER-AGENT", "tool_calls": [
                {"id": "i1", "name": "write",
                 "input": {"file_path": "notes.txt", "content": "x\n"}}]},
            {"match": "INNER-AGENT", "text": "could not write"},
            {"match": "OUTER-AGENT", "text": "inner reported"},
            {"match": ROOT, "text": "done"},
        ], "--allow", "agent__*", "--allow", "write")
        self.assert_code(p, 0)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "notes.txt")))

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

    def test_started_is_streamed_and_stored_while_the_child_runs(self):
        self.define("reviewer", "REVIEWER-AGENT", "tools: [read, grep]\n")
        s = self.server([
            {"match": "agent__reviewer", "tool_calls": [
                {"id": "c1", "name": "agent__reviewer", "input": {"task": "slow review"}}]},
            {"match": "REVIEWER-AGENT", "delay_ms": 60000, "text": "never"},
        ])
        proc = self.spawn("run", "--provider", "openai", "--base-url", s.base_url + "/v1",
                          "--model", "gpt-4.1", "-C", self.ws, "--output", "stream-json",
                          "ask the reviewer", env=self.env(OPENAI_API_KEY="sk-test"))
        # The server holds the child's answer: the child runs until the root
        # is interrupted, so whatever the stream shows before that was
        # reported while the child ran.
        seen = []
        while not any(e["type"] == "subagent_started" for e in seen):
            line = proc.stdout.readline()
            if not line:
                self.fail("the run ended before reporting its child: " + proc.stderr.read())
            seen.append(json.loads(line))
        self.assertEqual([e for e in seen if e["type"] in ("subagent_completed",
                                                           "tool_call_end")], [])
        started = seen[-1]
        self.assertEqual((started["tool_use_id"], started["path"]), ("c1", "root/reviewer"))
        child = started["child_session_id"]
        sid = started["session_id"]
        # It is in the stored log too (committed as the child started), and
        # the child session exists under the root.
        stored = self.events(sid, "subagent_started")
        self.assertEqual([e["child_session_id"] for e in stored], [child])
        self.assertEqual(self.events(sid, "subagent_completed"), [])
        shown = json.loads(self.run_cli("sessions", "show", child, "--output", "json").stdout)
        self.assertEqual(shown["session"]["parent_id"], sid)
        interrupt(proc)
        out, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 130, err)
        events = seen + json_lines(out)
        kinds = [e["type"] for e in events if e["type"] in (
            "subagent_started", "subagent_completed", "tool_call_end")]
        self.assertEqual(kinds, ["subagent_started", "subagent_completed", "tool_call_end"])
        self.assertEqual([e["stop"] for e in events if e["type"] == "subagent_completed"],
                         ["aborted"])
        # One gap-free log: what was streamed live keeps its number.
        persisted = [e for e in self.export(sid)]
        self.assertEqual([e["seq"] for e in persisted], list(range(1, len(persisted) + 1)))
        self.assertEqual([e["seq"] for e in persisted if e["type"] == "subagent_started"],
                         [started["seq"]])

    def pause_in_child(self):
        """A root run whose child asks to write notes.txt: the root exits 5."""
        self.define("writer", "WRITER-AGENT", "tools: [read, write]\n")
        script = self.write("script.json", {"responses": [
            {"match": ROOT, "usage": usage(100, 10), "tool_calls": [
                {"id": "c1", "name": "agent__writer", "input": {"task": "write notes.txt"}}]},
            {"match": "WRITER-AGENT", "usage": usage(50, 5), "tool_calls": [
                {"id": "w1", "name": "write",
                 "input": {"file_path": "notes.txt", "content": "hello\n"}}]},
            {"match": "WRITER-AGENT", "usage": usage(60, 6), "text": "wrote notes.txt"},
            {"match": "WRITER-AGENT", "usage": usage(60, 6), "text": "I was not allowed"},
            {"match": ROOT, "usage": usage(200, 20), "text": "The writer is done."},
        ]})
        p = self.run_cli("run", "--provider", "script", "--script", script, "-C", self.ws,
                         "--allow", "agent__writer", "--output", "json", "delegate the notes")
        self.assert_code(p, 5)
        r = self.json_result(p)
        self.assertEqual(r["status"], "pending_approval")
        sid = r["session_id"]
        # The person sees the child's own item, tagged with its path of agents.
        self.assertEqual(len(r["pending"]), 1)
        item = r["pending"][0]
        self.assertEqual(item["tool"], "write")
        self.assertEqual(item["path"], "root/writer")
        self.assertTrue(item["id"].startswith("apr_"), item)
        started = self.events(sid, "subagent_started")
        self.assertEqual(len(started), 1)
        child = started[0]["child_session_id"]
        # One inbox: every session's list and the root's list show it once.
        listed = json.loads(self.run_cli("pending", "--output", "json").stdout)
        self.assertEqual([(x["id"], x["path"], x["session_id"], x["root_session_id"])
                          for x in listed], [(item["id"], "root/writer", child, sid)])
        at_root = json.loads(self.run_cli("pending", "--session", sid, "--output",
                                          "json").stdout)
        self.assertEqual([x["id"] for x in at_root], [item["id"]])
        text = self.run_cli("pending", "--session", sid)
        self.assertIn("root/writer", text.stdout)
        self.assertIn("agentloop approve " + item["id"], text.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "notes.txt")))
        return script, sid, child, item

    def test_child_pause_reaches_the_root_and_approve_resumes_child_then_parent(self):
        script, sid, child, item = self.pause_in_child()
        a = self.run_cli("approve", item["id"], "--provider", "script", "--script", script,
                         "--output", "json")
        self.assert_code(a, 0)
        r = self.json_result(a)
        # The root's turn continued to its end, after the child's.
        self.assertEqual(r["session_id"], sid)
        self.assertEqual(r["status"], "completed")
        self.assertEqual(r["final_text"], "The writer is done.")
        self.assertEqual(self.read_ws("notes.txt"), "hello\n")
        completed = self.events(sid, "subagent_completed")
        self.assertEqual([(e["stop"], e["child_session_id"]) for e in completed],
                         [("completed", child)])
        self.assertEqual(len(self.events(sid, "subagent_started")), 1)
        result = self.tool_results(sid)[0]
        self.assertFalse(result.get("is_error", False))
        self.assertIn("wrote notes.txt", result["content"])
        # The whole tree's spending reached the root once: its two model
        # calls and the child's two, one tool call each.
        self.assertEqual(r["tokens"], 110 + 220 + 55 + 66)
        self.assertEqual(r["tool_calls"], 2)
        # The person's decision is in the child's log; the root logged that
        # its waiting call was decided by the subagent's items.
        decided = [e for e in self.events(child, "decision") if e["by"] == "cli"]
        self.assertEqual([e["pending_id"] for e in decided], [item["id"]])
        woken = [e for e in self.events(sid, "decision") if e["by"] == "subagent"]
        self.assertEqual(len(woken), 1)
        self.assertTrue(woken[0]["pending_id"].startswith("sub_"), woken)
        self.assertEqual(json.loads(self.run_cli("pending", "--output", "json").stdout), [])
        tree = json.loads(self.run_cli("sessions", "show", sid, "--tree", "--output",
                                       "json").stdout)
        self.assertEqual([(c["id"], c["status"]) for c in tree["children"]],
                         [(child, "completed")])

    def test_child_pause_denied_the_child_stops_denied_and_the_parent_continues(self):
        script, sid, child, item = self.pause_in_child()
        d = self.run_cli("deny", item["id"], "--reason", "not now", "--provider", "script",
                         "--script", script, "--output", "json")
        self.assert_code(d, 0)
        r = self.json_result(d)
        self.assertEqual(r["session_id"], sid)
        self.assertEqual(r["status"], "completed")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "notes.txt")))
        completed = self.events(sid, "subagent_completed")
        self.assertEqual([e["stop"] for e in completed], ["denied"])
        result = self.tool_results(sid)[0]
        self.assertTrue(result.get("is_error", False))
        self.assertIn("stopped: denied", result["content"])
        self.assertEqual(json.loads(self.run_cli("pending", "--output", "json").stdout), [])

    def test_the_waiting_call_itself_cannot_be_resolved_by_hand(self):
        script, sid, child, item = self.pause_in_child()
        waiting = [e for e in self.events(sid, "pending")][0]["items"][0]
        self.assertEqual(waiting["kind"], "subagent")
        self.assertEqual(waiting["child_session_id"], child)
        a = self.run_cli("approve", waiting["id"], "--provider", "script", "--script", script)
        self.assertNotEqual(a.returncode, 0)
        self.assertIn("waits for the subagent session " + child, a.stderr)
        # The refusal changed nothing: the child's own item still resolves.
        a = self.run_cli("approve", item["id"], "--provider", "script", "--script", script,
                         "--output", "json")
        self.assert_code(a, 0)


if __name__ == "__main__":
    unittest.main()
