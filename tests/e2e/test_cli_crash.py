"""End-to-end crash test: a scripted run killed with SIGKILL at 50 points,
then `agentloop resume`.

The kill points are chosen with a fixed seed among the lines of the run's
stream-json output (kill right after reading line N). For each point:
  - the session loads (`sessions show` succeeds);
  - nothing committed before the kill is lost: the engine commits the
    persisted events at its commit boundaries (docs/protocol.md, "Types")
    before the front end sees the boundary event, so every persisted event
    printed up to the last boundary line read must be in the store, byte for byte; and the export after the
    resume must still hold every event exported right after the kill;
  - the resumed turn completes.
"""

import json
import os
import random
import shutil
import unittest

from e2e_util import DEMO, CliTestCase, event_persistence, json_lines, load_demo_script

KILLS = 50
SEED = 20250521
# What the store keeps and at which events the engine commits, as
# docs/protocol.md's table says (a decision is committed with the
# tool_call_begin or pending that follows it).
PERSISTENCE = event_persistence()
DISPLAY_ONLY = {t for t, p in PERSISTENCE.items() if p == "no"}
BOUNDARIES = {t for t, p in PERSISTENCE.items() if p == "yes, commits"}


class CrashTest(CliTestCase):

    def setUp(self):
        super().setUp()
        script = load_demo_script()
        # One more answer for sessions whose turn had completed before the kill.
        script["responses"].append({"text": "Nothing else to do.",
                                    "usage": {"input_tokens": 10, "output_tokens": 5}})
        self.script = self.write("crash_script.json", script)

    def fresh_workspace(self, i):
        ws = os.path.join(self.tmp, "ws_%s" % i)
        shutil.copytree(DEMO, ws)
        return ws

    def run_args(self, ws):
        return ["run", "--provider", "script", "--script", self.script, "-C", ws, "--allow", "*",
                "--output", "stream-json", "fix the bug"]

    def test_kill_at_random_points_then_resume(self):
        full = self.run_cli(*self.run_args(self.fresh_workspace("full")))
        self.assert_code(full, 0)
        total = len(json_lines(full.stdout))
        self.assertGreater(total, 10)

        rng = random.Random(SEED)
        points = [rng.randint(1, total) for _ in range(KILLS)]
        sessions = []
        self.cases = {"no_turn": 0, "interrupted": 0, "ended": 0}
        for i, n in enumerate(points):
            with self.subTest(kill=i, after_line=n):
                sessions.append(self.kill_and_resume(i, n))
        # The points must mostly land inside the turn, where recovery matters.
        self.assertGreaterEqual(self.cases["interrupted"], KILLS // 2, self.cases)

        listed = json.loads(self.run_cli("sessions", "list", "--all", "--output", "json").stdout)
        listed_ids = {s["id"] for s in listed}
        for sid in sessions:
            self.assertIn(sid, listed_ids)

    def kill_and_resume(self, i, n):
        ws = self.fresh_workspace(i)
        proc = self.spawn(*self.run_args(ws))
        seen = []
        for line in proc.stdout:
            seen.append(json.loads(line))
            if len(seen) == n:
                break
        proc.kill()
        proc.communicate()
        self.assertTrue(seen, "no output before the kill")
        sid = seen[0]["session_id"]

        # The session loads, as stored (no repair).
        show = self.run_cli("sessions", "show", sid, "--output", "json")
        self.assert_code(show, 0)

        # Everything the process had committed is in the store.
        after_kill = {e["seq"]: e for e in self.export(sid)}
        last_boundary = max((k for k, e in enumerate(seen) if e["type"] in BOUNDARIES),
                            default=-1)
        for e in seen[:last_boundary + 1]:
            if e["type"] in DISPLAY_ONLY:
                continue
            self.assertEqual(after_kill.get(e["seq"]), e,
                             "event seq %d (%s) was printed after its commit but is not stored"
                             % (e["seq"], e["type"]))

        # Resume: continue the interrupted turn, or ask again when none began
        # (the prompt was never committed) or the turn had completed.
        types = [e["type"] for e in after_kill.values()]
        resume = ["resume", sid, "--provider", "script", "--script", self.script, "--allow", "*",
                  "--output", "json"]
        def last(t, ts):
            return max((k for k, x in enumerate(ts) if x == t), default=-1)
        ended = last("turn_end", types) > last("turn_begin", types)
        if "turn_begin" not in types:
            resume.append("fix the bug")
            self.cases["no_turn"] += 1
        elif ended:
            resume.append("anything else?")
            self.cases["ended"] += 1
        else:
            self.cases["interrupted"] += 1
        p = self.run_cli(*resume)
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["status"], "completed")

        after_resume = {e["seq"]: e for e in self.export(sid)}
        for seq, e in after_kill.items():
            self.assertEqual(after_resume.get(seq), e, "event seq %d lost by the resume" % seq)
        resumed_types = [e["type"] for e in after_resume.values()]
        self.assertGreater(last("turn_end", resumed_types), last("turn_begin", resumed_types))
        return sid


if __name__ == "__main__":
    unittest.main()
