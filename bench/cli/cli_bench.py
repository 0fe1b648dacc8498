#!/usr/bin/env python3
"""Whole-process benchmarks of the `agentloop` command (docs/bench/cli.md).

  1. start → first request: from the fork of `agentloop run` to the moment the
     model server has received the whole first request, head and body (a tiny
     in-process listener records that time, and the time it accepted the
     connection, and answers one streamed OpenAI Chat completion). agentloop
     opens its connection while it prepares the session, so the accept alone
     would flatter it.
     With an https base URL, the same listener records when the TLS
     ClientHello arrives: what a user of a real (TLS) provider waits for before
     the handshake can even start (TLS set-up and the system trust store
     included). The handshake itself then fails (the listener is no TLS
     server), which ends the run.
  2. a 50-step scripted run end to end (49 `read` tool calls and a final
     answer) against agentloop-fake-server, vs the fake server answering the
     same 50 requests (recorded from the run: the growing transcript, tools
     and all) to a plain keep-alive HTTP client. A 1-step run gives the fixed
     cost of a process, so (50-step - 1-step) / 49 is the cost of a step.
  3. peak RSS of that run (/usr/bin/time -v, "Maximum resident set size").

Usage:
  bench/cli/cli_bench.py --bin build/rel/apps/cli/agentloop \
      --fake-server build/rel/tests/support/agentloop-fake-server [--runs 15] [--data-dir DIR]
      [--sync full|normal]

--data-dir chooses where AGENTLOOP_HOME lives (with store.sync = full, the
default, the session store fsyncs every commit, so the disk matters); default:
a temporary directory under /tmp. --sync sets AGENTLOOP_STORE_SYNC.
Python 3 standard library only; hyperfine is used for (2) when installed.
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

OPENAI_SSE = (
    'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    '{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n'
    'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
    '"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,'
    '"total_tokens":11}}\n\n'
    'data: [DONE]\n\n')


class FirstRequestListener:
    """Accepts connections; records when each one arrived; answers one completion."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self.received = []  # whole first request of each connection
        self.lock = threading.Lock()
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = time.perf_counter()
            with self.lock:
                self.accepted.append(t)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                conn.close()
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        t = time.perf_counter()
        with self.lock:
            self.received.append(t)
        payload = OPENAI_SSE.encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: " + str(len(payload)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + payload)
        conn.close()


SYNC = "full"  # set from --sync


def child_env(data_dir, home):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
            "AGENTLOOP_HOME": data_dir, "OPENAI_API_KEY": "sk-bench", "LANG": "C.UTF-8",
            "AGENTLOOP_STORE_SYNC": SYNC}


def bench_first_request(args, ws, data_dir, home):
    listener = FirstRequestListener()
    samples, accepts = [], []
    for _ in range(args.runs):
        n = len(listener.accepted)
        r = len(listener.received)
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [args.bin, "run", "--provider", "openai", "--base-url",
             "http://127.0.0.1:%d" % listener.port, "--model", "gpt-4.1", "-C", ws, "--quiet",
             "hello"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=child_env(data_dir, home))
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            sys.exit("agentloop failed: %s" % err.decode())
        with listener.lock:  # answered, so received before the process ended
            t_accept, t_received = listener.accepted[n], listener.received[r]
        samples.append((t_received - t0) * 1000)
        accepts.append((t_accept - t0) * 1000)
    return samples, accepts


