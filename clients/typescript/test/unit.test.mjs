// The client against local stub servers on 127.0.0.1: retries and their
// waits, the Idempotency-Key of a logical POST, typed errors, the SSE parser,
// and a stream resumed after a dropped connection without a repeated event.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import {
  AgentloopClient, APIConnectionError, ConflictError, InternalServerError, NotFoundError,
  RateLimitError, SSEParser, StreamResumeError, retryAfterMs,
} from "../src/index.js";

/** An HTTP server on 127.0.0.1 answering with `handler(req, body, n)`
 * (n: 0-based request count); records every request. */
async function stub(handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const n = requests.length;
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      handler(req, res, body, n);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

function problem(res, status, code, headers = {}) {
  res.writeHead(status, { "content-type": "application/problem+json", ...headers });
  res.end(JSON.stringify({ type: `urn:agentloop:problem:${code}`, title: "t", status,
                           detail: `detail of ${code}`, code }));
}

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** A client whose waits are recorded, not slept. */
function client(url, extra = {}) {
  const waits = [];
  const c = new AgentloopClient({
    baseUrl: url, token: "tok-unit", sleep: async (ms) => { waits.push(ms); }, ...extra,
  });
  return { c, waits };
}

test("a 503 with Retry-After is retried after that long with the same Idempotency-Key", async () => {
  const s = await stub((req, res, body, n) => {
    if (n === 0) return problem(res, 503, "unavailable", { "retry-after": "2" });
    json(res, 201, { id: "s1" });
  });
  try {
    const { c, waits } = client(s.url);
    const out = await c.createSession({ agent: "writer" });
    assert.equal(out.id, "s1");
    assert.equal(s.requests.length, 2);
    assert.deepEqual(waits, [2000]);
    const k0 = s.requests[0].headers["idempotency-key"];
    assert.ok(k0 && k0.length > 8);
    assert.equal(s.requests[1].headers["idempotency-key"], k0);
    assert.equal(s.requests[0].body, s.requests[1].body);
    assert.equal(s.requests[0].headers.authorization, "Bearer tok-unit");
    // Another logical POST gets another key.
    await c.createSession({ agent: "writer" });
    assert.notEqual(s.requests[2].headers["idempotency-key"], k0);
  } finally {
    await s.close();
  }
});

test("429 honours retry-after-ms; 408 and 409 idempotency_in_flight are retried", async () => {
  const s = await stub((req, res, body, n) => {
    if (n === 0) return problem(res, 429, "rate_limited", { "retry-after-ms": "1234" });
    if (n === 1) return problem(res, 408, "timeout");
    if (n === 2) return problem(res, 409, "idempotency_in_flight", { "retry-after": "1" });
    json(res, 200, { status: "resumed", turn_id: "t" });
  });
  try {
    const { c, waits } = client(s.url, { maxRetries: 3, retryBaseMs: 100 });
    const out = await c.approve("a1", { scope: "session" }, { idempotencyKey: "key-1" });
    assert.equal(out.status, "resumed");
    assert.equal(s.requests.length, 4);
    assert.equal(waits[0], 1234);
    assert.ok(waits[1] > 0 && waits[1] <= 200, String(waits[1]));  // backoff, no header
    assert.equal(waits[2], 1000);
    for (const r of s.requests) {
      assert.equal(r.headers["idempotency-key"], "key-1");
      assert.deepEqual(JSON.parse(r.body), { decision: "approve", scope: "session" });
      assert.equal(r.url, "/v1/approvals/a1/decision");
    }
  } finally {
    await s.close();
  }
});

test("a dropped connection is retried with the same key; exhausted retries throw", async () => {
  const s = await stub((req, res, body, n) => {
    if (n === 0) return req.socket.destroy();
    if (n === 1) return json(res, 202, { id: "turn_1", status: "running" });
    problem(res, 500, "internal");
  });
  try {
    const { c } = client(s.url);
    const t = await c.startTurn("s1", "hello");
    assert.equal(t.id, "turn_1");
    assert.equal(s.requests[0].headers["idempotency-key"], s.requests[1].headers["idempotency-key"]);
    await assert.rejects(c.getSession("s1"), (e) => {
      assert.ok(e instanceof InternalServerError);
      assert.equal(e.code, "internal");
      assert.equal(e.status, 500);
      return true;
    });
    assert.equal(s.requests.length, 2 + 3);  // 1 + maxRetries (2)
    // A GET carries no key.
    assert.equal(s.requests[2].headers["idempotency-key"], undefined);
  } finally {
    await s.close();
  }
});

test("a refused connection is an APIConnectionError after the retries", async () => {
  const s = await stub(() => {});
  const url = s.url;
  await s.close();
  const { c, waits } = client(url, { maxRetries: 1 });
  await assert.rejects(c.health(), APIConnectionError);
  assert.equal(waits.length, 1);
});

test("404 and 409 are typed errors carrying the problem code, not retried", async () => {
  const s = await stub((req, res) => {
    if (req.url.startsWith("/v1/sessions/nope")) return problem(res, 404, "not_found");
    problem(res, 409, "session_busy");
  });
  try {
    const { c, waits } = client(s.url);
    await assert.rejects(c.getSession("nope"), (e) => e instanceof NotFoundError && e.code === "not_found");
    await assert.rejects(c.startTurn("s1", "x"),
                         (e) => e instanceof ConflictError && e.code === "session_busy" &&
                                e.problem.detail === "detail of session_busy");
    assert.equal(s.requests.length, 2);
    assert.deepEqual(waits, []);
  } finally {
    await s.close();
  }
});

test("a Retry-After beyond maxRetryAfterMs is not waited for", async () => {
  const s = await stub((req, res) => problem(res, 429, "slow_down", { "retry-after": "3600" }));
  try {
    const { c, waits } = client(s.url);
    await assert.rejects(c.listApprovals(), RateLimitError);
    assert.deepEqual(waits, []);
    assert.equal(s.requests.length, 1);
  } finally {
    await s.close();
  }
});

test("retryAfterMs reads seconds, milliseconds and dates", () => {
  assert.equal(retryAfterMs(new Headers({ "retry-after": "3" })), 3000);
  assert.equal(retryAfterMs(new Headers({ "retry-after-ms": "15", "retry-after": "3" })), 15);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(retryAfterMs(new Headers({ "retry-after": "Thu, 01 Jan 2026 00:00:05 GMT" }), now), 5000);
  assert.equal(retryAfterMs(new Headers({})), null);
  assert.equal(retryAfterMs(new Headers({ "retry-after": "soon" })), null);
});

test("the SSE parser joins data lines, skips comments, keeps ids across chunks", () => {
  const p = new SSEParser();
  assert.deepEqual(p.feed("retry: 2000\n\n: hb\n\nid: 4\r\nevent: no"), []);
  const frames = p.feed("tice\r\ndata: {\"a\":\ndata: 1}\r\n\r\nevent: text_delta\ndata: x\n");
  assert.equal(frames.length, 1);
  assert.deepEqual(frames[0], { event: "notice", data: "{\"a\":\n1}", id: "4", retry: null });
  assert.deepEqual(p.feed("\n").map((f) => [f.event, f.data, f.id]), [["text_delta", "x", null]]);
});

function frame(ev, id = String(ev.seq)) {
  return `${ev.seq ? `id: ${id}\n` : ""}event: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`;
}
const ev = (seq, type, extra = {}) => ({ type, session_id: "s1", turn_id: "t1", seq, ...extra });

test("a dropped stream resumes with Last-Event-ID and repeats no event", async () => {
  const s = await stub((req, res, body, n) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write("retry: 2000\n\n");
    if (n === 0) {
      res.write(frame(ev(1, "turn_begin")) + frame(ev(0, "text_delta", { text: "he" })) +
                frame(ev(2, "step_begin")));
      // Half a frame, then the connection drops.
      res.write("id: 3\nevent: step_end\ndata: {\"type\":\"step_");
      return setImmediate(() => req.socket.destroy());
    }
    // The server replays from the cursor; an event the client has is sent
    // again here to check that it is dropped.
    res.end(frame(ev(2, "step_begin")) + frame(ev(3, "step_end")) +
            frame(ev(4, "turn_end", { stop: "completed" })));
  });
  try {
    const { c, waits } = client(s.url);
    const stream = c.streamEvents("s1", { stopAfter: (e) => e.type === "turn_end" });
    const seen = [];
    for await (const e of stream) seen.push(`${e.type}:${e.seq}`);
    assert.deepEqual(seen, ["turn_begin:1", "text_delta:0", "step_begin:2", "step_end:3", "turn_end:4"]);
    assert.equal(s.requests.length, 2);
    assert.equal(s.requests[0].url, "/v1/sessions/s1/events/stream?after=0");
    assert.equal(s.requests[1].headers["last-event-id"], "2");
    assert.equal(s.requests[1].headers.accept, "text/event-stream");
    assert.equal(stream.reconnects, 1);
    assert.equal(waits.length, 1);
  } finally {
    await s.close();
  }
});

