"""End-to-end: the agentloop command against the scripted provider.

Covers the offline demo, the three output formats, every exit code, the
sessions subcommands, resume / --continue, the busy session, config show,
permissions check and chat over a pipe.
"""

import json
import os
import subprocess
import unittest

from e2e_util import (BUGGY_LINE, BIN, CliTestCase, DEMO_SCRIPT, TIMEOUT, interrupt,
                      json_lines, load_demo_script)


class DemoTest(CliTestCase):

    def test_demo_fixes_the_bug_in_text_mode(self):
        p = self.script_run("--allow", "*")
        self.assert_code(p, 0)
        self.assert_fixed()
        self.assertIn("The tests pass now", p.stdout)
        # Tool activity and the summary go to stderr, never to stdout.
        self.assertIn("edit  stats.py", p.stderr)
        self.assertIn("4 tool calls", p.stderr)
        self.assertNotIn("tool calls", p.stdout)
        self.assertNotIn("\033[", p.stderr)  # no colour without a terminal

    def test_json_output(self):
        p = self.script_run("--allow", "*", "--output", "json")
        self.assert_code(p, 0)
        r = self.json_result(p)
        for key in ("session_id", "status", "reason", "final_text", "tool_calls", "tokens",
                    "turns", "pending"):
            self.assertIn(key, r)
        self.assertEqual(r["status"], "completed")
        self.assertEqual(r["tool_calls"], 4)
        self.assertEqual(r["turns"], 5)
        # The demo's usage has no cache figures: the first call counts its
        # whole input, each later one its output and the messages appended
        # since the previous request (estimated), never the whole context
        # again; the usage keeps what the provider reported.
        usages = [i["usage"] for i in load_demo_script()["responses"]]
        outputs = sum(u["output_tokens"] for u in usages)
        self.assertEqual(r["usage"]["input_tokens"], sum(u["input_tokens"] for u in usages))
        self.assertGreater(r["tokens"], usages[0]["input_tokens"] + outputs)
        self.assertLess(r["tokens"], sum(u["input_tokens"] for u in usages) + outputs)
        self.assertEqual(r["pending"], [])
        self.assertIn("Fixed the bug", r["final_text"])
        self.assert_fixed()

    def test_stream_json_output(self):
        p = self.script_run("--allow", "*", "--output", "stream-json")
        self.assert_code(p, 0)
        events = json_lines(p.stdout)
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "turn_begin")
        # The turn ends with turn_end (notices of hooks may follow it).
        ends = [e for e in events if e["type"] == "turn_end"]
        self.assertEqual(len(ends), 1)
        self.assertEqual(ends[0]["stop"], "completed")
        self.assertNotIn("tool_call_begin", types[types.index("turn_end"):])
        self.assertEqual(types.count("tool_call_begin"), 4)
        self.assertEqual(types.count("tool_call_end"), 4)
        # Persisted events are numbered without gaps; deltas carry 0.
        seqs = [e["seq"] for e in events if e["type"] not in ("text_delta", "thinking_delta")]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        self.assertTrue(all(e["seq"] == 0 for e in events
                            if e["type"] in ("text_delta", "thinking_delta")))
        # Every event carries the wall-clock time of its emission (epoch ms).
        for e in events:
            self.assertIsInstance(e.get("ts"), int, e)
            self.assertGreater(e["ts"], 0, e)
        sid = events[0]["session_id"]
        self.assertTrue(all(e["session_id"] == sid for e in events))
        # What was persisted is what was streamed (deltas are display-only).
        stored = {e["seq"]: e for e in self.export(sid)}
        for e in events:
            if e["type"] not in ("text_delta", "thinking_delta"):
                self.assertEqual(stored[e["seq"]], e)

    def test_prompt_from_stdin(self):
        p = self.run_cli("run", "--provider", "script", "--script", DEMO_SCRIPT, "-C", self.ws,
                         "--allow", "*", "--output", "json", "-", stdin="fix the bug\n")
        self.assert_code(p, 0)
        sid = self.json_result(p)["session_id"]
        show = self.run_cli("sessions", "show", sid, "--output", "json")
        self.assert_code(show, 0)
        first = json.loads(show.stdout)["messages"][0]
        self.assertEqual(first["role"], "user")
        self.assertIn("fix the bug", json.dumps(first))


