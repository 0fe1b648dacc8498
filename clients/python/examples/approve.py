#!/usr/bin/env python3
"""Usage: approve.py BASE_URL AGENT PROMPT

Starts a session of AGENT, runs PROMPT, approves every approval as it
arrives (printing its diff), and exits 0 when the turn completes, 1
otherwise. The bearer token comes from AGENTLOOP_TOKEN when set."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from agentloop_client import AgentloopError, APIError, Client  # noqa: E402


def main(base_url, agent, prompt):
    client = Client(base_url, token=os.environ.get("AGENTLOOP_TOKEN") or None)
    session = client.create_session(agent=agent)
    turn = client.stream_turn(session["id"], prompt)
    for ev in turn:
        if ev["type"] == "text_delta":
            print(ev["text"], end="", flush=True)
        # A pause ends with a turn_end listing its items; the stream goes on
        # once they are decided.
        if ev["type"] != "turn_end" or ev["stop"] not in ("pending_approval", "pending_question"):
            continue
        for item in ev["pending"]:
            if item["kind"] != "approval":
                print("\n%s %s (%s) needs someone else" % (item["kind"], item["id"], item["tool"]))
                return 1
            try:
                diff = client.get_approval_diff(item["id"])["diff"]
            except APIError as e:
                if e.status >= 500:
                    raise
                diff = None  # no diff for this tool
            print("\napproving %s %s" % (item["tool"], json.dumps(item["arguments"])))
            print(diff or "(no diff)")
            client.approve(item["id"])
    result = turn.result or {}
    print("\nturn %s ended: %s%s" % (turn.turn_id, result.get("stop"),
                                    " (%s)" % result["reason"] if result.get("reason") else ""))
    return 0 if result.get("stop") == "completed" else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("usage: approve.py BASE_URL AGENT PROMPT", file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(main(*sys.argv[1:]))
    except AgentloopError as e:
        print("approve.py: %s" % e, file=sys.stderr)
        sys.exit(1)
