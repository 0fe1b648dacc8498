"""End-to-end: `agentloop serve` as a process, driven over HTTP on 127.0.0.1
(docs/server.md): a turn pauses, is approved over HTTP (or by the command
line in another process), SIGTERM drains the server, and a restarted server
continues a paused session from the store."""

import hashlib
import os
import re
import signal
import stat
import subprocess
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


class ServeTest(ServeCase):

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


class AuthTest(ServeCase):
    """`agentloop serve` without server.tokens: a generated token, or --no-auth."""

    def next_line(self, proc):
        line = serve_util.next_stderr_line(proc)
        self.assertTrue(line, "serve printed nothing more")
        return line

    def test_without_tokens_a_generated_token_is_required_and_kept(self):
        self.agent(self.server(WRITE))
        self.serve_tokens = True  # neither tokens nor --no-auth
        proc = self.serve()
        line = self.next_line(proc)
        m = re.search(r"console: (http://127\.0\.0\.1:\d+)/\?token=([0-9a-f]{64})$", line.strip())
        self.assertTrue(m, line)
        self.assertEqual(m.group(1), self.base)
        token = m.group(2)
        token_file = os.path.join(self.data, "server-token")
        self.assertEqual(stat.S_IMODE(os.stat(token_file).st_mode), 0o600)
        with open(token_file, encoding="utf-8") as f:
            self.assertEqual(f.read().strip(), token)
        secret_file = os.path.join(self.data, "console-cookie-secret")
        self.assertEqual(stat.S_IMODE(os.stat(secret_file).st_mode), 0o600)
        with open(secret_file, encoding="utf-8") as f:
            secret = f.read().strip()

        # Every client authenticates, also without an Origin (curl).
        self.assertEqual(self.call("GET", "/v1/sessions")[0], 401)
        self.assertEqual(self.call("POST", "/v1/sessions", {"agent": "writer"})[0], 401)
        self.assertEqual(self.call("GET", "/v1/sessions", token=token)[0], 200)
        # A rebound name is refused, token or not.
        evil = "rebind.attacker.example:" + self.base.rsplit(":", 1)[1]
        status, _, r = self.http("POST", "/v1/sessions", {"agent": "writer"}, token=token,
                                 headers={"Host": evil, "Origin": "http://" + evil})
        self.assertEqual(status, 421, r)
        sid, tid, aid = self.pause(token)
        # The console signs in with the token and gets a cookie.
        status, hdrs, who = self.http("POST", "/v1/console/session", token=token,
                                      headers={"Origin": self.base})
        self.assertEqual(status, 200, who)
        self.assertEqual(who["tenant"], "default")
        self.assertIn("HttpOnly", hdrs["Set-Cookie"])

        # `config show` prints neither secret.
        p = self.run_cli("config", "show", env=self.env(), cwd=self.ws)
        self.assert_code(p, 0)
        self.assertNotIn(token, p.stdout + p.stderr)
        self.assertNotIn(secret, p.stdout + p.stderr)

        # A restarted server keeps the token; --rotate-cookie-secret makes a
        # new cookie secret.
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=TIMEOUT)
        p, base, line = serve_util.start_serve_process(
            serve_util.BIN, self.env(WRITER_KEY="sk-test"), self.tmp, no_auth=False)
        self.procs.append(p)
        self.assertIsNotNone(base, line)
        self.base = base
        self.assertIn(token, self.next_line(p))
        self.assertEqual(self.call("GET", "/v1/sessions/" + sid, token=token)[0], 200)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=TIMEOUT)
        rotated = subprocess.Popen(
            [serve_util.BIN, "serve", "--listen", "127.0.0.1:0", "--rotate-cookie-secret"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=self.env(WRITER_KEY="sk-test"), cwd=self.tmp)
        self.procs.append(rotated)
        lines = [self.next_line(rotated) for _ in range(3)]
        self.assertIn("serving", lines[0])
        self.assertIn(token, lines[1])
        self.assertIn("new console cookie secret", lines[2])
        rotated.send_signal(signal.SIGTERM)
        rotated.communicate(timeout=TIMEOUT)
        with open(secret_file, encoding="utf-8") as f:
            self.assertNotEqual(f.read().strip(), secret)
        self.assertEqual(stat.S_IMODE(os.stat(secret_file).st_mode), 0o600)

    def test_no_auth_is_loopback_only_and_warns(self):
        self.agent(self.server(WRITE))
        p = self.run_cli("serve", "--no-auth", "--listen", "0.0.0.0:0",
                         env=self.env(WRITER_KEY="sk-test"))
        self.assert_code(p, 2)
        self.assertIn("loopback", p.stderr)
        proc = self.serve()
        self.assertIn("--no-auth", self.next_line(proc))
        self.assertEqual(self.call("GET", "/v1/sessions")[0], 200)
        self.assertFalse(os.path.exists(os.path.join(self.data, "server-token")))

    def test_no_auth_with_tokens_or_a_readable_token_file_is_refused(self):
        grant = hashlib.sha256(b"tok").hexdigest() + ":team:read"
        self.agent(self.server(WRITE), tokens=[grant])
        p = self.run_cli("serve", "--no-auth", "--listen", "127.0.0.1:0",
                         env=self.env(WRITER_KEY="sk-test"), cwd=self.ws)
        self.assert_code(p, 2)
        self.assertIn("--no-auth and server.tokens exclude each other", p.stderr)
        # A token file others can read is not used.
        os.remove(os.path.join(self.home, ".config", "agentloop", "config.toml"))
        os.makedirs(self.data, exist_ok=True)
        token_file = os.path.join(self.data, "server-token")
        with open(token_file, "w", encoding="utf-8") as f:
            f.write("a" * 64 + "\n")
        os.chmod(token_file, 0o644)
        p = self.run_cli("serve", "--listen", "127.0.0.1:0", env=self.env(WRITER_KEY="sk-test"),
                         cwd=self.ws)
        self.assert_code(p, 1)
        self.assertIn("chmod 600", p.stderr)


class TenantWorkspaceTest(ServeCase):
    """An agent with workspace_root served to two tenants (docs/security.md)."""

    def test_each_tenant_has_its_folder_and_a_refused_workspace_makes_nothing(self):
        root = os.path.join(self.tmp, "sessions")
        os.makedirs(root)
        tokens = {"acme": "tok-acme-e2e", "other": "tok-other-e2e"}
        grants = [hashlib.sha256(t.encode()).hexdigest() + ":%s:read,write" % tenant
                  for tenant, t in tokens.items()]
        # Two tenants: the agent's tools run in a sandbox.
        self.write_agent(self.server(WRITE).base_url, grants,
                         extra='\n[tools]\nsandbox = "workspace-write"\n')
        agent_toml = os.path.join(self.home, ".config", "agentloop", "agents", "writer",
                                  "agent.toml")
        with open(agent_toml, encoding="utf-8") as f:
            text = f.read()
        with open(agent_toml, "w", encoding="utf-8") as f:
            f.write(text.replace('workspace = "%s"' % self.ws,
                                 'workspace_root = "%s"\ncreate_workspace = true' % root))
        self.serve()

        def create(tenant, body):
            return self.call("POST", "/v1/sessions", dict(body, agent="writer"), tokens[tenant])

        status, a = create("acme", {"workspace": "pr-1"})
        self.assertEqual(status, 201, a)
        self.assertEqual(a["workspace"], os.path.realpath(os.path.join(root, "acme", "pr-1")))
        status, b = create("other", {"workspace": "pr-1"})
        self.assertEqual(status, 201, b)
        self.assertEqual(b["workspace"], os.path.realpath(os.path.join(root, "other", "pr-1")))
        # Without a workspace: the tenant's folder, never the root.
        status, plain = create("other", {})
        self.assertEqual(status, 201, plain)
        self.assertEqual(plain["workspace"], os.path.realpath(os.path.join(root, "other")))
        # No name reaches another tenant's folder: not by '..', not by a link.
        status, r = create("other", {"workspace": "../acme/pr-1"})
        self.assertEqual(status, 400, r)
        os.symlink(os.path.join(root, "acme"), os.path.join(root, "other", "steal"))
        status, r = create("other", {"workspace": "steal/pr-1"})
        self.assertEqual(status, 400, r)
        self.assertIn("outside", r["detail"])
        # A refused value creates nothing on disk.
        before = sorted(os.listdir(os.path.join(root, "acme")))
        for bad in ("fresh/../x", "fresh/" + "n" * 300, "/abs/path"):
            status, r = create("acme", {"workspace": bad})
            self.assertEqual(status, 400, (bad, r))
        self.assertEqual(sorted(os.listdir(os.path.join(root, "acme"))), before)
        self.assertEqual(sorted(os.listdir(root)), ["acme", "other"])

    def test_two_tenants_and_bash_without_a_sandbox_are_refused_at_start(self):
        grants = [hashlib.sha256(t.encode()).hexdigest() + ":%s:read,write" % tenant
                  for tenant, t in (("acme", "tok-acme-e2e"), ("other", "tok-other-e2e"))]
        self.write_agent(self.server(WRITE).base_url, grants)
        p = self.run_cli("serve", "--listen", "127.0.0.1:0", env=self.env(WRITER_KEY="sk-test"),
                         cwd=self.ws)
        self.assert_code(p, 2)
        self.assertIn("2 tenants ('acme', 'other')", p.stderr)
        self.assertIn("agent 'writer' (bash)", p.stderr)
        self.assertIn('tools.sandbox = "workspace-write"', p.stderr)
        self.assertNotIn("serving", p.stderr)


class TenantMemoryTest(ServeCase):
    """User-scope memories on a server with two tenants and with one
    (docs/learning.md, "Tenants")."""

    SAVE = {"responses": [
        {"tool_calls": [{"id": "m1", "name": "memory_save", "input": {
            "name": "acme-note", "type": "fact", "description": "Acme deploys from blue",
            "body": "acme-body", "scope": "user"}}]},
        {"text": "saved"},
        {"text": "other answers"},
        {"text": "acme answers"},
    ]}

    def shared_note(self):
        """A memory of the user scope the server's user had before."""
        d = os.path.join(self.data, "memory")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "shared-note.md"), "w", encoding="utf-8") as f:
            f.write('---\nname: shared-note\ntype: fact\ndescription: "From before"\n---\n'
                    "old\n")

    def turn(self, token, sid, text):
        status, t = self.call("POST", "/v1/sessions/%s/turns" % sid, {"input": text}, token)
        self.assertEqual(status, 202, t)
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (sid, t["id"]), token=token)
        self.assertEqual(status, 200, w)
        return w["result"]

    def session(self, token):
        status, s = self.call("POST", "/v1/sessions", {"agent": "writer"}, token)
        self.assertEqual(status, 201, s)
        return s["id"]

    @staticmethod
    def system(request):
        return request["body"]["messages"][0]["content"]

    def test_each_of_two_tenants_remembers_apart_and_neither_reads_the_users_scope(self):
        tokens = {"acme": "tok-acme-mem", "other": "tok-other-mem"}
        grants = [hashlib.sha256(t.encode()).hexdigest() + ":%s:read,write,approve" % tenant
                  for tenant, t in tokens.items()]
        model = self.server(self.SAVE)
        self.write_agent(model.base_url, grants,
                         extra='\n[tools]\nsandbox = "workspace-write"\n')
        self.shared_note()
        self.serve()
        a1 = self.session(tokens["acme"])
        self.assertEqual(self.turn(tokens["acme"], a1, "remember")["stop"], "pending_approval")
        status, pending = self.call("GET", "/v1/sessions/%s/pending" % a1, token=tokens["acme"])
        self.assertEqual(len(pending["items"]), 1, pending)
        status, r = self.call("POST", "/v1/approvals/%s/decision" % pending["items"][0]["id"],
                              {"decision": "approve"}, tokens["acme"])
        self.assertEqual(status, 200, r)
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (a1, r["turn_id"]), token=tokens["acme"])
        self.assertEqual(w["result"]["final_text"], "saved", w)
        self.assertTrue(os.path.exists(
            os.path.join(self.data, "tenants", "acme", "memory", "acme-note.md")))
        self.assertFalse(os.path.exists(os.path.join(self.data, "memory", "acme-note.md")))

        b1 = self.session(tokens["other"])
        self.assertEqual(self.turn(tokens["other"], b1, "hi")["final_text"], "other answers")
        a2 = self.session(tokens["acme"])
        self.assertEqual(self.turn(tokens["acme"], a2, "hi")["final_text"], "acme answers")
        requests = model.requests()
        self.assertEqual(len(requests), 4)
        self.assertNotIn("acme-note", self.system(requests[2]))
        self.assertIn("acme-note", self.system(requests[3]))
        for r in requests:
            self.assertNotIn("shared-note", self.system(r))

    def test_one_tenant_keeps_the_users_scope(self):
        model = self.server({"responses": [{"text": "hello"}]})
        self.write_agent(model.base_url)
        self.shared_note()
        self.serve()
        sid = self.session(None)
        self.assertEqual(self.turn(None, sid, "hi")["final_text"], "hello")
        self.assertIn("shared-note", self.system(model.requests()[0]))


if __name__ == "__main__":
    unittest.main()