class ExitCodeTest(CliTestCase):

    def test_version_and_help(self):
        p = self.run_cli("--version")
        self.assert_code(p, 0)
        self.assertTrue(p.stdout.startswith("agentloop "))
        h = self.run_cli("--help")
        self.assert_code(h, 0)
        for word in ("run", "chat", "sessions", "resume", "pending", "approve", "--max-tool-calls"):
            self.assertIn(word, h.stdout)
        self.assert_code(self.run_cli("run", "--help"), 0)
        # The footer names documentation a user can open.
        self.assertRegex(h.stdout, r"Documentation: man agentloop, and /\S+/share/doc/agentloop/cli\.md")
        # Without `cmake --install` the page comes from the binary itself.
        self.assertIn("agentloop completion man | man -l -", h.stdout)
        page = self.run_cli("completion", "man")
        self.assert_code(page, 0)
        self.assertTrue(page.stdout.startswith(".TH") or "\n.TH " in page.stdout, page.stdout[:200])

    def test_a_command_on_sqlite_loads_no_postgresql_client(self):
        # libpq (and the Kerberos, LDAP and TLS libraries it pulls in) is
        # opened only when a PostgreSQL URL is used.
        env = dict(self.env(), LD_DEBUG="libs")
        for args in (["--version"], ["run", "--provider", "script", "--script", DEMO_SCRIPT,
                                     "-C", self.ws, "--allow", "*", "fix the bug"]):
            p = self.run_cli(*args, env=env)
            self.assert_code(p, 0)
            self.assertIn("calling init", p.stderr, "LD_DEBUG=libs printed nothing")
            self.assertNotIn("libpq", p.stderr, args)
            self.assertNotIn("libkrb5", p.stderr, args)

    def test_usage_errors_exit_2(self):
        for args in (["run"], ["frobnicate"], ["run", "--bogus", "x"],
                     ["run", "--output", "xml", "x"], ["sessions", "show"],
                     ["run", "-C", os.path.join(self.tmp, "missing"), "x"],
                     ["approve", "x", "--args", "not json"]):
            p = self.run_cli(*args)
            self.assert_code(p, 2)
            self.assertIn("agentloop:", p.stderr)

    def test_no_provider_says_how_to_configure(self):
        p = self.run_cli("run", "-C", self.ws, "hello")
        self.assert_code(p, 2)
        self.assertIn("No model provider is configured", p.stderr)
        self.assertIn("--provider script", p.stderr)
        c = self.run_cli("chat", "-C", self.ws)
        self.assert_code(c, 2)
        self.assertIn("No model provider is configured", c.stderr)
        # serve names the agent file to write as a path to paste, unquoted.
        s = self.run_cli("serve", "--listen", "127.0.0.1:0", "-C", self.ws)
        self.assert_code(s, 2)
        agents = os.path.join(self.home, ".config", "agentloop", "agents")
        self.assertIn("define one in %s/NAME/agent.toml (docs/agents.md)" % agents, s.stderr)

    def test_malformed_config_exits_2_naming_the_file(self):
        os.makedirs(os.path.join(self.ws, ".agentloop"))
        with open(os.path.join(self.ws, ".agentloop", "config.toml"), "w") as f:
            f.write("[provider\nkind = 1\n")
        p = self.script_run("--allow", "*")
        self.assert_code(p, 2)
        self.assertIn("config.toml", p.stderr)
        # Asked for JSON, the error is JSON on stdout too.
        j = self.script_run("--allow", "*", "--output", "json")
        self.assert_code(j, 2)
        err = json.loads(j.stdout)
        self.assertIn("config.toml", err["error"]["message"])
        self.assertEqual(err["exit_code"], 2)

    def test_json_errors_outside_a_turn_are_json(self):
        for args in (["run", "--output", "json", "--bogus", "x"],
                     ["run", "--output=stream-json", "-C", os.path.join(self.tmp, "no"), "x"],
                     ["run", "-C", self.ws, "--output", "json", "hello"]):  # no provider
            p = self.run_cli(*args)
            self.assert_code(p, 2)
            self.assertEqual(json.loads(p.stdout)["exit_code"], 2, args)

    def test_failed_exits_1(self):
        s = self.write("fail.json", [{"error": {"code": "internal", "message": "boom"}}])
        p = self.script_run("--output", "json", script=s)
        self.assert_code(p, 1)
        self.assertEqual(self.json_result(p)["status"], "failed")

    def test_budget_exits_3(self):
        p = self.script_run("--allow", "*", "--max-tool-calls", "1", "--output", "json")
        self.assert_code(p, 3)
        self.assertEqual(self.json_result(p)["status"], "budget_exhausted")

    def test_max_turns_exits_3(self):
        p = self.script_run("--allow", "*", "--max-turns", "2", "--output", "json")
        self.assert_code(p, 3)
        self.assertEqual(self.json_result(p)["status"], "max_turns")

    def test_denied_exits_4(self):
        p = self.script_run("--allow", "*", "--deny", "bash", "--output", "json")
        self.assert_code(p, 4)
        r = self.json_result(p)
        self.assertEqual(r["status"], "denied")
        self.assertIn(BUGGY_LINE, self.read_ws())

    def test_a_refusal_exits_4_and_says_so(self):
        s = self.write("refuse.json", [{"text": "I can't help with that", "finish": "refused"}])
        p = self.script_run("--output", "json", script=s)
        self.assert_code(p, 4)
        self.assertEqual(self.json_result(p)["status"], "refused")
        t = self.script_run(script=s)
        self.assert_code(t, 4)
        self.assertIn("refused to answer", t.stdout + t.stderr)

    def test_pending_exits_5_and_says_how_to_answer(self):
        p = self.script_run("--output", "json")
        self.assert_code(p, 5)
        r = self.json_result(p)
        self.assertEqual(r["status"], "pending_approval")
        self.assertEqual(len(r["pending"]), 1)
        item = r["pending"][0]
        self.assertEqual(item["tool"], "bash")
        self.assertEqual(item["kind"], "approval")
        self.assertIn("command", item["arguments"])
        self.assertIn("agentloop approve " + item["id"], p.stderr)

    def test_sigint_exits_130(self):
        slow = load_demo_script()
        slow["responses"][1]["delay_ms"] = 20000
        s = self.write("slow.json", slow)
        proc = self.spawn("run", "--provider", "script", "--script", s, "-C", self.ws, "--allow",
                          "*", "--output", "stream-json", "fix the bug")
        # Interrupt once the second model call has begun.
        steps = 0
        for line in proc.stdout:
            if json.loads(line)["type"] == "step_begin":
                steps += 1
                if steps == 2:
                    interrupt(proc)
                    break
        out, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 130, err)
        ends = [e for e in json_lines(out) if e["type"] == "turn_end"]
        self.assertEqual(len(ends), 1)
        self.assertEqual(ends[0]["stop"], "aborted")


    def test_closed_stdout_does_not_kill_the_turn(self):
        proc = self.spawn("run", "--provider", "script", "--script", DEMO_SCRIPT, "-C", self.ws,
                          "--allow", "*", "--output", "stream-json", "fix the bug")
        first = json.loads(proc.stdout.readline())
        proc.stdout.close()  # like `| head -1`
        proc.wait(timeout=TIMEOUT)
        proc.stderr.close()
        self.assertEqual(proc.returncode, 0)
        ends = [e for e in self.export(first["session_id"]) if e["type"] == "turn_end"]
        self.assertEqual(ends[0]["stop"], "completed")
        self.assert_fixed()


