"""End-to-end: the PostgreSQL store selected by AGENTLOOP_STORE_URL (and
store.url) for the command line and `agentloop serve`, and `agentloop store
migrate` (docs/storage.md, "PostgreSQL"), on a throwaway cluster."""

import os
import unittest

from e2e_util import json_lines
from pg_cluster import PgServeCase

WRITE = {"responses": [
    {"tool_calls": [{"id": "c1", "name": "write",
                     "input": {"file_path": "served.txt", "content": "from the server\n"}}]},
    {"text": "wrote served.txt"},
]}


class PgStoreTest(PgServeCase):
    def pg_env(self, **extra):
        return self.env(AGENTLOOP_STORE_URL=self.url, **extra)

    def test_the_command_line_keeps_its_sessions_in_postgresql(self):
        p = self.run_cli("run", "--provider", "script", "--script",
                         os.path.join(self.ws, "script.json"), "-C", self.ws,
                         "--output", "json", "fix the bug", env=self.pg_env())
        # The demo's bash call pauses the turn; another process approves it
        # from the store and runs the rest of the turn.
        self.assert_code(p, 5)
        paused = self.json_result(p)
        sid = paused["session_id"]
        self.assertEqual(self.count("SELECT COUNT(*) FROM pending_index WHERE NOT resolved"), 1)
        for _ in range(5):
            p = self.run_cli("approve", paused["pending"][0]["id"], "--output", "json",
                             env=self.pg_env())
            if p.returncode != 5:
                break
            paused = self.json_result(p)  # the next call of the turn pauses again
        self.assert_code(p, 0)
        self.assertEqual(self.json_result(p)["status"], "completed")
        self.assert_fixed()
        # Nothing in the data directory's SQLite file: the rows are in PostgreSQL.
        self.assertFalse(os.path.exists(os.path.join(self.data, "sessions.db")))
        self.assertEqual(self.count("SELECT COUNT(*) FROM sessions WHERE id = '%s'" % sid), 1)
        stored = self.count("SELECT COUNT(*) FROM session_events WHERE session_id = '%s'" % sid)
        self.assertGreater(stored, 3)
        # Every command reads it from there: list, export (seq 1.. in order).
        p = self.run_cli("sessions", "list", "-C", self.ws, "--output", "json",
                         env=self.pg_env())
        self.assert_code(p, 0)
        self.assertIn(sid, p.stdout)
        p = self.run_cli("sessions", "export", sid, env=self.pg_env())
        self.assert_code(p, 0)
        events = json_lines(p.stdout)
        self.assertEqual(len(events), stored)
        seqs = [e["seq"] for e in events]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(events[-1]["type"], "turn_end")

    def test_store_migrate_applies_then_reports_up_to_date(self):
        p = self.run_cli("store", "migrate", env=self.pg_env())
        self.assert_code(p, 0)
        self.assertRegex(p.stdout, r"store: schema version 0 -> \d+")
        p = self.run_cli("store", "migrate", env=self.pg_env())
        self.assert_code(p, 0)
        self.assertRegex(p.stdout, r"store: schema version \d+, up to date")

    def test_a_schema_newer_than_this_agentloop_is_refused(self):
        self.assert_code(self.run_cli("store", "migrate", env=self.pg_env()), 0)
        self.cluster.psql("INSERT INTO %s.schema_migrations VALUES (999, '0999_future.sql', 0)"
                          % self.schema)
        p = self.run_cli("store", "migrate", env=self.pg_env())
        self.assert_code(p, 1)
        self.assertIn("schema version 999", p.stderr)
        self.assertIn("newer agentloop", p.stderr)
        p = self.run_cli("run", "--provider", "script", "--script",
                         os.path.join(self.ws, "script.json"), "-C", self.ws, "fix the bug",
                         env=self.pg_env())
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("newer agentloop", p.stderr)
        self.assertIn(BUGGY_LINE_MARK, self.read_ws())  # nothing ran

    def test_store_migrate_needs_a_postgresql_url(self):
        p = self.run_cli("store", "migrate")
        self.assert_code(p, 2)
        self.assertIn("store.url is not set", p.stderr)
        p = self.run_cli("store", "migrate", env=self.env(AGENTLOOP_STORE_URL="mysql://h/db"))
        self.assert_code(p, 2)
        self.assertIn("postgresql://", p.stderr)

    def test_an_unreachable_database_is_a_clear_error_without_the_password(self):
        url = "postgresql://al:pw-secret@127.0.0.1:1/db?connect_timeout=5"
        p = self.run_cli("sessions", "list", env=self.env(AGENTLOOP_STORE_URL=url))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot connect to PostgreSQL", p.stderr)
        self.assertIn("al:***@127.0.0.1:1", p.stderr)
        self.assertNotIn("pw-secret", p.stderr + p.stdout)

    # --- agentloop serve on PostgreSQL ----------------------------------------

    def test_serve_pauses_a_turn_and_another_instance_sees_it(self):
        _, _, a, b, sid = self.two_instances(self.server(WRITE))
        status, t = self.call(a, "POST", "/v1/sessions/%s/turns" % sid,
                              {"input": "write served.txt"})
        self.assertEqual(status, 202, t)
        status, w = self.call(a, "GET", "/v1/sessions/%s/turns/%s/wait?timeout_s=30"
                              % (sid, t["id"]))
        self.assertEqual(w["result"]["stop"], "pending_approval", w)
        # Instance B reads the same session, its pending item and its events.
        status, got = self.call(b, "GET", "/v1/sessions/%s" % sid)
        self.assertEqual(status, 200, got)
        status, pending = self.call(b, "GET", "/v1/sessions/%s/pending" % sid)
        self.assertEqual(status, 200, pending)
        self.assertEqual(len(pending["items"]), 1, pending)
        self.assertEqual(self.count("SELECT COUNT(*) FROM pending_index WHERE NOT resolved"), 1)


BUGGY_LINE_MARK = "(len(xs) - 1)"

if __name__ == "__main__":
    unittest.main()
