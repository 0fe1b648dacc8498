"""End-to-end: what a new user meets before the first answer: no key, a base
URL alone, a refused key, a server that is not there, a bad tool call."""

import socket
import unittest

from e2e_util import CliTestCase


class FirstRunTest(CliTestCase):

    def test_a_base_url_alone_is_an_openai_compatible_server(self):
        server = self.server({"responses": [{"text": "Hello from the local server."}]})
        p = self.run_cli("run", "--base-url", server.base_url, "-C", self.ws, "hi")
        self.assert_code(p, 0)
        self.assertIn("Hello from the local server.", p.stdout)
        self.assertTrue(server.requests()[0]["path"].endswith("/chat/completions"))

    def test_a_provider_without_its_key_names_the_variable(self):
        p = self.run_cli("run", "--provider", "anthropic", "-C", self.ws, "hi")
        self.assert_code(p, 2)
        self.assertIn("provider anthropic has no API key: ANTHROPIC_API_KEY is not set",
                      p.stderr)
        j = self.run_cli("run", "--provider", "openai", "-C", self.ws, "--output", "json", "hi")
        self.assert_code(j, 2)
        self.assertIn("OPENAI_API_KEY is not set", self.json_result(j)["error"]["message"])

    def test_a_refused_key_is_an_authentication_error_naming_the_variable(self):
        server = self.server({"responses": [{"http_status": 401, "body": {
            "error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}}]})
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url, "-C",
                         self.ws, "hi", env=self.env(OPENAI_API_KEY="sk-wrong"))
        self.assert_code(p, 1)
        self.assertIn("authentication error: the model API refused the API key in "
                      "OPENAI_API_KEY", p.stderr)
        self.assertNotIn("permission_denied", p.stderr)

    def test_an_unreachable_endpoint_says_it_cannot_connect(self):
        # Bound but not listening: every connection is refused.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        try:
            p = self.run_cli("run", "--base-url", "http://127.0.0.1:%d/v1" % port, "-C", self.ws,
                             "hi")
        finally:
            s.close()
        self.assert_code(p, 1)
        first = p.stderr.splitlines()[0]
        # Said on the first failed attempt, not only at the end.
        self.assertIn("cannot connect to 127.0.0.1:%d: connection refused" % port, first)


    def test_a_call_with_bad_arguments_is_shown_like_any_result(self):
        s = self.write("bad.json", [
            {"tool_calls": [{"id": "x1", "name": "read", "input": {"nope": 1}}]},
            {"text": "sorry"}])
        p = self.script_run(script=s, prompt="hi")
        self.assert_code(p, 0)
        self.assertIn('→ read  {"nope":1}', p.stderr)
        self.assertIn("✗ invalid arguments for tool 'read'", p.stderr)
        self.assertEqual(p.stdout, "sorry\n")


if __name__ == "__main__":
    unittest.main()
