"""The clients against a real `agentloop serve` (with a bearer token) whose
agent answers from the fake model: turns, approvals with edited arguments
and scope, questions, typed errors, the multiplexed stream, a turn's
stream resumed through a proxy that cuts it, and the example."""

import asyncio
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import agentloop_client as al  # noqa: E402
from live_server import LIVE, CuttingProxy, LiveServer  # noqa: E402

TIMEOUT = 120  # only a hung process reaches it


def write(tag, path, content):
    return {"match": tag, "tool_calls": [{"id": "c-" + tag, "name": "write",
                                          "input": {"file_path": path, "content": content}}]}


SCRIPT = {"responses": [
    {"match": "tag-plain", "text": "hello from the model"},
    {"match": "tag-async", "text": "hello from asyncio"},
    write("tag-approve", "served.txt", "from the sdk\n"),
    {"match": "tag-approve", "text": "wrote served.txt"},
    write("tag-edit", "asked.txt", "asked\n"),
    {"match": "tag-edit", "text": "wrote it"},
    write("tag-aedit", "aasked.txt", "asked\n"),
    {"match": "tag-aedit", "text": "wrote it"},
    {"match": "tag-ask", "tool_calls": [{"id": "c-ask", "name": "ask_user",
                                          "input": {"question": "Which file?", "options": ["a", "b"]}}]},
    {"match": "tag-ask", "text": "you said b"},
    {"match": "tag-drop", "text": "reading first",
     "tool_calls": [{"id": "c-read", "name": "read", "input": {"file_path": "notes.txt"}}]},
    {"match": "tag-drop", "text": "notes.txt has two lines"},
    {"match": "tag-adrop", "text": "reading first",
     "tool_calls": [{"id": "c-read", "name": "read", "input": {"file_path": "notes.txt"}}]},
    {"match": "tag-adrop", "text": "notes.txt has two lines"},
    {"match": "tag-multi-a", "text": "first session"},
    {"match": "tag-multi-b", "text": "second session"},
    write("tag-example", "example.txt", "from the example\n"),
    {"match": "tag-example", "text": "example done"},
    write("create hello.txt", "hello.txt", "hello\n"),
    {"match": "create hello.txt", "text": "created hello.txt"},
    write("tag-shape", "shape.txt", "shape\n"),
    {"match": "tag-shape", "text": "shaped"},
]}


