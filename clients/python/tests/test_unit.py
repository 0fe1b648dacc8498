"""The clients (sync and asyncio) against local stub servers: retries and
their waits, the Idempotency-Key of a logical POST, typed errors, the SSE
parser, and streams resumed after a dropped connection without a repeat."""

import asyncio
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import agentloop_client as al  # noqa: E402
from stub import Stub, chunk, drop, end_stream, ev, frame, problem, send_json, start_stream  # noqa: E402


def clients(url, **kw):
    """A sync and an async client whose waits are recorded, not slept."""
    waits = []
    kw.setdefault("token", "tok-unit")
    return (al.Client(url, sleep=waits.append, **kw), al.AsyncClient(url, sleep=waits.append, **kw), waits)


def run(coro):
    return asyncio.run(coro)


class RetryTest(unittest.TestCase):

    def setUp(self):
        self.stubs = []

    def tearDown(self):
        for s in self.stubs:
            s.close()

    def stub(self, handler):
        s = Stub(handler)
        self.stubs.append(s)
        return s

    def test_retry_after_is_waited_and_the_idempotency_key_kept(self):
        def handler(h, n):
            if n % 2 == 0:
                return problem(h, 503, "unavailable", {"retry-after": "2"})
            send_json(h, 201, {"id": "s%d" % n})

        s = self.stub(handler)
        c, ac, waits = clients(s.url)
        self.assertEqual(c.create_session(agent="writer")["id"], "s1")
        self.assertEqual(run(ac.create_session(agent="writer"))["id"], "s3")
        self.assertEqual(waits, [2.0, 2.0])
        r = s.requests
        self.assertEqual(len(r), 4)
        for a, b in ((0, 1), (2, 3)):
            self.assertTrue(r[a]["headers"]["idempotency-key"])
            self.assertEqual(r[a]["headers"]["idempotency-key"], r[b]["headers"]["idempotency-key"])
            self.assertEqual(json.loads(r[a]["body"]), {"agent": "writer"})
            self.assertEqual(r[a]["body"], r[b]["body"])
        self.assertNotEqual(r[0]["headers"]["idempotency-key"], r[2]["headers"]["idempotency-key"])
        self.assertEqual(r[0]["headers"]["authorization"], "Bearer tok-unit")
        self.assertEqual(r[2]["headers"]["authorization"], "Bearer tok-unit")

    def test_429_408_and_idempotency_in_flight_are_retried(self):
        def handler(h, n):
            k = n % 4
            if k == 0:
                return problem(h, 429, "slow_down", {"retry-after-ms": "1234"})
            if k == 1:
                return problem(h, 408, "timeout")
            if k == 2:
                return problem(h, 409, "idempotency_in_flight", {"retry-after": "1"})
            send_json(h, 200, {"status": "resumed", "turn_id": "t"})

        s = self.stub(handler)
        c, ac, waits = clients(s.url, max_retries=3, retry_base_ms=100)
        out = c.decide_approval("a1", "approve", scope="session", idempotency_key="key-1")
        self.assertEqual(out["status"], "resumed")
        out = run(ac.decide_approval("a1", "approve", scope="session", idempotency_key="key-1"))
        self.assertEqual(out["status"], "resumed")
        self.assertEqual(len(s.requests), 8)
        for w in (waits[0:3], waits[3:6]):
            self.assertEqual(w[0], 1.234)
            self.assertTrue(0 < w[1] <= 0.2, w)
            self.assertEqual(w[2], 1.0)
        for r in s.requests:
            self.assertEqual(r["headers"]["idempotency-key"], "key-1")
            self.assertEqual(r["path"], "/v1/approvals/a1/decision")
            self.assertEqual(json.loads(r["body"]), {"decision": "approve", "scope": "session"})

    def test_a_dropped_connection_is_retried_with_the_same_key(self):
        def handler(h, n):
            if n in (0, 2):
                return drop(h)
            send_json(h, 202, {"id": "turn_%d" % n, "status": "running"})

        s = self.stub(handler)
        c, ac, _ = clients(s.url)
        self.assertEqual(c.start_turn("s1", "hello")["id"], "turn_1")
        self.assertEqual(run(ac.start_turn("s1", "hello"))["id"], "turn_3")
        r = s.requests
        self.assertEqual(r[0]["headers"]["idempotency-key"], r[1]["headers"]["idempotency-key"])
        self.assertEqual(r[2]["headers"]["idempotency-key"], r[3]["headers"]["idempotency-key"])
        self.assertEqual(json.loads(r[0]["body"]), {"input": "hello"})

    def test_exhausted_retries_raise_the_typed_error(self):
        s = self.stub(lambda h, n: problem(h, 500, "internal"))
        c, ac, waits = clients(s.url)
        for call in (lambda: c.get_session("s1"), lambda: run(ac.get_session("s1"))):
            with self.assertRaises(al.InternalServerError) as cm:
                call()
            self.assertEqual(cm.exception.code, "internal")
            self.assertEqual(cm.exception.status, 500)
        self.assertEqual(len(s.requests), 6)  # 1 + 2 retries, twice
        self.assertNotIn("idempotency-key", s.requests[0]["headers"])  # a GET has none

    def test_404_and_409_are_typed_and_not_retried(self):
        def handler(h, n):
            if h.path.startswith("/v1/sessions/nope"):
                return problem(h, 404, "not_found")
            problem(h, 409, "session_busy")

        s = self.stub(handler)
        c, ac, waits = clients(s.url)
        with self.assertRaises(al.NotFoundError) as cm:
            c.get_session("nope")
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(al.ConflictError) as cm:
            run(ac.start_turn("s1", "x"))
        self.assertEqual(cm.exception.code, "session_busy")
        self.assertEqual(cm.exception.problem["detail"], "detail of session_busy")
        self.assertEqual(len(s.requests), 2)
        self.assertEqual(waits, [])

    def test_a_refused_connection_raises_after_the_retries(self):
        s = Stub(lambda h, n: None)
        url = s.url
        s.close()
        c, ac, waits = clients(url, max_retries=1)
        with self.assertRaises(al.APIConnectionError):
            c.health()
        with self.assertRaises(al.APIConnectionError):
            run(ac.health())
        self.assertEqual(len(waits), 2)

    def test_a_long_retry_after_is_not_waited_for(self):
        s = self.stub(lambda h, n: problem(h, 429, "slow_down", {"retry-after": "3600"}))
        c, _, waits = clients(s.url)
        with self.assertRaises(al.RateLimitError):
            c.list_approvals()
        self.assertEqual(waits, [])

    def test_no_token_sends_no_authorization(self):
        s = self.stub(lambda h, n: send_json(h, 200, {"status": "ok"}))
        al.Client(s.url, token=None).health()
        self.assertNotIn("authorization", s.requests[0]["headers"])


