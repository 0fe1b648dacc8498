"""The release tarball (scripts/package.sh): its files and checksums, and the
binary in it running a turn of the demo script."""

import hashlib
import os
import subprocess
import tarfile
import unittest

from package_util import DIST, VERSION, artifact, e2e_util

NAME = "agentloop-%s-linux-x86_64" % VERSION


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_sums(path):
    """{name: hex digest} of a sha256sum file."""
    sums = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            digest, name = line.rstrip("\n").split("  ", 1)
            sums[name] = digest
    return sums


class TarballTest(e2e_util.CliTestCase):

    def setUp(self):
        super().setUp()
        with tarfile.open(artifact(NAME + ".tar.gz")) as t:
            names = t.getnames()
            for m in t.getmembers():
                self.assertEqual((m.uid, m.gid), (0, 0), m.name)
            t.extractall(self.tmp)
        self.assertTrue(all(n == NAME or n.startswith(NAME + "/") for n in names), names)
        self.root = os.path.join(self.tmp, NAME)
        self.bin = os.path.join(self.root, "bin", "agentloop")

    def test_sha256sums_lists_every_file(self):
        sums = read_sums(os.path.join(self.root, "SHA256SUMS"))
        files = set()
        for d, _, fs in os.walk(self.root):
            for f in fs:
                files.add(os.path.relpath(os.path.join(d, f), self.root))
        files.discard("SHA256SUMS")
        self.assertEqual(set(sums), files)
        for name, digest in sums.items():
            self.assertEqual(sha256(os.path.join(self.root, name)), digest, name)

    def test_dist_sha256sums_match_the_artifacts(self):
        sums = read_sums(os.path.join(DIST, "SHA256SUMS"))
        for name in (NAME + ".tar.gz", "agentloop_%s_amd64.deb" % VERSION,
                     "agentloop-%s.tgz" % VERSION, "agentloop-linux-x64-%s.tgz" % VERSION):
            self.assertIn(name, sums)
            self.assertEqual(sha256(artifact(name)), sums[name], name)

    def test_man_page_and_completions(self):
        with open(os.path.join(self.root, "share/man/man1/agentloop.1"), encoding="utf-8") as f:
            self.assertTrue(f.read().startswith('.TH AGENTLOOP 1 "" "agentloop %s"' % VERSION))
        bash = os.path.join(self.root, "share/bash-completion/completions/agentloop")
        p = subprocess.run(["bash", "-c", 'source "$1" && complete -p agentloop', "-", bash],
                           capture_output=True, text=True, timeout=e2e_util.TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("agentloop", p.stdout)
        with open(os.path.join(self.root, "share/zsh/site-functions/_agentloop"),
                  encoding="utf-8") as f:
            self.assertTrue(f.read().startswith("#compdef agentloop"))
        with open(os.path.join(self.root, "share/fish/vendor_completions.d/agentloop.fish"),
                  encoding="utf-8") as f:
            self.assertIn("complete -c agentloop", f.read())
        self.assertTrue(os.path.exists(os.path.join(self.root, "share/doc/agentloop/cli.md")))

    def test_binary_runs_the_demo(self):
        p = subprocess.run([self.bin, "--version"], capture_output=True, text=True,
                           timeout=e2e_util.TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("agentloop %s " % VERSION), p.stdout)
        p = subprocess.run([self.bin, "run", "--provider", "script", "--script",
                            e2e_util.DEMO_SCRIPT, "-C", self.ws, "--allow", "*", "--output",
                            "json", "fix the bug"], capture_output=True, text=True,
                           env=self.env(), cwd=self.tmp, timeout=e2e_util.TIMEOUT)
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["status"], "completed")
        self.assert_fixed()


if __name__ == "__main__":
    unittest.main()
