#!/usr/bin/env python3
"""Events appended per second by `agentloop serve` on a PostgreSQL store
(docs/BENCHMARKS.md, "agentloop serve on PostgreSQL").

Starts a throwaway PostgreSQL cluster with durability on (fsync,
synchronous_commit; tests/e2e/pg_cluster.py), agentloop-fake-server as the
model (each session's turn: STEPS `read` tool calls, then an answer; the
items of a session are matched by a tag in its input) and one or two
`agentloop serve` instances on one database. Each run creates SESSIONS
sessions (spread over the instances), starts a turn on every one at once,
waits until every turn has ended, and reads from the database how many
events were committed and over which span of time (the first and last
`created_at_ms` of the run's events). Reaches only 127.0.0.1.

  bench/pg_serve_bench.py --bin build/dev/apps/cli/agentloop \\
      --fake-server build/dev/tests/support/agentloop-fake-server \\
      [--no-fsync] [--worker-threads N] [RUN ...]
      RUN = INSTANCES:SESSIONS:STEPS, default 1:1:15 1:16:10 1:64:10 2:64:10

Prints one JSON line per run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "e2e"))
from pg_cluster import PgCluster  # noqa: E402
from serve_util import start_serve_process  # noqa: E402


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")


def cpu_seconds(pid):
    """User plus system CPU time of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args, cluster, instances, sessions, steps):
    tmp = tempfile.mkdtemp(prefix="pg_serve_bench_")
    procs = []
    try:
        url = cluster.new_schema_url()
        schema = url.rsplit("%3D", 1)[1]
        ws = os.path.join(tmp, "ws")
        os.makedirs(ws)
        with open(os.path.join(ws, "data.txt"), "w") as f:
            f.write("a line of the file the model reads\n" * 40)
        script = []
        for i in range(sessions):
            tag = "[s%05d]" % i
            for k in range(steps):
                script.append({"match": tag, "tool_calls": [
                    {"id": "c%dk%d" % (i, k), "name": "read",
                     "input": {"file_path": "data.txt", "offset": k + 1, "limit": 5}}]})
            script.append({"match": tag, "text": "done " + tag})
        script_path = os.path.join(tmp, "script.json")
        with open(script_path, "w") as f:
            json.dump({"responses": script}, f)
        model = subprocess.Popen([args.fake_server, "--port", "0", "--script", script_path,
                                  "--exit-on-stdin-eof"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        procs.append(model)
        port = int(model.stdout.readline().split()[1])
        home = os.path.join(tmp, "home")
        agent = os.path.join(home, ".config", "agentloop", "agents", "reader")
        os.makedirs(agent)
        with open(os.path.join(agent, "agent.toml"), "w") as f:
            f.write('[agent]\ndescription = "reads"\nworkspace = "%s"\n\n[provider]\n'
                    'kind = "openai"\nbase_url = "http://127.0.0.1:%d"\nmodel = "m"\n'
                    'api_key_env = "READER_KEY"\n' % (ws, port))
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "AGENTLOOP_HOME": os.path.join(tmp, "data"),
               "LANG": "C.UTF-8", "READER_KEY": "sk-bench", "AGENTLOOP_STORE_URL": url}
        bases = []
        if args.worker_threads:
            env["AGENTLOOP_SERVER_WORKER_THREADS"] = str(args.worker_threads)
        for _ in range(instances):
            p, base, line = start_serve_process(args.bin, env, tmp)
            procs.append(p)
            if base is None:
                raise RuntimeError("serve did not start: %r" % line)
            # Drained, so that a long run never blocks the server on a full pipe.
            threading.Thread(target=p.stderr.read, daemon=True).start()
            bases.append(base)
        sids = [call(bases[i % instances], "POST", "/v1/sessions", {"agent": "reader"})["id"]
                for i in range(sessions)]
        started = time.monotonic()
        turns = []
        for i, sid in enumerate(sids):
            t = call(bases[i % instances], "POST", "/v1/sessions/%s/turns" % sid,
                     {"input": "read data.txt [s%05d]" % i})
            turns.append(t["id"])
        for i, sid in enumerate(sids):
            while True:
                w = call(bases[i % instances], "GET",
                         "/v1/sessions/%s/turns/%s/wait?timeout_s=300" % (sid, turns[i]))
                if w.get("result"):
                    break
            stop = w["result"].get("stop")
            if stop != "completed":
                raise RuntimeError("session %s ended %r: %s" % (sid, stop, w))
        wall = time.monotonic() - started
        cpu = [round(cpu_seconds(p.pid), 2) for p in procs[1:]]
        row = cluster.psql("SET search_path = %s; SELECT COUNT(*), MIN(created_at_ms), "
                           "MAX(created_at_ms), COUNT(DISTINCT (session_id, created_at_ms)) "
                           "FROM session_events" % schema).split("|")
        events, first, last, commits = int(row[0]), int(row[1]), int(row[2]), int(row[3])
        span = max(last - first, 1) / 1000.0
        return {"instances": instances, "sessions": sessions, "steps": steps,
                "worker_threads": args.worker_threads or 2,
                "events": events, "commits_approx": commits, "span_s": round(span, 2),
                "wall_s": round(wall, 2), "events_per_s": round(events / span),
                "events_per_s_per_session": round(events / span / sessions, 1),
                "steps_per_s": round(sessions * steps / span, 1),
                "serve_cpu_s": cpu}
    finally:
        for p in procs:
            if p.poll() is None:
                if p.stdin:
                    p.stdin.close()
                p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fake-server", required=True)
    ap.add_argument("--no-fsync", action="store_true",
                    help="the cluster without fsync and synchronous_commit (what the tests use)")
    ap.add_argument("--worker-threads", type=int, default=0,
                    help="server.worker_threads of every instance (0: its default)")
    ap.add_argument("runs", nargs="*", default=["1:1:15", "1:16:10", "1:64:10", "2:64:10"])
    args = ap.parse_args()
    cluster = PgCluster(durable=not args.no_fsync).start()
    try:
        for spec in args.runs:
            instances, sessions, steps = (int(x) for x in spec.split(":"))
            print(json.dumps(run(args, cluster, instances, sessions, steps)), flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