class SessionsTest(CliTestCase):

    def run_demo(self):
        p = self.script_run("--allow", "*", "--output", "json")
        self.assert_code(p, 0)
        return self.json_result(p)["session_id"]

    def test_prune_removes_only_sessions_older_than_the_age(self):
        sid = self.run_demo()
        kept = self.run_cli("sessions", "prune", "--older-than", "30d", "-C", self.ws)
        self.assert_code(kept, 0)
        self.assertIn("removed 0 sessions", kept.stdout)
        self.assert_code(self.run_cli("sessions", "prune", "--older-than", "soon"), 2)
        self.assert_code(self.run_cli("sessions", "prune"), 2)
        gone = self.run_cli("sessions", "prune", "--older-than", "0m", "-C", self.ws,
                            "--output", "json")
        self.assert_code(gone, 0)
        self.assertEqual(json.loads(gone.stdout), {"removed": [sid]})
        self.assert_code(self.run_cli("sessions", "show", sid), 2)

    def test_list_tells_each_sessions_status_and_leaves_out_empty_ones(self):
        done = self.run_demo()
        paused = self.json_result(self.script_run("--output", "json"))["session_id"]
        q = self.write("q.json", [{"tool_calls": [{"id": "q1", "name": "ask_user",
                                                   "input": {"question": "Which?"}}]}])
        asking = self.json_result(self.script_run("--output", "json", script=q))["session_id"]
        # A bare chat leaves a session with no turn: not listed, --all shows it.
        bare = self.run_cli("chat", "--provider", "script", "--script", q, "-C", self.ws,
                            stdin="/exit\n")
        self.assert_code(bare, 0)
        listed = json.loads(self.run_cli("sessions", "list", "-C", self.ws, "--output",
                                         "json").stdout)
        status = {x["id"]: x["status"] for x in listed}
        self.assertEqual(status, {done: "idle", paused: "awaiting_approval",
                                  asking: "awaiting_answer"})
        every = json.loads(self.run_cli("sessions", "list", "--all", "--output", "json").stdout)
        self.assertEqual(len(every), 4)
        self.assertEqual([x["status"] for x in every if x["id"] not in status], [None])
        text = self.run_cli("sessions", "list", "-C", self.ws)
        self.assert_code(text, 0)
        row = [line for line in text.stdout.splitlines() if line.startswith(paused)][0]
        self.assertRegex(row, r"^\S+ +\S+ \S+ +awaiting_approval +code ")
        self.assertNotIn("(untitled)", text.stdout)
        self.assertIn("(untitled)", self.run_cli("sessions", "list", "--all").stdout)

    def test_list_show_export_rm(self):
        sid = self.run_demo()
        ls = self.run_cli("sessions", "list", "-C", self.ws)
        self.assert_code(ls, 0)
        self.assertRegex(ls.stdout.splitlines()[0], r"^ID +UPDATED +STATUS +COMMAND +MODEL +TITLE$")
        self.assertIn(sid, ls.stdout)
        self.assertIn("fix the bug", ls.stdout)
        # Another workspace (the current directory) lists none of them; --all does.
        other = self.run_cli("sessions", "list")
        self.assertNotIn(sid, other.stdout)
        self.assertIn("--all", other.stdout)
        self.assertIn(sid, self.run_cli("sessions", "list", "--all").stdout)
        lj = self.run_cli("sessions", "list", "--all", "--output", "json")
        self.assertEqual([s["id"] for s in json.loads(lj.stdout)], [sid])

        show = self.run_cli("sessions", "show", sid[:8])
        self.assert_code(show, 0)
        self.assertIn(sid, show.stdout)
        self.assertIn("edit  stats.py", show.stdout)
        sj = json.loads(self.run_cli("sessions", "show", sid, "--output", "json").stdout)
        self.assertEqual(sj["session"]["id"], sid)
        self.assertEqual(sj["last_turn"]["status"], "completed")
        self.assertEqual(sj["pending"], [])

        events = self.export(sid)
        self.assertEqual(events[0]["type"], "turn_begin")
        self.assertIn("turn_end", [e["type"] for e in events])
        self.assertEqual([e["seq"] for e in events], sorted(e["seq"] for e in events))

        rm = self.run_cli("sessions", "rm", sid)
        self.assert_code(rm, 0)
        self.assertNotIn(sid, self.run_cli("sessions", "list", "--all").stdout)
        self.assert_code(self.run_cli("sessions", "show", sid), 2)

    def test_resume_with_prompt_and_continue(self):
        sid = self.run_demo()
        more = self.write("more.json", load_demo_script()["responses"] + [
            {"text": "Nothing else to do.", "usage": {"input_tokens": 10, "output_tokens": 5}},
            {"text": "Still nothing.", "usage": {"input_tokens": 10, "output_tokens": 5}}])
        p = self.run_cli("resume", sid, "--provider", "script", "--script", more, "--output",
                         "json", "anything else?")
        self.assert_code(p, 0)
        r = self.json_result(p)
        self.assertEqual(r["session_id"], sid)
        self.assertEqual(r["final_text"], "Nothing else to do.")
        c = self.run_cli("run", "--continue", "--provider", "script", "--script", more, "-C",
                         self.ws, "--output", "json", "and now?")
        self.assert_code(c, 0)
        r2 = self.json_result(c)
        self.assertEqual(r2["session_id"], sid)
        self.assertEqual(r2["final_text"], "Still nothing.")
        ends = [e for e in self.export(sid) if e["type"] == "turn_end"]
        self.assertEqual(len(ends), 3)

    def test_resume_without_interrupted_turn_needs_a_prompt(self):
        sid = self.run_demo()
        p = self.run_cli("resume", sid, "--provider", "script", "--script", DEMO_SCRIPT)
        self.assert_code(p, 2)
        self.assertIn("PROMPT", p.stderr)

    def test_second_process_gets_session_busy(self):
        sid = self.run_demo()
        slow = load_demo_script()["responses"] + [
            {"text": "slow answer", "delay_ms": 20000}]
        s = self.write("slow.json", slow)
        proc = self.spawn("resume", sid, "--provider", "script", "--script", s, "--output",
                          "stream-json", "wait")
        first = proc.stdout.readline()  # the turn has begun: the lock is held
        self.assertEqual(json.loads(first)["type"], "turn_begin")
        other = self.run_cli("resume", sid, "--provider", "script", "--script", s, "again")
        self.assertEqual(other.returncode, 1, other.stderr)
        self.assertIn("busy", other.stderr)
        rm = self.run_cli("sessions", "rm", sid)
        self.assertEqual(rm.returncode, 1, rm.stderr)
        self.assertIn("busy", rm.stderr)
        interrupt(proc)
        proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 130)


