#!/usr/bin/env python3
"""Load client of the `agentloop serve` scale benchmark (docs/BENCHMARKS.md,
"Server at scale"). Reaches only the server given by --url (127.0.0.1).

Phase "turns": creates N sessions of agent --agent, attaches --sse event-stream
clients to the first of them, starts a turn on every session, forces each
attached client to disconnect once in the middle of its turn and to reconnect
with Last-Event-ID, waits until every turn has finished and then checks that
what each attached client received (before and after its reconnect) is the
session's stored event log exactly: every seq once, in order, with the same
JSON. Reads the server's RSS and CPU from /proc/<--server-pid> between steps.

Phase "decisions": creates M sessions of agent --decision-agent (whose tool
call needs approval), watches them on multiplexed streams, starts a turn on
each, waits until all are paused, then POSTs approvals at --decision-rate per
second (open loop) and measures, per decision, the time from sending the POST
to the first event of that session on the stream (the resumed turn's first
event), then waits until every resumed turn has ended.

Prints one JSON object with the figures on stdout.
"""
import argparse
import asyncio
import json
import os
import sys
import time
import urllib.parse

CLK = os.sysconf("SC_CLK_TCK")


def proc_sample(pid):
    if not pid:
        return {}
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
            out["cpu_s"] = (int(fields[11]) + int(fields[12])) / CLK
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


def tree_cpu_s(pid):
    """CPU seconds (user + system) of `pid`, its reaped children and its live
    children: a database's postmaster and its backends."""
    if not pid:
        return 0.0
    total = 0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])
    except OSError:
        return 0.0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / CLK


class HttpError(Exception):
    pass


class Conn:
    def __init__(self, host, port):
        self.host, self.port = host, port
        self.r = self.w = None

    async def open(self):
        self.r, self.w = await asyncio.open_connection(self.host, self.port, limit=1 << 22)

    async def request(self, method, path, body=None, headers=None):
        if self.w is None:
            await self.open()
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        head += f"Content-Length: {len(data)}\r\n"
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        self.w.write(head.encode() + b"\r\n" + data)
        status_line = await self.r.readline()
        if not status_line:
            raise HttpError("connection closed")
        status = int(status_line.split()[1])
        length, close = 0, False
        while True:
            line = await self.r.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode().partition(":")
            k = k.strip().lower()
            if k == "content-length":
                length = int(v.strip())
            elif k == "connection" and v.strip().lower() == "close":
                close = True
        payload = await self.r.readexactly(length) if length else b""
        if close:
            self.close()
        return status, payload

    def close(self):
        if self.w is not None:
            self.w.close()
        self.r = self.w = None


class Pool:
    def __init__(self, host, port, size):
        self.host, self.port = host, port
        self.free = asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(Conn(host, port))

    async def request(self, method, path, body=None, headers=None):
        c = await self.free.get()
        try:
            for attempt in range(3):
                try:
                    return await c.request(method, path, body, headers)
                except (HttpError, ConnectionError, asyncio.IncompleteReadError):
                    c.close()
                    if attempt == 2:
                        raise
        finally:
            self.free.put_nowait(c)

    async def json(self, method, path, body=None, expect=(200,)):
        status, payload = await self.request(method, path, body)
        if status not in expect:
            raise HttpError(f"{method} {path}: {status} {payload[:300]!r}")
        return json.loads(payload) if payload else None


async def gather_limited(n, coros):
    sem = asyncio.Semaphore(n)

    async def one(c):
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


def parse_frame(frame):
    """(id or None, event or None, data or None) of one SSE frame (comments skipped)."""
    eid = ev = None
    data = []
    for line in frame.split("\n"):
        if not line or line.startswith(":"):
            continue
        k, _, v = line.partition(":")
        if v.startswith(" "):
            v = v[1:]
        if k == "id":
            eid = v
        elif k == "event":
            ev = v
        elif k == "data":
            data.append(v)
    return eid, ev, "\n".join(data) if data else None


