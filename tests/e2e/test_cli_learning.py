"""`agentloop proposals|memory|skills`: reviewing what the reflector proposed."""
import json
import os
import unittest

from e2e_util import CliTestCase


class LearningCliTest(CliTestCase):
    def write_proposal(self, pid, kind, title, content):
        d = os.path.join(self.data, "proposals")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, pid + ".json"), "w", encoding="utf-8") as f:
            json.dump({"id": pid, "kind": kind, "title": title, "content": content,
                       "session": "s", "created_ms": 1, "status": "pending",
                       "decided_ms": 0, "written": ""}, f)

    def test_accepting_a_proposal_writes_the_memory_once(self):
        self.write_proposal("prop_test0001", "memory", "Builds use ninja",
                            "The project builds with cmake --preset dev and ninja.")
        listed = self.run_cli("proposals", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("Builds use ninja", listed.stdout)

        before = self.run_cli("memory", "list", "-C", self.ws)
        self.assertIn("No memories", before.stdout)
        self.assertEqual(json.loads(self.run_cli("memory", "list", "-C", self.ws, "--output",
                                                 "json").stdout), [])
        accepted = self.run_cli("proposals", "accept", "prop_test0001", "-C", self.ws)
        self.assertEqual(accepted.returncode, 0, accepted.stderr)
        self.assertRegex(accepted.stdout, r"accepted prop_test0001: memory written to /.+\.md")
        after = self.run_cli("memory", "list", "-C", self.ws)
        self.assertEqual(after.returncode, 0, after.stderr)
        self.assertNotIn("No memories", after.stdout)
        rows = json.loads(self.run_cli("memory", "list", "-C", self.ws, "--output", "json").stdout)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["scope"], "user")
        self.assertEqual(rows[0]["uses"], 0)
        props = json.loads(self.run_cli("proposals", "list", "--output", "json").stdout)
        self.assertEqual([(p["id"], p["status"]) for p in props], [("prop_test0001", "accepted")])

        again = self.run_cli("proposals", "accept", "prop_test0001", "-C", self.ws)
        self.assertNotEqual(again.returncode, 0)

    def test_rejecting_writes_nothing_and_bad_usage_exits_2(self):
        self.write_proposal("prop_test0002", "memory", "Nope", "Not worth keeping.")
        rejected = self.run_cli("proposals", "reject", "prop_test0002")
        self.assertEqual(rejected.returncode, 0, rejected.stderr)
        self.assertIn("No memories", self.run_cli("memory", "list", "-C", self.ws).stdout)
        self.assertEqual(self.run_cli("proposals", "frob").returncode, 2)
        self.assertEqual(self.run_cli("proposals", "accept", "missing").returncode, 2)

    def test_skills_list_shows_workspace_skills(self):
        d = os.path.join(self.ws, ".agentloop", "skills", "greet")
        os.makedirs(d)
        with open(os.path.join(d, "SKILL.md"), "w", encoding="utf-8") as f:
            f.write("---\nname: greet\ndescription: Say hello nicely\n---\nHello $ARGUMENTS\n")
        out = self.run_cli("skills", "list", "-C", self.ws)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("greet", out.stdout)
        self.assertIn("Say hello nicely", out.stdout)
        rows = json.loads(self.run_cli("skills", "list", "-C", self.ws, "--output",
                                       "json").stdout)
        self.assertEqual([(r["name"], r["description"]) for r in rows],
                         [("greet", "Say hello nicely")])


if __name__ == "__main__":
    unittest.main()
