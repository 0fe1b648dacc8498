"""End-to-end: what `agentloop serve` does for the web console over plain
HTTP (docs/console.md): the page and its assets with a strict CSP, the
cookie sign-in and what the cookie may do, and the diff of a pending write
or edit. No browser needed."""

import json
import os
import re
import unittest

from console_util import ServeCase

WRITE = {"responses": [
    {"tool_calls": [{"id": "c1", "name": "write",
                     "input": {"file_path": "stats.py", "content": "print('new')\n"}}]},
    {"text": "done"},
]}


class ConsolePageTest(ServeCase):

    def test_the_page_and_its_assets_are_served_with_a_strict_csp(self):
        self.agent({"responses": []})
        self.serve()
        status, headers, body = self.call("GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/html"))
        csp = headers["Content-Security-Policy"]
        self.assertIn("default-src 'self'", csp)
        self.assertIn("require-trusted-types-for 'script'", csp)
        self.assertNotIn("unsafe-inline", csp)
        self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        self.assertIn('src="/console/app.mjs"', body)
        status, headers, js = self.call("GET", "/console/app.mjs")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/javascript"))
        # No asset puts a string into the page as markup.
        for asset in ("app.mjs", "sse.mjs", "diff.mjs", "markdown.mjs", "timeline.mjs"):
            status, _, code = self.call("GET", "/console/" + asset)
            self.assertEqual(status, 200, asset)
            m = re.search(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|"
                          r"\beval\(|new Function", code)
            self.assertIsNone(m, "%s: %s" % (asset, m and m.group(0)))
        status, _, problem = self.call("GET", "/console/nothing.js")
        self.assertEqual((status, problem["code"]), (404, "not_found"))

    def test_without_tokens_the_console_needs_no_sign_in(self):
        self.agent({"responses": []})
        self.serve()
        status, _, who = self.call("GET", "/v1/console/session")
        self.assertEqual(status, 200, who)
        self.assertEqual((who["tenant"], who["tokens_required"]), ("default", False))


class ConsoleCookieTest(ServeCase):
    TOKEN = "console-api-token"

    def sign_in(self):
        status, headers, who = self.call("POST", "/v1/console/session",
                                         headers={"Origin": self.base})
        self.assertEqual(status, 200, who)
        self.assertEqual((who["tenant"], who["cookie"]), ("team", True))
        cookie = headers["Set-Cookie"]
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
            self.assertIn(attr, cookie)
        self.assertNotIn(self.TOKEN, cookie)
        return cookie.split(";")[0]

    def test_a_cookie_stands_for_the_token_and_needs_the_origin_to_change_anything(self):
        self.agent({"responses": [{"text": "hi"}]})
        self.serve()
        self.assertEqual(self.call("GET", "/v1/sessions", token="")[0], 401)
        cookie = self.sign_in()
        jar = {"Cookie": cookie}
        status, _, who = self.call("GET", "/v1/console/session", headers=jar, token="")
        self.assertEqual((status, who["tenant"]), (200, "team"))
        self.assertEqual(self.call("GET", "/v1/sessions", headers=jar, token="")[0], 200)
        # A state-changing request with the cookie but no Origin is not the
        # console's (a browser always sends Origin on a POST).
        status, _, p = self.call("POST", "/v1/sessions", {}, headers=jar, token="")
        self.assertEqual((status, p["code"]), (403, "origin_not_allowed"))
        status, _, p = self.call("POST", "/v1/sessions", {},
                                 headers=dict(jar, Origin="http://evil.test"), token="")
        self.assertEqual((status, p["code"]), (403, "origin_not_allowed"))
        status, _, s = self.call("POST", "/v1/sessions", {},
                                 headers=dict(jar, Origin=self.base), token="")
        self.assertEqual(status, 201, s)
        # A changed byte, another name or a made-up cookie is no sign-in.
        name, value = cookie.split("=", 1)
        for bad in (value[:-1] + ("0" if value[-1] != "0" else "1"),
                    value.replace("v2.", "v1.", 1), "v2.x.99999999999999.00.00", ""):
            status = self.call("GET", "/v1/sessions", headers={"Cookie": name + "=" + bad},
                               token="")[0]
            self.assertEqual(status, 401, bad)
        # Signing out clears it.
        status, headers, _ = self.call("DELETE", "/v1/console/session",
                                       headers=dict(jar, Origin=self.base), token="")
        self.assertEqual(status, 204)
        self.assertIn("Max-Age=0", headers["Set-Cookie"])

    def test_sign_in_needs_a_known_bearer_token(self):
        self.agent({"responses": []})
        self.serve()
        status, _, p = self.call("POST", "/v1/console/session", token="wrong",
                                 headers={"Origin": self.base})
        self.assertEqual(status, 401, p)


