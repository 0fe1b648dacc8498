#!/usr/bin/env python3
"""A small MCP server over stdio for agentloop's tests (protocol 2025-11-25).

Tools: echo {text} (read-only), write_note {text, path?} (writes NOTE.txt,
or path, in the working directory; an error result when it cannot), slow {}
(never answers; reports progress), crash {} (exits at once), env {name}
(prints an environment variable).
Options: --version V (answer initialize with V), --garbage (write a
non-JSON line after initialize), --page-size N (tools/list pages),
--ignore-eof (keep running after stdin closes), --ignore-term (ignore
SIGTERM), --stderr-noise (write log lines to stderr), --list-changed (send
notifications/tools/list_changed after initialized).
"""
import json
import os
import signal
import sys
import time

args = sys.argv[1:]


def opt(name, default=None):
    if name in args:
        i = args.index(name)
        return args[i + 1] if i + 1 < len(args) else default
    return default


VERSION = opt("--version", "2025-11-25")
PAGE = int(opt("--page-size", "100"))
if "--ignore-term" in args:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

TOOLS = [
    {"name": "echo", "description": "Echo the text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "write_note", "description": "Write NOTE.txt (or path) in the working directory.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"},
                                                      "path": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "slow", "description": "Never answers; reports progress.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "crash", "description": "Exits at once.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "env", "description": "Print an environment variable.",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                     "required": ["name"]},
     "annotations": {"readOnlyHint": True}},
]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def result(mid, res):
    send({"jsonrpc": "2.0", "id": mid, "result": res})


def text(t, is_error=False):
    return {"content": [{"type": "text", "text": t}], "isError": is_error}


def handle(msg):
    method = msg.get("method")
    mid = msg.get("id")
    params = msg.get("params") or {}
    if "--stderr-noise" in args:
        log("fake-mcp: got " + str(method))
    if method == "initialize":
        result(mid, {"protocolVersion": VERSION, "capabilities": {"tools": {"listChanged": True}},
                     "serverInfo": {"name": "fake-mcp", "version": "1.2.3"},
                     "instructions": "Use echo to echo."})
        if "--garbage" in args:
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
    elif method == "notifications/initialized":
        if "--list-changed" in args:
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif method == "tools/list":
        start = int(params.get("cursor") or 0)
        page = TOOLS[start:start + PAGE]
        res = {"tools": page}
        if start + PAGE < len(TOOLS):
            res["nextCursor"] = str(start + PAGE)
        result(mid, res)
    elif method == "tools/call":
        name = params.get("name")
        a = params.get("arguments") or {}
        if name == "echo":
            result(mid, text("echo: " + a.get("text", "")))
        elif name == "write_note":
            path = a.get("path", "NOTE.txt")
            try:
                with open(path, "w") as f:
                    f.write(a.get("text", ""))
                result(mid, text("wrote " + path))
            except OSError as e:
                result(mid, text("cannot write " + path + ": " + e.strerror, True))
        elif name == "slow":
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": 1, "total": 10}})
        elif name == "crash":
            os._exit(3)
        elif name == "env":
            result(mid, text(a.get("name", "") + "=" + os.environ.get(a.get("name", ""), "(unset)")))
        else:
            result(mid, text("MCP error -32602: Tool " + str(name) + " not found", True))
    elif method == "ping":
        result(mid, {})
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + method}})


for line in sys.stdin:
    line = line.strip()
    if line:
        handle(json.loads(line))

if "--ignore-eof" in args:
    while True:
        time.sleep(3600)
