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
import shutil
import unittest

import serve_util
from e2e_util import TIMEOUT

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


class ServeCase(serve_util.ServeCase):
    """A served agent `writer` on the fake model server, and HTTP calls."""

    TOKEN = None  # set to require a bearer token

    def agent(self, script, extra_toml=""):
        self.model = self.server(script)
        tokens = None
        if self.TOKEN:
            tokens = [hashlib.sha256(self.TOKEN.encode()).hexdigest() + ":team:read,write,approve"]
        self.write_agent(self.model.base_url, tokens, extra_toml)

    def call(self, method, path, body=None, headers=None, token=None):
        """(status, headers, parsed JSON body or text)."""
        return self.http(method, path, body, headers, token if token is not None else self.TOKEN)


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
