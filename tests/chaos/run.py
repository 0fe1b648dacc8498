#!/usr/bin/env python3
"""A fault-injection run of `agentloop serve`, in the manner of Jepsen.

    run.py --minutes N --seed S --store sqlite|postgres [--instances K]
           [--sessions N] [--clients N] [--out DIR] [--faults a,b,...]

Starts the chaos model (model.py), one `agentloop serve` on SQLite or K
(default 3) on one throwaway PostgreSQL cluster (each through a TCP fault
proxy, proxy.py), and a workload of concurrent clients: sessions, turns
whose bash tools append their call id to `side.log` in the workspace,
approvals decided by racing clients (approve, deny, edited arguments,
answers), queued inputs, cancels, `{"continue": true}`, and a watcher per
session reading its event stream with reconnects (Last-Event-ID). A seeded
generator injects faults meanwhile. Then every fault is healed, the system
settles (pending items decided, cut turns ended), every session's stored log
is read through the API, and check.py checks the history.

The history (`history.jsonl` in --out): every request with its answer or
the lack of one, every event a watcher saw, every fault; `stored.jsonl` the
stored logs; `side.log` the tools' executions. The seed and the fault
schedule are printed at the start and again on failure: the same seed gives
the same schedule (the interleaving of threads is the machine's).

Exit: 0 when the checker found nothing, 1 when it found violations, 2 when
the run could not be set up (for CTest: 77, a skip, when --skip-if-no-pg and
PostgreSQL is missing).

Environment: AGENTLOOP_BIN (the binary, default `agentloop` on PATH).
Standard library only."""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import check  # noqa: E402
from hook import HookReceiver  # noqa: E402
from model import ChaosModel  # noqa: E402
from proxy import FaultProxy  # noqa: E402

BIN = os.environ.get("AGENTLOOP_BIN", "agentloop")
FIU_PRELOAD = ["/usr/lib/fiu/fiu_run_preload.so", "/usr/lib/fiu/fiu_posix_preload.so"]
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
REQUEST_TIMEOUT = 30  # seconds; never asserted, only bounds a hung call
LEASE_TTL_MS = 3000   # PostgreSQL instances' lease TTL
HOOK_SECRET = "chaos-hook-secret"
NOTIFY_RETRY_S = 3    # server.notify_retry_s: the outbox sweep's period

SQLITE_FAULTS = ["kill", "stop", "model_429", "model_500", "model_reset", "model_hang",
                 "fsync", "clock", "fsync_kill"]
