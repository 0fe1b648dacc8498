"""Helpers for the web console's tests: `agentloop serve` with an agent whose
model is the fake model server, and headless Chromium driven by Selenium
(Debian's chromium, chromium-driver and python3-selenium: the same
Chromium version for browser and driver, all from apt, no download at run
time). Screenshots go to $AGENTLOOP_CONSOLE_SHOTS (set by CTest) or a
directory under the test's temporary directory.
"""

import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import time
import unittest
import urllib.error
import urllib.request

from e2e_util import BIN, TIMEOUT, CliTestCase

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser_missing():
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "python3-selenium is not installed (scripts/install-deps.sh)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return "%s is not installed (scripts/install-deps.sh)" % path
    return None


class ServeCase(CliTestCase):
    """A served agent `writer` on the fake model server, and HTTP calls."""

    TOKEN = None  # set to require a bearer token

    def setUp(self):
        super().setUp()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        super().tearDown()

    def agent(self, script, extra_toml=""):
        self.model = self.server(script)
        d = os.path.join(self.home, ".config", "agentloop", "agents", "writer")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "agent.toml"), "w", encoding="utf-8") as f:
            f.write('[agent]\ndescription = "writes files"\nworkspace = "%s"\n\n'
                    '[provider]\nkind = "openai"\nbase_url = "%s"\nmodel = "m"\n'
                    'api_key_env = "WRITER_KEY"\n' % (self.ws, self.model.base_url) + extra_toml)
        if self.TOKEN:
            grant = hashlib.sha256(self.TOKEN.encode()).hexdigest() + ":team:read,write,approve"
            cfg = os.path.join(self.home, ".config", "agentloop", "config.toml")
            with open(cfg, "w", encoding="utf-8") as f:
                f.write("[server]\ntokens = %s\n" % json.dumps([grant]))

    def serve(self, port=0):
        p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:%d" % port],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=self.env(WRITER_KEY="sk-test"), cwd=self.tmp)
        self.procs.append(p)
        deadline = time.monotonic() + TIMEOUT
        line = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([p.stderr], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = p.stderr.readline()
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.base = "http://127.0.0.1:%s" % m.group(1)
                return p
            if not line:
                break
        self.fail("serve did not start: %r" % line)

    def call(self, method, path, body=None, headers=None, token=None):
        """(status, headers, parsed JSON body or text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        token = token if token is not None else self.TOKEN
        if token:
            req.add_header("Authorization", "Bearer " + token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                raw, status, hdrs = r.read(), r.status, r.headers
        except urllib.error.HTTPError as e:
            raw, status, hdrs = e.read(), e.code, e.headers
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        return status, hdrs, parsed


class BrowserCase(ServeCase):
    """ServeCase plus headless Chromium."""

    @classmethod
    def setUpClass(cls):
        why = browser_missing()
        if why:
            raise unittest.SkipTest(why)

    def setUp(self):
        super().setUp()
        self.drivers = []
        self.shots = os.environ.get("AGENTLOOP_CONSOLE_SHOTS") or os.path.join(self.tmp, "shots")
        os.makedirs(self.shots, exist_ok=True)

    def tearDown(self):
        for d in self.drivers:
            try:
                d.quit()
            except Exception:  # the browser may already be gone
                pass
        super().tearDown()

    def browser(self, width=1280, height=900, dark=False):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        profile = os.path.join(self.tmp, "chromium-%d" % len(self.drivers))
        for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--user-data-dir=" + profile,
                  "--window-size=%d,%d" % (width, height)):
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
        self.drivers.append(d)
        if dark:
            d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        d.set_window_size(width, height)
        return d

    def wait(self, driver, cond, what, timeout=TIMEOUT):
        from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait
        try:
            # A node replaced while it is looked at (streamed text is
            # re-rendered) is looked up again at the next poll.
            return WebDriverWait(driver, timeout, poll_frequency=0.05,
                                 ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: cond(d))
        except TimeoutException:
            self.shot(driver, "failed-" + self._testMethodName)
            requests = driver.execute_script(
                "return performance.getEntriesByType('resource').map(e => e.name)")
            raise AssertionError("timed out waiting for " + what + "\nbrowser log: " +
                                 json.dumps(self.browser_log(driver))[:3000] +
                                 "\nrequests: " + json.dumps(requests)[:3000])

    def shot(self, driver, name):
        path = os.path.join(self.shots, name + ".png")
        driver.save_screenshot(path)
        return path

    def browser_log(self, driver):
        try:
            return driver.get_log("browser")
        except Exception:
            return []

    def assert_no_script_errors(self, driver):
        """No uncaught exception and no CSP or trusted-types violation; a
        refused request (400, 409) is logged by Chromium and is expected."""
        bad = [e for e in self.browser_log(driver) if e.get("level") == "SEVERE"
               and "Failed to load resource" not in e.get("message", "")]
        self.assertEqual(bad, [])

    # --- the page ---------------------------------------------------------

    def open(self, driver, fragment=""):
        driver.get(self.base + "/" + fragment)

    def wait_app(self, driver):
        self.wait(driver, lambda d: d.find_element("id", "app").is_displayed(), "the console")

    def new_session(self, driver):
        before = driver.execute_script("return location.hash")
        driver.find_element("id", "new-session").click()
        self.wait(driver, lambda d: d.execute_script("return location.hash") not in ("", before),
                  "a new session")
        return driver.execute_script("return decodeURIComponent(location.hash.slice(1))")

    def send(self, driver, text):
        box = driver.find_element("id", "prompt")
        self.wait(driver, lambda d: box.is_enabled(), "the prompt box")
        box.send_keys(text)
        driver.find_element("id", "send").click()

    def approval_card(self, driver, root="#timeline"):
        sel = root + " article.card.approval:not(.decided)"
        return self.wait(driver, lambda d: (d.find_elements("css selector", sel) or [None])[0],
                         "an approval card in " + root)

    def assistant_texts(self, driver):
        return driver.execute_script(
            "return [...document.querySelectorAll('#timeline .item.assistant .md')]"
            ".map(e => e.innerText.trim())")

    def wait_turn_done(self, driver):
        self.wait(driver, lambda d: d.find_element("id", "send").is_enabled() and
                  not d.find_element("id", "cancel").is_displayed(), "the turn to end")
