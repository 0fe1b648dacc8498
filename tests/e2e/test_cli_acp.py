"""`agentloop acp` driven by the official ACP client (docs/acp.md).

The client is the pinned `@agentclientprotocol/sdk` (tests/acp, installed by
the acp_npm_ci fixture into the build tree) running acp_client.mjs, which
spawns `agentloop acp` as an editor would. The model is the fake model
server replaying the demo's fix-the-bug script over the OpenAI wire format.
"""

import json
import os
import shutil
import subprocess
import unittest

from e2e_util import (BIN, BUGGY_LINE, DEMO_SCRIPT, FIXED_LINE, TIMEOUT, CliTestCase,
                      load_demo_script)

HERE = os.path.dirname(os.path.abspath(__file__))
NPM_DIR = os.environ.get("AGENTLOOP_ACP_NPM_DIR", "")
SDK = os.path.join(NPM_DIR, "node_modules", "@agentclientprotocol", "sdk", "dist", "v1", "stable",
                   "acp.js")
NODE = shutil.which("node")


@unittest.skipUnless(NODE and os.path.exists(SDK),
                     "node or the pinned ACP SDK (acp_npm_ci fixture) is not available")
class AcpTest(CliTestCase):

    def acp(self, server, answer="allow_once", prompts=("fix the bug",), load=None, fs=False,
            extra=()):
        config = {
            "sdk": SDK,
            "command": [BIN, "acp", "--provider", "openai", "--base-url", server.base_url,
                        "--model", "gpt-4o", "--allow", "bash(python3 -B test_stats.py)",
                        "--no-todo-loop", *extra],
            "env": self.env(OPENAI_API_KEY="sk-test"),
            "cwd": os.path.realpath(self.ws),
            "prompts": list(prompts),
            "answer": answer,
            "fs": fs,
        }
        if load:
            config["load"] = load
        path = self.write("acp_config.json", config)
        p = subprocess.run([NODE, os.path.join(HERE, "acp_client.mjs"), path],
                           capture_output=True, text=True, timeout=TIMEOUT, cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        record = json.loads(p.stdout)
        self.assertEqual(record["errors"], [], record["stderr"])
        self.assertEqual(record["exit_code"], 0, record["stderr"])
        return record

    def updates(self, record, kind):
        return [u["update"] for u in record["updates"] if u["update"]["sessionUpdate"] == kind]

    def test_fix_the_bug_with_an_approved_edit(self):
        server = self.server(load_demo_script())
        r = self.acp(server)
        self.assertEqual(r["initialize"]["protocolVersion"], 1)
        self.assertTrue(r["initialize"]["agentCapabilities"]["loadSession"])
        # The edit is the one call the rules leave to the person: asked once,
        # with the change as the protocol's diff content, answered allow_once.
        self.assertEqual(len(r["permissions"]), 1, r["permissions"])
        ask = r["permissions"][0]
        self.assertEqual(ask["sessionId"], r["sessionId"])
        self.assertEqual(ask["toolCall"]["kind"], "edit")
        self.assertEqual([o["kind"] for o in ask["options"]],
                         ["allow_once", "allow_always", "reject_once", "reject_always"])
        diff = ask["toolCall"]["content"][0]
        self.assertEqual(diff["type"], "diff")
        self.assertEqual(diff["path"], os.path.join(os.path.realpath(self.ws), "stats.py"))
        self.assertEqual(diff["oldText"], BUGGY_LINE)
        self.assertEqual(diff["newText"], FIXED_LINE)
        self.assertEqual(r["stops"], ["end_turn"])
        self.assert_fixed()

        # Every call was announced and ran.
        calls = {u["toolCallId"]: u for u in self.updates(r, "tool_call")}
        self.assertEqual(sorted(calls), ["call_edit", "call_read", "call_test1", "call_test2"])
        self.assertEqual(calls["call_read"]["kind"], "read")
        self.assertEqual(calls["call_test2"]["kind"], "execute")
        final = {}
        texts = {}
        for u in self.updates(r, "tool_call_update"):
            if "status" in u:
                final[u["toolCallId"]] = u["status"]
            for c in u.get("content") or []:
                if c["type"] == "content":
                    texts[u["toolCallId"]] = c["content"]["text"]
                if c["type"] == "diff":
                    self.assertEqual(u["toolCallId"], "call_edit")
        # The first test run fails (the bug), the check after the edit passes.
        self.assertEqual(final, {"call_read": "completed", "call_test1": "failed",
                                 "call_edit": "completed", "call_test2": "completed"})
        self.assertIn("all tests passed", texts["call_test2"])
        said = "".join(u["content"]["text"] for u in self.updates(r, "agent_message_chunk"))
        self.assertIn("Fixed the bug in `stats.py`", said)

        # Another agent process loads the stored session: the conversation
        # is replayed (before the answer: the unit tests hold that order on
        # the wire; the SDK may run a notification's handler after the
        # answer's).
        again = self.acp(server, prompts=(), load=r["sessionId"])
        self.assertEqual(again["load"], {})
        before = [u["update"] for u in again["updates"]]
        users = [u["content"]["text"] for u in before if u["sessionUpdate"] == "user_message_chunk"]
        self.assertEqual(users, ["fix the bug"])
        replayed = [u["toolCallId"] for u in before if u["sessionUpdate"] == "tool_call"]
        self.assertEqual(replayed, ["call_read", "call_test1", "call_edit", "call_test2"])

    def test_files_go_through_the_editor_when_it_offers_fs(self):
        server = self.server(load_demo_script())
        r = self.acp(server, fs=True)
        self.assertEqual(r["stops"], ["end_turn"])
        stats = os.path.join(os.path.realpath(self.ws), "stats.py")
        # The read, then the edit's read of the buffer and its write.
        self.assertEqual([(c["method"], c["path"]) for c in r["fs"]],
                         [("read", stats), ("read", stats), ("write", stats)])
        self.assertEqual(r["fs"][0]["sessionId"], r["sessionId"])
        self.assertIn(FIXED_LINE, r["fs"][2]["content"])
        self.assert_fixed()  # the client saved it; the check ran on it

    def test_a_rejected_edit_leaves_the_file_unchanged(self):
        server = self.server(load_demo_script())
        before = self.read_ws()
        r = self.acp(server, answer="reject_once")
        self.assertEqual(len(r["permissions"]), 1)
        self.assertEqual(r["stops"], ["end_turn"])
        self.assertEqual(self.read_ws(), before)
        failed = [u for u in self.updates(r, "tool_call_update")
                  if u["toolCallId"] == "call_edit" and u.get("status") == "failed"]
        self.assertEqual(len(failed), 1)

    def test_session_cancel_ends_the_prompt_cancelled(self):
        server = self.server(load_demo_script())
        before = self.read_ws()
        r = self.acp(server, answer="cancel-turn")
        self.assertEqual(r["stops"], ["cancelled"])
        self.assertEqual(self.read_ws(), before)

    def test_a_cancelled_permission_request_denies_the_call(self):
        server = self.server(load_demo_script())
        before = self.read_ws()
        r = self.acp(server, answer="")
        self.assertEqual(r["stops"], ["end_turn"])
        self.assertEqual(self.read_ws(), before)


class AcpStdioTest(CliTestCase):
    """The wire itself, without the SDK: every stdout line is a JSON-RPC
    message, diagnostics go to stderr, bad input gets an error reply."""

    def test_stdout_carries_only_protocol_messages(self):
        proc = subprocess.Popen(
            [BIN, "acp", "--provider", "script", "--script", DEMO_SCRIPT, "--yolo"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self.env(), cwd=self.tmp)
        ws = os.path.realpath(self.ws)
        lines = []

        def send(obj):
            proc.stdin.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
            proc.stdin.flush()

        def until(pred):
            while True:
                line = proc.stdout.readline()
                self.assertTrue(line, "agentloop acp closed stdout early")
                msg = json.loads(line)  # every line is one JSON message
                self.assertEqual(msg["jsonrpc"], "2.0", line)
                lines.append(msg)
                # --yolo: nothing is asked (a request would wait for ever).
                self.assertNotEqual(msg.get("method"), "session/request_permission", line)
                if pred(msg):
                    return msg

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        until(lambda m: m.get("id") == 1)
        send("{not json")
        self.assertEqual(until(lambda m: "error" in m)["error"]["code"], -32700)
        send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
              "params": {"cwd": "relative", "mcpServers": []}})
        bad = until(lambda m: m.get("id") == 2)
        self.assertEqual(bad["error"]["code"], -32602)
        self.assertIn("absolute", bad["error"]["message"])
        send({"jsonrpc": "2.0", "id": 3, "method": "session/new",
              "params": {"cwd": ws, "mcpServers": []}})
        sid = until(lambda m: m.get("id") == 3)["result"]["sessionId"]
        send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
              "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "fix the bug"}]}})
        done = until(lambda m: m.get("id") == 4)
        self.assertEqual(done["result"]["stopReason"], "end_turn")
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read()
        self.assertEqual(proc.wait(timeout=TIMEOUT), 0, err)
        self.assertEqual(rest, "")
        proc.stdout.close()
        proc.stderr.close()
        # --yolo's warning went to stderr, not into the protocol stream.
        self.assertIn("--yolo", err)
        updates = [m for m in lines if m.get("method") == "session/update"]
        self.assertTrue(updates)
        self.assertTrue(all(m["params"]["sessionId"] == sid for m in updates))
        self.assert_fixed()


if __name__ == "__main__":
    unittest.main()
