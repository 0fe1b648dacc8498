"""A real `agentloop serve` for the tests: its agent `writer` answers from
agentloop-fake-server playing a script, and the server requires a bearer
token. The binaries come from AGENTLOOP_BIN and AGENTLOOP_FAKE_SERVER (set
by CTest); without them the live tests are skipped."""

import hashlib
import json
import os
import re
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time

BIN = os.environ.get("AGENTLOOP_BIN")
FAKE = os.environ.get("AGENTLOOP_FAKE_SERVER")
LIVE = bool(BIN and FAKE)
START_TIMEOUT = 60  # only a hung binary reaches it


class LiveServer:
    def __init__(self, script):
        self.tmp = tempfile.mkdtemp(prefix="al_sdk_py_")
        home = os.path.join(self.tmp, "home")
        self.ws = os.path.join(self.tmp, "ws")
        os.makedirs(self.ws)
        with open(os.path.join(self.ws, "notes.txt"), "w") as f:
            f.write("one\ntwo\n")
        script_path = os.path.join(self.tmp, "script.json")
        with open(script_path, "w") as f:
            json.dump(script, f)
        self.procs = []
        fake = subprocess.Popen([FAKE, "--port", "0", "--script", script_path, "--exit-on-stdin-eof"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(fake)
        line = fake.stdout.readline().strip()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError("the fake model did not start: %r" % line)
        port = int(line.split()[1])
        agent = os.path.join(home, ".config", "agentloop", "agents", "writer")
        os.makedirs(agent)
        with open(os.path.join(agent, "agent.toml"), "w") as f:
            f.write('[agent]\ndescription = "writes files"\nworkspace = "%s"\n\n'
                    '[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:%d"\nmodel = "m"\n'
                    'api_key_env = "WRITER_KEY"\n' % (self.ws, port))
        self.token = "tok-sdk-" + hashlib.sha256(self.tmp.encode()).hexdigest()[:16]
        grant = hashlib.sha256(self.token.encode()).hexdigest() + ":team:read,write,approve"
        with open(os.path.join(home, ".config", "agentloop", "config.toml"), "w") as f:
            f.write("[server]\ntokens = %s\n" % json.dumps([grant]))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
               "AGENTLOOP_HOME": os.path.join(self.tmp, "data"), "LANG": "C.UTF-8", "WRITER_KEY": "sk-test"}
        serve = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                 cwd=self.tmp)
        self.procs.append(serve)
        deadline = time.monotonic() + START_TIMEOUT
        self.base_url = None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([serve.stderr], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = serve.stderr.readline()
            m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.base_url = m.group(1)
                break
            if not line:
                break
        if self.base_url is None:
            self.stop()
            raise RuntimeError("agentloop serve did not start: %r" % line)
        # Drain the server's log so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in serve.stderr], daemon=True).start()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            for s in (p.stdin, p.stdout):
                if s:
                    s.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class CuttingProxy:
    """A TCP proxy to `target` that cuts the first connection whose answer
    is an event stream after `limit` bytes of that answer (in the middle of
    a frame); every other byte passes, but for the requests' Host header,
    which names the target as a reverse proxy's would (the server refuses a
    Host that is not one of its names)."""

    def __init__(self, target, limit):
        host, port = target.rsplit("//", 1)[1].split(":")
        self.upstream = (host, int(port))
        self.limit = limit
        self.cuts = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                down, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(down, up, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, down, True), daemon=True).start()

    def _pipe(self, src, dst, answers):
        seen = -1
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not answers:
                    data = re.sub(rb"(?im)^(host:[ \t]*)127\.0\.0\.1:%d\b" % self.port,
                                  rb"\g<1>127.0.0.1:%d" % self.upstream[1], data)
                if answers:
                    with self.lock:
                        if seen < 0 and self.cuts == 0 and b"text/event-stream" in data:
                            seen = 0
                        if seen >= 0 and self.cuts == 0:
                            if seen + len(data) >= self.limit:
                                self.cuts += 1
                                dst.sendall(data[:self.limit - seen])
                                break
                            seen += len(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.closed = True
        self.sock.close()
