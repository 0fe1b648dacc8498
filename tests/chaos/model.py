"""The chaos suite's model: an OpenAI Chat Completions server (streamed) on
127.0.0.1 whose answer depends only on the request, so that any number of
sessions can run turns against it at once, in any order, and a retried
request gets an answer of the same kind.

A prompt `chaos:<kind>:<tag>` asks for the tool calls of <kind> (ids that are
unique in the whole run, so the side file names each execution):
  auto     one bash call `echo chaos <tag> <id> >> side.log` (an allow rule
           runs it)
  two      two such calls in one batch
  slow     `sleep 2; echo chaos ...` (allowed: a window to cut the call)
  ask      `echo ask <tag> <id> >> side.log` (no rule: it waits for a
           person's decision)
  asktwo   two such calls in one batch (a denial of one cancels the other)
  question an ask_user question
  text     no tool call
A request whose last message is a tool result, or any other prompt, gets a
short text answer.

Faults (set by the runner at any time, `set_fault`): `429` answers HTTP 429
with a short retry-after; `500` answers HTTP 503; `reset` sends part of the
stream and resets the connection; `hang` waits `hang_s` seconds before the
head. Standard library only."""

import http.server
import itertools
import json
import random
import socket
import socketserver
import struct
import threading
import time


class ChaosModel:

    def __init__(self, seed):
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.rng = random.Random(seed)
        self.fault = None        # None, "429", "500", "reset", "hang"
        self.fault_rate = 1.0    # the share of requests the fault hits
        self.hang_s = 10
        self.requests = 0
        self.faulted = 0
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                try:
                    model.answer(self, body)
                except OSError:
                    pass  # the client went away (a killed instance)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def set_fault(self, kind, rate=1.0):
        with self.lock:
            self.fault = kind
            self.fault_rate = rate

    def next_id(self):
        with self.lock:
            return "k%d" % next(self.ids)

    # --- the answer -------------------------------------------------------

    def plan(self, body):
        """(text, [(id, name, arguments)]) for the request `body`."""
        msgs = body.get("messages") or []
        last = msgs[-1] if msgs else {}
        if last.get("role") != "user":
            return "done", []
        content = last.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        words = (content or "").split()
        prompt = next((w for w in words if w.startswith("chaos:")), None)
        if prompt is None:
            return "ok", []
        parts = prompt.split(":")
        kind, tag = parts[1], parts[2] if len(parts) > 2 else "x"

        def echo(word, i):
            return "echo %s %s %s >> side.log" % (word, tag, i)

        if kind in ("auto", "two", "slow", "ask", "asktwo"):
            calls = []
            for _ in range(2 if kind in ("two", "asktwo") else 1):
                i = self.next_id()
                cmd = echo("ask" if kind.startswith("ask") else "chaos", i)
                if kind == "slow":
                    cmd = "sleep 2; " + cmd
                calls.append((i, "bash", {"command": cmd}))
            return "", calls
        if kind == "question":
            return "", [(self.next_id(), "ask_user", {"question": "colour for %s?" % tag})]
        return "text for " + tag, []

    def answer(self, h, body):
        with self.lock:
            self.requests += 1
            fault = self.fault if self.rng.random() < self.fault_rate else None
            if fault:
                self.faulted += 1
        if fault == "hang":
            time.sleep(self.hang_s)
        if fault in ("429", "500"):
            raw = json.dumps({"error": {"message": "chaos " + fault,
                                        "type": "rate_limit_error" if fault == "429"
                                        else "server_error"}}).encode()
            h.send_response(429 if fault == "429" else 503)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(raw)))
            h.send_header("retry-after-ms", "300")
            h.end_headers()
            h.wfile.write(raw)
            return
        text, calls = self.plan(body)
        frames = self.frames(text, calls)
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        if fault == "reset":
            frames = frames[:max(1, len(frames) // 2)]
        for f in frames:
            h.wfile.write(f.encode())
            h.wfile.flush()
        if fault == "reset":
            # An abortive close: the client sees a connection reset.
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
            h.close_connection = True
            return
        h.close_connection = True

    @staticmethod
    def frames(text, calls):
        def chunk(delta, finish=None):
            return "data: %s\n\n" % json.dumps({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        out = [chunk({"role": "assistant", "content": ""})]
        if text:
            out.append(chunk({"content": text}))
        for index, (cid, name, args) in enumerate(calls):
            out.append(chunk({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                              "function": {"name": name, "arguments": ""}}]}))
            out.append(chunk({"tool_calls": [{"index": index, "function": {
                "arguments": json.dumps(args)}}]}))
        out.append(chunk({}, "tool_calls" if calls else "stop"))
        out.append("data: %s\n\n" % json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                     "total_tokens": 15}}))
        out.append("data: [DONE]\n\n")
        return out
