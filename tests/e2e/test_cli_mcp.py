"""End-to-end: tools of an MCP server (tests/e2e/fake_mcp_server.py over
stdio) offered to the model as mcp__<server>__<tool>, asked for by default,
approved in another process, and refused in plan mode unless a trusted
server marks them read-only."""

import json
import os
import shutil
import sys
import unittest

from e2e_util import CliTestCase
from test_cli_serve import ServeCase

FAKE_MCP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_mcp_server.py")
# The pinned reference servers, installed by the mcp_npm_ci test into the
# build tree that registers the tests (AGENTLOOP_MCP_NPM_DIR), by default the
# one beside tests/support (tests/mcp/CMakeLists.txt).
NPM_DIR = os.environ.get("AGENTLOOP_MCP_NPM_DIR") or os.path.join(os.path.dirname(os.path.dirname(
    os.environ.get("AGENTLOOP_FAKE_SERVER", "/nonexistent/x/y"))), "mcp", "npm")
EVERYTHING = os.path.join(NPM_DIR, "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")


class McpTest(CliTestCase):

    def configure(self, trusted=False, extra=""):
        cfg_dir = os.path.join(self.home, ".config", "agentloop")
        os.makedirs(cfg_dir, exist_ok=True)
        with open(os.path.join(cfg_dir, "config.toml"), "w", encoding="utf-8") as f:
            f.write('[mcp_servers.fake]\ncommand = %s\nargs = [%s, "--stderr-noise"]\n'
                    'env = { FAKE_SETTING = "from-config" }\ntrusted = %s\n%s' %
                    (json.dumps(sys.executable), json.dumps(FAKE_MCP),
                     "true" if trusted else "false", extra))

    def run_model(self, server, *args):
        return self.run_cli("run", "--provider", "openai", "--base-url", server.base_url,
                            "--model", "m", "-C", self.ws, "--output", "json", *args,
                            env=self.env(OPENAI_API_KEY="sk-test"))

    def test_model_calls_mcp_tool_after_approval(self):
        self.configure()
        server = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__fake__echo",
                             "input": {"text": "hello from the model"}}]},
            {"text": "The server echoed."}]})
        p = self.run_model(server, "echo something")
        self.assert_code(p, 5)  # MCP tools are asked for by default
        r = self.json_result(p)
        self.assertEqual(r["status"], "pending_approval")
        item = r["pending"][0]
        self.assertEqual(item["tool"], "mcp__fake__echo")
        # The model saw the tool with the server's description and schema.
        first = server.requests()[0]["body"]
        offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
        self.assertIn("mcp__fake__echo", offered)
        self.assertEqual(offered["mcp__fake__echo"]["description"], "Echo the text back.")
        self.assertEqual(offered["mcp__fake__echo"]["parameters"]["required"], ["text"])
        # The server's instructions are in the system prompt, labelled as its own.
        self.assertIn("Instructions of MCP server 'fake'", json.dumps(first["messages"][0]))
        self.assertIn("Use echo to echo.", json.dumps(first["messages"][0]))

        a = self.run_cli("approve", item["id"], "--output", "json",
                         env=self.env(OPENAI_API_KEY="sk-test"))
        self.assert_code(a, 0)
        done = self.json_result(a)
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["final_text"], "The server echoed.")
        # The tool's answer reached the model's next request.
        requests = server.requests()
        self.assertEqual(len(requests), 2)
        self.assertIn("echo: hello from the model", json.dumps(requests[-1]["body"]))

    def test_allow_rule_by_name_and_server_environment(self):
        self.configure()
        server = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__fake__env",
                             "input": {"name": "FAKE_SETTING"}},
                            {"id": "c2", "name": "mcp__fake__env",
                             "input": {"name": "OPENAI_API_KEY"}}]},
            {"text": "ok"}]})
        p = self.run_model(server, "--allow", "mcp__fake__*", "show the setting")
        self.assert_code(p, 0)
        last = json.dumps(server.requests()[-1]["body"])
        self.assertIn("FAKE_SETTING=from-config", last)
        # The server gets bash's scrubbed environment: no API key.
        self.assertIn("OPENAI_API_KEY=(unset)", last)

    def test_plan_mode_offers_only_read_only_tools_of_a_trusted_server(self):
        self.configure(trusted=True)
        server = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__fake__echo", "input": {"text": "hi"}}]},
            {"text": "planned"}]})
        p = self.run_model(server, "--command", "plan", "--allow", "*", "make a plan")
        self.assert_code(p, 0)
        requests = server.requests()
        offered = [t["function"]["name"] for t in requests[0]["body"]["tools"]]
        self.assertIn("mcp__fake__echo", offered)
        self.assertNotIn("mcp__fake__write_note", offered)
        self.assertIn("echo: hi", json.dumps(requests[-1]["body"]))

        # A forged call of the tool that was not offered is refused, unrun.
        forged = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__fake__write_note",
                             "input": {"text": "should not be written"}}]},
            {"text": "planned"}]})
        p = self.run_model(forged, "--command", "plan", "--allow", "*", "make a plan")
        self.assert_code(p, 4)
        r = self.json_result(p)
        self.assertEqual(r["status"], "tool_refused")
        self.assertIn("PLAN_MODE_REFUSED", r["reason"])
        self.assertFalse(os.path.exists(os.path.join(self.ws, "NOTE.txt")))

    def test_plan_mode_offers_no_tool_of_an_untrusted_server(self):
        self.configure(trusted=False)
        server = self.server({"responses": [{"text": "planned"}]})
        p = self.run_model(server, "--command", "plan", "--allow", "*", "make a plan")
        self.assert_code(p, 0)
        offered = [t["function"]["name"] for t in server.requests()[0]["body"]["tools"]]
        self.assertEqual([n for n in offered if n.startswith("mcp__")], [])

    def test_server_that_does_not_start_is_reported_and_the_session_runs(self):
        cfg_dir = os.path.join(self.home, ".config", "agentloop")
        os.makedirs(cfg_dir, exist_ok=True)
        with open(os.path.join(cfg_dir, "config.toml"), "w", encoding="utf-8") as f:
            f.write('[mcp_servers.broken]\ncommand = "/nonexistent/server"\n')
        server = self.server({"responses": [{"text": "fine"}]})
        p = self.run_model(server, "hello")
        self.assert_code(p, 0)
        self.assertIn("mcp: server 'broken' failed to start", p.stderr)

    def test_untrusted_workspace_cannot_start_a_server(self):
        marker = os.path.join(self.tmp, "started")
        os.makedirs(os.path.join(self.ws, ".agentloop"), exist_ok=True)
        with open(os.path.join(self.ws, ".agentloop", "config.toml"), "w") as f:
            f.write('[mcp_servers.evil]\ncommand = "/bin/touch"\nargs = [%s]\n' %
                    json.dumps(marker))
        server = self.server({"responses": [{"text": "fine"}]})
        p = self.run_model(server, "hello")
        self.assert_code(p, 0)
        self.assertFalse(os.path.exists(marker))
        self.assertIn("mcp_servers.evil", p.stderr)

    def write_mcp_json(self, marker, extra=""):
        """A project .mcp.json whose server leaves `marker` when it starts."""
        with open(os.path.join(self.ws, ".mcp.json"), "w", encoding="utf-8") as f:
            json.dump({"mcpServers": {"proj": {
                "command": "/bin/sh",
                "args": ["-c", 'touch "$1"; exec "$2" "$3"' + extra, "sh", marker,
                         sys.executable, FAKE_MCP]}}}, f)

    def test_mcp_json_of_an_untrusted_clone_starts_nothing_until_trusted(self):
        marker = os.path.join(self.tmp, "proj-started")
        self.write_mcp_json(marker)
        server = self.server({"responses": [{"text": "fine"}, {"text": "fine"},
                                            {"text": "fine"}]})
        p = self.run_model(server, "hello")
        self.assert_code(p, 0)
        self.assertFalse(os.path.exists(marker))
        self.assertIn(".mcp.json", p.stderr)
        self.assertIn("are not started", p.stderr)
        l = self.run_cli("mcp", "list", "-C", self.ws, env=self.env())
        self.assert_code(l, 0)
        self.assertIn("no MCP servers are configured", l.stdout)
        self.assertFalse(os.path.exists(marker))

        t = self.run_cli("trust", self.ws, env=self.env())
        self.assert_code(t, 0)
        l = self.run_cli("mcp", "list", "-C", self.ws, "--output", "json", env=self.env())
        self.assert_code(l, 0)
        listed = json.loads(l.stdout)["servers"]
        self.assertEqual([s["name"] for s in listed], ["proj"])
        self.assertEqual(listed[0]["state"], "ready")
        self.assertEqual(listed[0]["transport"], "stdio")
        self.assertEqual(listed[0]["server"], {"name": "fake-mcp", "version": "1.2.3"})
        self.assertEqual(listed[0]["protocol_version"], "2025-11-25")
        self.assertIn("mcp__proj__echo", listed[0]["tools"])
        self.assertTrue(os.path.exists(marker))
        os.remove(marker)

        # A changed .mcp.json is untrusted again: nothing starts.
        self.write_mcp_json(marker, extra=" # changed")
        p = self.run_model(server, "hello")
        self.assert_code(p, 0)
        self.assertFalse(os.path.exists(marker))
        self.assertIn("changed since this workspace was trusted", p.stderr)
        offered = [t["function"]["name"] for t in server.requests()[-1]["body"]["tools"]]
        self.assertEqual([n for n in offered if n.startswith("mcp__")], [])

    def test_mcp_list_text_shows_state_version_tools_and_failures(self):
        self.configure(extra='[mcp_servers.broken]\ncommand = "/nonexistent/server"\n')
        l = self.run_cli("mcp", "list", "-C", self.ws, env=self.env())
        self.assert_code(l, 1)  # a server failed to start
        self.assertIn("fake  ready  stdio  fake-mcp 1.2.3  (MCP 2025-11-25)  5 tools", l.stdout)
        self.assertIn("  mcp__fake__echo\n", l.stdout)
        self.assertIn("broken  failed  stdio", l.stdout)
        self.assertIn("/nonexistent/server", l.stdout)

    def test_slash_mcp_in_chat_lists_the_session_servers(self):
        self.configure()
        server = self.server({"responses": [{"text": "fine"}]})
        c = self.run_cli("chat", "--provider", "openai", "--base-url", server.base_url,
                         "--model", "m", "-C", self.ws, stdin="/mcp\n",
                         env=self.env(OPENAI_API_KEY="sk-test"))
        self.assert_code(c, 0)
        self.assertIn("fake  ready  stdio  fake-mcp 1.2.3", c.stderr)
        self.assertIn("mcp__fake__crash", c.stderr)

    def test_reference_server_echo_reaches_the_next_request(self):
        node = shutil.which("node")
        if node is None or not os.path.exists(EVERYTHING):
            self.skipTest("node or the npm reference servers are not installed (%s)" % NPM_DIR)
        cfg_dir = os.path.join(self.home, ".config", "agentloop")
        os.makedirs(cfg_dir, exist_ok=True)
        with open(os.path.join(cfg_dir, "config.toml"), "w", encoding="utf-8") as f:
            f.write('[mcp_servers.everything]\ncommand = %s\nargs = [%s, "stdio"]\n'
                    'startup_timeout_ms = 60000\n' % (json.dumps(node), json.dumps(EVERYTHING)))
        server = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__everything__echo",
                             "input": {"message": "conformance says hi"}}]},
            {"text": "Echoed."}]})
        p = self.run_model(server, "--allow", "mcp__everything__echo", "echo it")
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["final_text"], "Echoed.")
        requests = server.requests()
        self.assertEqual(len(requests), 2)
        offered = [t["function"]["name"] for t in requests[0]["body"]["tools"]]
        self.assertIn("mcp__everything__get-sum", offered)
        self.assertIn("Echo: conformance says hi", json.dumps(requests[1]["body"]))

    def tiny_image_run(self, provider, model, extra_config=""):
        """Runs a turn whose model calls the reference server's get-tiny-image;
        returns the body of the request that follows the call."""
        node = shutil.which("node")
        if node is None or not os.path.exists(EVERYTHING):
            self.skipTest("node or the npm reference servers are not installed (%s)" % NPM_DIR)
        cfg_dir = os.path.join(self.home, ".config", "agentloop")
        os.makedirs(cfg_dir, exist_ok=True)
        with open(os.path.join(cfg_dir, "config.toml"), "w", encoding="utf-8") as f:
            f.write('[mcp_servers.everything]\ncommand = %s\nargs = [%s, "stdio"]\n'
                    'startup_timeout_ms = 60000\n%s' % (json.dumps(node), json.dumps(EVERYTHING),
                                                       extra_config))
        server = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__everything__get-tiny-image",
                             "input": {}}]},
            {"text": "A logo."}]})
        p = self.run_cli("run", "--provider", provider, "--base-url", server.base_url,
                         "--model", model, "-C", self.ws, "--output", "json",
                         "--allow", "mcp__everything__get-tiny-image", "show the image",
                         env=self.env(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test"))
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["final_text"], "A logo.")
        requests = server.requests()
        self.assertEqual(len(requests), 2)
        return requests[1]["body"]

    def test_reference_server_image_reaches_an_anthropic_model_in_the_tool_result(self):
        body = self.tiny_image_run("anthropic", "claude-sonnet-4-5")
        results = [b for m in body["messages"] if m["role"] == "user"
                   for b in m["content"] if b.get("type") == "tool_result"]
        self.assertEqual(len(results), 1)
        content = results[0]["content"]
        self.assertEqual(content[0], {"type": "text", "text": "Here's the image you requested:\n"
                                                             "The image above is the MCP logo."})
        self.assertEqual(content[1]["type"], "image")
        self.assertEqual(content[1]["source"]["type"], "base64")
        self.assertEqual(content[1]["source"]["media_type"], "image/png")
        self.assertTrue(content[1]["source"]["data"].startswith("iVBORw0KGgo"))

    def test_reference_server_image_reaches_a_responses_model_as_input_image(self):
        body = self.tiny_image_run("openai-responses", "gpt-4o")
        outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
        self.assertEqual(len(outputs), 1)
        parts = outputs[0]["output"]
        self.assertEqual(parts[0]["type"], "input_text")
        self.assertEqual(parts[1]["type"], "input_image")
        self.assertTrue(parts[1]["image_url"].startswith("data:image/png;base64,iVBORw0KGgo"))

    def test_reference_server_image_reaches_a_chat_model_in_a_user_message(self):
        body = self.tiny_image_run("openai", "gpt-4o")
        roles = [m["role"] for m in body["messages"]]
        self.assertEqual(roles[-2:], ["tool", "user"])
        self.assertIn("[image 1 of tool call c1 (image/png): in the next user message]",
                      body["messages"][-2]["content"])
        parts = body["messages"][-1]["content"]
        self.assertEqual(parts[1]["type"], "image_url")
        self.assertTrue(parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR"))

    def test_reference_server_image_is_described_to_a_model_without_images(self):
        # "m" is not in the model table: assumed to take no images.
        body = self.tiny_image_run("openai", "m")
        tool = [m for m in body["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tool), 1)
        self.assertRegex(tool[0]["content"],
                         r"\[image image/png, \d+ bytes, not shown: "
                         r"the model does not accept images\]")
        self.assertNotIn("iVBORw0KGgo", json.dumps(body))

    def test_provider_images_setting_overrides_the_model_table(self):
        body = self.tiny_image_run("openai", "m", '[provider]\nimages = "send"\n')
        self.assertEqual(body["messages"][-1]["content"][1]["type"], "image_url")
        body = self.tiny_image_run("anthropic", "claude-sonnet-4-5",
                                   '[provider]\nimages = "describe"\n')
        self.assertNotIn("iVBORw0KGgo", json.dumps(body))
        self.assertIn("not shown: the model does not accept images", json.dumps(body))


class ServedMcpTest(ServeCase):
    """An agent of `agentloop serve` declares its MCP servers in agent.toml."""

    def test_a_served_agents_turn_calls_its_mcp_server_and_the_api_shows_it(self):
        server = self.server({"responses": [
            {"tool_calls": [{"id": "c1", "name": "mcp__fake__echo",
                             "input": {"text": "from a served turn"}}]},
            {"text": "echoed"}]})
        self.agent(server, extra='\n[mcp_servers.fake]\ncommand = %s\nargs = [%s]\n'
                   'trusted = true\n' % (json.dumps(sys.executable), json.dumps(FAKE_MCP)))
        self.serve()
        status, s = self.call("POST", "/v1/sessions", {"agent": "writer"})
        self.assertEqual(status, 201, s)
        mcp = "/v1/sessions/%s/mcp" % s["id"]
        stopped = {"running": False, "servers": [
            {"name": "fake", "transport": "stdio", "state": "stopped", "tools": []}]}
        self.assertEqual(self.call("GET", mcp), (200, stopped))
        status, t = self.call("POST", "/v1/sessions/%s/turns" % s["id"], {"input": "echo"})
        self.assertEqual(status, 202, t)
        status, w = self.call("GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (s["id"], t["id"]))
        self.assertEqual(w["result"]["stop"], "completed", w)
        self.assertEqual(w["result"]["final_text"], "echoed")
        # The trusted server's read-only echo ran without an approval, and its
        # answer reached the model.
        self.assertIn("echo: from a served turn", json.dumps(server.requests()[-1]["body"]))
        self.assertEqual(self.call("GET", mcp), (200, stopped))
        status, err = self.call("GET", "/v1/sessions/nosuch/mcp")
        self.assertEqual(status, 404, err)


if __name__ == "__main__":
    unittest.main()