@unittest.skipUnless(LIVE, "AGENTLOOP_BIN and AGENTLOOP_FAKE_SERVER are not set")
class LiveTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = LiveServer(SCRIPT)
        cls.c = al.Client(cls.srv.base_url, token=cls.srv.token)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def read_ws(self, name):
        with open(os.path.join(self.srv.ws, name)) as f:
            return f.read()

    def assert_gap_free(self, seqs):
        self.assertEqual(len(set(seqs)), len(seqs), "repeated: %s" % seqs)
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))), "gap: %s" % seqs)

    def test_a_turn_streams_to_its_final_turn_end(self):
        s = self.c.create_session(agent="writer", title="plain")
        turn = self.c.stream_turn(s["id"], "say hello tag-plain")
        events = list(turn)
        self.assertEqual(events[0]["type"], "turn_begin")
        self.assertEqual(events[-1]["type"], "turn_end")
        self.assertEqual(turn.result["final_text"], "hello from the model")
        seqs = [e["seq"] for e in events if e.get("seq", 0) > 0]
        self.assert_gap_free(seqs)
        self.assertEqual(self.c.wait_for_turn(s["id"], turn.turn_id)["result"]["stop"], "completed")
        self.assertEqual([e["seq"] for e in self.c.list_events(s["id"], after=0)["items"]], seqs)

    def test_asyncio_turn(self):
        async def go():
            ac = al.AsyncClient(self.srv.base_url, token=self.srv.token)
            s = await ac.create_session(agent="writer")
            turn = ac.stream_turn(s["id"], "say hello tag-async")
            events = [e async for e in turn]
            waited = await ac.wait_for_turn(s["id"], turn.turn_id)
            return turn, events, waited

        turn, events, waited = asyncio.run(go())
        self.assertEqual(turn.result["final_text"], "hello from asyncio")
        self.assertEqual(waited["result"]["stop"], "completed")
        self.assert_gap_free([e["seq"] for e in events if e.get("seq", 0) > 0])

    def test_without_the_token_a_typed_401(self):
        with self.assertRaises(al.AuthenticationError) as cm:
            al.Client(self.srv.base_url, token=None).list_sessions()
        self.assertEqual(cm.exception.code, "unauthorized")

    def test_404_and_409_are_typed(self):
        with self.assertRaises(al.NotFoundError) as cm:
            self.c.get_session("no-such-session")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        s = self.c.create_session(agent="writer")
        t = self.c.start_turn(s["id"], "write it tag-approve")
        self.assertEqual(self.c.wait_for_turn(s["id"], t["id"])["result"]["stop"], "pending_approval")
        with self.assertRaises(al.ConflictError) as cm:
            self.c.start_turn(s["id"], "again")
        self.assertEqual(cm.exception.code, "session_paused")
        # The streamed form is refused before any event (with the code
        # failed_precondition, in an error frame).
        with self.assertRaises(al.ConflictError):
            list(self.c.stream_turn(s["id"], "again"))
        item = self.c.list_pending(s["id"])["items"][0]
        self.assertIn("+from the sdk", self.c.get_approval_diff(item["id"])["diff"])
        self.assertEqual(self.c.approve(item["id"])["status"], "resumed")
        self.assertEqual(self.c.wait_for_turn(s["id"], t["id"])["result"]["stop"], "completed")
        self.assertEqual(self.c.approve(item["id"])["status"], "already_resolved")
        with self.assertRaises(al.ConflictError) as cm:
            self.c.deny(item["id"], "no")
        self.assertEqual(cm.exception.code, "approval_already_resolved")
        self.assertEqual(self.read_ws("served.txt"), "from the sdk\n")

    def test_edited_arguments_and_session_scope(self):
        s = self.c.create_session(agent="writer")
        turn = self.c.stream_turn(s["id"], "write asked.txt tag-edit")
        decided = 0
        for e in turn:
            if e["type"] != "turn_end" or e["stop"] != "pending_approval":
                continue
            for item in e["pending"]:
                self.assertIn(item["id"], [a["id"] for a in self.c.list_approvals()["items"]])
                r = self.c.decide_approval(item["id"], "approve", scope="session",
                                           edited_args={"file_path": "edited.txt", "content": "edited\n"})
                self.assertEqual(r["status"], "resumed")
                decided += 1
        self.assertEqual(decided, 1)
        self.assertEqual(turn.result["stop"], "completed")
        self.assertEqual(self.read_ws("edited.txt"), "edited\n")
        self.assertFalse(os.path.exists(os.path.join(self.srv.ws, "asked.txt")))

    def test_asyncio_approval(self):
        async def go():
            ac = al.AsyncClient(self.srv.base_url, token=self.srv.token)
            s = await ac.create_session(agent="writer")
            turn = ac.stream_turn(s["id"], "write aasked.txt tag-aedit")
            async for e in turn:
                if e["type"] == "turn_end" and e["stop"] == "pending_approval":
                    for item in e["pending"]:
                        await ac.decide_approval(item["id"], "approve",
                                                 edited_args={"file_path": "aedited.txt", "content": "a\n"})
            return turn

        turn = asyncio.run(go())
        self.assertEqual(turn.result["stop"], "completed")
        self.assertEqual(self.read_ws("aedited.txt"), "a\n")

    def test_a_question_is_answered(self):
        s = self.c.create_session(agent="writer")
        turn = self.c.stream_turn(s["id"], "ask me tag-ask")
        for e in turn:
            if e["type"] == "turn_end" and e["stop"] == "pending_question":
                q = [i for i in self.c.list_questions()["items"] if i["session_id"] == s["id"]][0]
                self.assertEqual(q["arguments"]["question"], "Which file?")
                self.assertEqual(self.c.answer_question(q["id"], "b")["status"], "resumed")
        self.assertEqual(turn.result["final_text"], "you said b")

    def check_cut(self, events, turn, proxy, sid):
        self.assertEqual(proxy.cuts, 1)
        self.assertGreaterEqual(turn.stream.reconnects, 1)
        self.assertEqual(turn.result["stop"], "completed")
        seqs = [e["seq"] for e in events if e.get("seq", 0) > 0]
        self.assert_gap_free(seqs)
        self.assertEqual([e["seq"] for e in self.c.list_events(sid, after=0)["items"]], seqs)

    def test_a_cut_stream_resumes_with_no_event_lost_or_repeated(self):
        proxy = CuttingProxy(self.srv.base_url, 700)
        try:
            c = al.Client(proxy.url, token=self.srv.token, stream=al.StreamOptions(base_delay_ms=10))
            s = c.create_session(agent="writer")
            turn = c.stream_turn(s["id"], "read notes tag-drop")
            self.check_cut(list(turn), turn, proxy, s["id"])
        finally:
            proxy.close()

    def test_asyncio_cut_stream_resumes(self):
        proxy = CuttingProxy(self.srv.base_url, 700)

        async def go():
            ac = al.AsyncClient(proxy.url, token=self.srv.token, stream=al.StreamOptions(base_delay_ms=10))
            s = await ac.create_session(agent="writer")
            turn = ac.stream_turn(s["id"], "read notes tag-adrop")
            return s, turn, [e async for e in turn]

        try:
            s, turn, events = asyncio.run(go())
            self.check_cut(events, turn, proxy, s["id"])
        finally:
            proxy.close()

    def test_the_multiplexed_stream(self):
        a = self.c.create_session(agent="writer")["id"]
        b = self.c.create_session(agent="writer")["id"]
        ends = set()

        def stop(e):
            if e["type"] == "turn_end":
                ends.add(e["session_id"])
            return len(ends) == 2

        stream = self.c.stream_sessions([a, b], stop_after=stop)
        ta = self.c.start_turn(a, "tag-multi-a")["id"]
        tb = self.c.start_turn(b, "tag-multi-b")["id"]
        events = list(stream)
        finals = sorted((e["session_id"], e["turn_id"], e["final_text"]) for e in events if e["type"] == "turn_end")
        self.assertEqual(finals, sorted([(a, ta, "first session"), (b, tb, "second session")]))
        for sid in (a, b):
            seqs = [e["seq"] for e in events if e["session_id"] == sid and e.get("seq", 0) > 0]
            self.assertEqual(seqs[0], 1)
            self.assert_gap_free(seqs)

    def example(self, *args):
        env = dict(os.environ, AGENTLOOP_TOKEN=self.srv.token)
        return subprocess.run([sys.executable, "-B", os.path.join(HERE, "..", "examples", "approve.py")]
                              + list(args), capture_output=True, text=True, env=env, timeout=TIMEOUT)

    def test_the_example_approves_and_exits_0(self):
        p = self.example(self.srv.base_url, "writer", "write example.txt tag-example")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("approving write", p.stdout)
        self.assertIn("+from the example", p.stdout)
        self.assertIn("ended: completed", p.stdout)
        self.assertEqual(self.read_ws("example.txt"), "from the example\n")

    def test_the_example_exits_1_when_the_turn_does_not_complete(self):
        p = self.example(self.srv.base_url, "no-such-agent", "hello")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)

    def test_the_python_example_of_docs_clients_md_runs_as_shown(self):
        with open(os.path.join(HERE, "..", "..", "..", "docs", "clients.md"), encoding="utf-8") as f:
            doc = f.read()
        block = re.search(r"## Python\n\n```python\n(.*?)```", doc, re.S).group(1)
        self.assertLessEqual(len(block.rstrip().splitlines()), 12)
        # The served agent of this test is `writer`.
        src = block.replace('agent="default"', 'agent="writer"')
        env = dict(os.environ, AGENTLOOP_URL=self.srv.base_url, AGENTLOOP_TOKEN=self.srv.token,
                   PYTHONPATH=os.path.join(HERE, ".."))
        p = subprocess.run([sys.executable, "-B", "-c", src], capture_output=True, text=True, env=env,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^write ")
        self.assertRegex(p.stdout, r"completed created hello\.txt\s*$")
        self.assertEqual(self.read_ws("hello.txt"), "hello\n")

    def test_every_field_of_the_answers_is_declared(self):
        from agentloop_client import types as T

        def declared(td, value):
            keys = set(td.__required_keys__) | set(td.__optional_keys__)
            self.assertEqual(set(value) - keys, set(), td.__name__)

        s = self.c.create_session(agent="writer", title="shape")
        declared(T.Session, s)
        t = self.c.start_turn(s["id"], "tag-shape")
        declared(T.TurnAccepted, t)
        w = self.c.wait_for_turn(s["id"], t["id"])
        declared(T.Turn, w)
        declared(T.TurnResult, w["result"])
        declared(T.Session, self.c.get_session(s["id"]))
        item = self.c.list_pending(s["id"])["items"][0]
        declared(T.ApprovalItem, item)
        declared(T.ApprovalDiff, self.c.get_approval_diff(item["id"]))
        for a in self.c.list_agents()["items"]:
            declared(T.Agent, a)
        declared(T.DecisionResult, self.c.approve(item["id"]))
        self.c.wait_for_turn(s["id"], t["id"])
        declared(T.ApprovalItem, self.c.get_approval(item["id"]))
        for e in self.c.list_events(s["id"], after=0)["items"]:
            declared(T.EVENT_TYPES[e["type"]], e)

    def test_iter_sessions_follows_every_page(self):
        made = [self.c.create_session(agent="writer", title="page %d" % i)["id"] for i in range(3)]
        seen = [s["id"] for s in self.c.iter_sessions(agent="writer", limit=1)]
        self.assertTrue(set(made) <= set(seen))
        self.assertEqual(len(set(seen)), len(seen))

        async def go():
            ac = al.AsyncClient(self.srv.base_url, token=self.srv.token)
            return [s["id"] async for s in ac.iter_sessions(agent="writer", limit=1)]

        self.assertTrue(set(made) <= set(asyncio.run(go())))


if __name__ == "__main__":
    unittest.main()