async def open_stream(host, port, path, last_event_id=None):
    r, w = await asyncio.open_connection(host, port, limit=1 << 22)
    head = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
    if last_event_id is not None:
        head += f"Last-Event-ID: {last_event_id}\r\n"
    w.write((head + "\r\n").encode())
    status_line = await r.readline()
    status = int(status_line.split()[1]) if status_line else 0
    while True:
        line = await r.readline()
        if line in (b"\r\n", b"\n", b""):
            break
    if status != 200:
        body = await r.read(2000)
        w.close()
        raise HttpError(f"GET {path}: {status} {body!r}")
    return r, w


class Watcher:
    """One attached client of one session: the durable events it received,
    checked for gaps as they arrive, and one forced reconnect."""

    def __init__(self, sid, reconnect_after_deltas):
        self.sid = sid
        self.events = []  # (seq, type, data dict) of durable events, as received
        self.last_seq = 0
        self.gaps = []
        self.deltas = 0
        self.snapshots = 0
        self.reconnect_after = reconnect_after_deltas
        self.reconnected = False
        self.done = False
        self.error = None
        self.connected = asyncio.Event()

    def on_frame(self, frame):
        eid, ev, data = parse_frame(frame)
        if data is None:
            return
        if eid is None:
            if ev == "text_delta":
                self.deltas += 1
            elif ev == "message.snapshot":
                self.snapshots += 1
            elif ev in ("stream.desync", "error", "shutdown"):
                self.error = f"{ev}: {data[:200]}"
            return
        seq = int(eid)
        if seq != self.last_seq + 1:
            self.gaps.append((self.last_seq, seq))
        self.last_seq = max(self.last_seq, seq)
        d = json.loads(data)
        self.events.append((seq, ev, d))
        if ev == "turn_end":
            self.done = True

    async def run(self, host, port, connect_sem):
        path = f"/v1/sessions/{self.sid}/events/stream"
        try:
            async with connect_sem:
                r, w = await open_stream(host, port, path)
            self.connected.set()
            deltas_at_start = None
            while not self.done:
                frame = (await r.readuntil(b"\n\n")).decode()
                self.on_frame(frame)
                if self.error:
                    break
                if not self.reconnected and self.reconnect_after is not None:
                    if deltas_at_start is None and self.deltas > 0:
                        deltas_at_start = self.deltas
                    if deltas_at_start is not None and self.deltas >= self.reconnect_after:
                        # Forced disconnect in the middle of the model's answer.
                        w.close()
                        self.reconnected = True
                        async with connect_sem:
                            r, w = await open_stream(host, port, path, str(self.last_seq))
            w.close()
        except (asyncio.IncompleteReadError, ConnectionError, HttpError) as e:
            self.error = f"{type(e).__name__}: {e}"
            self.connected.set()


async def metrics_turns_finished(pool):
    status, payload = await pool.request("GET", "/v1/metrics")
    total, by_stop = 0, {}
    for line in payload.decode().splitlines():
        if line.startswith("agentloop_turns_finished_total"):
            name, _, val = line.rpartition(" ")
            v = int(float(val))
            total += v
            stop = name.split('stop="')[1].split('"')[0] if 'stop="' in name else "?"
            by_stop[stop] = v
    return total, by_stop


async def wait_finished(pool, target, pid, samples, timeout_s, base=0):
    t0 = time.monotonic()
    peak = {}
    while True:
        total, by_stop = await metrics_turns_finished(pool)
        s = proc_sample(pid)
        s["t"] = round(time.monotonic() - t0, 2)
        s["finished"] = total - base
        samples.append(s)
        for k in ("VmRSS", "fds", "Threads"):
            if k in s:
                peak[k] = max(peak.get(k, 0), s[k])
        if total - base >= target or time.monotonic() - t0 > timeout_s:
            return total - base, by_stop, time.monotonic() - t0, peak
        await asyncio.sleep(0.5)


async def stored_events(pool, sid):
    out, after = [], 0
    while True:
        page = await pool.json("GET", f"/v1/sessions/{sid}/events?after={after}&limit=200")
        items = page.get("items", [])
        out.extend(items)
        if not items or page.get("next_after") in (None, after):
            return out
        after = page["next_after"]


def strip(d):
    return {k: v for k, v in d.items()}