class ParserTest(unittest.TestCase):

    def test_frames(self):
        p = al.SSEParser()
        self.assertEqual(p.feed("retry: 2000\n\n: hb\n\nid: 4\r\nevent: no"), [])
        frames = p.feed("tice\r\ndata: {\"a\":\ndata: 1}\r\n\r\nevent: text_delta\ndata: x\n")
        self.assertEqual(frames, [{"event": "notice", "data": "{\"a\":\n1}", "id": "4", "retry": None}])
        self.assertEqual([(f["event"], f["data"], f["id"]) for f in p.feed("\n")], [("text_delta", "x", None)])

    def test_retry_after(self):
        self.assertEqual(al.retry_after_ms({"retry-after": "3"}), 3000)
        self.assertEqual(al.retry_after_ms({"retry-after-ms": "15", "retry-after": "3"}), 15)
        now = 1767225600.0  # 2026-01-01T00:00:00Z
        self.assertEqual(al.retry_after_ms({"retry-after": "Thu, 01 Jan 2026 00:00:05 GMT"}, now), 5000)
        self.assertIsNone(al.retry_after_ms({}))
        self.assertIsNone(al.retry_after_ms({"retry-after": "soon"}))


def drop_then_replay(h, n):
    start_stream(h)
    chunk(h, "retry: 2000\n\n")
    if n % 2 == 0:
        chunk(h, frame(ev(1, "turn_begin")) + frame(ev(0, "text_delta", text="he")) + frame(ev(2, "step_begin")))
        chunk(h, "id: 3\nevent: step_end\ndata: {\"type\":\"step_")
        return drop(h)
    # A replay that repeats an event the client has.
    chunk(h, frame(ev(2, "step_begin")) + frame(ev(3, "step_end")) + frame(ev(4, "turn_end", stop="completed")))
    end_stream(h)