PG_FAULTS = ["kill", "stop", "model_429", "model_reset", "model_hang", "pg_restart",
             "pg_kill", "partition", "proxy_reset", "clock"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class History:
    """JSON lines, one record per call to write(), with a monotonic time."""

    def __init__(self, path):
        self.f = open(path, "w", encoding="utf-8")
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.counts = {}

    def write(self, rec):
        rec["at"] = round(time.monotonic() - self.t0, 3)
        line = json.dumps(rec, sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")
            key = rec["t"] if rec["t"] != "req" else "req:" + rec.get("op", "")
            self.counts[key] = self.counts.get(key, 0) + 1

    def close(self):
        with self.lock:
            self.f.close()


class Instance:
    """One `agentloop serve` on a fixed port, restartable."""

    def __init__(self, name, run, env):
        self.name = name
        self.run = run
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.env = env
        self.proc = None
        self.stopped = False  # SIGSTOPped
        self.clock_file = os.path.join(run.dir, "clock-%s" % name)
        self.fiu_prefix = os.path.join(run.dir, "fiu-%s" % name)
        self.log = open(os.path.join(run.dir, "serve-%s.log" % name), "a", encoding="utf-8")
        self.lock = threading.Lock()
        with open(self.clock_file, "w") as f:
            f.write("+0\n")

    def start(self):
        env = dict(self.env)
        preload = []
        if self.run.use_fiu:
            preload += FIU_PRELOAD
            env["FIU_ENABLE"] = ""
            env["FIU_CTRL_FIFO"] = self.fiu_prefix
        if self.run.use_faketime:
            preload.append(FAKETIME)
            env["FAKETIME_TIMESTAMP_FILE"] = self.clock_file
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            env["FAKETIME_CACHE_DURATION"] = "1"
        if preload:
            env["LD_PRELOAD"] = " ".join(preload)
        args = [BIN, "serve", "--listen", "127.0.0.1:%d" % self.port, "--no-auth"]
        for _ in range(50):
            self.log.write("=== start %s\n" % time.strftime("%H:%M:%S"))
            self.log.flush()
            try:
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                             stdout=self.log, stderr=self.log, env=env,
                                             cwd=self.run.dir)
            except OSError as e:  # the binary is being replaced (a build)
                self.log.write("=== cannot start: %s\n" % e)
                time.sleep(1)
                continue
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                    c.request("GET", "/v1/health")
                    if c.getresponse().status == 200:
                        c.close()
                        return True
                except OSError:
                    pass
                time.sleep(0.1)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            time.sleep(1)  # the port, or the database, may come back
        return False

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            if self.stopped:
                self.cont()
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def sigstop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.stopped = True

    def cont(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.stopped = False

    def fiu(self, command):
        if not self.proc or self.proc.poll() is not None:
            return
        subprocess.run(["fiu-ctrl", "-f", self.fiu_prefix, "-c", command,
                        str(self.proc.pid)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)

    def fail_fsync(self, on):
        """fsync and fdatasync fail with EIO (libfiu's POSIX preload)."""
        for name in ("posix/io/sync/fsync", "posix/io/sync/fdatasync"):
            self.fiu("%s name=%s" % ("enable" if on else "disable", name))

    def set_clock(self, offset_s):
        with open(self.clock_file + ".tmp", "w") as f:
            f.write("%+ds\n" % offset_s)
        os.replace(self.clock_file + ".tmp", self.clock_file)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.cont()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Http:
    """Requests to the instances, each recorded with its answer (or none)."""

    def __init__(self, run):
        self.run = run
        self.ids = 0
        self.lock = threading.Lock()

    def call(self, op, inst, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT,
             record=True, extra=None):
        with self.lock:
            self.ids += 1
            rid = self.ids
        rec = {"t": "req", "op": op, "id": rid, "inst": inst.name, "method": method,
               "path": path}
        if body is not None:
            rec["body"] = body
        if extra:
            rec.update(extra)
        status, parsed, err = None, None, None
        start = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", inst.port, timeout=timeout)
            h = {"Content-Type": "application/json"} if body is not None else {}
            h.update(headers or {})
            c.request(method, path, json.dumps(body) if body is not None else None, h)
            r = c.getresponse()
            raw = r.read()
            status = r.status
            c.close()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode("utf-8", "replace")[:500]
        except socket.timeout:
            err = "timeout"
        except (OSError, http.client.HTTPException) as e:
            err = "%s: %s" % (type(e).__name__, e)
        rec["dur"] = round(time.monotonic() - start, 3)
        if err:
            rec["error"] = err
        else:
            rec["status"] = status
            rec["resp"] = parsed
        if record:
            self.run.history.write(rec)
        return status, parsed


class Watcher(threading.Thread):
    """Reads one session's event stream, reconnecting with Last-Event-ID
    (on errors, and on purpose after a random number of events)."""

    def __init__(self, run, sid, seed):
        super().__init__(daemon=True)
        self.r, self.sid = run, sid
        self.rng = random.Random(seed)
        self.last = 0
        self.conns = 0
        self.sock = None
        self.lock = threading.Lock()

    def close_now(self):
        with self.lock:
            if self.sock is not None:
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def run(self):  # noqa: C901 (one loop of a small protocol)
        run = self.r
        while not run.watchers_stop.is_set():
            inst = self.rng.choice(run.instances)
            self.conns += 1
            conn_no = self.conns
            budget = self.rng.randint(3, 40)  # events before a deliberate reconnect
            reason = "eof"
            try:
                c = http.client.HTTPConnection("127.0.0.1", inst.port, timeout=40)
                h = {"Accept": "text/event-stream"}
                if self.last:
                    h["Last-Event-ID"] = str(self.last)
                c.request("GET", "/v1/sessions/%s/events/stream" % self.sid, None, h)
                with self.lock:
                    self.sock = c.sock
                r = c.getresponse()
                if r.status != 200:
                    reason = "status %d" % r.status
                    r.read()
                    raise OSError(reason)
                data, ev = None, None
                while not run.watchers_stop.is_set():
                    line = r.fp.readline()
                    if not line:
                        break
                    line = line.decode("utf-8").rstrip("\n")
                    if line.startswith("data: "):
                        data = line[6:]
                    elif line.startswith("event: "):
                        ev = line[7:]
                    elif line == "" and data is not None:
                        obj = json.loads(data)
                        if isinstance(obj, dict) and obj.get("seq"):
                            run.history.write({"t": "ev", "sid": self.sid, "conn": conn_no,
                                               "inst": inst.name, "seq": obj["seq"],
                                               "type": obj.get("type"),
                                               "turn_id": obj.get("turn_id")})
                            self.last = obj["seq"]
                            budget -= 1
                            if budget <= 0 and not run.settling.is_set():
                                reason = "deliberate"
                                break
                        elif ev in ("stream.desync", "shutdown"):
                            reason = ev
                        data, ev = None, None
                c.close()
            except (OSError, http.client.HTTPException, ValueError) as e:
                reason = "%s: %s" % (type(e).__name__, e)
            with self.lock:
                self.sock = None
            run.history.write({"t": "wreconn", "sid": self.sid, "conn": conn_no,
                               "inst": inst.name, "last": self.last, "reason": reason[:200]})
            run.watchers_stop.wait(self.rng.uniform(0.1, 1.0))


class Run:

    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        if args.out:
            self.dir = os.path.abspath(args.out)
            shutil.rmtree(self.dir, ignore_errors=True)  # the last run's
            os.makedirs(self.dir)
        else:
            self.dir = tempfile.mkdtemp(prefix="al_chaos_")
        self.ws = os.path.join(self.dir, "ws")
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.ws, exist_ok=True)
        os.makedirs(self.home, exist_ok=True)
        self.history = History(os.path.join(self.dir, "history.jsonl"))
        self.http = Http(self)
        self.stop = threading.Event()          # the workload stops
        self.settling = threading.Event()
        self.watchers_stop = threading.Event()
        self.instances = []
        self.sessions = []   # [(sid, tag)]
        self.cluster = None
        self.proxies = []
        self.model = None
        self.hook = None
        self.faults_done = []
        self.fault_lock = threading.Lock()
        self.ops = 0
        self.use_fiu = False
        self.use_faketime = False
        self.schedule = []

    # --- set-up -------------------------------------------------------------

    def setup(self):
        a = self.args
        self.model = ChaosModel(a.seed)
        self.hook = HookReceiver(a.seed, HOOK_SECRET, self.history.write)
        known = SQLITE_FAULTS if a.store == "sqlite" else PG_FAULTS
        kinds = [k for k in (a.faults.split(",") if a.faults else known) if k != "none"]
        unknown = [k for k in kinds if k not in known]
        if unknown:
            print("chaos: unknown fault kind(s) for %s: %s (known: %s)"
                  % (a.store, ",".join(unknown), ",".join(known)))
            return 2
        fiu_kinds = [k for k in kinds if k in ("fsync", "fsync_kill")]
        self.use_fiu = bool(fiu_kinds) and os.path.exists(FIU_PRELOAD[1])
        if fiu_kinds and not self.use_fiu:
            print("chaos: libfiu's POSIX preload is missing (fiu-utils): no fsync faults")
            kinds = [k for k in kinds if k not in fiu_kinds]
        self.use_faketime = "clock" in kinds and os.path.exists(FAKETIME)
        if "clock" in kinds and not self.use_faketime:
            print("chaos: libfaketime is missing (faketime): no clock faults")
            kinds.remove("clock")
        self.schedule = self.make_schedule(kinds)
        cfg = os.path.join(self.home, ".config", "agentloop")
        d = os.path.join(cfg, "agents", "chaos")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "agent.toml"), "w", encoding="utf-8") as f:
            f.write('[agent]\ndescription = "chaos"\nworkspace = "%s"\n\n'
                    '[provider]\nkind = "openai"\nbase_url = "%s"\nmodel = "m"\n'
                    'api_key_env = "CHAOS_KEY"\n\n'
                    '[permissions]\nallow = ["bash(echo chaos * >> side.log)", "bash(sleep *)"]\n'
                    '\n[[notify]]\nchannel = "webhook"\nurl = "%s"\n'
                    'secret_env = "CHAOS_HOOK_SECRET"\n'
                    'events = ["approval.requested", "question.asked", "turn.completed"]\n'
                    % (self.ws, self.model.base_url, self.hook.url))
        with open(os.path.join(cfg, "config.toml"), "w", encoding="utf-8") as f:
            f.write("[server]\nnotify_retry_s = %d\n" % NOTIFY_RETRY_S)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home,
               "AGENTLOOP_HOME": os.path.join(self.dir, "data"), "LANG": "C.UTF-8",
               "CHAOS_KEY": "sk-chaos", "CHAOS_HOOK_SECRET": HOOK_SECRET}
        if a.store == "postgres":
            from pg_cluster import PgCluster, PgUnavailable
            try:
                # Durable (fsync and synchronous_commit on): a kill -9 of the
                # postmaster must not take back what it acknowledged.
                self.cluster = PgCluster(durable=True).start()
            except PgUnavailable as e:
                print("chaos: no PostgreSQL: %s" % e)
                return 77 if a.skip_if_no_pg else 2
            self.cluster.psql("CREATE SCHEMA chaos")
            for i in range(a.instances):
                p = FaultProxy(self.cluster.port)
                self.proxies.append(p)
                e = dict(env, AGENTLOOP_STORE_URL=(
                    "postgresql://agentloop@127.0.0.1:%d/postgres?options=-csearch_path%%3Dchaos"
                    % p.port), AGENTLOOP_STORE_LEASE_TTL_MS=str(LEASE_TTL_MS))
                self.instances.append(Instance("i%d" % i, self, e))
        else:
            self.instances.append(Instance("i0", self, env))
        for inst in self.instances:
            if not inst.start():
                print("chaos: instance %s did not start (see %s)" % (inst.name, self.dir))
                return 2
        return 0

    def make_schedule(self, kinds):
        """[(at_s, kind, target, duration_s)] from the seed alone."""
        rng = random.Random(self.args.seed * 7919 + 1)
        end = self.args.minutes * 60.0
        t = rng.uniform(5, 12)
        out = []
        n = self.args.instances if self.args.store == "postgres" else 1
        while kinds and t < end - 5:
            kind = rng.choice(kinds)
            target = "i%d" % rng.randrange(n)
            dur = {"kill": rng.uniform(0.5, 3), "stop": rng.uniform(2, 3) * LEASE_TTL_MS / 1000,
                   "model_429": rng.uniform(2, 8), "model_500": rng.uniform(2, 8),
                   "model_reset": rng.uniform(3, 10), "model_hang": rng.uniform(5, 12),
                   "fsync": rng.uniform(1, 5), "fsync_kill": 0, "clock": rng.uniform(5, 15),
                   "pg_restart": 0, "pg_kill": rng.uniform(0.5, 2),
                   "partition": rng.uniform(1.5, 3) * LEASE_TTL_MS / 1000,
                   "proxy_reset": 0}[kind]
            if kind == "fsync_kill":
                # Drawn apart, so that a seed's schedule of the other kinds
                # stays what it was before this kind existed (PostgreSQL's).
                dur = rng.uniform(0.5, 3)
            out.append((round(t, 2), kind, target, round(dur, 2)))
            t += dur + rng.uniform(self.args.fault_gap / 2, self.args.fault_gap * 1.5)
        return out

    # --- the workload ---------------------------------------------------------

    def inst(self, rng):
        return rng.choice(self.instances)

    def create_sessions(self):
        for i in range(self.args.sessions):
            for attempt in range(20):
                status, s = self.http.call("create", self.instances[i % len(self.instances)],
                                           "POST", "/v1/sessions",
                                           {"agent": "chaos", "title": "s%d" % i})
                if status == 201:
                    self.sessions.append((s["id"], "s%d" % i))
                    break
                time.sleep(0.5)

    def client(self, n):
        rng = random.Random(self.args.seed * 1000 + n)
        kinds = ["auto"] * 4 + ["two"] * 2 + ["slow"] * 2 + ["ask"] * 3 + ["asktwo"] * 2 + ["question"] * 2 + \
            ["text"]
        while not self.stop.is_set():
            sid, tag = rng.choice(self.sessions)
            op = rng.random()
            inst = self.inst(rng)
            try:
                if op < 0.40:
                    with self.fault_lock:
                        self.ops += 1
                        k = self.ops
                    text = "chaos:%s:%s input-%d-%d" % (rng.choice(kinds), tag, n, k)
                    body = {"input": text, "on_busy": rng.choice(["reject", "enqueue"])}
                    self.http.call("turn", inst, "POST", "/v1/sessions/%s/turns" % sid, body,
                                   extra={"sid": sid, "input": text})
                elif op < 0.65:
                    self.decide(rng, sid, inst)
                elif op < 0.72:
                    status, s = self.http.call("get", inst, "GET", "/v1/sessions/%s" % sid,
                                               extra={"sid": sid})
                    if status == 200 and isinstance(s, dict) and s.get("running_turn"):
                        tid = s["running_turn"]
                        if isinstance(tid, dict):
                            tid = tid.get("id")
                        self.http.call("cancel", self.inst(rng), "POST",
                                       "/v1/sessions/%s/turns/%s/cancel" % (sid, tid), {},
                                       extra={"sid": sid, "turn_id": tid})
                elif op < 0.80:
                    self.http.call("continue", inst, "POST", "/v1/sessions/%s/turns" % sid,
                                   {"continue": True,
                                    "on_busy": rng.choice(["reject", "enqueue"])},
                                   extra={"sid": sid})
                else:
                    self.http.call("get", inst, "GET", "/v1/sessions/%s" % sid,
                                   extra={"sid": sid})
            except Exception:  # a harness bug must not stop the workload silently
                self.history.write({"t": "harness_error", "trace": traceback.format_exc()})
            self.stop.wait(rng.uniform(0.05, 0.4) * self.args.pace)

    def decide(self, rng, sid, inst, racers=None, settle=False):
        status, p = self.http.call("pending", inst, "GET", "/v1/sessions/%s/pending" % sid,
                                   extra={"sid": sid})
        if status != 200 or not isinstance(p, dict):
            return 0
        items = p.get("items") or []
        for item in items:
            n = racers or rng.randint(2, 3)
            threads = []
            for r in range(n):
                if item.get("kind") == "question":
                    path = "/v1/questions/%s/answer" % item["id"]
                    body = {"answer": rng.choice(["red", "blue"])}
                    what = "answer"
                else:
                    path = "/v1/approvals/%s/decision" % item["id"]
                    choice = "deny" if settle else rng.choice(["approve", "deny", "edit"])
                    body = {"decision": "deny" if choice == "deny" else "approve"}
                    if choice == "edit":
                        args = dict(item.get("arguments") or {})
                        cmd = args.get("command", "")
                        args["command"] = cmd.replace(" >> side.log", " edited >> side.log")
                        body["edited_args"] = args
                    what = choice
                t = threading.Thread(target=self.http.call, args=(
                    "decide", self.inst(rng), "POST", path, body),
                    kwargs={"extra": {"sid": sid, "item": item["id"],
                                      "tool_use_id": item.get("tool_use_id"), "what": what}})
                threads.append(t)
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return len(items)

    # --- faults -----------------------------------------------------------------

    def by_name(self, name):
        return next(i for i in self.instances if i.name == name)

    def inject(self, at, kind, target, dur):
        inst = self.by_name(target)
        rec = {"t": "fault", "kind": kind, "target": target, "dur": dur, "planned_at": at}
        self.history.write(dict(rec, phase="start"))
        try:
            if kind == "kill":
                inst.kill9()
                self.stop.wait(dur)
                inst.start()
            elif kind == "stop":
                inst.sigstop()
                time.sleep(dur)
                inst.cont()
            elif kind.startswith("model_"):
                f = kind[len("model_"):]
                self.model.set_fault(f, 0.5 if f == "reset" else 1.0)
                time.sleep(dur)
                self.model.set_fault(None)
            elif kind == "fsync":
                inst.fail_fsync(True)
                time.sleep(dur)
                inst.fail_fsync(False)
            elif kind == "fsync_kill":
                # A commit that failed on fsync is invisible to the process
                # but its WAL frames may be recovered at the next start: the
                # process is killed before a later commit overwrites them.
                inst.fail_fsync(True)
                time.sleep(dur)
                inst.kill9()
                self.stop.wait(1.0)
                inst.start()
            elif kind == "clock":
                jump = self.rng.choice([-1, 1]) * self.rng.randint(5, 60)
                rec["jump_s"] = jump
                inst.set_clock(jump)
                time.sleep(dur)
                inst.set_clock(0)
            elif kind == "pg_restart":
                self.cluster.restart()
            elif kind == "pg_kill":
                self.pg_kill9(dur)
            elif kind == "partition":
                self.proxies[int(target[1:])].set_mode("blackhole")
                time.sleep(dur)
                self.proxies[int(target[1:])].set_mode("reset")
                self.proxies[int(target[1:])].set_mode("pass")
            elif kind == "proxy_reset":
                self.proxies[int(target[1:])].set_mode("reset")
                self.proxies[int(target[1:])].set_mode("pass")
        except Exception:
            self.history.write({"t": "harness_error", "trace": traceback.format_exc()})
        self.history.write(dict(rec, phase="end"))
        self.faults_done.append((at, kind, target, dur))

    def pg_kill9(self, down_s):
        pidfile = os.path.join(self.cluster.dir, "data", "postmaster.pid")
        with open(pidfile) as f:
            pid = int(f.readline())
        os.kill(pid, signal.SIGKILL)
        time.sleep(down_s)
        for _ in range(60):
            try:
                self.cluster.start_again()
                return
            except Exception:
                time.sleep(1)  # the old backends are still leaving

    def fault_loop(self):
        t0 = time.monotonic()
        for at, kind, target, dur in self.schedule:
            if self.stop.wait(max(0, t0 + at - time.monotonic())):
                return
            self.inject(at, kind, target, dur)

    # --- settling and reading -----------------------------------------------------

    def heal(self):
        self.model.set_fault(None)
        for p in self.proxies:
            p.set_mode("pass")
        if self.cluster is not None and not self.pg_up():
            for _ in range(60):
                try:
                    self.cluster.start_again()
                    break
                except Exception:
                    time.sleep(1)
        for inst in self.instances:
            inst.set_clock(0)
            inst.cont()
            if self.use_fiu:
                inst.fail_fsync(False)
            if inst.proc is None or inst.proc.poll() is not None:
                inst.start()

    def pg_up(self):
        try:
            self.cluster.psql("SELECT 1")
            return True
        except Exception:
            return False

    def settle(self):
        """Decides every pending item (deny), ends cut turns (a turn whose
        `turn_begin` has no `turn_end` while no instance runs it: reading it
        ends it, docs/storage.md) and waits until no session runs a turn, is
        paused or queued; False when it did not settle in --settle-s."""
        rng = random.Random(self.args.seed + 5)
        deadline = time.monotonic() + self.args.settle_s
        cursor = {sid: 0 for sid, _ in self.sessions}
        open_turn = {sid: None for sid, _ in self.sessions}
        quiet = 0
        while time.monotonic() < deadline:
            busy = 0
            for sid, _ in self.sessions:
                inst = self.inst(rng)
                busy += self.decide(rng, sid, inst, racers=1, settle=True)
                while True:
                    status, page = self.http.call(
                        "settle_log", inst, "GET", "/v1/sessions/%s/events?after=%d&limit=200"
                        % (sid, cursor[sid]), record=False)
                    if status != 200 or not page.get("items"):
                        break
                    for e in page["items"]:
                        if e["type"] == "turn_begin":
                            open_turn[sid] = e["turn_id"]
                        elif e["type"] == "turn_end":
                            open_turn[sid] = None
                        cursor[sid] = e["seq"]
                status, s = self.http.call("settle_get", inst, "GET", "/v1/sessions/%s" % sid,
                                           extra={"sid": sid})
                if status != 200 or not isinstance(s, dict):
                    busy += 1
                    continue
                if s.get("status") in ("running", "queued", "paused") or s.get("running_turn"):
                    busy += 1
                elif open_turn[sid]:
                    busy += 1
                    self.http.call("settle_turn", inst, "GET", "/v1/sessions/%s/turns/%s"
                                   % (sid, open_turn[sid]), extra={"sid": sid})
            quiet = quiet + 1 if busy == 0 else 0
            if quiet >= 2:
                return True
            time.sleep(1)
        return False

    def outbox_rows(self):
        """The store's notification outbox: [{id, event, delivered}] (a row
        is delivered, or refused for good, when its due time is cleared;
        docs/storage.md), or None when the store could not be read."""
        try:
            if self.cluster is not None:
                out = self.cluster.psql(
                    "SELECT id || ' ' || event || ' ' || (due_at_ms IS NULL)::text"
                    " FROM chaos.notification_outbox ORDER BY created_at_ms, id")
                rows = [l.split(" ") for l in out.splitlines() if l.strip()]
            else:
                import sqlite3
                db = sqlite3.connect(os.path.join(self.dir, "data", "sessions.db"), timeout=30)
                try:
                    rows = db.execute("SELECT id, event, due_at_ms IS NULL FROM"
                                      " notification_outbox ORDER BY created_at_ms, id").fetchall()
                finally:
                    db.close()
        except Exception:
            self.history.write({"t": "harness_error", "trace": traceback.format_exc()})
            return None
        return [{"id": r[0], "event": r[1], "delivered": r[2] in (1, "true")} for r in rows]

    def drain_outbox(self):
        """Waits until every outbox row is delivered (the senders' retries and
        the outbox sweep, every NOTIFY_RETRY_S), at most 60 s, and records the
        outbox in the history."""
        deadline = time.monotonic() + 60
        rows = None
        while True:
            rows = self.outbox_rows()
            if rows is None or all(r["delivered"] for r in rows) or \
                    time.monotonic() > deadline:
                break
            time.sleep(1)
        self.history.write({"t": "outbox", "rows": rows})

    def read_stored(self):
        out = {}
        rng = random.Random(self.args.seed + 6)
        for sid, tag in self.sessions:
            events, after = [], 0
            for _ in range(10000):
                status, page = self.http.call(
                    "read_log", self.inst(rng), "GET",
                    "/v1/sessions/%s/events?after=%d&limit=200" % (sid, after), record=False)
                if status != 200:
                    time.sleep(0.5)
                    continue
                events += page["items"]
                if not page.get("next_after") or not page["items"]:
                    break
                after = page["items"][-1]["seq"]
            out[sid] = {"tag": tag, "events": events}
        with open(os.path.join(self.dir, "stored.jsonl"), "w", encoding="utf-8") as f:
            for sid, v in out.items():
                f.write(json.dumps({"sid": sid, "tag": v["tag"], "events": v["events"]}) + "\n")
        return out

    def wait_watchers(self, watchers, stored):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            behind = [w for w in watchers
                      if stored[w.sid]["events"] and w.last < stored[w.sid]["events"][-1]["seq"]]
            if not behind:
                return
            time.sleep(0.5)

    def print_schedule(self, out=sys.stdout):
        print("chaos: seed %d, store %s, %d instance(s), %s min, %d sessions, %d clients"
              % (self.args.seed, self.args.store, len(self.instances) or self.args.instances,
                 self.args.minutes, self.args.sessions, self.args.clients), file=out)
        print("chaos: fault schedule (at s, kind, target, duration s):", file=out)
        for f in self.schedule:
            print("  %7.2f %-12s %-3s %6.2f" % f, file=out)
        out.flush()

    def teardown(self):
        self.stop.set()
        self.watchers_stop.set()
        for inst in self.instances:
            inst.stop()
        if self.model:
            self.model.stop()
        if self.hook:
            self.hook.stop()
        for p in self.proxies:
            p.stop()
        if self.cluster is not None:
            self.cluster.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--store", choices=["sqlite", "postgres"], required=True)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--pace", type=float, default=1.0, help="scales the clients' pauses")
    ap.add_argument("--fault-gap", type=float, default=12.0,
                    help="mean seconds between the end of one fault and the next")
    ap.add_argument("--faults", default="", help="comma-separated fault kinds (default: all "
                    "of the store's: %s / %s)" % (",".join(SQLITE_FAULTS), ",".join(PG_FAULTS)))
    ap.add_argument("--settle-s", type=float, default=180)
    ap.add_argument("--out", default="", help="directory for the history, emptied first "
                    "(default: a new temporary one, kept only when the run fails)")
    ap.add_argument("--skip-if-no-pg", action="store_true")
    ap.add_argument("--known", default="",
                    help="comma-separated invariants whose violations are reported without "
                    "failing the run (the open findings of docs/reliability.md, e.g. "
                    "uncommitted)")
    args = ap.parse_args()
    if args.store == "sqlite":
        args.instances = 1
    run = Run(args)
    rc = run.setup()
    run.print_schedule()
    print("chaos: history in %s" % run.dir, flush=True)
    if rc != 0:
        run.teardown()
        return rc
    try:
        run.create_sessions()
        watchers = [Watcher(run, sid, args.seed * 31 + i)
                    for i, (sid, _) in enumerate(run.sessions)]
        for w in watchers:
            w.start()
        clients = [threading.Thread(target=run.client, args=(n,), daemon=True)
                   for n in range(args.clients)]
        for c in clients:
            c.start()
        faults = threading.Thread(target=run.fault_loop, daemon=True)
        faults.start()
        run.stop.wait(args.minutes * 60)
        run.stop.set()
        for c in clients:
            c.join()
        faults.join()
        run.settling.set()
        run.heal()
        settled = run.settle()
        run.history.write({"t": "settled", "ok": settled})
        run.drain_outbox()
        stored = run.read_stored()
        run.wait_watchers(watchers, stored)
        run.watchers_stop.set()
        for w in watchers:
            w.close_now()
        for w in watchers:
            w.join(timeout=45)
        side = os.path.join(run.ws, "side.log")
        shutil.copy(side, os.path.join(run.dir, "side.log")) if os.path.exists(side) else None
    finally:
        run.teardown()
        counts = dict(run.history.counts)
        run.history.close()
    report = check.check_dir(run.dir)
    known = [k for k in args.known.split(",") if k]
    print("chaos: operations: %s" % json.dumps(counts, sort_keys=True))
    print("chaos: model requests %d, faulted %d" % (run.model.requests, run.model.faulted))
    print("chaos: webhook attempts %d, failed on purpose %d"
          % (run.hook.received, run.hook.failed))
    print("chaos: faults injected: %s" % json.dumps(
        {k: sum(1 for f in run.faults_done if f[1] == k)
         for k in sorted({f[1] for f in run.faults_done})}))
    print(report.text())
    if report.violations and not report.failing(known):
        print("chaos: only violations of known open findings (--known %s)" % args.known)
    if not settled:
        print("chaos: the system did not settle within %ds" % args.settle_s)
    if report.failing(known):
        print("chaos: FAILED: replay with --seed %d --store %s --minutes %s"
              % (args.seed, args.store, args.minutes))
        run.print_schedule()
        return 1
    print("chaos: OK")
    if not args.out:
        shutil.rmtree(run.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
