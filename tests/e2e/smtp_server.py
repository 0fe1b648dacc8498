"""A real SMTP server for the email channel's end-to-end tests: Debian's
aiosmtpd (python3-aiosmtpd) on 127.0.0.1, with STARTTLS required (or TLS
from the start with --implicit-tls; none with --plain) and AUTH required (PLAIN and LOGIN,
only after TLS).

Every message accepted is written as <out>/<n>.eml with its envelope in
<n>.json (and `attempt`: how many messages reached DATA so far, this one
included). --refuse N answers the first N messages' DATA with 554 (nothing
kept); --stall N holds the first N messages' DATA for --stall-s seconds and
then refuses them (the client has timed out by then; nothing kept).
Prints "PORT <n>" on stdout once listening, and "DATA <n>" as the n-th
message reaches DATA; ends when stdin closes.

Run by the tests with an interpreter that has aiosmtpd (the system's
python3 on Debian)."""

import argparse
import asyncio
import json
import os
import ssl
import sys
import threading
import warnings

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, SMTP


class Handler:
    def __init__(self, args):
        self.args = args
        self.count = 0
        self.seen = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.seen += 1
            n = self.seen
        print("DATA %d" % n, flush=True)
        if n <= self.args.refuse:
            return "554 5.7.1 refused for now"
        if n <= self.args.refuse + self.args.stall:
            await asyncio.sleep(self.args.stall_s)
            return "451 4.3.0 too slow"
        with self.lock:
            self.count += 1
            k = self.count
        with open(os.path.join(self.args.out, "%d.eml" % k), "wb") as f:
            f.write(envelope.original_content or envelope.content)
        meta = {"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos,
                "tls": session.ssl is not None or self.args.implicit_tls,
                "auth": session.authenticated,
                "attempt": n}
        tmp = os.path.join(self.args.out, "%d.json.tmp" % k)
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.rename(tmp, os.path.join(self.args.out, "%d.json" % k))
        return "250 OK"


class Auth:
    def __init__(self, user, password):
        self.user, self.password = user.encode(), password.encode()

    def __call__(self, server, session, envelope, mechanism, data):
        ok = (data is not None and data.login == self.user and data.password == self.password)
        return AuthResult(success=ok, handled=False)


class TlsController(Controller):
    def __init__(self, handler, args, ctx):
        self.args, self.ctx = args, ctx
        super().__init__(handler, hostname="127.0.0.1", port=args.port,
                         ssl_context=ctx if args.implicit_tls else None)

    def factory(self):
        if self.args.plain:
            return SMTP(self.handler, hostname="smtp.test")
        return SMTP(self.handler, tls_context=None if self.args.implicit_tls else self.ctx,
                    require_starttls=not self.args.implicit_tls, auth_required=True,
                    # With TLS from the start aiosmtpd does not see the
                    # session as TLS; the connection is TLS all the same.
                    auth_require_tls=not self.args.implicit_tls,
                    authenticator=Auth(self.args.user, self.args.password),
                    hostname="smtp.test")


def main():
    # aiosmtpd's own use of a deprecated attribute during AUTH.
    warnings.filterwarnings("ignore", message="Session.login_data")
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--refuse", type=int, default=0)
    p.add_argument("--stall", type=int, default=0)
    p.add_argument("--stall-s", type=float, default=5)
    p.add_argument("--implicit-tls", action="store_true")
    p.add_argument("--plain", action="store_true", help="no TLS offered, no AUTH")
    args = p.parse_args()
    if args.port == 0:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        args.port = s.getsockname()[1]
        s.close()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(args.cert, args.key)
    c = TlsController(Handler(args), args, ctx)
    c.start()
    print("PORT %d" % args.port, flush=True)
    sys.stdin.read()
    c.stop()


if __name__ == "__main__":
    main()
