"""The npm packages (scripts/package.sh): the launcher `agentloop` and the
platform package `@agentloop/linux-x64`, installed from their packed
tarballs with `npm install --offline` into a temporary prefix."""

import json
import os
import shutil
import subprocess
import unittest

from package_util import VERSION, artifact, e2e_util

MAIN = artifact("agentloop-%s.tgz" % VERSION)
PLATFORM = artifact("agentloop-linux-x64-%s.tgz" % VERSION)
NPM = shutil.which("npm")


@unittest.skipUnless(NPM, "npm not found (scripts/install-deps.sh installs it)")
class NpmTest(e2e_util.CliTestCase):

    def install(self, *tarballs, ignore_scripts=False):
        """npm install -g --offline of `tarballs` into a prefix of its own;
        returns the prefix's agentloop command."""
        prefix = os.path.join(self.tmp, "prefix%d" % len(os.listdir(self.tmp)))
        args = [NPM, "install", "-g", "--offline", "--prefix", prefix, "--cache",
                os.path.join(self.tmp, "npm-cache"), "--no-audit", "--no-fund",
                "--no-update-notifier"]
        if ignore_scripts:
            args.append("--ignore-scripts")
        p = subprocess.run(args + list(tarballs), capture_output=True, text=True,
                           env=self.env(), cwd=self.tmp, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return os.path.join(prefix, "bin", "agentloop")

    def run_bin(self, binary, *args, env=None):
        return subprocess.run([binary] + list(args), capture_output=True, text=True,
                              env=env or self.env(), cwd=self.tmp, timeout=e2e_util.TIMEOUT)

    def head(self, path):
        with open(os.path.realpath(path), "rb") as f:
            return f.read(4)

    def test_installs_the_native_binary_over_the_launcher(self):
        binary = self.install(PLATFORM, MAIN)
        # The command is the ELF itself: no Node process between the shell
        # and agentloop.
        self.assertEqual(self.head(binary), b"\x7fELF")
        p = self.run_bin(binary, "--version")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("agentloop %s " % VERSION), p.stdout)

        server = self.server(e2e_util.load_demo_script())
        p = self.run_bin(binary, "run", "--provider", "openai", "--base-url", server.base_url,
                         "--model", "test-model", "-C", self.ws, "--allow", "*", "--output",
                         "json", "fix the bug", env=self.env(OPENAI_API_KEY="sk-test"))
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["status"], "completed")
        self.assertEqual(r["tool_calls"], 4)
        self.assert_fixed()
        self.assertEqual(len(server.requests()), len(e2e_util.load_demo_script()["responses"]))

    def test_launcher_runs_the_binary_when_scripts_were_skipped(self):
        binary = self.install(PLATFORM, MAIN, ignore_scripts=True)
        self.assertEqual(self.head(binary), b"#!/u")
        p = self.run_bin(binary, "--version")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("agentloop %s " % VERSION), p.stdout)
        # The binary's exit status comes through the launcher (2: a bad flag).
        p = self.run_bin(binary, "run", "--no-such-flag", "x")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("--no-such-flag", p.stderr)

    def test_missing_platform_package_says_what_to_run(self):
        # npm installs the launcher alone without a word (the platform package
        # is an optional dependency, and npm hides what a successful install
        # script prints): each run says what to do.
        binary = self.install(MAIN)
        want = "npm install -g agentloop@%s @agentloop/linux-x64@%s" % (VERSION, VERSION)
        p = self.run_bin(binary, "--version")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("@agentloop/linux-x64", p.stderr)
        self.assertIn(want, p.stderr)
        self.assertEqual(p.stdout, "")

    def test_package_manifests(self):
        def manifest(tgz):
            p = subprocess.run(["tar", "-xzOf", tgz, "package/package.json"],
                               capture_output=True, text=True, timeout=e2e_util.TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stderr)
            return json.loads(p.stdout)

        main = manifest(MAIN)
        self.assertEqual(main["version"], VERSION)
        self.assertEqual(main["dependencies"], {})
        self.assertEqual(main["optionalDependencies"],
                         {"@agentloop/linux-x64": VERSION, "@agentloop/linux-arm64": VERSION})
        self.assertEqual(main["engines"], {"node": ">=18"})
        plat = manifest(PLATFORM)
        self.assertEqual((plat["name"], plat["version"]), ("@agentloop/linux-x64", VERSION))
        self.assertEqual((plat["os"], plat["cpu"], plat["libc"]), (["linux"], ["x64"], ["glibc"]))


if __name__ == "__main__":
    unittest.main()