test("a stream gives up after 5 reconnects that bring nothing", async () => {
  const s = await stub((req, res) => problem(res, 503, "unavailable", { "retry-after": "1" }));
  try {
    const { c, waits } = client(s.url);
    await assert.rejects(async () => {
      for await (const _ of c.streamEvents("s1")) { /* nothing comes */ }
    }, StreamResumeError);
    assert.equal(s.requests.length, 6);  // the first open and 5 reconnects
    assert.equal(waits.length, 5);
    for (const w of waits) assert.ok(w >= 1000, String(w));  // Retry-After is a floor
  } finally {
    await s.close();
  }
});

test("the multiplexed stream resumes every session from its own cursor", async () => {
  const m = (sid, seq, type) => ({ type, session_id: sid, turn_id: "t", seq });
  const s = await stub((req, res, body, n) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (n === 0) {
      res.write(frame(m("a", 1, "turn_begin"), "a.1") + frame(m("b", 7, "turn_begin"), "b.7") +
                frame(m("a", 2, "step_begin"), "a.2"));
      return setImmediate(() => req.socket.destroy());
    }
    res.end(frame(m("b", 7, "turn_begin"), "b.7") + frame(m("b", 8, "turn_end"), "b.8"));
  });
  try {
    const { c } = client(s.url);
    const seen = [];
    const st = c.streamSessions(["a", "b"], { after: { b: 6 }, stopAfter: (e) => e.type === "turn_end" });
    for await (const e of st) seen.push(`${e.session_id}.${e.seq}`);
    assert.deepEqual(seen, ["a.1", "b.7", "a.2", "b.8"]);
    const q = (i) => new URL(s.url + s.requests[i].url).searchParams;
    assert.equal(q(0).get("sessions"), "a,b");
    assert.equal(q(0).get("after"), "a:0,b:6");
    assert.equal(q(1).get("after"), "a:2,b:7");
  } finally {
    await s.close();
  }
});

