"""End-to-end: a long task in a small context window. The fake model server
plays a model with a 16k-token window that rejects larger requests the way
each real API does (HTTP 400 with its error body), and writes compaction
summaries when asked. A task of 120 steps, each reading an 8 KB file, must
complete without one rejection on each wire format."""

import json
import os
import re
import subprocess
import unittest

from e2e_util import BIN, TIMEOUT, CliTestCase, json_lines, load_demo_script

WINDOW = 16384
STEPS = 120


class ContextWindowTest(CliTestCase):

    def make_files(self):
        line = "x" * 79 + "\n"
        for i in range(STEPS):
            with open(os.path.join(self.ws, "f%03d.txt" % i), "w", encoding="utf-8") as f:
                f.write(line * 100)  # 8000 bytes

    def script(self):
        items = []
        for i in range(STEPS):
            items.append({"tool_calls": [{"id": "c%d" % i, "name": "read",
                                          "input": {"file_path": "f%03d.txt" % i}}],
                          "usage": {"input_tokens": 1, "output_tokens": 20}})
        items.append({"text": "Read all the files.",
                      "usage": {"input_tokens": 1, "output_tokens": 10}})
        return {"responses": items}

    def run_long_task(self, provider, window=WINDOW):
        self.make_files()
        server = self.server(self.script(), "--context-window", str(window), "--auto-summary")
        env = self.env(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test",
                       AGENTLOOP_PROVIDER_CONTEXT_WINDOW=str(window),
                       AGENTLOOP_PROVIDER_MAX_OUTPUT_TOKENS="2048")
        p = self.run_cli("run", "--provider", provider, "--base-url", server.base_url,
                         "--model", "test-model", "-C", self.ws, "--allow", "*",
                         "--max-tool-calls", "500", "--max-turns", "500",
                         "--max-tokens", "100000000", "--no-todo-loop", "--output", "json",
                         "read every file", env=env)
        return p, server

    def check(self, provider):
        p, server = self.run_long_task(provider)
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed", r)
        self.assertEqual(r["tool_calls"], STEPS)
        requests = server.requests()
        summaries = 0
        wrap_up = 0
        for req in requests:
            body = json.dumps(req["body"])
            if "Summarize the conversation above so that" in body:
                summaries += 1
            if "approaching its context budget" in body:
                wrap_up += 1
            for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
                if key in req["body"]:
                    self.assertLessEqual(req["body"][key], 2048)
            self.assertLessEqual(len(json.dumps(req["body"])) // 4, WINDOW + 1024)
        self.assertGreater(summaries, 0)
        self.assertGreater(wrap_up, 0)
        # Every request was accepted: one per step, plus the summaries.
        self.assertEqual(len(requests), STEPS + 1 + summaries)
        # The store kept every message: the export has all 120 results.
        events = self.export(r["session_id"])
        results = [e for e in events if e["type"] == "message"
                   and any(b.get("type") == "tool_result"
                           for b in e["message"]["content"])]
        self.assertEqual(len(results), STEPS)
        compactions = [e for e in events if e["type"] == "compaction"]
        self.assertTrue(compactions)
        self.assertTrue(any(c.get("summary_source") == "model" for c in compactions))

    def test_openai_chat(self):
        self.check("openai")

    def test_anthropic_messages(self):
        self.check("anthropic")

    def test_openai_responses(self):
        self.check("openai-responses")

    def test_compact_by_hand_and_the_resumed_view(self):
        script = load_demo_script()
        script["responses"].append({"text": "Still fixed.",
                                    "usage": {"input_tokens": 10, "output_tokens": 3}})
        server = self.server(script, "--auto-summary")
        env = self.env(OPENAI_API_KEY="sk-test")
        common = ("--provider", "openai", "--base-url", server.base_url, "--model", "gpt-4o")
        p = self.run_cli("run", *common, "-C", self.ws, "--allow", "*", "--output", "json",
                         "fix the bug", env=env)
        self.assert_code(p, 0)
        sid = self.json_result(p)["session_id"]
        c = self.run_cli("compact", sid, "--focus", "the stats fix", *common, env=env)
        self.assert_code(c, 0)
        self.assertIn("compacted", c.stderr)
        summary_reqs = [r for r in server.requests()
                        if "Summarize the conversation above" in json.dumps(r["body"])]
        self.assertEqual(len(summary_reqs), 1)
        self.assertIn("Focus on: the stats fix", json.dumps(summary_reqs[0]["body"]))
        events = self.export(sid)
        comp = [e for e in events if e["type"] == "compaction"]
        self.assertEqual(len(comp), 1)
        self.assertEqual(comp[0]["trigger"], "manual")
        self.assertEqual(comp[0]["summary_source"], "model")
        self.assertIn("Goals", comp[0]["summary"]["content"][0]["text"])
        # Nothing is deleted: the export still has every message of the run.
        self.assertEqual(len([e for e in events if e["type"] == "message"]), 10)
        # A later process rebuilds the compacted view: its first request
        # starts with the summary, and the last 4 messages follow.
        r = self.run_cli("resume", sid, "is it still fixed?", *common, "--output", "json",
                         env=env)
        self.assert_code(r, 0)
        last = server.requests()[-1]["body"]["messages"]
        self.assertEqual(last[0]["role"], "system")  # the system prompt
        self.assertIn("[compacted ", last[1]["content"])
        self.assertIn("is it still fixed?", last[-1]["content"])

    def test_the_todo_list_survives_compaction(self):
        self.make_files()
        items = [{"tool_calls": [{"id": "t0", "name": "todo",
                                  "input": {"action": "create", "subject": "read every file"}}],
                  "usage": {"input_tokens": 1, "output_tokens": 5}}]
        items += self.script()["responses"][:40]
        items.append({"text": "done", "usage": {"input_tokens": 1, "output_tokens": 1}})
        server = self.server({"responses": items}, "--context-window", str(WINDOW),
                             "--auto-summary")
        env = self.env(OPENAI_API_KEY="sk-test",
                       AGENTLOOP_PROVIDER_CONTEXT_WINDOW=str(WINDOW),
                       AGENTLOOP_PROVIDER_MAX_OUTPUT_TOKENS="2048")
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url,
                         "--model", "test-model", "-C", self.ws, "--allow", "*",
                         "--max-tool-calls", "500", "--max-turns", "500",
                         "--max-tokens", "100000000", "--no-todo-loop",
                         "--output", "json", "read every file", env=env)
        self.assert_code(p, 0)
        sid = self.json_result(p)["session_id"]
        compactions = [e for e in self.export(sid) if e["type"] == "compaction"]
        self.assertTrue(compactions)
        carried = [c for c in compactions if c.get("summary")
                   and "todo_snapshot" in c["summary"]["content"][0].get("meta", {})]
        self.assertTrue(carried, compactions)
        tasks = carried[-1]["summary"]["content"][0]["meta"]["todo_snapshot"]["tasks"]
        self.assertIn("read every file", json.dumps(tasks))

    def test_kill_during_compaction_leaves_a_loadable_session(self):
        # The summary request is answered only after a long wait: the
        # process is killed while the band compacts (after the step's
        # budget check in the band, before the summary arrives).
        self.make_files()
        server = self.server(self.script(), "--context-window", str(WINDOW), "--auto-summary",
                             "--summary-delay-ms", "60000")
        env = self.env(OPENAI_API_KEY="sk-test",
                       AGENTLOOP_PROVIDER_CONTEXT_WINDOW=str(WINDOW),
                       AGENTLOOP_PROVIDER_MAX_OUTPUT_TOKENS="2048")
        proc = self.spawn("run", "--provider", "openai", "--base-url", server.base_url,
                          "--model", "test-model", "-C", self.ws, "--allow", "*",
                          "--max-tool-calls", "500", "--max-turns", "500",
                          "--max-tokens", "100000000", "--no-todo-loop",
                          "--output", "stream-json", "read every file", env=env)
        sid = None
        in_band = False
        for line in proc.stdout:
            e = json.loads(line)
            sid = e.get("session_id", sid)
            if e["type"] == "budget_check" and e.get("band", "ok") != "ok":
                in_band = True
                break
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        self.assertTrue(in_band)
        shown = self.run_cli("sessions", "show", sid, env=env)
        self.assert_code(shown, 0)
        events = self.export(sid)
        self.assertTrue(any(e["type"] == "message" for e in events))

    def long_session(self, provider, turns):
        """`turns` turns of one chat session in the small window: each turn
        reads an 8 KB file and answers. Returns the session id, the server
        and the chat process."""
        self.make_files()
        items = []
        for t in range(turns):
            items.append({"tool_calls": [{"id": "t%dc" % t, "name": "read",
                                          "input": {"file_path": "f%03d.txt" % (t % STEPS)}}],
                          "usage": {"input_tokens": 1, "output_tokens": 20}})
            items.append({"text": "answer %d" % t,
                          "usage": {"input_tokens": 1, "output_tokens": 10}})
        server = self.server({"responses": items}, "--context-window", str(WINDOW),
                             "--auto-summary")
        env = self.env(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test",
                       AGENTLOOP_PROVIDER_CONTEXT_WINDOW=str(WINDOW),
                       AGENTLOOP_PROVIDER_MAX_OUTPUT_TOKENS="2048",
                       AGENTLOOP_STORE_SYNC="normal")
        lines = "\n".join(["question %d: read the next file" % t for t in range(turns)]
                           + ["/session"]) + "\n"
        # A long run: the generous bound only stops a hung binary.
        p = subprocess.run(
            [BIN, "chat", "--provider", provider, "--base-url", server.base_url,
             "--model", "test-model", "-C", self.ws, "--allow", "*",
             "--max-tokens", "100000000", "--no-todo-loop"],
            input=lines, capture_output=True, text=True, env=env, cwd=self.tmp,
            timeout=20 * TIMEOUT)
        self.assert_code(p, 0)
        m = re.search(r"^session\s+(\S+)", p.stderr, re.M)
        self.assertIsNotNone(m, p.stderr[-2000:])
        return m.group(1), server, p

    def check_long_session(self, provider, turns=200):
        sid, server, chat = self.long_session(provider, turns)
        requests = server.requests()
        # Across turns the band mostly drops the oldest half of the earlier
        # turns; a summary request is made only when that is not enough.
        summaries = [r for r in requests
                     if "Summarize the conversation above so that" in json.dumps(r["body"])]
        # Every request was accepted: two per turn, plus any summaries (a
        # rejected request would be one more, answered with HTTP 400).
        self.assertEqual(len(requests), 2 * turns + len(summaries))
        self.assertNotIn("context length", chat.stderr)
        wrap_up = [r for r in requests if "approaching its context budget" in json.dumps(r["body"])]
        self.assertTrue(wrap_up)
        for req in requests:
            self.assertLessEqual(len(json.dumps(req["body"])) // 4, WINDOW + 1024)
        events = self.export(sid)
        ends = [e for e in events if e["type"] == "turn_end"]
        self.assertEqual(len(ends), turns)
        self.assertTrue(all(e["stop"] == "completed" for e in ends),
                        [e for e in ends if e["stop"] != "completed"][:1])
        answers = [e for e in events if e["type"] == "message"
                   and e["message"]["role"] == "assistant"
                   and any(b.get("text") == "answer %d" % (turns - 1)
                           for b in e["message"]["content"])]
        self.assertEqual(len(answers), 1)
        # Nothing is deleted: every turn's result is in the store.
        results = [e for e in events if e["type"] == "message"
                   and any(b.get("type") == "tool_result" for b in e["message"]["content"])]
        self.assertEqual(len(results), turns)
        # No compaction was a recovery from a rejection.
        triggers = {e.get("trigger") for e in events if e["type"] == "compaction"}
        self.assertNotIn("prompt_too_long", triggers)
        self.assertIn("threshold", triggers)

    def test_two_hundred_turns_openai_chat(self):
        self.check_long_session("openai")

    def test_two_hundred_turns_anthropic_messages(self):
        self.check_long_session("anthropic")

    def test_two_hundred_turns_openai_responses(self):
        self.check_long_session("openai-responses")

    def test_a_stalled_summary_request_ends_at_its_timeout(self):
        # The server would answer the summary request after ten minutes; the
        # configured 300 ms timeout ends it, the truncating summary is used
        # and a notice says why; the task completes without a rejection.
        self.make_files()
        items = self.script()["responses"][:20]
        items.append({"text": "done", "usage": {"input_tokens": 1, "output_tokens": 1}})
        server = self.server({"responses": items}, "--context-window", str(WINDOW),
                             "--auto-summary", "--summary-delay-ms", "600000")
        env = self.env(OPENAI_API_KEY="sk-test",
                       AGENTLOOP_PROVIDER_CONTEXT_WINDOW=str(WINDOW),
                       AGENTLOOP_PROVIDER_MAX_OUTPUT_TOKENS="2048",
                       AGENTLOOP_COMPACTION_SUMMARY_TIMEOUT_MS="300")
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url,
                         "--model", "test-model", "-C", self.ws, "--allow", "*",
                         "--max-tool-calls", "500", "--max-turns", "500",
                         "--max-tokens", "100000000", "--no-todo-loop",
                         "--output", "stream-json", "read every file", env=env)
        self.assert_code(p, 0)
        events = json_lines(p.stdout)
        end = [e for e in events if e["type"] == "turn_end"]
        self.assertEqual(end[-1]["stop"], "completed", end)
        comps = [e for e in events if e["type"] == "compaction" and e.get("summary")
                 and e.get("summary_source")]
        self.assertTrue(comps)
        self.assertTrue(all(c["summary_source"] == "truncated" for c in comps), comps)
        self.assertTrue(all(c["trigger"] == "threshold" for c in comps), comps)
        notices = [e["text"] for e in events if e["type"] == "notice"
                   and "summary request failed" in e.get("text", "")]
        self.assertEqual(len(notices), len(comps))
        self.assertIn("no answer within 300 ms", notices[0])
        # One attempt per summary: a timeout is not retried.
        summary_reqs = [r for r in server.requests()
                        if "Summarize the conversation above so that" in json.dumps(r["body"])]
        self.assertEqual(len(summary_reqs), len(comps))

    def test_a_resumed_session_carries_the_measured_context(self):
        # The provider counted 50 000 input tokens for the last request (a
        # system text and tools far larger than chars / 4 says, as with a
        # tokenizer that splits code finely). A later process starts from
        # that count, not from chars / 4 of the stored history.
        server = self.server({"responses": [
            {"text": "first", "usage": {"input_tokens": 50000, "output_tokens": 5}},
            {"text": "second", "usage": {"input_tokens": 50100, "output_tokens": 5}}]})
        env = self.env(OPENAI_API_KEY="sk-test")
        common = ("--provider", "openai", "--base-url", server.base_url, "--model", "gpt-4o",
                  "--max-tokens", "10000000")
        p = self.run_cli("run", *common, "-C", self.ws, "--output", "json", "hello", env=env)
        self.assert_code(p, 0)
        sid = self.json_result(p)["session_id"]
        r = self.run_cli("resume", sid, "and again", *common, "--output", "stream-json",
                         env=env)
        self.assert_code(r, 0)
        checks = [e for e in json_lines(r.stdout) if e["type"] == "budget_check"]
        self.assertTrue(checks)
        # 50 000 + chars / 4 of the answer "first" and the new prompt.
        self.assertGreaterEqual(checks[0]["context_tokens"], 50000)
        self.assertLessEqual(checks[0]["context_tokens"], 50000 + 20)

    def test_rejection_looks_like_the_real_api(self):
        # A window too small even for one file: the server rejects, and the
        # CLI reports the provider's prompt-too-long answer.
        self.make_files()
        server = self.server(self.script(), "--context-window", "1000")
        env = self.env(OPENAI_API_KEY="sk-test", AGENTLOOP_PROVIDER_CONTEXT_WINDOW="100000")
        p = self.run_cli("run", "--provider", "openai", "--base-url", server.base_url,
                         "--model", "test-model", "-C", self.ws, "--allow", "*",
                         "--output", "json", "read every file", env=env)
        r = self.json_result(p)
        self.assertEqual(r["status"], "failed")
        self.assertIn("maximum context length", r["reason"])


if __name__ == "__main__":
    unittest.main()
