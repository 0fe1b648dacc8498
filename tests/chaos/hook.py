"""The chaos suite's webhook receiver: an HTTP server on 127.0.0.1 that
records every notification POST the instances make (a `[[notify]]` webhook
channel of the chaos agent, docs/notifications.md) and answers some of them
with a failure, so that their retries are exercised.

Which attempts fail depends only on the delivery id (`X-Agentloop-Delivery`)
and the attempt's number for that id: about 70 % of deliveries are accepted
at their first attempt, 20 % fail their first one or two attempts (the
sender's own retries deliver them), 10 % fail their first six (more than
the sender's five attempts in a row: the outbox sweep delivers them). A
failure is a 503, a 429 or a connection closed without an answer.

Every attempt is handed to `record` as a dict: the delivery id, the event,
the pending id, the session and turn, the attempt's number and the answer
given (`answer`: 200, 503, 429 or `dropped`) and whether its signature
(`X-Agentloop-Signature`, HMAC-SHA256 of the body with the channel's
secret) is right. Standard library only."""

import hashlib
import hmac
import http.server
import json
import socketserver
import threading


class HookReceiver:

    def __init__(self, seed, secret, record):
        self.seed = seed
        self.secret = secret.encode()
        self.record = record
        self.lock = threading.Lock()
        self.attempts = {}   # delivery id -> attempts seen
        self.received = 0
        self.failed = 0
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                hook.receive(self, raw)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d/hook" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def failures_for(self, delivery):
        """How many first attempts of `delivery` fail (0, 1, 2 or 6)."""
        h = hashlib.sha256(("%d:%s" % (self.seed, delivery)).encode()).digest()
        r = h[0] / 256.0
        if r < 0.70:
            return 0
        if r < 0.90:
            return 1 + h[1] % 2
        return 6

    def receive(self, h, raw):
        delivery = h.headers.get("X-Agentloop-Delivery", "")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        with self.lock:
            self.attempts[delivery] = self.attempts.get(delivery, 0) + 1
            attempt = self.attempts[delivery]
            self.received += 1
        fail = attempt <= self.failures_for(delivery)
        how = ("dropped", 503, 429)[attempt % 3] if fail else 200
        self.record({"t": "hook", "delivery": delivery,
                     "event": h.headers.get("X-Agentloop-Event", ""),
                     "signed": hmac.compare_digest(
                         h.headers.get("X-Agentloop-Signature", ""),
                         "sha256=" + hmac.new(self.secret, raw, hashlib.sha256).hexdigest()),
                     "pending_id": body.get("pending_id"), "sid": body.get("session_id"),
                     "turn_id": body.get("turn_id"), "attempt": attempt,
                     "answer": how})
        if fail:
            with self.lock:
                self.failed += 1
        if how == "dropped":
            h.close_connection = True
            return
        out = b"{}"
        h.send_response(how)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(out)))
        if how == 429:
            h.send_header("Retry-After", "1")
        h.end_headers()
        h.wfile.write(out)
