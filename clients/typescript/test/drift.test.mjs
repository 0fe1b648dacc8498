// The types and routes of the client against the server's documents: the
// event interfaces of src/index.d.ts against the "Types" table of
// docs/protocol.md, the request interfaces against the request bodies of
// src/server/openapi.json, ErrorCode against the codes of docs/server.md,
// and ROUTES against the routes of openapi.json. Each side is parsed here,
// not copied, so a change to one that is not made to the other fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { ROUTES } from "../src/index.js";
import { interfaces } from "./dts.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..", "..");
const dts = fs.readFileSync(path.join(here, "..", "src", "index.d.ts"), "utf8");
const openapi = JSON.parse(fs.readFileSync(path.join(repo, "src", "server", "openapi.json"), "utf8"));
const protocol = fs.readFileSync(path.join(repo, "docs", "protocol.md"), "utf8");
const serverMd = fs.readFileSync(path.join(repo, "docs", "server.md"), "utf8");

/** docs/protocol.md's Types table: type -> {required, optional}. */
function protocolTypes() {
  const rows = new Map();
  let inTypes = false;
  for (const line of protocol.split("\n")) {
    if (line.startsWith("## ")) inTypes = line === "## Types";
    if (!inTypes || !line.startsWith("| `")) continue;
    const cells = line.replace(/\\\|/g, "\u0000").split("|").map((c) => c.replace(/\u0000/g, "|"));
    const type = cells[1].trim().replace(/`/g, "");
    let top = "";
    let depth = 0;
    for (const c of cells[3]) {
      if ("({[".includes(c)) depth++;
      if (depth === 0) top += c;
      if (")}]".includes(c) && depth > 0) depth--;
    }
    const required = new Set();
    const optional = new Set();
    for (const f of top.matchAll(/`([^`]*)`(\?)?/g)) (f[2] ? optional : required).add(f[1]);
    rows.set(type, { required, optional });
  }
  return rows;
}

test("every event type of docs/protocol.md has an interface with the same fields", () => {
  const docs = protocolTypes();
  assert.ok(docs.size >= 20, `parsed ${docs.size} types`);
  const events = new Map();
  for (const [name, i] of interfaces()) {
    if (i.base !== "EventBase") continue;
    const t = /^"([^"]+)"$/.exec(i.fields.get("type")?.type ?? "");
    assert.ok(t, `${name} has no literal type`);
    events.set(t[1], { name, i });
  }
  assert.deepEqual([...events.keys()].sort(), [...docs.keys()].sort());
  for (const [type, row] of docs) {
    const { name, i } = events.get(type);
    const required = [...i.fields].filter(([k, f]) => k !== "type" && !f.optional).map(([k]) => k);
    const optional = [...i.fields].filter(([, f]) => f.optional).map(([k]) => k);
    assert.deepEqual(required.sort(), [...row.required].sort(), `${name}: required fields of ${type}`);
    assert.deepEqual(optional.sort(), [...row.optional].sort(), `${name}: optional fields of ${type}`);
    assert.match(dts, new RegExp(`\\| ${name}\\b|= ${name}\\b|\\n  \\| .*\\b${name}\\b`),
                 `${name} is not in the ProtocolEvent union`);
  }
  const union = /export type ProtocolEvent =([^;]*);/.exec(dts)[1];
  for (const { name } of events.values()) assert.match(union, new RegExp(`\\b${name}\\b`));
});

test("the common fields of an event are those of docs/protocol.md", () => {
  const base = interfaces().get("EventBase");
  const common = /Common fields, always present:\n\n([^]*?)\n\n/.exec(protocol)[1];
  const names = [...common.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]).filter((n) => n !== "type");
  assert.deepEqual([...base.fields.keys()].sort(), names.sort());
});

test("every request interface has the fields of its openapi request body", () => {
  let n = 0;
  for (const [name, i] of interfaces()) {
    if (!i.request) continue;
    n++;
    const [method, route] = i.request;
    const op = openapi.paths[route]?.[method.toLowerCase()];
    assert.ok(op, `${name}: no ${method} ${route} in openapi.json`);
    const schema = op.requestBody?.content?.["application/json"]?.schema;
    assert.ok(schema?.properties, `${name}: ${method} ${route} has no request body`);
    assert.deepEqual([...i.fields.keys()].sort(), Object.keys(schema.properties).sort(), name);
    for (const r of schema.required ?? []) assert.equal(i.fields.get(r).optional, false, `${name}.${r}`);
    for (const [k, prop] of Object.entries(schema.properties)) {
      if (prop.enum) {
        const lits = [...i.fields.get(k).type.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
        assert.deepEqual(lits.sort(), [...prop.enum].sort(), `${name}.${k}`);
      }
    }
  }
  // Every POST or PATCH with a body that the client calls has its interface.
  const typed = new Set([...interfaces().values()].filter((i) => i.request).map((i) => i.request.join(" ")));
  for (const [method, route] of Object.values(ROUTES)) {
    const op = openapi.paths[route][method.toLowerCase()];
    if (op.requestBody?.content?.["application/json"]?.schema?.properties) {
      assert.ok(typed.has(`${method} ${route}`), `no request interface for ${method} ${route}`);
    }
  }
  assert.ok(n >= 5);
});

test("ErrorCode is the list of codes of docs/server.md", () => {
  const list = /Clients switch on `code`: ([^]*?)\.\n/.exec(serverMd)[1];
  const documented = [...list.matchAll(/`(\w+)`/g)].map((m) => m[1]);
  const union = /export type ErrorCode =([^;]*);/.exec(dts)[1];
  const declared = [...union.matchAll(/"(\w+)"/g)].map((m) => m[1]);
  assert.deepEqual(declared.sort(), documented.sort());
});

test("ROUTES are routes of openapi.json, and cover every route but the console's, links and Slack's", () => {
  const used = new Set();
  for (const [name, [method, route]] of Object.entries(ROUTES)) {
    assert.ok(openapi.paths[route]?.[method.toLowerCase()], `${name}: ${method} ${route} is not in openapi.json`);
    used.add(`${method} ${route}`);
  }
  for (const [route, ops] of Object.entries(openapi.paths)) {
    if (route.startsWith("/v1/console/") || route.startsWith("/v1/links/") || route.startsWith("/v1/slack/")) continue;
    for (const method of Object.keys(ops)) {
      if (!["get", "post", "patch", "delete", "put"].includes(method)) continue;
      assert.ok(used.has(`${method.toUpperCase()} ${route}`), `the client has no method for ${method.toUpperCase()} ${route}`);
    }
  }
});

test("every method of ROUTES is declared in index.d.ts", () => {
  for (const name of Object.keys(ROUTES)) {
    assert.match(dts, new RegExp(`\\n  ${name}(<[^>]*>)?\\(`), `${name} is not declared`);
  }
});
