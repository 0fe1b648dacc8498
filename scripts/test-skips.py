#!/usr/bin/env python3
"""Lists the tests that skipped, with their reasons, from CTest's logs.

Usage: scripts/test-skips.py [--fail] LOG...

Each LOG is a Testing/Temporary/LastTest.log that ctest wrote (the full output
of every test it ran). A skip is found in that output as gtest reports it
("file:line: Skipped", the reason, "[  SKIPPED ] Suite.Case") and as Python's
unittest -v reports it ("test_x (module.Class.test_x) ... skipped 'reason'").
Tests that ctest itself did not run (a SKIP_RETURN_CODE, a failed fixture)
are in its summary, which the caller prints.

With --fail the exit status is 1 when any test skipped: scripts/test.sh
passes it in CI, where scripts/install-deps.sh installed everything every
test needs, so a skip there is a broken set-up, not a missing package.
"""

import re
import sys

TEST_START = re.compile(r"^\d+/\d+ Test: (.+)$")
GTEST_SKIP = re.compile(r"^(\S+:\d+): Skipped$")
GTEST_SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+)")
PY_SKIP = re.compile(r"^(.*?)\s*\.\.\. skipped '(.*)'$")
PY_NAME = re.compile(r"^\w+ \([\w.]+\)")


def skips_in(output_lines):
    """(case, reason) for each skip in one test's output."""
    found = []
    reason = None
    for i, line in enumerate(output_lines):
        m = GTEST_SKIP.match(line)
        if m:
            reason = []
            continue
        m = GTEST_SKIPPED.match(line)
        if m and reason is not None:
            found.append((m.group(1), " ".join(r.strip() for r in reason if r.strip())))
            reason = None
            continue
        if reason is not None and not line.startswith("["):
            reason.append(line)
            continue
        m = PY_SKIP.match(line)
        if m:
            name = m.group(1)
            # unittest -v prints a docstring's first line after the name.
            if not PY_NAME.match(name) and i > 0 and PY_NAME.match(output_lines[i - 1]):
                name = output_lines[i - 1].strip()
            found.append((name, m.group(2)))
    return found


def parse(path):
    """(ctest test, case, reason) for each skip in one LastTest.log."""
    result = []
    test = None
    output = None
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = TEST_START.match(line)
        if m:
            test = m.group(1)
        elif line == "Output:" and test is not None:
            output = []
            i += 2  # the dashed line under "Output:"
            while i < len(lines) and lines[i] != "<end of output>":
                output.append(lines[i])
                i += 1
            for case, reason in skips_in(output):
                result.append((test, case, reason))
            test = None
        i += 1
    return result


def main(argv):
    fail = False
    if argv and argv[0] == "--fail":
        fail = True
        argv = argv[1:]
    skips = []
    for path in argv:
        skips.extend(parse(path))
    if not skips:
        print("skipped tests: none")
        return 0
    print("skipped tests: %d" % len(skips))
    for test, case, reason in skips:
        label = test if case in test else "%s: %s" % (test, case)
        print("  SKIPPED %s -- %s" % (label, reason or "(no reason given)"))
    if fail:
        print("skipped tests fail this run: every dependency was installed, so each test above "
              "should have run (unset AL_TEST_NO_SKIP to only list them)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