class ConsoleDiffTest(ServeCase):

    def pause(self, script, extra_toml=""):
        self.agent(script, extra_toml)
        self.serve()
        status, _, s = self.call("POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        status, _, t = self.call("POST", "/v1/sessions/%s/turns" % s["id"], {"input": "go"})
        self.assertEqual(status, 202, t)
        status, _, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                                 % (s["id"], t["id"]))
        self.assertEqual(w["result"]["stop"], "pending_approval", w)
        status, _, pending = self.call("GET", "/v1/sessions/%s/pending" % s["id"])
        return pending["items"][0]["id"]

    def test_the_diff_of_a_pending_write_against_the_file_as_it_is(self):
        # The write tool wants a file read first; the script reads it.
        script = {"responses": [
            {"tool_calls": [{"id": "r1", "name": "read", "input": {"file_path": "stats.py"}}]},
        ] + WRITE["responses"]}
        aid = self.pause(script)
        status, _, d = self.call("GET", "/v1/approvals/%s/diff" % aid)
        self.assertEqual(status, 200, d)
        self.assertEqual((d["path"], d["created"]), ("stats.py", False))
        self.assertTrue(d["diff"].startswith("--- a/stats.py\n+++ b/stats.py\n"), d)
        self.assertIn("+print('new')\n", d["diff"])
        self.assertIn("-def mean(xs):\n", d["diff"])
        # Nothing was written.
        self.assertNotIn("print('new')", self.read_ws("stats.py"))

    def test_an_edit_whose_text_is_gone_says_so(self):
        aid = self.pause({"responses": [
            {"tool_calls": [{"id": "e1", "name": "edit", "input": {
                "file_path": "stats.py", "old_string": "no such text", "new_string": "x"}}]},
        ]})
        status, _, d = self.call("GET", "/v1/approvals/%s/diff" % aid)
        self.assertEqual(status, 200, d)
        self.assertEqual(d["diff"], "")
        self.assertIn("old_string is not in stats.py", d["note"])

    def test_a_path_outside_the_workspace_is_never_read(self):
        outside = os.path.join(self.tmp, "secret.txt")
        with open(outside, "w", encoding="utf-8") as f:
            f.write("top secret\n")
        os.symlink(outside, os.path.join(self.ws, "link.txt"))
        for path in ("../secret.txt", outside, "link.txt"):
            with self.subTest(path=path):
                aid = self.pause({"responses": [
                    {"tool_calls": [{"id": "w1", "name": "write",
                                     "input": {"file_path": path, "content": "x\n"}}]},
                ]})
                status, _, d = self.call("GET", "/v1/approvals/%s/diff" % aid)
                self.assertEqual(status, 403, d)
                self.assertNotIn("top secret", json.dumps(d))
                for p in self.procs:
                    p.kill()
                    p.communicate()
                self.procs = []
                for s in self.servers:
                    s.stop()
                self.servers = []

    def test_a_file_the_session_may_not_read_is_not_shown(self):
        with open(os.path.join(self.ws, ".env"), "w", encoding="utf-8") as f:
            f.write("API_KEY=top-secret\n")
        aid = self.pause({"responses": [
            {"tool_calls": [{"id": "w1", "name": "write",
                             "input": {"file_path": ".env", "content": "API_KEY=new\n"}}]},
        ]}, '\n[permissions]\ndeny = ["read(.env)"]\n')
        status, _, d = self.call("GET", "/v1/approvals/%s/diff" % aid)
        self.assertEqual(status, 200, d)
        self.assertEqual((d["path"], d["created"], d["diff"]), (".env", False, ""))
        self.assertIn("the session may not read it", d["note"])
        self.assertIn("read(.env)", d["note"])
        self.assertNotIn("top-secret", json.dumps(d))

    def test_no_diff_for_other_tools(self):
        aid = self.pause({"responses": [
            {"tool_calls": [{"id": "b1", "name": "bash", "input": {"command": "true"}}]},
        ]})
        status, _, p = self.call("GET", "/v1/approvals/%s/diff" % aid)
        self.assertEqual((status, p["code"]), (400, "invalid_request"))
        self.assertIn("'bash'", p["detail"])


if __name__ == "__main__":
    unittest.main()
