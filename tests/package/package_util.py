"""Shared by the tests of the release artifacts (tests/package).

scripts/package.sh writes the artifacts into AGENTLOOP_DIST before these
tests run (the CTest fixture package_dist, tests/package/CMakeLists.txt).
The fake model server and the demo workspace come from the end-to-end tests'
helpers (tests/e2e/e2e_util.py)."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "e2e"))

import e2e_util  # noqa: E402  (after the path above)

DIST = os.environ.get("AGENTLOOP_DIST", os.path.join(SOURCE, "dist"))
# Where slow, reusable inputs are kept between runs (the Debian root).
CACHE = os.environ.get("AGENTLOOP_PACKAGE_CACHE", os.path.join(SOURCE, "build", "package-cache"))


def project_version():
    """The CMake project version: the one version of every artifact."""
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"^project\(agentloop VERSION ([0-9.]+)", f.read(), re.M)
    if not m:
        raise RuntimeError("no project version in CMakeLists.txt")
    return m.group(1)


VERSION = project_version()


def artifact(name):
    return os.path.join(DIST, name)
