"""The Debian package (scripts/package.sh): lintian, the service's hardening
(its exposure score, and that the tools an agent starts still work under its
system-call filter), and install, remove and purge in a bare Debian 12 root
(debootstrap --variant=minbase, no systemd running), as root in a chroot.

The root is made once and kept as a tarball in AGENTLOOP_PACKAGE_CACHE: the
first run downloads it from deb.debian.org (about a minute)."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from package_util import CACHE, HERE, VERSION, artifact, e2e_util

import serve_util  # noqa: E402  (tests/e2e, on the path package_util set)

DEB = artifact("agentloop_%s_amd64.deb" % VERSION)
MIRROR = os.environ.get("AGENTLOOP_DEBIAN_MIRROR", "http://deb.debian.org/debian")
ROOT_TARBALL = os.path.join(CACHE, "debian-12-minbase.tar")
UNIT = "lib/systemd/system/agentloop.service"
TIMEOUT = e2e_util.TIMEOUT


def run(args, **kw):
    kw.setdefault("timeout", TIMEOUT)
    return subprocess.run(args, capture_output=True, text=True, **kw)


def extract_deb(tmp):
    """The package's files under tmp/data, its control files under tmp/control."""
    data, control = os.path.join(tmp, "data"), os.path.join(tmp, "control")
    for cmd, d in (("-x", data), ("-e", control)):
        p = run(["dpkg-deb", cmd, DEB, d])
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
    return data, control


class DebContentsTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="al_deb_")
        self.data, self.control = extract_deb(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_control_and_files(self):
        with open(os.path.join(self.control, "control"), encoding="utf-8") as f:
            control = dict(re.findall(r"^([A-Za-z-]+): (.*)$", f.read(), re.M))
        self.assertEqual(control["Package"], "agentloop")
        self.assertEqual(control["Version"], VERSION)
        self.assertEqual(control["Architecture"], "amd64")
        self.assertRegex(control["Depends"], r"^libc6 \(>= 2\.\d+\), passwd$")
        with open(os.path.join(self.control, "conffiles"), encoding="utf-8") as f:
            self.assertEqual(f.read().split(), ["/etc/agentloop/config.toml"])
        for path in ("usr/bin/agentloop", "usr/share/man/man1/agentloop.1.gz",
                     "usr/share/bash-completion/completions/agentloop",
                     "usr/share/zsh/vendor-completions/_agentloop",
                     "usr/share/fish/vendor_completions.d/agentloop.fish",
                     "usr/share/doc/agentloop/copyright", "usr/share/doc/agentloop/changelog.gz",
                     "etc/agentloop/config.toml", UNIT):
            self.assertTrue(os.path.isfile(os.path.join(self.data, path)), path)

    @unittest.skipUnless(shutil.which("lintian"), "lintian not found (scripts/install-deps.sh)")
    def test_lintian_reports_no_error(self):
        p = run(["lintian", "--pedantic", DEB], timeout=300)
        tags = [l for l in p.stdout.splitlines() if re.match(r"^[EWIPXO]: ", l)]
        print("\n".join(["lintian:"] + tags))
        self.assertEqual([t for t in tags if t.startswith("E: ")], [], p.stdout + p.stderr)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_service_exposure_is_at_most_2(self):
        unit = os.path.join(self.data, UNIT)
        p = run(["systemd-analyze", "security", "--offline=yes", unit])
        m = re.search(r"Overall exposure level for agentloop\.service: (\d+\.\d+)", p.stdout)
        self.assertIsNotNone(m, p.stdout + p.stderr)
        print("exposure:", m.group(1))
        self.assertLessEqual(float(m.group(1)), 2.0, p.stdout)
        # Every directive is one systemd knows (ExecStart names the package's
        # binary, which is not installed here).
        with open(unit, encoding="utf-8") as f:
            text = f.read()
        checked = os.path.join(self.tmp, "agentloop.service")
        with open(checked, "w", encoding="utf-8") as f:
            f.write(text.replace("/usr/bin/agentloop", os.path.join(self.data, "usr/bin/agentloop")))
        p = run(["systemd-analyze", "verify", "--man=no", checked])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stdout + p.stderr, "")


def has_seccomp():
    return run(["/usr/bin/python3", "-c", "import seccomp"]).returncode == 0


@unittest.skipUnless(has_seccomp(), "Debian's python3-seccomp not installed "
                     "(scripts/install-deps.sh)")