test("a turn's stream dropped before its first event asks again with the same key", async () => {
  const events = [ev(5, "turn_begin"), ev(6, "turn_end", { stop: "completed", final_text: "hi" })];
  const s = await stub((req, res, body, n) => {
    if (n === 0) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("retry: 2000\n\n");
      return setImmediate(() => req.socket.destroy());
    }
    if (n === 1) {
      // The repeat of the POST: the recorded 202.
      res.writeHead(202, { "content-type": "application/json", "idempotent-replayed": "true" });
      return res.end(JSON.stringify({ id: "t1", session_id: "s1", status: "running" }));
    }
    // The session stream from the start: an older turn first.
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(frame({ ...ev(1, "turn_begin"), turn_id: "t0" }) +
            frame({ ...ev(4, "turn_end"), turn_id: "t0" }) + events.map((e) => frame(e)).join(""));
  });
  try {
    const { c } = client(s.url);
    const ts = c.streamTurn("s1", "hello");
    const seen = [];
    for await (const e of ts) seen.push(`${e.type}:${e.seq}`);
    assert.deepEqual(seen, ["turn_begin:5", "turn_end:6"]);
    assert.equal(ts.turnId, "t1");
    assert.equal(ts.result.final_text, "hi");
    assert.equal(s.requests[0].method, "POST");
    assert.equal(s.requests[0].headers.accept, "text/event-stream");
    assert.equal(s.requests[1].method, "POST");
    assert.equal(s.requests[1].headers["idempotency-key"], s.requests[0].headers["idempotency-key"]);
    assert.equal(s.requests[2].url, "/v1/sessions/s1/events/stream?after=0");
  } finally {
    await s.close();
  }
});