class ConfigAndPermissionsTest(CliTestCase):

    def test_config_show_has_provenance(self):
        os.makedirs(os.path.join(self.ws, ".agentloop"))
        with open(os.path.join(self.ws, ".agentloop", "config.toml"), "w") as f:
            f.write("[provider]\nmodel = \"from-file\"\n")
        p = self.run_cli("config", "show", "-C", self.ws, "--max-turns", "7")
        self.assert_code(p, 0)
        self.assertIn("from-file", p.stdout)
        self.assertIn("config.toml:2", p.stdout)
        self.assertIn("flag --max-turns", p.stdout)
        env = self.env(AGENTLOOP_MODEL="from-env")
        e = self.run_cli("config", "show", "-C", self.ws, "--output", "json", env=env)
        entries = {x["key"]: x for x in json.loads(e.stdout)["entries"]}
        self.assertEqual(entries["provider.model"]["value"], "from-env")
        self.assertIn("AGENTLOOP_MODEL", entries["provider.model"]["origin"])

    def test_store_sync_setting(self):
        # Default, environment (with provenance), a bad value (warning and the
        # safe fallback) and the workspace file (ignored with a warning).
        p = self.run_cli("config", "show", "-C", self.ws)
        self.assert_code(p, 0)
        self.assertRegex(p.stdout, r'store\.sync = "full" +# default')
        e = self.run_cli("config", "show", "-C", self.ws,
                         env=self.env(AGENTLOOP_STORE_SYNC="normal"))
        self.assert_code(e, 0)
        self.assertRegex(e.stdout, r'store\.sync = "normal" +# env AGENTLOOP_STORE_SYNC')
        bad = self.run_cli("config", "show", "-C", self.ws,
                           env=self.env(AGENTLOOP_STORE_SYNC="off"))
        self.assert_code(bad, 0)
        self.assertRegex(bad.stdout, r'store\.sync = "full"')
        self.assertIn("store.sync: must be one of full, normal; got 'off'; using 'full'",
                      bad.stderr)
        os.makedirs(os.path.join(self.ws, ".agentloop"))
        with open(os.path.join(self.ws, ".agentloop", "config.toml"), "w") as f:
            f.write("[store]\nsync = \"normal\"\n")
        w = self.run_cli("config", "show", "-C", self.ws)
        self.assertRegex(w.stdout, r'store\.sync = "full" +# default')
        self.assertIn("is untrusted: ignored store.sync", w.stderr)
        # A run with NORMAL commits completes and its session is stored.
        r = self.run_cli("run", "--provider", "script", "--script", DEMO_SCRIPT, "-C", self.ws,
                         "--allow", "*", "--output", "json", "fix the bug",
                         env=self.env(AGENTLOOP_STORE_SYNC="normal"))
        self.assert_code(r, 0)
        self.assert_fixed()
        sid = self.json_result(r)["session_id"]
        listed = self.run_cli("sessions", "list", "--all", "--output", "json")
        self.assert_code(listed, 0)
        self.assertEqual([s["id"] for s in json.loads(listed.stdout)], [sid])

    def test_permissions_check(self):
        p = self.run_cli("permissions", "check", "bash", '{"command": "git status"}', "-C",
                         self.ws, "--allow", "bash(git status*)", "--output", "json")
        self.assert_code(p, 0)
        self.assertEqual(json.loads(p.stdout)["decision"], "allow")
        q = self.run_cli("permissions", "check", "bash",
                         '{"command": "git status && rm -rf x"}', "-C", self.ws, "--allow",
                         "bash(git status*)", "--output", "json")
        self.assertNotEqual(json.loads(q.stdout)["decision"], "allow")
        # Tool names match case-insensitively, in rules and in the check.
        for tool, rule in (("Bash", "bash(git status*)"), ("bash", "BASH(git status*)")):
            c = self.run_cli("permissions", "check", tool, '{"command": "git status"}', "-C",
                             self.ws, "--allow", rule, "--output", "json")
            self.assert_code(c, 0)
            self.assertEqual(json.loads(c.stdout)["decision"], "allow", (tool, rule))
            self.assertNotIn("not a tool of agentloop", c.stderr)
        t = self.run_cli("permissions", "check", "write", '{"file_path": "a.txt", "content": ""}',
                         "-C", self.ws, "--allow", "*", "--command", "plan")
        self.assert_code(t, 0)
        self.assertIn("deny", t.stdout)

    def test_permissions_check_judges_every_tool_as_a_session_does(self):
        # memory_search is a read-only tool of every session: the check uses
        # the session's wiring, so it knows the tool and its default (allow),
        # as a session running it does.
        p = self.run_cli("permissions", "check", "memory_search", '{"query": "build"}', "-C",
                         self.ws, "--output", "json")
        self.assert_code(p, 0)
        self.assertEqual(json.loads(p.stdout)["decision"], "allow")
        self.assertNotIn("mutating", p.stderr)
        d = self.run_cli("permissions", "check", "memory_search", '{"query": "build"}', "-C",
                         self.ws, "--deny", "memory_search", "--output", "json")
        self.assertEqual(json.loads(d.stdout)["decision"], "deny")
        u = self.run_cli("permissions", "check", "no_such_tool", "{}", "-C", self.ws)
        self.assert_code(u, 0)
        self.assertIn("checked as a mutating tool", u.stderr)


