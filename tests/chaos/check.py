#!/usr/bin/env python3
"""Checks a chaos run's history (run.py) against agentloop's promises.

    check.py [--known INVARIANT,...] DIR

DIR holds `history.jsonl` (requests with their answers, events watchers
saw, faults), `stored.jsonl` (every session's stored log, read through the
API after the run settled) and `side.log` (one line per tool execution,
written by the tool itself). Each violation is printed with the records
that show it. Exit 1 when there is one (with --known: one of an
invariant not listed there; docs/reliability.md lists the open findings).

Invariants:
  log         every stored log is gap-free: seqs 1..n
  turns       every turn_begin is followed by exactly one turn_end of the
              same turn before the next turn_begin, none is left open; a
              continued turn (input retry or resume) names a turn that ended
              before; a cut turn ends `failed`; a turn's steps and tool
              calls are written only while it is open (a writer that lost
              its lease writes nothing after the takeover)
  tools       every tool call ran at most once (side.log), was begun in its
              session's log before (tool_call_begin), at most once; a denied
              call never ran; a call that ran with edited arguments was
              approved with edited arguments
  decisions   of the racing deciders of one item at most one was told its
              decision was recorded; an acknowledged decision is in the log
              exactly once, as it was asked for; an unanswered one at most
              once; every item has at most one decision event
  inputs      an input acknowledged (202, started or queued) ran exactly
              once (one user message with its text), one refused never ran,
              one unanswered at most once
  liveness    a decision answered `resumed` is followed by its turn's
              continuation; a queued input runs (`settle`: the run settles)
  outbox      every notification in the store's outbox was delivered (its
              row finished) and the receiver accepted it at least once; a
              row finished without an accepted attempt is a violation; every
              pending item announced in a log was delivered at least once
              (unless the server logged that the store refused its outbox
              row); a delivery the receiver failed was tried again until
              accepted
  watchers    every watcher saw a prefix of its session's stored log, in
              order, without duplicates or gaps across reconnects
              (Last-Event-ID); `uncommitted` when what it saw at a seq was
              never stored (sent before a commit that a kill, a failed fsync
              or a lost lease prevented), and when a turn answered 202 never
              reached the log for that reason
Standard library only."""

import json
import os
import re
import sys
from collections import defaultdict

CUT_REASON = "the process running this turn stopped before the turn ended"
TURN_BOUND = {"step_begin", "step_end", "tool_call_begin", "tool_call_end", "budget_check",
              "pending"}




class Report:

    def __init__(self):
        self.violations = []  # (invariant, text, [evidence])
        self.stats = defaultdict(int)

    def failing(self, known=()):
        """The violations that fail the run: those of an invariant not in
        `known` (names of open findings, reported only)."""
        return [v for v in self.violations if v[0] not in known]

    def bad(self, invariant, text, evidence=()):
        self.violations.append((invariant, text, list(evidence)))

    def text(self):
        lines = ["check: %s" % json.dumps(dict(sorted(self.stats.items())))]
        by = defaultdict(int)
        for inv, _, _ in self.violations:
            by[inv] += 1
        lines.append("check: %d violation(s)%s" % (
            len(self.violations),
            (": " + ", ".join("%s %d" % kv for kv in sorted(by.items()))) if by else ""))
        for inv, text, ev in self.violations[:200]:
            lines.append("VIOLATION [%s] %s" % (inv, text))
            for e in ev[:12]:
                lines.append("    " + json.dumps(e, sort_keys=True)[:600])
        if len(self.violations) > 200:
            lines.append("... %d more" % (len(self.violations) - 200))
        return "\n".join(lines)


