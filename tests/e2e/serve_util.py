"""`agentloop serve` as a process for end-to-end tests: a served agent
`writer` whose model is a fake model server, the server started on a free
port of 127.0.0.1 (its address read from its first lines), and HTTP calls to
it. Every server a test starts is killed when the test ends."""

import json
import os
import re
import select
import subprocess
import threading
import time
import urllib.error
import urllib.request

from e2e_util import BIN, TIMEOUT, CliTestCase


def start_serve_process(binary, env, cwd, port=0, timeout=TIMEOUT, no_auth=True):
    """Starts `binary serve` on 127.0.0.1:`port` (0: a free one), with
    --no-auth when `no_auth` (then it must have no server.tokens), and returns
    (process, base URL, line) once it says where it listens, or (process,
    None, the last line it wrote) when it did not within `timeout` seconds.
    Its stderr stays a pipe the caller may read."""
    args = [binary, "serve", "--listen", "127.0.0.1:%d" % port]
    if no_auth:
        args.append("--no-auth")
    p = subprocess.Popen(args,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = p.stderr.readline()
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return p, "http://127.0.0.1:%s" % m.group(1), line
        if not line:
            break
    return p, None, line


def next_stderr_line(proc, timeout=TIMEOUT):
    """The next line `proc` (start_serve_process) writes to stderr, or None
    when none came within `timeout` seconds. (The pipe's reader may hold the
    line already, so the pipe itself is not polled.)"""
    got = []
    t = threading.Thread(target=lambda: got.append(proc.stderr.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return got[0] if got else None


class ServeCase(CliTestCase):
    """Starts `agentloop serve` and calls it (no tests of its own)."""

    def setUp(self):
        super().setUp()
        self.procs = []
        # Without configured tokens the servers serve with --no-auth.
        self.serve_tokens = False

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        super().tearDown()

    def write_agent(self, base_url, tokens=None, extra=""):
        """The agent `writer` on the model at `base_url`, in the workspace;
        `tokens` are [server] token grants of config.toml; `extra` is TOML
        appended to agent.toml."""
        d = os.path.join(self.home, ".config", "agentloop", "agents", "writer")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "agent.toml"), "w", encoding="utf-8") as f:
            f.write('[agent]\ndescription = "writes files"\nworkspace = "%s"\n\n'
                    '[provider]\nkind = "openai"\nbase_url = "%s"\nmodel = "m"\n'
                    'api_key_env = "WRITER_KEY"\n%s' % (self.ws, base_url, extra))
        self.serve_tokens = bool(tokens)
        if tokens:
            cfg = os.path.join(self.home, ".config", "agentloop", "config.toml")
            with open(cfg, "w", encoding="utf-8") as f:
                f.write("[server]\ntokens = %s\n" % json.dumps(tokens))

    def start_serve(self, env=None, port=0):
        """Starts a server on `port` (0: a free one) with the environment
        `env` (default: the test's, with the agent's key) and returns
        (process, base URL). Its stderr stays a pipe the test may read."""
        if env is None:
            env = self.env(WRITER_KEY="sk-test")
        p, base, line = start_serve_process(BIN, env, self.tmp, port,
                                            no_auth=not self.serve_tokens)
        self.procs.append(p)
        if base is None:
            self.fail("serve did not start: %r" % line)
        return p, base

    def serve(self, port=0):
        """Starts a server (start_serve) and makes it self.base."""
        p, self.base = self.start_serve(port=port)
        return p

    def http(self, method, path, body=None, headers=None, token=None, base=None):
        """(status, headers, parsed JSON body or text) of a call to `base`
        (default self.base)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request((base or self.base) + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                raw, status, hdrs = r.read(), r.status, r.headers
        except urllib.error.HTTPError as e:
            raw, status, hdrs = e.read(), e.code, e.headers
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        return status, hdrs, parsed