class ChatTest(CliTestCase):

    def test_chat_over_a_pipe(self):
        more = self.write("chat.json", load_demo_script()["responses"] + [
            {"text": "You're welcome.", "usage": {"input_tokens": 10, "output_tokens": 5}}])
        lines = "\n".join([
            "/help", "/diff", "fix the \\", "bug", "/status", "/diff", "/cost", "/todoloop status",
            "/model other-model",
            '"""', "thanks", "a lot", '"""', "/session", "/nosuch", "/exit", "never sent"]) + "\n"
        p = self.run_cli("chat", "--provider", "script", "--script", more, "-C", self.ws,
                         "--allow", "*", stdin=lines)
        self.assert_code(p, 0)
        self.assert_fixed()
        self.assertIn("/todoloop", p.stderr)   # /help
        self.assertIn("tool calls", p.stderr)  # /status
        self.assertIn("model set to other-model", p.stderr)
        self.assertIn("no file changes in this session", p.stderr)  # /diff before the fix
        self.assertIn("--- a/stats.py\n+++ b/stats.py\n", p.stderr)  # /diff after it
        self.assertIn("-    " + BUGGY_LINE, p.stderr)
        self.assertIn("model calls · no price known for script", p.stderr)  # /cost
        self.assertIn("unknown command /nosuch", p.stderr)
        self.assertIn("You're welcome.", p.stdout)
        sessions = json.loads(self.run_cli("sessions", "list", "--all", "--output", "json").stdout)
        self.assertEqual(len(sessions), 1)
        events = self.export(sessions[0]["id"])
        users = [e for e in events if e["type"] == "message" and e["message"]["role"] == "user"
                 and any(b.get("type") == "text" for b in e["message"]["content"])]
        texts = [b["text"] for e in users for b in e["message"]["content"] if b["type"] == "text"]
        self.assertIn("fix the \nbug", texts)
        self.assertIn("thanks\na lot", texts)

    def test_clear_starts_a_new_session(self):
        more = self.write("chat.json", [{"text": "one"}, {"text": "two"}])
        p = self.run_cli("chat", "--provider", "script", "--script", more, "-C", self.ws,
                         stdin="hi\n/clear\nhello\n")
        self.assert_code(p, 0)
        sessions = json.loads(self.run_cli("sessions", "list", "--all", "--output", "json").stdout)
        self.assertEqual(len(sessions), 2)


if __name__ == "__main__":
    unittest.main()