class ServiceToolsTest(e2e_util.CliTestCase):
    """What the service's system-call filter does to the tools an agent
    starts: each runs under it (tests/package/service_confine.py)."""

    def setUp(self):
        super().setUp()
        self.data, _ = extract_deb(self.tmp)
        self.unit = os.path.join(self.data, UNIT)
        self.bin = os.path.join(self.data, "usr/bin/agentloop")

    def confined(self, unit, *args):
        return run(["/usr/bin/python3", os.path.join(HERE, "service_confine.py"), unit, "--"] +
                   list(args), env=self.env(), cwd=self.tmp)

    def sandboxed(self, unit, *args):
        # bash as agentloop's sandbox runs it (docs/tools.md, "Sandbox").
        return self.confined(unit, "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
                             "/proc", "--tmpfs", "/tmp", "--unshare-net", "--unshare-pid",
                             "--die-with-parent", *args)

    def test_tools_run_under_the_filter(self):
        cases = [
            (["bash", "-c", "echo $((6 * 7)) | cat"], "42"),
            (["/usr/bin/python3", "-c", "import ssl, sqlite3, subprocess; "
              "print(subprocess.run(['true']).returncode + 42)"], "42"),
            (["git", "--version"], "git version"),
        ]
        if shutil.which("node"):
            # V8 compiles this loop to machine code (its JIT writes code).
            cases.append((["node", "-e", "let s = 0; for (let i = 0; i < 1e6; i++) s += i % 2;"
                           " console.log(s / 5e5 * 42)"], "42"))
        for args, want in cases:
            p = self.confined(self.unit, *args)
            self.assertEqual(p.returncode, 0, "%s: %s" % (args[0], p.stderr))
            self.assertIn(want, p.stdout, args[0])
        p = self.sandboxed(self.unit, "bash", "-c", "echo sandboxed")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "sandboxed\n")

    def test_agentloop_runs_the_demo_under_the_filter(self):
        # Rule-allowed bash lines run in the bubblewrap sandbox; the demo's
        # check runs python3.
        p = self.confined(self.unit, self.bin, "run", "--provider", "script", "--script",
                          e2e_util.DEMO_SCRIPT, "-C", self.ws, "--allow", "*", "--output",
                          "json", "fix the bug")
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["status"], "completed")
        self.assert_fixed()

    def test_the_harness_sees_a_filter_that_breaks_the_sandbox(self):
        # Without @mount bubblewrap cannot make its mounts: the check above
        # would fail for a unit that forgot it.
        with open(self.unit, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("@mount", text)
        broken = os.path.join(self.tmp, "broken.service")
        with open(broken, "w", encoding="utf-8") as f:
            f.write(text.replace("@mount", ""))
        p = self.sandboxed(broken, "bash", "-c", "echo sandboxed")
        self.assertNotEqual(p.returncode, 0, p.stdout)


def debian_root_tarball():
    """The cached minimal Debian 12 root, made with debootstrap when missing."""
    if os.path.exists(ROOT_TARBALL):
        return ROOT_TARBALL
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix="debootstrap.", dir=CACHE)
    try:
        root = os.path.join(work, "root")
        p = run(["debootstrap", "--variant=minbase", "bookworm", root, MIRROR], timeout=900)
        if p.returncode != 0:
            raise RuntimeError("debootstrap failed:\n" + p.stdout[-3000:] + p.stderr[-3000:])
        partial = os.path.join(work, "root.tar")
        p = run(["tar", "-C", root, "-cf", partial, "."], timeout=300)
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        os.replace(partial, ROOT_TARBALL)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ROOT_TARBALL


# Paths dpkg, the user tools and the shell change on any install; the rest of
# the root must be as it was after a purge.
BOOKKEEPING = re.compile(
    r"^(var/lib/dpkg/|var/log/|var/cache/|var/lib/systemd/deb-systemd-helper-(enabled|masked)$|"
    r"etc/(passwd|group|shadow|gshadow|subuid|subgid)-?$|etc/\.pwd\.lock$|tmp/)")


