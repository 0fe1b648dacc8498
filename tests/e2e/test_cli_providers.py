"""End-to-end: a full fix-a-bug run through each wire format, against the
fake model server (agentloop-fake-server on 127.0.0.1)."""

import json
import unittest

from e2e_util import CliTestCase, load_demo_script

WIRE_PATHS = {
    "openai": "/chat/completions",
    "anthropic": "/v1/messages",
    "openai-responses": "/responses",
}


class ProviderFormatsTest(CliTestCase):

    def check_provider(self, provider):
        script = load_demo_script()
        server = self.server(script)
        p = self.run_cli("run", "--provider", provider, "--base-url", server.base_url, "--model",
                         "test-model", "-C", self.ws, "--allow", "*", "--output", "json",
                         "fix the bug", env=self.env(OPENAI_API_KEY="sk-test",
                                                     ANTHROPIC_API_KEY="sk-ant-test"))
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed")
        self.assertEqual(r["tool_calls"], 4)
        self.assertIn("Fixed the bug", r["final_text"])
        self.assert_fixed()
        requests = server.requests()
        self.assertEqual(len(requests), len(script["responses"]))
        for req in requests:
            self.assertEqual(req["method"], "POST")
            self.assertTrue(req["path"].endswith(WIRE_PATHS[provider]), req["path"])
            self.assertEqual(req["body"]["model"], "test-model")
        # The last request carries the result of the second test run.
        self.assertIn("all tests passed", json.dumps(requests[-1]["body"]))

    def test_openai_chat(self):
        self.check_provider("openai")

    def test_anthropic_messages(self):
        self.check_provider("anthropic")

    def test_openai_responses(self):
        self.check_provider("openai-responses")

    def test_text_mode_streams_deltas(self):
        server = self.server(load_demo_script())
        p = self.run_cli("run", "--provider", "anthropic", "--base-url", server.base_url, "-C",
                         self.ws, "--allow", "*", "fix the bug",
                         env=self.env(ANTHROPIC_API_KEY="sk-ant-test"))
        self.assert_code(p, 0)
        self.assertIn("I'll start by reading the code.", p.stdout)
        self.assertIn("The tests pass now", p.stdout)
        self.assertIn("completed", p.stderr)


if __name__ == "__main__":
    unittest.main()