def load(d):
    history = []
    with open(os.path.join(d, "history.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                history.append(json.loads(line))
    stored = {}
    path = os.path.join(d, "stored.jsonl")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    stored[r["sid"]] = r
    serve_logs = []
    for name in sorted(os.listdir(d)):
        if name.startswith("serve-") and name.endswith(".log"):
            with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
                serve_logs.append(f.read())
    side = []
    path = os.path.join(d, "side.log")
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            side = [l.rstrip("\n") for l in f if l.strip()]
    return history, stored, side, serve_logs


def brief(e):
    keep = ("seq", "type", "turn_id", "input", "stop", "reason", "id", "tool", "decision",
            "pending_id", "tool_use_id", "edited", "by")
    return {k: (v[:160] if isinstance(v, str) else v) for k, v in e.items() if k in keep}


def message_texts(e):
    msg = e.get("message") or {}
    out = []
    for b in msg.get("content") or []:
        if b.get("type") == "text":
            out.append(b.get("text", ""))
    return out, msg.get("role")


def check_logs(stored, r):
    for sid, s in stored.items():
        ev = s["events"]
        seqs = [e["seq"] for e in ev]
        r.stats["sessions"] += 1
        r.stats["stored_events"] += len(ev)
        if seqs != list(range(1, len(seqs) + 1)):
            missing = sorted(set(range(1, (max(seqs) if seqs else 0) + 1)) - set(seqs))
            dup = sorted({x for x in seqs if seqs.count(x) > 1})
            r.bad("log", "session %s (%s): stored seqs not 1..n (missing %s, duplicated %s)"
                  % (sid, s["tag"], missing[:20], dup[:20]))


def check_turns(stored, r):
    for sid, s in stored.items():
        open_turn, open_ev = None, None
        ended = {}
        for e in s["events"]:
            t = e["type"]
            if t == "turn_begin":
                r.stats["turn_begins"] += 1
                if open_turn is not None:
                    r.bad("turns", "session %s: turn %s began while turn %s had no turn_end"
                          % (sid, e["turn_id"], open_turn), [brief(open_ev), brief(e)])
                inp = e.get("input")
                if inp in ("retry", "resume") and e["turn_id"] not in ended:
                    r.bad("turns", "session %s: turn %s continued (%s) but never ended before"
                          % (sid, e["turn_id"], inp), [brief(e)])
                if inp == "user" and e["turn_id"] in ended:
                    r.bad("turns", "session %s: a new input reuses the turn id %s"
                          % (sid, e["turn_id"]), [ended[e["turn_id"]], brief(e)])
                open_turn, open_ev = e["turn_id"], e
            elif t == "turn_end":
                r.stats["turn_end:" + str(e.get("stop"))] += 1
                if open_turn != e["turn_id"]:
                    r.bad("turns", "session %s: turn_end of %s while the open turn is %s"
                          % (sid, e["turn_id"], open_turn),
                          ([brief(open_ev)] if open_ev else []) + [brief(e)])
                if (e.get("reason") or "").startswith(CUT_REASON):
                    r.stats["cut_turns"] += 1
                    if e.get("stop") != "failed":
                        r.bad("turns", "session %s: cut turn %s ended %s, not failed"
                              % (sid, e["turn_id"], e.get("stop")), [brief(e)])
                ended[e["turn_id"]] = brief(e)
                open_turn, open_ev = None, None
            elif t in TURN_BOUND:
                if open_turn is None or e.get("turn_id") != open_turn:
                    r.bad("turns", "session %s: %s of turn %s written while %s"
                          % (sid, t, e.get("turn_id"),
                             "no turn was open" if open_turn is None
                             else "turn %s was open" % open_turn),
                          ([brief(open_ev)] if open_ev else []) + [brief(e)])
        if open_turn is not None:
            r.bad("turns", "session %s: turn %s began and never ended (after settling)"
                  % (sid, open_turn), [brief(open_ev)])


SIDE = re.compile(r"^(chaos|ask) (\S+) (k\d+)( edited)?$")


def check_tools(stored, side, r):
    begun = defaultdict(list)      # call id -> [(sid, event)]
    decided = {}                   # tool_use_id -> decision event
    for sid, s in stored.items():
        for e in s["events"]:
            if e["type"] == "tool_call_begin":
                begun[e["id"]].append((sid, e))
            elif e["type"] == "decision" and e.get("pending_id") and e.get("decision") != "ask":
                decided[e.get("tool_use_id")] = e
    ran = defaultdict(list)
    for line in side:
        m = SIDE.match(line)
        if not m:
            r.bad("tools", "side.log has a line no tool of the run writes: %r" % line)
            continue
        ran[m.group(3)].append(line)
    r.stats["tool_executions"] = len(side)
    r.stats["tool_calls_begun"] = sum(len(v) for v in begun.values())
    for cid, lines in ran.items():
        if len(lines) > 1:
            r.bad("tools", "tool call %s ran %d times" % (cid, len(lines)), lines)
        if cid not in begun:
            r.bad("tools", "tool call %s ran but no log has its tool_call_begin (a write "
                  "lost, or a writer that was not fenced)" % cid, lines)
        d = decided.get(cid)
        if d is not None and d.get("decision") == "deny":
            r.bad("tools", "tool call %s ran although it was denied" % cid,
                  lines + [brief(d)])
        if any(l.endswith(" edited") for l in lines) and not (d and d.get("edited")):
            r.bad("tools", "tool call %s ran with edited arguments nobody approved" % cid,
                  lines + ([brief(d)] if d else []))
    for cid, bs in begun.items():
        if len(bs) > 1:
            r.bad("tools", "tool call %s begun %d times" % (cid, len(bs)),
                  [dict(brief(e), sid=sid) for sid, e in bs])


def check_decisions(history, stored, r):
    events = defaultdict(list)  # pending id -> decision events
    for sid, s in stored.items():
        for e in s["events"]:
            if e["type"] == "decision" and e.get("pending_id") and e.get("decision") != "ask":
                events[e["pending_id"]].append(e)
    reqs = defaultdict(list)
    for h in history:
        if h["t"] == "req" and h["op"] == "decide":
            reqs[h["item"]].append(h)
    r.stats["decision_requests"] = sum(len(v) for v in reqs.values())
    r.stats["items_decided"] = len(events)
    for pid, evs in events.items():
        if len(evs) > 1:
            r.bad("decisions", "item %s has %d decision events" % (pid, len(evs)),
                  [brief(e) for e in evs])
    for item, hs in reqs.items():
        evs = events.get(item, [])
        winners = [h for h in hs if h.get("status") == 200 and isinstance(h.get("resp"), dict)
                   and h["resp"].get("status") in ("recorded", "resumed")]
        unanswered = [h for h in hs if "error" in h or (h.get("status") or 0) >= 500]
        short = [{k: h.get(k) for k in ("id", "what", "status", "resp", "error", "inst")}
                 for h in hs]
        if len(winners) > 1:
            r.bad("decisions", "item %s: %d racing deciders were each told their decision was "
                  "recorded" % (item, len(winners)), short + [brief(e) for e in evs])
        if winners and len(evs) != 1:
            r.bad("decisions", "item %s: an acknowledged decision is in the log %d times"
                  % (item, len(evs)), short + [brief(e) for e in evs])
        if winners and evs:
            w = winners[0]
            want = {"approve": "allow", "edit": "allow", "deny": "deny"}.get(w["what"])
            got = evs[0].get("decision")
            if want and got != want:
                r.bad("decisions", "item %s: decided %s but the log says %s"
                      % (item, w["what"], got), short + [brief(e) for e in evs])
            if w["what"] == "edit" and not evs[0].get("edited"):
                r.bad("decisions", "item %s: approved with edited arguments, the log's "
                      "decision is not edited" % item, short + [brief(e) for e in evs])
        if winners and evs and winners[0]["resp"].get("status") == "resumed":
            # "resumed": the batch is decided and its turn continues (the
            # same turn id) after the decision.
            # A denial continues the batch only to write its results (a
            # `message` of the turn, no turn_begin).
            w = winners[0]
            log = stored.get(w.get("sid"), {}).get("events", [])
            tid = w["resp"].get("turn_id")
            paused_at = max([e["seq"] for e in log if e["type"] == "turn_end" and
                             e.get("turn_id") == tid and e["seq"] < evs[0]["seq"]] or [0])
            denied = any(e["type"] == "decision" and e.get("decision") == "deny" and
                         paused_at < e["seq"] <= evs[0]["seq"] for e in log)
            ends = ("turn_begin", "message") if denied else ("turn_begin",)
            if not any(e["type"] in ends and e.get("turn_id") == tid and
                       e["seq"] > evs[0]["seq"] for e in log):
                r.bad("liveness", "item %s: the decision was answered `resumed` but turn %s "
                      "never continued" % (item, tid),
                      short + [brief(e) for e in evs] + [brief(e) for e in log[-4:]])
        if not winners and unanswered and evs:
            # Indeterminate (a timeout or a 5xx, Jepsen's "info"): a commit
            # that failed may still be recovered (a SQLite WAL commit whose
            # fsync failed reappears at the next start).
            r.stats["decisions_unknown_applied"] += 1
        if not winners and not unanswered and evs:
            # Every decider was answered and none was told it won: a decision
            # in the log nobody made (or whose answer was wrong).
            others = [h for h in hs if h.get("status") == 200 or h.get("status") == 409]
            if not others:
                r.bad("decisions", "item %s: decided in the log, every decider was refused"
                      % item, short + [brief(e) for e in evs])


def check_inputs(history, stored, r):
    seen = defaultdict(list)  # input text -> [(sid, seq)]
    for sid, s in stored.items():
        for e in s["events"]:
            if e["type"] != "message":
                continue
            texts, role = message_texts(e)
            if role != "user":
                continue
            for t in texts:
                m = re.search(r"chaos:\S+ input-\d+-\d+", t)
                if m:
                    seen[m.group(0)].append({"sid": sid, "seq": e["seq"],
                                             "turn_id": e.get("turn_id")})
    stored_turns = {e.get("turn_id") for s in stored.values() for e in s["events"]}
    for h in history:
        if h["t"] != "req" or h["op"] != "turn":
            continue
        text = h["input"]
        got = seen.get(text, [])
        status = h.get("status")
        resp = h.get("resp") if isinstance(h.get("resp"), dict) else {}
        if status == 202:
            kind = "queued" if resp.get("status") == "queued" else "started"
            r.stats["inputs_" + kind] += 1
            if len(got) != 1:
                # Queued and never run: stranded in the queue (the store
                # keeps it) rather than lost; a liveness failure.
                inv = "liveness" if kind == "queued" and not got else "inputs"
                # Answered 202 with a turn id before the turn's first commit,
                # which was then refused (a lost lease): nothing of the turn
                # is stored.
                if kind == "started" and not got and resp.get("id") not in stored_turns:
                    inv = "uncommitted"
                r.bad(inv, "input %r was acknowledged (%s) and ran %d times"
                      % (text, kind, len(got)),
                      [{k: h.get(k) for k in ("id", "status", "resp", "inst", "at")}] + got)
        elif status is None or status >= 500:
            r.stats["inputs_unanswered"] += 1
            if got:
                r.stats["inputs_unknown_ran"] += 1
            if len(got) > 1:
                r.bad("inputs", "input %r got no answer and ran %d times" % (text, len(got)),
                      [{k: h.get(k) for k in ("id", "status", "error", "inst")}] + got)
        else:
            r.stats["inputs_refused"] += 1
            if got:
                r.bad("inputs", "input %r was refused (%s) but ran" % (text, status),
                      [{k: h.get(k) for k in ("id", "status", "resp", "inst")}] + got)


def check_watchers(history, stored, r):
    seen = defaultdict(list)
    for h in history:
        if h["t"] == "ev":
            seen[h["sid"]].append(h)
    for sid, evs in seen.items():
        log = {e["seq"]: e for e in stored.get(sid, {}).get("events", [])}
        turns = {e.get("turn_id") for e in log.values()}
        r.stats["watched_events"] += len(evs)
        expect = 1
        reported = 0
        uncommitted = False  # the watcher was sent an event never stored
        for h in evs:
            if h["seq"] != expect and reported < 3:
                what = "a duplicate" if h["seq"] < expect else "a gap"
                r.bad("watchers", "session %s: watcher got seq %d where %d was next (%s; "
                      "connection %d on %s)" % (sid, h["seq"], expect, what, h["conn"],
                                                 h["inst"]), [h])
                reported += 1
            e = log.get(h["seq"])
            if e is None or e["type"] != h["type"] or e.get("turn_id") != h["turn_id"]:
                # Sent before its commit, which never came (the process was
                # killed, stopped past its lease, or its commit failed): the
                # stored log has nothing there, or what the next holder wrote
                # for the cut turn (its crash repair, its end).
                if e is None or h["turn_id"] not in turns or (
                        e["type"] == "turn_end" and
                        (e.get("reason") or "").startswith(CUT_REASON)) or (
                        e["type"] == "message" and
                        (e.get("message") or {}).get("tag") == "crash-recovery"):
                    uncommitted = True
                if reported < 3:
                    r.bad("uncommitted" if uncommitted else "watchers",
                          "session %s: watcher saw seq %d as %s, the stored log has %s"
                          % (sid, h["seq"], h["type"], e and brief(e)), [h])
                    reported += 1
            expect = max(expect, h["seq"] + 1)


NOT_RECORDED = re.compile(r"notification (\S+) not recorded in the outbox")
# A pause whose commit its writer could not confirm: the commit reached the
# store, its answer did not reach the instance, and the retry found the
# lease taken. The instance ends the turn `failed` and announces nothing,
# so such an item is announced only if it is still outstanding when an
# instance's outbox pass looks (finding 8 in docs/reliability.md).
UNCONFIRMED_PAUSE = re.compile(r"saving the paused batch of session (\S+): .*lost its lease")


def check_outbox(history, stored, serve_logs, r):
    attempts = defaultdict(list)   # delivery id -> hook records, in order
    for h in history:
        if h["t"] == "hook":
            attempts[h["delivery"]].append(h)
    outbox = next((h for h in history if h["t"] == "outbox"), None)
    if not attempts and outbox is None:
        return  # a history from before the receiver
    rows = (outbox or {}).get("rows")
    if rows is None:
        r.bad("outbox", "the store's outbox could not be read after the run")
        rows = []
    accepted = {d for d, hs in attempts.items() if any(h["answer"] == 200 for h in hs)}
    r.stats["hook_deliveries"] = len(attempts)
    r.stats["hook_attempts"] = sum(len(v) for v in attempts.values())
    r.stats["hook_accepted"] = len(accepted)
    r.stats["hook_repeats"] = sum(
        1 for hs in attempts.values() if sum(1 for h in hs if h["answer"] == 200) > 1)
    r.stats["outbox_rows"] = len(rows)
    for d, hs in attempts.items():
        bad = [h for h in hs if not h.get("signed")]
        if bad:
            r.bad("outbox", "delivery %s: %d attempt(s) not signed with the channel's secret"
                  % (d, len(bad)), bad[:3])
    for row in rows:
        if not row["delivered"]:
            r.bad("outbox", "notification %s (%s) is still undelivered in the outbox after "
                  "settling" % (row["id"], row["event"]), attempts.get(row["id"], [])[-6:])
        elif row["id"] not in accepted:
            r.bad("outbox", "notification %s (%s) is finished in the outbox but the receiver "
                  "never accepted it" % (row["id"], row["event"]),
                  attempts.get(row["id"], [])[-6:])
    failed = [d for d, hs in attempts.items() if hs[0]["answer"] != 200]
    r.stats["hook_failed_first"] = len(failed)
    for d in failed:
        hs = attempts[d]
        if d not in accepted:
            r.bad("outbox", "delivery %s: the receiver failed it and it was not tried again "
                  "until accepted (%d attempts)" % (d, len(hs)), hs[-6:])
        elif len(hs) > 5:
            r.stats["hook_redelivered_by_sweep"] += 1
    not_recorded = set()
    for text in serve_logs:
        not_recorded.update(NOT_RECORDED.findall(text))
    r.stats["outbox_not_recorded"] = len(not_recorded)
    unconfirmed = set()  # sessions with a pause commit its writer could not confirm
    for text in serve_logs:
        unconfirmed.update(UNCONFIRMED_PAUSE.findall(text))
    announced = defaultdict(set)  # pending id -> delivery ids accepted
    for d in accepted:
        for h in attempts[d]:
            if h.get("pending_id"):
                announced[h["pending_id"]].add(d)
    row_ids = {row["id"] for row in rows}
    for sid, s in stored.items():
        for e in s["events"]:
            if e["type"] != "pending":
                continue
            for item in e.get("items") or []:
                pid = item.get("id")
                r.stats["items_paused"] += 1
                if announced.get(pid):
                    continue
                mine = [d for d in row_ids | set(attempts) | not_recorded
                        if d == "dlv_" + pid or d.startswith("dlv_" + pid + ".")]
                if mine and all(d in not_recorded for d in mine):
                    r.stats["items_not_recorded"] += 1
                    continue
                if not mine and sid in unconfirmed:
                    r.bad("outbox_unconfirmed",
                          "session %s: item %s (%s) paused its turn in a commit its writer could "
                          "not confirm (lease lost), and no notification of it was delivered"
                          % (sid, pid, item.get("tool")), [brief(e)])
                    continue
                r.bad("outbox", "session %s: item %s (%s) paused its turn but no notification "
                      "of it was delivered" % (sid, pid, item.get("tool")),
                      [brief(e)] + [h for d in mine for h in attempts.get(d, [])][-6:])


def check_history(history, r):
    for h in history:
        if h["t"] == "harness_error":
            r.bad("harness", "the harness failed: " + h["trace"][-800:])
        if h["t"] == "fault" and h.get("phase") == "start":
            r.stats["fault:" + h["kind"]] += 1
        if h["t"] == "req":
            r.stats["requests"] += 1
            if "error" in h:
                r.stats["requests_unanswered"] += 1
        if h["t"] == "settled" and not h["ok"]:
            r.bad("settle", "the system did not settle after the faults were healed")


def check_dir(d):
    history, stored, side, serve_logs = load(d)
    r = Report()
    check_history(history, r)
    check_logs(stored, r)
    check_turns(stored, r)
    check_tools(stored, side, r)
    check_decisions(history, stored, r)
    check_inputs(history, stored, r)
    check_watchers(history, stored, r)
    check_outbox(history, stored, serve_logs, r)
    return r


def main():
    args, known = sys.argv[1:], []
    if len(args) == 3 and args[0] == "--known":
        known, args = args[1].split(","), args[2:]
    if len(args) != 1:
        print(__doc__)
        return 2
    r = check_dir(args[0])
    print(r.text())
    return 1 if r.failing(known) else 0


if __name__ == "__main__":
    sys.exit(main())
