"""A local HTTP server on 127.0.0.1 for the unit tests: each request is
recorded and answered by `handler(h, n)` (h: the request handler with
`body` read, n: the 0-based request count)."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Stub:
    def __init__(self, handler):
        self.requests = []
        stub = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n_body = int(self.headers.get("content-length") or 0)
                self.body = self.rfile.read(n_body).decode() if n_body else ""
                n = len(stub.requests)
                stub.requests.append({"method": self.command, "path": self.path,
                                      "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": self.body})
                handler(self, n)

            do_GET = do_POST = do_PATCH = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        # A client that closes its end (a stream it has read enough of) is no error.
        self.server.handle_error = lambda request, client_address: None
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def send_json(h, status, body, headers=None):
    data = json.dumps(body).encode()
    h.send_response(status)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def problem(h, status, code, headers=None):
    body = {"type": "urn:agentloop:problem:" + code, "title": "t", "status": status,
            "detail": "detail of " + code, "code": code}
    data = json.dumps(body).encode()
    h.send_response(status)
    h.send_header("content-type", "application/problem+json")
    h.send_header("content-length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def start_stream(h):
    h.send_response(200)
    h.send_header("content-type", "text/event-stream")
    h.send_header("transfer-encoding", "chunked")
    h.end_headers()


def chunk(h, text):
    data = text.encode()
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def end_stream(h):
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


def drop(h):
    """Cuts the connection (no terminating chunk)."""
    h.wfile.flush()
    try:
        h.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    h.close_connection = True


def frame(ev, frame_id=None):
    fid = frame_id if frame_id is not None else (str(ev["seq"]) if ev.get("seq") else None)
    return "%sevent: %s\ndata: %s\n\n" % ("id: %s\n" % fid if fid else "", ev["type"], json.dumps(ev))


def ev(seq, type_, **extra):
    return dict({"type": type_, "session_id": "s1", "turn_id": "t1", "seq": seq}, **extra)