class StreamTest(unittest.TestCase):

    def setUp(self):
        self.stubs = []

    def tearDown(self):
        for s in self.stubs:
            s.close()

    def stub(self, handler):
        s = Stub(handler)
        self.stubs.append(s)
        return s

    def check_resumed(self, s, seen, stream, i):
        self.assertEqual(seen, ["turn_begin:1", "text_delta:0", "step_begin:2", "step_end:3", "turn_end:4"])
        self.assertEqual(s.requests[i]["path"], "/v1/sessions/s1/events/stream?after=0")
        self.assertEqual(s.requests[i + 1]["headers"]["last-event-id"], "2")
        self.assertEqual(s.requests[i + 1]["headers"]["accept"], "text/event-stream")
        self.assertEqual(stream.reconnects, 1)

    def test_a_dropped_stream_resumes_without_a_repeat(self):
        s = self.stub(drop_then_replay)
        c, ac, _ = clients(s.url)
        st = c.stream_events("s1", stop_after=lambda e: e["type"] == "turn_end")
        self.check_resumed(s, ["%s:%d" % (e["type"], e["seq"]) for e in st], st, 0)

        async def go():
            ast = ac.stream_events("s1", stop_after=lambda e: e["type"] == "turn_end")
            return ast, ["%s:%d" % (e["type"], e["seq"]) async for e in ast]

        ast, seen = run(go())
        self.check_resumed(s, seen, ast, 2)

    def test_a_stream_gives_up_after_5_reconnects(self):
        s = self.stub(lambda h, n: problem(h, 503, "unavailable", {"retry-after": "1"}))
        c, ac, waits = clients(s.url)
        with self.assertRaises(al.StreamResumeError):
            for _ in c.stream_events("s1"):
                pass

        async def go():
            async for _ in ac.stream_events("s1"):
                pass

        with self.assertRaises(al.StreamResumeError):
            run(go())
        self.assertEqual(len(s.requests), 12)  # twice: the first open and 5 reconnects
        self.assertEqual(len(waits), 10)
        self.assertTrue(all(w >= 1.0 for w in waits), waits)

    def test_the_multiplexed_stream_resumes_each_session(self):
        def m(sid, seq, t):
            return {"type": t, "session_id": sid, "turn_id": "t", "seq": seq}

        def handler(h, n):
            start_stream(h)
            if n == 0:
                chunk(h, frame(m("a", 1, "turn_begin"), "a.1") + frame(m("b", 7, "turn_begin"), "b.7")
                      + frame(m("a", 2, "step_begin"), "a.2"))
                return drop(h)
            chunk(h, frame(m("b", 7, "turn_begin"), "b.7") + frame(m("b", 8, "turn_end"), "b.8"))
            end_stream(h)

        s = self.stub(handler)
        c, _, _ = clients(s.url)
        st = c.stream_sessions(["a", "b"], after={"b": 6}, stop_after=lambda e: e["type"] == "turn_end")
        self.assertEqual(["%s.%d" % (e["session_id"], e["seq"]) for e in st], ["a.1", "b.7", "a.2", "b.8"])
        from urllib.parse import parse_qs, urlsplit
        q = [parse_qs(urlsplit(r["path"]).query) for r in s.requests]
        self.assertEqual(q[0]["sessions"], ["a,b"])
        self.assertEqual(q[0]["after"], ["a:0,b:6"])
        self.assertEqual(q[1]["after"], ["a:2,b:7"])

    def test_a_turn_dropped_before_its_first_event_asks_again_with_the_same_key(self):
        def handler(h, n):
            k = n % 3
            if k == 0:
                start_stream(h)
                chunk(h, "retry: 2000\n\n")
                return drop(h)
            if k == 1:
                return send_json(h, 202, {"id": "t1", "session_id": "s1", "status": "running"},
                                 {"idempotent-replayed": "true"})
            start_stream(h)
            old = dict(ev(1, "turn_begin"), turn_id="t0")
            old_end = dict(ev(4, "turn_end"), turn_id="t0")
            chunk(h, frame(old) + frame(old_end) + frame(ev(5, "turn_begin"))
                  + frame(ev(6, "turn_end", stop="completed", final_text="hi")))
            end_stream(h)

        s = self.stub(handler)
        c, ac, _ = clients(s.url)
        ts = c.stream_turn("s1", "hello")
        self.assertEqual(["%s:%d" % (e["type"], e["seq"]) for e in ts], ["turn_begin:5", "turn_end:6"])
        self.assertEqual(ts.turn_id, "t1")
        self.assertEqual(ts.result["final_text"], "hi")

        async def go():
            ats = ac.stream_turn("s1", "hello")
            return ats, ["%s:%d" % (e["type"], e["seq"]) async for e in ats]

        ats, seen = run(go())
        self.assertEqual(seen, ["turn_begin:5", "turn_end:6"])
        self.assertEqual(ats.turn_id, "t1")
        r = s.requests
        for i in (0, 3):
            self.assertEqual(r[i]["method"], "POST")
            self.assertEqual(r[i]["headers"]["accept"], "text/event-stream")
            self.assertEqual(r[i + 1]["method"], "POST")
            self.assertEqual(r[i + 1]["headers"]["idempotency-key"], r[i]["headers"]["idempotency-key"])
            self.assertEqual(r[i + 2]["path"], "/v1/sessions/s1/events/stream?after=0")

    def test_a_paused_turn_end_waits_until_its_items_are_listed(self):
        item = {"id": "apr_1", "kind": "approval", "tool": "write"}
        looks = []

        def handler(h, n):
            if h.command == "POST":
                start_stream(h)
                chunk(h, frame(ev(1, "turn_begin"))
                      + frame(ev(2, "turn_end", stop="pending_approval", pending=[item])))
                return end_stream(h)
            looks.append(n)
            send_json(h, 200, {"items": [item] if len(looks) % 3 == 0 else []})

        s = self.stub(handler)
        c, ac, waits = clients(s.url)
        ts = c.stream_turn("s1", "hello", follow_pauses=False)
        for e in ts:
            if e["type"] == "turn_end":
                self.assertEqual(len(looks), 3)  # listed on the third look
        self.assertEqual(ts.result["stop"], "pending_approval")

        async def go():
            ats = ac.stream_turn("s1", "hello", follow_pauses=False)
            async for e in ats:
                if e["type"] == "turn_end":
                    self.assertEqual(len(looks), 6)
            return ats

        self.assertEqual(run(go()).result["stop"], "pending_approval")
        self.assertEqual(len(waits), 4)

    def test_a_queued_turn_yields_its_queued_frame(self):
        def handler(h, n):
            start_stream(h)
            chunk(h, "event: queued\ndata: %s\n\n" % json.dumps(
                {"status": "queued", "session_id": "s1", "position": 1,
                 "events_url": "/v1/sessions/s1/events/stream"}))
            end_stream(h)

        s = self.stub(handler)
        c, _, _ = clients(s.url)
        ts = c.stream_turn("s1", "later", on_busy="enqueue")
        self.assertEqual([(e["type"], e["position"]) for e in ts], [("queued", 1)])
        self.assertEqual(ts.queued["position"], 1)
        self.assertEqual(json.loads(s.requests[0]["body"]), {"input": "later", "on_busy": "enqueue"})
        self.assertEqual(len(s.requests), 1)

    def test_close_ends_a_stream_quietly(self):
        def handler(h, n):
            start_stream(h)
            chunk(h, frame(ev(1, "turn_begin")))  # then nothing more
            h.rfile.read(1)  # holds the connection until the client closes it

        s = self.stub(handler)
        c, ac, _ = clients(s.url)
        st = c.stream_events("s1")
        seen = []
        for e in st:
            seen.append(e["seq"])
            st.close()
        self.assertEqual(seen, [1])

        async def go():
            ast = ac.stream_events("s1")
            out = []
            async for e in ast:
                out.append(e["seq"])
                ast.close()
            return out

        self.assertEqual(run(go()), [1])


if __name__ == "__main__":
    unittest.main()