@unittest.skipUnless(os.geteuid() == 0, "installing in a chroot needs root")
@unittest.skipUnless(shutil.which("debootstrap"), "debootstrap not found (scripts/install-deps.sh)")
class ChrootInstallTest(e2e_util.CliTestCase):

    def setUp(self):
        super().setUp()
        tarball = debian_root_tarball()
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(self.root)
        p = run(["tar", "-C", self.root, "-xf", tarball], timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        shutil.copy(DEB, os.path.join(self.root, "tmp", "agentloop.deb"))

    def chroot(self, *args, check=True, **env):
        p = run(["chroot", self.root] + list(args),
                env=dict({"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                          "DEBIAN_FRONTEND": "noninteractive"}, **env))
        if check:
            self.assertEqual(p.returncode, 0, "%s:\n%s%s" % (args, p.stdout, p.stderr))
        return p

    def paths(self):
        out = set()
        for d, dirs, files in os.walk(self.root):
            for name in dirs + files:
                rel = os.path.relpath(os.path.join(d, name), self.root)
                if not BOOKKEEPING.match(rel):
                    out.add(rel)
        return out

    def exists(self, path):
        return os.path.lexists(os.path.join(self.root, path))

    def status(self):
        p = self.chroot("dpkg-query", "-W", "-f=${Status}", "agentloop", check=False)
        return p.stdout

    def test_install_serve_remove_purge(self):
        self.assertFalse(os.path.exists(os.path.join(self.root, "run/systemd/system")))
        before = self.paths()
        self.chroot("dpkg", "-i", "/tmp/agentloop.deb")
        self.assertEqual(self.status(), "install ok installed")

        p = self.chroot("agentloop", "--version")
        self.assertTrue(p.stdout.startswith("agentloop %s " % VERSION), p.stdout)
        user = self.chroot("getent", "passwd", "agentloop").stdout.split(":")
        self.assertLess(int(user[2]), 1000)  # a system user
        self.assertEqual((user[5], user[6].strip()), ("/var/lib/agentloop", "/usr/sbin/nologin"))
        st = os.stat(os.path.join(self.root, "var/lib/agentloop"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (int(user[2]), 0o750))
        for path in ("etc/agentloop/config.toml", UNIT, "usr/share/man/man1/agentloop.1.gz",
                     "usr/share/bash-completion/completions/agentloop"):
            self.assertTrue(self.exists(path), path)
        # Installed, not enabled: the administrator enables it.
        self.assertFalse(self.exists("etc/systemd/system/multi-user.target.wants/agentloop.service"))

        self.serve_as_the_service()

        # The administrator enables it (what `systemctl enable` does, made
        # by the helper a maintainer script would call).
        self.chroot("deb-systemd-helper", "enable", "agentloop.service",
                    DPKG_MAINTSCRIPT_PACKAGE="agentloop")
        self.assertTrue(self.exists("etc/systemd/system/multi-user.target.wants/agentloop.service"))

        self.chroot("dpkg", "-r", "agentloop")
        self.assertEqual(self.status(), "deinstall ok config-files")
        self.assertFalse(self.exists("usr/bin/agentloop"))
        self.assertFalse(self.exists(UNIT))
        self.assertTrue(self.exists("etc/agentloop/config.toml"))  # a conffile stays
        self.chroot("getent", "passwd", "agentloop")

        self.chroot("dpkg", "-P", "agentloop")
        self.assertEqual(self.chroot("dpkg-query", "-W", "agentloop", check=False).returncode, 1)
        self.assertEqual(self.chroot("getent", "passwd", "agentloop", check=False).returncode, 2)
        self.assertEqual(self.chroot("getent", "group", "agentloop", check=False).returncode, 2)
        self.assertEqual(sorted(self.paths() - before), [])
        self.assertEqual(sorted(before - self.paths()), [])

    def serve_as_the_service(self):
        """agentloop serve as agentloop.service runs it (the user agentloop,
        the unit's environment and working directory) with an agent in
        /etc/agentloop/agents: it makes its token in the data directory and
        serves the agent to that token."""
        with open(os.path.join(self.root, UNIT), encoding="utf-8") as f:
            unit = f.read()
        env = re.search(r"^Environment=(.*)$", unit, re.M).group(1).split()
        cmd = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()
        self.assertEqual(cmd, ["/usr/bin/agentloop", "serve"])
        agent = os.path.join(self.root, "etc/agentloop/agents/writer")
        os.makedirs(agent)
        with open(os.path.join(agent, "agent.toml"), "w", encoding="utf-8") as f:
            f.write('[agent]\ndescription = "writes files"\nworkspace = "/var/lib/agentloop"\n\n'
                    '[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9"\n'
                    'model = "m"\napi_key_env = "WRITER_KEY"\n')
        listen = "127.0.0.1:%d" % free_port()
        proc = subprocess.Popen(
            ["chroot", "--userspec=agentloop:agentloop", self.root, "/usr/bin/env", "-C",
             "/var/lib/agentloop", "-i", "PATH=/usr/bin:/bin", "WRITER_KEY=sk-test"] + env +
            cmd + ["--listen", listen], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        try:
            line = token_line(proc)
            self.assertIn("token in /var/lib/agentloop/server-token", line or "")
            self.assertIn("http://%s/?token=" % listen, line)
            token_file = os.path.join(self.root, "var/lib/agentloop/server-token")
            self.assertEqual(os.stat(token_file).st_mode & 0o777, 0o600)
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
            req = urllib.request.Request("http://%s/v1/agents" % listen,
                                         headers={"Authorization": "Bearer " + token})
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                self.assertEqual(r.status, 200)
                self.assertIn('"writer"', r.read().decode())
        finally:
            proc.terminate()
            proc.communicate(timeout=TIMEOUT)
        shutil.rmtree(os.path.join(self.root, "etc/agentloop/agents"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_line(proc):
    """The first stderr line of `agentloop serve` that says where its token
    is, or None."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = serve_util.next_stderr_line(proc, deadline - time.monotonic())
        if not line:
            return None
        if "token in" in line:
            return line
    return None


if __name__ == "__main__":
    unittest.main()
