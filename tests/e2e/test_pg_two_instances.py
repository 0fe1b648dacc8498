"""End-to-end: two `agentloop serve` instances on one PostgreSQL store
(docs/storage.md, "Several instances"): a turn paused on instance A is
decided on instance B and continues exactly once; event streams on both
instances see the same gap-free sequence; an instance killed mid-turn is
taken over by the other once its lease expires, leaving a valid
transcript."""

import json
import os
import select
import signal
import unittest
import urllib.error
import urllib.request

from e2e_util import TIMEOUT
from pg_cluster import EventStream, PgServeCase, tool_ids

# The lease TTL of both instances: a killed instance's session is taken
# over this long after its last heartbeat.
LEASE_TTL_MS = 2000


class TwoInstancesTest(PgServeCase):
    serve_env = {"AGENTLOOP_STORE_LEASE_TTL_MS": str(LEASE_TTL_MS)}

    def test_a_pause_on_one_instance_is_decided_on_the_other_and_continues_once(self):
        model = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "served.txt",
                                       "content": "from the server\n"}}]},
            {"text": "wrote served.txt"},
        ]})
        _, _, a, b, sid = self.two_instances(model)
        status, t = self.call(a, "POST", "/v1/sessions/%s/turns" % sid,
                              {"input": "write served.txt"})
        self.assertEqual(status, 202, t)
        status, w = self.call(a, "GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (sid, t["id"]))
        self.assertEqual(w["result"]["stop"], "pending_approval", w)
        paused_at = self.stored_events(a, sid)[-1]["seq"]

        # Watchers on both instances, from the pause on.
        on_a = EventStream(a, sid, paused_at)
        on_b = EventStream(b, sid, paused_at)
        status, pending = self.call(b, "GET", "/v1/sessions/%s/pending" % sid)
        self.assertEqual(len(pending["items"]), 1, pending)
        status, d = self.call(b, "POST", "/v1/approvals/%s/decision"
                              % pending["items"][0]["id"], {"decision": "approve"})
        self.assertEqual(status, 200, d)
        self.assertEqual(d["status"], "resumed", d)

        seen_a = on_a.wait(self)
        seen_b = on_b.wait(self)
        seqs = [e["seq"] for e in seen_a]
        # Gap-free from the pause to the continued turn's end, the same on both.
        self.assertEqual(seqs, list(range(paused_at + 1, paused_at + 1 + len(seqs))))
        self.assertEqual([(e["seq"], e["type"]) for e in seen_b],
                         [(e["seq"], e["type"]) for e in seen_a])
        self.assertEqual(seen_a[-1]["type"], "turn_end")
        self.assertEqual(seen_a[-1]["stop"], "completed", seen_a[-1])
        self.assertEqual(seen_a[-1]["turn_id"], t["id"])

        # Continued exactly once: one write, one model request after the
        # pause, one decision and one end of the continued turn in the log.
        with open(os.path.join(self.ws, "served.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "from the server\n")
        self.assertEqual(len(model.requests()), 2)
        stored = self.stored_events(b, sid)
        after = [e["type"] for e in stored if e["seq"] > paused_at]
        self.assertEqual(after.count("decision"), 1)
        self.assertEqual(after.count("tool_call_begin"), 1)
        self.assertEqual(after.count("turn_end"), 1)
        # Nothing is left for another instance to wake up for.
        self.assertEqual(self.count("SELECT COUNT(*) FROM session_wakeups"), 0)
        self.assertEqual(self.count("SELECT COUNT(*) FROM checkpoints WHERE state <> 1"), 0)

    def test_a_message_posted_to_the_other_instance_runs_once_there(self):
        model = self.server({"responses": [
            {"text": "first, on A"},
            {"text": "second, on B"},
        ]})
        _, _, a, b, sid = self.two_instances(model)
        status, t1 = self.call(a, "POST", "/v1/sessions/%s/turns" % sid, {"input": "one"})
        self.assertEqual(status, 202, t1)
        status, w = self.call(a, "GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (sid, t1["id"]))
        self.assertEqual(w["result"]["stop"], "completed", w)
        # The next message goes to B, which never ran the session: B takes
        # the lease A released and runs it, once.
        watcher = EventStream(a, sid, self.stored_events(a, sid)[-1]["seq"])
        status, t2 = self.call(b, "POST", "/v1/sessions/%s/turns" % sid, {"input": "two"})
        self.assertEqual(status, 202, t2)
        status, w = self.call(b, "GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (sid, t2["id"]))
        self.assertEqual(w["result"]["stop"], "completed", w)
        self.assertEqual(w["result"]["final_text"], "second, on B")
        seen = watcher.wait(self)  # A's watcher sees B's turn, tailed from the log
        self.assertEqual(seen[-1]["turn_id"], t2["id"])
        stored = self.stored_events(a, sid)
        self.assertEqual([e["turn_id"] for e in stored if e["type"] == "turn_end"],
                         [t1["id"], t2["id"]])
        self.assertEqual(len(model.requests()), 2)
        self.wait_for("B's release of the lease", lambda: self.count(
            "SELECT COUNT(*) FROM sessions WHERE lease_token IS NOT NULL") == 0)

    def test_an_instance_killed_mid_turn_is_taken_over_by_the_other(self):
        model = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "half.txt", "content": "half\n"}}]},
            # Instance A is killed while it waits for this answer.
            {"text": "never delivered", "delay_ms": 60000},
        ]})
        proc_a, proc_b, a, b, sid = self.two_instances(model, allow=("write",))
        status, t = self.call(a, "POST", "/v1/sessions/%s/turns" % sid,
                              {"input": "write half.txt"})
        self.assertEqual(status, 202, t)
        watcher = EventStream(b, sid, 0)
        # The write ran and the turn's second model call is under way.
        self.wait_for("the second model request", lambda: len(model.requests()) == 2)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "half.txt")))
        proc_a.send_signal(signal.SIGKILL)
        proc_a.wait()

        seen = watcher.wait(self)
        end = seen[-1]
        self.assertEqual(end["type"], "turn_end")
        self.assertEqual(end["turn_id"], t["id"])
        self.assertEqual(end["stop"], "failed")
        self.assertIn("stopped before the turn ended", end["reason"])
        stored = self.stored_events(b, sid)
        self.assertEqual([e["seq"] for e in seen], [e["seq"] for e in stored])
        # A valid transcript: every tool call has its result, in order.
        uses, results = tool_ids(stored)
        self.assertEqual(uses, ["c1"])
        self.assertEqual(results, uses)
        # B holds no lease on it any more; the session can be used again.
        self.wait_for("B's release of the lease", lambda: self.count(
            "SELECT COUNT(*) FROM sessions WHERE lease_token IS NOT NULL") == 0)
        status, got = self.call(b, "GET", "/v1/sessions/%s" % sid)
        self.assertEqual(status, 200, got)

    def test_an_instance_that_lost_its_lease_stops_its_turn_without_running_a_tool(self):
        model = self.server({"responses": [
            # Answered only once instance A has been taken over while stopped.
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "late.txt", "content": "late\n"}}],
             "delay_ms": 6000},
        ]})
        proc_a, _, a, b, sid = self.two_instances(model, allow=("write",))
        status, t = self.call(a, "POST", "/v1/sessions/%s/turns" % sid,
                              {"input": "write late.txt"})
        self.assertEqual(status, 202, t)
        self.wait_for("the model request", lambda: len(model.requests()) == 1)
        # A stops (as if paused by the kernel) past its lease's TTL: B takes
        # the session over and ends the turn.
        proc_a.send_signal(signal.SIGSTOP)
        try:
            self.wait_for("B's takeover", lambda: any(
                e["type"] == "turn_end" for e in self.stored_events(b, sid)))
        finally:
            proc_a.send_signal(signal.SIGCONT)
        taken = self.stored_events(b, sid)
        # A wakes up, gets the model's tool call, and cannot commit its
        # tool_call_begin: the turn stops there, loudly, and the tool never runs.
        stderr = []

        def lease_lost():
            ready, _, _ = select.select([proc_a.stderr], [], [], 0.05)
            if ready:
                stderr.append(proc_a.stderr.readline())
            return "lost its lease" in "".join(stderr)
        self.wait_for("A's report of the lost lease", lease_lost)
        self.assertIn("session %s" % sid, "".join(stderr))
        self.assertFalse(os.path.exists(os.path.join(self.ws, "late.txt")))
        # Not one row of A's after the takeover.
        self.assertEqual(self.stored_events(b, sid), taken)
        self.assertEqual(proc_a.poll(), None)  # A keeps serving

    def test_while_the_database_is_down_requests_get_503_with_retry_after(self):
        self.write_agent(self.server({"responses": [{"text": "hello"}]}).base_url)
        _, a = self.serve_pg()
        status, s = self.call(a, "POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        self.cluster.stop_server()
        try:
            req = urllib.request.Request("%s/v1/sessions/%s" % (a, s["id"]))
            with self.assertRaises(urllib.error.HTTPError) as down:
                urllib.request.urlopen(req, timeout=TIMEOUT)
            self.assertEqual(down.exception.code, 503)
            self.assertEqual(down.exception.headers.get("Retry-After"), "1")
            body = json.loads(down.exception.read())
            self.assertEqual(body["code"], "unavailable", body)
        finally:
            self.cluster.start_again()
        # Back: the next request reconnects.
        status, got = self.call(a, "GET", "/v1/sessions/%s" % s["id"])
        self.assertEqual(status, 200, got)


if __name__ == "__main__":
    unittest.main()
