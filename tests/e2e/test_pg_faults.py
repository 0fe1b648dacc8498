"""End-to-end: the PostgreSQL server restarts (`pg_ctl restart -m fast`, and
a stop followed by a start) while two `agentloop serve` instances run turns
(docs/storage.md, "Faults"). The instances reconnect by themselves; no
committed event is lost (every session's seqs are gap-free afterwards); no
tool runs twice (each tool call appends its id to a file); and while the
database is down every request is answered 200 or 503 with Retry-After,
never 500 and never left hanging."""

import os
import threading
import time
import unittest
import urllib.error
import urllib.request

from e2e_util import TIMEOUT
from pg_cluster import PgServeCase, tool_ids

SESSIONS = 6  # three per instance
STEPS = 4  # tool calls per turn, each after a model answer that takes a while
# Longer than the outages of the test: a running turn rides them out (its
# writes wait for the database for up to one lease TTL) and keeps its lease.
LEASE_TTL_MS = 15000


def job(i):
    return "[job-%02d]" % i


class DatabaseRestartTest(PgServeCase):
    serve_env = {"AGENTLOOP_STORE_LEASE_TTL_MS": str(LEASE_TTL_MS)}

    def ran(self):
        path = os.path.join(self.ws, "ran.log")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return f.read().split()

    def describe(self, bases, sids):
        """Each session's event types and the lease columns (for a failure)."""
        out = []
        for i, sid in enumerate(sids):
            status, page = self.call(bases[i % 2], "GET", "/v1/sessions/%s/events?limit=200" % sid)
            types = [e["type"] for e in page["items"]] if status == 200 else page
            out.append("%s: %s" % (sid, types))
        out.append(self.cluster.psql("SET search_path = %s; SELECT id, lease_pid, lease_epoch, "
                                     "lease_heartbeat_at_ms FROM sessions" % self.schema))
        return "\n".join(out)

    def probe(self, bases, sids, answers, stop):
        """GETs sessions round-robin until `stop` is set, recording each
        answer as (status, Retry-After); a request that gets no answer
        within TIMEOUT is recorded as 'hang'."""
        n = 0
        while not stop.is_set():
            base = bases[n % len(bases)]
            sid = sids[n % len(sids)]
            n += 1
            req = urllib.request.Request("%s/v1/sessions/%s" % (base, sid))
            try:
                with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                    r.read()
                    answers.append((r.status, None))
            except urllib.error.HTTPError as e:
                body = e.read()
                answers.append((e.code, e.headers.get("Retry-After"), body[:200]))
            except (urllib.error.URLError, OSError) as e:
                answers.append(("no answer", str(e)))
            time.sleep(0.02)

    def test_the_database_restarts_under_load(self):
        script = []
        for i in range(SESSIONS):
            for k in range(STEPS):
                call_id = "s%dk%d" % (i, k)
                script.append({"match": job(i), "delay_ms": 150, "tool_calls": [
                    {"id": call_id, "name": "bash",
                     "input": {"command": "echo %s >> ran.log" % call_id}}]})
            script.append({"match": job(i), "text": "done " + job(i)})
        model = self.server({"responses": script})
        self.write_agent(model.base_url, extra='\n[permissions]\nallow = ["bash"]\n')
        _, a = self.serve_pg()
        _, b = self.serve_pg()
        bases = [a, b]
        sids, turns = [], []
        for i in range(SESSIONS):
            base = bases[i % 2]
            status, s = self.call(base, "POST", "/v1/sessions", {"agent": "writer"})
            self.assertEqual(status, 201, s)
            sids.append(s["id"])
        for i, sid in enumerate(sids):
            status, t = self.call(bases[i % 2], "POST", "/v1/sessions/%s/turns" % sid,
                                  {"input": "run the steps of " + job(i)})
            self.assertEqual(status, 202, t)
            turns.append(t["id"])

        answers = []
        stop = threading.Event()
        prober = threading.Thread(target=self.probe, args=(bases, sids, answers, stop),
                                  daemon=True)
        prober.start()
        try:
            # Under load: some tools have run, turns are between steps.
            self.wait_for("the first tools", lambda: len(self.ran()) >= SESSIONS)
            self.cluster.restart()
            # Down for a while: the servers answer 503 with Retry-After.
            self.wait_for("more tools after the restart",
                          lambda: len(self.ran()) >= 2 * SESSIONS)
            self.cluster.stop_server()
            try:
                seen = len(answers)
                self.wait_for("503 answers while the database is down", lambda: sum(
                    1 for x in answers[seen:] if x[0] == 503) >= 4)
            finally:
                self.cluster.start_again()
            # Every turn ends and its end is in the store.
            def all_ended():
                for i, sid in enumerate(sids):
                    status, page = self.call(bases[i % 2], "GET",
                                             "/v1/sessions/%s/events?limit=200" % sid)
                    if status != 200:
                        return False
                    if not any(e["type"] == "turn_end" for e in page["items"]):
                        return False
                return True
            try:
                self.wait_for("every turn's end", all_ended)
            except AssertionError:
                raise AssertionError("not every turn ended: " + self.describe(bases, sids))
        finally:
            stop.set()
            prober.join(TIMEOUT)
        self.assertFalse(prober.is_alive(), "a request got no answer")

        # While the database was down: 200 or 503 with Retry-After, nothing else.
        bad = [x for x in answers if x[0] not in (200, 503) or (x[0] == 503 and x[1] != "1")]
        self.assertEqual(bad, [], "answers other than 200 / 503 with Retry-After")
        self.assertGreater(sum(1 for x in answers if x[0] == 503), 0)

        # No committed event lost: the seqs in the table are gap-free per
        # session, and the API serves the same on both instances.
        ran = self.ran()
        self.assertEqual(len(ran), len(set(ran)), "a tool ran twice: %s" % ran)
        self.assertEqual(sorted(ran), sorted("s%dk%d" % (i, k) for i in range(SESSIONS)
                                             for k in range(STEPS)))
        for i, sid in enumerate(sids):
            seqs = self.cluster.psql(
                "SET search_path = %s; SELECT string_agg(seq::text, ',' ORDER BY seq) "
                "FROM session_events WHERE session_id = '%s'" % (self.schema, sid))
            seqs = [int(x) for x in seqs.split(",")]
            self.assertEqual(seqs, list(range(1, len(seqs) + 1)), sid)
            pages = []
            for base in bases:
                status, page = self.call(base, "GET", "/v1/sessions/%s/events?limit=200" % sid)
                self.assertEqual(status, 200, page)
                pages.append([(e["seq"], e["type"]) for e in page["items"]])
            self.assertEqual(pages[0], pages[1])
            events = page["items"]
            # Each tool call whose begin is committed ran at most once, and
            # every tool result that says it ran matches one line of ran.log.
            begun = [e
                     for e in events if e["type"] == "tool_call_begin"]
            for e in events:
                if e["type"] != "message":
                    continue
                for block in e["message"]["content"]:
                    if block.get("type") == "tool_result" and not block.get("is_error"):
                        self.assertEqual(ran.count(block["tool_use_id"]), 1, block)
            # A transcript that is valid: every tool_use has its result.
            uses, results = tool_ids(events)
            self.assertEqual(sorted(uses), sorted(results), sid)
            ends = [e for e in events if e["type"] == "turn_end"]
            self.assertEqual(len(ends), 1, ends)
            self.assertEqual(ends[0]["turn_id"], turns[i])
            # The outages were shorter than a lease: every turn completed.
            self.assertEqual(ends[0]["stop"], "completed", ends[0])
            self.assertEqual(len(begun), STEPS)
        # Nothing is left held or waiting.
        self.wait_for("every lease released", lambda: self.count(
            "SELECT COUNT(*) FROM sessions WHERE lease_token IS NOT NULL") == 0)


if __name__ == "__main__":
    unittest.main()
