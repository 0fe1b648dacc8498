"""End-to-end: the bash sandbox from the command line (--sandbox,
tools.sandbox_fallback, plan mode).

The tests that need bubblewrap to work skip with the reason when it cannot
run here; the others put a stand-in `bwrap` that always fails first in PATH.
"""

import os
import shutil
import subprocess
import unittest

from e2e_util import BUGGY_LINE, CliTestCase, TIMEOUT


def bubblewrap_unavailable():
    """Why bubblewrap cannot build the sandbox here, or None."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    p = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                        "--unshare-net", "--unshare-pid", "--die-with-parent", "true"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        return "bubblewrap cannot create a sandbox here: " + p.stderr.strip()
    return None


class SandboxTest(CliTestCase):

    def broken_bwrap_env(self, **extra):
        """PATH starts with a `bwrap` that fails like one without user namespaces."""
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        fake = os.path.join(bindir, "bwrap")
        with open(fake, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\n"
                    "exit 1\n")
        os.chmod(fake, 0o755)
        env = self.env(**extra)
        env["PATH"] = bindir + ":" + env["PATH"]
        return env

    def test_unavailable_sandbox_refuses_by_default(self):
        p = self.run_cli("run", "--provider", "script", "--script",
                         os.path.join(self.ws, "script.json"), "-C", self.ws, "--allow", "*",
                         "--sandbox", "workspace-write", "fix the bug",
                         env=self.broken_bwrap_env())
        self.assert_code(p, 2)
        lines = [l for l in p.stderr.splitlines() if "cannot run here" in l]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("No permissions to creating new namespace", lines[0])
        self.assertIn("tools.sandbox_fallback", lines[0])
        self.assertIn(BUGGY_LINE, self.read_ws())  # nothing ran

    def test_unavailable_sandbox_with_warn_says_so_once_and_runs(self):
        p = self.run_cli("run", "--provider", "script", "--script",
                         os.path.join(self.ws, "script.json"), "-C", self.ws, "--allow", "*",
                         "--sandbox", "workspace-write", "fix the bug",
                         env=self.broken_bwrap_env(AGENTLOOP_TOOLS_SANDBOX_FALLBACK="warn"))
        self.assert_code(p, 0)
        self.assertEqual(p.stderr.count("cannot run here"), 1, p.stderr)
        self.assertEqual(p.stderr.count("UNSANDBOXED"), 1, p.stderr)
        self.assert_fixed()

    def test_workspace_write_runs_the_demo_in_the_sandbox(self):
        why = bubblewrap_unavailable()
        if why:
            self.skipTest(why)
        p = self.script_run("--allow", "*", "--sandbox", "workspace-write")
        self.assert_code(p, 0)
        self.assertNotIn("cannot run here", p.stderr)
        self.assert_fixed()

    def test_plan_mode_runs_bash_read_only(self):
        why = bubblewrap_unavailable()
        if why:
            self.skipTest(why)
        script = self.write("plan.json", {"responses": [
            {"tool_calls": [{"id": "c1", "name": "bash", "input": {
                "command": "touch made 2>/dev/null || echo write-denied; grep -c def stats.py"}}]},
            {"text": "planned"}]})
        p = self.run_cli("run", "--provider", "script", "--script", script, "-C", self.ws,
                         "--command", "plan", "--allow", "*", "--output", "json", "plan it")
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["status"], "completed")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "made")))
        events = self.export(self.json_result(p)["session_id"])
        results = [e for e in events if e.get("type") == "tool_call_end"]
        self.assertTrue(any("write-denied" in str(e) for e in results), events)

    def test_a_line_a_rule_allows_runs_in_the_sandbox_by_default(self):
        why = bubblewrap_unavailable()
        if why:
            self.skipTest(why)
        outside = os.path.join(self.tmp, "outside-marker")
        os.makedirs(os.path.join(self.ws, ".git", "hooks"), exist_ok=True)
        with open(os.path.join(self.ws, ".git", "config"), "w", encoding="utf-8") as f:
            f.write("[core]\n")
        secret = os.path.join(self.data, "planted")
        script = self.write("rule.json", {"responses": [
            {"tool_calls": [{"id": "c1", "name": "bash", "input": {
                # Through variables, which the reader's protected-path guard does not see.
                "command": "touch inside-marker; o=%s; touch $o; d=.gi; echo x >> ${d}t/config; "
                           "touch ${d}t/hooks/pre-commit; s=%s; touch ${s}ta/planted; true"
                           % (outside, self.data[:-2])}}]},
            {"text": "done"}]})
        # No --sandbox (tools.sandbox is off): the rule's allowance confines the line.
        p = self.run_cli("run", "--provider", "script", "--script", script, "-C", self.ws,
                         "--allow", "bash", "--output", "json", "go")
        self.assert_code(p, 0)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "inside-marker")))
        self.assertFalse(os.path.exists(outside))
        self.assertFalse(os.path.exists(secret))
        self.assertFalse(os.path.exists(os.path.join(self.ws, ".git", "hooks", "pre-commit")))
        with open(os.path.join(self.ws, ".git", "config"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "[core]\n")

    def test_a_line_a_rule_allows_is_asked_where_bubblewrap_cannot_run(self):
        script = self.write("rule.json", {"responses": [
            {"tool_calls": [{"id": "c1", "name": "bash", "input": {"command": "touch ran"}}]},
            {"text": "done"}]})
        p = self.run_cli("run", "--provider", "script", "--script", script, "-C", self.ws,
                         "--allow", "bash", "--output", "json", "go",
                         env=self.broken_bwrap_env())
        self.assertEqual(self.json_result(p)["status"], "pending_approval", p.stdout + p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "ran")))
        self.assertIn("the bash sandbox cannot run here", p.stderr)
        self.assertIn("No permissions to creating new namespace", p.stderr)


if __name__ == "__main__":
    unittest.main()
