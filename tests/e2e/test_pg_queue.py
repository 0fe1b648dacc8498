"""End-to-end: inputs queued with `on_busy: "enqueue"` on two `agentloop
serve` instances sharing one PostgreSQL store (docs/server.md, "Queued
inputs"): an input queued on instance B while the turn runs on A runs
exactly once after that turn, and event streams on both instances see it;
when A is killed mid-turn, B repairs the session and runs what was queued,
a continuation of the cut turn first."""

import json
import os
import signal
import unittest

from pg_cluster import EventStream, PgServeCase, tool_ids

LEASE_TTL_MS = 2000


class QueuedInputsTest(PgServeCase):
    serve_env = {"AGENTLOOP_STORE_LEASE_TTL_MS": str(LEASE_TTL_MS)}

    def wait_requests(self, model, n):
        self.wait_for("model request %d" % n, lambda: len(model.requests()) >= n)

    def enqueue(self, base, sid, body, position):
        body = dict(body, on_busy="enqueue")
        status, q = self.call(base, "POST", "/v1/sessions/%s/turns" % sid, body)
        self.assertEqual(status, 202, q)
        self.assertEqual(q, {"status": "queued", "session_id": sid, "position": position,
                             "events_url": "/v1/sessions/%s/events/stream" % sid})

    def test_an_input_queued_on_b_runs_once_after_the_turn_on_a(self):
        model = self.server({"responses": [
            {"text": "first, on A", "delay_ms": 3000},
            {"text": "second, queued on B"},
        ]})
        _, _, a, b, sid = self.two_instances(model)
        on_a = EventStream(a, sid, 0, turns=2)
        on_b = EventStream(b, sid, 0, turns=2)
        status, t1 = self.call(a, "POST", "/v1/sessions/%s/turns" % sid, {"input": "one"})
        self.assertEqual(status, 202, t1)
        self.wait_requests(model, 1)
        # B does not run the session: without enqueue it is busy (A holds
        # the lease); with it the input is stored for whoever holds it next.
        status, busy = self.call(b, "POST", "/v1/sessions/%s/turns" % sid, {"input": "two"})
        self.assertEqual(status, 409, busy)
        self.assertEqual(busy["code"], "session_busy")
        self.enqueue(b, sid, {"input": "input-queued-on-B"}, 1)

        seen_a = on_a.wait(self)
        seen_b = on_b.wait(self)
        ends = [e for e in seen_a if e["type"] == "turn_end"]
        self.assertEqual(ends[0]["turn_id"], t1["id"])
        self.assertEqual([e["stop"] for e in ends], ["completed", "completed"])
        self.assertEqual(ends[1]["final_text"], "second, queued on B")
        self.assertEqual([(e["seq"], e["type"]) for e in seen_b],
                         [(e["seq"], e["type"]) for e in seen_a])
        self.assertEqual([e["seq"] for e in seen_a], list(range(1, len(seen_a) + 1)))
        # Exactly once: two model requests, the second on the queued input.
        requests = model.requests()
        self.assertEqual(len(requests), 2)
        self.assertNotIn("input-queued-on-B", json.dumps(requests[0]))
        self.assertIn("input-queued-on-B", json.dumps(requests[1]))
        stored = self.stored_events(b, sid)
        self.assertEqual([e["type"] for e in stored].count("turn_begin"), 2)
        self.assertEqual(self.count("SELECT COUNT(*) FROM session_inputs"), 0)
        self.assertEqual(self.count("SELECT COUNT(*) FROM session_wakeups"), 0)

    def test_a_killed_instances_queued_inputs_run_on_the_other_after_the_repair(self):
        model = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "half.txt", "content": "half\n"}}]},
            # Instance A is killed while it waits for this answer.
            {"text": "never delivered", "delay_ms": 60000},
            {"text": "continued on B"},
            {"text": "then the queued input"},
        ]})
        proc_a, _, a, b, sid = self.two_instances(model, allow=("write",))
        status, t = self.call(a, "POST", "/v1/sessions/%s/turns" % sid,
                              {"input": "write half.txt"})
        self.assertEqual(status, 202, t)
        watcher = EventStream(b, sid, 0, turns=3)
        self.wait_requests(model, 2)  # the write ran; the second model call is under way
        self.enqueue(b, sid, {"continue": True}, 1)
        self.enqueue(b, sid, {"input": "input-after-the-crash"}, 2)
        proc_a.send_signal(signal.SIGKILL)
        proc_a.wait()

        seen = watcher.wait(self)
        ends = [e for e in seen if e["type"] == "turn_end"]
        # The cut turn is ended by the takeover, then continued (the same
        # turn), then the queued input runs as a turn of its own.
        self.assertEqual(ends[0]["turn_id"], t["id"])
        self.assertEqual(ends[0]["stop"], "failed")
        self.assertIn("stopped", ends[0]["reason"])
        self.assertEqual((ends[1]["turn_id"], ends[1]["stop"], ends[1]["final_text"]),
                         (t["id"], "completed", "continued on B"))
        self.assertNotEqual(ends[2]["turn_id"], t["id"])
        self.assertEqual((ends[2]["stop"], ends[2]["final_text"]),
                         ("completed", "then the queued input"))
        stored = self.stored_events(b, sid)
        self.assertEqual([e["seq"] for e in seen], [e["seq"] for e in stored])
        # A valid transcript: every tool call has its result; the write ran once.
        uses, results = tool_ids(stored)
        self.assertEqual(uses, ["c1"])
        self.assertEqual(results, uses)
        self.assertEqual(len(model.requests()), 4)
        self.assertNotIn("input-after-the-crash", json.dumps(model.requests()[2]))
        self.assertIn("input-after-the-crash", json.dumps(model.requests()[3]))
        self.assertEqual(self.count("SELECT COUNT(*) FROM session_inputs"), 0)
        with open(os.path.join(self.ws, "half.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "half\n")


if __name__ == "__main__":
    unittest.main()
