"""End-to-end: the email and Slack notification channels of `agentloop serve`
(docs/notifications.md), against a real SMTP server (aiosmtpd, STARTTLS and
AUTH; tests/e2e/smtp_server.py) and a local stand-in of Slack's Web API that
checks every request's shape and signs interactions as Slack does. A relay
that refuses, times out or is down, and a Slack that answers 503, are
retried by the outbox until the notification is delivered, once. Nothing a
model wrote reaches a mail's HTML or a Slack message unescaped, and no
secret reaches the server's log."""

import email
import email.policy
import hashlib
import hmac
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import serve_util
from e2e_util import TIMEOUT

HOSTILE = "<script>alert(1)</script> & <!channel> <@U0123>"
WRITE = {"responses": [
    {"tool_calls": [{"id": "c1", "name": "write",
                     "input": {"file_path": "note.txt", "content": HOSTILE + "\n"}}]},
    {"text": "wrote note.txt"},
]}
PASSWORD = "smtp-pw-9f8e7d"
BOT_TOKEN = "xoxb-test-4c3b2a"
SIGNING = "slack-signing-1a2b3c"


def python_with_aiosmtpd():
    """An interpreter that can import aiosmtpd (python3-aiosmtpd), or None."""
    for exe in (sys.executable, "/usr/bin/python3"):
        if exe and os.path.exists(exe) and subprocess.run(
                [exe, "-c", "import aiosmtpd"], capture_output=True).returncode == 0:
            return exe
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(predicate, what, timeout=TIMEOUT):
    """Polls `predicate` until it returns a true value (returned), failing
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class NotifyCase(serve_util.ServeCase):
    def setUp(self):
        super().setUp()
        self.helpers = []

    def tearDown(self):
        for p in self.helpers:
            if p.poll() is None:
                p.stdin.close()
                p.stdout.close()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        super().tearDown()

    def serve_with(self, notify_toml, env_extra, script=WRITE):
        cfg = os.path.join(self.home, ".config", "agentloop", "config.toml")
        os.makedirs(os.path.dirname(cfg), exist_ok=True)
        with open(cfg, "w", encoding="utf-8") as f:
            f.write("[server]\nnotify_retry_s = 1\n")
        self.write_agent(self.server(script).base_url, extra=notify_toml)
        p, self.base = self.start_serve(env=self.env(WRITER_KEY="sk-test", **env_extra))
        return p

    def pause(self):
        status, _, s = self.http("POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        status, _, t = self.http("POST", "/v1/sessions/%s/turns" % s["id"],
                                 {"input": "write note.txt"})
        self.assertEqual(status, 202, t)
        status, _, w = self.http("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                                 % (s["id"], t["id"]))
        self.assertEqual(w["result"]["stop"], "pending_approval", w)
        return s["id"], t["id"]

    def wait_turn(self, sid, tid):
        status, _, w = self.http("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30" % (sid, tid))
        self.assertEqual(status, 200, w)
        return w["result"]

    def stop_and_check_log(self, proc, secrets):
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
        for s in secrets:
            self.assertNotIn(s, err)
        return err


class EmailTest(NotifyCase):
    def setUp(self):
        super().setUp()
        self.py = python_with_aiosmtpd()
        if self.py is None:
            self.skipTest("aiosmtpd is not installed (Debian: python3-aiosmtpd)")
        self.cert = os.path.join(self.tmp, "cert.pem")
        self.key = os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        self.key, "-out", self.cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=TIMEOUT)
        self.mail_dir = os.path.join(self.tmp, "mail")
        os.makedirs(self.mail_dir)

    def start_smtp(self, *extra, port=0):
        p = subprocess.Popen(
            [self.py, "-B", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "smtp_server.py"),
             "--port", str(port), "--cert", self.cert, "--key", self.key, "--user", "agent",
             "--password", PASSWORD, "--out", self.mail_dir] + list(extra),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.helpers.append(p)
        ready, _, _ = select.select([p.stdout], [], [], TIMEOUT)
        self.assertTrue(ready, "the SMTP server did not start")
        line = p.stdout.readline()
        self.assertTrue(line.startswith("PORT "), line)
        return int(line.split()[1])

    def notify_toml(self, port, extra=""):
        return ('\n[[notify]]\nchannel = "email"\nsmtp_url = "smtp://127.0.0.1:%d"\n'
                'smtp_user = "agent"\nsmtp_password_env = "SMTP_PW"\n'
                'from = "agents@example.com"\nto = ["ops@example.com", "dev@example.com"]\n'
                'ca_file = "%s"\nevents = ["approval.requested", "turn.completed"]\n%s'
                % (port, self.cert, extra))

    def mails(self):
        out = []
        for name in sorted(os.listdir(self.mail_dir)):
            if not name.endswith(".json"):
                continue
            n = name[:-5]
            with open(os.path.join(self.mail_dir, n + ".json")) as f:
                meta = json.load(f)
            with open(os.path.join(self.mail_dir, n + ".eml"), "rb") as f:
                msg = email.message_from_bytes(f.read(), policy=email.policy.default)
            out.append((meta, msg))
        return out

    def of_event(self, event):
        return [m for m in self.mails() if m[1]["X-Agentloop-Event"] == event]

    def test_an_approval_mail_over_starttls_and_auth_after_refusals_is_delivered_once(self):
        port = self.start_smtp("--refuse", "2")
        proc = self.serve_with(self.notify_toml(port), {"SMTP_PW": PASSWORD})
        sid, tid = self.pause()
        mails = wait_for(lambda: self.of_event("approval.requested"), "the approval mail")
        meta, msg = mails[0]
        self.assertTrue(meta["tls"], meta)
        self.assertTrue(meta["auth"], meta)
        self.assertEqual(meta["attempt"], 3, "two refusals, then this one")
        self.assertEqual(meta["mail_from"], "agents@example.com")
        self.assertEqual(meta["rcpt_tos"], ["ops@example.com", "dev@example.com"])
        self.assertIn("writer", msg["Subject"])
        self.assertIn("write", msg["Subject"])
        self.assertTrue(msg["Date"])
        self.assertTrue(msg["Message-ID"].startswith("<dlv_"), msg["Message-ID"])
        self.assertEqual(msg.get_content_type(), "multipart/alternative")
        text = msg.get_body(("plain",)).get_content()
        html = msg.get_body(("html",)).get_content()
        # The diff of the write, the reason, the links.
        self.assertIn("+" + HOSTILE, text)
        self.assertIn("note.txt", text)
        approve = [l.split(": ", 1)[1] for l in text.splitlines() if l.startswith("Approve: ")][0]
        deny = [l.split(": ", 1)[1] for l in text.splitlines() if l.startswith("Deny: ")][0]
        self.assertIn("/v1/links/", approve)
        self.assertIn("/v1/links/", deny)
        # Nothing the model wrote is markup in the HTML part.
        self.assertNotIn("<script>", html)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", html)
        # The link's GET decides nothing (a scanner's prefetch); its POST does.
        with urllib.request.urlopen(approve, timeout=TIMEOUT) as r:
            self.assertIn("Approve this call?", r.read().decode())
        status, _, pending = self.http("GET", "/v1/sessions/%s/pending" % sid)
        self.assertEqual(len(pending["items"]), 1, pending)
        req = urllib.request.Request(approve, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            self.assertIn("Approved", r.read().decode())
        self.assertEqual(self.wait_turn(sid, tid)["stop"], "completed")
        self.assertEqual(self.read_ws("note.txt"), HOSTILE + "\n")
        wait_for(lambda: self.of_event("turn.completed"), "the turn.completed mail")
        # Refused twice, delivered once.
        self.assertEqual(len(self.of_event("approval.requested")), 1)
        self.stop_and_check_log(proc, [PASSWORD])

    def test_a_relay_that_times_out_or_is_down_gets_the_mail_once_it_is_back(self):
        # A relay that is down: connections are accepted and dropped.
        port = free_port()
        lost = socket.socket()
        lost.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lost.bind(("127.0.0.1", port))
        lost.listen(8)
        proc = self.serve_with(self.notify_toml(port, "timeout_s = 2\n"), {"SMTP_PW": PASSWORD})
        self.pause()
        lost.settimeout(TIMEOUT)
        conn, _ = lost.accept()  # an attempt reached it
        conn.close()
        lost.close()
        # Back, but its first answer is too slow: that attempt times out.
        self.start_smtp("--stall", "1", "--stall-s", "6", port=port)
        mails = wait_for(lambda: self.of_event("approval.requested"), "the approval mail")
        self.assertEqual(len(mails), 1)
        self.assertEqual(mails[0][0]["attempt"], 2, "one timed out, then this one")
        err = self.stop_and_check_log(proc, [PASSWORD])
        self.assertEqual(len(self.of_event("approval.requested")), 1, err)

    def test_a_stopping_server_abandons_a_stalled_transfer(self):
        p_port = self.start_smtp("--stall", "1", "--stall-s", "3600")
        smtp = self.helpers[-1]
        proc = self.serve_with(self.notify_toml(p_port, "timeout_s = 600\n"),
                               {"SMTP_PW": PASSWORD})
        self.pause()
        ready, _, _ = select.select([smtp.stdout], [], [], TIMEOUT)
        self.assertTrue(ready, "no message reached the relay")
        self.assertEqual(smtp.stdout.readline().strip(), "DATA 1")
        # The relay holds the transfer (for an hour, the client's timeout is
        # ten minutes): the server still stops.
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, err)
        self.assertNotIn(PASSWORD, err)

    def test_smtps_sends_over_tls_from_the_start(self):
        port = self.start_smtp("--implicit-tls")
        toml = self.notify_toml(port).replace("smtp://", "smtps://")
        proc = self.serve_with(toml, {"SMTP_PW": PASSWORD})
        self.pause()
        meta, msg = wait_for(lambda: self.of_event("approval.requested"), "the mail")[0]
        self.assertTrue(meta["auth"], meta)
        self.assertEqual(msg.get_content_type(), "multipart/alternative")
        self.stop_and_check_log(proc, [PASSWORD])

    def test_smtp_without_starttls_sends_nothing_unless_tls_none_to_loopback(self):
        port = self.start_smtp("--plain")
        plain = ('\n[[notify]]\nchannel = "email"\nsmtp_url = "smtp://127.0.0.1:%d"\n'
                 'from = "agents@example.com"\nto = ["ops@example.com"]\n' % port)
        proc = self.serve_with(plain, {})
        self.pause()
        line = ""
        while "not delivered" not in line:
            line = serve_util.next_stderr_line(proc) or ""
            self.assertTrue(line, "no failed delivery logged")
        self.assertEqual(self.mails(), [])
        self.stop_and_check_log(proc, [])
        proc = self.serve_with(plain + 'tls = "none"\n', {})
        wait_for(lambda: self.of_event("approval.requested"), "the mail in plain text")
        self.stop_and_check_log(proc, [])

    def test_one_notification_reaches_every_channel_once(self):
        port = self.start_smtp()
        slack = SlackStandIn()
        self.addCleanup(slack.close)
        toml = (self.notify_toml(port) +
                '\n[[notify]]\nchannel = "slack"\n'
                'webhook_url = "http://127.0.0.1:%d/services/T000/B000/XXXX"\n'
                '\n[[notify]]\nchannel = "webhook"\nurl = "http://127.0.0.1:%d/agentloop"\n'
                'secret_env = "HOOK_SECRET"\n' % (slack.port, slack.port))
        proc = self.serve_with(toml, {"SMTP_PW": PASSWORD, "HOOK_SECRET": "hook-secret-77"})
        sid, tid = self.pause()
        wait_for(lambda: self.of_event("approval.requested"), "the mail")
        wait_for(lambda: slack.webhook_posts, "the Slack message")
        headers, raw = wait_for(lambda: slack.agentloop_posts, "the webhook")[0]
        status, _, pending = self.http("GET", "/v1/sessions/%s/pending" % sid)
        pid = pending["items"][0]["id"]
        self.assertEqual(headers["X-Agentloop-Delivery"], "dlv_%s.webhook2" % pid)
        self.assertEqual(headers["X-Agentloop-Signature"],
                         "sha256=" + hmac.new(b"hook-secret-77", raw, hashlib.sha256).hexdigest())
        body = json.loads(raw)
        self.assertEqual(body["type"], "approval.requested")
        self.assertIn("+" + HOSTILE, body["diff"]["diff"])
        # Without a signing secret the Slack message carries links, no buttons.
        self.assertNotIn('"actions"', json.dumps(slack.webhook_posts[0]))
        self.assertIn("/v1/links/", json.dumps(slack.webhook_posts[0]))
        status, _, r = self.http("POST", "/v1/approvals/%s/decision" % pid,
                                 {"decision": "approve"})
        self.assertEqual(status, 200, r)
        self.assertEqual(self.wait_turn(sid, tid)["stop"], "completed")
        # turn.completed goes only to the email channel, which takes it.
        wait_for(lambda: self.of_event("turn.completed"), "the turn.completed mail")
        self.stop_and_check_log(proc, [PASSWORD, "hook-secret-77", "XXXX"])
        self.assertEqual(len(self.of_event("approval.requested")), 1)
        self.assertEqual(len(slack.webhook_posts), 1)
        self.assertEqual(len(slack.agentloop_posts), 1)
        self.assertEqual(slack.problems, [])

    def test_a_wrong_password_is_retried_and_never_logged(self):
        port = self.start_smtp()
        proc = self.serve_with(self.notify_toml(port), {"SMTP_PW": "wrong-" + PASSWORD})
        self.pause()
        line = wait_for(lambda: serve_util.next_stderr_line(proc, 1) or None,
                        "a failed delivery in the log")
        while "not delivered" not in line:
            line = serve_util.next_stderr_line(proc) or ""
            self.assertTrue(line, "the server stopped logging")
        self.assertIn("email smtp://127.0.0.1:%d" % port, line)
        self.assertEqual(self.mails(), [])
        self.stop_and_check_log(proc, [PASSWORD])


class SlackStandIn:
    """Slack's Web API (chat.postMessage) and response URLs on 127.0.0.1,
    checking each request's shape as Slack documents it. The first
    `fail_first` posts get HTTP 503."""

    def __init__(self, fail_first=0):
        self.fail_first = fail_first
        self.posts = []        # accepted chat.postMessage bodies
        self.webhook_posts = []  # bodies POSTed to the incoming webhook
        self.agentloop_posts = []  # (headers, raw body) of agentloop webhooks
        self.replacements = []  # bodies POSTed to response URLs
        self.problems = []
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                ctype = self.headers.get("Content-Type", "")
                code, answer = 200, {"ok": True}
                with outer.lock:
                    if self.path == "/api/chat.postMessage":
                        if outer.fail_first > 0:
                            outer.fail_first -= 1
                            code, answer = 503, {"ok": False}
                        else:
                            body = json.loads(raw)
                            outer.check_post(self.headers, ctype, body)
                            outer.posts.append(body)
                            answer = {"ok": True, "channel": body.get("channel"),
                                      "ts": "1700000000.%06d" % len(outer.posts)}
                    elif self.path == "/services/T000/B000/XXXX":
                        body = json.loads(raw)
                        if "channel" in body or not body.get("blocks"):
                            outer.problems.append("incoming webhook body %r" % body)
                        outer.webhook_posts.append(body)
                        answer = "ok"
                    elif self.path == "/agentloop":
                        outer.agentloop_posts.append((dict(self.headers), raw))
                    elif self.path.startswith("/response/"):
                        body = json.loads(raw)
                        if not body.get("replace_original"):
                            outer.problems.append("a response without replace_original")
                        outer.replacements.append(body)
                    else:
                        code = 404
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def check_post(self, headers, ctype, body):
        p = self.problems
        if headers.get("Authorization") != "Bearer " + BOT_TOKEN:
            p.append("no bot token")
        if not ctype.startswith("application/json"):
            p.append("not JSON: " + ctype)
        if body.get("channel") != "C0123456789":
            p.append("channel: %r" % body.get("channel"))
        if not isinstance(body.get("text"), str) or not body["text"]:
            p.append("no fallback text")
        blocks = body.get("blocks")
        if not isinstance(blocks, list) or not 0 < len(blocks) <= 50:
            p.append("blocks")
            return
        for b in blocks:
            t = b.get("type")
            if t == "header":
                if b["text"]["type"] != "plain_text" or len(b["text"]["text"]) > 150:
                    p.append("header")
            elif t == "section":
                if b["text"]["type"] != "mrkdwn" or len(b["text"]["text"]) > 3000:
                    p.append("section")
            elif t == "actions":
                for e in b["elements"]:
                    if (e["type"] != "button" or len(e["text"]["text"]) > 75
                            or len(e["action_id"]) > 255 or len(e["value"]) > 2000
                            or e.get("style") not in ("primary", "danger")):
                        p.append("button %r" % e)
            elif t != "context":
                p.append("block type " + str(t))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class SlackTest(NotifyCase):
    def setUp(self):
        super().setUp()
        self.slack = SlackStandIn(fail_first=2)
        self.addCleanup(self.slack.close)

    def click(self, action, token, ts=None, secret=SIGNING, user="alice", sign=True):
        payload = {"type": "block_actions", "user": {"id": "U1", "username": user},
                   "team": {"id": "T1"}, "channel": {"id": "C0123456789"},
                   "response_url": "http://127.0.0.1:%d/response/1" % self.slack.port,
                   "actions": [{"type": "button", "action_id": action, "block_id": "agentloop",
                                "value": token, "action_ts": "1700000000.1"}]}
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        ts = str(int(time.time()) if ts is None else ts)
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   "X-Slack-Request-Timestamp": ts}
        if sign:
            mac = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
            headers["X-Slack-Signature"] = "v0=" + mac.hexdigest()
        req = urllib.request.Request(self.base + "/v1/slack/interactions", data=body,
                                     method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def test_a_slack_503_is_retried_and_a_signed_click_decides_once(self):
        toml = ('\n[[notify]]\nchannel = "slack"\nbot_token_env = "SLACK_BOT"\n'
                'slack_channel = "C0123456789"\napi_base_url = "http://127.0.0.1:%d/api"\n'
                'signing_secret_env = "SLACK_SIGNING"\n' % self.slack.port)
        proc = self.serve_with(toml, {"SLACK_BOT": BOT_TOKEN, "SLACK_SIGNING": SIGNING})
        sid, tid = self.pause()
        wait_for(lambda: self.slack.posts, "the Slack message")
        self.assertEqual(self.slack.problems, [])
        self.assertEqual(len(self.slack.posts), 1)
        msg = self.slack.posts[0]
        dump = json.dumps(msg)
        self.assertNotIn("<!channel>", dump)
        self.assertNotIn("<@U0123>", dump)
        self.assertNotIn("<script>", dump)
        self.assertIn("&lt;!channel&gt;", dump)
        buttons = [e for b in msg["blocks"] if b["type"] == "actions" for e in b["elements"]]
        self.assertEqual([(b["action_id"], b["style"]) for b in buttons],
                         [("approve", "primary"), ("deny", "danger")])
        approve = buttons[0]["value"]
        deny = buttons[1]["value"]
        # Refused before anything else is read: unsigned, wrongly signed, stale.
        req = urllib.request.Request(self.base + "/v1/slack/interactions", data=b"not a form",
                                     method="POST")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=TIMEOUT)
        self.assertEqual(e.exception.code, 401)
        e.exception.close()
        self.assertEqual(self.click("approve", approve, sign=False), 401)
        self.assertEqual(self.click("approve", approve, secret="not-the-secret"), 401)
        self.assertEqual(self.click("approve", approve, ts=int(time.time()) - 301), 401)
        # The deny button's token does not approve.
        self.assertEqual(self.click("approve", deny), 200)
        r = wait_for(lambda: self.slack.replacements, "the refusal")
        self.assertIn("not valid", json.dumps(r[0]))
        status, _, pending = self.http("GET", "/v1/sessions/%s/pending" % sid)
        self.assertEqual(len(pending["items"]), 1, pending)
        # The click decides, the message says who and how.
        self.assertEqual(self.click("approve", approve), 200)
        wait_for(lambda: len(self.slack.replacements) >= 2, "the replacement")
        self.assertIn("Approved by alice", json.dumps(self.slack.replacements[1]))
        self.assertEqual(self.wait_turn(sid, tid)["stop"], "completed")
        # A second click finds it decided.
        self.assertEqual(self.click("deny", deny, user="bob"), 200)
        wait_for(lambda: len(self.slack.replacements) >= 3, "the second replacement")
        self.assertIn("Already decided", json.dumps(self.slack.replacements[2]))
        self.assertEqual(self.slack.problems, [])
        self.assertEqual(len(self.slack.posts), 1)
        self.stop_and_check_log(proc, [BOT_TOKEN, SIGNING])

    def test_a_large_diff_is_cut_in_the_notification(self):
        big = {"responses": [
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "big.txt", "content": "abcdefghij\n" * 7000}}]},
            {"text": "done"}]}
        toml = ('\n[[notify]]\nchannel = "webhook"\nurl = "http://127.0.0.1:%d/agentloop"\n'
                'secret_env = "HOOK_SECRET"\n' % self.slack.port)
        proc = self.serve_with(toml, {"HOOK_SECRET": "hook-secret-77"}, script=big)
        self.pause()
        _, raw = wait_for(lambda: self.slack.agentloop_posts, "the webhook")[0]
        diff = json.loads(raw)["diff"]
        self.assertTrue(diff["truncated"])
        self.assertLessEqual(len(diff["diff"].encode()), 64 << 10)
        self.stop_and_check_log(proc, ["hook-secret-77"])

    def test_the_interactions_route_is_off_without_a_signing_secret(self):
        toml = ('\n[[notify]]\nchannel = "slack"\nbot_token_env = "SLACK_BOT"\n'
                'slack_channel = "C0123456789"\napi_base_url = "http://127.0.0.1:%d/api"\n'
                % self.slack.port)
        self.slack.fail_first = 0
        proc = self.serve_with(toml, {"SLACK_BOT": BOT_TOKEN})
        self.pause()
        wait_for(lambda: self.slack.posts, "the Slack message")
        self.assertNotIn('"actions"', json.dumps(self.slack.posts[0]))
        self.assertEqual(self.click("approve", "x"), 404)
        self.stop_and_check_log(proc, [BOT_TOKEN])


if __name__ == "__main__":
    unittest.main()