def bench_first_tls_byte(args, ws, data_dir, home):
    """start -> ClientHello received, with an https base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    samples = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [args.bin, "run", "--provider", "openai", "--base-url",
             "https://127.0.0.1:%d" % port, "--model", "gpt-4.1", "-C", ws, "--quiet",
             "hello"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=child_env(data_dir, home))
        sock.settimeout(30)
        conn, _ = sock.accept()
        conn.settimeout(30)
        hello = conn.recv(16)  # the first record's bytes: the ClientHello
        t1 = time.perf_counter()
        if not hello or hello[0] != 0x16:
            sys.exit("expected a TLS handshake record, got %r" % hello)
        samples.append((t1 - t0) * 1000)
        proc.kill()
        proc.wait()
        conn.close()
    sock.close()
    return samples


def bench_process_floor(args, runs):
    """Fork+exec+exit of `agentloop --version` and of /bin/true (machine noise)."""
    out = {}
    for name, cmd in (("agentloop --version", [args.bin, "--version"]), ("/bin/true", ["/bin/true"])):
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL)
            samples.append((time.perf_counter() - t0) * 1000)
        out[name] = samples
    return out


def fifty_step_script(steps=50):
    items = []
    for i in range(steps - 1):
        items.append({"tool_calls": [{"id": "c%d" % i, "name": "read",
                                      "input": {"file_path": "stats.py", "limit": i + 1}}],
                      "usage": {"input_tokens": 100, "output_tokens": 10}})
    items.append({"text": "done", "usage": {"input_tokens": 100, "output_tokens": 1}})
    return {"responses": items}


class FakeServer:
    def __init__(self, binary, script_path, record=None):
        extra = ["--record", record] if record else []
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--script", script_path, "--exit-on-stdin-eof"] + extra,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        self.port = int(line[1])

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run_cmd(args, script_path, ws, port):
    return [args.bin, "run", "--provider", "openai", "--base-url", "http://127.0.0.1:%d" % port,
            "--model", "gpt-4.1", "-C", ws, "--allow", "*", "--max-tool-calls", "100",
            "--max-turns", "100", "--max-tokens", "1000000", "--quiet", "read stats.py 49 times"]


def replay(args, script_path, bodies):
    """The fake server alone: `bodies` POSTed over one keep-alive connection."""
    srv = FakeServer(args.fake_server, script_path)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port)
    t0 = time.perf_counter()
    for body in bodies:
        conn.request("POST", "/chat/completions", body,
                     {"Content-Type": "application/json", "Authorization": "Bearer x"})
        r = conn.getresponse()
        r.read()
    ms = (time.perf_counter() - t0) * 1000
    conn.close()
    srv.stop()
    return ms


def run_agent(args, script_path, ws, data_dir, home, record=None):
    srv = FakeServer(args.fake_server, script_path, record)
    t0 = time.perf_counter()
    p = subprocess.run(run_cmd(args, script_path, ws, srv.port), capture_output=True,
                       env=child_env(data_dir, home), timeout=120)
    ms = (time.perf_counter() - t0) * 1000
    srv.stop()
    if p.returncode != 0:
        sys.exit("agentloop run failed (%d): %s" % (p.returncode, p.stderr.decode()))
    return ms


def bench_fifty_steps(args, ws, data_dir, home, script_path, one_step_path):
    """Returns (agent 50-step ms, agent 1-step ms, server replaying the run's
    own 50 requests ms, server answering 50 tiny requests ms)."""
    record = os.path.join(home, "requests.jsonl")
    run_agent(args, script_path, ws, data_dir, home, record)  # warm-up, and the recording
    with open(record) as f:
        recorded = [json.loads(line) for line in f]
    bodies = [r["body"] if isinstance(r["body"], str) else json.dumps(r["body"])
              for r in recorded]
    if len(bodies) != 50:
        sys.exit("expected 50 recorded requests, got %d" % len(bodies))
    tiny = [json.dumps({"model": "gpt-4.1", "stream": True,
                        "messages": [{"role": "user", "content": "x"}]})] * 50
    agent, one, server, server_tiny = [], [], [], []
    for _ in range(args.runs):
        server.append(replay(args, script_path, bodies))
        server_tiny.append(replay(args, script_path, tiny))
        agent.append(run_agent(args, script_path, ws, data_dir, home))
        one.append(run_agent(args, one_step_path, ws, data_dir, home))
    return agent, one, server, server_tiny


def bench_rss(args, ws, data_dir, home, script_path):
    values = []
    for _ in range(max(3, args.runs // 3)):
        srv = FakeServer(args.fake_server, script_path)
        p = subprocess.run(["/usr/bin/time", "-v"] + run_cmd(args, script_path, ws, srv.port),
                           capture_output=True, text=True, env=child_env(data_dir, home),
                           timeout=120)
        srv.stop()
        for line in p.stderr.splitlines():
            if "Maximum resident set size" in line:
                values.append(int(line.split(":")[1]) / 1024.0)
    return values


def hyperfine_fifty(args, ws, data_dir, home, script_path):
    """hyperfine over the whole run (a fresh fake server per run via --prepare)."""
    if shutil.which("hyperfine") is None:
        return None
    port_file = os.path.join(home, "port")
    # One server per measured run: started by --prepare, stopped by the next.
    prepare = ("pkill -F {pid} 2>/dev/null; ({srv} --port 0 --script {script} > {port} & "
               "echo $! > {pid}); while ! grep -q PORT {port}; do :; done").format(
                   srv=args.fake_server, script=script_path, port=port_file,
                   pid=port_file + ".pid")
    cmd = " ".join(run_cmd(args, script_path, ws, 0)).replace(
        "http://127.0.0.1:0", "http://127.0.0.1:$(cut -d' ' -f2 %s)" % port_file)
    cmd = cmd.replace("read stats.py 49 times", "'read stats.py 49 times'")
    out = os.path.join(home, "hf.json")
    env = dict(os.environ)
    env.update(child_env(data_dir, home))
    r = subprocess.run(["hyperfine", "--runs", str(args.runs), "--prepare", prepare,
                        "--export-json", out, "--shell", "bash", cmd], capture_output=True,
                       text=True, env=env)
    subprocess.run("pkill -F %s.pid" % port_file, shell=True)
    if r.returncode != 0:
        print("hyperfine failed:", r.stderr, file=sys.stderr)
        return None
    with open(out) as f:
        res = json.load(f)["results"][0]
    return res["median"] * 1000, res["stddev"] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fake-server", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--sync", choices=["full", "normal"], default="full")
    ap.add_argument("--examples", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                       "examples"))
    args = ap.parse_args()
    global SYNC
    SYNC = args.sync
    tmp = tempfile.mkdtemp(prefix="al_cli_bench_")
    try:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        data_dir = args.data_dir or os.path.join(tmp, "data")
        ws = os.path.join(tmp, "ws")
        shutil.copytree(os.path.join(args.examples, "demo"), ws)
        script_path = os.path.join(tmp, "fifty.json")
        with open(script_path, "w") as f:
            json.dump(fifty_step_script(), f)
        one_step_path = os.path.join(tmp, "one.json")
        with open(one_step_path, "w") as f:
            json.dump(fifty_step_script(1), f)

        floor = bench_process_floor(args, max(args.runs, 20))
        first, first_accept = bench_first_request(args, ws, data_dir, home)
        first_tls = bench_first_tls_byte(args, ws, data_dir, home)
        agent, one, server, server_tiny = bench_fifty_steps(args, ws, data_dir, home,
                                                            script_path, one_step_path)
        rss = bench_rss(args, ws, data_dir, home, script_path)
        hf = hyperfine_fifty(args, ws, data_dir, home, script_path)

        med = statistics.median
        print("data dir: %s, store.sync = %s" % (data_dir, SYNC))
        for name, samples in floor.items():
            print("process floor, %s: median %.2f ms (min %.2f)" % (name, med(samples),
                                                                   min(samples)))
        print("start -> first request received: median %.2f ms (min %.2f, max %.2f, n=%d)" %
              (med(first), min(first), max(first), len(first)))
        print("start -> its connection accepted: median %.2f ms (min %.2f)" %
              (med(first_accept), min(first_accept)))
        print("start -> TLS ClientHello received (https base URL): median %.2f ms (min %.2f)" %
              (med(first_tls), min(first_tls)))
        print("50-step run: median %.1f ms (min %.1f, n=%d)" % (med(agent), min(agent),
                                                              len(agent)))
        print("1-step run (fixed cost of a process): median %.1f ms (min %.1f)" %
              (med(one), min(one)))
        print("per step: %.2f ms" % ((med(agent) - med(one)) / 49))
        print("fake server alone, the run's 50 recorded requests: median %.1f ms (min %.1f)" %
              (med(server), min(server)))
        print("fake server alone, 50 tiny requests: median %.1f ms (min %.1f)" %
              (med(server_tiny), min(server_tiny)))
        print("ratio run / server (recorded requests): %.2f" % (med(agent) / med(server)))
        print("ratio run / server (tiny requests): %.2f" % (med(agent) / med(server_tiny)))
        if hf:
            print("hyperfine 50-step run: median %.1f ms ± %.1f" % hf)
        print("peak RSS of the 50-step run: median %.1f MB (max %.1f, n=%d)" %
              (med(rss), max(rss), len(rss)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
