"""End-to-end: agents (<config dir>/agents/<name>/) listed, shown and run
with `run --agent` against the fake model server (docs/agents.md)."""

import json
import os
import unittest

from e2e_util import CliTestCase, load_demo_script


class AgentsTest(CliTestCase):

    def setUp(self):
        super().setUp()
        self.config_dir = os.path.join(self.home, ".config", "agentloop")

    def agent(self, name, toml, system=None, config_dir=None):
        d = os.path.join(config_dir or self.config_dir, "agents", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "agent.toml"), "w", encoding="utf-8") as f:
            f.write(toml)
        if system is not None:
            with open(os.path.join(d, "system.md"), "w", encoding="utf-8") as f:
                f.write(system)
        return os.path.join(d, "agent.toml")

    def fixer(self, server, config_dir=None):
        return self.agent("fixer", """
[agent]
description = "fixes the demo's bug"
workspace = "%s"

[provider]
kind = "openai"
base_url = "%s"
model = "agent-model"
api_key_env = "FIXER_KEY"

[permissions]
allow = ["*"]
""" % (self.ws, server.base_url), system="You are the fixer agent.", config_dir=config_dir)

    def test_run_agent_uses_its_definition(self):
        script = load_demo_script()
        server = self.server(script)
        self.fixer(server)
        # Run from elsewhere: the agent's fixed workspace is where it works.
        p = self.run_cli("run", "--agent", "fixer", "--output", "json", "fix the bug",
                         env=self.env(FIXER_KEY="sk-test"))
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed")
        self.assert_fixed()
        requests = server.requests()
        self.assertEqual(len(requests), len(script["responses"]))
        first = requests[0]
        self.assertTrue(first["path"].endswith("/chat/completions"), first["path"])
        self.assertEqual(first["body"]["model"], "agent-model")
        system = first["body"]["messages"][0]
        self.assertEqual(system["role"], "system")
        self.assertIn("You are the fixer agent.", json.dumps(system))
        # The built-in prompt was replaced.
        self.assertNotIn("You are agentloop", json.dumps(system))
        # The session pinned the agent's settings.
        show = self.run_cli("sessions", "show", r["session_id"], "--output", "json")
        self.assert_code(show, 0)
        settings = json.loads(show.stdout)["settings"]
        self.assertEqual(settings["workspace"], os.path.realpath(self.ws))
        self.assertEqual(settings["provider"]["model"], "agent-model")

    def test_flags_win_over_the_agent_and_workspace_is_fixed(self):
        server = self.server(load_demo_script())
        self.fixer(server)
        p = self.run_cli("run", "--agent", "fixer", "--model", "flag-model", "--output", "json",
                         "fix the bug", env=self.env(FIXER_KEY="sk-test"))
        self.assert_code(p, 0)
        self.assertEqual(server.requests()[0]["body"]["model"], "flag-model")
        other = os.path.join(self.tmp, "other")
        os.makedirs(other)
        p = self.run_cli("run", "--agent", "fixer", "-C", other, "fix the bug",
                         env=self.env(FIXER_KEY="sk-test"))
        self.assert_code(p, 2)
        self.assertIn("works only in", p.stderr)

    def test_list_show_and_broken_agents(self):
        server = self.server(load_demo_script())
        self.fixer(server)
        broken = self.agent("broken", "[provider]\nmodle = \"x\"\n")
        p = self.run_cli("agents", "list", "--output", "json")
        self.assert_code(p, 0)
        listing = json.loads(p.stdout)
        by_name = {a["name"]: a for a in listing["agents"]}
        self.assertEqual(sorted(by_name), ["broken", "fixer"])
        self.assertTrue(by_name["fixer"]["ok"])
        self.assertEqual(by_name["fixer"]["description"], "fixes the demo's bug")
        self.assertEqual(by_name["fixer"]["workspace_policy"], "fixed")
        self.assertFalse(by_name["broken"]["ok"])
        self.assertIn(broken + ":2: unknown key 'provider.modle' (did you mean 'provider.model'?)",
                      by_name["broken"]["problems"][0])

        p = self.run_cli("agents", "list")
        self.assert_code(p, 0)
        self.assertIn("fixer", p.stdout)
        self.assertIn("unknown key 'provider.modle'", p.stdout)

        p = self.run_cli("agents", "show", "fixer")
        self.assert_code(p, 0)
        self.assertRegex(p.stdout, r'provider\.model = "agent-model" +# .*fixer/agent\.toml:9')
        self.assertIn("# system prompt " + os.path.join(self.config_dir, "agents", "fixer",
                                                        "system.md"), p.stdout)

        p = self.run_cli("run", "--agent", "broken", "x")
        self.assert_code(p, 2)
        self.assertIn("provider.modle", p.stderr)
        p = self.run_cli("run", "--agent", "fixr", "x")
        self.assert_code(p, 2)
        self.assertIn("did you mean 'fixer'?", p.stderr)

    def test_workspace_root_and_config_flag(self):
        # --config FILE: the agents live beside that file.
        etc = os.path.join(self.tmp, "etc")
        os.makedirs(etc)
        config_file = os.path.join(etc, "config.toml")
        with open(config_file, "w", encoding="utf-8") as f:
            f.write("")
        root = os.path.join(self.tmp, "sessions")
        os.makedirs(root)
        os.symlink(self.ws, os.path.join(root, "escape"))
        self.agent("rooted", """
[agent]
workspace_root = "%s"
create_workspace = true

[provider]
kind = "script"
script = "%s"

[permissions]
allow = ["*"]
""" % (root, os.path.join(self.ws, "script.json")), config_dir=etc)
        p = self.run_cli("agents", "list", "--config", config_file)
        self.assert_code(p, 0)
        self.assertIn("rooted", p.stdout)
        for bad, why in (("../ws", "may not contain '..'"), ("escape", "leads outside the root"),
                         (self.ws, "must be a relative path")):
            p = self.run_cli("run", "--config", config_file, "--agent", "rooted", "-C", bad, "x")
            self.assert_code(p, 2)
            self.assertIn(why, p.stderr)
        p = self.run_cli("run", "--config", config_file, "--agent", "rooted", "-C", "job-1",
                         "--output", "json", "hello")
        self.assertIn(p.returncode, (0, 1, 3), p.stderr)
        self.assertTrue(os.path.isdir(os.path.join(root, "job-1")))
        show = self.run_cli("sessions", "show", self.json_result(p)["session_id"], "--output",
                            "json")
        self.assert_code(show, 0)
        self.assertEqual(json.loads(show.stdout)["settings"]["workspace"],
                         os.path.realpath(os.path.join(root, "job-1")))


if __name__ == "__main__":
    unittest.main()
