"""End-to-end: `agentloop serve` as a process, driven over HTTP on 127.0.0.1
(docs/server.md): a turn pauses, is approved over HTTP (or by the command
line in another process), SIGTERM drains the server, and a restarted server
continues a paused session from the store."""

import hashlib
import os
import signal
import time
import unittest

import serve_util
from e2e_util import TIMEOUT

WRITE = {"responses": [
    {"tool_calls": [{"id": "c1", "name": "write",
                     "input": {"file_path": "served.txt", "content": "from the server\n"}}]},
    {"text": "wrote served.txt"},
]}


class ServeCase(serve_util.ServeCase):
    """Runs `agentloop serve` and calls it (no tests of its own)."""

    def agent(self, server, tokens=None, extra=""):
        self.write_agent(server.base_url, tokens, extra)

    def call(self, method, path, body=None, token=None):
        status, _, parsed = self.http(method, path, body, token=token)
        return status, parsed


class ServeTest(ServeCase):

    def pause(self, token=None):
        status, s = self.call("POST", "/v1/sessions", {"agent": "writer"}, token)
        self.assertEqual(status, 201, s)
        status, t = self.call("POST", "/v1/sessions/%s/turns" % s["id"],
                              {"input": "write served.txt"}, token)
        self.assertEqual(status, 202, t)
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (s["id"], t["id"]), token=token)
        self.assertEqual(w["result"]["stop"], "pending_approval", w)
        status, pending = self.call("GET", "/v1/sessions/%s/pending" % s["id"], token=token)
        self.assertEqual(len(pending["items"]), 1, pending)
        return s["id"], t["id"], pending["items"][0]["id"]

    def test_a_turn_pauses_and_is_approved_over_http_with_a_token(self):
        token = "tok-e2e-secret"
        grant = hashlib.sha256(token.encode()).hexdigest() + ":team:read,write,approve"
        self.agent(self.server(WRITE), tokens=[grant])
        proc = self.serve()
        self.assertEqual(self.call("GET", "/v1/sessions")[0], 401)
        sid, tid, aid = self.pause(token)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "served.txt")))
        status, r = self.call("POST", "/v1/approvals/%s/decision" % aid,
                              {"decision": "approve"}, token)
        self.assertEqual(status, 200, r)
        self.assertEqual(r["status"], "resumed")
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30" % (sid, tid),
                              token=token)
        self.assertEqual(w["result"]["stop"], "completed", w)
        self.assertEqual(w["result"]["final_text"], "wrote served.txt")
        self.assertEqual(self.read_ws("served.txt"), "from the server\n")
        # The token is never logged.
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, err)
        self.assertNotIn(token, err)

    def test_sigterm_drains_and_a_restarted_server_continues_the_paused_turn(self):
        self.agent(self.server(WRITE))
        first = self.serve()
        sid, tid, aid = self.pause()
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=TIMEOUT)
        self.assertEqual(first.returncode, 0)
        self.serve()
        status, item = self.call("GET", "/v1/approvals/" + aid)
        self.assertEqual(item["state"], "pending", item)
        status, r = self.call("POST", "/v1/approvals/%s/decision" % aid, {"decision": "approve"})
        self.assertEqual(status, 200, r)
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30" % (sid, tid))
        self.assertEqual(w["result"]["final_text"], "wrote served.txt", w)
        status, again = self.call("POST", "/v1/approvals/%s/decision" % aid,
                                  {"decision": "approve"})
        self.assertEqual(again["status"], "already_resolved")

    def test_the_command_line_approves_a_served_session(self):
        self.agent(self.server(WRITE))
        self.serve()
        sid, tid, aid = self.pause()
        # The same store: the command line sees the item and continues the turn.
        p = self.run_cli("pending", "--output", "json", env=self.env(WRITER_KEY="sk-test"))
        self.assert_code(p, 0)
        self.assertIn(aid, p.stdout)
        p = self.run_cli("approve", aid, env=self.env(WRITER_KEY="sk-test"))
        self.assert_code(p, 0)
        self.assertEqual(self.read_ws("served.txt"), "from the server\n")
        status, s = self.call("GET", "/v1/sessions/" + sid)
        self.assertEqual(s["status"], "idle", s)
        self.assertEqual(s["last_turn"]["stop"], "completed", s)
        status, r = self.call("POST", "/v1/approvals/%s/decision" % aid, {"decision": "deny"})
        self.assertEqual(status, 409, r)
        self.assertEqual(r["code"], "approval_already_resolved")

    def test_a_server_killed_mid_turn_ends_the_cut_turn_before_continuing_it(self):
        model = self.server({"responses": [
            # The server is killed while it waits for this answer.
            {"text": "never delivered", "delay_ms": 60000},
            {"text": "continued after the restart"},
        ]})
        self.agent(model)
        first = self.serve()
        status, s = self.call("POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        sid = s["id"]
        status, t = self.call("POST", "/v1/sessions/%s/turns" % sid, {"input": "go"})
        self.assertEqual(status, 202, t)
        deadline = time.monotonic() + TIMEOUT
        while not model.requests():
            self.assertLess(time.monotonic(), deadline, "no model request")
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()

        # A restarted server reads the cut turn's state: ended, failed.
        self.serve()
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s" % (sid, t["id"]))
        self.assertEqual(status, 200, w)
        self.assertEqual(w["status"], "done", w)
        self.assertEqual(w["result"]["stop"], "failed", w)
        self.assertIn("stopped before the turn ended", w["result"]["reason"])
        # {"continue": true} retries it: the same turn, after its one turn_end.
        status, c = self.call("POST", "/v1/sessions/%s/turns" % sid, {"continue": True})
        self.assertEqual(status, 202, c)
        self.assertEqual(c["id"], t["id"])
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30" % (sid, t["id"]))
        self.assertEqual(w["result"]["final_text"], "continued after the restart", w)
        status, events = self.call("GET", "/v1/sessions/%s/events?after=0" % sid)
        self.assertEqual(status, 200, events)
        marks = [(e["type"], e.get("stop") or e.get("input"))
                 for e in events["items"] if e["type"] in ("turn_begin", "turn_end")]
        self.assertEqual(marks, [("turn_begin", "user"), ("turn_end", "failed"),
                                 ("turn_begin", "retry"), ("turn_end", "completed")])


if __name__ == "__main__":
    unittest.main()
