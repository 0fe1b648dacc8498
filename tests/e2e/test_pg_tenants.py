"""End-to-end: tenants on a PostgreSQL store shared by two `agentloop serve`
instances (docs/storage.md, "Tenants"). A session of tenant `acme`, paused
on an approval on instance A, is invisible to tenant `other` on both
instances: every route that names it, its turn or its approval answers 404
(lists leave it out), and nothing of it changes; `acme` still decides it."""

import hashlib
import os
import time

from e2e_util import TIMEOUT
from pg_cluster import PgServeCase

ACME, OTHER = "tok-acme", "tok-other"
# Two tenants: the agent's tools must run in a sandbox (docs/security.md).
SANDBOXED = '\n[tools]\nsandbox = "workspace-write"\n'


def grant(token, tenant):
    return "%s:%s:read,write,approve" % (hashlib.sha256(token.encode()).hexdigest(), tenant)


class TenantsTest(PgServeCase):
    def call_as(self, base, token, method, path, body=None):
        status, _, parsed = self.http(method, path, body, base=base, token=token)
        return status, parsed

    def snapshot(self):
        """Every row of the store but the idempotency keys, as text."""
        out = []
        for table, order in (("sessions", "id"), ("session_events", "session_id, seq"),
                             ("checkpoints", "id"), ("pending_index", "pending_id"),
                             ("session_state", "session_id, key"),
                             ("session_wakeups", "session_id")):
            out.append(self.cluster.psql("SET search_path = %s; SELECT * FROM %s ORDER BY %s"
                                         % (self.schema, table, order)))
        return out

    def test_another_tenant_can_neither_see_nor_touch_a_session(self):
        model = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "mine.txt", "content": "acme\n"}}]},
            {"text": "wrote mine.txt"},
        ]})
        self.write_agent(model.base_url, tokens=[grant(ACME, "acme"), grant(OTHER, "other")],
                         extra=SANDBOXED)
        _, a = self.serve_pg()
        _, b = self.serve_pg()
        status, s = self.call_as(a, ACME, "POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        sid = s["id"]
        status, t = self.call_as(a, ACME, "POST", "/v1/sessions/%s/turns" % sid,
                                 {"input": "write mine.txt"})
        self.assertEqual(status, 202, t)
        tid = t["id"]
        status, w = self.call_as(a, ACME, "GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                                 % (sid, tid))
        self.assertEqual(w["result"]["stop"], "pending_approval", w)
        status, pending = self.call_as(a, ACME, "GET", "/v1/sessions/%s/pending" % sid)
        self.assertEqual(len(pending["items"]), 1, pending)
        pid = pending["items"][0]["id"]
        before = self.snapshot()

        for base in (b, a):  # B has never seen the session; A ran its turn
            for method, path, body in (
                    ("GET", "/v1/sessions/%s" % sid, None),
                    ("PATCH", "/v1/sessions/%s" % sid, {"title": "mine now"}),
                    ("GET", "/v1/sessions/%s/messages" % sid, None),
                    ("POST", "/v1/sessions/%s/turns" % sid, {"input": "hijack"}),
                    ("POST", "/v1/sessions/%s/compact" % sid, {}),
                    ("GET", "/v1/sessions/%s/turns/%s" % (sid, tid), None),
                    ("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=1" % (sid, tid), None),
                    ("POST", "/v1/sessions/%s/turns/%s/cancel" % (sid, tid), {}),
                    ("GET", "/v1/sessions/%s/events" % sid, None),
                    ("GET", "/v1/sessions/%s/events/stream" % sid, None),
                    ("GET", "/v1/events/stream?sessions=%s" % sid, None),
                    ("GET", "/v1/sessions/%s/pending" % sid, None),
                    ("GET", "/v1/sessions/%s/mcp" % sid, None),
                    ("GET", "/v1/approvals/%s" % pid, None),
                    ("GET", "/v1/approvals/%s/diff" % pid, None),
                    ("POST", "/v1/approvals/%s/decision" % pid, {"decision": "approve"}),
                    ("POST", "/v1/questions/%s/answer" % pid, {"answer": "yes"}),
                    # The seeds' routes name the same session and item.
                    ("GET", "/agents/writer/sessions/%s" % sid, None),
                    ("POST", "/agents/writer/messages", {"sessionId": sid, "message": "hijack"}),
                    ("POST", "/pending-approvals/%s/resolve" % pid, {"decision": "approve"}),
                    ("POST", "/pending-questions/%s/answer" % pid, {"answer": "yes"}),
                    ("DELETE", "/v1/sessions/%s" % sid, None)):
                status, got = self.call_as(base, OTHER, method, path, body)
                self.assertEqual(status, 404, "%s %s on %s: %s" % (method, path, base, got))
                self.assertEqual(got["code"], "not_found", got)
            for path in ("/v1/sessions", "/v1/approvals", "/v1/questions"):
                status, got = self.call_as(base, OTHER, "GET", path)
                self.assertEqual((status, got["items"]), (200, []), path)
        # Not one row changed, and the other tenant's decision ran nothing.
        self.assertEqual(self.snapshot(), before)
        self.assertEqual(len(model.requests()), 1)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "mine.txt")))

        # The owner decides on B, and the turn completes.
        status, d = self.call_as(b, ACME, "POST", "/v1/approvals/%s/decision" % pid,
                                 {"decision": "approve"})
        self.assertEqual((status, d["status"]), (200, "resumed"), d)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not os.path.exists(
                os.path.join(self.ws, "mine.txt")):
            time.sleep(0.05)
        with open(os.path.join(self.ws, "mine.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "acme\n")


if __name__ == "__main__":
    import unittest
    unittest.main()