async def phase_turns(a, host, port, res):
    pool = Pool(host, port, a.conns)
    pid = a.server_pid
    res["server_start"] = proc_sample(pid)
    t = time.monotonic()
    created = await gather_limited(
        a.conns, [pool.json("POST", "/v1/sessions", {"agent": a.agent}, (201,)) for _ in range(a.sessions)]
    )
    sids = [c["id"] for c in created]
    res["create_s"] = round(time.monotonic() - t, 2)
    await asyncio.sleep(1.0)
    res["after_sessions"] = proc_sample(pid)

    connect_sem = asyncio.Semaphore(200)
    watchers = [Watcher(sid, a.reconnect_after) for sid in sids[: a.sse]]
    tasks = [asyncio.create_task(w.run(host, port, connect_sem)) for w in watchers]
    await asyncio.gather(*(w.connected.wait() for w in watchers))
    await asyncio.sleep(1.0)
    res["after_sse"] = proc_sample(pid)
    res["sse_connect_errors"] = sum(1 for w in watchers if w.error)
    if a.idle:
        for tk in tasks:
            tk.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return

    before = proc_sample(pid)
    t = time.monotonic()
    # Peaks over the whole run, the start of the turns included.
    run_peak = {}

    async def sampler():
        while True:
            s = proc_sample(pid)
            for k in ("VmRSS", "fds", "Threads"):
                if k in s:
                    run_peak[k] = max(run_peak.get(k, 0), s[k])
            await asyncio.sleep(0.5)

    sampling = asyncio.create_task(sampler())
    starts = await gather_limited(
        a.conns,
        [pool.request("POST", f"/v1/sessions/{sid}/turns", {"input": "read data.txt and summarise it"}) for sid in sids],
    )
    res["start_turns_s"] = round(time.monotonic() - t, 2)
    res["turns_accepted"] = sum(1 for s, _ in starts if s == 202)
    bad = [(s, p[:200]) for s, p in starts if s != 202]
    res["turns_refused_examples"] = [f"{s} {p!r}" for s, p in bad[:3]]
    samples = []
    finished, by_stop, took, peak = await wait_finished(pool, res["turns_accepted"], pid, samples, a.timeout)
    after = proc_sample(pid)
    res["turns_finished"] = finished
    res["turns_by_stop"] = by_stop
    res["turns_wall_s"] = round(time.monotonic() - t, 2)
    sampling.cancel()
    res["peak"] = peak
    res["run_peak"] = run_peak
    res["server_end"] = after
    res["server_cpu_turns_s"] = round(after.get("cpu_s", 0) - before.get("cpu_s", 0), 2)
    # Give the watchers a moment to read their last frames, then stop them.
    deadline = time.monotonic() + 30
    while any(not w.done and not w.error for w in watchers) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    for tk in tasks:
        tk.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    # Exact replay: what each watcher received equals the stored log.
    mismatched, examples = 0, []
    stored_all = await gather_limited(a.conns, [stored_events(pool, w.sid) for w in watchers])
    for w, stored in zip(watchers, stored_all):
        got = [(s, ev, d) for s, ev, d in w.events]
        want = [(e["seq"], e["type"], e) for e in stored]
        if [(s, ev) for s, ev, _ in got] != [(s, ev) for s, ev, _ in want] or any(
            g[2] != x[2] for g, x in zip(got, want)
        ):
            mismatched += 1
            if len(examples) < 3:
                examples.append(
                    {
                        "session": w.sid,
                        "got": [(s, ev) for s, ev, _ in got][:40],
                        "want": [(s, ev) for s, ev, _ in want][:40],
                        "first_data_diff": next(
                            ({"got": g[2], "want": x[2]} for g, x in zip(got, want) if g[2] != x[2]), None
                        ),
                    }
                )
    # Every turn has ended and its session closed by now: what stays resident.
    await asyncio.sleep(2.0)
    res["after_turns"] = proc_sample(pid)
    res["sse"] = {
        "clients": len(watchers),
        "done": sum(1 for w in watchers if w.done),
        "errors": sum(1 for w in watchers if w.error),
        "error_examples": [w.error for w in watchers if w.error][:3],
        "reconnected": sum(1 for w in watchers if w.reconnected),
        "with_gaps": sum(1 for w in watchers if w.gaps),
        "gap_examples": [(w.sid, w.gaps[:3]) for w in watchers if w.gaps][:3],
        "replay_mismatch": mismatched,
        "replay_mismatch_examples": examples,
        "deltas_received": sum(w.deltas for w in watchers),
        "snapshots_received": sum(w.snapshots for w in watchers),
        "durable_events_received": sum(len(w.events) for w in watchers),
    }
    res["samples"] = samples[:: max(1, len(samples) // 40)]


class Mux:
    """One multiplexed stream over many sessions: records the arrival time of
    the first event of each session after its decision was sent."""

    def __init__(self, sids, ctx):
        self.sids = sids
        self.ctx = ctx

    async def run(self, host, port, connect_sem):
        path = "/v1/events/stream?sessions=" + ",".join(self.sids)
        ctx = self.ctx
        try:
            async with connect_sem:
                r, w = await open_stream(host, port, path)
            ctx["connected"] += 1
            while True:
                frame = (await r.readuntil(b"\n\n")).decode()
                now = time.monotonic()
                eid, ev, data = parse_frame(frame)
                if data is None:
                    continue
                try:
                    d = json.loads(data)
                except ValueError:
                    continue
                sid = d.get("session_id")
                if sid is None:
                    continue
                sent = ctx["sent"].get(sid)
                if sent is not None and sid not in ctx["first"]:
                    ctx["first"][sid] = (now - sent, ev)
                if sent is not None and ev != "decision" and sid not in ctx["first_turn"]:
                    ctx["first_turn"][sid] = (now - sent, ev)
                if ev == "turn_end":
                    if sent is None:
                        ctx["paused"].add(sid)
                    else:
                        ctx["resumed_done"].add(sid)
        except (asyncio.IncompleteReadError, ConnectionError, HttpError) as e:
            ctx["errors"].append(f"{type(e).__name__}: {e}")


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


async def phase_decisions(a, host, port, res):
    pool = Pool(host, port, a.conns)
    pid = a.server_pid
    sids = [
        c["id"]
        for c in await gather_limited(
            a.conns,
            [pool.json("POST", "/v1/sessions", {"agent": a.decision_agent}, (201,)) for _ in range(a.decisions)],
        )
    ]
    ctx = {"sent": {}, "first": {}, "first_turn": {}, "paused": set(), "resumed_done": set(), "errors": [], "connected": 0}
    groups = [sids[i : i + a.mux_size] for i in range(0, len(sids), a.mux_size)]
    connect_sem = asyncio.Semaphore(100)
    muxes = [asyncio.create_task(Mux(g, ctx).run(host, port, connect_sem)) for g in groups]
    while ctx["connected"] + len(ctx["errors"]) < len(groups):
        await asyncio.sleep(0.05)
    starts = await gather_limited(
        a.conns, [pool.request("POST", f"/v1/sessions/{sid}/turns", {"input": "write the file"}) for sid in sids]
    )
    res["decision_turns_accepted"] = sum(1 for s, _ in starts if s == 202)
    t = time.monotonic()
    while len(ctx["paused"]) < len(sids) and time.monotonic() - t < a.timeout:
        await asyncio.sleep(0.2)
    res["paused"] = len(ctx["paused"])
    pend = await gather_limited(a.conns, [pool.json("GET", f"/v1/sessions/{sid}/pending") for sid in sids])
    approvals = []
    for sid, p in zip(sids, pend):
        items = p.get("items", p) if isinstance(p, dict) else p
        if items:
            approvals.append((sid, items[0]["id"]))
    res["approvals_pending"] = len(approvals)
    await asyncio.sleep(1.0)

    # Open loop: decision i is due at t0 + i / rate, whatever the others do.
    dpool = Pool(host, port, a.decision_conns)
    post_lat, lateness, statuses, last_send = [], [], {}, [0.0]
    before = proc_sample(pid)
    db_before = tree_cpu_s(a.db_pid)
    t0 = time.monotonic() + 0.1

    async def decide(i, sid, aid):
        due = t0 + i / a.decision_rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        c = await dpool.free.get()
        try:
            start = time.monotonic()
            lateness.append(start - due)
            ctx["sent"][sid] = start
            last_send[0] = start
            status, _ = await c.request("POST", f"/v1/approvals/{aid}/decision", {"decision": "approve"})
            post_lat.append(time.monotonic() - start)
            statuses[status] = statuses.get(status, 0) + 1
        finally:
            dpool.free.put_nowait(c)

    await asyncio.gather(*(decide(i, sid, aid) for i, (sid, aid) in enumerate(approvals)))
    send_span = last_send[0] - t0
    t = time.monotonic()
    while len(ctx["resumed_done"]) < len(approvals) and time.monotonic() - t < a.timeout:
        await asyncio.sleep(0.2)
    after = proc_sample(pid)
    db_after = tree_cpu_s(a.db_pid)
    for m in muxes:
        m.cancel()
    await asyncio.gather(*muxes, return_exceptions=True)
    lat = [v[0] for v in ctx["first"].values()]
    lat_turn = [v[0] for v in ctx["first_turn"].values()]
    first_types = {}
    for _, ev in list(ctx["first"].values()) + list(ctx["first_turn"].values()):
        first_types[ev] = first_types.get(ev, 0) + 1
    ms = lambda x: None if x is None else round(x * 1000, 1)
    res["decisions"] = {
        "sent": len(approvals),
        "rate_target": a.decision_rate,
        "rate_achieved": round((len(approvals) - 1) / send_span, 1) if send_span > 0 else None,
        "post_status": statuses,
        "first_event_seen": len(lat),
        "first_event_types": first_types,
        "latency_ms": {"p50": ms(pct(lat, 50)), "p90": ms(pct(lat, 90)), "p99": ms(pct(lat, 99)), "max": ms(max(lat) if lat else None)},
        "resumed_first_event_seen": len(lat_turn),
        "resumed_latency_ms": {"p50": ms(pct(lat_turn, 50)), "p90": ms(pct(lat_turn, 90)), "p99": ms(pct(lat_turn, 99)), "max": ms(max(lat_turn) if lat_turn else None)},
        "post_ms": {"p50": ms(pct(post_lat, 50)), "p99": ms(pct(post_lat, 99))},
        "send_lateness_ms_p99": ms(pct(lateness, 99)),
        "resumed_turns_ended": len(ctx["resumed_done"]),
        "stream_errors": ctx["errors"][:3],
        "server_cpu_s": round(after.get("cpu_s", 0) - before.get("cpu_s", 0), 2),
        "server_cpu_ms_per_decision": round(
            (after.get("cpu_s", 0) - before.get("cpu_s", 0)) * 1000 / max(1, len(approvals)), 2),
    }
    if a.db_pid:
        db = db_after - db_before
        res["decisions"]["db_cpu_s"] = round(db, 2)
        res["decisions"]["db_cpu_ms_per_decision"] = round(db * 1000 / max(1, len(approvals)), 2)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--server-pid", type=int, default=0)
    ap.add_argument("--sessions", type=int, default=0)
    ap.add_argument("--sse", type=int, default=0)
    ap.add_argument("--agent", default="reader")
    ap.add_argument("--reconnect-after", type=int, default=5, help="text deltas before the forced reconnect")
    ap.add_argument("--decisions", type=int, default=0)
    ap.add_argument("--decision-agent", default="writer")
    ap.add_argument("--decision-rate", type=float, default=1000)
    ap.add_argument("--decision-conns", type=int, default=256)
    ap.add_argument("--mux-size", type=int, default=100)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--idle", action="store_true", help="no turns: sessions and attached clients only")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--db-pid", type=int, default=0, help="the database's postmaster: its CPU is reported")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    if u.hostname != "127.0.0.1":
        sys.exit("load_client: only 127.0.0.1 is reached")
    res = {}
    if a.sessions:
        await phase_turns(a, u.hostname, u.port, res)
    if a.decisions:
        await phase_decisions(a, u.hostname, u.port, res)
    res["client_cpu_s"] = round(sum(os.times()[:2]), 2)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
