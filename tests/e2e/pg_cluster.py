"""A throwaway PostgreSQL cluster for the end-to-end tests.

initdb into a temporary directory, a postmaster on a free 127.0.0.1 port and a
Unix socket in that directory, stopped and deleted by stop(). When the tests
run as root, the server programs run as the `postgres` user (initdb refuses
root). The programs get an environment of their own; the process environment
is neither read for them nor changed.

PgCluster.start() raises PgUnavailable (with the reason) when there is no
server to run, so a test can skip with that reason.
"""

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

from e2e_util import TIMEOUT
from serve_util import ServeCase

CHILD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"}


class PgUnavailable(Exception):
    pass


def _bindir():
    best = None
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        if os.path.exists(os.path.join(d, "initdb")):
            try:
                major = int(d.split("/")[-2])
            except ValueError:
                continue
            if best is None or major > best[0]:
                best = (major, d)
    return best[1] if best else None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:

    def __init__(self, durable=False):
        self.durable = durable  # fsync and synchronous_commit on (benchmarks)
        self.bindir = _bindir()
        self.dir = None
        self.port = None
        self.running = False
        self.schemas = 0
        self.user = None  # run the server programs as this account (when root)

    def _run(self, args, check=True):
        kwargs = {}
        if self.user is not None:
            kwargs["user"] = self.user.pw_uid
            kwargs["group"] = self.user.pw_gid
            kwargs["extra_groups"] = []
        p = subprocess.run(args, env=CHILD_ENV, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120, **kwargs)
        if check and p.returncode != 0:
            raise PgUnavailable("%s failed (exit %d): %s\nserver log: %s" % (
                os.path.basename(args[0]), p.returncode, p.stdout[-2000:], self.log_tail()))
        return p

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "server.log"), encoding="utf-8",
                      errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def start(self):
        if self.bindir is None:
            raise PgUnavailable("no PostgreSQL server programs under /usr/lib/postgresql/*/bin "
                                "(scripts/install-deps.sh installs postgresql-15)")
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                raise PgUnavailable("running as root and there is no `postgres` user to run "
                                    "initdb as (initdb refuses root)")
        self.dir = tempfile.mkdtemp(prefix="al_pg_")
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self._run([os.path.join(self.bindir, "initdb"), "-D", os.path.join(self.dir, "data"),
                   "-A", "trust", "-U", "agentloop", "-E", "UTF8", "--no-sync",
                   "--no-instructions"])
        last = None
        for _ in range(5):
            self.port = _free_port()
            try:
                self.start_again()
                return self
            except PgUnavailable as e:
                last = e
        raise last

    def _pg_ctl(self, *args):
        return self._run([os.path.join(self.bindir, "pg_ctl"), "-D",
                          os.path.join(self.dir, "data"), "-l",
                          os.path.join(self.dir, "server.log")] + list(args))

    def start_again(self):
        durability = "" if self.durable else "-c fsync=off -c synchronous_commit=off "
        opts = ("-p %d -k %s -c listen_addresses=127.0.0.1 %s-c max_connections=200"
                % (self.port, self.dir, durability))
        self._pg_ctl("-o", opts, "-w", "-t", "60", "start")
        self.running = True

    def stop_server(self):
        """`pg_ctl stop -m fast`, keeping the cluster for start_again()."""
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
        self.running = False

    def restart(self):
        """`pg_ctl restart -m fast`: every connection is cut."""
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "restart")

    def stop(self):
        if self.running:
            self._run([os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                       "-m", "immediate", "-w", "stop"], check=False)
            self.running = False
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def admin_url(self):
        return "postgresql://agentloop@127.0.0.1:%d/postgres" % self.port

    def psql(self, sql, url=None):
        """Runs SQL with psql; returns its unaligned, tuples-only output."""
        p = subprocess.run([os.path.join(self.bindir, "psql"), url or self.admin_url(), "-X",
                            "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=CHILD_ENV, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError("psql %r: %s" % (sql, p.stderr))
        return p.stdout.strip()

    def new_schema_url(self):
        """A URL whose connections use a new empty schema (a database of the
        test's own, without the cost of CREATE DATABASE)."""
        self.schemas += 1
        name = "e2e_%d_%d" % (os.getpid(), self.schemas)
        self.psql("CREATE SCHEMA " + name)
        return self.admin_url() + "?options=-csearch_path%3D" + name


class PgServeCase(ServeCase):
    """A test class with one throwaway cluster for all its tests (skipped
    with the reason when PostgreSQL is not installed) and a schema of its
    own per test: `url` (its store URL), `schema`, `count(sql)`."""

    cluster = None
    skip_reason = None
    # Variables every instance of the class's tests starts with (serve_pg).
    serve_env = {}

    @classmethod
    def setUpClass(cls):
        try:
            cls.cluster = PgCluster().start()
        except PgUnavailable as e:
            cls.skip_reason = str(e)

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls.cluster.stop()

    def setUp(self):
        if self.skip_reason:
            self.skipTest("no PostgreSQL cluster: " + self.skip_reason)
        super().setUp()
        self.url = self.cluster.new_schema_url()
        self.schema = self.url.rsplit("%3D", 1)[1]

    def count(self, sql):
        return int(self.cluster.psql("SET search_path = %s; %s" % (self.schema, sql)))

    def serve_pg(self, **env):
        """Starts an `agentloop serve` instance on the test's schema, with the
        agent's key, `serve_env` and the variables `env`; returns (process,
        base URL)."""
        return self.start_serve(self.env(AGENTLOOP_STORE_URL=self.url, WRITER_KEY="sk-test",
                                         **dict(self.serve_env, **env)))

    def two_instances(self, model, allow=(), **env):
        """Writes the `writer` agent for the fake model `model` (with the
        tools `allow` allowed), starts instances A and B on the test's schema
        with the variables `env`, and creates a session on A: returns
        (process A, process B, A's URL, B's URL, the session's id)."""
        extra = "\n[permissions]\nallow = %s\n" % json.dumps(list(allow)) if allow else ""
        self.write_agent(model.base_url, extra=extra)
        proc_a, a = self.serve_pg(**env)
        proc_b, b = self.serve_pg(**env)
        status, s = self.call(a, "POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        return proc_a, proc_b, a, b, s["id"]

    def stored_events(self, base, sid):
        """The session's stored log read from the instance at `base`, checked
        gap-free from seq 1."""
        status, page = self.call(base, "GET", "/v1/sessions/%s/events?limit=200" % sid)
        self.assertEqual(status, 200, page)
        seqs = [e["seq"] for e in page["items"]]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)))
        return page["items"]

    def call(self, base, method, path, body=None):
        """(status, parsed body) of a call to the instance at `base`."""
        status, _, parsed = self.http(method, path, body, base=base)
        return status, parsed

    def wait_for(self, what, predicate):
        """The first true value of predicate(), polled until TIMEOUT."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            got = predicate()
            if got:
                return got
            time.sleep(0.05)
        self.fail("timed out waiting for " + what)

def tool_ids(events):
    """The tool_use ids and the tool_use_ids of the tool results of the
    `message` events of a session's log, in order: a valid transcript has
    the same two lists."""
    uses, results = [], []
    for e in events:
        if e["type"] != "message":
            continue
        for block in e["message"]["content"]:
            if block.get("type") == "tool_use":
                uses.append(block["id"])
            elif block.get("type") == "tool_result":
                results.append(block["tool_use_id"])
    return uses, results


class EventStream:
    """GET .../events/stream?after=N read on a thread until `turns` turn_ends."""

    def __init__(self, base, sid, after, turns=1):
        self.events = []
        self.error = None
        self.turns = turns
        req = urllib.request.Request("%s/v1/sessions/%s/events/stream?after=%d"
                                     % (base, sid, after))
        req.add_header("Accept", "text/event-stream")
        self.resp = urllib.request.urlopen(req, timeout=TIMEOUT)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        try:
            data, ends = None, 0
            for raw in self.resp:
                line = raw.decode("utf-8").rstrip("\n")
                if line.startswith("data: "):
                    data = json.loads(line[len("data: "):])
                elif line == "" and data is not None:
                    if data.get("seq"):
                        self.events.append(data)
                    if data.get("type") == "turn_end":
                        ends += 1
                        if ends == self.turns:
                            return
                    data = None
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.done.set()
            self.resp.close()

    def wait(self, test):
        test.assertTrue(self.done.wait(TIMEOUT), "not %d turn_end(s) on the stream: %s"
                        % (self.turns, [e["type"] for e in self.events]))
        test.assertIsNone(self.error)
        return self.events