test("no token sends no Authorization header", async () => {
  const s = await stub((req, res) => json(res, 200, { status: "ok" }));
  try {
    await new AgentloopClient({ baseUrl: s.url, token: null }).health();
    assert.equal(s.requests[0].headers.authorization, undefined);
  } finally {
    await s.close();
  }
});

test("a paused turn_end is yielded once the server lists its items", async () => {
  const item = { id: "apr_1", kind: "approval", tool: "write" };
  const s = await stub((req, res, body, n) => {
    if (req.method === "POST") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return res.end(frame(ev(1, "turn_begin")) +
                     frame(ev(2, "turn_end", { stop: "pending_approval", pending: [item] })));
    }
    if (req.url === "/v1/sessions/s1/pending") {
      // Listed from the third look on.
      const looks = s.requests.filter((r) => r.url === "/v1/sessions/s1/pending").length;
      return json(res, 200, { items: looks >= 3 ? [item] : [] });
    }
    problem(res, 404, "not_found");
  });
  try {
    const { c, waits } = client(s.url);
    const ts = c.streamTurn("s1", "hello", { followPauses: false });
    const seen = [];
    for await (const e of ts) {
      seen.push(e.type);
      if (e.type === "turn_end") {
        // Here the item is decidable: the server has listed it.
        assert.equal(s.requests.filter((r) => r.url === "/v1/sessions/s1/pending").length, 3);
      }
    }
    assert.deepEqual(seen, ["turn_begin", "turn_end"]);
    assert.equal(waits.length, 2);
    assert.equal(ts.result.stop, "pending_approval");
  } finally {
    await s.close();
  }
});

test("a turn queued behind another yields its queued frame and ends", async () => {
  const s = await stub((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(`event: queued\ndata: ${JSON.stringify({ status: "queued", session_id: "s1", position: 1,
                                                     events_url: "/v1/sessions/s1/events/stream" })}\n\n`);
  });
  try {
    const { c } = client(s.url);
    const ts = c.streamTurn("s1", { input: "later", on_busy: "enqueue" });
    const seen = [];
    for await (const e of ts) seen.push([e.type, e.position]);
    assert.deepEqual(seen, [["queued", 1]]);
    assert.equal(ts.queued.position, 1);
    assert.deepEqual(JSON.parse(s.requests[0].body), { input: "later", on_busy: "enqueue" });
    assert.equal(s.requests.length, 1);
  } finally {
    await s.close();
  }
});

test("an aborted stream ends with APIUserAbortError; close() ends it quietly", async () => {
  const s = await stub((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(frame(ev(1, "turn_begin")));  // then nothing more
  });
  try {
    const { c } = client(s.url);
    const ctl = new AbortController();
    const st = c.streamEvents("s1", { signal: ctl.signal });
    await assert.rejects(async () => {
      for await (const e of st) if (e.seq === 1) ctl.abort();
    }, (e) => e.name === "APIUserAbortError");
    const st2 = c.streamEvents("s1");
    const seen = [];
    for await (const e of st2) {
      seen.push(e.seq);
      st2.close();
    }
    assert.deepEqual(seen, [1]);
  } finally {
    await s.close();
  }
});
