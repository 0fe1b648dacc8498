"""The types and routes of agentloop_client against the server's documents:
the event TypedDicts against the "Types" table of docs/protocol.md, the
request TypedDicts against the request bodies of src/server/openapi.json,
ErrorCode against the codes of docs/server.md, ROUTES against openapi.json's
routes. Both sides are read here, so a change made to one alone fails."""

import json
import os
import re
import sys
import typing
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

import agentloop_client as al  # noqa: E402
from agentloop_client import types as T  # noqa: E402


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def protocol_types():
    rows = {}
    in_types = False
    for line in read("docs", "protocol.md").splitlines():
        if line.startswith("## "):
            in_types = line == "## Types"
        if not in_types or not line.startswith("| `"):
            continue
        cells = [c.replace("\0", "|") for c in line.replace("\\|", "\0").split("|")]
        top, depth = "", 0
        for ch in cells[3]:
            if ch in "({[":
                depth += 1
            if depth == 0:
                top += ch
            if ch in ")}]" and depth > 0:
                depth -= 1
        req, opt = set(), set()
        for m in re.finditer(r"`([^`]*)`(\?)?", top):
            (opt if m.group(2) else req).add(m.group(1))
        rows[cells[1].strip().strip("`")] = (req, opt)
    return rows


COMMON = {"type", "session_id", "turn_id", "seq"}


class DriftTest(unittest.TestCase):

    def test_events_match_the_protocol_table(self):
        docs = protocol_types()
        self.assertGreaterEqual(len(docs), 20)
        self.assertEqual(set(T.EVENT_TYPES), set(docs))
        union = set(typing.get_args(T.ProtocolEvent))
        for name, (req, opt) in docs.items():
            td = T.EVENT_TYPES[name]
            self.assertIn(td, union, name)
            self.assertEqual(typing.get_args(typing.get_type_hints(td)["type"]), (name,))
            self.assertEqual(set(td.__required_keys__) - COMMON, req, name)
            self.assertEqual(set(td.__optional_keys__) - {"ts"}, opt, name)

    def test_common_fields(self):
        text = read("docs", "protocol.md")
        common = re.search(r"Common fields, always present:\n\n(.*?)\n\n", text, re.S).group(1)
        names = set(re.findall(r"^\| `(\w+)` \|", common, re.M))
        self.assertEqual(set(T.EventBase.__required_keys__) | set(T.EventBase.__optional_keys__) | {"type"},
                         names)

    def test_requests_match_openapi(self):
        spec = json.loads(read("src", "server", "openapi.json"))
        for (method, path), td in T.REQUESTS.items():
            schema = spec["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]
            keys = set(td.__required_keys__) | set(td.__optional_keys__)
            self.assertEqual(keys, set(schema["properties"]), td.__name__)
            self.assertTrue(set(schema.get("required", [])) <= set(td.__required_keys__), td.__name__)
            for k, prop in schema["properties"].items():
                if "enum" in prop:
                    self.assertEqual(set(typing.get_args(typing.get_type_hints(td)[k])), set(prop["enum"]),
                                     "%s.%s" % (td.__name__, k))
        for method, path in al.ROUTES.values():
            op = spec["paths"][path][method.lower()]
            if op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {}).get(
                    "properties"):
                self.assertIn((method, path), T.REQUESTS)

    def test_error_codes(self):
        m = re.search(r"Clients switch on `code`: (.*?)\.\n", read("docs", "server.md"), re.S)
        self.assertEqual(set(typing.get_args(T.ErrorCode)), set(re.findall(r"`(\w+)`", m.group(1))))

    def test_routes_cover_openapi(self):
        spec = json.loads(read("src", "server", "openapi.json"))
        used = set()
        for name, (method, path) in al.ROUTES.items():
            self.assertIn(method.lower(), spec["paths"].get(path, {}), name)
            used.add((method, path))
            self.assertTrue(hasattr(al.Client, name), name)
            self.assertTrue(hasattr(al.AsyncClient, name), name)
        for path, ops in spec["paths"].items():
            # The console's, the links' and Slack's routes are for browsers
            # and Slack, not for clients.
            if path.startswith(("/v1/console/", "/v1/links/", "/v1/slack/")):
                continue
            for m in ops:
                if m in ("get", "post", "patch", "delete", "put"):
                    self.assertIn((m.upper(), path), used)

    def test_same_routes_as_the_typescript_client(self):
        js = read("clients", "typescript", "src", "index.js")
        ts_routes = set(re.findall(r'\["(GET|POST|PATCH|DELETE)", "(/v1/[^"]*)"\]', js))
        self.assertEqual(ts_routes, set(al.ROUTES.values()))


if __name__ == "__main__":
    unittest.main()
