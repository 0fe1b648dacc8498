"""End-to-end: a full fix-a-bug run through each wire format, against the
fake model server (agentloop-fake-server on 127.0.0.1)."""

import json
import os
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

    def test_fifty_small_reads_without_cache_figures_fit_the_default_token_budget(self):
        # A local OpenAI-compatible server reports only each prompt's total
        # (about 4.2k tokens, growing): the token budget counts what each
        # call adds, so fifty reads fit the default 50 000 tokens instead of
        # stopping after about eleven.
        for i in range(50):
            with open(os.path.join(self.ws, "f%02d.txt" % i), "w", encoding="utf-8") as f:
                f.write("line %d\n" % i)
        items = [{"tool_calls": [{"id": "r%d" % i, "name": "read",
                                  "input": {"file_path": "f%02d.txt" % i}}],
                  "usage": {"input_tokens": 4200 + 80 * i, "output_tokens": 30}}
                 for i in range(50)]
        items.append({"text": "Read all fifty.",
                      "usage": {"input_tokens": 8200, "output_tokens": 10}})
        server = self.server({"responses": items})
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url, "--model",
                         "local-model", "-C", self.ws, "--yolo", "--max-tool-calls", "60",
                         "--max-turns", "60", "--output", "json", "read every file",
                         env=self.env(OPENAI_API_KEY="sk-test"))
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed", r["reason"])
        self.assertEqual(r["tool_calls"], 50)
        self.assertLess(r["tokens"], 50000)
        self.assertEqual(r["usage"]["input_tokens"], sum(4200 + 80 * i for i in range(50)) + 8200)
        # Every request carried the usage the server reported without cache figures.
        self.assertEqual(len(server.requests()), 51)

    def test_an_unknown_models_window_notice_is_said_once_per_session(self):
        script = load_demo_script()
        script["responses"].append({"text": "Nothing more to do."})
        server = self.server(script)
        flags = ["--provider", "openai", "--base-url", server.base_url, "--model",
                 "my-local-model", "--output", "json"]
        env = self.env(OPENAI_API_KEY="sk-test")
        p = self.run_cli("run", *flags, "-C", self.ws, "fix the bug", env=env)
        r = self.json_result(p)
        sid = r["session_id"]
        # Three pauses, each approved by another process: each opens the
        # session again and continues its turn.
        for _ in range(5):
            if p.returncode == 0:
                break
            self.assert_code(p, 5)
            p = self.run_cli("approve", r["pending"][0]["id"], *flags, env=env)
            r = self.json_result(p)
        self.assertEqual(r["status"], "completed")
        # A later turn of the same session, in another process.
        p = self.run_cli("run", *flags, "-C", self.ws, "--session", sid, "and again", env=env)
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["final_text"], "Nothing more to do.")
        notices = [e for e in self.export(sid) if e["type"] == "notice"
                   and "not in the built-in table" in e.get("text", "")]
        self.assertEqual(len(notices), 1, notices)
        # Never a part of what the model is sent.
        for req in server.requests():
            self.assertNotIn("not in the built-in table", json.dumps(req["body"]))

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
